package coscheduling

import (
	"context"
	"fmt"
	"time"

	"github.com/custom-scheduler/custom-scheduler/pkg/coscheduling/attempt"

	v1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/custom-scheduler/custom-scheduler/pkg/coscheduling/gang"
	"github.com/custom-scheduler/custom-scheduler/pkg/coscheduling/podgroup"
)

// The rest of a member's cycle: PostFilter (a member that found no node, preemption and
// reservation), Reserve and Unreserve (counting toward the quorum), Permit (waiting for it).

// PostFilter is the profile's preemption (it replaces DefaultPreemption, see preemption.go) and
// fails gang attempts that cannot succeed:
//   - a gang found not to fit the free resources (PreFilter) preempts lower-priority pods as a whole;
//   - a plain pod, or an extra member of a gang that has its quorum, preempts as DefaultPreemption
//     would, except that a gang member is only ever evicted with its whole gang;
//   - a member of an attempt that found no node: if the gang cannot reach its quorum without it, the
//     attempt fails, every waiting member is rejected (releasing what it holds) and the group backs
//     off, so that it does not hold resources another gang could use.
func (pl *Coscheduling) PostFilter(ctx context.Context, state fwk.CycleState, pod *v1.Pod, m fwk.NodeToStatusReader) (*fwk.PostFilterResult, *fwk.Status) {
	name, ok := podgroup.Of(pod)
	if !ok {
		return pl.preemptForPod(ctx, state, pod, m)
	}
	if mark, err := state.Read(plannedKey); err == nil && missedPlan(mark.(plannedMark).offered, m) {
		return pl.planMissed(ctx, pod, mark.(plannedMark).offered, m)
	}
	if _, err := state.Read(rejectedByPreFilterKey); err == nil {
		// Rejected as a whole by PreFilter: nothing is held, and hints requeue the gang.
		if _, err := state.Read(infeasibleKey); err == nil {
			if pg := pl.podGroups.Get(pod.Namespace, name); pg != nil {
				return pl.preemptOrReserve(ctx, pod, pg)
			}
		}
		return nil, fwk.NewStatus(fwk.Unschedulable)
	}
	key := podgroup.Key(pod.Namespace, name)
	pg := pl.podGroups.Get(pod.Namespace, name)
	if pg == nil {
		return nil, fwk.NewStatus(fwk.Unschedulable)
	}
	want := podgroup.MinMember(pg)
	existing := pl.countMembers(pod.Namespace, name)
	now := pl.clock.Now()

	pl.mu.Lock()
	g := pl.gangForLocked(pg)
	in := attempt.Input{Kind: attempt.NoNode, Now: now, Want: want, Counted: len(g.Members), MayLead: g.MayLead(pod.UID)}
	if in.Counted < want {
		g.Unplaced[pod.UID] = struct{}{}
		in.Reachable = existing-len(g.Unplaced) >= want
	}
	d, victims := pl.stepLocked(g, in)
	switch {
	case d.Verdict == attempt.VerdictPreemptAlone:
		pl.mu.Unlock()
		// The gang has its quorum: this member is placed alone, like a plain pod.
		return pl.preemptForPod(ctx, state, pod, m)
	case !d.RejectWaiting:
		// Enough other members exist to reach the quorum without those that found no node.
		pl.mu.Unlock()
		return nil, fwk.NewStatus(fwk.Unschedulable)
	}
	msg := fmt.Sprintf("PodGroup %s rejected: member %s cannot be placed, so the quorum of %d cannot be reached now", key, klog.KObj(pod), want)
	// Members already reserved may be what is in this one's way (inter-pod anti-affinity, a node only
	// it may use): the attempt is retried after leadRetryDelay, not the back-off, with this member first.
	retry := d.Lead
	if retry {
		g.SetLead(pod)
		msg += "; retrying in a moment with it placed first"
	} else {
		g.ClearLead()
	}
	g.SetOutcome(d.Reason, msg)
	pl.mu.Unlock()

	klog.FromContext(ctx).V(3).Info("Gang attempt failed: a member found no node", "pod", klog.KObj(pod), "podGroup", key, "rejectedWaiting", len(victims), "retryWithItFirst", retry)
	gangRejections.WithLabelValues(pl.profile, reasonMemberUnschedulable).Inc()
	pl.rejectWaiting(victims, msg)
	pl.reportFailure(pg, EventGangRejected, msg, append(victims, pod))
	return nil, fwk.NewStatus(fwk.Unschedulable, msg)
}

