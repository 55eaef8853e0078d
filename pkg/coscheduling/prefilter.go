package coscheduling

import (
	"context"

	v1 "k8s.io/api/core/v1"
	corev1helpers "k8s.io/component-helpers/scheduling/corev1"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/custom-scheduler/custom-scheduler/pkg/apis/scheduling/v1alpha1"
	"github.com/custom-scheduler/custom-scheduler/pkg/coscheduling/devices"
	"github.com/custom-scheduler/custom-scheduler/pkg/coscheduling/gang"
	"github.com/custom-scheduler/custom-scheduler/pkg/coscheduling/gangfit"
	"github.com/custom-scheduler/custom-scheduler/pkg/coscheduling/metrics"
	"github.com/custom-scheduler/custom-scheduler/pkg/coscheduling/podgroup"
	"github.com/custom-scheduler/custom-scheduler/pkg/coscheduling/tree"
)

// PreFilter checks a gang whole before its first member holds anything and narrows each member's
// nodes (its gang's domain, its plan's offer); Filter enforces that narrowing on the nodes the framework
// tries before the PreFilterResult; SignPod keeps batching within a gang.

// PreFilter decides a pod's cycle in three passes. It reads, outside the plugin's lock, what the
// decision needs (preFilterIn): the member's PodGroup and policy, and, for a pod that may claim
// devices while some are held, the held nodes its devices do not fit beside (one read of the DRA
// state for the cycle, the device model asked outside the lock). The member's step (gang.Decide)
// then decides under the lock, the checks it asks for running between two holds of it
// (gang.DecideUnder). appliedPreFilter does what the step returned, in one pass; the nodes it
// allows, and those it keeps the pod off, are Filter's.
func (pl *Coscheduling) PreFilter(ctx context.Context, state fwk.CycleState, pod *v1.Pod, nodes []fwk.NodeInfo) (*fwk.PreFilterResult, *fwk.Status) {
	in, pg, refused := pl.preFilterIn(ctx, pod, nodes)
	if refused.Message != "" {
		pl.heldBack.Hold(ctx, pod, refused.Reason, refused.Message)
		return gang.Reject(state, refused.Message, false, false)
	}
	out := gang.PreFilterOut{KeptOff: in.KeptOff}
	if pg != nil {
		out = gang.DecideUnder(&pl.mu, func() *gang.Gang { return pl.gangForLocked(pg) }, in)
	}
	return pl.appliedPreFilter(ctx, state, pod, pg, out)
}

// preFilterIn reads what a pod's PreFilter step decides on, outside the plugin's lock: for a member,
// its PodGroup (nil for a pod of no gang) and its step's input; for any pod that may claim devices,
// the held nodes it is kept off (in.KeptOff). refused says why a member is refused before any step
// (see gang.PreFilterIn.Admit).
func (pl *Coscheduling) preFilterIn(ctx context.Context, pod *v1.Pod, nodes []fwk.NodeInfo) (in gang.PreFilterIn, pg *v1alpha1.PodGroup, refused gang.NotAdmitted) {
	logger := klog.FromContext(ctx)
	in = gang.PreFilterIn{Now: pl.clock.Now(), Logger: logger, Member: pod, Nodes: nodes, Epoch: pl.epoch.Load(), Fit: &pl.fit}
	// The cycle's one read of the DRA state (made when first asked), for a member's checks and the held
	// devices only: a plain pod that nothing keeps off held devices costs nothing here.
	var src *devices.Source
	prio, own := corev1helpers.PodPriority(pod), ""
	if name, ok := podgroup.Of(pod); ok {
		own = podgroup.Key(pod.Namespace, name)
		if src = pl.dra.ForCycle(); src != nil {
			in.Fit = pl.fit.WithDevices(src)
		}
		pl.running.Store(true)
		// A scheduling cycle runs only in the replica that leads.
		pl.startBackground()
		pg = pl.podGroups.Get(pod.Namespace, name)
		if refused = in.Admit(own, pg, pl.defaultTopology); refused.Message != "" {
			return in, nil, refused
		}
		in.Credit, in.Plannable = pl.credit(pod), pl.plannable(pod)
		in.CandidateNodes, in.CacheTTL = int(pl.planArgs.CandidateNodes), feasibilityCacheTTL
		in.Members = func() []*v1.Pod { return pl.members.InGroup(pod.Namespace, name) }
		in.Claimed = func(prio int32) []*v1.Pod { return pl.claims.Against(prio, own) }
		in.Claims, in.Gangs = pl.claims.VersionAgainst(prio), pl.gangs.All()
		in.Tree = func() *tree.Branch { root, _ := pl.treeOf(pod.Namespace, name); return root }
		in.GroupMembers = pl.members.InGroupKey
	}
	if pl.mayBeKeptOff(pod) {
		if src == nil {
			src = pl.dra.ForCycle()
		}
		// The held nodes whose devices the pod would take (gang.HeldDevices.KeptOff).
		in.KeptOff = pl.heldDevices(prio, own).KeptOff(logger, pod, src, pl.handle.SnapshotSharedLister().NodeInfos())
	}
	return in, pg, refused
}

