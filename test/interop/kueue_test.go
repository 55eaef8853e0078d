package interop

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	batchv1 "k8s.io/api/batch/v1"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
)

const (
	kueueQueueLabel = "kueue.x-k8s.io/queue-name"
	kueueGate       = "kueue.x-k8s.io/admission"
	// kueueMetricsCertDir is where Kueue v0.17.0 reads its metrics serving certificate when its internal
	// certificate management is off (hard-coded in cmd/kueue/main.go).
	kueueMetricsCertDir = "/etc/kueue/metrics/certs"
	// kueuePodsReadyTimeout is waitForPodsReady.timeout: an admitted workload whose pods are not all Ready
	// by then is evicted and requeued.
	kueuePodsReadyTimeout = 20 * time.Second
)

func kueueGVR(resource string) schema.GroupVersionResource {
	return schema.GroupVersionResource{Group: "kueue.x-k8s.io", Version: "v1beta2", Resource: resource}
}

var (
	workloadGVR = kueueGVR("workloads")
	// kindGVR maps the kinds of the Kueue examples to their resources (and whether they are namespaced).
	kindGVR = map[string]struct {
		gvr        schema.GroupVersionResource
		namespaced bool
	}{
		"ResourceFlavor": {kueueGVR("resourceflavors"), false},
		"ClusterQueue":   {kueueGVR("clusterqueues"), false},
		"LocalQueue":     {kueueGVR("localqueues"), true},
		"PodGroup":       {podGroupGVR, true},
		"Job":            {schema.GroupVersionResource{Group: "batch", Version: "v1", Resource: "jobs"}, true},
	}
)

