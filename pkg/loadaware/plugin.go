// Package loadaware is the LoadAware plugin: it filters and scores nodes by their real utilization as
// reported by metrics.k8s.io (metrics-server), plus an estimate for pods whose usage the metrics
// cannot show yet.
//
// Metrics are fetched in the background on an interval; each node's recent samples are kept and
// aggregated by the refresher into a fixed-size slot per node (store.go), which the scheduling cycle
// reads without locks or allocations. PreFilter decides once per pod which nodes, if any, are over a
// threshold (usually none: the Filter is then skipped); Score reads one slot per node. Without any
// sample the plugin skips every extension point.
package loadaware

import (
	"context"
	"fmt"
	"sync"
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

	// podSignerName keys the pod-signature fragment: Filter and Score depend on the pod only through
	// its usage estimate and whether it is a DaemonSet pod exempt from the Filter.
	podSignerName = "v1.Pod.Spec.Containers.Resources.LoadAwareEstimate()"

	// fullUtilization is 100% in the raw Score's unit, basis points of allocatable.
	fullUtilization int64 = 10000
	// unknownScore is the raw Score of a node without a fresh sample (or without allocatable for
	// every weighted resource); NormalizeScore gives such nodes a neutral score.
	unknownScore int64 = -1

	reasonUsage          = "usage"
	reasonMissingMetrics = "missing_metrics"
)

// skip is the Skip status PreFilter and PreScore return, shared so that skipping allocates nothing:
// the framework only reads a Skip status (RunPreFilterPlugins and RunPreScorePlugins record the
// plugin as skipped and go on), never sets its plugin or message.
var skip = fwk.NewStatus(fwk.Skip)

// rejection is why the Filter rejects a node.
type rejection uint8

const (
	rejectCPU rejection = iota + 1
	rejectMemory
	rejectNodeCPU    // over the node's own (annotated) cpu threshold
	rejectNodeMemory // over the node's own (annotated) memory threshold
	rejectMissing
)

// LoadAware filters out nodes whose usage would cross a threshold and scores nodes by utilization.
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
	dominant                      bool
	// target is TargetUtilization's best utilization, in basis points.
	target           int64
	rejectMissing    bool
	filterDaemonSets bool
	refreshInterval  time.Duration
	staleness        time.Duration
	warmup           time.Duration
	requestTimeout   time.Duration

	// apiState is the metrics API's state as last seen by the refresher (apiUnknown, apiAvailable,
	// apiUnavailable).
	apiState atomic.Int32
	// rejecting: filterMissingMetrics=Reject is in force, as the refresher last decided
	// (rejectInForce). PreFilter reads it.
	rejecting atomic.Bool
	rejected  *rejectedPods

	// badAnnotations remembers each node's malformed threshold annotation, to report it once.
	badMu          sync.Mutex
	badAnnotations map[string]string

	reasons [rejectMissing + 1]string
}

// preFilterState is the Filter's view of the cluster for one pod. It is never modified after
// PreFilter, except for the one-way rejected flag, so Clone shares it.
type preFilterState struct {
	estimate usage
	// rejects holds the nodes over a threshold with this pod (nil: none), unless rejectMissing.
	rejects map[string]rejection
	// With rejectMissing the Filter checks every node against the store instead: nodes without a
	// fresh sample are rejected too.
	rejectMissing bool
	view          view
	freshAfter    int64
	// rejected is set by the first node the Filter rejects in this cycle.
	rejected atomic.Bool
}

// Clone shares the state: it is read-only apart from the rejected flag, which concerns the pod.
func (s *preFilterState) Clone() fwk.StateData { return s }

