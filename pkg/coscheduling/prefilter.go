package coscheduling

import (
	"context"
	"fmt"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	corev1helpers "k8s.io/component-helpers/scheduling/corev1"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/custom-scheduler/custom-scheduler/pkg/apis/scheduling/v1alpha1"
	"github.com/custom-scheduler/custom-scheduler/pkg/coscheduling/gang"
	"github.com/custom-scheduler/custom-scheduler/pkg/coscheduling/gangfit"
	"github.com/custom-scheduler/custom-scheduler/pkg/coscheduling/podgroup"
)

// PreFilter checks a gang whole before its first member holds anything and narrows each member's
// nodes (its gang's domain, its plan's offer); Filter enforces that narrowing on the nodes the framework
// tries before the PreFilterResult; SignPod keeps batching within a gang.

// PreFilter narrows a member's nodes (see preFilter). The nodes it allows are written to the cycle
// state, and Filter rejects every other node: kube-scheduler tries a pod's nominated node (from a
// preemption or a reservation) and the batching hint before, and regardless of, the PreFilterResult,
// so without the Filter a member nominated outside its gang's chosen domain would bind there and split
// the domain, or bypass its plan's offer. A member whose nodes are not narrowed skips Filter.
func (pl *Coscheduling) PreFilter(ctx context.Context, state fwk.CycleState, pod *v1.Pod, nodes []fwk.NodeInfo) (*fwk.PreFilterResult, *fwk.Status) {
	res, st := pl.preFilter(ctx, state, pod, nodes)
	if !st.IsSuccess() {
		return res, st
	}
	if res.AllNodes() {
		return nil, fwk.NewStatus(fwk.Skip)
	}
	name, _ := podgroup.Of(pod)
	why := "is outside the topology domain chosen for PodGroup " + podgroup.Key(pod.Namespace, name)
	if _, err := state.Read(plannedKey); err == nil {
		why = "is not among the planned nodes PodGroup " + podgroup.Key(pod.Namespace, name) + " offers this member"
	}
	state.Write(allowedNodesKey, &allowedNodes{nodes: res.NodeNames, why: why})
	return res, nil
}

// allowedNodes are the nodes PreFilter let a member use; why says, for a node outside them, why not.
// Never changed once written, so a clone may share it.
type allowedNodes struct {
	nodes sets.Set[string]
	why   string
}

func (a *allowedNodes) Clone() fwk.StateData { return a }

