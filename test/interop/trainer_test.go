package interop

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"github.com/custom-scheduler/custom-scheduler/test/operatorenv"
)

func trainerGVR(resource string) schema.GroupVersionResource {
	return schema.GroupVersionResource{Group: "trainer.kubeflow.org", Version: "v1alpha1", Resource: resource}
}

var (
	trainJobGVR               = trainerGVR("trainjobs")
	clusterTrainingRuntimeGVR = trainerGVR("clustertrainingruntimes")
)

// startTrainer applies Trainer's CRDs from the module cache and runs Kubeflow Trainer v2.2.0's
// trainer-controller-manager out of a cluster as operatorenv runs it (the playground's --operator=trainer
// does the same), with its webhooks for real (TrainJob defaulting and validation, runtime validation):
// its cert rotator off (operatorenv.TrainerConfig), a certificate the test made (valid for 127.0.0.1)
// copied where the webhook server reads it, and the webhooks of its manifests called by URL on loopback
// (TrainJobs of namespace ns only). JobSet must be running (Trainer makes JobSets). It returns once the
// TrainJob controller has started.
func startTrainer(t *testing.T, ns string) *process {
	t.Helper()
	ctx := context.Background()
	bin := operatorBinary(t, "trainer-controller-manager")
	dir := moduleDir(t, "trainer", operatorenv.TrainerModule)
	crds, err := filepath.Glob(filepath.Join(dir, operatorenv.TrainerCRDs))
	if err != nil || len(crds) != 3 {
		t.Fatalf("Trainer's CRDs in %s: %v %v", dir, crds, err)
	}
	for _, f := range crds {
		applyFile(t, f)
	}

	certPEM, keyPEM, err := operatorenv.TrainerCert()
	must(t, err)
	manifests, err := os.ReadFile(filepath.Join(dir, operatorenv.TrainerWebhooks))
	must(t, err)
	webhookPort, healthPort := mustFreePort(t), mustFreePort(t)
	t.Cleanup(func() { _ = os.RemoveAll(operatorenv.TrainerCertDir) })
	webhooks, err := operatorenv.PrepareTrainer(ctx, client, certPEM, keyPEM, manifests, webhookPort, ns)
	t.Cleanup(func() { webhooks.Delete(context.Background(), client) })
	if err != nil {
		t.Fatalf("preparing Trainer: %v", err)
	}
	cfgPath := filepath.Join(scratchDir, "trainer-config.yaml")
	must(t, os.WriteFile(cfgPath, []byte(operatorenv.TrainerConfig(healthPort, webhookPort)), 0o600))

	p := startOperator(t, "trainer", bin, []string{"KUBECONFIG=" + kubeconfig}, operatorenv.TrainerArgs(cfgPath)...)
	waitReady(t, p, healthPort, webhookPort)
	waitFor(t, "Trainer's TrainJob controller to start", 120*time.Second, func(context.Context) (bool, error) {
		if p.exited() {
			return false, fmt.Errorf("trainer exited:\n%s", tail(p.logText(), 20))
		}
		return operatorenv.TrainerStarted([]byte(p.logText())), nil
	})
	return p
}

// applyRuntime server-side applies a ClusterTrainingRuntime (through Trainer's validating webhook) and
// deletes it when the test ends.
func applyRuntime(t *testing.T, manifest string) {
	t.Helper()
	objs := applyYAML(t, []byte(manifest))
	t.Cleanup(func() {
		for _, o := range objs {
			_ = dyn.Resource(clusterTrainingRuntimeGVR).Delete(context.Background(), o.GetName(), metav1.DeleteOptions{})
		}
	})
}

