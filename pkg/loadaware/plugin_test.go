package loadaware

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/klog/v2/ktesting"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework"
	st "k8s.io/kubernetes/pkg/scheduler/testing"

	"github.com/custom-scheduler/custom-scheduler/pkg/apis/config"
)

func TestFilter(t *testing.T) {
	tests := []struct {
		name    string
		args    func(*config.LoadAwareArgs)
		usage   map[string][2]string // served metrics
		sampled time.Duration        // sample age at Filter time
		failAPI bool                 // the last refresh failed
		node    fwk.NodeInfo
		others  []string // more nodes the informer knows (10 cpu, 10Gi)
		pod     *v1.Pod
		want    fwk.Code
		reason  string
	}{
		{
			name:  "under the thresholds",
			usage: map[string][2]string{"n": {"5", "4Gi"}},
			node:  nodeInfo("n", "10", "10Gi"),
			pod:   podWith("p", "1", "1Gi"),
			want:  fwk.Success,
		},
		{
			name:   "cpu over the threshold with the pod's estimate",
			usage:  map[string][2]string{"n": {"7500m", "4Gi"}},
			node:   nodeInfo("n", "10", "10Gi"),
			pod:    podWith("p", "1", "1Gi"), // 7.5 + 0.85 = 8.35 > 8
			want:   fwk.UnschedulableAndUnresolvable,
			reason: "node cpu usage (measured, plus estimates for new pods and this one) exceeds the LoadAware threshold of 80 percent",
		},
		{
			name:  "exactly at the threshold passes",
			usage: map[string][2]string{"n": {"7150m", "4Gi"}},
			node:  nodeInfo("n", "10", "10Gi"),
			pod:   podWith("p", "1", "1Gi"), // 7.15 + 0.85 = 8.0
			want:  fwk.Success,
		},
		{
			name:   "memory over the threshold",
			usage:  map[string][2]string{"n": {"1", "9Gi"}},
			node:   nodeInfo("n", "10", "10Gi"),
			pod:    podWith("p", "100m", "1Gi"), // 9 + 0.7 > 9
			want:   fwk.UnschedulableAndUnresolvable,
			reason: "node memory usage (measured, plus estimates for new pods and this one) exceeds the LoadAware threshold of 90 percent",
		},
		{
			name:  "a threshold of 0 is off",
			args:  func(a *config.LoadAwareArgs) { a.UsageThresholds.CPU = 0 },
			usage: map[string][2]string{"n": {"9900m", "4Gi"}},
			node:  nodeInfo("n", "10", "10Gi"),
			pod:   podWith("p", "1", "1Gi"),
			want:  fwk.Success,
		},
		{
			name:  "zero allocatable is left to NodeResourcesFit",
			usage: map[string][2]string{"n": {"9900m", "4Gi"}},
			node:  nodeInfo("n", "", "10Gi"),
			pod:   podWith("p", "1", "1Gi"),
			want:  fwk.Success,
		},
		{
			name:  "missing metrics pass by default",
			usage: map[string][2]string{"other": {"9900m", "4Gi"}},
			node:  nodeInfo("n", "10", "10Gi"),
			pod:   podWith("p", "1", "1Gi"),
			want:  fwk.Success,
		},
		{
			name:   "missing metrics are rejected with Reject",
			args:   func(a *config.LoadAwareArgs) { a.FilterMissingMetrics = config.LoadAwareMissingMetricsReject },
			usage:  map[string][2]string{"other": {"1", "4Gi"}},
			node:   nodeInfo("n", "10", "10Gi"),
			others: []string{"other"},
			pod:    podWith("p", "1", "1Gi"),
			want:   fwk.UnschedulableAndUnresolvable,
			reason: "node has no fresh metrics.k8s.io sample (LoadAware filterMissingMetrics=Reject)",
		},
		{
			name:   "Reject with half the nodes sampled: still rejected",
			args:   func(a *config.LoadAwareArgs) { a.FilterMissingMetrics = config.LoadAwareMissingMetricsReject },
			usage:  map[string][2]string{"a": {"1", "4Gi"}, "b": {"1", "4Gi"}},
			node:   nodeInfo("n", "10", "10Gi"),
			others: []string{"a", "b", "c"},
			pod:    podWith("p", "1", "1Gi"),
			want:   fwk.UnschedulableAndUnresolvable,
			reason: "node has no fresh metrics.k8s.io sample (LoadAware filterMissingMetrics=Reject)",
		},
		{
			name:   "Reject with fewer than half the nodes sampled: taken as an outage, passes",
			args:   func(a *config.LoadAwareArgs) { a.FilterMissingMetrics = config.LoadAwareMissingMetricsReject },
			usage:  map[string][2]string{"a": {"1", "4Gi"}},
			node:   nodeInfo("n", "10", "10Gi"),
			others: []string{"a", "b"},
			pod:    podWith("p", "1", "1Gi"),
			want:   fwk.Success,
		},
		{
			name:  "Reject with an empty answer: taken as an outage, passes",
			args:  func(a *config.LoadAwareArgs) { a.FilterMissingMetrics = config.LoadAwareMissingMetricsReject },
			usage: map[string][2]string{},
			node:  nodeInfo("n", "10", "10Gi"),
			pod:   podWith("p", "1", "1Gi"),
			want:  fwk.Success,
		},
		{
			name:    "stale metrics pass by default",
			usage:   map[string][2]string{"n": {"9900m", "4Gi"}},
			sampled: 181 * time.Second,
			node:    nodeInfo("n", "10", "10Gi"),
			pod:     podWith("p", "1", "1Gi"),
			want:    fwk.Success,
		},
		{
			name:    "stale metrics are rejected with Reject",
			args:    func(a *config.LoadAwareArgs) { a.FilterMissingMetrics = config.LoadAwareMissingMetricsReject },
			usage:   map[string][2]string{"n": {"1", "4Gi"}},
			sampled: 181 * time.Second,
			node:    nodeInfo("n", "10", "10Gi"),
			pod:     podWith("p", "1", "1Gi"),
			want:    fwk.UnschedulableAndUnresolvable,
			reason:  "node has no fresh metrics.k8s.io sample (LoadAware filterMissingMetrics=Reject)",
		},
		{
			name:    "sample within the staleness limit still counts",
			usage:   map[string][2]string{"n": {"9900m", "4Gi"}},
			sampled: 179 * time.Second,
			node:    nodeInfo("n", "10", "10Gi"),
			pod:     podWith("p", "1", "1Gi"),
			want:    fwk.UnschedulableAndUnresolvable,
			reason:  "node cpu usage (measured, plus estimates for new pods and this one) exceeds the LoadAware threshold of 80 percent",
		},
		{
			name:    "during an outage missing metrics pass even with Reject",
			args:    func(a *config.LoadAwareArgs) { a.FilterMissingMetrics = config.LoadAwareMissingMetricsReject },
			usage:   map[string][2]string{"other": {"1", "4Gi"}},
			failAPI: true,
			node:    nodeInfo("n", "10", "10Gi"),
			pod:     podWith("p", "1", "1Gi"),
			want:    fwk.Success,
		},
		{
			name:    "during an outage fresh samples still count",
			usage:   map[string][2]string{"n": {"9900m", "4Gi"}},
			failAPI: true,
			node:    nodeInfo("n", "10", "10Gi"),
			pod:     podWith("p", "1", "1Gi"),
			want:    fwk.UnschedulableAndUnresolvable,
			reason:  "node cpu usage (measured, plus estimates for new pods and this one) exceeds the LoadAware threshold of 80 percent",
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var mods []func(*config.LoadAwareArgs)
			if tc.args != nil {
				mods = append(mods, tc.args)
			}
			pl := newTestPlugin(t, defaultArgs(t, mods...))
			pl.addNodes(tc.node)
			for _, n := range tc.others {
				pl.addNodes(nodeInfo(n, "10", "10Gi"))
			}
			pl.lister.set(epoch, tc.usage)
			pl.refreshNow(t)
			if tc.failAPI {
				pl.lister.err = errors.New("boom")
				pl.refreshNow(t)
			}
			pl.clock.Step(tc.sampled)
			ctx := context.Background()
			cs := framework.NewCycleState()
			_, status := pl.PreFilter(ctx, cs, tc.pod, nil)
			if status.IsSkip() {
				if tc.want != fwk.Success {
					t.Fatalf("PreFilter skipped, want Filter to return %v", tc.want)
				}
				return
			}
			if !status.IsSuccess() {
				t.Fatalf("PreFilter: %v", status)
			}
			got := pl.Filter(ctx, cs, tc.pod, tc.node)
			if got.Code() != tc.want {
				t.Fatalf("Filter = %v, want %v", got, tc.want)
			}
			if tc.reason != "" && got.Message() != tc.reason {
				t.Errorf("Filter reason = %q, want %q", got.Message(), tc.reason)
			}
		})
	}
}

