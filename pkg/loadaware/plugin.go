// Package loadaware is the LoadAware plugin: it filters and scores nodes by their real utilization as
// reported by metrics.k8s.io (metrics-server), plus an estimate for pods bound since the last sample.
//
// Metrics are fetched in the background on an interval and cached per node; the scheduling cycle never
// calls the API. PreFilter and PreScore take an immutable snapshot of the cache; Filter and Score are a
// map lookup and a few integer operations per node, without locks or allocations on the passing path.
package loadaware

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
	schedutil "k8s.io/kubernetes/pkg/scheduler/util"
	"k8s.io/utils/clock"

	"github.com/custom-scheduler/custom-scheduler/pkg/apis/config"
	"github.com/custom-scheduler/custom-scheduler/pkg/apis/config/validation"
)

// Name is the plugin's name in the registry and in profiles.
const Name = "LoadAware"

var (
	_ fwk.PreFilterPlugin   = &LoadAware{}
	_ fwk.FilterPlugin      = &LoadAware{}
	_ fwk.PreScorePlugin    = &LoadAware{}
	_ fwk.ScorePlugin       = &LoadAware{}
	_ fwk.ScoreExtensions   = &LoadAware{}
	_ fwk.ReservePlugin     = &LoadAware{}
	_ fwk.EnqueueExtensions = &LoadAware{}
	_ fwk.SignPlugin        = &LoadAware{}
)

const (
	preFilterStateKey = "PreFilter" + Name
	preScoreStateKey  = "PreScore" + Name

	// estimateSignerName keys the pod-signature fragment of the pod's usage estimate: Filter and
	// Score depend on the pod only through it.
	estimateSignerName = "v1.Pod.Spec.Containers.Resources.LoadAwareEstimate()"

	// fullUtilization is 100% in the raw Score's unit, basis points of allocatable.
	fullUtilization int64 = 10000
	// unknownScore is the raw Score of a node without a fresh sample (or without allocatable for
	// every weighted resource); NormalizeScore gives such nodes a neutral score.
	unknownScore int64 = -1

	reasonUsage          = "usage"
	reasonMissingMetrics = "missing_metrics"
)

// LoadAware filters out nodes whose estimated usage would cross a threshold and scores nodes by
// estimated utilization.
type LoadAware struct {
	handle  fwk.Handle
	profile string
	clock   clock.WithTicker
	source  nodeMetricsLister
	store   *store
	est     estimator

	thresholdCPU, thresholdMemory int64
	weightCPU, weightMemory       int64
	strategy                      config.LoadAwareScoringStrategyType
	// target is TargetUtilization's best utilization, in basis points.
	target          int64
	rejectMissing   bool
	refreshInterval time.Duration
	staleness       time.Duration
	requestTimeout  time.Duration

	// apiState is the metrics API's state as last seen by the refresher (apiUnknown, apiAvailable,
	// apiUnavailable).
	apiState atomic.Int32
	rejected *rejectedPods

	cpuReason, memoryReason, missingReason string
}

// preFilterState is the Filter's view of the cluster for one pod. It is never modified after
// PreFilter, except for the one-way rejected flag, so Clone shares it.
type preFilterState struct {
	nodes         map[string]*nodeEntry
	estimate      usage
	freshAfter    time.Time
	rejectMissing bool
	// rejected is set by the first node the Filter rejects in this cycle.
	rejected atomic.Bool
}

// Clone shares the state: it is read-only apart from the rejected flag, which concerns the pod.
func (s *preFilterState) Clone() fwk.StateData { return s }

// preScoreState is the Score's view of the cluster for one pod.
type preScoreState struct {
	nodes      map[string]*nodeEntry
	estimate   usage
	freshAfter time.Time
}

// Clone shares the state, which is read-only.
func (s *preScoreState) Clone() fwk.StateData { return s }

