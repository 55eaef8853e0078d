package interop

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
)

var rayClusterGVR = schema.GroupVersionResource{Group: "ray.io", Version: "v1", Resource: "rayclusters"}

// kubeRayVersion is one KubeRay release under test: the tools module that pins it, the binary
// `make interop-operators` builds from it, and the scheduler its pods end up naming.
type kubeRayVersion struct {
	version string
	// toolDir is test/interop/tools/<toolDir>; binary is bin/interop/<binary>.
	toolDir, binary string
	// podScheduler is the schedulerName KubeRay leaves on the pods: v1.4.0 keeps the template's
	// (custom-scheduler), v1.5.0 overwrites it with scheduler-plugins-scheduler.
	podScheduler string
	// schedulerConfig, when set, is the configuration of a custom-scheduler of the test's own (beside the
	// shared one, which serves only custom-scheduler): for v1.5.0 the shipped one with the alias profile.
	schedulerConfig string
}

var (
	kubeRay14 = kubeRayVersion{version: "v1.4.0", toolDir: "kuberay", binary: "ray-operator", podScheduler: schedulerName}
	kubeRay15 = kubeRayVersion{version: "v1.5.0", toolDir: "kuberay-v1.5", binary: "ray-operator-v1.5",
		podScheduler: "scheduler-plugins-scheduler", schedulerConfig: aliasConfig}
)

// startKubeRay applies KubeRay's CRDs (it watches RayCluster, RayJob and RayService) from the module
// cache at the version's pin and runs its ray-operator with the scheduler-plugins batch scheduler.
func startKubeRay(t *testing.T, v kubeRayVersion) *process {
	t.Helper()
	bin := operatorBinary(t, v.binary)
	dir := moduleDir(t, v.toolDir, "github.com/ray-project/kuberay/ray-operator")
	var crds []*unstructured.Unstructured
	for _, f := range []string{"ray.io_rayclusters.yaml", "ray.io_rayjobs.yaml", "ray.io_rayservices.yaml"} {
		crds = append(crds, applyFile(t, filepath.Join(dir, "config", "crd", "bases", f))...)
	}
	deleteCRDsAtEnd(t, crds)
	return startOperator(t, v.binary, bin, nil,
		"--kubeconfig="+kubeconfig, "--enable-leader-election=false", "--batch-scheduler=scheduler-plugins",
		fmt.Sprintf("--metrics-addr=127.0.0.1:%d", mustFreePort(t)),
		fmt.Sprintf("--health-probe-bind-address=127.0.0.1:%d", mustFreePort(t)))
}

// TestKubeRay runs KubeRay v1.4.0 with --batch-scheduler=scheduler-plugins against custom-scheduler as
// shipped; TestKubeRayV15 runs KubeRay v1.5.0 the same way, with custom-scheduler's alias profile on
// (v1.5.0 makes every pod name scheduler-plugins-scheduler). Both run testKubeRay's scenarios.
func TestKubeRay(t *testing.T) { testKubeRay(t, kubeRay14) }

func TestKubeRayV15(t *testing.T) { testKubeRay(t, kubeRay15) }