// Reserve counts the member toward its group's quorum and starts an attempt when none is under way.
// A member of a group that backs off is refused, so a late member cannot hold resources alone.
func (pl *Coscheduling) Reserve(_ context.Context, _ fwk.CycleState, pod *v1.Pod, nodeName string) *fwk.Status {
	// A reserved pod is assumed on its node: its nomination no longer claims room (the scheduler's
	// nominator drops it here too), or the whole-gang check would count it twice. A gang member
	// stays so while it waits at Permit and binds (see claims).
	name, ok := podgroup.Of(pod)
	if !ok {
		if pl.claims.Forget(pod) {
			pl.epoch.Add(1)
		}
		return nil
	}
	if pl.claims.Assume(pod) {
		pl.epoch.Add(1)
	}
	key := podgroup.Key(pod.Namespace, name)
	pg := pl.podGroups.Get(pod.Namespace, name)
	if pg == nil {
		return fwk.NewStatus(fwk.Unschedulable, fmt.Sprintf("PodGroup %s does not exist", key))
	}
	want := podgroup.MinMember(pg)
	now := pl.clock.Now()
	pl.mu.Lock()
	defer pl.mu.Unlock()
	g := pl.gangForLocked(pg)
	in := attempt.Input{Kind: attempt.Reserve, Now: now, Want: want, Counted: len(g.Members), Timeout: pl.scheduleTimeout(pg)}
	in.Confirmed = in.Counted
	if in.Counted >= want && !g.InProgress() {
		in.Confirmed = pl.confirmedCountLocked(g)
	}
	if d, _ := pl.stepLocked(g, in); d.Verdict == attempt.VerdictRefuse {
		return fwk.NewStatus(fwk.Unschedulable, fmt.Sprintf("PodGroup %s backs off after a failed attempt", key))
	}
	g.CountReserved(pod.UID, nodeName)
	if g.Plan.Take(nodeName) {
		placementPlanMembers.WithLabelValues(pl.profile, planPlaced).Inc()
	}
	return nil
}

// Unreserve undoes Reserve. Before the quorum is met, a member leaving (rejected, timed out, deleted,
// or failed by a later plugin) fails the whole attempt: every other waiting member is rejected so the
// resources they hold are released at once, and the group backs off. After the quorum (a bind
// failure), the member is sent back to the front of the queue to complete its gang again.
func (pl *Coscheduling) Unreserve(ctx context.Context, _ fwk.CycleState, pod *v1.Pod, _ string) {
	name, ok := podgroup.Of(pod)
	if !ok {
		return
	}
	pl.claims.Unassume(pod.UID)
	logger := klog.FromContext(ctx)
	key := podgroup.Key(pod.Namespace, name)
	now := pl.clock.Now()
	pl.mu.Lock()
	g := pl.gangs[key]
	if g == nil {
		pl.mu.Unlock()
		return
	}
	wasWaiting := pl.removeWaitingLocked(g, pod.UID)
	wasReserved := g.Clear(pod.UID, gang.Reserved)
	count, attemptStart := len(g.Members), g.Start
	d, victims := pl.stepLocked(g, attempt.Input{Kind: attempt.Unreserve, Now: now, WasWaiting: wasWaiting, WasReserved: wasReserved})
	if d.RetryMember {
		pl.mu.Unlock()
		// A bind failure after the quorum: retry the member ahead of other work (Activate skips its
		// back-off; it passes Permit at once while the rest of the quorum holds).
		logger.V(3).Info("Gang member failed after the quorum; retrying it at once", "pod", klog.KObj(pod), "podGroup", key)
		if pl.running.Load() {
			pl.handle.Activate(logger, map[string]*v1.Pod{pod.Namespace + "/" + pod.Name: pod})
		}
		pl.notifyStatus(key)
		return
	}
	if !d.RejectWaiting {
		// Never reserved here, or the echo of a rejection this plugin made.
		pl.dropIfUnusedLocked(g, now)
		pl.mu.Unlock()
		return
	}
	timedOut := d.Reason == EventGangTimedOut
	var msg, reason, metricReason string
	if timedOut {
		msg = fmt.Sprintf("PodGroup %s timed out: %d members were reserved or bound within %s, fewer than minMember; all waiting members were rejected",
			key, count+1, now.Sub(attemptStart).Round(time.Second))
		reason, metricReason = EventGangTimedOut, reasonTimeout
		gangTimeouts.WithLabelValues(pl.profile).Inc()
	} else {
		msg = fmt.Sprintf("PodGroup %s rejected: member %s left the attempt before the quorum was reached; all waiting members were rejected", key, klog.KObj(pod))
		reason, metricReason = EventGangRejected, reasonMemberRejected
	}
	g.SetOutcome(reason, msg)
	pl.mu.Unlock()

	logger.V(3).Info("Gang attempt failed", "pod", klog.KObj(pod), "podGroup", key, "timedOut", timedOut, "rejectedWaiting", len(victims))
	gangRejections.WithLabelValues(pl.profile, metricReason).Inc()
	pl.rejectWaiting(victims, msg)
	pl.reportFailure(pl.podGroups.Get(pod.Namespace, name), reason, msg, append(victims, pod))
}

