package coscheduling

import (
	"context"
	"fmt"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/custom-scheduler/custom-scheduler/pkg/coscheduling/attempt"
	"github.com/custom-scheduler/custom-scheduler/pkg/coscheduling/effects"
	"github.com/custom-scheduler/custom-scheduler/pkg/coscheduling/gang"
	"github.com/custom-scheduler/custom-scheduler/pkg/coscheduling/metrics"
	"github.com/custom-scheduler/custom-scheduler/pkg/coscheduling/podgroup"
)

// The end of a member's cycle: Reserve and Unreserve (counting toward the quorum), Permit (waiting for it).

// Reserve counts the member toward its group's quorum and starts an attempt when none is under way.
// A member of a group that backs off is refused, so a late member cannot hold resources alone.
func (pl *Coscheduling) Reserve(_ context.Context, state fwk.CycleState, pod *v1.Pod, nodeName string) *fwk.Status {
	if gang.Tentative(state) {
		return nil
	}
	// A reserved pod is assumed on its node: its nomination no longer claims room (the scheduler's
	// nominator drops it here too), or the whole-gang check would count it twice. It stays so while
	// it waits at Permit and binds (see claims), a pod of no gang too: the scheduler nominates every
	// pod to its node as its binding starts, and its resources and devices (the allocation in flight,
	// which the allocated state holds) are counted on the node already.
	if pl.claims.Assume(pod) {
		pl.epoch.Add(1)
	}
	name, ok := podgroup.Of(pod)
	if !ok {
		return nil
	}
	key := podgroup.Key(pod.Namespace, name)
	pg := pl.podGroups.Get(pod.Namespace, name)
	if pg == nil {
		return fwk.NewStatus(fwk.Unschedulable, fmt.Sprintf("PodGroup %s does not exist", key))
	}
	want, timeout, now := podgroup.MinMember(pg), podgroup.ScheduleTimeout(pg, pl.permitTimeout), pl.clock.Now()
	pl.mu.Lock()
	defer pl.mu.Unlock()
	g := pl.gangForLocked(pg)
	g.Credit = pl.credit(pod)
	var planned bool
	r := pl.stepLocked(g, func() (r gang.Result) {
		r, planned = g.OnReserve(pod.UID, g.Plan.ShapeFor(pod), nodeName, now, want, timeout, func() int { return pl.confirmedCountLocked(g) }, pl.backoff)
		return r
	})
	if r.Verdict == attempt.VerdictRefuse {
		return fwk.NewStatus(fwk.Unschedulable, r.Message)
	}
	if planned {
		metrics.PlacementPlanMembers.WithLabelValues(pl.profile, planPlaced).Inc()
	}
	return nil
}

// Unreserve undoes Reserve. Before the quorum is met, a member leaving (rejected, timed out, deleted,
// or failed by a later plugin) fails the whole attempt: every other waiting member is rejected so the
// resources they hold are released at once, and the group backs off. After the quorum (a bind
// failure), the member is sent back to the front of the queue to complete its gang again.
func (pl *Coscheduling) Unreserve(ctx context.Context, state fwk.CycleState, pod *v1.Pod, _ string) {
	if gang.Tentative(state) {
		return
	}
	pl.claims.Unassume(pod.UID)
	name, ok := podgroup.Of(pod)
	if !ok {
		return
	}
	logger := klog.FromContext(ctx)
	key := podgroup.Key(pod.Namespace, name)
	now := pl.clock.Now()
	pl.mu.Lock()
	g := pl.gangs.Get(key)
	if g == nil {
		pl.mu.Unlock()
		return
	}
	r := pl.stepLocked(g, func() gang.Result { return g.OnUnreserve(pod, now, pl.backoff) })
	if r.RetryMember {
		pl.mu.Unlock()
		// A bind failure after the quorum: retry the member ahead of other work (Activate skips its
		// back-off; it passes Permit at once while the rest of the quorum holds).
		logger.V(3).Info("Gang member failed after the quorum; retrying it at once", "pod", klog.KObj(pod), "podGroup", key)
		if pl.running.Load() {
			effects.Activate(logger, pl.handle, pod)
		}
		pl.notifyStatus(key)
		return
	}
	if !r.Failed() {
		// Never reserved here, or the echo of a rejection this plugin made.
		pl.dropIfUnusedLocked(g, now)
		pl.mu.Unlock()
		return
	}
	pl.mu.Unlock()
	timedOut := r.Reason == podgroup.ReasonGangTimedOut
	logger.V(3).Info("Gang attempt failed", "pod", klog.KObj(pod), "podGroup", key, "timedOut", timedOut, "rejectedWaiting", len(r.Pods))
	pl.failed(pl.podGroups.Get(pod.Namespace, name), r, metrics.LeftReason(timedOut), pod)
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
	want, now := podgroup.MinMember(pg), pl.clock.Now()
	pl.mu.Lock()
	g := pl.gangForLocked(pg)
	g.Credit = pl.credit(pod)
	g.TreeShort = pl.treeShortLocked(g, pg)
	r := pl.stepLocked(g, func() gang.Result {
		return g.OnPermit(pod, now, want, func() int { return pl.confirmedCountLocked(g) }, pl.backoff)
	})
	pl.mu.Unlock()
	switch {
	case r.Failed():
		pl.failed(pg, r, metrics.ReasonTimeout, pod)
		return fwk.NewStatus(fwk.Unschedulable, r.Message), 0
	case r.AllowWaiting:
		pl.allow(r.Pods)
		if r.FirstQuorum {
			// Members beyond the quorum that found no node while the attempt gathered it (they were
			// not needed then, so they did not preempt) are retried now: placed like any pod, they
			// may preempt.
			pl.activateSiblings(state, pod)
			metrics.TimeToQuorum.WithLabelValues(pl.profile).Observe(now.Sub(r.Start).Seconds())
			logger.V(3).Info("Gang reached its quorum", "pod", klog.KObj(pod), "podGroup", key, "members", r.Count, "allowed", len(r.Pods))
			pl.recorder.PodGroup(pg, v1.EventTypeNormal, podgroup.ReasonQuorumReached, r.Message)
			pl.notifyStatus(key)
		}
		return nil, 0
	case r.Verdict == attempt.VerdictRefuse:
		return fwk.NewStatus(fwk.Unschedulable, r.Message), 0
	}
	logger.V(4).Info("Gang member waits for the quorum", "pod", klog.KObj(pod), "podGroup", key, "members", r.Count, "minMember", want)
	if r.ActivateSiblings {
		// The attempt has begun: bring the group's other unscheduled members forward so they are
		// tried next, together, instead of whenever their own back-off ends.
		pl.activateSiblings(state, pod)
		start := r.Start
		pl.clock.AfterFunc(gang.GateEventDelay, func() { pl.waitingForQuorumEvent(pod.Namespace, name, start) })
	}
	// The status shows the count; notifications of a burst are coalesced into one patch.
	pl.notifyStatus(key)
	return fwk.NewStatus(fwk.Wait, r.Message), r.WaitFor
}
