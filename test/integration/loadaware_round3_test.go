package integration

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/custom-scheduler/custom-scheduler/test/fakemetrics"
)

// TestLoadAwareAggregationsThroughTheMetricsAPI runs one profile per usageAggregation type for the
// Filter (latest, avg, max, p90, p95 over 120s) against the same four nodes, whose samples come
// through the apiserver's aggregation layer, about 22 per node, one every two seconds (each is served
// for two seconds, the high ones and the last for four or more, so a refresher every second takes each
// once and cannot miss one that matters). Each node's series makes some aggregations reject a pod and
// others pass it, and each aggregation's pattern over the four nodes is its own, so a Filter that read
// another aggregation than its profile's (or the latest sample whatever the profile says) places or
// rejects at least one pod wrongly. The patterns hold with up to two of the short-lived samples
// missed (a slow refresh).
//
// Of 10 cpu (threshold 80%: 8 cpu), with latest / max / avg / p90 / p95 (nearest rank of 22: the
// 20th and the 21st smallest):
//
//	a: 19×2, 9.9, 9.9, 2   2 / 9.9 / 2.7 / 2 / 9.9
//	b: 11×2, 11×9          9 / 9 / 5.5 / 9 / 9
//	c: 21×9, 2             2 / 9 / 8.7 / 9 / 9
//	d: 20×2, 9.9, 2        2 / 9.9 / 2.4 / 2 / 2  (one spike: p95 ignores it, max does not)
func TestLoadAwareAggregationsThroughTheMetricsAPI(t *testing.T) {
	ms := useMetricsServer(t)
	ns := testNamespace(t)
	type held struct {
		cpu   string
		slots int // two-second slots the sample is served for
	}
	repeat := func(cpu string, n int) []held {
		out := make([]held, n)
		for i := range out {
			out[i] = held{cpu, 1}
		}
		return out
	}
	series := map[string][]held{
		"la-agg-a": append(repeat("2", 19), held{"9900m", 2}, held{"9900m", 2}, held{"2", 2}),
		"la-agg-b": append(repeat("2", 11), append(repeat("9", 10), held{"9", 2})...),
		"la-agg-c": append(repeat("9", 21), held{"2", 2}),
		"la-agg-d": append(repeat("2", 20), held{"9900m", 2}, held{"2", 2}),
	}
	// sampleAt is a node's sample served in a slot: its cpu and the slot it was first served in (its
	// timestamp); the last one is served on for good.
	sampleAt := func(node string, slot int) (string, int) {
		start := 0
		for k, h := range series[node] {
			if slot < start+h.slots || k == len(series[node])-1 {
				return h.cpu, start
			}
			start += h.slots
		}
		panic("unreachable")
	}
	lastSlot := 0
	for _, hs := range series {
		n := 0
		for _, h := range hs {
			n += h.slots
		}
		lastSlot = max(lastSlot, n)
	}
	nodes := []string{"la-agg-a", "la-agg-b", "la-agg-c", "la-agg-d"}
	// Whether a 100m pod may go to each node, per aggregation.
	fits := map[string][4]bool{
		"latest": {true, false, true, true},
		"max":    {false, false, false, false},
		"avg":    {true, true, false, true},
		"p90":    {true, false, false, true},
		"p95":    {false, false, false, true},
	}
	for _, n := range nodes {
		loadAwareNode(t, n)
	}
	const every = 2 * time.Second
	var t0 time.Time
	started := make(chan struct{})
	ms.SetNodesFunc(func() map[string]fakemetrics.NodeUsage {
		select {
		case <-started:
		default:
			return nil
		}
		slot := int(time.Since(t0) / every)
		out := map[string]fakemetrics.NodeUsage{}
		for _, n := range nodes {
			cpu, first := sampleAt(n, slot)
			out[n] = fakemetrics.NodeUsage{CPU: cpu, Memory: "4Gi", Timestamp: t0.Add(time.Duration(first) * every)}
		}
		return out
	})
	var profiles strings.Builder
	kinds := []string{"latest", "avg", "max", "p90", "p95"}
	for _, kind := range kinds {
		profiles.WriteString(loadAwareProfile("la-"+kind, "", fmt.Sprintf(
			"          metricsStalenessSeconds: 180\n          usageAggregation: {filter: {type: %s, durationSeconds: 120}}\n", kind)))
	}
	startScheduler(t, schedulerConfig(t, adminKubeconfig, profiles.String()))
	for _, kind := range kinds {
		waitForFetches(t, "la-"+kind)
	}
	t0 = time.Now().Truncate(time.Millisecond)
	close(started)
	// Every profile refreshes every second: two more seconds and each has every node's last sample.
	time.Sleep(time.Duration(lastSlot)*every + 2*time.Second)

	for _, kind := range kinds {
		for _, n := range nodes {
			createPod(t, pinnedPod(ns, fmt.Sprintf("%s-%s", kind, n), "la-"+kind, n, "100m"))
		}
	}
	for _, kind := range kinds {
		for k, n := range nodes {
			name := fmt.Sprintf("%s-%s", kind, n)
			if fits[kind][k] {
				if node := waitForPodBound(t, ns, name); node != n {
					t.Errorf("%s: pod bound to %q, want %s", kind, node, n)
				}
				continue
			}
			message := waitForPodUnschedulable(t, ns, name)
			if !strings.Contains(message, "exceeds the LoadAware threshold of 80 percent") {
				t.Errorf("%s on %s: PodScheduled message %q, want the LoadAware cpu threshold", kind, n, message)
			}
		}
	}
	if t.Failed() {
		return
	}
	// The rejected pods stay rejected: nothing new comes (the last sample is served on).
	for _, kind := range kinds {
		for k, n := range nodes {
			if !fits[kind][k] {
				name := fmt.Sprintf("%s-%s", kind, n)
				pod, err := client.CoreV1().Pods(ns).Get(context.Background(), name, metav1.GetOptions{})
				if err != nil {
					t.Fatal(err)
				}
				if pod.Spec.NodeName != "" {
					t.Errorf("%s: pod %s was bound to %s, want it kept off", kind, name, pod.Spec.NodeName)
				}
			}
		}
	}
}