func TestPreFilterSkips(t *testing.T) {
	ctx := context.Background()
	off := newTestPlugin(t, defaultArgs(t, func(a *config.LoadAwareArgs) { a.UsageThresholds = config.LoadAwareResources{} }))
	off.lister.set(epoch, map[string][2]string{"n": {"1", "1Gi"}})
	off.refreshNow(t)
	if _, s := off.PreFilter(ctx, framework.NewCycleState(), podWith("p", "1", ""), nil); !s.IsSkip() {
		t.Errorf("PreFilter with every threshold off = %v, want Skip", s)
	}
	empty := newTestPlugin(t, defaultArgs(t))
	if _, s := empty.PreFilter(ctx, framework.NewCycleState(), podWith("p", "1", ""), nil); !s.IsSkip() {
		t.Errorf("PreFilter with nothing known = %v, want Skip", s)
	}
	if s := empty.PreScore(ctx, framework.NewCycleState(), podWith("p", "1", ""), nil); !s.IsSkip() {
		t.Errorf("PreScore with nothing known = %v, want Skip", s)
	}
}

// TestEstimatesOfReservedPods: pods reserved after a node's sample count by estimate until a sample
// covers them, so a burst spreads; Unreserve takes the estimate back.
func TestEstimatesOfReservedPods(t *testing.T) {
	ctx := context.Background()
	pl := newTestPlugin(t, defaultArgs(t))
	pl.lister.set(epoch, map[string][2]string{"n": {"2", "1Gi"}})
	node := nodeInfo("n", "10", "100Gi")
	pl.addNodes(node)
	pl.refreshNow(t)

	filter := func(p *v1.Pod) fwk.Code {
		cs := framework.NewCycleState()
		if _, s := pl.PreFilter(ctx, cs, p, nil); s.IsSkip() {
			return fwk.Success
		} else if !s.IsSuccess() {
			t.Fatalf("PreFilter: %v", s)
		}
		if s := pl.Filter(ctx, cs, p, node); !s.IsSuccess() {
			return s.Code()
		}
		return fwk.Success
	}
	// 2 cpu measured; each 1-cpu pod is estimated at 850m. After 7 reservations, 2 + 7*0.85 = 7.95:
	// the 8th pod (8.8) no longer fits under 80%.
	for i := 0; i < 7; i++ {
		p := podWith(string(rune('a'+i)), "1", "")
		if got := filter(p); got != fwk.Success {
			t.Fatalf("pod %d: Filter = %v, want Success", i, got)
		}
		cs := framework.NewCycleState()
		pl.PreFilter(ctx, cs, p, nil)
		pl.Reserve(ctx, cs, p, "n")
	}
	last := podWith("last", "1", "")
	if got := filter(last); got != fwk.UnschedulableAndUnresolvable {
		t.Fatalf("8th pod: Filter = %v, want UnschedulableAndUnresolvable", got)
	}
	pl.Unreserve(ctx, nil, podWith("a", "1", ""), "n")
	if got := filter(last); got != fwk.Success {
		t.Fatalf("after Unreserve: Filter = %v, want Success", got)
	}

	// Samples do not replace the estimates of pods that are not Running yet, however late they come.
	pl.clock.Step(10 * time.Minute)
	pl.lister.set(pl.clock.Now(), map[string][2]string{"n": {"2", "1Gi"}})
	pl.refreshNow(t)
	if got, _ := pl.node("n"); got.pending != 6 || got.cpu != 2000+6*850 {
		t.Fatalf("after a late sample: %+v, want 6 pending estimates on top of 2000m", got)
	}
}