// testKubeRay runs one KubeRay version:
//   - a RayCluster with gang scheduling on gets a PodGroup named after it (minMember 1 + workers,
//     minResources the sum of the requests, no timeout) and is bound whole;
//   - a deleted worker is recreated by KubeRay and the gang is whole again;
//   - scaling the worker group up leaves the PodGroup as it was (KubeRay issue #5205) and the extra
//     workers, beyond minMember, are placed like any pod;
//   - scaling it down leaves minMember as it was too: the members left are below it (nothing is
//     evicted), and a worker lost then is recreated but cannot be placed until minMember is lowered
//     by hand (which KubeRay leaves alone);
//   - a RayCluster too big for the cluster (each pod fits a node, the whole does not) holds nothing and
//     its pods say why;
//   - deleting the RayCluster deletes its pods and its PodGroup (the garbage collector, through the
//     owner reference KubeRay sets).
func testKubeRay(t *testing.T, v kubeRayVersion) {
	ns := testNamespace(t, "kuberay")
	if v.schedulerConfig != "" {
		// The shared scheduler serves only custom-scheduler; this one serves both profiles of its
		// configuration (the tests run one at a time, so it sees no other test's pods).
		startTestScheduler(t, "custom-scheduler-"+v.binary, v.schedulerConfig)
	}
	startKubeRay(t, v)
	ctx := context.Background()

	// A gang bound whole.
	createObject(t, rayClusterGVR, ns, readExample(t, "kuberay-raycluster.yaml"))
	pg := waitPodGroup(t, ns, "ray-gang")
	spec := specOf(t, pg)
	if spec.MinMember != 3 || !quantityEqual(spec.MinResources["cpu"], "5") || !quantityEqual(spec.MinResources["memory"], "5Gi") || spec.ScheduleTimeoutSeconds != nil {
		t.Errorf("KubeRay's PodGroup spec = %+v, want minMember 3, minResources cpu 5 memory 5Gi, no timeout", spec)
	}
	if refs := pg.GetOwnerReferences(); len(refs) != 1 || refs[0].Kind != "RayCluster" || refs[0].Name != "ray-gang" {
		t.Errorf("PodGroup owner references = %+v, want the RayCluster", refs)
	}
	pods := waitGangBound(t, ns, "ray-gang", 3)
	for _, p := range pods {
		if p.Spec.SchedulerName != v.podScheduler {
			t.Errorf("pod %s has schedulerName %q, want %q (KubeRay %s)", p.Name, p.Spec.SchedulerName, v.podScheduler, v.version)
		}
	}

	// A deleted worker is recreated, and the replacement completes the gang again.
	worker := workerPod(t, ns, "ray-gang")
	deletePod(t, ns, worker)
	waitFor(t, "KubeRay to replace worker "+worker+" and the gang to be whole again", 120*time.Second, func(ctx context.Context) (bool, error) {
		pods, err := groupPods(ctx, ns, "ray-gang")
		if err != nil {
			return false, err
		}
		n := 0
		for _, p := range pods {
			if p.Name == worker {
				return false, nil
			}
			if liveAndBound(&p) {
				n++
			}
		}
		return n == 3, nil
	})

	// Scaling the worker group up: KubeRay creates the pods, but does not update the PodGroup (#5205);
	// the extra workers, beyond minMember, are placed like any pod.
	scaleWorkers(t, ns, "ray-gang", 4)
	waitGangBound(t, ns, "ray-gang", 5)
	if got := specOf(t, waitPodGroup(t, ns, "ray-gang")); got.MinMember != 3 || !quantityEqual(got.MinResources["cpu"], "5") {
		t.Errorf("after scaling to 4 workers the PodGroup spec is %+v; KubeRay %s was expected to leave it at minMember 3, cpu 5 (#5205): update docs/operators.md", got, v.version)
	}

	// Scaling down to 1 worker: KubeRay deletes 3 workers, the PodGroup still says minMember 3, so the
	// 2 members left are below it (the scheduler evicts nothing). A worker lost now is recreated but
	// cannot be placed: with the head alone bound, the replacement is 2 live members of 3 and waits
	// for a third that will never come, until minMember is lowered by hand (KubeRay only creates the
	// PodGroup when it is missing, so the edit stays).
	scaleWorkers(t, ns, "ray-gang", 1)
	waitGangBound(t, ns, "ray-gang", 2)
	if got := specOf(t, waitPodGroup(t, ns, "ray-gang")); got.MinMember != 3 {
		t.Errorf("after scaling to 1 worker the PodGroup's minMember is %d; KubeRay %s was expected to leave it at 3 (#5205)", got.MinMember, v.version)
	}
	lost := workerPod(t, ns, "ray-gang")
	deletePod(t, ns, lost)
	var stuck string
	waitFor(t, "the replacement of "+lost+" to wait for members that will not come", 60*time.Second, func(ctx context.Context) (bool, error) {
		pods, err := groupPods(ctx, ns, "ray-gang")
		if err != nil {
			return false, err
		}
		evs, err := client.CoreV1().Events(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		for _, p := range pods {
			if p.Name == lost || p.Spec.NodeName != "" || !live(&p) {
				continue
			}
			// PreEnqueue holds it out of the scheduling queue: an event says so, no condition.
			for _, e := range evs.Items {
				if e.InvolvedObject.Name == p.Name && e.Reason == "WaitingForMembers" && strings.Contains(e.Message, "2 of minMember 3 live pods of PodGroup "+ns+"/ray-gang exist") {
					stuck = e.Message
					return true, nil
				}
			}
		}
		return false, nil
	})
	t.Logf("after scaling down, a replacement worker says: %s", stuck)
	if _, err := dyn.Resource(podGroupGVR).Namespace(ns).Patch(ctx, "ray-gang", types.MergePatchType, []byte(`{"spec":{"minMember":2}}`), metav1.PatchOptions{}); err != nil {
		t.Fatalf("lowering minMember by hand: %v", err)
	}
	waitGangBound(t, ns, "ray-gang", 2)
	time.Sleep(2 * time.Second)
	if got := specOf(t, waitPodGroup(t, ns, "ray-gang")); got.MinMember != 2 {
		t.Errorf("KubeRay put minMember back to %d after it was lowered by hand to 2", got.MinMember)
	}

	// Too big: 5 workers of 7 CPUs and a head of 1 (each fits a node of 8, together 36 of 32 CPUs).
	createObject(t, rayClusterGVR, ns, bigRayCluster(t, readExample(t, "kuberay-raycluster.yaml")))
	bigPG := waitPodGroup(t, ns, "ray-too-big")
	if got := specOf(t, bigPG); got.MinMember != 6 || !quantityEqual(got.MinResources["cpu"], "36") {
		t.Errorf("the too-big RayCluster's PodGroup spec = %+v, want minMember 6, cpu 36", got)
	}
	msg := waitGangHeld(t, ns, "ray-too-big", 6)
	t.Logf("a member of the too-big RayCluster says: %s", msg)

	// Deleting a RayCluster deletes its pods (KubeRay's owner references, the garbage collector) and
	// the PodGroup (owner reference to the RayCluster).
	for _, name := range []string{"ray-gang", "ray-too-big"} {
		if err := dyn.Resource(rayClusterGVR).Namespace(ns).Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	for _, name := range []string{"ray-gang", "ray-too-big"} {
		waitNoPods(t, ns, name)
		waitFor(t, "PodGroup "+name+" to be deleted with its RayCluster", 60*time.Second, func(ctx context.Context) (bool, error) {
			_, err := getPodGroup(ctx, ns, name)
			return err != nil, ignoreNotFound(err)
		})
	}
}

// workerPod is the name of one live worker pod of a RayCluster.
func workerPod(t *testing.T, ns, cluster string) string {
	t.Helper()
	pods, err := client.CoreV1().Pods(ns).List(context.Background(), metav1.ListOptions{LabelSelector: "ray.io/node-type=worker,ray.io/cluster=" + cluster})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range pods.Items {
		if liveAndBound(&p) {
			return p.Name
		}
	}
	t.Fatalf("no live worker pod of RayCluster %s/%s", ns, cluster)
	return ""
}

// bigRayCluster turns the example into ray-too-big: 5 workers of 7 CPUs.
func bigRayCluster(t *testing.T, manifest string) string {
	t.Helper()
	obj := parseYAML(t, manifest)
	obj.SetName("ray-too-big")
	groups, _, _ := unstructured.NestedSlice(obj.Object, "spec", "workerGroupSpecs")
	g := groups[0].(map[string]any)
	g["replicas"] = int64(5)
	containers, _, _ := unstructured.NestedSlice(g, "template", "spec", "containers")
	c := containers[0].(map[string]any)
	c["resources"] = map[string]any{"requests": map[string]any{"cpu": "7", "memory": "2Gi"}, "limits": map[string]any{"cpu": "7", "memory": "2Gi"}}
	if err := unstructured.SetNestedSlice(g, containers, "template", "spec", "containers"); err != nil {
		t.Fatal(err)
	}
	if err := unstructured.SetNestedSlice(obj.Object, groups, "spec", "workerGroupSpecs"); err != nil {
		t.Fatal(err)
	}
	return toYAML(t, obj)
}

// scaleWorkers sets the replicas of the RayCluster's first worker group, as a user would.
func scaleWorkers(t *testing.T, ns, cluster string, replicas int) {
	t.Helper()
	patch := fmt.Sprintf(`[{"op":"replace","path":"/spec/workerGroupSpecs/0/replicas","value":%d}]`, replicas)
	if _, err := dyn.Resource(rayClusterGVR).Namespace(ns).Patch(context.Background(), cluster, types.JSONPatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
		t.Fatalf("scaling the workers of %s/%s to %d: %v", ns, cluster, replicas, err)
	}
}