// preFilter checks, once per gang attempt and before any member is reserved, whether the members
// still missing from the quorum fit the snapshot's nodes at once (see checkFeasible), and, for a gang
// with a topology policy, chooses its domain (see topology.go). An infeasible gang is rejected here,
// holding nothing, until an event frees capacity. Every member of a gang with a domain gets the
// domain's nodes as its PreFilterResult, so the framework evaluates only them.
func (pl *Coscheduling) preFilter(ctx context.Context, state fwk.CycleState, pod *v1.Pod, nodes []fwk.NodeInfo) (*fwk.PreFilterResult, *fwk.Status) {
	name, ok := podgroup.Of(pod)
	if !ok {
		return nil, fwk.NewStatus(fwk.Skip)
	}
	pl.running.Store(true)
	// A scheduling cycle runs only in the replica that leads.
	pl.startBackground()
	key := podgroup.Key(pod.Namespace, name)
	pg := pl.podGroups.Get(pod.Namespace, name)
	if pg == nil {
		return pl.rejectInPreFilter(state, fmt.Sprintf("PodGroup %s does not exist", key))
	}
	policy, err := gangfit.PolicyFor(pg, pod, pl.defaultTopology)
	if err != nil {
		msg := fmt.Sprintf("PodGroup %s member %s: %v", key, klog.KObj(pod), err)
		pl.gate(ctx, pod, EventInvalidTopologyPolicy, msg)
		return pl.rejectInPreFilter(state, msg)
	}
	want := podgroup.MinMember(pg)
	now := pl.clock.Now()

	pl.mu.Lock()
	g := pl.gangForLocked(pg)
	stage, msg := g.Stage(gang.PreFilterIn{Now: now, Member: pod.UID, Want: want, Confirmed: func() int { return pl.confirmedCountLocked(g) }})
	switch stage {
	case gang.Refuse:
		pl.mu.Unlock()
		return pl.rejectInPreFilter(state, msg)
	case gang.Join:
		// A plan is made only with a chosen placement; an attempt adopted without one (this process
		// did not check it) pins it where its members already are.
		if g.Placement == nil && !policy.Empty() {
			p := gangfit.PinnedPlacement(policy, gangfit.PinnedDomains(policy, gangfit.BoundNodes(pl.membersOf(pod.Namespace, name), nodes, g.ReservedNodes()...)), nodes)
			g.Placement = &p
		}
		res := pl.narrowLocked(state, g, pod, g.Placement.PreFilterResult())
		pl.mu.Unlock()
		return res, nil
	case gang.Extra:
		pl.mu.Unlock()
		if policy.Empty() {
			return nil, nil
		}
		return pl.extraMemberPlacement(ctx, pod, key, policy, nodes).PreFilterResult(), nil
	}
	pl.mu.Unlock()

	// The first member of an attempt: list the group's live pods (outside the lock) and check the
	// members still missing from the quorum as a whole.
	members := pl.membersOf(pod.Namespace, name)
	pl.mu.Lock()
	if g.InProgress() {
		res := pl.narrowLocked(state, g, pod, g.Placement.PreFilterResult())
		pl.mu.Unlock()
		return res, nil
	}
	candidates, counted, countedN := g.Split(members)
	ck := gang.FeasibilityKey{Epoch: pl.epoch.Load(), UID: pg.UID, Generation: pg.Generation, Existing: len(members), Counted: countedN, At: now}
	if res, ok := g.Cached(ck, feasibilityCacheTTL); ok {
		if !res.Feasible {
			pl.mu.Unlock()
			return pl.rejectInfeasible(state, res.Message)
		}
		placed := pl.narrowLocked(state, g, pod, g.Placement.PreFilterResult())
		pl.mu.Unlock()
		return placed, nil
	}
	pl.mu.Unlock()

	claimed := pl.claims.Against(corev1helpers.PodPriority(pod), key)
	res, fit := gangfit.Check(klog.FromContext(ctx), key, candidates, want-countedN, nodes, pg.Spec.MinResources, counted, claimed, &pl.fit)
	var chosen *gangfit.Placement
	if res.Feasible && !policy.Empty() {
		pl.mu.RLock()
		busy := gang.BusyDomains(pl.gangs, g)
		reservedOn := g.ReservedNodes()
		pl.mu.RUnlock()
		pinned := gangfit.PinnedDomains(policy, gangfit.BoundNodes(members, nodes, reservedOn...))
		if fit == nil {
			p := gangfit.PinnedPlacement(policy, pinned, nodes)
			chosen = &p
		} else if p, ok := gangfit.ChoosePlacement(fit, policy, pinned, busy); ok {
			chosen = &p
		} else {
			res = gangfit.Result{Message: fmt.Sprintf("PodGroup %s (topology policy from %s): %s", key, policy.Source, p.Message)}
		}
	}
	var plan *gangfit.PlacementPlan
	if res.Feasible && pl.plannable(pod) {
		plan = gangfit.PlanPlacement(fit, chosen)
	}
	fit.Done()
	pl.mu.Lock()
	newDomain, changed := g.Checked(res, ck, chosen, plan)
	placed := pl.narrowLocked(state, g, pod, chosen.PreFilterResult())
	pl.mu.Unlock()
	if !res.Feasible {
		klog.FromContext(ctx).V(3).Info("Gang is infeasible on the current snapshot", "pod", klog.KObj(pod), "podGroup", key, "reason", res.Message)
		gangRejections.WithLabelValues(pl.profile, reasonInfeasible).Inc()
		if changed {
			pl.podGroupEvent(pg, v1.EventTypeWarning, EventGangInfeasible, res.Message)
			pl.notifyStatus(key)
		}
		return pl.rejectInfeasible(state, res.Message)
	}
	if newDomain {
		klog.FromContext(ctx).V(3).Info("Gang placement chosen", "pod", klog.KObj(pod), "podGroup", key, "placement", chosen.Message)
		pl.podGroupEvent(pg, v1.EventTypeNormal, EventDomainChosen, chosen.Message)
		pl.notifyStatus(key)
	}
	if plan != nil && g.Plan == plan {
		klog.FromContext(ctx).V(4).Info("Gang placement planned", "pod", klog.KObj(pod), "podGroup", key, "members", plan.Left(), "nodes", len(plan.Nodes))
	}
	return placed, nil
}

// PreFilterExtensions returns nil: the check does not depend on other pods' placement in the cycle.
func (pl *Coscheduling) PreFilterExtensions() fwk.PreFilterExtensions { return nil }

