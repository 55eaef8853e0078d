// Package reservation is a gang's reservation against starvation as a state machine: Step is the one
// place that decides when a gang starts waiting for room, when it reserves, and when a reservation
// ends and why. The plugin feeds it events (a member found no room, the plan it asked for, the gang's
// timer, the gang falling below minMember, a preemption, the quorum, the PodGroup gone, a reservation
// found after a restart) and applies its effects (plan, nominate, clear nominations, record the event
// and the status, arm the timer, activate the members). Step reads no clock, store or lock, so every
// transition is a row of TestReservationTransitions.
//
// The promise it keeps: a held reservation ends at Since+Timeout at the latest, by the gang's own
// timer, whatever the gang does (the timer needs no member to reach PostFilter); it ends at once when
// the gang falls below minMember, preempts instead, or its PodGroup goes; and it ends when the gang
// stops trying (no member found no room for StallAfter while no attempt is under way). A gang that
// waits stays in the order only while it is trying: one that fell below minMember or stopped trying
// loses its place, and regains it (from the start of its wait) when it tries again.
package reservation

import (
	"fmt"
	"time"

	"github.com/custom-scheduler/custom-scheduler/pkg/apis/config"
)

// Phase is where a gang's reservation stands.
type Phase uint8

const (
	// Idle: the gang is not waiting for room (it has its quorum, or never lacked room).
	Idle Phase = iota
	// Waiting: the gang found no room at WaitingSince, and holds none.
	Waiting
	// Held: the gang holds a reservation since Since: its missing members are nominated to the
	// nodes it will use, so pods of its priority or lower are kept off that room.
	Held
)

func (p Phase) String() string { return [...]string{"Idle", "Waiting", "Held"}[p] }

// Reasons: how a reservation ended, or why a waiting gang lost its place. They are the reasons of
// the PodGroup's Reserved condition (False) and the label of reservations_ended_total (lower case).
const (
	// EndQuorumReached: the gang reached its quorum (the room is its members').
	EndQuorumReached = "QuorumReached"
	// EndTimedOut: the reservation lasted Timeout; the gang waits again, behind the others.
	EndTimedOut = "ReservationTimedOut"
	// EndNoRoom: the room the reservation counted on is gone (taken by pods of higher priority, or
	// nodes gone).
	EndNoRoom = "NoRoom"
	// EndPodGroupDeleted: the PodGroup was deleted or recreated, or no live member is left.
	EndPodGroupDeleted = "PodGroupDeleted"
	// EndPreempting: the gang preempts lower-priority pods instead; its nominations are the
	// preemption's.
	EndPreempting = "Preempting"
	// EndBelowMinMember: fewer than minMember live members exist (a member deleted or finished,
	// minMember raised): the rest are held back and cannot use the room.
	EndBelowMinMember = "BelowMinMember"
	// EndStalled: no member of the gang found no room for StallAfter while no attempt was under way:
	// it fails for a reason the reservation does not address (a node its filters reject, a host
	// port, a volume), or is held back (backing off, gated).
	EndStalled = "Stalled"
)

// Reasons lists every reason, for metrics series that exist from the start.
var Reasons = []string{EndQuorumReached, EndTimedOut, EndNoRoom, EndPodGroupDeleted, EndPreempting, EndBelowMinMember, EndStalled}

// Args bound reservations (see the plugin's args).
type Args struct {
	// After is how long a gang waits for room before it reserves; Timeout how long a reservation
	// lasts at most.
	After, Timeout time.Duration
	// MaxGangs is how many gangs may hold a reservation at once; 0 turns reservation off.
	MaxGangs int
	// Recheck is how often a held reservation's plan is made again, and how often the timer of a
	// waiting or holding gang fires.
	Recheck time.Duration
	// StallAfter is how long a gang may go without a member finding no room before it counts as
	// stalled.
	StallAfter time.Duration
}