// startKueue applies Kueue's CRDs from the module cache (server-side, waiting for each to be
// Established) and runs Kueue v0.17.0 out of a cluster: internal certificate management off, a
// self-signed serving certificate in its webhook.certDir, its metrics certificate at the hard-coded
// kueueMetricsCertDir (written there by the test when missing, removed afterwards), no leader election,
// the on-demand visibility server off (it wants in-cluster authentication), KUBECONFIG. Its pod webhook
// (mpod.kb.io: the scheduling gate on plain pods) is registered with a MutatingWebhookConfiguration that
// calls the Kueue process on loopback, trusted by the test's CA, for namespace ns only; no other Kueue
// webhook is registered, so Jobs are created suspended by the test itself.
func startKueue(t *testing.T, ns string) {
	t.Helper()
	bin := operatorBinary(t, "kueue")
	dir := moduleDir(t, "kueue", "sigs.k8s.io/kueue")
	crds, err := filepath.Glob(filepath.Join(dir, "config", "components", "crd", "bases", "*.yaml"))
	if err != nil || len(crds) == 0 {
		t.Fatalf("Kueue's CRDs in %s: %v", dir, err)
	}
	// Not deleted at the end: Kueue's finalizers on its objects would hold the CRDs' deletion once it
	// stopped, and no other test installs CRDs of these names.
	for _, f := range crds {
		applyFile(t, f)
	}
	ctx := context.Background()
	if _, err := client.CoreV1().Namespaces().Create(ctx, &v1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "kueue-system"}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}

	certDir := filepath.Join(scratchDir, "kueue-webhook-certs")
	caPEM := writeServingCert(t, certDir)
	if _, err := os.Stat(filepath.Join(kueueMetricsCertDir, "tls.crt")); err != nil {
		if err := os.MkdirAll(kueueMetricsCertDir, 0o755); err != nil {
			t.Fatalf("Kueue reads its metrics certificate from %s (hard-coded) when its cert management is off: %v", kueueMetricsCertDir, err)
		}
		writeServingCert(t, kueueMetricsCertDir)
		t.Cleanup(func() {
			_ = os.Remove(filepath.Join(kueueMetricsCertDir, "tls.crt"))
			_ = os.Remove(filepath.Join(kueueMetricsCertDir, "tls.key"))
		})
	}
	webhookPort, healthPort := mustFreePort(t), mustFreePort(t)
	cfg := fmt.Sprintf(`apiVersion: config.kueue.x-k8s.io/v1beta2
kind: Configuration
namespace: kueue-system
health:
  healthProbeBindAddress: 127.0.0.1:%d
metrics:
  bindAddress: 127.0.0.1:%d
webhook:
  host: 127.0.0.1
  port: %d
  certDir: %s
leaderElection:
  leaderElect: false
internalCertManagement:
  enable: false
waitForPodsReady:
  timeout: %s
  blockAdmission: false
  requeuingStrategy:
    timestamp: Eviction
    backoffBaseSeconds: 2
    backoffMaxSeconds: 10
integrations:
  frameworks:
    - batch/job
    - pod
`, healthPort, mustFreePort(t), webhookPort, certDir, kueuePodsReadyTimeout)
	cfgPath := filepath.Join(scratchDir, "kueue-config.yaml")
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	p := startOperator(t, "kueue", bin, []string{"KUBECONFIG=" + kubeconfig}, "--config="+cfgPath, "--feature-gates=VisibilityOnDemand=false")
	waitFor(t, "Kueue to be ready", 120*time.Second, func(ctx context.Context) (bool, error) {
		if p.exited() {
			return false, errors.New("kueue exited")
		}
		resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/readyz", healthPort))
		if err != nil {
			return false, nil
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return false, nil
		}
		c, err := net.DialTimeout("tcp", fmt.Sprintf("127.0.0.1:%d", webhookPort), time.Second)
		if err != nil {
			return false, nil
		}
		c.Close()
		return true, nil
	})

	// Kueue's pod webhook, as its manifests register it (config/components/webhook/manifests.yaml,
	// mpod.kb.io), but called by URL on loopback and for this namespace only. Deleted before Kueue stops
	// (cleanups run last first), so that no pod creation waits on a stopped webhook.
	whc := &admissionv1.MutatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: "kueue-interop-" + ns},
		Webhooks: []admissionv1.MutatingWebhook{{
			Name:                    "mpod.kb.io",
			AdmissionReviewVersions: []string{"v1"},
			ClientConfig: admissionv1.WebhookClientConfig{
				URL:      ptr.To(fmt.Sprintf("https://127.0.0.1:%d/mutate--v1-pod", webhookPort)),
				CABundle: caPEM,
			},
			FailurePolicy:     ptr.To(admissionv1.Fail),
			SideEffects:       ptr.To(admissionv1.SideEffectClassNone),
			NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"kubernetes.io/metadata.name": ns}},
			Rules: []admissionv1.RuleWithOperations{{
				Operations: []admissionv1.OperationType{admissionv1.Create},
				Rule:       admissionv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"pods"}},
			}},
		}},
	}
	if _, err := client.AdmissionregistrationV1().MutatingWebhookConfigurations().Create(ctx, whc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = client.AdmissionregistrationV1().MutatingWebhookConfigurations().Delete(context.Background(), whc.Name, metav1.DeleteOptions{})
	})
}

// writeServingCert writes a self-signed certificate for 127.0.0.1 and localhost (tls.crt, tls.key) into
// dir and returns it PEM-encoded, to be trusted as its own CA.
func writeServingCert(t *testing.T, dir string) []byte {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(time.Now().UnixNano()),
		Subject:               pkix.Name{CommonName: "kueue-interop"},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(24 * time.Hour),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		IPAddresses:           []net.IP{net.ParseIP("127.0.0.1")},
		DNSNames:              []string{"localhost"},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	certPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "tls.crt"), certPEM, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "tls.key"), pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}), 0o600); err != nil {
		t.Fatal(err)
	}
	return certPEM
}

// createManifest creates every object of a multi-document manifest, namespaced ones in ns.
func createManifest(t *testing.T, ns, manifest string) []*unstructured.Unstructured {
	t.Helper()
	var objs []*unstructured.Unstructured
	for _, doc := range strings.Split(manifest, "\n---\n") {
		obj := parseYAML(t, doc)
		if len(obj.Object) == 0 {
			continue
		}
		r, ok := kindGVR[obj.GetKind()]
		if !ok {
			t.Fatalf("no resource known for kind %s", obj.GetKind())
		}
		var err error
		if r.namespaced {
			obj, err = dyn.Resource(r.gvr).Namespace(ns).Create(context.Background(), obj, metav1.CreateOptions{})
		} else {
			obj, err = dyn.Resource(r.gvr).Create(context.Background(), obj, metav1.CreateOptions{})
		}
		if err != nil {
			t.Fatalf("creating %s %s: %v", r.gvr.Resource, obj.GetName(), err)
		}
		objs = append(objs, obj)
	}
	return objs
}