// TestLoadAwareEstimateLastsUnderAvg is the case of the issue that led to round three: the Filter
// and the Score on avg over 60s, two nodes, one at 40% cpu and one at 10%, on
// which a 7-cpu pod starts and its usage rises to 70%. Seconds later, with a few samples of the
// window showing the pod and its warm-up over, a new 2-cpu pod must go to the node at 40%: the
// average of the other still reads about 20%, and only the part of the estimate the average does
// not show yet keeps it honest.
func TestLoadAwareEstimateLastsUnderAvg(t *testing.T) {
	ms := useMetricsServer(t)
	ns := testNamespace(t)
	for _, n := range []string{"la-avg-steady", "la-avg-busy"} {
		createNode(t, n, "10", "32Gi", map[string]string{"loadaware": n, "loadaware-pair": "avg"})
	}
	ms.SetNode("la-avg-steady", fakemetrics.NodeUsage{CPU: "4", Memory: "4Gi"})
	ms.SetNode("la-avg-busy", fakemetrics.NodeUsage{CPU: "1", Memory: "4Gi"})
	// The profile scores by LoadAware alone (the request-based scorers would prefer the steady node
	// for its free requests anyway).
	startScheduler(t, schedulerConfig(t, adminKubeconfig, loadAwareProfile(schedulerName, loadAwareOnlyScores,
		"          metricsStalenessSeconds: 30\n          estimation: {warmupSeconds: 2}\n"+
			"          usageAggregation: {filter: {type: avg, durationSeconds: 60}, score: {type: avg, durationSeconds: 60}}\n")))
	waitForFetches(t, schedulerName)
	// Ten seconds of history at 10% on the busy node.
	time.Sleep(10 * time.Second)

	big := createPod(t, pinnedPod(ns, "big", schedulerName, "la-avg-busy", "7"))
	waitForPodBound(t, ns, big.Name)
	start := time.Now().Truncate(time.Second)
	markRunning(t, ns, big.Name, start)
	ms.SetNode("la-avg-busy", fakemetrics.NodeUsage{CPU: "7", Memory: "4Gi"})
	// Past the 2s warm-up, three or four samples show the pod: the average of the busy node's window
	// reads 1 + 6·k/n cpu, about 2 of 10.
	time.Sleep(6 * time.Second)

	next := avgPairPod(ns, "next")
	createPod(t, next)
	node := waitForPodBound(t, ns, next.Name)
	if node != "la-avg-steady" {
		t.Fatalf("the 2-cpu pod went to %s, want la-avg-steady: the busy node uses 70%% (the average of its window reads less, the estimate must make up the rest)", node)
	}
}

// avgPairPod is a 2-cpu pod that may go to either node of the avg pair.
func avgPairPod(ns, name string) *v1.Pod {
	p := pinnedPod(ns, name, schedulerName, "", "2")
	p.Spec.NodeSelector = map[string]string{"loadaware-pair": "avg"}
	return p
}

// TestLoadAwareRejectFloor: with filterMissingMetrics=Reject, a pod pinned to the one node without
// a sample is kept off while the others have one; when the metrics API answers with nothing (a
// stuck or emptied provider), that is taken as an outage, not as every node missing metrics: the
// pod is requeued and placed, and new pods keep being placed.
func TestLoadAwareRejectFloor(t *testing.T) {
	ms := useMetricsServer(t)
	ns := testNamespace(t)
	for _, n := range []string{"la-floor-a", "la-floor-b", "la-floor-new"} {
		loadAwareNode(t, n)
	}
	ms.SetNode("la-floor-a", fakemetrics.NodeUsage{CPU: "1", Memory: "4Gi"})
	ms.SetNode("la-floor-b", fakemetrics.NodeUsage{CPU: "1", Memory: "4Gi"})
	startScheduler(t, schedulerConfig(t, adminKubeconfig, loadAwareProfile(schedulerName, "",
		"          metricsStalenessSeconds: 5\n          filterMissingMetrics: Reject\n")))
	waitForFetches(t, schedulerName)

	kept := createPod(t, pinnedPod(ns, "on-new", schedulerName, "la-floor-new", "100m"))
	message := waitForPodUnschedulable(t, ns, kept.Name)
	if !strings.Contains(message, "node has no fresh metrics.k8s.io sample") {
		t.Fatalf("PodScheduled message %q, want the missing-metrics reason", message)
	}
	podStaysUnbound(t, ns, kept.Name, 2*time.Second)

	// The provider answers, with no node at all.
	ms.Reset()
	if node := waitForPodBound(t, ns, kept.Name); node != "la-floor-new" {
		t.Fatalf("pod bound to %q, want la-floor-new", node)
	}
	later := createPod(t, pinnedPod(ns, "later", schedulerName, "la-floor-a", "100m"))
	waitForPodBound(t, ns, later.Name)
}