// Recheck is how often a reservation's plan is made again (the room it counts on may have been taken
// by pods of higher priority, or a member replaced), and how often the timer of a gang that waits or
// holds fires. StallAfter is how long a gang may go without a member finding no room before it
// stalls: three rechecks, each of which brings its members back.
const (
	Recheck    = 10 * time.Second
	StallAfter = 3 * Recheck
)

// ArgsOf are the machine's Args for a profile's reservation arguments, with Recheck and StallAfter.
func ArgsOf(a config.ReservationArgs) Args {
	return Args{After: time.Duration(a.AfterSeconds) * time.Second, Timeout: time.Duration(a.TimeoutSeconds) * time.Second,
		MaxGangs: int(a.MaxGangs), Recheck: Recheck, StallAfter: StallAfter}
}

// State is a gang's reservation.
type State struct {
	Phase Phase
	// WaitingSince is when the gang first found no room in its current wait (Waiting, Held).
	WaitingSince time.Time
	// LastTried is when a member last found no room (the gang is trying).
	LastTried time.Time
	// Prio is the gang's priority, for the order among waiting gangs.
	Prio int32
	// Unfit is set when the gang's last plan did not fit while no other gang held a reservation:
	// its members do not fit even the room that frees, so it reserves nothing and goes before no one.
	Unfit bool
	// Lost is why a waiting gang lost its place in the order (EndBelowMinMember, EndStalled); empty
	// while it has its place.
	Lost string
	// Since is when the held reservation started; PlannedAt when its plan was last made.
	Since, PlannedAt time.Time
	// Ended and EndMessage: how the last reservation ended (or why the gang lost its place), for
	// the status.
	Ended, EndMessage string
	// Seen is set once a member of the gang found no room in this process: a reservation a previous
	// leader left is adopted only before (never one this process ended).
	Seen bool
}

// Event is what happened to the gang.
type Event uint8

const (
	// NoRoom: a member's PostFilter found the gang does not fit and preemption does not help.
	NoRoom Event = iota
	// Planned: the plan NoRoom asked for (Input.Plan).
	Planned
	// Timer: the gang's timer fired (Input.Live, MinMember, Trying).
	Timer
	// BelowMinMember: fewer than minMember live members exist (a member left, minMember raised).
	BelowMinMember
	// Preempting: the gang preempts lower-priority pods instead.
	Preempting
	// QuorumReached: the gang reached its quorum.
	QuorumReached
	// Deleted: the PodGroup was deleted or recreated, or no live member is left.
	Deleted
	// Adopt: the PodGroup says a reservation is held (a previous leader's), since Input.AdoptSince.
	Adopt
	// LeftOut: the gang's job holds its room for other groups (a K of N replica left out): a gang
	// waiting gives up its place in the order, taken while the job's room was its own, so that the
	// job's holder does not wait behind it.
	LeftOut
)

func (e Event) String() string {
	return [...]string{"NoRoom", "Planned", "Timer", "BelowMinMember", "Preempting", "QuorumReached", "Deleted", "Adopt", "LeftOut"}[e]
}

// Plan is the outcome of a reservation plan, as Step needs it.
type Plan struct {
	// OK: the missing members fit the room that frees; Message says where, or why not.
	OK      bool
	Message string
	// Same: the plan holds the same members on the same nodes as the reservation's (Held).
	Same bool
}

// Input is an event with what Step needs to know about the gang at that moment.
type Input struct {
	Event Event
	Now   time.Time
	// Prio: the member's priority (NoRoom).
	Prio int32
	// Others: how many other gangs hold a reservation; Ahead: a gang earlier in the order (see
	// Before) may reserve and holds none (NoRoom, Planned, Adopt).
	Others int
	Ahead  bool
	// Plan (Planned).
	Plan Plan
	// Live and MinMember: the gang's live members and its minMember; Trying: an attempt is under
	// way (members wait at Permit) (Timer).
	Live, MinMember int
	Trying          bool
	// AdoptSince: the start of the reservation found on the PodGroup; Nominated: some of its members
	// are nominated to its room (Adopt).
	AdoptSince time.Time
	Nominated  bool
	// Message: the caller's words for the end (BelowMinMember, Preempting, Deleted).
	Message string
}

