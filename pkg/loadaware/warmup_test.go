package loadaware

import (
	"context"
	"fmt"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/kubernetes/pkg/scheduler/framework"

	"github.com/custom-scheduler/custom-scheduler/pkg/apis/config"
)

// TestEstimateKeptUntilUsageShows: a bound pod counts by estimate until a sample's window starts at
// least the warm-up after the pod started Running; finished and deleted pods stop counting at once.
// Samples have a 15s window; the warm-up is 30s.
func TestEstimateKeptUntilUsageShows(t *testing.T) {
	const estimate = 850 // 1 cpu at 85%
	tests := []struct {
		name string
		// runningAfter is when the pod starts Running, after its Reserve (negative: never).
		runningAfter time.Duration
		// sampleAfter is when the next sample is taken, after the Reserve.
		sampleAfter time.Duration
		// phase, when set, is the pod's last phase before the sample.
		phase       v1.PodPhase
		deleted     bool
		wantCounted bool
	}{
		{name: "not running yet: kept however late the sample", runningAfter: -1, sampleAfter: 10 * time.Minute, wantCounted: true},
		{name: "running, sample window starts before the warm-up ends", runningAfter: time.Minute, sampleAfter: time.Minute + 44*time.Second, wantCounted: true},
		{name: "running, sample window starts exactly when the warm-up ends", runningAfter: time.Minute, sampleAfter: time.Minute + 45*time.Second, wantCounted: false},
		{name: "running long before the sample", runningAfter: time.Second, sampleAfter: 5 * time.Minute, wantCounted: false},
		{name: "image pull: bound long before running, window covers the bind only", runningAfter: 2 * time.Minute, sampleAfter: 2*time.Minute + 20*time.Second, wantCounted: true},
		{name: "finished pods stop counting at once", runningAfter: -1, sampleAfter: time.Second, phase: v1.PodSucceeded, wantCounted: false},
		{name: "failed pods stop counting at once", runningAfter: time.Second, sampleAfter: 2 * time.Second, phase: v1.PodFailed, wantCounted: false},
		{name: "deleted pods stop counting at once", runningAfter: -1, sampleAfter: time.Second, deleted: true, wantCounted: false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			pl := newTestPlugin(t, defaultArgs(t, func(a *config.LoadAwareArgs) { a.MetricsStalenessSeconds = 3600 }))
			pl.addNodes(nodeInfo("n", "10", "10Gi"))
			pl.lister.set(epoch, map[string][2]string{"n": {"1", "1Gi"}})
			pl.refreshNow(t)

			pod := podWith("p", "1", "")
			pl.Reserve(ctx, framework.NewCycleState(), pod, "n")
			reserved := pl.clock.Now()
			bound := pod.DeepCopy()
			bound.Spec.NodeName = "n"
			pl.onPodUpsert(bound)
			if tc.runningAfter >= 0 {
				running(bound, reserved.Add(tc.runningAfter))
				pl.onPodUpsert(bound)
			}
			if tc.phase != "" {
				bound.Status.Phase = tc.phase
				pl.onPodUpsert(bound)
			}
			if tc.deleted {
				pl.onPodDelete(bound)
			}
			pl.clock.SetTime(reserved.Add(tc.sampleAfter))
			pl.lister.set(pl.clock.Now(), map[string][2]string{"n": {"1", "1Gi"}})
			pl.refreshNow(t)

			got, _ := pl.node("n")
			want := nodeState{sampled: true, cpu: 1000, scoreCPU: 1000, mem: 1 << 30}
			if tc.wantCounted {
				// The pod sets no memory: 200Mi by default.
				want.cpu, want.mem, want.estCPU, want.scoreEstCPU, want.pending = 1000+estimate, 1<<30+200<<20, estimate, estimate, 1
			}
			if got != want {
				t.Errorf("node after the sample = %+v, want %+v", got, want)
			}
		})
	}
}

