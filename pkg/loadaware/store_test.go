package loadaware

import (
	"context"
	"fmt"
	"math/rand"
	"slices"
	"testing"
	"time"
	"unsafe"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework"
	"k8s.io/utils/ptr"

	"github.com/custom-scheduler/custom-scheduler/pkg/apis/config"
)

// TestSlotSize: a slot is two cache lines, the first holding what Filter and Score read.
func TestSlotSize(t *testing.T) {
	if got := unsafe.Sizeof(slot{}); got != 128 {
		t.Errorf("slot is %d bytes, want 128", got)
	}
	if off := unsafe.Offsetof(slot{}.limitCPU); off >= 64 {
		t.Errorf("limitCPU at offset %d, want it in the first cache line", off)
	}
}

// TestNothingWithoutSamples: without any sample every extension point returns at once, Reserve
// records nothing, and none of it allocates.
func TestNothingWithoutSamples(t *testing.T) {
	ctx := context.Background()
	pl := newTestPlugin(t, defaultArgs(t))
	ni := nodeInfo("n", "10", "10Gi")
	pl.addNodes(ni)
	pod := podWith("p", "1", "1Gi")
	cs := framework.NewCycleState()
	if _, s := pl.PreFilter(ctx, cs, pod, nil); !s.IsSkip() {
		t.Errorf("PreFilter = %v, want Skip", s)
	}
	if s := pl.PreScore(ctx, cs, pod, nil); !s.IsSkip() {
		t.Errorf("PreScore = %v, want Skip", s)
	}
	pl.Reserve(ctx, cs, pod, "n")
	if n := pl.store.pendingCount(); n != 0 {
		t.Errorf("Reserve without samples recorded %d estimates, want 0", n)
	}
	allocs := testing.AllocsPerRun(100, func() {
		pl.PreFilter(ctx, cs, pod, nil)
		pl.PreScore(ctx, cs, pod, nil)
		pl.Reserve(ctx, cs, pod, "n")
		pl.Unreserve(ctx, cs, pod, "n")
	})
	if allocs != 0 {
		t.Errorf("PreFilter+PreScore+Reserve+Unreserve without samples allocate %v times, want 0", allocs)
	}
}

// TestReserveDoesNotCopyTheIndex: Reserve on a known node changes its slot in place; the index map
// is the same map before and after.
func TestReserveDoesNotCopyTheIndex(t *testing.T) {
	ctx := context.Background()
	pl := newTestPlugin(t, defaultArgs(t))
	pl.addNodes(nodeInfo("n", "10", "10Gi"))
	pl.lister.set(epoch, map[string][2]string{"n": {"1", "1Gi"}})
	pl.refreshNow(t)
	before := pl.store.index.Load()
	for i := 0; i < 10; i++ {
		pl.Reserve(ctx, framework.NewCycleState(), podWith(fmt.Sprint(i), "1", ""), "n")
	}
	if pl.store.index.Load() != before {
		t.Error("Reserve replaced the index map")
	}
	if got, _ := pl.node("n"); got.pending != 10 {
		t.Errorf("%d estimates on the node, want 10", got.pending)
	}
}