func TestStrategyScore(t *testing.T) {
	tests := []struct {
		strategy config.LoadAwareScoringStrategyType
		target   int64
		in, want int64
	}{
		{config.LeastUtilized, 0, 0, 100},
		{config.LeastUtilized, 0, 2500, 75},
		{config.LeastUtilized, 0, 10000, 0},
		{config.LeastUtilized, 0, 15000, 0}, // over allocatable clamps
		{config.TargetUtilization, 60, 0, 50},
		{config.TargetUtilization, 60, 3000, 75},
		{config.TargetUtilization, 60, 6000, 100},
		{config.TargetUtilization, 60, 8000, 50},
		{config.TargetUtilization, 60, 10000, 0},
		{config.TargetUtilization, 60, 12000, 0},
	}
	for _, tc := range tests {
		pl := newTestPlugin(t, defaultArgs(t, func(a *config.LoadAwareArgs) {
			a.ScoringStrategy = config.LoadAwareScoringStrategy{Type: tc.strategy, TargetUtilizationPercent: tc.target}
		}))
		if got := pl.strategyScore(tc.in); got != tc.want {
			t.Errorf("%s(target %d%%) of %d bp = %d, want %d", tc.strategy, tc.target, tc.in, got, tc.want)
		}
	}
}

func TestUtilization(t *testing.T) {
	tests := []struct {
		name        string
		cpuW, memW  int64
		used        usage
		cpu, memory string
		want        int64
	}{
		{"equal weights average", 1, 1, usage{MilliCPU: 5000, Memory: 1 << 30}, "10", "10Gi", 3000},
		{"weights", 3, 1, usage{MilliCPU: 5000, Memory: 1 << 30}, "10", "10Gi", 4000},
		{"weight 0 leaves a resource out", 1, 0, usage{MilliCPU: 5000, Memory: 9 << 30}, "10", "10Gi", 5000},
		{"zero allocatable leaves a resource out", 1, 1, usage{MilliCPU: 5000, Memory: 1 << 30}, "10", "", 5000},
		{"nothing left is unknown", 1, 1, usage{MilliCPU: 5000}, "", "", unknownScore},
		{"over allocatable stays in natural units", 1, 0, usage{MilliCPU: 12000}, "10", "10Gi", 12000},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			pl := newTestPlugin(t, defaultArgs(t, func(a *config.LoadAwareArgs) {
				a.ResourceWeights = config.LoadAwareResources{CPU: tc.cpuW, Memory: tc.memW}
			}))
			if got := pl.utilization(tc.used, nodeInfo("n", tc.cpu, tc.memory).GetAllocatable()); got != tc.want {
				t.Errorf("utilization = %d, want %d", got, tc.want)
			}
		})
	}
}

