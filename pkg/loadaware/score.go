package loadaware

import (
	"context"
	"fmt"

	v1 "k8s.io/api/core/v1"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/custom-scheduler/custom-scheduler/pkg/apis/config"
)

// Score: PreScore reads each pod's estimate once, Score is a load lookup per node, NormalizeScore maps
// the utilizations through the strategy.

// preScoreState is the Score's view of the cluster for one pod.
type preScoreState struct {
	view       view
	estimate   usage
	freshAfter int64
}

// Clone shares the state, which is read-only.
func (s *preScoreState) Clone() fwk.StateData { return s }

// PreScore takes the store's view and the pod's estimate for the Score; with no sample anywhere it
// skips the Score.
func (pl *LoadAware) PreScore(_ context.Context, cs fwk.CycleState, pod *v1.Pod, _ []fwk.NodeInfo) *fwk.Status {
	if pl.store.sampled.Load() == 0 {
		return skip
	}
	cs.Write(preScoreStateKey, &preScoreState{
		view:       pl.store.view(),
		estimate:   pl.podEstimate(cs, pod),
		freshAfter: pl.clock.Now().Add(-pl.staleness).UnixNano(),
	})
	return nil
}

// podEstimate is the pod's estimate, from PreFilter's state when it ran.
func (pl *LoadAware) podEstimate(cs fwk.CycleState, pod *v1.Pod) usage {
	if cs != nil {
		// Read directly: a missing state is normal here, and building its error would allocate.
		if c, err := cs.Read(preFilterStateKey); err == nil {
			if s, ok := c.(*preFilterState); ok {
				return s.estimate
			}
		}
	}
	return pl.est.estimate(pod)
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
// (10000 = 100%): the weighted average over the resources, or the most utilized resource with
// dominantResource; unknownScore without a fresh sample. One map lookup and one slot read.
func (pl *LoadAware) Score(_ context.Context, cs fwk.CycleState, _ *v1.Pod, nodeInfo fwk.NodeInfo) (int64, *fwk.Status) {
	s, err := getPreScoreState(cs)
	if err != nil {
		return 0, fwk.AsStatus(err)
	}
	node := nodeInfo.Node()
	if node == nil {
		return 0, fwk.AsStatus(fmt.Errorf("node not found"))
	}
	sl := s.view.lookup(node.Name)
	if sl == nil {
		return unknownScore, nil
	}
	if t := sl.sampleTime.Load(); t == 0 || t < s.freshAfter {
		return unknownScore, nil
	}
	used := usage{
		MilliCPU: sl.scoreCPU.Load() + sl.scoreEstCPU.Load() + s.estimate.MilliCPU,
		Memory:   sl.scoreMem.Load() + sl.scoreEstMem.Load() + s.estimate.Memory,
	}
	return pl.utilization(used, nodeInfo.GetAllocatable()), nil
}

// utilization is the utilization of used against allocatable, in basis points: the weighted average
// of the resources, or with dominantResource the highest of the resources with a positive weight.
// Resources without allocatable are left out, and unknownScore is returned when none is left.
func (pl *LoadAware) utilization(used usage, alloc fwk.Resource) int64 {
	var sum, weights, highest int64
	if a := alloc.GetMilliCPU(); pl.weightCPU > 0 && a > 0 {
		u := used.MilliCPU * fullUtilization / a
		sum += pl.weightCPU * u
		weights += pl.weightCPU
		highest = u
	}
	if a := alloc.GetMemory(); pl.weightMemory > 0 && a > 0 {
		// Divide first: bytes times 10000 could overflow on very large nodes.
		u := used.Memory / max(a/fullUtilization, 1)
		sum += pl.weightMemory * u
		weights += pl.weightMemory
		highest = max(highest, u)
	}
	if weights == 0 {
		return unknownScore
	}
	if pl.dominant {
		return highest
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