// New builds the plugin from its args, registers its pod event handlers and starts the background
// metrics refresher, which runs until ctx ends.
func New(ctx context.Context, obj runtime.Object, h fwk.Handle) (fwk.Plugin, error) {
	args, ok := obj.(*config.LoadAwareArgs)
	if !ok {
		return nil, fmt.Errorf("want args of type LoadAwareArgs, got %T", obj)
	}
	if err := validation.ValidateLoadAwareArgs(nil, args); err != nil {
		return nil, err
	}
	var source nodeMetricsLister
	if cfg := h.KubeConfig(); cfg != nil {
		var err error
		if source, err = newClientLister(cfg); err != nil {
			return nil, fmt.Errorf("building the metrics.k8s.io client: %w", err)
		}
	}
	pl := newPlugin(h, args, clock.RealClock{}, source)
	if err := pl.registerPodHandlers(); err != nil {
		return nil, err
	}
	if source != nil {
		go pl.run(ctx)
	} else {
		klog.FromContext(ctx).Info("LoadAware has no kubeconfig to reach metrics.k8s.io; it stays neutral", "profile", pl.profile)
	}
	return pl, nil
}

// newPlugin builds the plugin without starting anything (tests drive refresh themselves).
func newPlugin(h fwk.Handle, args *config.LoadAwareArgs, clk clock.WithTicker, source nodeMetricsLister) *LoadAware {
	register()
	refresh := time.Duration(args.MetricsRefreshIntervalSeconds) * time.Second
	pl := &LoadAware{
		handle:          h,
		clock:           clk,
		source:          source,
		store:           newStore(),
		est:             newEstimator(args.Estimation),
		thresholdCPU:    args.UsageThresholds.CPU,
		thresholdMemory: args.UsageThresholds.Memory,
		weightCPU:       args.ResourceWeights.CPU,
		weightMemory:    args.ResourceWeights.Memory,
		strategy:        args.ScoringStrategy.Type,
		target:          args.ScoringStrategy.TargetUtilizationPercent * fullUtilization / 100,
		rejectMissing:   args.FilterMissingMetrics == config.LoadAwareMissingMetricsReject,
		refreshInterval: refresh,
		staleness:       time.Duration(args.MetricsStalenessSeconds) * time.Second,
		requestTimeout:  min(refresh, maxRequestTimeout),
		rejected:        newRejectedPods(),
		cpuReason:       fmt.Sprintf("node cpu usage (measured, plus estimates for new pods and this one) exceeds the LoadAware threshold of %d%%", args.UsageThresholds.CPU),
		memoryReason:    fmt.Sprintf("node memory usage (measured, plus estimates for new pods and this one) exceeds the LoadAware threshold of %d%%", args.UsageThresholds.Memory),
		missingReason:   "node has no fresh metrics.k8s.io sample (LoadAware filterMissingMetrics=Reject)",
	}
	if h != nil {
		pl.profile = h.ProfileName()
	}
	metricsAPIAvailable.WithLabelValues(pl.profile).Set(0)
	return pl
}

// Name returns the plugin's name.
func (pl *LoadAware) Name() string { return Name }

// SignPod signs the pod by its usage estimate, the only part of the pod Filter and Score read, so
// opportunistic batching stays on for pods with equal estimates.
func (pl *LoadAware) SignPod(_ context.Context, pod *v1.Pod) ([]fwk.SignFragment, *fwk.Status) {
	return []fwk.SignFragment{{Key: estimateSignerName, Value: pl.est.estimate(pod)}}, nil
}

