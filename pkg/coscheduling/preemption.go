package coscheduling

import (
	"context"
	"fmt"
	"github.com/custom-scheduler/custom-scheduler/pkg/coscheduling/metrics"
	"slices"
	"strings"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	corev1helpers "k8s.io/component-helpers/scheduling/corev1"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework/preemption"

	"github.com/custom-scheduler/custom-scheduler/pkg/apis/scheduling/v1alpha1"
	"github.com/custom-scheduler/custom-scheduler/pkg/coscheduling/gang"
	"github.com/custom-scheduler/custom-scheduler/pkg/coscheduling/gangfit"
	"github.com/custom-scheduler/custom-scheduler/pkg/coscheduling/gangpreemption"
	"github.com/custom-scheduler/custom-scheduler/pkg/coscheduling/podgroup"
)

// Gang-aware preemption. It replaces DefaultPreemption in a profile (PostFilter), reusing its
// machinery: upstream's Evaluator picks the node for a plain pod, upstream's Executor evicts victims
// (DisruptionTarget condition, graceful delete, event; a victim waiting at Permit is rejected in
// memory), and upstream's victim ordering and PodDisruptionBudget accounting rank the victims. What
// differs is the unit of eviction and the preemptor:
//
//   - A victim is a whole gang: the bound and reserved members of a PodGroup (this plugin's label)
//     are evicted together or not at all, whoever the preemptor is, and their priority is the
//     highest of theirs. No eviction leaves a gang with between 1 and minMember-1 live members.
//   - A gang preempts as a whole: when its missing members do not fit the free resources, the
//     victims are chosen across the cluster so that all of them fit at once (per node, within the
//     gang's required topology domain), or nothing is evicted.
//
// The choice of victims is pure (gangfit: PlanPreemption, GangIndex, Reprieve); upstream's machinery
// is wired in gangpreemption. What stays here is the orchestration: gather, decide, then the API calls
// (evictions, nominations) and the follow-up of each eviction.

// preemptForPod runs upstream's preemption for a pod that is not placed as part of a gang attempt
// (a plain pod, or an extra member of a gang that has its quorum), with whole gangs as victims.
func (pl *Coscheduling) preemptForPod(ctx context.Context, state fwk.CycleState, pod *v1.Pod, m fwk.NodeToStatusReader) (*fwk.PostFilterResult, *fwk.Status) {
	if pl.preempt == nil {
		return nil, fwk.NewStatus(fwk.Unschedulable)
	}
	gangpreemption.PrepareGangIndex(state, pl.handle.SnapshotSharedLister().NodeInfos())
	res, st := pl.preempt.Evaluator.Preempt(ctx, state, pod, m)
	result := "preempted"
	switch {
	case st.Code() == fwk.Error:
		result = "error"
	case !st.IsSuccess():
		result = "unschedulable"
	}
	metrics.PreemptionAttempts.WithLabelValues(pl.profile, "pod", result).Inc()
	msg := st.Message()
	if msg != "" {
		msg = "preemption: " + msg
	}
	if !st.IsSuccess() {
		if note := pl.reservationNote(pod); note != "" {
			msg = strings.TrimPrefix(msg+"; "+note, "; ")
		}
	}
	if msg != "" {
		return res, fwk.NewStatus(st.Code(), msg)
	}
	return res, st
}

// stoppedPreempting forgets a gang's last preemption once preemption cannot place it: the nodes it
// nominated (kept only while its victims terminate), and a Preempting outcome, which becomes
// GangInfeasible with the whole-gang check's reason.
func (pl *Coscheduling) stoppedPreempting(pg *v1alpha1.PodGroup) {
	key := podgroup.Key(pg.Namespace, pg.Name)
	pl.mu.Lock()
	g := pl.gangs[key]
	var changed bool
	var msg string
	if g != nil {
		msg, changed = g.StoppedPreempting()
	}
	pl.mu.Unlock()
	if changed {
		pl.podGroupEvent(pg, v1.EventTypeWarning, EventGangInfeasible, msg)
		pl.notifyStatus(key)
	}
}

