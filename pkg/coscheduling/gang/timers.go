package gang

import (
	"time"

	"k8s.io/utils/clock"

	"github.com/custom-scheduler/custom-scheduler/pkg/apis/scheduling/v1alpha1"
	resv "github.com/custom-scheduler/custom-scheduler/pkg/coscheduling/reservation"
)

// A gang's timers (its reservation's, its back-off's): which one runs, and when one replaces another.
// The owner passes the clock's AfterFunc with what a timer does when it fires.

// After arms a timer that fires after d (the owner's clock.AfterFunc, with what the timer does).
type After func(d time.Duration) clock.Timer

// Arm arms the reservation's timer for at, at now, unless it is armed for then already (see Rearm):
// the timer it replaces is stopped. It reports whether it armed one.
func (r *Reservation) Arm(at, now time.Time, after After) bool {
	if !r.Rearm(at, now) {
		return false
	}
	if r.Timer != nil {
		r.Timer.Stop()
	}
	r.TimerAt, r.Timer = at, after(max(at.Sub(now), 0))
	return true
}

// Idle reports whether no event can move the reservation: it neither waits nor holds, and no timer
// is armed (the common case of every quorum and every member gone).
func (r *Reservation) Idle() bool { return r.Phase == resv.Idle && r.Timer == nil }

// ArmBackoff arms the gang's back-off timer to fire after d, stopping the one it replaces.
func (g *Gang) ArmBackoff(d time.Duration, after After) {
	if g.BackoffTimer != nil {
		g.BackoffTimer.Stop()
	}
	g.BackoffTimer = after(d)
}

// BelowMinMember tells the reservations that hold or wait for g's room that fewer than its PodGroup's
// minMember (pg, nil: gone) live members (live) exist at now: g's own (see Gang.BelowMinMember), then
// its job's, held by another group's gang (see Gang.JobBelowMinMember; the holder read after g's own
// step). step runs each reservation's step.
func (r *Registry) BelowMinMember(g *Gang, pg *v1alpha1.PodGroup, live int, now time.Time, step func(*Gang, resv.Input)) {
	if in, ok := g.BelowMinMember(pg, live, now); ok {
		step(g, in)
	}
	if h := r.HolderOf(g.Key()); h != nil && h != g {
		if in, ok := g.JobBelowMinMember(pg, live, now); ok {
			step(h, in)
		}
	}
}