// TestDaemonSetPodsAreNotFiltered: a DaemonSet pod passes a hot node unless filterDaemonSetPods.
func TestDaemonSetPodsAreNotFiltered(t *testing.T) {
	ctx := context.Background()
	dsPod := func() *v1.Pod {
		p := podWith("ds", "1", "")
		p.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "DaemonSet", Name: "agent", UID: "ds-uid", Controller: ptr.To(true)}}
		return p
	}
	tests := []struct {
		name   string
		filter bool
		pod    *v1.Pod
		want   fwk.Code
	}{
		{"DaemonSet pod passes", false, dsPod(), fwk.Success},
		{"DaemonSet pod filtered when asked", true, dsPod(), fwk.UnschedulableAndUnresolvable},
		{"other pods are filtered", false, podWith("p", "1", ""), fwk.UnschedulableAndUnresolvable},
		{"a non-controller DaemonSet reference does not exempt", false, func() *v1.Pod {
			p := dsPod()
			p.OwnerReferences[0].Controller = nil
			return p
		}(), fwk.UnschedulableAndUnresolvable},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			pl := newTestPlugin(t, defaultArgs(t, func(a *config.LoadAwareArgs) { a.FilterDaemonSetPods = tc.filter }))
			ni := nodeInfo("n", "10", "10Gi")
			pl.addNodes(ni)
			pl.lister.set(epoch, map[string][2]string{"n": {"9900m", "1Gi"}})
			pl.refreshNow(t)
			cs := framework.NewCycleState()
			got := fwk.Success
			if _, s := pl.PreFilter(ctx, cs, tc.pod, nil); s.IsSuccess() {
				got = pl.Filter(ctx, cs, tc.pod, ni).Code()
			} else if !s.IsSkip() {
				t.Fatalf("PreFilter: %v", s)
			}
			if got != tc.want {
				t.Errorf("Filter = %v, want %v", got, tc.want)
			}
			// Signatures tell exempt pods apart, so batching never reuses a Filter result across them.
			a, _ := pl.SignPod(ctx, tc.pod)
			b, _ := pl.SignPod(ctx, podWith("p", "1", ""))
			if exempt := tc.want == fwk.Success; (a[0].Value == b[0].Value) == exempt {
				t.Errorf("signature %v vs a plain pod's %v", a[0].Value, b[0].Value)
			}
		})
	}
}