// kueueJob is the example Job (and its PodGroup) renamed, with replicas pods of cpu CPUs each, in the
// LocalQueue queue.
func kueueJob(t *testing.T, name, queue string, replicas int, cpu string) string {
	t.Helper()
	docs := strings.Split(readExample(t, "kueue-job.yaml"), "\n---\n")
	pg, job := parseYAML(t, docs[0]), parseYAML(t, docs[1])
	pg.SetName(name)
	if err := unstructured.SetNestedField(pg.Object, int64(replicas), "spec", "minMember"); err != nil {
		t.Fatal(err)
	}
	job.SetName(name)
	job.SetLabels(map[string]string{kueueQueueLabel: queue})
	_ = unstructured.SetNestedField(job.Object, int64(replicas), "spec", "parallelism")
	_ = unstructured.SetNestedField(job.Object, int64(replicas), "spec", "completions")
	_ = unstructured.SetNestedStringMap(job.Object, map[string]string{podGroupLabel: name}, "spec", "template", "metadata", "labels")
	containers, _, _ := unstructured.NestedSlice(job.Object, "spec", "template", "spec", "containers")
	containers[0].(map[string]any)["resources"] = map[string]any{"requests": map[string]any{"cpu": cpu, "memory": "1Gi"}}
	_ = unstructured.SetNestedSlice(job.Object, containers, "spec", "template", "spec", "containers")
	return toYAML(t, pg) + "---\n" + toYAML(t, job)
}

func getJob(ctx context.Context, ns, name string) (*batchv1.Job, error) {
	return client.BatchV1().Jobs(ns).Get(ctx, name, metav1.GetOptions{})
}