// preemptForGang looks for the cheapest set of lower-priority victims whose eviction lets the
// gang's missing members all fit at once, evicts it, and nominates the members to the nodes the
// placement gives them. It is called when PreFilter found the gang infeasible on free resources.
// result is the preemption_attempts_total outcome.
func (pl *Coscheduling) preemptForGang(ctx context.Context, pod *v1.Pod, pg *v1alpha1.PodGroup) (_ *fwk.PostFilterResult, _ *fwk.Status, result string) {
	if pl.preempt == nil {
		return nil, fwk.NewStatus(fwk.Unschedulable), "not_eligible"
	}
	logger := klog.FromContext(ctx)
	key := podgroup.Key(pg.Namespace, pg.Name)
	prio := corev1helpers.PodPriority(pod)
	members := pl.members.InGroup(pg.Namespace, pg.Name)
	done := func(r string, res *fwk.PostFilterResult, st *fwk.Status) (*fwk.PostFilterResult, *fwk.Status, string) {
		metrics.PreemptionAttempts.WithLabelValues(pl.profile, "gang", r).Inc()
		if r == "not_eligible" || r == "not_helpful" {
			pl.stoppedPreempting(pg)
		}
		return res, st, r
	}
	// notHelpful drops the nominations a gang's earlier preemption made, unless they are its
	// reservation's.
	notHelpful := func(msg string) (*fwk.PostFilterResult, *fwk.Status, string) {
		if pl.holdsReservation(key) {
			return done("not_helpful", nil, fwk.NewStatus(fwk.Unschedulable, msg))
		}
		pl.clearNominations(ctx, members, pod.UID)
		return done("not_helpful", framework.NewPostFilterResultWithNominatedNode(""), fwk.NewStatus(fwk.Unschedulable, msg))
	}
	for _, m := range members {
		if m.Spec.PreemptionPolicy != nil && *m.Spec.PreemptionPolicy == v1.PreemptNever {
			return done("not_eligible", nil, fwk.NewStatus(fwk.Unschedulable, fmt.Sprintf("preemption: PodGroup %s: member %s has preemptionPolicy Never", key, klog.KObj(m))))
		}
	}
	nodes, err := pl.handle.SnapshotSharedLister().NodeInfos().List()
	if err != nil {
		return done("error", nil, fwk.AsStatus(err))
	}
	if !gangfit.AnyPodBelow(nodes, prio) {
		// A cluster of one priority (or the gang at the lowest): nothing could be evicted, so the
		// simulation is not built. Every member of an infeasible gang comes here on every attempt.
		return notHelpful(fmt.Sprintf("preemption: PodGroup %s does not fit, and no pod of lower priority runs on any node", key))
	}

	pl.mu.Lock()
	g := pl.gangForLocked(pg)
	nominated := slices.Clone(g.NominatedNodes)
	for _, m := range members {
		if m.Status.NominatedNodeName != "" {
			nominated = append(nominated, m.Status.NominatedNodeName)
		}
	}
	candidates, _, countedN := g.Split(members)
	need := podgroup.MinMember(pg) - countedN
	pl.mu.Unlock()

	if n := gangpreemption.TerminatingVictims(pl.handle.SnapshotSharedLister().NodeInfos(), nominated, prio); n > 0 {
		msg := fmt.Sprintf("preemption: PodGroup %s waits for %d pods it preempted to terminate", key, n)
		return done("waiting", nil, fwk.NewStatus(fwk.Unschedulable, msg))
	}
	policy, err := gangfit.PolicyFor(pg, pod, pl.defaultTopology)
	if err != nil {
		return done("not_eligible", nil, fwk.NewStatus(fwk.Unschedulable, err.Error()))
	}
	// Room nominated to other preemptors of at least this priority is not free (as in PreFilter).
	f := gangfit.New(logger, key, candidates, need, nodes, pg.Spec.MinResources, pl.claims.Against(prio, key), &pl.fit, true)
	if f == nil {
		return done("not_eligible", nil, fwk.NewStatus(fwk.Unschedulable))
	}
	pdbs, err := pl.preempt.PDBs.List(labels.Everything())
	if err != nil {
		return done("error", nil, fwk.AsStatus(fmt.Errorf("listing PodDisruptionBudgets: %w", err)))
	}
	pinned := gangfit.PinnedDomains(policy, gangfit.BoundNodes(members, nodes))
	plan := gangfit.PlanPreemption(f, nodes, policy, pinned, prio, key, pl.evicted.Leaving, pdbs)
	if !plan.Fits {
		msg := fmt.Sprintf("preemption: PodGroup %s does not fit even if all %d lower-priority pods and gangs on the nodes its members may use were evicted; nothing was evicted", key, plan.Units)
		if plan.Units == 0 {
			msg = fmt.Sprintf("preemption: PodGroup %s does not fit, and no pod of lower priority runs on the nodes its members may use", key)
		}
		return notHelpful(msg)
	}
	if len(plan.Victims) == 0 {
		// It fits without evicting anything: PreFilter rejected it for another reason (e.g. minResources).
		return done("not_helpful", nil, fwk.NewStatus(fwk.Unschedulable))
	}
	victimPods, gangs, singles, violations, assignment := plan.Victims, plan.Gangs, plan.Singles, plan.Violations, plan.Assignment
	preemptorObj := gangpreemption.NewGang(pg, members, prio, pod.Spec.SchedulerName)
	if err := pl.evict(ctx, preemptorObj, victimPods, violations); err != nil {
		return done("error", nil, fwk.AsStatus(fmt.Errorf("PodGroup %s: preempting: %w", key, err)))
	}
	nodesUsed := pl.nominate(ctx, pod, assignment, prio)
	// A reservation the gang held ends: the preemption's nominations are the gang's now.
	keep := make(map[types.UID]bool, len(assignment))
	for _, a := range assignment {
		keep[a.Pod.UID] = true
	}
	pl.reservationPreempted(ctx, pg, keep, fmt.Sprintf("the gang preempts %d lower-priority pods instead; its members are nominated to %s", len(victimPods), strings.Join(nodesUsed, ", ")))

	msg := fmt.Sprintf("preempting %d pods of lower priority than %d (%d gangs%s, %d single pods) so that %d members fit; members nominated to %s",
		len(victimPods), prio, len(gangs), listed(gangs), singles, need, strings.Join(nodesUsed, ", "))
	logger.V(2).Info("Gang preempts", "pod", klog.KObj(pod), "podGroup", key, "victims", len(victimPods), "gangs", gangs, "pdbViolations", violations)
	pl.mu.Lock()
	g.Preempted(nodesUsed, msg)
	pl.mu.Unlock()
	// The victims' room is the gang's now: every other gang checks again too.
	pl.epoch.Add(1)
	pl.podGroupEvent(pg, v1.EventTypeNormal, EventPreempting, msg)
	pl.notifyStatus(key)
	var res *fwk.PostFilterResult
	for _, a := range assignment {
		if a.Pod.UID == pod.UID {
			res = framework.NewPostFilterResultWithNominatedNode(a.Node)
		}
	}
	return done("preempted", res, fwk.NewStatus(fwk.Unschedulable, "preemption: "+msg))
}

