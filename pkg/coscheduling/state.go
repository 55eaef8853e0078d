package coscheduling

import (
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/utils/clock"

	"github.com/custom-scheduler/custom-scheduler/pkg/apis/scheduling/v1alpha1"
	"github.com/custom-scheduler/custom-scheduler/pkg/coscheduling/gang"
	"github.com/custom-scheduler/custom-scheduler/pkg/coscheduling/metrics"
	"github.com/custom-scheduler/custom-scheduler/pkg/coscheduling/podgroup"
	resv "github.com/custom-scheduler/custom-scheduler/pkg/coscheduling/reservation"
	"github.com/custom-scheduler/custom-scheduler/pkg/coscheduling/status"
	"github.com/custom-scheduler/custom-scheduler/pkg/coscheduling/tree"
)

// The plugin's bookkeeping of gangs: creating and dropping their state, running a gang's steps
// (stepLocked) and reporting a failed attempt, the back-off, held-back members, and the status
// updater's view of an attempt. Callers of *Locked methods hold pl.mu.

// gangForLocked returns the state of pg's group, creating it (see gang.Registry.For). The reservation
// of an earlier PodGroup of the same name is ended by endRetired, outside this cycle and its lock.
func (pl *Coscheduling) gangForLocked(pg *v1alpha1.PodGroup) *gang.Gang {
	g, made, retired := pl.gangs.For(pg.Namespace, pg.Name, pg.UID, pl.clock.Now)
	if made {
		pl.trackedChangedLocked()
	}
	if retired {
		select {
		case pl.retiring <- struct{}{}:
		default:
		}
	}
	return g
}

// dropIfUnusedLocked drops a group's state once it holds nothing and no live pod of the group is
// left (see gang.Unused), its reservation ended first.
func (pl *Coscheduling) dropIfUnusedLocked(g *gang.Gang, now time.Time) {
	if !gang.Unused(g, now, pl.members.Count(g.Namespace, g.Name)) {
		return
	}
	pl.stepReservationAsyncLocked(g, resv.Input{Event: resv.Deleted, Now: now, Message: "no live member is left"})
	pl.gangs.Drop(g)
	pl.trackedChangedLocked()
}

// trackedChangedLocked sets the gauge of tracked groups.
func (pl *Coscheduling) trackedChangedLocked() {
	metrics.TrackedGroups.WithLabelValues(pl.profile).Set(float64(pl.gangs.Len()))
}

// forget stops counting a pod that is gone or no longer live (deleted, being deleted, or finished),
// under pl.mu: it leaves its group's members at once, so no quorum is completed with it. A member
// waiting at Permit stays in the waiting set: the framework rejects it and its Unreserve fails the
// attempt.
func (pl *Coscheduling) forget(pod *v1.Pod) {
	pl.mu.Lock()
	defer pl.mu.Unlock()
	now := pl.clock.Now()
	pl.heldBack.Release(pod.UID)
	pl.stamps.Delete(pod.UID)
	name, _ := podgroup.Of(pod)
	g := pl.gangs.Get(podgroup.Key(pod.Namespace, name))
	if g == nil {
		return
	}
	g.Forget(pod.UID)
	pl.belowMinMemberLocked(g, pl.podGroups.Get(g.Namespace, g.Name), now)
	pl.dropIfUnusedLocked(g, now)
}

// stepLocked runs one of a gang's steps (package gang: OnPermit, OnReserve, ...) and does what the step
// leaves to the plugin's state: the waiting gauge, and the back-off timer and the reservations'
// QuorumReached that gang.Registry.AfterStep asks for. The I/O its Result asks for (allow, reject,
// events, status) is the caller's, after releasing pl.mu.
func (pl *Coscheduling) stepLocked(g *gang.Gang, step func() gang.Result) gang.Result {
	r, changed := pl.gangs.Step(g, func() gang.Result {
		r := step()
		if r.AllowWaiting || r.RejectWaiting {
			r.Pods = append(r.Pods, pl.followTreeLocked(g, r)...)
		}
		return r
	})
	if changed {
		metrics.GangsWaiting.WithLabelValues(pl.profile).Set(float64(pl.gangs.Waiting()))
	}
	quorum, backoff := pl.gangs.AfterStep(g, r)
	for _, h := range quorum {
		pl.stepReservationAsyncLocked(h, resv.Input{Event: resv.QuorumReached, Now: r.Now})
	}
	if backoff {
		pl.startBackoffLocked(g, r.Backoff)
	}
	return r
}

// failed reports a failed attempt, after pl.mu is released: the metrics, the waiting members rejected,
// the event on the PodGroup and on each member it concerns (the waiting ones and those named), and the
// status.
func (pl *Coscheduling) failed(pg *v1alpha1.PodGroup, r gang.Result, metricReason string, concerned ...*v1.Pod) {
	if r.Reason == podgroup.ReasonGangTimedOut {
		metrics.GangTimeouts.WithLabelValues(pl.profile).Inc()
	}
	metrics.GangRejections.WithLabelValues(pl.profile, metricReason).Inc()
	pl.rejectWaiting(r.Pods, r.Message)
	pl.recorder.Failure(pg, r.Reason, r.Message, append(r.Pods, concerned...))
	if pg != nil {
		pl.notifyStatus(podgroup.Key(pg.Namespace, pg.Name))
	}
}