// TestRunningSince reads when a pod's usage starts: all containers running, the latest start.
func TestRunningSince(t *testing.T) {
	start := epoch.Add(-time.Minute)
	later := epoch
	two := podWith("p", "1", "")
	running(two, start)
	two.Status.ContainerStatuses = append(two.Status.ContainerStatuses, two.Status.ContainerStatuses[0])
	two.Status.ContainerStatuses[1].State.Running = running(podWith("q", "", ""), later).Status.ContainerStatuses[0].State.Running
	waiting := running(podWith("w", "1", ""), start)
	waiting.Status.ContainerStatuses = append(waiting.Status.ContainerStatuses, v1.ContainerStatus{Name: "slow", State: v1.ContainerState{Waiting: &v1.ContainerStateWaiting{Reason: "ContainerCreating"}}})
	finished := running(podWith("f", "1", ""), start)
	finished.Status.ContainerStatuses = append(finished.Status.ContainerStatuses, v1.ContainerStatus{Name: "job", State: v1.ContainerState{Terminated: &v1.ContainerStateTerminated{ExitCode: 0, StartedAt: metav1Time(later), FinishedAt: metav1Time(later.Add(time.Second))}}})
	restarted := running(podWith("r", "1", ""), start)
	restarted.Status.ContainerStatuses = append(restarted.Status.ContainerStatuses, v1.ContainerStatus{Name: "crashy", RestartCount: 1, State: v1.ContainerState{Running: &v1.ContainerStateRunning{StartedAt: metav1Time(later.Add(time.Hour))}}})
	backoff := running(podWith("b", "1", ""), start)
	backoff.Status.ContainerStatuses = append(backoff.Status.ContainerStatuses, v1.ContainerStatus{Name: "crashy", RestartCount: 3, State: v1.ContainerState{Waiting: &v1.ContainerStateWaiting{Reason: "CrashLoopBackOff"}}})
	podStart := start.Add(-time.Minute)
	allRestarted := running(podWith("a", "1", ""), later)
	allRestarted.Status.ContainerStatuses[0].RestartCount = 2
	allRestarted.Status.StartTime = &metav1.Time{Time: podStart}
	tests := []struct {
		name   string
		pod    *v1.Pod
		want   time.Time
		wantOK bool
	}{
		{"pending", podWith("p", "1", ""), time.Time{}, false},
		{"one container running", running(podWith("p", "1", ""), start), start, true},
		{"the last container to start decides", two, later, true},
		{"a container still waiting", waiting, time.Time{}, false},
		{"a finished container counts from its start", finished, later, true},
		{"a restarted container does not make the pod new", restarted, start, true},
		{"a container in back-off after a restart does not either", backoff, start, true},
		{"every container restarted: the pod's start", allRestarted, podStart, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := runningSince(tc.pod)
			if ok != tc.wantOK || !got.Equal(tc.want) {
				t.Errorf("runningSince = %v, %v; want %v, %v", got, ok, tc.want, tc.wantOK)
			}
		})
	}
}