func TestNormalizeScore(t *testing.T) {
	tests := []struct {
		name     string
		strategy config.LoadAwareScoringStrategyType
		raw      []int64
		want     []int64
	}{
		{"one node", config.LeastUtilized, []int64{2000}, []int64{80}},
		{"all equal", config.LeastUtilized, []int64{5000, 5000, 5000}, []int64{50, 50, 50}},
		{"absolute, not min-max", config.LeastUtilized, []int64{3000, 3100}, []int64{70, 69}},
		{"unknown nodes score the mean of the known", config.LeastUtilized, []int64{2000, unknownScore, 6000}, []int64{80, 60, 40}},
		{"all unknown score 0", config.LeastUtilized, []int64{unknownScore, unknownScore}, []int64{0, 0}},
		{"overloaded clamps to 0", config.LeastUtilized, []int64{25000, 0}, []int64{0, 100}},
		{"target utilization packs", config.TargetUtilization, []int64{1000, 6000, 9000}, []int64{58, 100, 25}},
		{"empty list", config.LeastUtilized, nil, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			pl := newTestPlugin(t, defaultArgs(t, func(a *config.LoadAwareArgs) { a.ScoringStrategy.Type = tc.strategy }))
			scores := make(fwk.NodeScoreList, len(tc.raw))
			for i, r := range tc.raw {
				scores[i] = fwk.NodeScore{Name: string(rune('a' + i)), Score: r}
			}
			if s := pl.NormalizeScore(context.Background(), nil, nil, scores); !s.IsSuccess() {
				t.Fatal(s)
			}
			var got []int64
			for _, s := range scores {
				if s.Score < 0 || s.Score > fwk.MaxNodeScore {
					t.Errorf("score %d of %s is out of [0, %d]", s.Score, s.Name, fwk.MaxNodeScore)
				}
				got = append(got, s.Score)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("normalized scores (-want,+got):\n%s", diff)
			}
		})
	}
}