// TestEstimatesNeverLeakRandomized drives the store through random orderings of Reserve, Unreserve,
// bind, start, finish, delete, refreshes and node churn (seeded: the seed in a failure replays it).
// After every step each slot's estimate sum equals the sum over the pods counted on it and never
// goes negative; once every pod finished or was deleted nothing is counted anywhere.
func TestEstimatesNeverLeakRandomized(t *testing.T) {
	aggregations := []config.LoadAwareUsageAggregation{
		{Filter: config.LoadAwareAggregation{Type: config.AggregationP95, DurationSeconds: 60}, Score: config.LoadAwareAggregation{Type: config.AggregationLatest}},
		{Filter: config.LoadAwareAggregation{Type: config.AggregationAvg, DurationSeconds: 30}, Score: config.LoadAwareAggregation{Type: config.AggregationMax, DurationSeconds: 45}},
		{Filter: config.LoadAwareAggregation{Type: config.AggregationLatest}, Score: config.LoadAwareAggregation{Type: config.AggregationP90, DurationSeconds: 40}},
	}
	for _, seed := range []int64{1, 2, 3, 42, 20260112} {
		agg := aggregations[seed%int64(len(aggregations))]
		t.Run(fmt.Sprintf("seed %d filter %s score %s", seed, agg.Filter.Type, agg.Score.Type), func(t *testing.T) {
			rng := rand.New(rand.NewSource(seed))
			ctx := context.Background()
			pl := newTestPlugin(t, defaultArgs(t, func(a *config.LoadAwareArgs) {
				a.MetricsStalenessSeconds = 60
				a.UsageAggregation = agg
			}))
			nodes := []string{"a", "b", "c", "d"}
			for _, n := range nodes[:3] {
				pl.addNodes(nodeInfo(n, "10", "10Gi"))
			}
			refresh := func() {
				usages := map[string][2]string{}
				for _, n := range nodes {
					if rng.Intn(4) > 0 {
						usages[n] = [2]string{fmt.Sprintf("%dm", rng.Intn(9000)), fmt.Sprintf("%dMi", rng.Intn(9000))}
					}
				}
				pl.lister.set(pl.clock.Now().Add(-time.Duration(rng.Intn(20))*time.Second), usages)
				pl.refreshNow(t)
			}
			refresh()
			pods := map[types.UID]*v1.Pod{}
			for step := 0; step < 2000; step++ {
				pl.clock.Step(time.Duration(rng.Intn(3000)) * time.Millisecond)
				id := types.UID(fmt.Sprint("p", rng.Intn(40)))
				p := pods[id]
				switch op := rng.Intn(10); {
				case op == 0:
					refresh()
				case op == 1 && p == nil:
					p = podWith(string(id), fmt.Sprintf("%dm", 100+rng.Intn(900)), "")
					pods[id] = p
					pl.Reserve(ctx, framework.NewCycleState(), p, nodes[rng.Intn(len(nodes))])
				case op == 2 && p != nil && p.Spec.NodeName == "":
					pl.Unreserve(ctx, nil, p, "")
					delete(pods, id)
				case op == 3 && p != nil && p.Spec.NodeName == "":
					p.Spec.NodeName = nodes[rng.Intn(len(nodes))]
					pl.onPodUpsert(p.DeepCopy())
				case op == 4 && p != nil && p.Spec.NodeName != "":
					running(p, pl.clock.Now().Add(-time.Duration(rng.Intn(120))*time.Second))
					pl.onPodUpsert(p.DeepCopy())
				case op == 5 && p != nil && p.Spec.NodeName != "":
					p.Status.Phase = []v1.PodPhase{v1.PodSucceeded, v1.PodFailed}[rng.Intn(2)]
					pl.onPodUpsert(p.DeepCopy())
					delete(pods, id)
				case op == 6 && p != nil:
					pl.onPodDelete(p.DeepCopy())
					delete(pods, id)
				case op == 8:
					checkPreFilter(t, pl, seed, step, podWith("probe", fmt.Sprintf("%dm", rng.Intn(4000)), fmt.Sprintf("%dMi", rng.Intn(4000))))
				case op == 7:
					n := nodes[rng.Intn(len(nodes))]
					if rng.Intn(2) == 0 {
						pl.store.deleteNode(n)
					} else {
						pl.addNodes(nodeInfo(n, "10", "10Gi"))
					}
				}
				checkEstimates(t, pl, seed, step)
			}
			for _, p := range pods {
				pl.onPodDelete(p)
			}
			checkEstimates(t, pl, seed, -1)
			if n := pl.store.pendingCount(); n != 0 {
				t.Fatalf("seed %d: %d estimates left after every pod went away", seed, n)
			}
			for _, n := range nodes {
				if got, ok := pl.node(n); ok && (got.estCPU != 0 || got.scoreEstCPU != 0 || got.pending != 0) {
					t.Fatalf("seed %d: node %s keeps %+v after every pod went away", seed, n, got)
				}
			}
		})
	}
}