// New builds the plugin from its args, registers its pod and node event handlers and starts the
// background metrics refresher, which runs until ctx ends.
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
	logger := klog.FromContext(ctx).WithValues("plugin", Name, "profile", pl.profile)
	if err := pl.registerPodHandlers(); err != nil {
		return nil, err
	}
	if err := pl.registerNodeHandlers(logger); err != nil {
		return nil, err
	}
	if source != nil {
		go pl.run(ctx)
	} else {
		logger.Info("LoadAware has no kubeconfig to reach metrics.k8s.io; it stays neutral")
	}
	return pl, nil
}

// newPlugin builds the plugin without starting anything (tests drive refresh themselves).
func newPlugin(h fwk.Handle, args *config.LoadAwareArgs, clk clock.WithTicker, source nodeMetricsLister) *LoadAware {
	register()
	refresh := time.Duration(args.MetricsRefreshIntervalSeconds) * time.Second
	pl := &LoadAware{
		handle:           h,
		clock:            clk,
		source:           source,
		store:            newStore(newAggregator(args.UsageAggregation, args.MetricsRefreshIntervalSeconds), args.UsageThresholds.CPU, args.UsageThresholds.Memory),
		est:              newEstimator(args.Estimation),
		thresholdCPU:     args.UsageThresholds.CPU,
		thresholdMemory:  args.UsageThresholds.Memory,
		weightCPU:        args.ResourceWeights.CPU,
		weightMemory:     args.ResourceWeights.Memory,
		strategy:         args.ScoringStrategy.Type,
		dominant:         args.ScoringStrategy.DominantResource,
		target:           args.ScoringStrategy.TargetUtilizationPercent * fullUtilization / 100,
		rejectMissing:    args.FilterMissingMetrics == config.LoadAwareMissingMetricsReject,
		filterDaemonSets: args.FilterDaemonSetPods,
		refreshInterval:  refresh,
		staleness:        time.Duration(args.MetricsStalenessSeconds) * time.Second,
		warmup:           time.Duration(args.Estimation.WarmupSeconds) * time.Second,
		requestTimeout:   min(refresh, maxRequestTimeout),
		rejected:         newRejectedPods(),
		badAnnotations:   map[string]string{},
	}
	pl.reasons = [...]string{
		rejectCPU:        fmt.Sprintf("node cpu usage (measured, plus estimates for new pods and this one) exceeds the LoadAware threshold of %d percent", args.UsageThresholds.CPU),
		rejectMemory:     fmt.Sprintf("node memory usage (measured, plus estimates for new pods and this one) exceeds the LoadAware threshold of %d percent", args.UsageThresholds.Memory),
		rejectNodeCPU:    "node cpu usage (measured, plus estimates for new pods and this one) exceeds the node's LoadAware threshold (annotation " + ThresholdsAnnotation + ")",
		rejectNodeMemory: "node memory usage (measured, plus estimates for new pods and this one) exceeds the node's LoadAware threshold (annotation " + ThresholdsAnnotation + ")",
		rejectMissing:    "node has no fresh metrics.k8s.io sample (LoadAware filterMissingMetrics=Reject)",
	}
	if h != nil {
		pl.profile = h.ProfileName()
	}
	metricsAPIAvailable.WithLabelValues(pl.profile).Set(0)
	return pl
}

// Name returns the plugin's name.
func (pl *LoadAware) Name() string { return Name }

// podSignature is what Filter and Score read of a pod.
type podSignature struct {
	Estimate usage `json:"estimate"`
	// FilterExempt: a DaemonSet pod the Filter lets through.
	FilterExempt bool `json:"filterExempt,omitempty"`
}

// SignPod signs the pod by its usage estimate and its Filter exemption, the only parts of the pod
// Filter and Score read, so opportunistic batching stays on for pods alike in both.
func (pl *LoadAware) SignPod(_ context.Context, pod *v1.Pod) ([]fwk.SignFragment, *fwk.Status) {
	return []fwk.SignFragment{{Key: podSignerName, Value: podSignature{Estimate: pl.est.estimate(pod), FilterExempt: pl.filterExempt(pod)}}}, nil
}

