package loadaware

import (
	"context"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
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
				want.cpu, want.mem, want.estCPU, want.pending = 1000+estimate, 1<<30+200<<20, estimate, 1
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