// PreFilter snapshots the node cache for this pod and computes the pod's estimate. It skips the
// Filter when no threshold is set, or when nothing is known and unknown nodes pass anyway.
func (pl *LoadAware) PreFilter(_ context.Context, cs fwk.CycleState, pod *v1.Pod, _ []fwk.NodeInfo) (*fwk.PreFilterResult, *fwk.Status) {
	// During a metrics outage every node without a fresh sample passes, whatever the policy says:
	// an outage must not stop scheduling.
	rejectMissing := pl.rejectMissing && pl.apiState.Load() == apiAvailable
	if pl.thresholdCPU == 0 && pl.thresholdMemory == 0 && !rejectMissing {
		return nil, fwk.NewStatus(fwk.Skip)
	}
	nodes := pl.store.snapshot()
	if len(nodes) == 0 && !rejectMissing {
		return nil, fwk.NewStatus(fwk.Skip)
	}
	cs.Write(preFilterStateKey, &preFilterState{
		nodes:         nodes,
		estimate:      pl.est.estimate(pod),
		freshAfter:    pl.clock.Now().Add(-pl.staleness),
		rejectMissing: rejectMissing,
	})
	return nil, nil
}

// PreFilterExtensions returns nil: the Filter reads measured usage, which preempting victims does not
// change until the next sample.
func (pl *LoadAware) PreFilterExtensions() fwk.PreFilterExtensions { return nil }

// Filter rejects a node whose usage, plus the estimates of pods its sample does not cover yet, plus
// this pod's estimate, would exceed a threshold. Unschedulable, not UnschedulableAndUnresolvable:
// load changes by itself, and preemption may still pick the node.
func (pl *LoadAware) Filter(_ context.Context, cs fwk.CycleState, pod *v1.Pod, nodeInfo fwk.NodeInfo) *fwk.Status {
	s, err := getPreFilterState(cs)
	if err != nil {
		return fwk.AsStatus(err)
	}
	node := nodeInfo.Node()
	if node == nil {
		return fwk.NewStatus(fwk.UnschedulableAndUnresolvable, "node not found")
	}
	l := load(s.nodes, node.Name)
	if l == nil || l.sampleTime.Before(s.freshAfter) {
		if s.rejectMissing {
			pl.noteRejected(s, pod, reasonMissingMetrics)
			return fwk.NewStatus(fwk.Unschedulable, pl.missingReason)
		}
		return nil
	}
	alloc := nodeInfo.GetAllocatable()
	if exceeds(l.usage.MilliCPU+s.estimate.MilliCPU, alloc.GetMilliCPU(), pl.thresholdCPU) {
		pl.noteRejected(s, pod, reasonUsage)
		return fwk.NewStatus(fwk.Unschedulable, pl.cpuReason)
	}
	if exceeds(l.usage.Memory+s.estimate.Memory, alloc.GetMemory(), pl.thresholdMemory) {
		pl.noteRejected(s, pod, reasonUsage)
		return fwk.NewStatus(fwk.Unschedulable, pl.memoryReason)
	}
	return nil
}

// exceeds reports whether used is above thresholdPercent of allocatable. A threshold of 0 is off;
// a node without allocatable for the resource is left to NodeResourcesFit.
func exceeds(used, allocatable, thresholdPercent int64) bool {
	return thresholdPercent > 0 && allocatable > 0 && used*100 > allocatable*thresholdPercent
}

// noteRejected remembers, once per scheduling attempt, that the Filter rejected the pod, so the
// refresher can requeue it when load drops.
func (pl *LoadAware) noteRejected(s *preFilterState, pod *v1.Pod, reason string) {
	if !s.rejected.CompareAndSwap(false, true) {
		return
	}
	filterRejectedPods.WithLabelValues(pl.profile, reason).Inc()
	pl.rejected.add(pod, s.estimate)
}

func getPreFilterState(cs fwk.CycleState) (*preFilterState, error) {
	c, err := cs.Read(preFilterStateKey)
	if err != nil {
		return nil, fmt.Errorf("reading %q from cycleState: %w", preFilterStateKey, err)
	}
	s, ok := c.(*preFilterState)
	if !ok {
		return nil, fmt.Errorf("invalid PreFilter state, got type %T", c)
	}
	return s, nil
}