// Filter rejects a node outside those PreFilter allowed the member (see PreFilter): O(1), and called
// only for members whose nodes PreFilter narrowed. The framework evaluates only the allowed nodes
// anyway, except a nominated node and the batching hint, which it tries first.
func (pl *Coscheduling) Filter(_ context.Context, state fwk.CycleState, _ *v1.Pod, nodeInfo fwk.NodeInfo) *fwk.Status {
	data, err := state.Read(allowedNodesKey)
	if err != nil {
		return nil
	}
	a := data.(*allowedNodes)
	node := nodeInfo.Node().Name
	if a.nodes.Has(node) {
		return nil
	}
	return fwk.NewStatus(fwk.UnschedulableAndUnresolvable, fmt.Sprintf("node %s %s", node, a.why))
}

// SignPod signs pods with no fragment, except members whose PreFilter narrows their nodes: those of a
// gang with a topology policy (restricted to their gang's domain) and those a placement plan may place
// (offered its planned nodes) are signed with their group, so that only members of one gang may share
// a batched scheduling result. Other pods, gang members included, may be batched with any pod alike for
// the other plugins (this plugin accepts or rejects them whole).
func (pl *Coscheduling) SignPod(_ context.Context, pod *v1.Pod) ([]fwk.SignFragment, *fwk.Status) {
	name, ok := podgroup.Of(pod)
	if !ok {
		return nil, nil
	}
	pg := pl.podGroups.Get(pod.Namespace, name)
	if pg == nil {
		return nil, nil
	}
	if policy, err := gangfit.PolicyFor(pg, pod, pl.defaultTopology); err == nil && policy.Empty() && !pl.plannable(pod) {
		return nil, nil
	}
	return []fwk.SignFragment{{Key: signFragmentGroup, Value: podgroup.Key(pod.Namespace, name)}}, nil
}

// signFragmentGroup names the fragment that ties a member with a topology policy to its gang.
const signFragmentGroup = "v1.Pod.Labels[" + v1alpha1.PodGroupLabel + "].TopologyPlacement()"

// plannable reports whether a member's cycle may be narrowed by a plan: the plan is on, the member's
// constraints are all modelled, and it is not nominated (a nominated member goes where its nomination,
// from preemption or a reservation, holds room).
func (pl *Coscheduling) plannable(pod *v1.Pod) bool {
	return pl.planArgs.Enabled && pod.Status.NominatedNodeName == "" && gangfit.Plannable(pod)
}

// narrowLocked is PreFilter's result for a member: the planned nodes it is offered (and the cycle is
// marked), when the gang's attempt has a plan that still places members; else res (every node, or the
// gang's domain).
func (pl *Coscheduling) narrowLocked(state fwk.CycleState, g *gang.Gang, pod *v1.Pod, res *fwk.PreFilterResult) *fwk.PreFilterResult {
	nodes := g.Offer(pl.plannable(pod), int(pl.planArgs.CandidateNodes))
	if nodes == nil {
		return res
	}
	state.Write(plannedKey, plannedMark{offered: sets.List(nodes)})
	return &fwk.PreFilterResult{NodeNames: nodes}
}

func (pl *Coscheduling) rejectInPreFilter(state fwk.CycleState, msg string) (*fwk.PreFilterResult, *fwk.Status) {
	state.Write(rejectedByPreFilterKey, rejectedMark{})
	return nil, fwk.NewStatus(fwk.UnschedulableAndUnresolvable, msg)
}

// rejectInfeasible rejects a gang that does not fit the free resources, marking the cycle for
// PostFilter to preempt.
func (pl *Coscheduling) rejectInfeasible(state fwk.CycleState, msg string) (*fwk.PreFilterResult, *fwk.Status) {
	state.Write(infeasibleKey, rejectedMark{})
	return pl.rejectInPreFilter(state, msg)
}

type rejectedMark struct{}

func (rejectedMark) Clone() fwk.StateData { return rejectedMark{} }

// extraMemberPlacement is where a member of a gang whose quorum is met goes (see
// gangfit.ExtraMemberPlacement), checked against the room nominated to pods of its priority or more.
func (pl *Coscheduling) extraMemberPlacement(ctx context.Context, pod *v1.Pod, key string, policy gangfit.Policy, nodes []fwk.NodeInfo) *gangfit.Placement {
	name, _ := podgroup.Of(pod)
	pl.mu.RLock()
	var reservedOn []string
	if g := pl.gangs[key]; g != nil {
		reservedOn = g.ReservedNodes()
	}
	pl.mu.RUnlock()
	pinned := gangfit.PinnedDomains(policy, gangfit.BoundNodes(pl.membersOf(pod.Namespace, name), nodes, reservedOn...))
	f := gangfit.New(klog.FromContext(ctx), key, []*v1.Pod{pod}, 1, nodes, nil, pl.claims.Against(corev1helpers.PodPriority(pod), key), &pl.fit, false)
	p := gangfit.ExtraMemberPlacement(f, policy, pinned, nodes)
	f.Done()
	return &p
}