// TestTrainer runs Kubeflow Trainer v2.2.0 and JobSet v0.12.0 against custom-scheduler, with a
// ClusterTrainingRuntime that asks for coscheduling (examples/operators/trainer-runtime.yaml):
//   - a TrainJob of 4 nodes of 1 CPU and 1Gi: Trainer writes PodGroup <TrainJob> with minMember 4, the
//     runtime's scheduleTimeoutSeconds and minResources cpu 4, memory 4Gi (v2.2.0 counts the TrainJob's
//     resourcesPerNode; v2.0.0 left minResources empty), and the 4 node pods are bound whole;
//   - a node pod fails: JobSet's failurePolicy deletes the Jobs and creates them again (restart-attempt
//     1); the new attempt is bound whole, and no member of attempt 0 is left;
//   - a TrainJob too big for the nodes (5 nodes of 7 CPUs: each fits a node of 8, together 35 of 32)
//     holds nothing; its pods and its PodGroup say why with numbers;
//   - deleting a TrainJob deletes its JobSet, pods and PodGroup.
func TestTrainer(t *testing.T) {
	ns := testNamespace(t, "trainer")
	startJobSet(t, ns)
	startTrainer(t, ns)
	ctx := context.Background()
	applyRuntime(t, readExample(t, "trainer-runtime.yaml"))

	createTrainJob(t, ns, readExample(t, "trainer-trainjob.yaml"))
	pg := waitPodGroup(t, ns, "trainjob-gang")
	spec := specOf(t, pg)
	// Trainer v2.2.0 sums the node pods' requests with the TrainJob's resourcesPerNode applied (v2.0.0 took
	// the runtime template's, before it: with none there, minResources was empty).
	if spec.MinMember != 4 || len(spec.MinResources) != 2 || !quantityEqual(spec.MinResources["cpu"], "4") || !quantityEqual(spec.MinResources["memory"], "4Gi") ||
		spec.ScheduleTimeoutSeconds == nil || *spec.ScheduleTimeoutSeconds != 60 {
		t.Errorf("Trainer's PodGroup spec = %+v, want minMember 4, minResources cpu 4 and memory 4Gi, scheduleTimeoutSeconds 60", spec)
	}
	for _, p := range waitPlacedWhole(t, ns, "trainjob-gang", 4) {
		if p.Spec.SchedulerName != schedulerName {
			t.Errorf("pod %s has schedulerName %q, want %q", p.Name, p.Spec.SchedulerName, schedulerName)
		}
	}

	// A node fails: JobSet restarts every Job, and the new attempt's gang is whole again.
	pods, err := groupPods(ctx, ns, "trainjob-gang")
	if err != nil {
		t.Fatal(err)
	}
	markFailed(t, ns, pods[len(pods)-1].Name)
	waitJobSetRestarted(t, ns, "trainjob-gang", "trainjob-gang", 4, "1")
	waitPlacedWhole(t, ns, "trainjob-gang", 4)

	// Too big: 5 nodes of 7 CPUs.
	big := parseYAML(t, readExample(t, "trainer-trainjob.yaml"))
	big.SetName("trainjob-too-big")
	must(t, unstructured.SetNestedField(big.Object, int64(5), "spec", "trainer", "numNodes"))
	must(t, unstructured.SetNestedField(big.Object, "7", "spec", "trainer", "resourcesPerNode", "requests", "cpu"))
	createTrainJob(t, ns, toYAML(t, big))
	if got := specOf(t, waitPodGroup(t, ns, "trainjob-too-big")); got.MinMember != 5 {
		t.Errorf("the too-big TrainJob's PodGroup spec = %+v, want minMember 5", got)
	}
	t.Logf("a member of the too-big TrainJob says: %s", waitGangHeld(t, ns, "trainjob-too-big", 5))
	t.Logf("PodGroup trainjob-too-big: %s", waitGangInfeasible(t, ns, "trainjob-too-big", "35"))
	deleteJob(t, trainJobGVR, ns, "trainjob-too-big")

	deleteJob(t, trainJobGVR, ns, "trainjob-gang")
}

// startTrainerTest is the start of every Trainer test: a namespace watched by the gang invariant, JobSet
// and Trainer running, the runtimes applied.
func startTrainerTest(t *testing.T, prefix string, runtimes ...string) string {
	t.Helper()
	ns := testNamespace(t, prefix)
	startJobSet(t, ns)
	startTrainer(t, ns)
	for _, r := range runtimes {
		applyRuntime(t, r)
	}
	return ns
}

