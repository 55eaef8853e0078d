package gang

import (
	"fmt"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/custom-scheduler/custom-scheduler/pkg/apis/scheduling/v1alpha1"
	"github.com/custom-scheduler/custom-scheduler/pkg/coscheduling/podgroup"
	resv "github.com/custom-scheduler/custom-scheduler/pkg/coscheduling/reservation"
)

// The registry's part of a gang's reservation steps: what a step's effects ask of the tracked
// gangs' state (the timer stopped, the gangs waiting behind an end), when the gang's timer must be
// armed again, and the machine's input for the gang's timer and for a gang that fell below minMember.
// The owner arms the timers, keeps the gauges, and does the rest (ReservationDone) outside its lock.

// ReservationDone is what a reservation step leaves to do outside the owner's lock: at an end (End,
// EndMessage) the members' nominations cleared, the event, and the gangs waiting behind (Waiting,
// namespace and name) activated, for they take their turn now; Lost for the status; Activate for a
// recheck of the gang's members.
type ReservationDone struct {
	End, EndMessage, Lost string
	Activate              bool
	Waiting               [][2]string
	// Groups are the job's other groups whose members' nominations an end clears too (see
	// Reservation.Groups).
	Groups []string
}

// Empty reports whether nothing is left to do.
func (d ReservationDone) Empty() bool { return d.End == "" && d.Lost == "" && !d.Activate }

// EndedMessage is the ReservationEnded event of the gang of key, at an end (d.End).
func (d ReservationDone) EndedMessage(key string) string {
	return fmt.Sprintf("PodGroup %s holds its room no more (%s): %s", key, d.End, d.EndMessage)
}

// Unkept are the members whose nominations a reservation's end clears: all but keep (a preemption's,
// which are the gang's now). nil when none.
func Unkept(members []*v1.Pod, keep map[types.UID]bool) []*v1.Pod {
	var clear []*v1.Pod
	for _, m := range members {
		if !keep[m.UID] {
			clear = append(clear, m)
		}
	}
	return clear
}

// Applied applies what a step of g's reservation (e) asks of the registry's state — g's timer
// stopped, the gangs waiting behind an end listed — and returns what is left outside the lock. Arming
// the timer (e.Wake, see Reservation.Rearm) and the gauges at an end are the owner's.
func (r *Registry) Applied(g *Gang, e resv.Effects) ReservationDone {
	d := ReservationDone{End: e.End, EndMessage: e.EndMessage, Lost: e.Lost, Activate: e.Activate}
	if res := &g.Reserve; e.StopTimer && res.Timer != nil {
		res.Timer.Stop()
		res.Timer, res.TimerAt = nil, time.Time{}
	}
	if e.End != "" {
		d.Waiting = WaitingBehind(r.gangs, g)
		d.Groups, g.Reserve.Groups = g.Reserve.Groups, nil
	}
	return d
}

// Rearm reports whether the reservation's timer must be armed (again) for at, at now: one timer per
// gang, and an earlier time replaces a later one (a timer already due is armed again).
func (r *Reservation) Rearm(at, now time.Time) bool {
	return r.Timer == nil || r.TimerAt.After(at) || !r.TimerAt.After(now)
}

// Fired reports whether the reservation's timer that fired for at is its current one (a timer
// replaced or stopped since may still fire), and forgets it then: it is done.
func (r *Reservation) Fired(at time.Time) bool {
	if !r.TimerAt.Equal(at) {
		return false
	}
	r.Timer, r.TimerAt = nil, time.Time{}
	return true
}

// TimerInput is the machine's input when g's timer fires at at, with live live pods in the group and
// its PodGroup pg (nil: gone): Deleted when the PodGroup is gone or another one's now; otherwise
// Timer, with the members of the run that succeeded counted as for the quorum (as the gang's last step
// saw them).
func (g *Gang) TimerInput(pg *v1alpha1.PodGroup, live int, at time.Time) resv.Input {
	if pg == nil || pg.UID != g.PodGroupUID {
		return resv.Input{Event: resv.Deleted, Now: at, Message: "the PodGroup was deleted"}
	}
	return resv.Input{Event: resv.Timer, Now: at, Live: live + g.Credit, Trying: g.InProgress(), MinMember: podgroup.MinMember(pg)}
}

// BelowMinMember is the machine's BelowMinMember input, at now, when g waits for or holds a
// reservation and fewer than its PodGroup's minMember (pg, nil: gone) live members exist (live pods
// and the members of the run that succeeded); ok is false otherwise.
func (g *Gang) BelowMinMember(pg *v1alpha1.PodGroup, live int, now time.Time) (in resv.Input, ok bool) {
	if g.Reserve.Phase == resv.Idle || pg == nil {
		return in, false
	}
	live, want := live+g.Credit, podgroup.MinMember(pg)
	if live >= want {
		return in, false
	}
	return resv.Input{Event: resv.BelowMinMember, Now: now, Message: fmt.Sprintf("%d of minMember %d live members exist", live, want)}, true
}

// JobBelowMinMember is BelowMinMember for a group of a job whose reservation another group's gang
// holds (see Registry.HolderOf): the job's reservation hears that this group fell below its minimum.
func (g *Gang) JobBelowMinMember(pg *v1alpha1.PodGroup, live int, now time.Time) (in resv.Input, ok bool) {
	if pg == nil {
		return in, false
	}
	live, want := live+g.Credit, podgroup.MinMember(pg)
	if live >= want {
		return in, false
	}
	return resv.Input{Event: resv.BelowMinMember, Now: now, Message: fmt.Sprintf("PodGroup %s of its job: %d of minMember %d live members exist", g.Key(), live, want)}, true
}