// filterExempt reports whether the Filter lets the pod through whatever the usage: DaemonSet pods
// must run on every node, unless filterDaemonSetPods says otherwise.
func (pl *LoadAware) filterExempt(pod *v1.Pod) bool {
	return !pl.filterDaemonSets && isDaemonSetPod(pod)
}

func isDaemonSetPod(pod *v1.Pod) bool {
	for i := range pod.OwnerReferences {
		r := &pod.OwnerReferences[i]
		if r.Controller != nil && *r.Controller && r.Kind == "DaemonSet" {
			return true
		}
	}
	return false
}

// PreFilter computes the pod's estimate and, once for all nodes, the nodes it would push over a
// threshold. Usually there are none, and the Filter is skipped: the stored lower bound of every
// node's room under its thresholds tells without looking at a node. It skips at once when no node
// has a sample, and for DaemonSet pods.
func (pl *LoadAware) PreFilter(_ context.Context, cs fwk.CycleState, pod *v1.Pod, _ []fwk.NodeInfo) (*fwk.PreFilterResult, *fwk.Status) {
	// During a metrics outage every node without a fresh sample passes, whatever the policy says:
	// an outage must not stop scheduling.
	rejectMissing := pl.rejecting.Load()
	if pl.store.sampled.Load() == 0 && !rejectMissing {
		return nil, skip
	}
	s := &preFilterState{estimate: pl.est.estimate(pod), rejectMissing: rejectMissing}
	// Written even when the Filter is skipped: Reserve and PreScore reuse the estimate.
	cs.Write(preFilterStateKey, s)
	if pl.filterExempt(pod) {
		return nil, skip
	}
	s.freshAfter = pl.clock.Now().Add(-pl.staleness).UnixNano()
	if rejectMissing {
		s.view = pl.store.view()
		return nil, nil
	}
	if s.estimate.MilliCPU <= pl.store.minRoomCPU.Load() && s.estimate.Memory <= pl.store.minRoomMem.Load() {
		return nil, skip
	}
	s.rejects = pl.overThreshold(s.estimate, s.freshAfter)
	if len(s.rejects) == 0 {
		return nil, skip
	}
	return nil, nil
}

// overThreshold returns the nodes with a fresh sample that the estimate would push over a threshold;
// nil when there are none. It looks at the tight list's slots alone when the estimate is within the
// list's margin (the usual case: the margin is the largest estimate seen), else at every slot.
func (pl *LoadAware) overThreshold(estimate usage, freshAfter int64) map[string]rejection {
	pl.store.notePeak(estimate)
	var out map[string]rejection
	visit := func(sl *slot) {
		if t := sl.sampleTime.Load(); t == 0 || t < freshAfter {
			return
		}
		r := pl.check(sl, estimate)
		if r == 0 {
			return
		}
		name := sl.name.Load()
		if name == nil {
			return
		}
		if out == nil {
			out = map[string]rejection{}
		}
		out[*name] = r
	}
	chunks := pl.store.view().chunks
	if t := pl.store.tight.Load(); estimate.MilliCPU <= t.marginCPU && estimate.Memory <= t.marginMem {
		for _, i := range t.slots {
			if int(i>>chunkBits) < len(chunks) {
				visit(&chunks[i>>chunkBits][i&chunkMask])
			}
		}
		return out
	}
	for _, chunk := range chunks {
		for k := range chunk {
			visit(&chunk[k])
		}
	}
	pl.store.widenTight(estimate)
	return out
}

// check returns why the estimate does not fit in the slot's room, or 0 when it fits.
func (pl *LoadAware) check(sl *slot, estimate usage) rejection {
	cpu, mem := sl.room()
	switch {
	case estimate.MilliCPU > cpu:
		if sl.overridden.Load()&overrideCPU != 0 {
			return rejectNodeCPU
		}
		return rejectCPU
	case estimate.Memory > mem:
		if sl.overridden.Load()&overrideMem != 0 {
			return rejectNodeMemory
		}
		return rejectMemory
	}
	return 0
}