// PreScore snapshots the node cache for this pod; with nothing known it skips the Score.
func (pl *LoadAware) PreScore(_ context.Context, cs fwk.CycleState, pod *v1.Pod, _ []fwk.NodeInfo) *fwk.Status {
	nodes := pl.store.snapshot()
	if len(nodes) == 0 {
		return fwk.NewStatus(fwk.Skip)
	}
	cs.Write(preScoreStateKey, &preScoreState{
		nodes:      nodes,
		estimate:   pl.est.estimate(pod),
		freshAfter: pl.clock.Now().Add(-pl.staleness),
	})
	return nil
}

func getPreScoreState(cs fwk.CycleState) (*preScoreState, error) {
	c, err := cs.Read(preScoreStateKey)
	if err != nil {
		return nil, fmt.Errorf("reading %q from cycleState: %w", preScoreStateKey, err)
	}
	s, ok := c.(*preScoreState)
	if !ok {
		return nil, fmt.Errorf("invalid PreScore state, got type %T", c)
	}
	return s, nil
}

// Score returns the node's projected utilization with this pod, in basis points of allocatable
// (10000 = 100%), averaged over the resources by weight; unknownScore without a fresh sample.
func (pl *LoadAware) Score(_ context.Context, cs fwk.CycleState, _ *v1.Pod, nodeInfo fwk.NodeInfo) (int64, *fwk.Status) {
	s, err := getPreScoreState(cs)
	if err != nil {
		return 0, fwk.AsStatus(err)
	}
	node := nodeInfo.Node()
	if node == nil {
		return 0, fwk.AsStatus(fmt.Errorf("node not found"))
	}
	l := load(s.nodes, node.Name)
	if l == nil || l.sampleTime.Before(s.freshAfter) {
		return unknownScore, nil
	}
	return pl.utilization(l.usage.add(s.estimate), nodeInfo.GetAllocatable()), nil
}

// utilization is the weighted utilization of used against allocatable, in basis points; resources
// without allocatable are left out, and unknownScore is returned when none is left.
func (pl *LoadAware) utilization(used usage, alloc fwk.Resource) int64 {
	var sum, weights int64
	if a := alloc.GetMilliCPU(); pl.weightCPU > 0 && a > 0 {
		sum += pl.weightCPU * (used.MilliCPU * fullUtilization / a)
		weights += pl.weightCPU
	}
	if a := alloc.GetMemory(); pl.weightMemory > 0 && a > 0 {
		// Divide first: bytes times 10000 could overflow on very large nodes.
		sum += pl.weightMemory * (used.Memory / max(a/fullUtilization, 1))
		weights += pl.weightMemory
	}
	if weights == 0 {
		return unknownScore
	}
	return sum / weights
}

// ScoreExtensions returns the plugin itself, for NormalizeScore.
func (pl *LoadAware) ScoreExtensions() fwk.ScoreExtensions { return pl }

// NormalizeScore maps each raw utilization to [0, MaxNodeScore] with the scoring strategy. The
// mapping is absolute, not min-max: a node at 30% scores the same whatever the other nodes use, so
// small differences are not magnified and the plugin's weight against others keeps its meaning.
// Nodes without a fresh sample get the mean score of the nodes with one (0 when none has one), so
// they are neither preferred nor avoided.
func (pl *LoadAware) NormalizeScore(_ context.Context, _ fwk.CycleState, _ *v1.Pod, scores fwk.NodeScoreList) *fwk.Status {
	var sum, known int64
	for i := range scores {
		if scores[i].Score < 0 {
			continue
		}
		scores[i].Score = pl.strategyScore(scores[i].Score)
		sum += scores[i].Score
		known++
	}
	if known == int64(len(scores)) {
		return nil
	}
	var neutral int64
	if known > 0 {
		neutral = (sum + known/2) / known
	}
	for i := range scores {
		if scores[i].Score < 0 {
			scores[i].Score = neutral
		}
	}
	return nil
}

