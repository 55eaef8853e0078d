package interop

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/yaml"

	"github.com/custom-scheduler/custom-scheduler/test/operatorenv"
)

var (
	jobSetGVR = schema.GroupVersionResource{Group: "jobset.x-k8s.io", Version: "v1alpha2", Resource: "jobsets"}
	jobGVR    = schema.GroupVersionResource{Group: "batch", Version: "v1", Resource: "jobs"}
)

const (
	jobSetRestartLabel = "jobset.sigs.k8s.io/restart-attempt"
	jobSetNameLabel    = "jobset.sigs.k8s.io/jobset-name"
)

// startJobSet applies JobSet's CRD from the module cache (not deleted at the end: the Trainer test uses
// it too, and JobSet's finalizers would hold it) and runs the JobSet controller v0.12.0 out of a cluster
// as operatorenv runs it (the playground's --operator=jobset does the same): internal certificate
// management off, a self-signed serving certificate in its webhook certDir, its webhooks
// (config/components/webhook/manifests.yaml: JobSet defaulting and validation, the pod webhooks of
// exclusive placement) registered as its manifests register them but called by URL on loopback, trusted
// by the test's CA, for namespace ns only. It returns once JobSet is ready (/readyz) and its webhook port
// answers.
func startJobSet(t *testing.T, ns string) *process {
	t.Helper()
	return startWebhookOperator(t, ns, "jobset", operatorenv.JobSetModule, operatorenv.JobSetCRD, operatorenv.JobSetWebhooks, operatorenv.JobSetConfig,
		"--metrics-bind-address=0")
}

// startWebhookOperator applies the CRD of a kubebuilder operator (name, its binary and tools module;
// module, its Go module) from the module cache and runs it as startJobSet says: its --config from
// config (health and webhook ports, the certificate's folder) and args, its webhooks registered for
// namespace ns on loopback, trusted by a self-signed CA.
func startWebhookOperator(t *testing.T, ns, name, module, crd, webhooks string, config func(healthPort, webhookPort int, certDir string) string, args ...string) *process {
	t.Helper()
	bin := operatorBinary(t, name)
	dir := moduleDir(t, name, module)
	applyFile(t, filepath.Join(dir, crd))

	certDir := filepath.Join(scratchDir, name+"-webhook-certs")
	caPEM, keyPEM, err := operatorenv.SelfSignedCA([]string{name + "-interop", "localhost"}, 24*time.Hour)
	must(t, err)
	must(t, operatorenv.WriteKeyPair(certDir, caPEM, keyPEM))
	webhookPort, healthPort := mustFreePort(t), mustFreePort(t)
	cfgPath := filepath.Join(scratchDir, name+"-config.yaml")
	must(t, os.WriteFile(cfgPath, []byte(config(healthPort, webhookPort, certDir)), 0o600))
	p := startOperator(t, name, bin, []string{"KUBECONFIG=" + kubeconfig}, append([]string{"--config=" + cfgPath}, args...)...)
	waitReady(t, p, healthPort, webhookPort)
	registerWebhooks(t, filepath.Join(dir, webhooks), name+"-interop-"+ns, webhookPort, caPEM, ns)
	return p
}

// waitReady waits for an operator's /readyz on healthPort and for its webhook port to accept connections.
func waitReady(t *testing.T, p *process, healthPort, webhookPort int) {
	t.Helper()
	waitFor(t, p.name+" to be ready", 180*time.Second, func(ctx context.Context) (bool, error) {
		if p.exited() {
			return false, fmt.Errorf("%s exited:\n%s", p.name, tail(p.logText(), 20))
		}
		return operatorenv.Ready(healthPort, webhookPort), nil
	})
}