// checkEstimates verifies that each slot's estimate sums match the pods counted on it.
func checkEstimates(t *testing.T, pl *testPlugin, seed int64, step int) {
	t.Helper()
	s := pl.store
	s.mu.Lock()
	defer s.mu.Unlock()
	wantCPU, wantMem, wantN := map[int32]int64{}, map[int32]int64{}, map[int32]int{}
	scoreCPU, scoreMem := map[int32]int64{}, map[int32]int64{}
	for _, p := range s.pods {
		if s.meta[p.slot] == nil {
			t.Fatalf("seed %d step %d: a pod is counted on freed slot %d", seed, step, p.slot)
		}
		for _, part := range []usage{p.filter, p.score} {
			if part.MilliCPU < 0 || part.Memory < 0 || part.MilliCPU > p.estimate.MilliCPU || part.Memory > p.estimate.Memory {
				t.Fatalf("seed %d step %d: a pod counts %+v of its estimate %+v", seed, step, part, p.estimate)
			}
		}
		if p.filter == (usage{}) && p.score == (usage{}) {
			t.Fatalf("seed %d step %d: a pod is counted with nothing left of its estimate %+v", seed, step, p.estimate)
		}
		wantCPU[p.slot] += p.filter.MilliCPU
		wantMem[p.slot] += p.filter.Memory
		scoreCPU[p.slot] += p.score.MilliCPU
		scoreMem[p.slot] += p.score.Memory
		wantN[p.slot]++
	}
	for i, m := range s.meta {
		sl := s.slotAt(int32(i))
		if m == nil {
			continue
		}
		if sl.estCPU.Load() != wantCPU[int32(i)] || sl.estMem.Load() != wantMem[int32(i)] || m.pending != wantN[int32(i)] {
			t.Fatalf("seed %d step %d: slot %d (%s) holds %dm/%d bytes for %d pods, its pods sum to %dm/%d bytes for %d",
				seed, step, i, m.name, sl.estCPU.Load(), sl.estMem.Load(), m.pending, wantCPU[int32(i)], wantMem[int32(i)], wantN[int32(i)])
		}
		if sl.scoreEstCPU.Load() != scoreCPU[int32(i)] || sl.scoreEstMem.Load() != scoreMem[int32(i)] {
			t.Fatalf("seed %d step %d: slot %d (%s) holds %dm/%d bytes for the Score, its pods' parts sum to %dm/%d bytes",
				seed, step, i, m.name, sl.scoreEstCPU.Load(), sl.scoreEstMem.Load(), scoreCPU[int32(i)], scoreMem[int32(i)])
		}
		if cpu, mem := sl.room(); sl.sampleTime.Load() != 0 && (cpu < s.minRoomCPU.Load() || mem < s.minRoomMem.Load()) {
			t.Fatalf("seed %d step %d: slot %d room %d/%d below the stored lower bound %d/%d", seed, step, i, cpu, mem, s.minRoomCPU.Load(), s.minRoomMem.Load())
		}
		tight := s.tight.Load()
		if cpu, mem := sl.room(); sl.sampleTime.Load() != 0 && (cpu < tight.marginCPU || mem < tight.marginMem) && !slices.Contains(tight.slots, int32(i)) {
			t.Fatalf("seed %d step %d: slot %d room %d/%d is below the tight margin %d/%d but not in the tight list %v",
				seed, step, i, cpu, mem, tight.marginCPU, tight.marginMem, tight.slots)
		}
	}
}

// checkPreFilter compares PreFilter's set of rejected nodes with a check of every node.
func checkPreFilter(t *testing.T, pl *testPlugin, seed int64, step int, pod *v1.Pod) {
	t.Helper()
	ctx := context.Background()
	cs := framework.NewCycleState()
	_, status := pl.PreFilter(ctx, cs, pod, nil)
	var got map[string]rejection
	if status.IsSuccess() {
		s, err := getPreFilterState(cs)
		if err != nil {
			t.Fatal(err)
		}
		got = s.rejects
	} else if !status.IsSkip() {
		t.Fatalf("seed %d step %d: PreFilter = %v", seed, step, status)
	}
	est := pl.est.estimate(pod)
	freshAfter := pl.clock.Now().Add(-pl.staleness).UnixNano()
	v := pl.store.view()
	for name := range v.index {
		sl := v.lookup(name)
		ts := sl.sampleTime.Load()
		want := rejection(0)
		if ts != 0 && ts >= freshAfter {
			want = pl.check(sl, est)
		}
		if got[name] != want {
			t.Fatalf("seed %d step %d: PreFilter says node %s is %v for estimate %+v, a full check says %v", seed, step, name, got[name], est, want)
		}
	}
}

