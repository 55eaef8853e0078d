package integration

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/custom-scheduler/custom-scheduler/pkg/loadaware"
	"github.com/custom-scheduler/custom-scheduler/test/fakemetrics"
)

// markRunning sets a bound pod Running with every container started at startedAt, as a kubelet
// would (no kubelet runs here).
func markRunning(t *testing.T, ns, name string, startedAt time.Time) {
	t.Helper()
	ctx := context.Background()
	pod, err := client.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	pod.Status.Phase = v1.PodRunning
	pod.Status.StartTime = ptr.To(metav1.NewTime(startedAt))
	pod.Status.ContainerStatuses = nil
	for _, c := range pod.Spec.Containers {
		pod.Status.ContainerStatuses = append(pod.Status.ContainerStatuses, v1.ContainerStatus{
			Name: c.Name, Image: c.Image, Ready: true,
			State: v1.ContainerState{Running: &v1.ContainerStateRunning{StartedAt: metav1.NewTime(startedAt)}},
		})
	}
	if _, err := client.CoreV1().Pods(ns).UpdateStatus(ctx, pod, metav1.UpdateOptions{}); err != nil {
		t.Fatalf("marking pod %s/%s Running: %v", ns, name, err)
	}
}

// annotateNode sets (or, with an empty value, removes) a node's LoadAware threshold annotation.
func annotateNode(t *testing.T, name, value string) {
	t.Helper()
	patch := fmt.Sprintf(`{"metadata":{"annotations":{%q:%q}}}`, loadaware.ThresholdsAnnotation, value)
	if value == "" {
		patch = fmt.Sprintf(`{"metadata":{"annotations":{%q:null}}}`, loadaware.ThresholdsAnnotation)
	}
	if _, err := client.CoreV1().Nodes().Patch(context.Background(), name, types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
		t.Fatalf("annotating node %s: %v", name, err)
	}
}

// podStaysUnbound checks that a pod is not bound for d.
func podStaysUnbound(t *testing.T, ns, name string, d time.Duration) {
	t.Helper()
	consistently(t, d, fmt.Sprintf("pod %s/%s stays unbound", ns, name), func(ctx context.Context) (bool, error) {
		pod, err := client.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
		return err == nil && pod.Spec.NodeName == "", err
	})
}

// TestLoadAwareEstimateKeptThroughWarmup: a bound pod that is not Running yet (pulling its image)
// keeps counting by estimate however many samples come after its binding; once it has been Running
// for the warm-up past a sample's window start, its estimate goes and a pod it kept out fits.
func TestLoadAwareEstimateKeptThroughWarmup(t *testing.T) {
	ms := useMetricsServer(t)
	ns := testNamespace(t)
	loadAwareNode(t, "la-warmup")
	// 5 of 10 cpu used; the 80% threshold leaves 3 cpu; each 2-cpu pod is estimated at 1.7.
	ms.SetNode("la-warmup", fakemetrics.NodeUsage{CPU: "5", Memory: "4Gi"})
	startScheduler(t, schedulerConfig(t, adminKubeconfig, loadAwareProfile(schedulerName, "",
		"          metricsStalenessSeconds: 30\n          estimation: {warmupSeconds: 4}\n")))
	waitForFetches(t, schedulerName)

	first := createPod(t, pinnedPod(ns, "pulling", schedulerName, "la-warmup", "2"))
	waitForPodBound(t, ns, first.Name)
	second := createPod(t, pinnedPod(ns, "waiting", schedulerName, "la-warmup", "2"))
	message := waitForPodUnschedulable(t, ns, second.Name)
	if !strings.Contains(message, "exceeds the LoadAware threshold of 80 percent") {
		t.Errorf("PodScheduled message %q, want the LoadAware cpu threshold", message)
	}
	// Samples keep coming every second, all taken after the binding: the first pod is not Running,
	// so its estimate stays.
	podStaysUnbound(t, ns, second.Name, 3*time.Second)

	// Container start times have a resolution of a second.
	start := time.Now().Truncate(time.Second)
	markRunning(t, ns, first.Name, start)
	// Running, but within the 4s warm-up: still counted.
	podStaysUnbound(t, ns, second.Name, 2*time.Second)
	if node := waitForPodBound(t, ns, second.Name); node != "la-warmup" {
		t.Fatalf("pod bound to %q, want la-warmup", node)
	}
	if waited := time.Since(start); waited < 4*time.Second {
		t.Errorf("the estimate went %v after the pod started Running, before the 4s warm-up", waited)
	}
}

