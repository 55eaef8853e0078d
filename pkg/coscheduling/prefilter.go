package coscheduling

import (
	"context"
	"fmt"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/custom-scheduler/custom-scheduler/pkg/apis/scheduling/v1alpha1"
	"github.com/custom-scheduler/custom-scheduler/pkg/coscheduling/gang"
	"github.com/custom-scheduler/custom-scheduler/pkg/coscheduling/gangfit"
	"github.com/custom-scheduler/custom-scheduler/pkg/coscheduling/metrics"
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
	if (st.IsSuccess() || st.IsSkip()) && pl.keepOffHeldDevices(ctx, state, pod) {
		// Filter keeps the pod off the devices a reservation holds (see helddevices.go).
		if st.IsSkip() {
			return nil, nil
		}
		return res, st
	}
	if st.IsSuccess() && res.AllNodes() {
		return nil, fwk.NewStatus(fwk.Skip)
	}
	return res, st
}

// allowedNodes are the nodes PreFilter let a member use; why says, for a node outside them, why not.
// Never changed once written, so a clone may share it.
type allowedNodes struct {
	nodes sets.Set[string]
	why   string
}

func (a *allowedNodes) Clone() fwk.StateData { return a }

// preFilter checks, once per gang attempt and before any member is reserved, whether the members
// still missing from the quorum fit the snapshot's nodes at once and, for a gang with a topology
// policy, chooses its domain: the gang's step (gang.Gang.PreFilter) decides over a snapshot taken
// under the plugin's lock, and preFilter applies what it returns. An infeasible gang is rejected here,
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
		return pl.rejectInPreFilter(state, fmt.Sprintf("PodGroup %s does not exist", key), false)
	}
	policy, err := gangfit.PolicyFor(pg, pod, pl.defaultTopology)
	if err != nil {
		msg := fmt.Sprintf("PodGroup %s member %s: %v", key, klog.KObj(pod), err)
		pl.gate(ctx, pod, podgroup.ReasonInvalidTopologyPolicy, msg)
		return pl.rejectInPreFilter(state, msg, false)
	}
	in := gang.PreFilterIn{
		Now: pl.clock.Now(), Logger: klog.FromContext(ctx), Member: pod,
		Want: podgroup.MinMember(pg), UID: pg.UID, Generation: pg.Generation, MinResources: pg.Spec.MinResources,
		Policy: policy, Nodes: nodes, Epoch: pl.epoch.Load(),
		Credit:    pl.credit(pod),
		Plannable: pl.plannable(pod), CandidateNodes: int(pl.planArgs.CandidateNodes), CacheTTL: feasibilityCacheTTL,
		Members: func() []*v1.Pod { return pl.members.InGroup(pod.Namespace, name) },
		Claimed: func(prio int32) []*v1.Pod { return pl.claims.Against(prio, key) },
		Gangs:   pl.gangs, Fit: &pl.fit,
	}
	// One lock for the whole decision: the check it may make (once per attempt) reads the gangs'
	// domains and records its result with nothing in between.
	pl.mu.Lock()
	out := pl.gangForLocked(pg).PreFilter(in)
	pl.mu.Unlock()
	return pl.appliedPreFilter(ctx, state, pod, pg, out)
}

// appliedPreFilter does what a member's PreFilter step returned: the PodGroup's event and status for
// a fresh check (infeasible, or a domain chosen: never both), the cycle's marks (rejected, infeasible,
// offered its plan, the nodes Filter allows), and the result.
func (pl *Coscheduling) appliedPreFilter(ctx context.Context, state fwk.CycleState, pod *v1.Pod, pg *v1alpha1.PodGroup, out gang.PreFilterOut) (*fwk.PreFilterResult, *fwk.Status) {
	logger := klog.FromContext(ctx)
	key := podgroup.Key(pg.Namespace, pg.Name)
	var eventType, reason, message string
	if out.Checked && out.Infeasible {
		logger.V(3).Info("Gang is infeasible on the current snapshot", "pod", klog.KObj(pod), "podGroup", klog.KObj(pg), "reason", out.Message)
		metrics.GangRejections.WithLabelValues(pl.profile, metrics.ReasonInfeasible).Inc()
		if out.InfeasibleChanged {
			eventType, reason, message = v1.EventTypeWarning, podgroup.ReasonGangInfeasible, out.Message
		}
	}
	if out.DomainChosen {
		logger.V(3).Info("Gang placement chosen", "pod", klog.KObj(pod), "podGroup", klog.KObj(pg), "placement", out.Placement.Message)
		eventType, reason, message = v1.EventTypeNormal, podgroup.ReasonDomainChosen, out.Placement.Message
	}
	if reason != "" {
		pl.recorder.PodGroup(pg, eventType, reason, message)
		pl.notifyStatus(key)
	}
	if out.Reject {
		return pl.rejectInPreFilter(state, out.Message, out.Infeasible)
	}
	if out.Plan != nil {
		logger.V(4).Info("Gang placement planned", "pod", klog.KObj(pod), "podGroup", klog.KObj(pg), "members", out.Plan.Left(), "nodes", len(out.Plan.Nodes))
	}
	if out.Nodes == nil {
		return nil, nil
	}
	why := "is outside the topology domain chosen for PodGroup " + key
	if out.Offered {
		state.Write(plannedKey, plannedMark{offered: sets.List(out.Nodes)})
		why = "is not among the planned nodes PodGroup " + key + " offers this member"
	}
	state.Write(allowedNodesKey, &allowedNodes{nodes: out.Nodes, why: why})
	return &fwk.PreFilterResult{NodeNames: out.Nodes}, nil
}

// PreFilterExtensions returns nil: the check does not depend on other pods' placement in the cycle.
func (pl *Coscheduling) PreFilterExtensions() fwk.PreFilterExtensions { return nil }

// Filter rejects a node outside those PreFilter allowed the member (see PreFilter), and a node whose
// devices a reservation holds for another gang (see helddevices.go): O(1), and called only for pods
// whose nodes PreFilter narrowed or kept off held devices. The framework evaluates only the allowed nodes
// anyway, except a nominated node and the batching hint, which it tries first.
func (pl *Coscheduling) Filter(_ context.Context, state fwk.CycleState, _ *v1.Pod, nodeInfo fwk.NodeInfo) *fwk.Status {
	node := nodeInfo.Node().Name
	if st := heldDevicesFilter(state, node); st != nil {
		return st
	}
	data, err := state.Read(allowedNodesKey)
	if err != nil {
		return nil
	}
	a := data.(*allowedNodes)
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

// rejectInPreFilter refuses a member in PreFilter, marking the cycle for PostFilter: rejected as a
// whole (nothing is held), and, for a gang that does not fit the free resources, infeasible
// (PostFilter preempts for it).
func (pl *Coscheduling) rejectInPreFilter(state fwk.CycleState, msg string, infeasible bool) (*fwk.PreFilterResult, *fwk.Status) {
	if infeasible {
		state.Write(infeasibleKey, rejectedMark{})
	}
	state.Write(rejectedByPreFilterKey, rejectedMark{})
	return nil, fwk.NewStatus(fwk.UnschedulableAndUnresolvable, msg)
}

type rejectedMark struct{}

func (rejectedMark) Clone() fwk.StateData { return rejectedMark{} }