// PreFilterExtensions returns nil: the Filter reads measured usage, which preempting victims does not
// change until the next sample.
func (pl *LoadAware) PreFilterExtensions() fwk.PreFilterExtensions { return nil }

// Filter rejects a node PreFilter found over a threshold with this pod (usage, plus the estimates of
// pods its samples do not show yet, plus this pod's estimate), and, with filterMissingMetrics Reject,
// a node without a fresh sample. UnschedulableAndUnresolvable: evicting pods in preemption's dry run
// cannot lower a measured sample, so preemption must not pick the node for it.
func (pl *LoadAware) Filter(_ context.Context, cs fwk.CycleState, pod *v1.Pod, nodeInfo fwk.NodeInfo) *fwk.Status {
	s, err := getPreFilterState(cs)
	if err != nil {
		return fwk.AsStatus(err)
	}
	node := nodeInfo.Node()
	if node == nil {
		return fwk.NewStatus(fwk.UnschedulableAndUnresolvable, "node not found")
	}
	var r rejection
	if s.rejectMissing {
		sl := s.view.lookup(node.Name)
		if sl == nil {
			r = rejectMissing
		} else if t := sl.sampleTime.Load(); t == 0 || t < s.freshAfter {
			r = rejectMissing
		} else {
			r = pl.check(sl, s.estimate)
		}
	} else {
		r = s.rejects[node.Name]
	}
	if r == 0 {
		return nil
	}
	if r == rejectMissing {
		pl.noteRejected(s, pod, reasonMissingMetrics)
	} else {
		pl.noteRejected(s, pod, reasonUsage)
	}
	return fwk.NewStatus(fwk.UnschedulableAndUnresolvable, pl.reasons[r])
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

// Reserve counts the pod's estimate on its node at once, so the next pods of a burst see it even
// before the binding reaches the informer. It costs nothing while no node has a sample (the first
// sample brings the pods bound meanwhile in from the informer).
func (pl *LoadAware) Reserve(_ context.Context, cs fwk.CycleState, pod *v1.Pod, nodeName string) *fwk.Status {
	if pl.store.sampled.Load() == 0 {
		return nil
	}
	pl.store.addPod(pod.UID, nodeName, pl.podEstimate(cs, pod), 0)
	return nil
}

// Unreserve forgets the estimate Reserve added.
func (pl *LoadAware) Unreserve(_ context.Context, _ fwk.CycleState, pod *v1.Pod, _ string) {
	pl.store.removePod(pod.UID)
}

// EventsToRegister lists the cluster events that may make a pod this plugin rejected schedulable:
// a new node, more allocatable or a changed threshold annotation, and an assigned pod going away (or
// finishing). Load dropping is not a cluster event: the metrics refresher requeues rejected pods
// itself when a node cools down (see requeue.go).
func (pl *LoadAware) EventsToRegister(_ context.Context) ([]fwk.ClusterEventWithHint, error) {
	return []fwk.ClusterEventWithHint{
		{Event: fwk.ClusterEvent{Resource: fwk.Node, ActionType: fwk.Add | fwk.UpdateNodeAllocatable | fwk.UpdateNodeAnnotation}, QueueingHintFn: pl.isSchedulableAfterNodeChange},
		{Event: fwk.ClusterEvent{Resource: fwk.AssignedPod, ActionType: fwk.Delete}, QueueingHintFn: pl.isSchedulableAfterPodDelete},
	}, nil
}

// isSchedulableAfterNodeChange queues the pod for a new node, a node whose cpu or memory
// allocatable grew, or whose threshold annotation changed.
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
	if oldNode.Annotations[ThresholdsAnnotation] != newNode.Annotations[ThresholdsAnnotation] {
		logger.V(5).Info("node LoadAware thresholds changed", "pod", klog.KObj(pod), "node", klog.KObj(newNode))
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
