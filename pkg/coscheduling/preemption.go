package coscheduling

import (
	"context"

	v1 "k8s.io/api/core/v1"
	policy "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework/preemption"

	"github.com/custom-scheduler/custom-scheduler/pkg/apis/scheduling/v1alpha1"
	"github.com/custom-scheduler/custom-scheduler/pkg/coscheduling/gang"
	"github.com/custom-scheduler/custom-scheduler/pkg/coscheduling/gangfit"
	"github.com/custom-scheduler/custom-scheduler/pkg/coscheduling/gangpreemption"
	"github.com/custom-scheduler/custom-scheduler/pkg/coscheduling/metrics"
	"github.com/custom-scheduler/custom-scheduler/pkg/coscheduling/podgroup"
	"github.com/custom-scheduler/custom-scheduler/pkg/coscheduling/tree"
)

// Gang-aware preemption replaces DefaultPreemption in a profile (PostFilter), on upstream's machinery
// (its Evaluator, Executor, victim ordering and PDB accounting: see gangpreemption). What differs is
// the unit of eviction and the preemptor:
//
//   - A victim is a whole gang: the bound and reserved members of a PodGroup (this plugin's label)
//     are evicted together or not at all, whoever the preemptor is, and their priority is the
//     highest of theirs. No eviction leaves a gang with between 1 and minMember-1 live members.
//   - A gang preempts as a whole: when its missing members do not fit the free resources, the
//     victims are chosen across the cluster so that all of them fit at once (per node, within the
//     gang's required topology domain), or nothing is evicted.
//
// The choice of victims is pure (gangfit: PlanPreemption, GangIndex, Reprieve); what stays here is the
// orchestration: gather, decide, then the API calls (evictions, nominations) and the follow-up of
// each eviction.

// preemptForPod runs upstream's preemption for a pod that is not placed as part of a gang attempt
// (a plain pod, or an extra member of a gang that has its quorum), with whole gangs as victims.
func (pl *Coscheduling) preemptForPod(ctx context.Context, state fwk.CycleState, pod *v1.Pod, m fwk.NodeToStatusReader) (*fwk.PostFilterResult, *fwk.Status) {
	if pl.preempt == nil {
		return nil, fwk.NewStatus(fwk.Unschedulable)
	}
	gangpreemption.PrepareGangIndex(state, pl.handle.SnapshotSharedLister().NodeInfos())
	res, st := pl.preempt.Evaluator.Preempt(ctx, state, pod, m)
	result, st := gangpreemption.PodOutcome(st, func() string { return pl.reservationNote(pod) })
	metrics.PreemptionAttempts.WithLabelValues(pl.profile, "pod", result).Inc()
	return res, st
}

// stoppedPreempting forgets a gang's last preemption once preemption cannot place it: the nodes it
// nominated (kept only while its victims terminate), and a Preempting outcome, which becomes
// GangInfeasible with the whole-gang check's reason.
func (pl *Coscheduling) stoppedPreempting(pg *v1alpha1.PodGroup) {
	key := podgroup.Key(pg.Namespace, pg.Name)
	pl.mu.Lock()
	msg, changed := pl.gangs.StoppedPreempting(key)
	pl.mu.Unlock()
	if changed {
		pl.recorder.PodGroup(pg, v1.EventTypeWarning, podgroup.ReasonGangInfeasible, msg)
		pl.notifyStatus(key)
	}
}