// TestLoadAwareDaemonSetPodNotFiltered: a DaemonSet pod lands on a node over the threshold that
// other pods are kept off.
func TestLoadAwareDaemonSetPodNotFiltered(t *testing.T) {
	ms := useMetricsServer(t)
	ns := testNamespace(t)
	loadAwareNode(t, "la-ds-hot")
	ms.SetNode("la-ds-hot", fakemetrics.NodeUsage{CPU: "9500m", Memory: "4Gi"})
	startScheduler(t, schedulerConfig(t, adminKubeconfig, loadAwareProfile(schedulerName, "", "          metricsStalenessSeconds: 30\n")))
	waitForFetches(t, schedulerName)

	plain := createPod(t, pinnedPod(ns, "plain", schedulerName, "la-ds-hot", "100m"))
	waitForPodUnschedulable(t, ns, plain.Name)
	ds := pinnedPod(ns, "agent", schedulerName, "la-ds-hot", "100m")
	ds.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "DaemonSet", Name: "agent", UID: "0b7c1d2e-0000-4000-8000-000000000001", Controller: ptr.To(true)}}
	createPod(t, ds)
	if node := waitForPodBound(t, ns, ds.Name); node != "la-ds-hot" {
		t.Fatalf("DaemonSet pod bound to %q, want la-ds-hot", node)
	}
}

// TestLoadAwareNodeAnnotationOverride: a node's annotation lowers (or raises) its threshold; a
// malformed one is ignored with an event on the node.
func TestLoadAwareNodeAnnotationOverride(t *testing.T) {
	ms := useMetricsServer(t)
	ns := testNamespace(t)
	loadAwareNode(t, "la-annotated")
	loadAwareNode(t, "la-misannotated")
	annotateNode(t, "la-annotated", "cpu=60")
	annotateNode(t, "la-misannotated", "cpu=60%")
	// 7 of 10 cpu: a 1-cpu pod (0.85 estimated) fits under the profile's 80%, not under 60%.
	ms.SetNode("la-annotated", fakemetrics.NodeUsage{CPU: "7", Memory: "4Gi"})
	ms.SetNode("la-misannotated", fakemetrics.NodeUsage{CPU: "7", Memory: "4Gi"})
	startScheduler(t, schedulerConfig(t, adminKubeconfig, loadAwareProfile(schedulerName, "", "          metricsStalenessSeconds: 30\n")))
	waitForFetches(t, schedulerName)

	pod := createPod(t, pinnedPod(ns, "on-annotated", schedulerName, "la-annotated", "1"))
	message := waitForPodUnschedulable(t, ns, pod.Name)
	if want := "exceeds the node's LoadAware threshold (annotation " + loadaware.ThresholdsAnnotation + ")"; !strings.Contains(message, want) {
		t.Errorf("PodScheduled message %q, want %q", message, want)
	}
	mis := createPod(t, pinnedPod(ns, "on-misannotated", schedulerName, "la-misannotated", "1"))
	waitForPodBound(t, ns, mis.Name)
	event := waitForEvent(t, metav1.NamespaceDefault, "la-misannotated", "InvalidLoadAwareThresholds", "")
	if !strings.Contains(event.Message, `"cpu=60%"`) {
		t.Errorf("event message %q does not quote the malformed value", event.Message)
	}

	// Raising the node's threshold requeues the pod (a node annotation event) and it fits.
	annotateNode(t, "la-annotated", "cpu=90")
	if node := waitForPodBound(t, ns, pod.Name); node != "la-annotated" {
		t.Fatalf("pod bound to %q, want la-annotated", node)
	}
}
