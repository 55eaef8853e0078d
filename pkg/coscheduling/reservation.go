package coscheduling

import (
	"context"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/utils/clock"

	"github.com/custom-scheduler/custom-scheduler/pkg/apis/scheduling/v1alpha1"
	"github.com/custom-scheduler/custom-scheduler/pkg/coscheduling/gang"
	"github.com/custom-scheduler/custom-scheduler/pkg/coscheduling/metrics"
	"github.com/custom-scheduler/custom-scheduler/pkg/coscheduling/podgroup"
	resv "github.com/custom-scheduler/custom-scheduler/pkg/coscheduling/reservation"
	"github.com/custom-scheduler/custom-scheduler/pkg/coscheduling/tree"
)

// Reservation against starvation: a gang that found no room for reservation.afterSeconds nominates
// its missing members to the nodes they will use, so that the room freeing there is not taken by pods
// of its priority or lower; it binds once the room is free. Package reservation decides when, gang
// what to step and when its timer runs, gangfit where; the plugin feeds the machine its events and
// applies the effects, its API calls and events after the plugin's lock is released.

// stepReservationLocked moves g's reservation on an event (see reservation.Step) and applies what
// belongs to the plugin's state: the timer, the plan and the metrics. What remains (nominations,
// events, the status, activations) is returned, for finishReservation once pl.mu is released.
func (pl *Coscheduling) stepReservationLocked(g *gang.Gang, in resv.Input) (resv.Effects, gang.ReservationDone) {
	e := g.StepReservation(pl.reservation, in)
	return e, pl.appliedReservationLocked(g, e, in.Now)
}

// appliedReservationLocked applies what a step of g's reservation (e, at now) asks of the plugin's
// state (see gang.Registry.Applied; the timer armed, see gang.Reservation.Arm; the metrics) and
// returns the rest.
func (pl *Coscheduling) appliedReservationLocked(g *gang.Gang, e resv.Effects, now time.Time) gang.ReservationDone {
	d := pl.gangs.Applied(g, e)
	if e.Wake {
		namespace, name, at := g.Namespace, g.Name, e.WakeAt
		g.Reserve.Arm(at, now, func(d time.Duration) clock.Timer {
			return pl.clock.AfterFunc(d, func() { pl.reservationTimer(namespace, name, at) })
		})
	}
	if e.End != "" {
		metrics.ReservationEnded(pl.profile, e.End)
		pl.reservationMetricsLocked()
	}
	return d
}

// stepReservationAsyncLocked is stepReservationLocked for callers that cannot do the rest themselves
// (they hold pl.mu): the rest is done in the background.
func (pl *Coscheduling) stepReservationAsyncLocked(g *gang.Gang, in resv.Input) {
	if g.Reserve.Idle() {
		return
	}
	if _, d := pl.stepReservationLocked(g, in); !d.Empty() {
		go pl.finishReservation(pl.ctx, g.Namespace, g.Name, nil, d, nil)
	}
}

// endRetired ends the reservations of recreated PodGroups (see gang.Registry.For) as the PodGroup's
// delete would have: the reservation's Deleted step, then finishReservation (the members'
// nominations cleared, ReservationEnded, the gangs waiting behind activated). It runs until ctx ends.
func (pl *Coscheduling) endRetired(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-pl.retiring:
		}
		pl.mu.Lock()
		todo := pl.gangs.TakeRetired()
		done := make([]gang.ReservationDone, len(todo))
		for i, o := range todo {
			_, done[i] = pl.stepReservationLocked(o.Gang(), resv.Input{Event: resv.Deleted, Now: o.At, Message: "the PodGroup was recreated"})
		}
		pl.mu.Unlock()
		for i, d := range done {
			pl.finishReservation(ctx, todo[i].Namespace, todo[i].Name, nil, d, nil)
		}
	}
}

// finishReservation does what a reservation step left: at an end, the members' nominations are
// cleared (except those keep names, a preemption's), ReservationEnded is recorded and the gangs
// waiting behind are activated; the status is written; the gang's members are activated for a
// recheck; nothing when nothing is left (see gang.ReservationDone.Empty). It reads no clock (a
// timer's callback runs it).
func (pl *Coscheduling) finishReservation(ctx context.Context, namespace, name string, pg *v1alpha1.PodGroup, d gang.ReservationDone, keep map[types.UID]bool) {
	if d.Empty() {
		return
	}
	key := podgroup.Key(namespace, name)
	if pg == nil {
		pg = pl.podGroups.Get(namespace, name)
	}
	logger := klog.FromContext(ctx)
	if d.End != "" {
		pl.clearNominations(ctx, gang.Unkept(pl.members.InGroupAnd(namespace, name, d.Groups), keep), "")
		logger.V(2).Info("Gang holds its room no more", "podGroup", key, "reason", d.End, "message", d.EndMessage)
		pl.recorder.PodGroup(pg, v1.EventTypeNormal, podgroup.ReasonReservationEnded, d.EndedMessage(key))
		for _, o := range d.Waiting {
			pl.activateGroup(o[0], o[1])
		}
		pl.activateKeptOff(logger)
	}
	if d.Lost != "" {
		logger.V(3).Info("Gang lost its place in the reservation order", "podGroup", key, "reason", d.Lost)
	}
	if d.End != "" || d.Lost != "" {
		pl.notifyStatus(key)
	}
	if d.Activate {
		pl.activateGroup(namespace, name)
	}
}