// listed formats names for a message: " (a, b)", or nothing.
func listed(names []string) string {
	if len(names) == 0 {
		return ""
	}
	return " (" + strings.Join(names, ", ") + ")"
}

// evict forgets the victims of earlier preemptions that are long gone (see gangpreemption.Evicted),
// then evicts these (see gangpreemption.Evict); a victim counts as leaving once its eviction succeeded
// (see victimEvicted).
func (pl *Coscheduling) evict(ctx context.Context, p *gangpreemption.Gang, victims []*v1.Pod, violations int) error {
	pl.evicted.ForgetOld(pl.clock.Now())
	return pl.preempt.Evict(ctx, p, victims, violations)
}

// onEvicted counts an eviction upstream's Executor made for this plugin, and follows it (see
// victimEvicted).
func (pl *Coscheduling) onEvicted(victim *v1.Pod, preemptorType string, victims []*v1.Pod) {
	pl.victimEvicted(victim)
	kind := gangpreemption.MetricsKind(preemptorType)
	metrics.PreemptionVictimPods.WithLabelValues(pl.profile, kind).Inc()
	if gangpreemption.FirstOfItsGang(victim, victims) {
		metrics.PreemptionVictimGangs.WithLabelValues(pl.profile, kind).Inc()
	}
}

// victimEvicted records a victim whose eviction succeeded: it counts as leaving (see gangpreemption.Evicted) from
// now on, never before its delete succeeded. A victim that was reserved here (waiting at Permit, where
// upstream's Executor rejects it in memory, or on its way to bind) stops counting toward its gang's
// quorum at once, and an attempt still gathering its quorum fails at once: the victim's Unreserve runs
// later, in its binding cycle, and a sibling's Permit in between must not complete a quorum with it.
func (pl *Coscheduling) victimEvicted(victim *v1.Pod) {
	pl.evicted.Remember(victim.UID, pl.clock.Now())
	name, ok := podgroup.Of(victim)
	if !ok {
		return
	}
	now := pl.clock.Now()
	pl.mu.Lock()
	g := pl.gangs[podgroup.Key(victim.Namespace, name)]
	var r gang.Result
	var wasReserved bool
	if g != nil {
		r = pl.stepLocked(g, func() gang.Result { r, wasReserved = g.OnEvicted(victim, now, pl.backoff); return r })
	}
	pl.mu.Unlock()
	if !wasReserved || !r.Failed() {
		return
	}
	pl.failed(pl.podGroups.Get(victim.Namespace, name), r, metrics.ReasonMemberRejected)
}

// victimEvictionFailed retries a failed eviction of a gang member whose siblings are leaving (see
// gangpreemption.RetryEviction).
func (pl *Coscheduling) victimEvictionFailed(ctx context.Context, c preemption.Candidate, p preemption.ExecutorPreemptor, victim *v1.Pod) {
	pl.preempt.RetryEviction(ctx, pl.ctx, c, p, victim, gangpreemption.Follow{Gone: pl.victimGone, Leaving: pl.evicted.Leaving,
		Retried: func() { metrics.PreemptionEvictionRetries.WithLabelValues(pl.profile).Inc() }, Evicted: pl.victimEvicted})
}

// victimGone reports whether the scheduler's pod informer no longer holds the victim live (deleted,
// terminating, or another pod under its name).
func (pl *Coscheduling) victimGone(victim *v1.Pod) bool {
	obj, ok, err := pl.members.Store.GetByKey(victim.Namespace + "/" + victim.Name)
	if err != nil || !ok {
		return true
	}
	p, isPod := obj.(*v1.Pod)
	return !isPod || p.UID != victim.UID || p.DeletionTimestamp != nil
}