// TestTrainerMPI: a TrainJob on an MPI runtime with coscheduling (examples/operators/trainer-mpi-runtime.yaml:
// a launcher Job of 1 pod and a node Job of numNodes pods, runLauncherAsNode false): Trainer's PodGroup
// counts both (minMember 1 + 3 = 4, minResources the templates' requests), and the launcher and the nodes
// are bound whole; too many nodes (16 of 2 CPUs and the launcher's 1: 33 CPUs of 32) hold nothing.
func TestTrainerMPI(t *testing.T) {
	ns := startTrainerTest(t, "trainer-mpi", readExample(t, "trainer-mpi-runtime.yaml"))
	createTrainJob(t, ns, `apiVersion: trainer.kubeflow.org/v1alpha1
kind: TrainJob
metadata:
  name: mpi-gang
spec:
  runtimeRef:
    name: mpi-distributed-gang
  trainer:
    numNodes: 3
`)
	pg := waitPodGroup(t, ns, "mpi-gang")
	spec := specOf(t, pg)
	// Here the requests are in the runtime's templates, so Trainer sums them: 1 + 3×2 CPUs.
	if spec.MinMember != 4 || !quantityEqual(spec.MinResources["cpu"], "7") {
		t.Errorf("Trainer's PodGroup spec = %+v, want minMember 4 (launcher 1 + nodes 3), minResources cpu 7", spec)
	}
	roles := map[string]int{}
	for _, p := range waitPlacedWhole(t, ns, "mpi-gang", 4) {
		roles[p.Labels["jobset.sigs.k8s.io/replicatedjob-name"]]++
	}
	if roles["launcher"] != 1 || roles["node"] != 3 {
		t.Errorf("bound members by replicated job = %v, want launcher 1, node 3", roles)
	}

	createTrainJob(t, ns, `apiVersion: trainer.kubeflow.org/v1alpha1
kind: TrainJob
metadata:
  name: mpi-too-big
spec:
  runtimeRef:
    name: mpi-distributed-gang
  trainer:
    numNodes: 16
`)
	t.Logf("a member of the too-big MPI TrainJob says: %s", waitGangHeld(t, ns, "mpi-too-big", 17))
	t.Logf("PodGroup mpi-too-big: %s", waitGangInfeasible(t, ns, "mpi-too-big", "33"))
	deleteJob(t, trainJobGVR, ns, "mpi-too-big")
	deleteJob(t, trainJobGVR, ns, "mpi-gang")
}

// initializerRuntime is a runtime shaped like Trainer v2.0.0's torchtune runtimes: a dataset-initializer,
// then (dependsOn Complete) a model-initializer, then the trainer nodes, with coscheduling (v2.2.0's run the
// two initializers side by side, then the nodes: the same deadlock with two pods alive). Volumes are left
// out (no storage in these tests).
const initializerRuntime = `apiVersion: trainer.kubeflow.org/v1alpha1
kind: ClusterTrainingRuntime
metadata:
  name: torch-initializers-gang
spec:
  mlPolicy:
    numNodes: 1
    torch: {}
  podGroupPolicy:
    coscheduling:
      scheduleTimeoutSeconds: 60
  template:
    spec:
      replicatedJobs:
        - name: dataset-initializer
          template:
            metadata:
              labels:
                trainer.kubeflow.org/trainjob-ancestor-step: dataset-initializer
            spec:
              template:
                spec:
                  schedulerName: custom-scheduler
                  containers:
                    - name: dataset-initializer
                      image: ghcr.io/kubeflow/trainer/dataset-initializer
        - name: model-initializer
          dependsOn:
            - name: dataset-initializer
              status: Complete
          template:
            metadata:
              labels:
                trainer.kubeflow.org/trainjob-ancestor-step: model-initializer
            spec:
              template:
                spec:
                  schedulerName: custom-scheduler
                  containers:
                    - name: model-initializer
                      image: ghcr.io/kubeflow/trainer/model-initializer
        - name: node
          dependsOn:
            - name: model-initializer
              status: Complete
          template:
            metadata:
              labels:
                trainer.kubeflow.org/trainjob-ancestor-step: trainer
            spec:
              template:
                spec:
                  schedulerName: custom-scheduler
                  containers:
                    - name: node
                      image: ghcr.io/kubeflow/trainer/torchtune-trainer
`

// initContainerRuntime is the fix docs/operators.md gives for initializerRuntime: the initializers run as
// init containers of the node pods (one replicated job, no dependsOn), so the gang is the nodes alone.
const initContainerRuntime = `apiVersion: trainer.kubeflow.org/v1alpha1
kind: ClusterTrainingRuntime
metadata:
  name: torch-initcontainers-gang
spec:
  mlPolicy:
    numNodes: 1
    torch: {}
  podGroupPolicy:
    coscheduling:
      scheduleTimeoutSeconds: 60
  template:
    spec:
      replicatedJobs:
        - name: node
          template:
            metadata:
              labels:
                trainer.kubeflow.org/trainjob-ancestor-step: trainer
            spec:
              template:
                spec:
                  schedulerName: custom-scheduler
                  initContainers:
                    - name: dataset-initializer
                      image: ghcr.io/kubeflow/trainer/dataset-initializer
                    - name: model-initializer
                      image: ghcr.io/kubeflow/trainer/model-initializer
                  containers:
                    - name: node
                      image: ghcr.io/kubeflow/trainer/torchtune-trainer
`