// TestRefreshRacesTheCycle runs refreshes (which aggregate without the store's lock) against
// Reserve, Unreserve, PreFilter, Score, pod updates and node churn at once. It asserts the estimates
// balance out; its real check is the race detector (make test-race runs the unit tests under it).
func TestRefreshRacesTheCycle(t *testing.T) {
	pl := newTestPlugin(t, defaultArgs(t, func(a *config.LoadAwareArgs) {
		a.MetricsStalenessSeconds = 3600
		a.UsageAggregation.Filter = config.LoadAwareAggregation{Type: config.AggregationP95, DurationSeconds: 300}
		a.UsageAggregation.Score = config.LoadAwareAggregation{Type: config.AggregationAvg, DurationSeconds: 120}
	}))
	const nodes = 64
	names := make([]string, nodes)
	for i := range names {
		names[i] = fmt.Sprint("n", i)
		pl.addNodes(nodeInfo(names[i], "10", "10Gi"))
	}
	samples := make(map[string]sample, nodes)
	now := epoch
	done := make(chan struct{})
	go func() {
		defer close(done)
		for k := 0; k < 200; k++ {
			for i, n := range names {
				samples[n] = sample{usage: usage{MilliCPU: int64((i*37 + k*101) % 9000), Memory: 1 << 30}, timestamp: now, window: 15 * time.Second}
			}
			pl.store.setSamples(samples, now, now.Add(-time.Hour))
			now = now.Add(15 * time.Second)
		}
	}()
	ctx := context.Background()
	for i := 0; ; i++ {
		select {
		case <-done:
			for j := 0; j < 100; j++ {
				pl.onPodDelete(podWith(fmt.Sprint("p", j), "1", ""))
			}
			checkEstimates(t, pl, 0, -1)
			if n := pl.store.pendingCount(); n != 0 {
				t.Fatalf("%d estimates left after every pod went away", n)
			}
			return
		default:
		}
		pod := podWith(fmt.Sprint("p", i%100), fmt.Sprintf("%dm", 100+i%3000), "")
		node := names[i%nodes]
		cs := framework.NewCycleState()
		pl.PreFilter(ctx, cs, pod, nil)
		pl.PreScore(ctx, cs, pod, nil)
		pl.Score(ctx, cs, pod, nodeInfo(node, "10", "10Gi"))
		switch i % 5 {
		case 0, 1:
			pl.Reserve(ctx, cs, pod, node)
		case 2:
			pl.Unreserve(ctx, cs, pod, node)
		case 3:
			bound := pod.DeepCopy()
			bound.Spec.NodeName = node
			pl.onPodUpsert(running(bound, epoch.Add(time.Duration(i)*time.Second)))
		case 4:
			if i%20 == 4 {
				pl.store.deleteNode(node)
				pl.addNodes(nodeInfo(node, "10", "10Gi"))
			}
		}
	}
}

// TestFutureSampleDoesNotFreezeTheNode: a sample stamped an hour ahead (a provider's clock running
// fast) is taken as of now, and the samples after it, correctly stamped, still come in.
func TestFutureSampleDoesNotFreezeTheNode(t *testing.T) {
	// The Filter reads the latest sample; the Score's max keeps a history to count samples in.
	pl := newTestPlugin(t, defaultArgs(t, func(a *config.LoadAwareArgs) {
		a.UsageAggregation.Score = config.LoadAwareAggregation{Type: config.AggregationMax, DurationSeconds: 300}
	}))
	pl.addNodes(nodeInfo("n", "10", "10Gi"))
	pl.lister.set(pl.clock.Now().Add(time.Hour), map[string][2]string{"n": {"9", "1Gi"}})
	pl.refreshNow(t)
	for i, cpu := range []string{"2", "3", "4"} {
		pl.clock.Step(15 * time.Second)
		pl.lister.set(pl.clock.Now(), map[string][2]string{"n": {cpu, "1Gi"}})
		pl.refreshNow(t)
		got, _ := pl.node("n")
		if want := int64(2000 + 1000*i); got.cpu != want {
			t.Fatalf("after sample %d (%s cpu): the node reads %dm, want %dm", i+1, cpu, got.cpu, want)
		}
	}
	// The same sample served twice is taken once.
	pl.refreshNow(t)
	if r := pl.store.meta[(*pl.store.index.Load())["n"]].ring; r.n != 4 {
		t.Errorf("the ring holds %d samples, want 4", r.n)
	}
}