// strategyScore maps a utilization in basis points to [0, MaxNodeScore].
//   - LeastUtilized: MaxNodeScore at 0%, falling linearly to 0 at 100%.
//   - TargetUtilization: MaxNodeScore/2 at 0%, rising linearly to MaxNodeScore at the target, then
//     falling linearly to 0 at 100%. An idle node still beats one loaded far past the target.
func (pl *LoadAware) strategyScore(u int64) int64 {
	u = min(max(u, 0), fullUtilization)
	if pl.strategy == config.TargetUtilization {
		if u <= pl.target {
			half := fwk.MaxNodeScore / 2
			return half + (fwk.MaxNodeScore-half)*u/pl.target
		}
		return fwk.MaxNodeScore * (fullUtilization - u) / (fullUtilization - pl.target)
	}
	return fwk.MaxNodeScore * (fullUtilization - u) / fullUtilization
}

// Reserve counts the pod's estimate on its node at once, so the next pods of a burst see it even
// before the binding reaches the informer.
func (pl *LoadAware) Reserve(_ context.Context, cs fwk.CycleState, pod *v1.Pod, nodeName string) *fwk.Status {
	var estimate usage
	if s, err := getPreFilterState(cs); err == nil {
		estimate = s.estimate // computed once in PreFilter
	} else {
		estimate = pl.est.estimate(pod)
	}
	pl.store.addPending(pod.UID, nodeName, pl.clock.Now(), estimate)
	return nil
}

// Unreserve forgets the estimate Reserve added.
func (pl *LoadAware) Unreserve(_ context.Context, _ fwk.CycleState, pod *v1.Pod, _ string) {
	pl.store.removePending(pod.UID)
}

// EventsToRegister lists the cluster events that may make a pod this plugin rejected schedulable:
// a new node or more allocatable, and an assigned pod going away. Load dropping is not a cluster
// event: the metrics refresher requeues rejected pods itself when a node cools down (see requeue.go).
func (pl *LoadAware) EventsToRegister(_ context.Context) ([]fwk.ClusterEventWithHint, error) {
	return []fwk.ClusterEventWithHint{
		{Event: fwk.ClusterEvent{Resource: fwk.Node, ActionType: fwk.Add | fwk.UpdateNodeAllocatable}, QueueingHintFn: pl.isSchedulableAfterNodeChange},
		{Event: fwk.ClusterEvent{Resource: fwk.AssignedPod, ActionType: fwk.Delete}, QueueingHintFn: pl.isSchedulableAfterPodDelete},
	}, nil
}

// isSchedulableAfterNodeChange queues the pod for a new node, or a node whose cpu or memory
// allocatable grew.
func (pl *LoadAware) isSchedulableAfterNodeChange(logger klog.Logger, pod *v1.Pod, oldObj, newObj interface{}) (fwk.QueueingHint, error) {
	oldNode, newNode, err := schedutil.As[*v1.Node](oldObj, newObj)
	if err != nil {
		return fwk.Queue, err
	}
	if oldNode == nil {
		return fwk.Queue, nil
	}
	oldA, newA := oldNode.Status.Allocatable, newNode.Status.Allocatable
	if newA.Cpu().Cmp(*oldA.Cpu()) > 0 || newA.Memory().Cmp(*oldA.Memory()) > 0 {
		logger.V(5).Info("node allocatable grew, which may lower its utilization", "pod", klog.KObj(pod), "node", klog.KObj(newNode))
		return fwk.Queue, nil
	}
	return fwk.QueueSkip, nil
}

// isSchedulableAfterPodDelete queues the pod when a pod assigned to a node goes away: its estimate
// is dropped at once and its usage leaves the next sample.
func (pl *LoadAware) isSchedulableAfterPodDelete(logger klog.Logger, pod *v1.Pod, oldObj, newObj interface{}) (fwk.QueueingHint, error) {
	deleted, _, err := schedutil.As[*v1.Pod](oldObj, newObj)
	if err != nil {
		return fwk.Queue, err
	}
	if deleted.Spec.NodeName == "" {
		return fwk.QueueSkip, nil
	}
	logger.V(5).Info("an assigned pod was deleted, which lowers its node's load", "pod", klog.KObj(pod), "deletedPod", klog.KObj(deleted))
	return fwk.Queue, nil
}