// reservationTimer is a gang's timer: it ends a reservation past its timeout, or whose gang fell
// below minMember or stopped trying; it takes a waiting gang that fell below minMember or stopped
// trying out of the order; otherwise it brings the members back for a recheck. The time is the
// timer's (a fake clock runs it under its own lock).
func (pl *Coscheduling) reservationTimer(namespace, name string, at time.Time) {
	key := podgroup.Key(namespace, name)
	pg := pl.podGroups.Get(namespace, name)
	live := pl.members.Count(namespace, name)
	pl.mu.Lock()
	g := pl.gangs.Get(key)
	if g == nil || !g.Reserve.Fired(at) {
		pl.mu.Unlock()
		return
	}
	_, d := pl.stepReservationLocked(g, g.TimerInput(pg, live, at))
	pl.mu.Unlock()
	pl.finishReservation(pl.ctx, namespace, name, pg, d, nil)
}

// adoptReservationLocked takes over a reservation a previous leader started, when g may (see
// gang.Reservation.MayAdopt and gang.Gang.AdoptReservation).
func (pl *Coscheduling) adoptReservationLocked(g *gang.Gang, c *metav1.Condition, members []*v1.Pod, groups []string, now time.Time) gang.ReservationDone {
	if !g.Reserve.MayAdopt() {
		return gang.ReservationDone{}
	}
	e := g.AdoptReservation(pl.reservation, c, members, groups, now, pl.gangs.QueueFor(g, pl.reservation, now))
	d := pl.appliedReservationLocked(g, e, now)
	if g.Reserve.Held() {
		pl.reservationMetricsLocked()
	}
	return d
}

// reservationPreempted ends the reservation that holds room for pg's gang (its own, or its job's)
// when it preempts instead: the nominations the preemption just made (keep) are the gang's now; its
// other members' are cleared.
func (pl *Coscheduling) reservationPreempted(ctx context.Context, pg *v1alpha1.PodGroup, keep map[types.UID]bool, msg string) {
	pl.mu.Lock()
	g := pl.gangs.HolderOf(podgroup.Key(pg.Namespace, pg.Name))
	if g == nil {
		pl.mu.Unlock()
		return
	}
	_, d := pl.stepReservationLocked(g, resv.Input{Event: resv.Preempting, Now: pl.clock.Now(), Message: msg})
	pl.mu.Unlock()
	pl.finishReservation(ctx, g.Namespace, g.Name, nil, d, keep)
}

// belowMinMemberLocked tells the reservations that hold or wait for g's room that fewer than
// minMember live members exist (see gang.Registry.BelowMinMember).
func (pl *Coscheduling) belowMinMemberLocked(g *gang.Gang, pg *v1alpha1.PodGroup, now time.Time) {
	pl.gangs.BelowMinMember(g, pg, pl.members.Count(g.Namespace, g.Name), now, pl.stepReservationAsyncLocked)
}

// reservationMetricsLocked sets the reservation gauges from the gangs' state. O(tracked groups),
// called when a reservation starts or ends.
func (pl *Coscheduling) reservationMetricsLocked() {
	t := gang.Held(pl.gangs.All())
	pl.reserved.Store(int64(t.Gangs))
	pl.heldVersion.Add(1)
	metrics.Reservations(pl.profile, t.Gangs, t.MilliCPU, t.Memory, t.OldestSince)
}

// reservationNote names the reservations that keep a pod of its priority off their room, for the
// pod's scheduling failure (empty when none does; see gang.KeptOff). O(tracked groups) while some gang
// holds one.
func (pl *Coscheduling) reservationNote(pod *v1.Pod) string {
	if pl.reserved.Load() == 0 {
		return ""
	}
	pl.mu.RLock()
	defer pl.mu.RUnlock()
	return gang.KeptOff(pl.gangs.All(), pod)
}

// jobToReserve is the PodGroup whose gang reserves for pod's group, and the job it reserves for (see
// gang.JobToReserve): the job's holder group when the group reserves with its job, else the group
// itself and nil.
func (pl *Coscheduling) jobToReserve(pod *v1.Pod, pg *v1alpha1.PodGroup) (*v1alpha1.PodGroup, *gang.JobPreemption) {
	job := pl.jobOf(pod, pg, func() ([]fwk.NodeInfo, error) { return pl.handle.SnapshotSharedLister().NodeInfos().List() },
		func(in gang.PreFilterIn, root *tree.Branch) (gang.JobPreemption, bool) {
			return gang.JobToReserve(in, root, podgroup.Key(pg.Namespace, pg.Name))
		})
	if job == nil {
		return pg, nil
	}
	ns, name, _ := strings.Cut(job.Holder, "/")
	if holder := pl.podGroups.Get(ns, name); holder != nil {
		return holder, job
	}
	return pg, nil
}

// holdsReservation reports whether the gang holds a reservation (its nominations are kept).
func (pl *Coscheduling) holdsReservation(key string) bool {
	if pl.reserved.Load() == 0 {
		return false
	}
	pl.mu.RLock()
	defer pl.mu.RUnlock()
	return pl.gangs.Holds(key)
}