// preemptForGang preempts for a gang found not to fit the free resources (PreFilter): it reads the
// snapshot, lets the step decide (gang.PreemptUnder: the gang's split read under the lock once the
// step needs it) and applies the decision (appliedPreemption). result is the
// preemption_attempts_total outcome. A group short only with the other groups its job needs (asJob),
// or in a job preempted in parts, preempts as its job (see gang.PreemptAs).
func (pl *Coscheduling) preemptForGang(ctx context.Context, pod *v1.Pod, pg *v1alpha1.PodGroup, asJob bool) (_ *fwk.PostFilterResult, _ *fwk.Status, result string) {
	if pl.preempt == nil {
		return nil, fwk.NewStatus(fwk.Unschedulable), gang.PreemptNotEligible
	}
	key := podgroup.Key(pg.Namespace, pg.Name)
	infos := pl.handle.SnapshotSharedLister().NodeInfos()
	job, ok := gang.PreemptAs(asJob, pl.jobOf(pod, pg, infos.List, func(in gang.PreFilterIn, root *tree.Branch) (gang.JobPreemption, bool) {
		return pl.gangForLocked(pg).JobForPreemption(in, root)
	}))
	if !ok {
		return nil, fwk.NewStatus(fwk.Unschedulable), gang.PreemptNotEligible
	}
	members := job.MembersOr(func() []*v1.Pod { return pl.members.InGroup(pg.Namespace, pg.Name) })()
	// The gang's one priority (the lowest of its members'), whichever member's PostFilter runs.
	prio, _ := gang.Priority(pod, members)
	in := gang.PreemptIn{Pod: pod, PodGroup: pg, Members: members, Job: job,
		DefaultTopology: pl.defaultTopology, Fit: &pl.fit, Logger: klog.FromContext(ctx), Leaving: pl.evicted.Leaving,
		Terminating: func(nodes []string, prio int32) int { return gangpreemption.TerminatingVictims(infos, nodes, prio) },
		Releasing:   pl.releasingClaims(ctx),
		Claims:      func() []*v1.Pod { return pl.claims.Against(prio, key) },
		PDBs:        func() ([]*policy.PodDisruptionBudget, error) { return pl.preempt.PDBs.List(labels.Everything()) }}
	// Once per attempt: the members after the first reuse its answer while nothing freed capacity.
	ck := in.Key(prio, pl.claims.VersionAgainst(prio), pl.epoch.Load(), pl.clock.Now())
	out, cached := gang.PreemptUnder(&pl.mu, func() *gang.Gang { return pl.gangForLocked(pg) }, ck, feasibilityCacheTTL, in, infos.List)
	res, st := pl.appliedPreemption(ctx, pod, pg, in, &out, cached)
	if cached || out.Result != gang.PreemptVictims {
		// A preemption's outcome is counted once its evictions are made (see preemptOutsideCycle).
		metrics.PreemptionAttempts.WithLabelValues(pl.profile, "gang", out.Result).Inc()
	}
	return res, st, out.Result
}

// appliedPreemption applies a gang preemption's decision (see preemptForGang); victims are evicted
// and the members nominated after the cycle (see preemptOutsideCycle). cached: the decision is an
// earlier member's of this attempt (its event was recorded then).
func (pl *Coscheduling) appliedPreemption(ctx context.Context, pod *v1.Pod, pg *v1alpha1.PodGroup, in gang.PreemptIn, out *gang.PreemptOut, cached bool) (*fwk.PostFilterResult, *fwk.Status) {
	key := podgroup.Key(pg.Namespace, pg.Name)
	if msg := out.MixedPriorities(key, pod, in.Members, cached); msg != "" {
		pl.recorder.PodGroup(pg, v1.EventTypeWarning, podgroup.ReasonMixedPriorities, msg)
	}
	prio, _ := gang.Priority(pod, in.Members)
	st := out.Status(prio)
	switch {
	case out.Result == gang.PreemptError || out.Result == gang.PreemptWaiting:
		return nil, st
	case out.Stopped():
		pl.stoppedPreempting(pg)
		// The nominations a gang's earlier preemption made keep no room for it now.
		members, drop := out.Unnominated(in, func() bool { return pl.holdsReservation(key) }, func() []*v1.Pod { return pl.members.InGroup(pg.Namespace, pg.Name) })
		if !drop {
			return nil, st
		}
		pl.clearNominations(ctx, members, pod.UID)
		return framework.NewPostFilterResultWithNominatedNode(""), st
	}
	plan := out.Plan
	// The API calls are made outside the scheduling cycle, as upstream's preemption does: the
	// members are held back (gang.Gang.Stage) until they are done, and activated then; for a job, the
	// members of all its groups, which would otherwise preempt for it again before these calls are
	// made (nothing yet leaving, nothing nominated).
	groups := []*v1alpha1.PodGroup{pg}
	if in.Job != nil {
		groups = append(groups, pl.podGroups.Of(pl.jobLeaves(pg.Namespace, pg.Name))...)
	}
	pl.mu.Lock()
	for _, o := range groups {
		pl.gangForLocked(o).StartPreempting()
	}
	pl.mu.Unlock()
	logger := klog.FromContext(ctx)
	go pl.preemptOutsideCycle(klog.NewContext(pl.ctx, logger), pod, pg, groups, in.Members, plan, prio, out.Need)
	return gang.NominatedResult(plan.Assignment, pod.UID), st
}