// appliedPreFilter does what a pod's PreFilter step returned: the PodGroup's event and status for a
// fresh check (infeasible, or a domain chosen: never both), the pod kept off held devices, and the
// cycle's marks and result (see gang.PreFilterOut.Apply).
func (pl *Coscheduling) appliedPreFilter(ctx context.Context, state fwk.CycleState, pod *v1.Pod, pg *v1alpha1.PodGroup, out gang.PreFilterOut) (*fwk.PreFilterResult, *fwk.Status) {
	logger := klog.FromContext(ctx)
	var key string
	if pg != nil {
		key = podgroup.Key(pg.Namespace, pg.Name)
	}
	if out.Checked && out.Infeasible {
		logger.V(3).Info("Gang is infeasible on the current snapshot", "pod", klog.KObj(pod), "podGroup", klog.KObj(pg), "reason", out.Message)
		metrics.GangRejections.WithLabelValues(pl.profile, metrics.ReasonInfeasible).Inc()
	}
	if out.DomainChosen {
		logger.V(3).Info("Gang placement chosen", "pod", klog.KObj(pod), "podGroup", klog.KObj(pg), "placement", out.Placement.Message)
	}
	if eventType, reason, message := out.Event(); reason != "" {
		pl.recorder.PodGroup(pg, eventType, reason, message)
		pl.notifyStatus(key)
	}
	if out.Plan != nil && !out.Reject {
		logger.V(4).Info("Gang placement planned", "pod", klog.KObj(pod), "podGroup", klog.KObj(pg), "members", out.Plan.Left(), "nodes", len(out.Plan.Nodes))
	}
	if len(out.KeptOff) > 0 && !out.Reject {
		logger.V(4).Info("Pod kept off the devices held for reserved or nominated pods", "pod", klog.KObj(pod), "nodes", len(out.KeptOff))
		pl.keptOff.Add(pod)
	}
	return out.Apply(state, key)
}

// PreFilterExtensions returns nil: the check does not depend on other pods' placement in the cycle.
func (pl *Coscheduling) PreFilterExtensions() fwk.PreFilterExtensions { return nil }

// Filter rejects a node outside those PreFilter allowed the pod, and a node whose devices are held
// for others (see gang.Filter): O(1), and called only for pods whose nodes PreFilter narrowed or kept
// off held devices. kube-scheduler tries a pod's nominated node (from a preemption or a reservation)
// and the batching hint before, and regardless of, the PreFilterResult: without Filter a member
// nominated outside its gang's chosen domain would bind there and split the domain, or bypass its
// plan's offer.
func (pl *Coscheduling) Filter(_ context.Context, state fwk.CycleState, _ *v1.Pod, nodeInfo fwk.NodeInfo) *fwk.Status {
	return gang.Filter(state, nodeInfo.Node().Name)
}

// SignPod signs a member with its group when its PreFilter narrows its nodes (see gang.SignFragments).
// Other pods, gang members included, may be batched with any pod alike for the other plugins (this
// plugin accepts or rejects them whole).
func (pl *Coscheduling) SignPod(_ context.Context, pod *v1.Pod) ([]fwk.SignFragment, *fwk.Status) {
	name, ok := podgroup.Of(pod)
	if !ok {
		return nil, nil
	}
	if pg := pl.podGroups.Get(pod.Namespace, name); pg != nil {
		return gang.SignFragments(podgroup.Key(pod.Namespace, name), pg, pod, pl.defaultTopology, pl.plannable), nil
	}
	return nil, nil
}

// plannable reports whether a member's cycle may be narrowed by a plan: the plan is on, the member's
// constraints are all modelled, and it is not nominated (a nominated member goes where its nomination,
// from preemption or a reservation, holds room).
func (pl *Coscheduling) plannable(pod *v1.Pod) bool {
	return pl.planArgs.Enabled && pod.Status.NominatedNodeName == "" && gangfit.Plannable(pod)
}