// jobWorkload is the Workload Kueue made for the Job (owned by it), or nil.
func jobWorkload(ctx context.Context, ns, owner string) (*unstructured.Unstructured, error) {
	list, err := dyn.Resource(workloadGVR).Namespace(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	for i := range list.Items {
		for _, ref := range list.Items[i].GetOwnerReferences() {
			if ref.Name == owner {
				return &list.Items[i], nil
			}
		}
	}
	return nil, nil
}

// condition is the status condition of type typ of obj, or nil.
func condition(obj *unstructured.Unstructured, typ string) map[string]any {
	conds, _, _ := unstructured.NestedSlice(obj.Object, "status", "conditions")
	for _, c := range conds {
		if m, _ := c.(map[string]any); m["type"] == typ {
			return m
		}
	}
	return nil
}

// waitAdmitted waits until Kueue admits the Job: its Workload is Admitted and the Job no longer suspended.
func waitAdmitted(t *testing.T, ns, name string) {
	t.Helper()
	waitFor(t, "Kueue to admit Job "+ns+"/"+name, 90*time.Second, func(ctx context.Context) (bool, error) {
		job, err := getJob(ctx, ns, name)
		if err != nil {
			return false, err
		}
		wl, err := jobWorkload(ctx, ns, name)
		if err != nil || wl == nil {
			return false, err
		}
		c := condition(wl, "Admitted")
		return c != nil && c["status"] == "True" && !ptr.Deref(job.Spec.Suspend, false), nil
	})
}

// markSucceeded ends a pod as its containers exiting 0 would.
func markSucceeded(t *testing.T, ns, name string) {
	t.Helper()
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		pod, err := client.CoreV1().Pods(ns).Get(context.Background(), name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		now := metav1.Now()
		pod.Status.Phase = v1.PodSucceeded
		setCondition(pod, v1.PodCondition{Type: v1.PodReady, Status: v1.ConditionFalse, Reason: "PodCompleted", LastTransitionTime: now})
		setCondition(pod, v1.PodCondition{Type: v1.ContainersReady, Status: v1.ConditionFalse, Reason: "PodCompleted", LastTransitionTime: now})
		for i := range pod.Status.ContainerStatuses {
			cs := &pod.Status.ContainerStatuses[i]
			cs.Ready = false
			cs.State = v1.ContainerState{Terminated: &v1.ContainerStateTerminated{ExitCode: 0, Reason: "Completed", FinishedAt: now}}
		}
		_, err = client.CoreV1().Pods(ns).UpdateStatus(context.Background(), pod, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		t.Fatalf("marking pod %s/%s succeeded: %v", ns, name, err)
	}
}

// assertStaysSuspended checks for a while that Kueue keeps the Job suspended: no pod of its gang
// exists, so it holds no room on any node.
func assertStaysSuspended(t *testing.T, ns, name string, d time.Duration) {
	t.Helper()
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) {
		job, err := getJob(context.Background(), ns, name)
		if err != nil {
			t.Fatal(err)
		}
		if !ptr.Deref(job.Spec.Suspend, false) {
			t.Fatalf("Job %s/%s was unsuspended beyond its ClusterQueue's quota", ns, name)
		}
		pods, err := groupPods(context.Background(), ns, name)
		if err != nil {
			t.Fatal(err)
		}
		if len(pods) != 0 {
			t.Fatalf("Job %s/%s is suspended but has %d pods", ns, name, len(pods))
		}
		time.Sleep(500 * time.Millisecond)
	}
}

// TestKueue runs Kueue v0.17.0 (admission by quota) with custom-scheduler (placement of the admitted pods
// as gangs). The gang invariant is watched throughout (testNamespace).
//   - A suspended Job with our PodGroup, in a LocalQueue, is admitted and its pods are bound whole.
//   - A second Job beyond the ClusterQueue's quota stays suspended (no pods: it holds nothing); when the
//     first finishes, Kueue admits it and it is placed whole.
//   - A Job admitted by a ClusterQueue whose quota is above the nodes' capacity, whose gang does not fit:
//     it holds nothing and its PodGroup says why with numbers; Kueue's waitForPodsReady evicts it (its
//     pods are never Ready: never bound) and requeues it; no member is ever bound alone.
//   - Plain pods (Kueue's pod integration, through its real mutating webhook): gated by
//     kueue.x-k8s.io/admission at creation, not members while gated (nothing bound while the quota is
//     used), ungated by Kueue once the quota frees, then placed whole.
func TestKueue(t *testing.T) {
	ns := testNamespace(t, "kueue")
	startKueue(t, ns)
	ctx := context.Background()

	// The queues of the example (ClusterQueue team: 8 CPUs), and a ClusterQueue "big" whose quota is
	// above what the 4 nodes of 8 CPUs hold.
	queues := readExample(t, "kueue-queues.yaml")
	createManifest(t, ns, queues)
	createManifest(t, ns, strings.NewReplacer("name: team", "name: big", "clusterQueue: team", "clusterQueue: big", "nominalQuota: 8\n", "nominalQuota: 100\n").Replace(
		queues[strings.Index(queues, "apiVersion: kueue.x-k8s.io/v1beta2\nkind: ClusterQueue"):]))
	t.Cleanup(func() {
		for _, name := range []string{"team", "big"} {
			_ = dyn.Resource(kueueGVR("clusterqueues")).Delete(context.Background(), name, metav1.DeleteOptions{})
		}
		_ = dyn.Resource(kueueGVR("resourceflavors")).Delete(context.Background(), "default-flavor", metav1.DeleteOptions{})
	})

	// 1. The example Job (3 pods of 2 CPUs) is admitted and bound whole.
	createManifest(t, ns, readExample(t, "kueue-job.yaml"))
	waitAdmitted(t, ns, "kueue-gang")
	first := waitGangBound(t, ns, "kueue-gang", 3)
	for _, p := range first {
		if p.Spec.SchedulerName != schedulerName {
			t.Errorf("pod %s names scheduler %q", p.Name, p.Spec.SchedulerName)
		}
	}

	// 2. A second Job of 6 CPUs: 6 + 6 > 8, it stays suspended and has no pods.
	createManifest(t, ns, kueueJob(t, "kueue-second", "team", 3, "2"))
	waitFor(t, "Kueue to make a Workload for kueue-second that waits for quota", 60*time.Second, func(ctx context.Context) (bool, error) {
		wl, err := jobWorkload(ctx, ns, "kueue-second")
		if err != nil || wl == nil {
			return false, err
		}
		c := condition(wl, "QuotaReserved")
		return c != nil && c["status"] == "False", nil
	})
	assertStaysSuspended(t, ns, "kueue-second", 5*time.Second)
	wl, _ := jobWorkload(ctx, ns, "kueue-second")
	t.Logf("the Job over quota waits: %v", condition(wl, "QuotaReserved")["message"])
	// The first finishes (its pods succeed, as their containers exiting 0 would); Kueue admits the second.
	for _, p := range first {
		markSucceeded(t, ns, p.Name)
	}
	waitFor(t, "Job kueue-gang to complete", 60*time.Second, func(ctx context.Context) (bool, error) {
		job, err := getJob(ctx, ns, "kueue-gang")
		return err == nil && job.Status.Succeeded == 3 && job.Status.CompletionTime != nil, err
	})
	waitAdmitted(t, ns, "kueue-second")
	waitGangBound(t, ns, "kueue-second", 3)

	// 3. Quota above capacity: 6 pods of 6 CPUs (36) in ClusterQueue big (100 CPUs). Each fits a node,
	// together they do not (32 CPUs, 6 used by kueue-second). Kueue admits it; custom-scheduler binds
	// none, the PodGroup says why; waitForPodsReady evicts it and requeues it.
	createManifest(t, ns, kueueJob(t, "kueue-too-big", "big", 6, "6"))
	waitAdmitted(t, ns, "kueue-too-big")
	msg := waitGangHeld(t, ns, "kueue-too-big", 6)
	t.Logf("a member of the admitted gang that does not fit says: %s", msg)
	var why string
	waitFor(t, "the PodGroup kueue-too-big to say why it is not scheduled", 60*time.Second, func(ctx context.Context) (bool, error) {
		pg, err := getPodGroup(ctx, ns, "kueue-too-big")
		if err != nil {
			return false, err
		}
		c := condition(pg, "Scheduled")
		if c == nil || c["status"] != "False" {
			return false, nil
		}
		// e.g. "needs 6 more members placed at once, but the nodes' free resources fit only 3 of them".
		why, _ = c["message"].(string)
		return c["reason"] == "GangInfeasible" && strings.Contains(why, "PodGroup "+ns+"/kueue-too-big") && strings.ContainsAny(why, "0123456789"), nil
	})
	t.Logf("PodGroup kueue-too-big: %s", why)
	var evicted string
	waitFor(t, "Kueue to evict kueue-too-big (waitForPodsReady)", kueuePodsReadyTimeout+90*time.Second, func(ctx context.Context) (bool, error) {
		wl, err := jobWorkload(ctx, ns, "kueue-too-big")
		if err != nil || wl == nil {
			return false, err
		}
		ev := condition(wl, "Evicted")
		if ev == nil || ev["status"] != "True" {
			return false, nil
		}
		if ev["reason"] != "PodsReadyTimeout" {
			return false, fmt.Errorf("kueue-too-big evicted for %v (%v), want PodsReadyTimeout", ev["reason"], ev["message"])
		}
		evicted, _ = ev["message"].(string)
		return true, nil
	})
	var requeues int64
	waitFor(t, "Kueue to requeue kueue-too-big", 60*time.Second, func(ctx context.Context) (bool, error) {
		wl, err := jobWorkload(ctx, ns, "kueue-too-big")
		if err != nil || wl == nil {
			return false, err
		}
		requeues, _, _ = unstructured.NestedInt64(wl.Object, "status", "requeueState", "count")
		return requeues >= 1, nil
	})
	t.Logf("Kueue evicted kueue-too-big (%s) and requeued it (%d time(s))", evicted, requeues)
	waitFor(t, "Kueue to admit kueue-too-big again after its back-off", 90*time.Second, func(ctx context.Context) (bool, error) {
		wl, err := jobWorkload(ctx, ns, "kueue-too-big")
		if err != nil || wl == nil {
			return false, err
		}
		c := condition(wl, "Admitted")
		evicted := condition(wl, "Evicted")
		return c != nil && c["status"] == "True" && (evicted == nil || evicted["status"] == "False"), nil
	})
	waitGangHeld(t, ns, "kueue-too-big", 6)
	if err := client.BatchV1().Jobs(ns).Delete(ctx, "kueue-too-big", metav1.DeleteOptions{PropagationPolicy: ptr.To(metav1.DeletePropagationBackground)}); err != nil {
		t.Fatal(err)
	}
	waitNoPods(t, ns, "kueue-too-big")

	// 4. Plain pods through Kueue's pod integration: a group of 3 pods of 1 CPU (Kueue's pod group, and
	// our PodGroup). kueue-second still uses 6 of team's 8 CPUs, so Kueue keeps them gated.
	createManifest(t, ns, "apiVersion: scheduling.x-k8s.io/v1alpha1\nkind: PodGroup\nmetadata:\n  name: kueue-plain\nspec:\n  minMember: 3\n")
	for i := range 3 {
		p := &v1.Pod{
			ObjectMeta: metav1.ObjectMeta{
				Name:        fmt.Sprintf("kueue-plain-%d", i),
				Labels:      map[string]string{kueueQueueLabel: "team", "kueue.x-k8s.io/pod-group-name": "kueue-plain", podGroupLabel: "kueue-plain"},
				Annotations: map[string]string{"kueue.x-k8s.io/pod-group-total-count": "3"},
			},
			Spec: v1.PodSpec{SchedulerName: schedulerName, RestartPolicy: v1.RestartPolicyNever, Containers: []v1.Container{{
				Name: "c", Image: "registry.k8s.io/pause:3.10",
				Resources: v1.ResourceRequirements{Requests: v1.ResourceList{v1.ResourceCPU: resource.MustParse("1"), v1.ResourceMemory: resource.MustParse("1Gi")}},
			}}},
		}
		created, err := client.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if !hasGate(created) {
			t.Fatalf("pod %s was created without Kueue's %s scheduling gate: its webhook did not run (gates %v)", created.Name, kueueGate, created.Spec.SchedulingGates)
		}
	}
	time.Sleep(5 * time.Second)
	plain, err := groupPods(ctx, ns, "kueue-plain")
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range plain {
		if !hasGate(&p) || p.Spec.NodeName != "" {
			t.Fatalf("pod %s: gated %v, node %q; want it still gated and unbound while the quota is used", p.Name, hasGate(&p), p.Spec.NodeName)
		}
	}
	if pg, err := getPodGroup(ctx, ns, "kueue-plain"); err == nil {
		if n, _, _ := unstructured.NestedInt64(pg.Object, "status", "scheduled"); n != 0 {
			t.Errorf("PodGroup kueue-plain counts %d scheduled members while all are gated", n)
		}
		if c := condition(pg, "Scheduled"); c != nil {
			t.Logf("PodGroup kueue-plain while gated: %v %v", c["reason"], c["message"])
		}
	}
	// kueue-second finishes; Kueue admits the pod group and removes the gates; the gang is placed whole.
	second, err := groupPods(ctx, ns, "kueue-second")
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range second {
		if live(&p) {
			markSucceeded(t, ns, p.Name)
		}
	}
	waitFor(t, "Kueue to ungate the plain pods", 90*time.Second, func(ctx context.Context) (bool, error) {
		pods, err := groupPods(ctx, ns, "kueue-plain")
		if err != nil {
			return false, err
		}
		for _, p := range pods {
			if hasGate(&p) {
				return false, nil
			}
		}
		return len(pods) == 3, nil
	})
	waitGangBound(t, ns, "kueue-plain", 3)

	// Clean up while Kueue runs (its finalizers on the plain pods).
	for _, name := range []string{"kueue-gang", "kueue-second"} {
		_ = client.BatchV1().Jobs(ns).Delete(ctx, name, metav1.DeleteOptions{PropagationPolicy: ptr.To(metav1.DeletePropagationBackground)})
	}
	for _, p := range plain {
		markSucceeded(t, ns, p.Name)
		_ = client.CoreV1().Pods(ns).Delete(ctx, p.Name, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)})
	}
	waitNoPods(t, ns, "kueue-plain")
}

func hasGate(p *v1.Pod) bool {
	for _, g := range p.Spec.SchedulingGates {
		if g.Name == kueueGate {
			return true
		}
	}
	return false
}