// TestEstimateLastsUntilTheAggregationShowsIt is the scenario of a node that takes a large pod after
// a quiet hour, for every aggregation: samples every 15s with a 15s window, the node at 1 of 10 cpu,
// then a 7-cpu pod (estimated at 5950m) is reserved, starts Running, and the node's samples show 7
// cpu from then on. After every refresh the load the Filter and the Score see (aggregation plus
// estimates) must not read less than the node really uses, less the estimate's error (50m); the
// estimate must go once the aggregation shows the pod (wantGoneAfter covering samples), not before.
func TestEstimateLastsUntilTheAggregationShowsIt(t *testing.T) {
	const refresh = 15 * time.Second
	tests := []struct {
		agg config.LoadAwareAggregation
		// wantGoneAfter is how many samples whose window starts after the warm-up it takes.
		wantGoneAfter int
	}{
		{config.LoadAwareAggregation{Type: config.AggregationLatest}, 1},
		{config.LoadAwareAggregation{Type: config.AggregationMax, DurationSeconds: 120}, 1},
		// 21 samples in 300s: p95 is the 20th smallest, so one high sample is ignored, two are not.
		{config.LoadAwareAggregation{Type: config.AggregationP95, DurationSeconds: 300}, 2},
		// 21 samples: p90 is the 19th smallest, three high samples are needed.
		{config.LoadAwareAggregation{Type: config.AggregationP90, DurationSeconds: 300}, 3},
		// 9 samples in 120s: the average shows k/9 of the pod; all of it once every one does.
		{config.LoadAwareAggregation{Type: config.AggregationAvg, DurationSeconds: 120}, 9},
	}
	for _, tc := range tests {
		for _, target := range []string{"filter", "score"} {
			t.Run(fmt.Sprintf("%s %ds %s", tc.agg.Type, tc.agg.DurationSeconds, target), func(t *testing.T) {
				ctx := context.Background()
				pl := newTestPlugin(t, defaultArgs(t, func(a *config.LoadAwareArgs) {
					a.MetricsRefreshIntervalSeconds = 15
					a.MetricsStalenessSeconds = 60
					if target == "filter" {
						a.UsageAggregation.Filter = tc.agg
					} else {
						a.UsageAggregation.Score = tc.agg
					}
				}))
				pl.addNodes(nodeInfo("n", "10", "10Gi"))
				sampleNow := func(cpu string) {
					pl.clock.Step(refresh)
					pl.lister.set(pl.clock.Now(), map[string][2]string{"n": {cpu, "1Gi"}})
					pl.refreshNow(t)
				}
				for i := 0; i < 40; i++ {
					sampleNow("1")
				}
				pod := podWith("big", "7", "")
				pl.Reserve(ctx, framework.NewCycleState(), pod, "n")
				bound := pod.DeepCopy()
				bound.Spec.NodeName = "n"
				pl.onPodUpsert(bound)
				started := pl.clock.Now().Add(time.Second)
				readyAt := started.Add(pl.warmup)
				pl.clock.Step(time.Second)
				pl.onPodUpsert(running(bound, started))

				covering := 0
				for i := 0; i < 30; i++ {
					sampleNow("7")
					// A sample whose window began within the warm-up shows the pod but does not count.
					if !pl.clock.Now().Add(-refresh).Before(readyAt) {
						covering++
					}
					got, _ := pl.node("n")
					load := got.cpu
					if target == "score" {
						load = got.scoreCPU + got.scoreEstCPU
					}
					if load < 7000-50 {
						t.Fatalf("after %d samples showing the pod (%d past the warm-up) the %s reads %dm, the node uses 7000m", i+1, covering, target, load)
					}
					gone := got.pending == 0
					if want := covering >= tc.wantGoneAfter; gone != want {
						t.Fatalf("after %d samples past the warm-up: estimate gone %v, want %v (gone after %d)", covering, gone, want, tc.wantGoneAfter)
					}
				}
			})
		}
	}
}

// TestUnreflected pins the part of a ready pod's estimate each aggregation leaves counted, for k of
// n samples showing the pod.
func TestUnreflected(t *testing.T) {
	const readyAt = 1000
	tests := []struct {
		kind     config.LoadAwareAggregationType
		n, k     int
		num, den int64
	}{
		{config.AggregationLatest, 1, 0, 1, 1},
		{config.AggregationLatest, 1, 1, 0, 1},
		{config.AggregationMax, 10, 0, 1, 1},
		{config.AggregationMax, 10, 1, 0, 1},
		{config.AggregationAvg, 10, 0, 10, 10},
		{config.AggregationAvg, 10, 3, 7, 10},
		{config.AggregationAvg, 10, 10, 0, 10},
		{config.AggregationP95, 20, 1, 1, 1}, // rank 19 of 20: one high sample is a spike
		{config.AggregationP95, 20, 2, 0, 1},
		{config.AggregationP95, 19, 1, 0, 1}, // rank 19 of 19: the highest decides
		{config.AggregationP90, 20, 2, 1, 1}, // rank 18 of 20
		{config.AggregationP90, 20, 3, 0, 1},
		{config.AggregationP95, 1, 1, 0, 1},
		{config.AggregationAvg, 0, 0, 1, 1}, // no sample yet
	}
	for _, tc := range tests {
		t.Run(fmt.Sprintf("%s n=%d k=%d", tc.kind, tc.n, tc.k), func(t *testing.T) {
			r := newRing(32)
			// n samples 10 apart, the newest k of them starting at readyAt or later.
			for j := tc.n - 1; j >= 0; j-- {
				start := int64(readyAt - 1 - j)
				if j < tc.k {
					start = readyAt + int64(tc.k-1-j)*10
				}
				r.push(ringSample{ts: start + 15, start: start})
			}
			a := newAggregation(config.LoadAwareAggregation{Type: tc.kind, DurationSeconds: 60})
			num, den := a.unreflected(&r, tc.n, readyAt)
			if num != tc.num || den != tc.den {
				t.Errorf("unreflected = %d/%d, want %d/%d", num, den, tc.num, tc.den)
			}
		})
	}
}