// Effects is what the caller does after Step.
type Effects struct {
	// Plan: plan the reservation now (to start one, recheck one, or learn whether the gang is unfit),
	// then call Step with Planned.
	Plan bool
	// Start: the reservation starts: nominate the plan's members, record Reserved, write the status.
	Start bool
	// Moved: the held reservation's plan changed: nominate its members again (no new Reserved).
	Moved bool
	// End (a reason) and EndMessage: the reservation ended: clear its members' nominations, record
	// ReservationEnded, write the status, let the gangs waiting behind it take their turn.
	End, EndMessage string
	// Lost: the waiting gang lost its place in the order (a reason): write the status.
	Lost string
	// Hold: the member's PostFilter answers with the reservation (its nominated node).
	Hold bool
	// Wake: arm the gang's timer at WakeAt (an earlier time replaces a later one); StopTimer: stop it.
	Wake      bool
	WakeAt    time.Time
	StopTimer bool
	// Activate: bring the gang's members back to the queue now (a recheck).
	Activate bool
	// Why: why the gang holds no reservation (NoRoom, Planned), for logs.
	Why string
}

// Eligible reports whether a waiting gang may reserve by now: it waited After, it has its place in
// the order (it is trying), and it is not unfit.
func Eligible(s State, a Args, now time.Time) bool {
	return s.Phase == Waiting && s.Lost == "" && !s.Unfit && now.Sub(s.WaitingSince) >= a.After && now.Sub(s.LastTried) < a.StallAfter
}

// Before reports whether gang a goes before gang b in the order: higher priority, or the same and
// waiting longer.
func Before(a, b State) bool {
	return a.Prio > b.Prio || (a.Prio == b.Prio && a.WaitingSince.Before(b.WaitingSince))
}

// nextWake is a held reservation's next timer: its timeout, or the next recheck.
func nextWake(s State, a Args, now time.Time) time.Time {
	end := s.Since.Add(a.Timeout)
	if next := now.Add(a.Recheck); next.Before(end) {
		return next
	}
	return end
}