// registerWebhooks creates the webhook configurations of an operator's manifests (a kubebuilder
// manifests.yaml: service references) as operatorenv.LoopbackWebhooks rewrites them: named name (with
// "-mutating"/"-validating" added when the file has both kinds), each webhook called by URL
// https://127.0.0.1:port/<path> and trusting caPEM, namespaced resources only in namespace ns. They are
// deleted when the test ends, before the operator stops (cleanups run last first).
func registerWebhooks(t *testing.T, path, name string, port int, caPEM []byte, ns string) {
	t.Helper()
	data, err := os.ReadFile(path)
	must(t, err)
	w, err := operatorenv.LoopbackWebhooks(data, name, port, caPEM, ns)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	t.Cleanup(func() { w.Delete(context.Background(), client) })
	if err := w.Create(context.Background(), client); err != nil {
		t.Fatalf("registering the webhooks of %s: %v", path, err)
	}
}

// TestJobSet runs the JobSet controller v0.12.0 (with its webhooks) against custom-scheduler, with our
// PodGroup in the JobSet's pod templates (no Trainer):
//   - a JobSet of two replicated jobs (driver 1 Job × 1 pod, workers 2 Jobs × 2 pods) with one PodGroup
//     of minMember 5 is bound whole, every member naming custom-scheduler;
//   - a worker pod fails (phase Failed, exit code 1; its Job's backoffLimit 0): JobSet's failurePolicy
//     deletes every Job and creates them again (restart-attempt 1); the new attempt's 5 pods are bound
//     whole, and no pod of attempt 0 is left;
//   - the same JobSet too big for the nodes (workers of 6 CPUs: each fits a node of 8, the 7 together
//     need 37 of the 32 CPUs) holds nothing, its pods and PodGroup say why;
//   - deleting the JobSet deletes its Jobs and pods (the PodGroup is the user's and stays).
func TestJobSet(t *testing.T) {
	ns := testNamespace(t, "jobset")
	startJobSet(t, ns)
	ctx := context.Background()

	objs := splitYAML(t, readExample(t, "jobset-jobset.yaml"))
	createObject(t, podGroupGVR, ns, objs[0])
	createObject(t, jobSetGVR, ns, objs[1])
	for _, p := range waitPlacedWhole(t, ns, "jobset-gang", 5) {
		if p.Spec.SchedulerName != schedulerName {
			t.Errorf("pod %s has schedulerName %q, want %q", p.Name, p.Spec.SchedulerName, schedulerName)
		}
	}

	// A worker fails: JobSet restarts the whole set, and the new attempt's gang is whole again.
	pods, err := groupPods(ctx, ns, "jobset-gang")
	if err != nil {
		t.Fatal(err)
	}
	var victim string
	for _, p := range pods {
		if strings.Contains(p.Name, "-workers-") && live(&p) {
			victim = p.Name
			break
		}
	}
	markFailed(t, ns, victim)
	waitJobSetRestarted(t, ns, "jobset-gang", "jobset-gang", 5, "1")
	waitPlacedWhole(t, ns, "jobset-gang", 5)

	// Too big: workers of 6 CPUs, 3 pods per Job (1 + 2×3 = 7 members, 37 CPUs of 32; each fits a node).
	big := parseYAML(t, objs[1])
	big.SetName("jobset-too-big")
	setJobSetPods(t, big, "workers", 3, "6", "jobset-too-big")
	setJobSetPods(t, big, "driver", 1, "1", "jobset-too-big")
	pg := parseYAML(t, objs[0])
	pg.SetName("jobset-too-big")
	if err := unstructured.SetNestedField(pg.Object, int64(7), "spec", "minMember"); err != nil {
		t.Fatal(err)
	}
	createObject(t, podGroupGVR, ns, toYAML(t, pg))
	createObject(t, jobSetGVR, ns, toYAML(t, big))
	t.Logf("a member of the too-big JobSet says: %s", waitGangHeld(t, ns, "jobset-too-big", 7))
	t.Logf("PodGroup jobset-too-big: %s", waitGangInfeasible(t, ns, "jobset-too-big", "37"))

	for _, name := range []string{"jobset-too-big", "jobset-gang"} {
		if err := dyn.Resource(jobSetGVR).Namespace(ns).Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		waitNoPods(t, ns, name)
	}
}