// Permit lets a member through once minMember live members of its group are reserved or bound, and
// then allows every waiting member at once; until then the member waits, up to the group's deadline.
// The count is a map length, so Permit is O(1) apart from the members it releases; it records no
// per-member event (the PodGroup gets one event per attempt transition).
func (pl *Coscheduling) Permit(ctx context.Context, state fwk.CycleState, pod *v1.Pod, _ string) (*fwk.Status, time.Duration) {
	name, ok := podgroup.Of(pod)
	if !ok {
		return nil, 0
	}
	logger := klog.FromContext(ctx)
	key := podgroup.Key(pod.Namespace, name)
	pg := pl.podGroups.Get(pod.Namespace, name)
	if pg == nil {
		return fwk.NewStatus(fwk.Unschedulable, fmt.Sprintf("PodGroup %s was deleted", key)), 0
	}
	want := podgroup.MinMember(pg)
	now := pl.clock.Now()

	pl.mu.Lock()
	g := pl.gangForLocked(pg)
	in := attempt.Input{Kind: attempt.Permit, Now: now, Want: want, Counted: len(g.Members)}
	in.Confirmed = in.Counted
	if in.Counted >= want && g.Phase != attempt.PhaseQuorum {
		// The attempt's quorum is decided once, on the pod store's word (see confirmedCountLocked).
		in.Confirmed = pl.confirmedCountLocked(g)
	}
	count, start := in.Confirmed, g.Start
	d, pods := pl.stepLocked(g, in)
	switch {
	case d.RejectWaiting:
		// Past the attempt's deadline no quorum is declared: the framework is rejecting the waiting
		// members for their timeout, and they would count until their Unreserves run.
		msg := fmt.Sprintf("PodGroup %s timed out: %d members were reserved or bound within %s, fewer than minMember %d; all waiting members were rejected",
			key, count, now.Sub(start).Round(time.Second), want)
		g.SetOutcome(d.Reason, msg)
		pl.mu.Unlock()
		gangTimeouts.WithLabelValues(pl.profile).Inc()
		gangRejections.WithLabelValues(pl.profile, reasonTimeout).Inc()
		pl.rejectWaiting(pods, msg)
		pl.reportFailure(pg, EventGangTimedOut, msg, append(pods, pod))
		return fwk.NewStatus(fwk.Unschedulable, msg), 0
	case d.AllowWaiting:
		pl.mu.Unlock()
		pl.allow(pods)
		if d.FirstQuorum {
			// Members beyond the quorum that found no node while the attempt gathered it (they were
			// not needed then, so they did not preempt) are retried now: placed like any pod, they
			// may preempt.
			pl.activateSiblings(state, pod)
			timeToQuorum.WithLabelValues(pl.profile).Observe(now.Sub(start).Seconds())
			msg := fmt.Sprintf("%d of minMember %d live members reserved or bound; %d waiting members go on to bind", count, want, len(pods))
			logger.V(3).Info("Gang reached its quorum", "pod", klog.KObj(pod), "podGroup", key, "members", count, "allowed", len(pods))
			pl.podGroupEvent(pg, v1.EventTypeNormal, EventQuorumReached, msg)
			pl.notifyStatus(key)
		}
		return nil, 0
	case d.Verdict == attempt.VerdictRefuse:
		pl.mu.Unlock()
		if d.Refusal == attempt.RefusedFailed {
			return fwk.NewStatus(fwk.Unschedulable, fmt.Sprintf("PodGroup %s was rejected in this attempt", key)), 0
		}
		return fwk.NewStatus(fwk.Unschedulable, fmt.Sprintf("PodGroup %s timed out waiting for its quorum", key)), 0
	}
	remaining := d.WaitFor
	pl.addWaitingLocked(g, pod)
	pl.mu.Unlock()

	msg := fmt.Sprintf("%d of minMember %d members of PodGroup %s are reserved or bound; waiting up to %s for the rest",
		count, want, key, remaining.Round(time.Second))
	logger.V(4).Info("Gang member waits for the quorum", "pod", klog.KObj(pod), "podGroup", key, "members", count, "minMember", want)
	if d.ActivateSiblings {
		// The attempt has begun: bring the group's other unscheduled members forward so they are
		// tried next, together, instead of whenever their own back-off ends.
		pl.activateSiblings(state, pod)
		pl.clock.AfterFunc(gateEventDelay, func() { pl.waitingForQuorumEvent(pod.Namespace, name, start) })
	}
	// The status shows the count; notifications of a burst are coalesced into one patch.
	pl.notifyStatus(key)
	return fwk.NewStatus(fwk.Wait, msg), remaining
}