// TestScoreEndToEnd runs PreScore, Score and NormalizeScore over nodes with different loads.
func TestScoreEndToEnd(t *testing.T) {
	ctx := context.Background()
	pl := newTestPlugin(t, defaultArgs(t))
	pl.lister.set(epoch, map[string][2]string{"cool": {"2", "2Gi"}, "warm": {"6", "6Gi"}})
	pl.refreshNow(t)
	pod := podWith("p", "1", "1Gi")
	nodes := []fwk.NodeInfo{nodeInfo("cool", "10", "10Gi"), nodeInfo("warm", "10", "10Gi"), nodeInfo("unknown", "10", "10Gi")}
	cs := framework.NewCycleState()
	if s := pl.PreScore(ctx, cs, pod, nodes); !s.IsSuccess() {
		t.Fatal(s)
	}
	scores := make(fwk.NodeScoreList, len(nodes))
	for i, n := range nodes {
		raw, s := pl.Score(ctx, cs, pod, n)
		if !s.IsSuccess() {
			t.Fatal(s)
		}
		scores[i] = fwk.NodeScore{Name: n.Node().Name, Score: raw}
	}
	// cool: cpu 2.85/10, memory 2.7/10 → 2775 bp; warm: 6.85 and 6.7 → 6775 bp.
	if scores[0].Score != 2775 || scores[1].Score != 6775 || scores[2].Score != unknownScore {
		t.Fatalf("raw scores = %v, want [2775 6775 %d]", scores, unknownScore)
	}
	pl.NormalizeScore(ctx, cs, pod, scores)
	if !(scores[0].Score > scores[2].Score && scores[2].Score > scores[1].Score) {
		t.Errorf("normalized scores %v: want cool > unknown (neutral) > warm", scores)
	}
}