// preemptOutsideCycle makes a gang preemption's API calls after its scheduling cycle: the evictions,
// then the members' nominations (only of those still in the store, see effects.Nominate), the end of a
// reservation the gang held, the outcome, the event; then it lets the members of groups (pg's, and
// for a job its other groups') in again.
func (pl *Coscheduling) preemptOutsideCycle(ctx context.Context, pod *v1.Pod, pg *v1alpha1.PodGroup, groups []*v1alpha1.PodGroup, members []*v1.Pod, plan gangfit.Plan, prio int32, need int) {
	key := podgroup.Key(pg.Namespace, pg.Name)
	logger := klog.FromContext(ctx)
	defer func() {
		pl.mu.Lock()
		pl.gangs.DonePreempting(groups...)
		pl.mu.Unlock()
		pl.activateGroup(pg.Namespace, pg.Name)
	}()
	// The victims of earlier preemptions that are long gone are forgotten (see gangpreemption.Evicted); a
	// victim counts as leaving once its eviction succeeded (see victimEvicted).
	pl.evicted.ForgetOld(pl.clock.Now())
	if err := pl.preempt.Evict(ctx, gangpreemption.NewGang(pg, members, prio, pod.Spec.SchedulerName), plan.Victims, plan.Violations); err != nil {
		metrics.PreemptionAttempts.WithLabelValues(pl.profile, "gang", gang.PreemptError).Inc()
		logger.Error(err, "Gang preemption failed: an eviction failed; the gang tries again", "podGroup", key)
		return
	}
	metrics.PreemptionAttempts.WithLabelValues(pl.profile, "gang", gang.PreemptVictims).Inc()
	nodesUsed := pl.nominate(ctx, pod, plan.Assignment, prio)
	msg := gang.PreemptingMessage(plan, prio, need, nodesUsed)
	// A reservation the gang held ends: the preemption's nominations are the gang's now.
	pl.reservationPreempted(ctx, pg, gang.Kept(plan.Assignment), gang.PreemptsInsteadMessage(len(plan.Victims), nodesUsed))
	logger.V(2).Info("Gang preempts", "pod", klog.KObj(pod), "podGroup", key, "victims", len(plan.Victims), "gangs", plan.Gangs, "pdbViolations", plan.Violations)
	pl.mu.Lock()
	pl.gangs.Preempted(pg, nodesUsed, msg)
	pl.mu.Unlock()
	// The victims' room is the gang's now: every other gang checks again too.
	pl.epoch.Add(1)
	pl.recorder.PodGroup(pg, v1.EventTypeNormal, podgroup.ReasonPreempting, msg)
	pl.notifyStatus(key)
}

// releasingClaims counts the claims on nodes still allocated to pods this plugin evicted (see
// devices.Source.Releasing); nil when the scheduler models no devices.
func (pl *Coscheduling) releasingClaims(ctx context.Context) func(nodes []string) int {
	src := pl.dra
	if src == nil {
		return nil
	}
	return func(nodes []string) int {
		n, err := src.Releasing(nodes, pl.evicted.UIDs(pl.clock.Now()))
		if err != nil {
			klog.FromContext(ctx).Error(err, "Counting the claims of evicted pods; preempting as if none were left")
		}
		return n
	}
}

// onEvicted counts an eviction upstream's Executor made for this plugin, and follows it (see
// victimEvicted).
func (pl *Coscheduling) onEvicted(victim *v1.Pod, preemptorType string, victims []*v1.Pod) {
	pl.victimEvicted(victim)
	kind := gangpreemption.MetricsKind(preemptorType)
	metrics.PreemptionVictimPods.WithLabelValues(pl.profile, kind).Inc()
	if gangpreemption.FirstOfItsGang(victim, victims) {
		metrics.PreemptionVictimGangs.WithLabelValues(pl.profile, kind).Inc()
		pl.status.Disrupted(victim, "the gang is preempted whole for a higher-priority "+kind)
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
	g := pl.gangs.Get(podgroup.Key(victim.Namespace, name))
	var r gang.Result // empty when the victim was not reserved here
	if g != nil {
		r = pl.stepLocked(g, func() gang.Result { r, _ := g.OnEvicted(victim, now, pl.backoff); return r })
	}
	pl.mu.Unlock()
	if r.Failed() {
		pl.failed(pl.podGroups.Get(victim.Namespace, name), r, metrics.ReasonMemberRejected)
	}
}

// victimEvictionFailed retries a failed eviction of a gang member whose siblings are leaving (see
// gangpreemption.RetryEviction).
func (pl *Coscheduling) victimEvictionFailed(ctx context.Context, c preemption.Candidate, p preemption.ExecutorPreemptor, victim *v1.Pod) {
	pl.preempt.RetryEviction(ctx, pl.ctx, c, p, victim, gangpreemption.Follow{Gone: pl.members.Gone, Leaving: pl.evicted.Leaving,
		Retried: func() { metrics.PreemptionEvictionRetries.WithLabelValues(pl.profile).Inc() }, Evicted: pl.victimEvicted})
}