// TestTrainerInitializers: a runtime whose replicated jobs run one after another (dependsOn, as in
// Trainer's torchtune runtimes) with coscheduling. Trainer's PodGroup counts every replicated job (minMember
// 1 + 1 + 2 = 4), but JobSet creates the model-initializer's and the nodes' Jobs only once the step before
// completed: the dataset-initializer's pod is alone, 1 of minMember 4, and waits for members that never come
// (WaitingForMembers); nothing is ever bound and the TrainJob never starts. The fix (docs/operators.md): the
// initializers as init containers of the node pods: the gang is the 2 nodes, bound whole.
func TestTrainerInitializers(t *testing.T) {
	ns := startTrainerTest(t, "trainer-init", initializerRuntime, initContainerRuntime)
	ctx := context.Background()
	createTrainJob(t, ns, `apiVersion: trainer.kubeflow.org/v1alpha1
kind: TrainJob
metadata:
  name: init-gang
spec:
  runtimeRef:
    name: torch-initializers-gang
  trainer:
    numNodes: 2
    resourcesPerNode:
      requests:
        cpu: "1"
`)
	if got := specOf(t, waitPodGroup(t, ns, "init-gang")); got.MinMember != 4 {
		t.Errorf("Trainer's PodGroup minMember = %d, want 4 (dataset-initializer 1 + model-initializer 1 + nodes 2)", got.MinMember)
	}
	// The dataset-initializer's pod is alone: our plugin holds it back (no attempt, no resources held) and
	// says why, on the pod (event) and on the PodGroup (condition WaitingForMembers).
	var initPod string
	waitFor(t, "the dataset-initializer's pod", 60*time.Second, func(ctx context.Context) (bool, error) {
		pods, err := groupPods(ctx, ns, "init-gang")
		if len(pods) > 0 {
			initPod = pods[0].Name
		}
		return len(pods) > 0, err
	})
	t.Logf("the dataset-initializer's pod says: %s", waitEvent(t, ns, initPod, "WaitingForMembers", "1 of minMember 4 live pods", 60*time.Second).Message)
	waitFor(t, "PodGroup init-gang to say WaitingForMembers", 60*time.Second, func(ctx context.Context) (bool, error) {
		return strings.HasPrefix(podGroupReason(t, ns, "init-gang"), "WaitingForMembers: 1 of minMember 4"), nil
	})
	t.Logf("PodGroup init-gang: %s", podGroupReason(t, ns, "init-gang"))
	// kubectl gang explain says the same.
	gang := filepath.Join(filepath.Dir(os.Getenv("CUSTOM_SCHEDULER_BINARY")), "kubectl-gang")
	if os.Getenv("CUSTOM_SCHEDULER_BINARY") == "" {
		gang = filepath.Join(repoRoot, "bin", "kubectl-gang")
	}
	out, err := exec.Command(gang, "explain", "init-gang", "-n", ns, "--kubeconfig="+kubeconfig).CombinedOutput()
	if err != nil || !strings.Contains(string(out), "WaitingForMembers") || !strings.Contains(string(out), "1 of minMember 4") {
		t.Errorf("kubectl gang explain init-gang (%v) does not say WaitingForMembers, 1 of minMember 4:\n%s", err, out)
	}
	t.Logf("kubectl gang explain init-gang:\n%s", out)
	// It stays so: the later steps' Jobs are never created, nothing is bound.
	time.Sleep(5 * time.Second)
	pods, err := groupPods(ctx, ns, "init-gang")
	if err != nil {
		t.Fatal(err)
	}
	if len(pods) != 1 || pods[0].Spec.NodeName != "" || pods[0].Labels["jobset.sigs.k8s.io/replicatedjob-name"] != "dataset-initializer" {
		for _, p := range pods {
			t.Errorf("pod %s of init-gang (node %q): want the dataset-initializer alone, unbound", p.Name, p.Spec.NodeName)
		}
		t.Errorf("init-gang has %d pods, want 1", len(pods))
	}
	deleteJob(t, trainJobGVR, ns, "init-gang")

	// The fix: the initializers as init containers; the gang is the nodes.
	createTrainJob(t, ns, `apiVersion: trainer.kubeflow.org/v1alpha1
kind: TrainJob
metadata:
  name: initc-gang
spec:
  runtimeRef:
    name: torch-initcontainers-gang
  trainer:
    numNodes: 2
    resourcesPerNode:
      requests:
        cpu: "1"
`)
	if got := specOf(t, waitPodGroup(t, ns, "initc-gang")); got.MinMember != 2 {
		t.Errorf("Trainer's PodGroup minMember = %d, want 2", got.MinMember)
	}
	waitPlacedWhole(t, ns, "initc-gang", 2)
	deleteJob(t, trainJobGVR, ns, "initc-gang")
}