// startBackoffLocked brings the group back when its back-off ends: with no back-off, at once (the
// rejected members would otherwise wait for an event that concerns them).
func (pl *Coscheduling) startBackoffLocked(g *gang.Gang, backoff time.Duration) {
	namespace, name := g.Namespace, g.Name
	g.ArmBackoff(backoff, func(d time.Duration) clock.Timer {
		return pl.clock.AfterFunc(d, func() { pl.backoffEnded(namespace, name) })
	})
}

// backoffEnded brings a group back after its back-off, or drops its state if nothing is left of it;
// the members' nominations are cleared after an attempt a member led (see gang.Gang.BackoffEnded).
func (pl *Coscheduling) backoffEnded(namespace, name string) {
	pl.mu.Lock()
	clear := false
	if g := pl.gangs.Get(podgroup.Key(namespace, name)); g != nil {
		clear = g.BackoffEnded()
		// The back-off's end is the time now (and the clock may not be read from its own callback).
		pl.dropIfUnusedLocked(g, g.BackoffUntil)
	}
	pl.mu.Unlock()
	if clear && pl.preempt != nil {
		pl.clearNominations(pl.ctx, pl.members.InGroup(namespace, name), "")
	}
	pl.activateGroup(namespace, name)
}

// attemptInfo returns the group's attempt state for the status updater (see status.AttemptOf).
func (pl *Coscheduling) attemptInfo(key string) status.Attempt {
	pl.mu.RLock()
	defer pl.mu.RUnlock()
	reason, msg := pl.gangs.Ended(key)
	return status.AttemptOf(pl.gangs.Get(key), reason, msg, pl.reservation.Timeout)
}

// waitingForQuorumEvent records WaitingForQuorum on the PodGroup if the attempt that started at start
// still waits for its quorum gang.GateEventDelay later (see gang.Registry.Gathering), with the count of
// that moment (podgroup.WaitingForQuorumMessage). Most gangs reach
// their quorum within milliseconds of their first reservation; the PodGroup's Scheduled condition says
// WaitingForQuorum meanwhile. (It reads no clock: a fake clock runs it under its own lock.)
func (pl *Coscheduling) waitingForQuorumEvent(namespace, name string, start time.Time) {
	pl.mu.RLock()
	count, deadline, waiting := pl.gangs.Gathering(podgroup.Key(namespace, name), start)
	pl.mu.RUnlock()
	pg := pl.podGroups.Get(namespace, name)
	if !waiting || pg == nil {
		return
	}
	pl.recorder.PodGroup(pg, v1.EventTypeNormal, podgroup.ReasonWaitingForQuorum, podgroup.WaitingForQuorumMessage(pg, gang.GateEventDelay, count, deadline))
}

// recount says why a held-back member waits for its group's members or their claims now (see
// holdBack), for its delayed event (see effects.HeldBack); ok false: its PodGroup is gone.
func (pl *Coscheduling) recount(pod *v1.Pod) (reason, msg string, ok bool) {
	name, _ := podgroup.Of(pod)
	pg := pl.podGroups.Get(pod.Namespace, name)
	if pg == nil {
		return "", "", false
	}
	reason, msg = pl.holdBack(pod, pg)
	return reason, msg, true
}

// holdBack says whether a member of pg waits for its group's members or their claims (see
// gang.HoldBack), counted on the pod handler's counts.
func (pl *Coscheduling) holdBack(pod *v1.Pod, pg *v1alpha1.PodGroup) (reason, msg string) {
	return gang.HoldBack(podgroup.Key(pod.Namespace, pg.Name), podgroup.MinMember(pg), pl.credit(pod),
		func(n int) int { return pl.members.CountUpTo(pod.Namespace, pg.Name, n) },
		func(n int) int { return pl.members.ReadyUpTo(pod.Namespace, pg.Name, n) })
}

// followTreeLocked moves the other groups of g's tree with g's step r (see gang.Registry.Follow) and
// returns their waiting members, allowed or rejected with g's; their events and status are written
// in the background.
func (pl *Coscheduling) followTreeLocked(g *gang.Gang, r gang.Result) []*v1.Pod {
	root := func() *tree.Branch { b, _ := pl.treeOf(g.Namespace, g.Name); return b }
	moved := pl.gangs.Follow(g, r, root, pl.backoff, pl.confirmedCountLocked, pl.stepLocked)
	if len(moved) > 0 {
		go pl.treeFollowed(g.Namespace, moved)
	}
	return gang.FollowedPods(moved)
}

// treeFollowed records what followTreeLocked did to each group on its PodGroup (see
// gang.Followed.Event).
func (pl *Coscheduling) treeFollowed(namespace string, moved []gang.Followed) {
	for _, f := range moved {
		_, name, _ := strings.Cut(f.Key, "/")
		if eventType, reason, msg := f.Event(); reason != "" {
			if pg := pl.podGroups.Get(namespace, name); pg != nil {
				pl.recorder.PodGroup(pg, eventType, reason, msg)
			}
		}
		pl.notifyStatus(f.Key)
	}
}