// TestTightMarginFollowsRecentPods: one large pod widens the tight list's margin; two refresh
// intervals without such a pod bring it back to the pods PreFilter checks now.
func TestTightMarginFollowsRecentPods(t *testing.T) {
	ctx := context.Background()
	pl := newTestPlugin(t, defaultArgs(t))
	pl.addNodes(nodeInfo("hot", "10", "10Gi"), nodeInfo("cool", "10", "10Gi"))
	refresh := func() {
		pl.clock.Step(15 * time.Second)
		pl.lister.set(pl.clock.Now(), map[string][2]string{"hot": {"7", "1Gi"}, "cool": {"1", "1Gi"}})
		pl.refreshNow(t)
	}
	refresh()
	pl.PreFilter(ctx, framework.NewCycleState(), podWith("large", "6", ""), nil)
	if m := pl.store.tight.Load().marginCPU; m != 5100 {
		t.Fatalf("margin after a 6-cpu pod = %dm, want 5100m", m)
	}
	small := podWith("small", "2", "")
	// The large pod's interval, the one after it, then the small pods alone.
	for i, want := range []int64{5100, 5100, 1700} {
		pl.PreFilter(ctx, framework.NewCycleState(), small, nil)
		refresh()
		if m := pl.store.tight.Load().marginCPU; m != want {
			t.Fatalf("refresh %d after the large pod: margin %dm, want %dm", i+1, m, want)
		}
	}
	checkPreFilter(t, pl, 0, 0, podWith("large-again", "6", ""))
}

// TestRunningPodSeenBeforeThePublish: a pod first seen Running while a refresh has written a sample
// that shows it into the rings but not yet published the node's load from it is counted in full
// (the publish then drops it), not skipped: skipping it would leave it counted nowhere until the
// publish. And the pod informer's add does not wait for the refresh's ring writes.
func TestRunningPodSeenBeforeThePublish(t *testing.T) {
	pl := newTestPlugin(t, defaultArgs(t))
	pl.addNodes(nodeInfo("n", "10", "10Gi"))
	pl.lister.set(pl.clock.Now(), map[string][2]string{"n": {"1", "1Gi"}})
	pl.refreshNow(t)

	pod := podWith("p", "2", "")
	pod.Spec.NodeName = "n"
	running(pod, pl.clock.Now().Add(-time.Minute))
	var countedBefore bool
	var sawLoad int64
	pl.store.ringsWritten = func() {
		pl.onPodUpsert(pod)
		countedBefore = pl.store.tracked(pod.UID)
		got, _ := pl.node("n")
		sawLoad = got.cpu
	}
	pl.clock.Step(15 * time.Second)
	pl.lister.set(pl.clock.Now(), map[string][2]string{"n": {"3", "1Gi"}})
	pl.refreshNow(t)
	if !countedBefore || sawLoad != 1000+1700 {
		t.Errorf("between the ring write and the publish: counted %v, node load %dm; want counted, 2700m (the old sample plus the estimate)", countedBefore, sawLoad)
	}
	if got, _ := pl.node("n"); got.cpu != 3000 || got.pending != 0 {
		t.Errorf("after the publish: %+v, want the new sample's 3000m alone", got)
	}

	// While a refresh holds the ring lock, the add does not wait for it: it counts the estimate.
	pl.store.ringsWritten = nil
	other := podWith("q", "1", "")
	other.Spec.NodeName = "n"
	running(other, pl.clock.Now().Add(-time.Minute))
	pl.store.ringMu.Lock()
	done := make(chan struct{})
	go func() { pl.onPodUpsert(other); close(done) }()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("the pod informer's add waited for the ring lock")
	}
	pl.store.ringMu.Unlock()
	if !pl.store.tracked(other.UID) {
		t.Error("a Running pod added while the rings were locked was not counted")
	}
}