// waitJobSetRestarted waits until the JobSet's pods of restart attempt `attempt` (want of them, in the
// group) are all bound and live, and no live pod of an earlier attempt is left.
func waitJobSetRestarted(t *testing.T, ns, jobSet, group string, want int, attempt string) {
	t.Helper()
	waitFor(t, fmt.Sprintf("JobSet %s to restart (attempt %s) and its %d new pods to be bound whole", jobSet, attempt, want), 180*time.Second, func(ctx context.Context) (bool, error) {
		all, err := groupPods(ctx, ns, group)
		if err != nil {
			return false, err
		}
		bound, old := 0, 0
		for _, p := range all {
			if !live(&p) || p.Labels[jobSetNameLabel] != jobSet {
				continue
			}
			if p.Labels[jobSetRestartLabel] != attempt {
				old++
				continue
			}
			if p.Spec.NodeName != "" {
				bound++
			}
		}
		return bound == want && old == 0, nil
	})
}

// setJobSetPods sets a replicated job's pods per Job, its first container's CPU request and the pod
// template's PodGroup label.
func setJobSetPods(t *testing.T, js *unstructured.Unstructured, replicatedJob string, pods int64, cpu, group string) {
	t.Helper()
	rjs, _, _ := unstructured.NestedSlice(js.Object, "spec", "replicatedJobs")
	found := false
	for _, r := range rjs {
		rj := r.(map[string]any)
		if rj["name"] != replicatedJob {
			continue
		}
		found = true
		must(t, unstructured.SetNestedField(rj, pods, "template", "spec", "parallelism"))
		must(t, unstructured.SetNestedField(rj, pods, "template", "spec", "completions"))
		must(t, unstructured.SetNestedField(rj, group, "template", "spec", "template", "metadata", "labels", podGroupLabel))
		containers, _, _ := unstructured.NestedSlice(rj, "template", "spec", "template", "spec", "containers")
		c := containers[0].(map[string]any)
		c["resources"] = map[string]any{"requests": map[string]any{"cpu": cpu, "memory": "1Gi"}}
		must(t, unstructured.SetNestedSlice(rj, containers, "template", "spec", "template", "spec", "containers"))
	}
	if !found {
		t.Fatalf("no replicated job %q", replicatedJob)
	}
	must(t, unstructured.SetNestedSlice(js.Object, rjs, "spec", "replicatedJobs"))
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// splitYAML splits a multi-document YAML file into its documents.
func splitYAML(t *testing.T, data string) []string {
	t.Helper()
	var docs []string
	for _, d := range strings.Split(data, "\n---") {
		obj := map[string]any{}
		if err := yaml.Unmarshal([]byte(d), &obj); err != nil {
			t.Fatal(err)
		}
		if len(obj) > 0 {
			docs = append(docs, d)
		}
	}
	return docs
}

// waitGangInfeasible waits for the PodGroup's Scheduled condition to say GangInfeasible, checks its
// status.shortfall counts wantRequested CPUs requested in total (and more than are free), and returns the
// condition's message with the shortfall's numbers.
func waitGangInfeasible(t *testing.T, ns, name, wantRequested string) string {
	t.Helper()
	var msg string
	var shortfall map[string]any
	waitFor(t, "PodGroup "+ns+"/"+name+" to say GangInfeasible", 60*time.Second, func(ctx context.Context) (bool, error) {
		pg, err := getPodGroup(ctx, ns, name)
		if err != nil {
			return false, ignoreNotFound(err)
		}
		conds, _, _ := unstructured.NestedSlice(pg.Object, "status", "conditions")
		for _, c := range conds {
			m, _ := c.(map[string]any)
			if m["type"] == "Scheduled" && m["reason"] == "GangInfeasible" {
				msg, _ = m["message"].(string)
			}
		}
		shortfall, _, _ = unstructured.NestedMap(pg.Object, "status", "shortfall")
		return msg != "" && shortfall != nil, nil
	})
	res, _ := shortfall["resources"].([]any)
	var cpu map[string]any
	for _, r := range res {
		if m, _ := r.(map[string]any); m["name"] == "cpu" {
			cpu = m
		}
	}
	if cpu == nil || !quantityEqual(fmt.Sprint(cpu["requested"]), wantRequested) {
		t.Errorf("PodGroup %s/%s: status.shortfall = %v, want cpu requested %s", ns, name, shortfall, wantRequested)
	}
	return fmt.Sprintf("GangInfeasible: %s; shortfall: needed %v, placeable %v, cpu %v", msg, shortfall["needed"], shortfall["placeable"], cpu)
}

// waitPlacedWhole waits until the group's want live pods are all bound (waitGangBound) and its PodGroup
// (of minMember want) says so as our plugin writes it: condition Scheduled True with reason QuorumReached
// and the message "<want> of minMember <want> live members are bound or binding" (the scheduler's own
// count of the members reserved or bound), status.scheduled want (the live members bound). A scheduler
// without our plugin binds the pods of a gang that fits, too, but writes no such status (shown: with the
// PodGroup label ignored, every member is bound and this wait fails). The counts are exact, so that a
// status or a scheduler still counting members no longer live (a failed pod beside its replacement, the
// pods of a JobSet's earlier attempt) would fail it (meant to catch that; not yet shown failing on such a
// build).
func waitPlacedWhole(t *testing.T, ns, group string, want int) []v1.Pod {
	t.Helper()
	pods := waitGangBound(t, ns, group, want)
	wantReason := fmt.Sprintf("QuorumReached: %d of minMember %d live members are bound or binding", want, want)
	var last string
	var scheduled int64
	if err := poll(context.Background(), 30*time.Second, func(ctx context.Context) (bool, error) {
		pg, err := getPodGroup(ctx, ns, group)
		if err != nil {
			return false, err
		}
		scheduled, _, _ = unstructured.NestedInt64(pg.Object, "status", "scheduled")
		last = podGroupReason(t, ns, group)
		return scheduled == int64(want) && strings.HasPrefix(last, wantReason), nil
	}); err != nil {
		t.Fatalf("waiting 30s for PodGroup %s/%s to say %q with %d scheduled: %v (last: scheduled %d, %s)", ns, group, wantReason, want, err, scheduled, last)
	}
	return pods
}

// rackLabel is the node label of the exclusive-topology test: node-0 and node-1 in rack r0, node-2 and
// node-3 in r1 (8 CPUs each: 16 per rack).
const rackLabel = "example.com/rack"

// labelRacks puts the shared nodes in two racks for one test and removes the label when it ends.
func labelRacks(t *testing.T) {
	t.Helper()
	ctx := context.Background()
	set := func(node, value string) {
		patch := fmt.Sprintf(`{"metadata":{"labels":{%q:%s}}}`, rackLabel, value)
		if _, err := client.CoreV1().Nodes().Patch(ctx, node, types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
			t.Fatalf("labelling node %s: %v", node, err)
		}
	}
	for i := range nodeCount {
		node := fmt.Sprintf("node-%d", i)
		set(node, fmt.Sprintf("%q", fmt.Sprintf("r%d", i/2)))
		t.Cleanup(func() { set(node, "null") })
	}
}

// rackJobSet is a JobSet of two replicated jobs, each 1 Job of 2 pods of 6 CPUs and a gang of its own
// (PodGroup <name>-a and <name>-b, required to one rack: 2×6 CPUs fit one rack of 16, not two gangs), with
// annotations on the JobSet.
func rackJobSet(name string, annotations string) string {
	rj := func(suffix string) string {
		return fmt.Sprintf(`  - name: %[1]s
    replicas: 1
    template:
      spec:
        parallelism: 2
        completions: 2
        backoffLimit: 0
        template:
          metadata:
            labels:
              scheduling.x-k8s.io/pod-group: %[2]s-%[1]s
          spec:
            schedulerName: custom-scheduler
            restartPolicy: Never
            containers:
            - name: c
              image: busybox
              resources:
                requests: {cpu: "6", memory: 1Gi}
`, suffix, name)
	}
	return fmt.Sprintf("apiVersion: jobset.x-k8s.io/v1alpha2\nkind: JobSet\nmetadata:\n  name: %s\n  annotations: %s\nspec:\n  replicatedJobs:\n%s%s", name, annotations, rj("a"), rj("b"))
}

func rackPodGroup(name string) string {
	return fmt.Sprintf("apiVersion: scheduling.x-k8s.io/v1alpha1\nkind: PodGroup\nmetadata:\n  name: %s\nspec:\n  minMember: 2\n  topologyPolicy:\n    required: %s\n", name, rackLabel)
}

// TestJobSetExclusiveTopology: JobSet's exclusive placement (alpha.jobset.sigs.k8s.io/exclusive-topology:
// one Job per rack) with a gang per Job required to one rack. JobSet's pod webhook admits a Job's follower
// pods only once its leader pod (completion index 0) is scheduled (v0.12.0, as v0.8.2: "follower pod node selector not
// set"), and our plugin holds the leader until its gang's members exist: the leaders wait
// (WaitingForMembers, 1 of minMember 2), the followers are refused, nothing is bound, for ever. Without the annotation, our required rack policy alone gives one gang per
// rack here (each gang fills most of a rack): both gangs bound whole, each in one rack, in different racks.
func TestJobSetExclusiveTopology(t *testing.T) {
	ns := testNamespace(t, "jobset-excl")
	labelRacks(t)
	startJobSet(t, ns)
	ctx := context.Background()

	for _, g := range []string{"excl-a", "excl-b"} {
		createObject(t, podGroupGVR, ns, rackPodGroup(g))
	}
	createObject(t, jobSetGVR, ns, rackJobSet("excl", fmt.Sprintf("{alpha.jobset.sigs.k8s.io/exclusive-topology: %s}", rackLabel)))
	for _, g := range []string{"excl-a", "excl-b"} {
		var leader string
		waitFor(t, "the leader pod of "+g, 60*time.Second, func(ctx context.Context) (bool, error) {
			pods, err := groupPods(ctx, ns, g)
			if len(pods) > 0 {
				leader = pods[0].Name
			}
			return len(pods) > 0, err
		})
		t.Logf("leader %s says: %s", leader, waitEvent(t, ns, leader, "WaitingForMembers", "1 of minMember 2 live pods", 60*time.Second).Message)
	}
	// The Job controller's follower pods are refused by JobSet's pod webhook (its mutating webhook sets the
	// follower's rack node selector only from a scheduled leader).
	t.Logf("Job excl-a-0: %s", waitEvent(t, ns, "excl-a-0", "FailedCreate", `admission webhook "vpod.kb.io" denied the request`, 60*time.Second).Message)
	time.Sleep(5 * time.Second)
	for _, g := range []string{"excl-a", "excl-b"} {
		pods, err := groupPods(ctx, ns, g)
		if err != nil {
			t.Fatal(err)
		}
		if len(pods) != 1 || pods[0].Spec.NodeName != "" {
			t.Errorf("gang %s has %d pods (want its leader alone, unbound)", g, len(pods))
		}
	}
	if err := dyn.Resource(jobSetGVR).Namespace(ns).Delete(ctx, "excl", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitNoPods(t, ns, "excl-a")
	waitNoPods(t, ns, "excl-b")

	// Our required rack policy instead: each gang in one rack, the two in different racks.
	for _, g := range []string{"rack-a", "rack-b"} {
		createObject(t, podGroupGVR, ns, rackPodGroup(g))
	}
	createObject(t, jobSetGVR, ns, rackJobSet("rack", "{}"))
	racks := map[string]string{}
	for _, g := range []string{"rack-a", "rack-b"} {
		seen := map[string]bool{}
		for _, p := range waitPlacedWhole(t, ns, g, 2) {
			node, err := client.CoreV1().Nodes().Get(ctx, p.Spec.NodeName, metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			seen[node.Labels[rackLabel]] = true
			racks[g] = node.Labels[rackLabel]
		}
		if len(seen) != 1 {
			t.Errorf("gang %s spans racks %v, want one", g, seen)
		}
	}
	if racks["rack-a"] == racks["rack-b"] {
		t.Errorf("both gangs in rack %s, want one gang per rack", racks["rack-a"])
	}
}