func TestEstimator(t *testing.T) {
	always := v1.ContainerRestartPolicyAlways
	res := func(cpu, mem string) v1.ResourceList {
		l := v1.ResourceList{}
		if cpu != "" {
			l[v1.ResourceCPU] = resource.MustParse(cpu)
		}
		if mem != "" {
			l[v1.ResourceMemory] = resource.MustParse(mem)
		}
		return l
	}
	container := func(req, lim v1.ResourceList) v1.Container {
		return v1.Container{Name: "c", Resources: v1.ResourceRequirements{Requests: req, Limits: lim}}
	}
	tests := []struct {
		name string
		pod  *v1.Pod
		want usage
	}{
		{"requests scaled", &v1.Pod{Spec: v1.PodSpec{Containers: []v1.Container{container(res("1", "1000Mi"), nil)}}},
			usage{MilliCPU: 850, Memory: 700 << 20}},
		{"limits win over requests", &v1.Pod{Spec: v1.PodSpec{Containers: []v1.Container{container(res("1", "1000Mi"), res("2", "2000Mi"))}}},
			usage{MilliCPU: 1700, Memory: 1400 << 20}},
		{"BestEffort gets the defaults", &v1.Pod{Spec: v1.PodSpec{Containers: []v1.Container{container(nil, nil)}}},
			usage{MilliCPU: 100, Memory: 200 << 20}},
		{"per container, per resource", &v1.Pod{Spec: v1.PodSpec{Containers: []v1.Container{container(res("1", ""), nil), container(nil, nil)}}},
			usage{MilliCPU: 850 + 100, Memory: 200<<20 + 200<<20}},
		{"sidecars count, init containers do not", &v1.Pod{Spec: v1.PodSpec{
			InitContainers: []v1.Container{container(res("4", "4000Mi"), nil), func() v1.Container {
				c := container(res("1", "1000Mi"), nil)
				c.RestartPolicy = &always
				return c
			}()},
			Containers: []v1.Container{container(res("1", "1000Mi"), nil)},
		}}, usage{MilliCPU: 1700, Memory: 1400 << 20}},
		{"overhead is added", &v1.Pod{Spec: v1.PodSpec{Containers: []v1.Container{container(res("1", "1000Mi"), nil)}, Overhead: res("100m", "10Mi")}},
			usage{MilliCPU: 950, Memory: 710 << 20}},
		{"pod-level resources replace the sum", &v1.Pod{Spec: v1.PodSpec{
			Containers: []v1.Container{container(nil, nil), container(nil, nil)},
			Resources:  &v1.ResourceRequirements{Limits: res("2", "")},
		}}, usage{MilliCPU: 1700, Memory: 400 << 20}},
	}
	e := newEstimator(defaultArgs(t).Estimation)
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, e.estimate(tc.pod)); diff != "" {
				t.Errorf("estimate (-want,+got):\n%s", diff)
			}
		})
	}
}

func TestSignPod(t *testing.T) {
	pl := newTestPlugin(t, defaultArgs(t))
	sign := func(p *v1.Pod) any {
		f, s := pl.SignPod(context.Background(), p)
		if !s.IsSuccess() || len(f) != 1 || f[0].Key != podSignerName {
			t.Fatalf("SignPod = %v, %v", f, s)
		}
		return f[0].Value
	}
	if a, b := sign(podWith("a", "1", "1Gi")), sign(podWith("b", "1", "1Gi")); a != b {
		t.Errorf("pods with equal resources signed differently: %v, %v", a, b)
	}
	if a, b := sign(podWith("a", "1", "1Gi")), sign(podWith("b", "2", "1Gi")); a == b {
		t.Errorf("pods with different resources signed alike: %v", a)
	}
}