// podGroupReason is the PodGroup's Scheduled condition as "Reason: message".
func podGroupReason(t *testing.T, ns, name string) string {
	t.Helper()
	pg, err := getPodGroup(context.Background(), ns, name)
	if err != nil {
		t.Fatal(err)
	}
	conds, _, _ := unstructured.NestedSlice(pg.Object, "status", "conditions")
	for _, c := range conds {
		if m, _ := c.(map[string]any); m["type"] == "Scheduled" {
			return fmt.Sprintf("%v: %v", m["reason"], m["message"])
		}
	}
	return "no Scheduled condition"
}

// TestTrainerSuspend: a TrainJob created suspended gets its PodGroup but no pod (JobSet suspended); resumed,
// its 4 nodes are bound whole; suspended again, its pods are deleted (the gang is released whole); resumed,
// bound whole again, its PodGroup counting the 4 new members only; deleted, its JobSet, pods and PodGroup
// go with it.
func TestTrainerSuspend(t *testing.T) {
	ns := startTrainerTest(t, "trainer-suspend", readExample(t, "trainer-runtime.yaml"))
	ctx := context.Background()
	tj := parseYAML(t, readExample(t, "trainer-trainjob.yaml"))
	tj.SetName("suspended-gang")
	must(t, unstructured.SetNestedField(tj.Object, true, "spec", "suspend"))
	createTrainJob(t, ns, toYAML(t, tj))
	waitPodGroup(t, ns, "suspended-gang")
	waitFor(t, "the JobSet of the suspended TrainJob", 60*time.Second, func(ctx context.Context) (bool, error) {
		js, err := dyn.Resource(jobSetGVR).Namespace(ns).Get(ctx, "suspended-gang", metav1.GetOptions{})
		if err != nil {
			return false, ignoreNotFound(err)
		}
		s, _, _ := unstructured.NestedBool(js.Object, "spec", "suspend")
		return s, nil
	})
	time.Sleep(3 * time.Second)
	if pods, err := groupPods(ctx, ns, "suspended-gang"); err != nil || len(pods) != 0 {
		t.Errorf("a suspended TrainJob has %d pods (%v), want none", len(pods), err)
	}
	setSuspend(t, ns, "suspended-gang", false)
	waitPlacedWhole(t, ns, "suspended-gang", 4)
	setSuspend(t, ns, "suspended-gang", true)
	waitNoPods(t, ns, "suspended-gang")
	// No check of the PodGroup while suspended: with no pod of the group left, the status writer leaves
	// the status as it was (status.Updater.sync: a group without pods may be another profile's), so it
	// still says QuorumReached, 4 scheduled. A scheduler that keeps counting members of the run that went
	// is looked for after the resume instead: waitPlacedWhole wants exactly "4 of minMember 4".
	setSuspend(t, ns, "suspended-gang", false)
	waitPlacedWhole(t, ns, "suspended-gang", 4)
	deleteJob(t, trainJobGVR, ns, "suspended-gang")
}

func setSuspend(t *testing.T, ns, name string, suspend bool) {
	t.Helper()
	patch := fmt.Sprintf(`{"spec":{"suspend":%v}}`, suspend)
	if _, err := dyn.Resource(trainJobGVR).Namespace(ns).Patch(context.Background(), name, types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
		t.Fatalf("setting suspend %v on TrainJob %s/%s: %v", suspend, ns, name, err)
	}
}

// createTrainJob creates a TrainJob, retrying while Trainer's webhook does not yet see the runtime just
// applied ("specified clusterTrainingRuntime must be created before the TrainJob is created": it reads
// runtimes from its informer's cache).
func createTrainJob(t *testing.T, ns, manifest string) {
	t.Helper()
	obj := parseYAML(t, manifest)
	var lastErr error
	if err := poll(context.Background(), 30*time.Second, func(ctx context.Context) (bool, error) {
		_, lastErr = dyn.Resource(trainJobGVR).Namespace(ns).Create(ctx, obj.DeepCopy(), metav1.CreateOptions{})
		if lastErr != nil && strings.Contains(lastErr.Error(), "must be created before the TrainJob is created") {
			return false, nil
		}
		return lastErr == nil, lastErr
	}); err != nil {
		t.Fatalf("creating TrainJob %s/%s: %v (last: %v)", ns, obj.GetName(), err, lastErr)
	}
}