// Step moves a gang's reservation on one event and says what to do about it.
func Step(s State, a Args, in Input) (State, Effects) {
	var e Effects
	now := in.Now
	end := func(reason, msg string) {
		e.End, e.EndMessage = reason, msg
		s.Ended, s.EndMessage = reason, msg
		s.Since = time.Time{}
		switch reason {
		case EndQuorumReached, EndPodGroupDeleted:
			s = State{Ended: reason, EndMessage: msg, Seen: s.Seen, Prio: s.Prio}
			e.StopTimer = true
		case EndTimedOut:
			// It waits again from now, behind the others, and plans no sooner than a recheck.
			s.Phase, s.WaitingSince, s.PlannedAt = Waiting, now, now
			if a.MaxGangs > 0 {
				e.Wake, e.WakeAt = true, now.Add(a.After)
			} else {
				e.StopTimer = true
			}
		case EndBelowMinMember, EndStalled:
			s.Phase, s.Lost = Waiting, reason
			e.StopTimer = true
		default:
			s.Phase = Waiting
			e.StopTimer = true
		}
	}
	switch in.Event {
	case NoRoom:
		s.Prio, s.LastTried, s.Lost, s.Seen = in.Prio, now, "", true
		switch s.Phase {
		case Held:
			if a.MaxGangs <= 0 {
				end(EndTimedOut, "reservation is turned off")
				return s, e
			}
			if now.Sub(s.Since) >= a.Timeout {
				end(EndTimedOut, fmt.Sprintf("the reservation timed out after %v", a.Timeout))
				return s, e
			}
			e.Hold = true
			e.Plan = now.Sub(s.PlannedAt) >= a.Recheck
			e.Wake, e.WakeAt = true, nextWake(s, a, now)
			return s, e
		case Idle:
			s.Phase, s.WaitingSince, s.Unfit = Waiting, now, false
		}
		if a.MaxGangs <= 0 {
			e.Why = "reservation is turned off"
			return s, e
		}
		if waited := now.Sub(s.WaitingSince); waited < a.After {
			e.Why = fmt.Sprintf("the gang reserves room after waiting %v (it has waited %v)", a.After, waited.Truncate(time.Second))
			e.Wake, e.WakeAt = true, s.WaitingSince.Add(a.After)
			return s, e
		}
		// The gang may reserve by now: it is rechecked every Recheck (it stays trying, and learns
		// whether it fits once others are done), and plans now if nothing is ahead of it.
		e.Wake, e.WakeAt = true, now.Add(a.Recheck)
		switch {
		case in.Others >= a.MaxGangs:
			e.Why = fmt.Sprintf("%d gangs hold reservations, the most allowed", in.Others)
		case in.Ahead:
			e.Why = "a gang earlier in the order reserves first"
		default:
			// An unfit gang plans again only every Recheck: a plan reads every pod of every node, and
			// each of its members comes here.
			e.Plan = !s.Unfit || now.Sub(s.PlannedAt) >= a.Recheck
			if !e.Plan {
				e.Wake, e.WakeAt, e.StopTimer = false, time.Time{}, true
			}
			return s, e
		}
		// Waiting its turn: plan every Recheck, to learn whether it fits the room that frees.
		e.Plan = now.Sub(s.PlannedAt) >= a.Recheck
		if s.Unfit && !e.Plan {
			// It reserves nothing and goes before no one: it is not brought back for rechecks (its
			// members come back on the events that free room, as any pod's).
			e.Wake, e.WakeAt, e.StopTimer = false, time.Time{}, true
		}
	case Planned:
		s.PlannedAt = now
		switch s.Phase {
		case Held:
			if !in.Plan.OK {
				end(EndNoRoom, in.Plan.Message)
				return s, e
			}
			e.Hold, e.Moved = true, !in.Plan.Same
		case Waiting:
			s.Unfit = !in.Plan.OK && in.Others == 0
			switch {
			case !in.Plan.OK:
				e.Why = "its members do not fit the room that frees: " + in.Plan.Message
				e.StopTimer = s.Unfit
			case Eligible(s, a, now) && in.Others < a.MaxGangs && !in.Ahead:
				s.Phase, s.Since, s.Ended, s.EndMessage = Held, now, "", ""
				e.Start, e.Hold = true, true
				e.Wake, e.WakeAt = true, nextWake(s, a, now)
			}
		}
	case Timer:
		switch s.Phase {
		case Held:
			switch {
			case !now.Before(s.Since.Add(a.Timeout)):
				end(EndTimedOut, fmt.Sprintf("the reservation timed out after %v", a.Timeout))
				e.Activate = true
			case in.Live < in.MinMember:
				end(EndBelowMinMember, fmt.Sprintf("%d of minMember %d live members exist", in.Live, in.MinMember))
			case !in.Trying && now.Sub(s.LastTried) >= a.StallAfter:
				end(EndStalled, fmt.Sprintf("no member found no room for %v, and no attempt is under way: the gang fails for a reason the reservation does not address", now.Sub(s.LastTried).Truncate(time.Second)))
			default:
				// A recheck: the members come back, and the first one plans again.
				e.Activate = true
				e.Wake, e.WakeAt = true, nextWake(s, a, now)
			}
		case Waiting:
			switch {
			case s.Lost != "" || s.Unfit:
				e.StopTimer = true
			case in.Live < in.MinMember:
				s.Lost, s.Ended, s.EndMessage = EndBelowMinMember, EndBelowMinMember, fmt.Sprintf("the gang lost its place in the reservation order: %d of minMember %d live members exist", in.Live, in.MinMember)
				e.Lost, e.StopTimer = s.Lost, true
			case !in.Trying && now.Sub(s.LastTried) >= a.StallAfter:
				s.Lost, s.Ended, s.EndMessage = EndStalled, EndStalled, fmt.Sprintf("the gang lost its place in the reservation order: no member found no room for %v", now.Sub(s.LastTried).Truncate(time.Second))
				e.Lost, e.StopTimer = s.Lost, true
			default:
				e.Activate = true
				e.Wake, e.WakeAt = true, now.Add(a.Recheck)
			}
		default:
			e.StopTimer = true
		}
	case BelowMinMember:
		switch s.Phase {
		case Held:
			end(EndBelowMinMember, in.Message)
		case Waiting:
			if s.Lost == "" {
				s.Lost, s.Ended, s.EndMessage = EndBelowMinMember, EndBelowMinMember, "the gang lost its place in the reservation order: "+in.Message
				e.Lost, e.StopTimer = s.Lost, true
			}
		}
	case Preempting:
		if s.Phase == Held {
			end(EndPreempting, in.Message)
		}
	case QuorumReached:
		if s.Phase == Held {
			end(EndQuorumReached, "the gang reached its quorum")
			return s, e
		}
		if s.Phase != Idle {
			e.StopTimer = true
		}
		s = State{Ended: s.Ended, EndMessage: s.EndMessage, Seen: s.Seen, Prio: s.Prio}
	case Deleted:
		if s.Phase == Held {
			end(EndPodGroupDeleted, in.Message)
			return s, e
		}
		if s.Phase != Idle {
			e.StopTimer = true
		}
		// How the last reservation ended stays: a gang whose state is dropped once no live member is
		// left must still show that end (the status would otherwise keep the Reserved condition).
		s = State{Ended: s.Ended, EndMessage: s.EndMessage, Seen: s.Seen}
	case LeftOut:
		if s.Phase == Waiting {
			e.StopTimer = true
			s = State{Ended: s.Ended, EndMessage: s.EndMessage, Seen: s.Seen}
		}
	case Adopt:
		// Only a gang this process has not seen trying adopts (never a reservation it ended itself,
		// whose condition a coalesced status write may not have cleared yet), and only within
		// MaxGangs.
		if s.Seen || s.Phase == Held {
			return s, e
		}
		if a.MaxGangs <= 0 || in.Others >= a.MaxGangs || !in.Nominated {
			// Not taken over: it ends here, so that the condition the previous leader left does not
			// stay True until the gang is placed, and its members' nominations keep no room. It is
			// never adopted again (Seen).
			msg := "no member is nominated to the room a previous leader reserved"
			switch {
			case a.MaxGangs <= 0:
				msg = "reservation is turned off"
			case in.Others >= a.MaxGangs:
				msg = fmt.Sprintf("%d gangs hold reservations, the most allowed", in.Others)
			}
			s.Ended, s.EndMessage, s.Seen = EndNoRoom, msg, true
			e.End, e.EndMessage = EndNoRoom, msg
			return s, e
		}
		s.Phase, s.Since, s.PlannedAt, s.LastTried, s.Lost, s.Unfit = Held, in.AdoptSince, in.AdoptSince, now, "", false
		if s.WaitingSince.IsZero() || in.AdoptSince.Before(s.WaitingSince) {
			s.WaitingSince = in.AdoptSince
		}
		s.Ended, s.EndMessage = "", ""
		e.Hold = true
		if !now.Before(s.Since.Add(a.Timeout)) {
			end(EndTimedOut, fmt.Sprintf("the reservation timed out after %v", a.Timeout))
			e.Hold = false
			return s, e
		}
		e.Wake, e.WakeAt = true, nextWake(s, a, now)
	}
	return s, e
}