// TestRefresh covers the background refresh: outage state, samples ageing out, pod events.
func TestRefresh(t *testing.T) {
	pl := newTestPlugin(t, defaultArgs(t))
	pl.lister.set(epoch, map[string][2]string{"n": {"1", "1Gi"}})
	pl.refreshNow(t)
	if pl.apiState.Load() != apiAvailable {
		t.Fatalf("state after a successful fetch = %d, want available", pl.apiState.Load())
	}
	pl.lister.err = errors.New("the server is currently unable to handle the request")
	pl.clock.Step(30 * time.Second)
	pl.refreshNow(t)
	if pl.apiState.Load() != apiUnavailable {
		t.Fatalf("state after a failed fetch = %d, want unavailable", pl.apiState.Load())
	}
	if got, _ := pl.node("n"); !got.sampled {
		t.Fatalf("a failed fetch dropped a sample that is not stale yet")
	}
	pl.clock.Step(160 * time.Second)
	pl.refreshNow(t)
	if got, ok := pl.node("n"); ok {
		t.Fatalf("sample older than the staleness limit still cached: %+v", got)
	}

	// Pods bound by someone else are estimated until they run; pods running for long are ignored.
	pl.lister.err = nil
	pl.lister.set(pl.clock.Now(), map[string][2]string{"n": {"1", "1Gi"}})
	pl.refreshNow(t)
	pl.clock.Step(time.Second)
	bound := podWith("bound", "1", "")
	bound.Spec.NodeName = "n"
	bound.Status.Conditions = []v1.PodCondition{{Type: v1.PodScheduled, Status: v1.ConditionTrue, LastTransitionTime: metav1Time(pl.clock.Now())}}
	pl.onPodUpsert(bound)
	old := podWith("old", "1", "")
	old.Spec.NodeName = "n"
	running(old, pl.clock.Now().Add(-time.Hour))
	pl.onPodUpsert(old)
	if got, _ := pl.node("n"); got.pending != 1 || got.cpu != 1850 {
		t.Fatalf("after pod events: %+v, want 1 pending and 1850m", got)
	}
	pl.onPodDelete(bound)
	if got, _ := pl.node("n"); got.pending != 0 || got.cpu != 1000 {
		t.Fatalf("after the pod's deletion: %+v, want the sample alone", got)
	}
}

func TestQueueingHints(t *testing.T) {
	logger, _ := ktesting.NewTestContext(t)
	pl := newTestPlugin(t, defaultArgs(t))
	pod := podWith("p", "1", "")
	small := st.MakeNode().Name("n").Capacity(map[v1.ResourceName]string{v1.ResourceCPU: "4", v1.ResourceMemory: "8Gi"}).Obj()
	big := st.MakeNode().Name("n").Capacity(map[v1.ResourceName]string{v1.ResourceCPU: "8", v1.ResourceMemory: "8Gi"}).Obj()
	assigned := podWith("other", "1", "")
	assigned.Spec.NodeName = "n"
	tests := []struct {
		name     string
		fn       fwk.QueueingHintFn
		old, new interface{}
		want     fwk.QueueingHint
	}{
		{"node added", pl.isSchedulableAfterNodeChange, nil, small, fwk.Queue},
		{"allocatable grew", pl.isSchedulableAfterNodeChange, small, big, fwk.Queue},
		{"allocatable shrank", pl.isSchedulableAfterNodeChange, big, small, fwk.QueueSkip},
		{"assigned pod deleted", pl.isSchedulableAfterPodDelete, assigned, nil, fwk.Queue},
		{"unassigned pod deleted", pl.isSchedulableAfterPodDelete, podWith("x", "1", ""), nil, fwk.QueueSkip},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := tc.fn(logger, pod, tc.old, tc.new)
			if err != nil || got != tc.want {
				t.Errorf("hint = %v, %v; want %v", got, err, tc.want)
			}
		})
	}
	events, err := pl.EventsToRegister(context.Background())
	if err != nil || len(events) != 2 {
		t.Fatalf("EventsToRegister = %v, %v", events, err)
	}
}

func TestRejectedPods(t *testing.T) {
	r := newRejectedPods()
	r.add(podWith("small", "", ""), usage{MilliCPU: 500})
	r.add(podWith("large", "", ""), usage{MilliCPU: 5000})
	got := r.takeFitting(func(u usage) bool { return u.MilliCPU <= 1000 })
	if len(got) != 1 || got["small"] == nil {
		t.Fatalf("takeFitting = %v, want only the small pod", got)
	}
	r.remove(uid("large"))
	if r.n.Load() != 0 {
		t.Fatalf("%d pods remembered after remove, want 0", r.n.Load())
	}
	if !strings.Contains(Name, "LoadAware") {
		t.Fatal(Name)
	}
}

func TestNewRejectsBadArgs(t *testing.T) {
	args := defaultArgs(t, func(a *config.LoadAwareArgs) { a.UsageThresholds.CPU = 150 })
	if _, err := New(context.Background(), args, nil); err == nil || !strings.Contains(err.Error(), "usageThresholds.cpu") {
		t.Fatalf("New with a 150%% threshold: %v, want an error naming usageThresholds.cpu", err)
	}
	if _, err := New(context.Background(), &config.CoschedulingArgs{}, nil); err == nil {
		t.Fatal("New with another plugin's args succeeded")
	}
}

// TestDominantResource: with dominantResource a node hot on memory alone scores by its memory, and
// loses to a node moderately used on both.
func TestDominantResource(t *testing.T) {
	tests := []struct {
		name       string
		cpuW, memW int64
		used       usage
		want       int64
	}{
		{"memory dominates", 1, 1, usage{MilliCPU: 1000, Memory: 9 << 30}, 9000},
		{"cpu dominates", 1, 1, usage{MilliCPU: 7000, Memory: 1 << 30}, 7000},
		{"a resource with weight 0 is left out", 1, 0, usage{MilliCPU: 1000, Memory: 9 << 30}, 1000},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			pl := newTestPlugin(t, defaultArgs(t, func(a *config.LoadAwareArgs) {
				a.ScoringStrategy.DominantResource = true
				a.ResourceWeights = config.LoadAwareResources{CPU: tc.cpuW, Memory: tc.memW}
			}))
			if got := pl.utilization(tc.used, nodeInfo("n", "10", "10Gi").GetAllocatable()); got != tc.want {
				t.Errorf("utilization = %d, want %d", got, tc.want)
			}
		})
	}

	// End to end: memory-hot (0% cpu, 90% memory; 45% on average) against balanced (50%, 50%).
	ctx := context.Background()
	for _, dominant := range []bool{false, true} {
		pl := newTestPlugin(t, defaultArgs(t, func(a *config.LoadAwareArgs) {
			a.ScoringStrategy.DominantResource = dominant
			a.UsageThresholds = config.LoadAwareResources{}
		}))
		nodes := []fwk.NodeInfo{nodeInfo("memory-hot", "10", "10Gi"), nodeInfo("balanced", "10", "10Gi")}
		pl.addNodes(nodes...)
		pl.lister.set(epoch, map[string][2]string{"memory-hot": {"0", "9Gi"}, "balanced": {"5", "5Gi"}})
		pl.refreshNow(t)
		pod := podWith("p", "100m", "100Mi")
		cs := framework.NewCycleState()
		pl.PreScore(ctx, cs, pod, nodes)
		scores := make(fwk.NodeScoreList, len(nodes))
		for i, n := range nodes {
			raw, _ := pl.Score(ctx, cs, pod, n)
			scores[i] = fwk.NodeScore{Name: n.Node().Name, Score: raw}
		}
		pl.NormalizeScore(ctx, cs, pod, scores)
		if prefersBalanced := scores[1].Score > scores[0].Score; prefersBalanced != dominant {
			t.Errorf("dominantResource=%v: scores %v; want the balanced node preferred only with dominantResource", dominant, scores)
		}
	}
}

// TestReasonsHoldNoPercentSign: the scheduler records FailedScheduling with the Filter's reason as the
// event's format string, so a '%' in a reason shows as "%!,(MISSING)" in kubectl describe.
func TestReasonsHoldNoPercentSign(t *testing.T) {
	pl := newTestPlugin(t, defaultArgs(t))
	for i, r := range pl.reasons {
		if strings.ContainsRune(r, '%') {
			t.Errorf("reason %d %q holds a '%%': the FailedScheduling event would garble it", i, r)
		}
	}
}
