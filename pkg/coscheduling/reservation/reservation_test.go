package reservation

import (
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/custom-scheduler/custom-scheduler/pkg/apis/config"
)

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func at(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }

var args = Args{After: 30 * time.Second, Timeout: 300 * time.Second, MaxGangs: 1, Recheck: 10 * time.Second, StallAfter: 30 * time.Second}

// TestReservationTransitions has a row for every transition of a gang's reservation.
func TestReservationTransitions(t *testing.T) {
	waiting := State{Phase: Waiting, WaitingSince: at(0), LastTried: at(0), Prio: 5, Seen: true}
	// eligible: waited After, tried a moment ago.
	eligible := waiting
	eligible.LastTried = at(35)
	held := State{Phase: Held, WaitingSince: at(0), LastTried: at(40), Prio: 5, Since: at(40), PlannedAt: at(40), Seen: true}
	with := func(s State, f func(*State)) State { f(&s); return s }
	noRoom := func(s int) Input { return Input{Event: NoRoom, Now: at(s), Prio: 5} }
	planned := func(s int, ok, same bool) Input {
		return Input{Event: Planned, Now: at(s), Plan: Plan{OK: ok, Same: same, Message: "the plan"}}
	}
	timer := func(s, live int, trying bool) Input {
		return Input{Event: Timer, Now: at(s), Live: live, MinMember: 4, Trying: trying}
	}
	other := func(i Input, f func(*Input)) Input { f(&i); return i }
	off := args
	off.MaxGangs = 0

	cases := []struct {
		name  string
		args  *Args
		from  State
		in    Input
		want  State
		wantE Effects
	}{
		// NoRoom: a member found no room.
		{name: "the first failure starts the wait and wakes the gang at afterSeconds", from: State{}, in: noRoom(0),
			want:  waiting,
			wantE: Effects{Wake: true, WakeAt: at(30), Why: "the gang reserves room after waiting 30s (it has waited 0s)"}},
		{name: "a failure within afterSeconds keeps the wait", from: waiting, in: noRoom(10),
			want:  with(waiting, func(s *State) { s.LastTried = at(10) }),
			wantE: Effects{Wake: true, WakeAt: at(30), Why: "the gang reserves room after waiting 30s (it has waited 10s)"}},
		{name: "afterSeconds 0 plans at the first failure", args: &Args{Timeout: time.Minute, MaxGangs: 1, Recheck: 10 * time.Second, StallAfter: 30 * time.Second},
			from: State{}, in: noRoom(0), want: waiting, wantE: Effects{Plan: true, Wake: true, WakeAt: at(10)}},
		{name: "a gang that waited long enough plans", from: waiting, in: noRoom(30),
			want: with(waiting, func(s *State) { s.LastTried = at(30) }), wantE: Effects{Plan: true, Wake: true, WakeAt: at(40)}},
		{name: "with the most gangs holding, it waits and plans every recheck", from: waiting, in: other(noRoom(31), func(i *Input) { i.Others = 1 }),
			want:  with(waiting, func(s *State) { s.LastTried = at(31) }),
			wantE: Effects{Plan: true, Wake: true, WakeAt: at(41), Why: "1 gangs hold reservations, the most allowed"}},
		{name: "behind a gang earlier in the order, a recent plan is not made again", from: with(waiting, func(s *State) { s.PlannedAt = at(31) }),
			in:    other(noRoom(35), func(i *Input) { i.Ahead = true }),
			want:  with(waiting, func(s *State) { s.LastTried, s.PlannedAt = at(35), at(31) }),
			wantE: Effects{Wake: true, WakeAt: at(45), Why: "a gang earlier in the order reserves first"}},
		{name: "trying again regains a lost place, from the start of its wait", from: with(waiting, func(s *State) { s.Lost = EndBelowMinMember }),
			in: noRoom(50), want: with(waiting, func(s *State) { s.LastTried = at(50) }), wantE: Effects{Plan: true, Wake: true, WakeAt: at(60)}},
		{name: "reservation turned off: the gang only waits", args: &off, from: State{}, in: noRoom(0),
			want: waiting, wantE: Effects{Why: "reservation is turned off"}},
		{name: "a held reservation goes on between rechecks", from: held, in: noRoom(45),
			want: with(held, func(s *State) { s.LastTried = at(45) }), wantE: Effects{Hold: true, Wake: true, WakeAt: at(55)}},
		{name: "a held reservation plans again after a recheck", from: held, in: noRoom(50),
			want: with(held, func(s *State) { s.LastTried = at(50) }), wantE: Effects{Hold: true, Plan: true, Wake: true, WakeAt: at(60)}},
		{name: "the last recheck wakes at the timeout", from: held, in: noRoom(335),
			want: with(held, func(s *State) { s.LastTried = at(335) }), wantE: Effects{Hold: true, Plan: true, Wake: true, WakeAt: at(340)}},
		{name: "a held reservation past its timeout ends; the gang waits again from now", from: held, in: noRoom(340),
			want:  State{Phase: Waiting, WaitingSince: at(340), LastTried: at(340), PlannedAt: at(340), Prio: 5, Ended: EndTimedOut, EndMessage: "the reservation timed out after 5m0s", Seen: true},
			wantE: Effects{End: EndTimedOut, EndMessage: "the reservation timed out after 5m0s", Wake: true, WakeAt: at(370)}},
		{name: "a held reservation ends once reservation is turned off", args: &off, from: held, in: noRoom(45),
			want:  State{Phase: Waiting, WaitingSince: at(45), LastTried: at(45), PlannedAt: at(45), Prio: 5, Ended: EndTimedOut, EndMessage: "reservation is turned off", Seen: true},
			wantE: Effects{End: EndTimedOut, EndMessage: "reservation is turned off", StopTimer: true}},

		// Planned: the plan NoRoom asked for.
		{name: "an eligible gang whose plan fits starts its reservation", from: eligible, in: planned(36, true, false),
			want:  State{Phase: Held, WaitingSince: at(0), LastTried: at(35), Prio: 5, Since: at(36), PlannedAt: at(36), Seen: true},
			wantE: Effects{Start: true, Hold: true, Wake: true, WakeAt: at(46)}},
		{name: "a plan that does not fit while no one holds room marks the gang unfit", from: eligible, in: planned(36, false, false),
			want:  with(eligible, func(s *State) { s.PlannedAt, s.Unfit = at(36), true }),
			wantE: Effects{Why: "its members do not fit the room that frees: the plan", StopTimer: true}},
		{name: "an unfit gang is not brought back for rechecks", from: with(eligible, func(s *State) { s.Unfit, s.PlannedAt = true, at(36) }),
			in:    other(noRoom(40), func(i *Input) { i.Others = 1 }),
			want:  with(eligible, func(s *State) { s.Unfit, s.PlannedAt, s.LastTried = true, at(36), at(40) }),
			wantE: Effects{StopTimer: true, Why: "1 gangs hold reservations, the most allowed"}},
		{name: "an unfit gang with no one ahead plans again only after a recheck", from: with(eligible, func(s *State) { s.Unfit, s.PlannedAt = true, at(36) }),
			in:    noRoom(40),
			want:  with(eligible, func(s *State) { s.Unfit, s.PlannedAt, s.LastTried = true, at(36), at(40) }),
			wantE: Effects{StopTimer: true}},
		{name: "an unfit gang plans again after a recheck", from: with(eligible, func(s *State) { s.Unfit, s.PlannedAt = true, at(36) }),
			in:    noRoom(46),
			want:  with(eligible, func(s *State) { s.Unfit, s.PlannedAt, s.LastTried = true, at(36), at(46) }),
			wantE: Effects{Plan: true, Wake: true, WakeAt: at(56)}},
		{name: "an unfit gang's timer stops", from: with(eligible, func(s *State) { s.Unfit = true }), in: timer(40, 4, false),
			want: with(eligible, func(s *State) { s.Unfit = true }), wantE: Effects{StopTimer: true}},
		{name: "a plan that does not fit while another holds room keeps the gang in the order", from: eligible,
			in:    other(planned(36, false, false), func(i *Input) { i.Others = 1 }),
			want:  with(eligible, func(s *State) { s.PlannedAt = at(36) }),
			wantE: Effects{Why: "its members do not fit the room that frees: the plan"}},
		{name: "a plan that fits clears unfit", from: with(eligible, func(s *State) { s.Unfit = true }), in: other(planned(36, true, false), func(i *Input) { i.Others = 1 }),
			want: with(eligible, func(s *State) { s.PlannedAt = at(36) })},
		{name: "a plan that fits while the most gangs hold waits", from: eligible, in: other(planned(36, true, false), func(i *Input) { i.Others = 1 }),
			want: with(eligible, func(s *State) { s.PlannedAt = at(36) })},
		{name: "a plan that fits behind a gang earlier in the order waits", from: eligible, in: other(planned(36, true, false), func(i *Input) { i.Ahead = true }),
			want: with(eligible, func(s *State) { s.PlannedAt = at(36) })},
		{name: "a held plan unchanged: one decision, nothing moves", from: held, in: planned(50, true, true),
			want: with(held, func(s *State) { s.PlannedAt = at(50) }), wantE: Effects{Hold: true}},
		{name: "a held plan changed: the members are nominated again, no new start", from: held, in: planned(50, true, false),
			want: with(held, func(s *State) { s.PlannedAt = at(50) }), wantE: Effects{Hold: true, Moved: true}},
		{name: "the room a held plan counted on is gone: it ends, keeping its wait", from: held, in: planned(50, false, false),
			want:  State{Phase: Waiting, WaitingSince: at(0), LastTried: at(40), PlannedAt: at(50), Prio: 5, Ended: EndNoRoom, EndMessage: "the plan", Seen: true},
			wantE: Effects{End: EndNoRoom, EndMessage: "the plan", StopTimer: true}},
		{name: "a plan for a gang that stopped waiting meanwhile changes nothing", from: State{Seen: true}, in: planned(50, true, false),
			want: State{PlannedAt: at(50), Seen: true}},

		// Timer: the gang's own timer, whatever its members do.
		{name: "the timer ends a reservation at its timeout, though no member reaches PostFilter", from: held, in: timer(340, 4, false),
			want:  State{Phase: Waiting, WaitingSince: at(340), LastTried: at(40), PlannedAt: at(340), Prio: 5, Ended: EndTimedOut, EndMessage: "the reservation timed out after 5m0s", Seen: true},
			wantE: Effects{End: EndTimedOut, EndMessage: "the reservation timed out after 5m0s", Wake: true, WakeAt: at(370), Activate: true}},
		{name: "the timer ends a reservation whose gang fell below minMember", from: held, in: timer(50, 3, false),
			want:  State{Phase: Waiting, WaitingSince: at(0), LastTried: at(40), PlannedAt: at(40), Prio: 5, Lost: EndBelowMinMember, Ended: EndBelowMinMember, EndMessage: "3 of minMember 4 live members exist", Seen: true},
			wantE: Effects{End: EndBelowMinMember, EndMessage: "3 of minMember 4 live members exist", StopTimer: true}},
		{name: "the timer ends a reservation whose gang stopped trying", from: held, in: timer(70, 4, false),
			want: State{Phase: Waiting, WaitingSince: at(0), LastTried: at(40), PlannedAt: at(40), Prio: 5, Lost: EndStalled, Ended: EndStalled,
				EndMessage: "no member found no room for 30s, and no attempt is under way: the gang fails for a reason the reservation does not address", Seen: true},
			wantE: Effects{End: EndStalled, EndMessage: "no member found no room for 30s, and no attempt is under way: the gang fails for a reason the reservation does not address", StopTimer: true}},
		{name: "a gang gathering its quorum in the held room has not stalled", from: held, in: timer(70, 4, true),
			want: held, wantE: Effects{Activate: true, Wake: true, WakeAt: at(80)}},
		{name: "a recheck brings the members of a held reservation back", from: held, in: timer(50, 4, false),
			want: held, wantE: Effects{Activate: true, Wake: true, WakeAt: at(60)}},
		{name: "a waiting gang below minMember loses its place", from: eligible, in: timer(40, 3, false),
			want: with(eligible, func(s *State) {
				s.Lost, s.Ended, s.EndMessage = EndBelowMinMember, EndBelowMinMember, "the gang lost its place in the reservation order: 3 of minMember 4 live members exist"
			}),
			wantE: Effects{Lost: EndBelowMinMember, StopTimer: true}},
		{name: "a waiting gang that stopped trying loses its place", from: eligible, in: timer(65, 4, false),
			want: with(eligible, func(s *State) {
				s.Lost, s.Ended, s.EndMessage = EndStalled, EndStalled, "the gang lost its place in the reservation order: no member found no room for 30s"
			}),
			wantE: Effects{Lost: EndStalled, StopTimer: true}},
		{name: "a waiting gang still trying is brought back", from: eligible, in: timer(40, 4, false),
			want: eligible, wantE: Effects{Activate: true, Wake: true, WakeAt: at(50)}},
		{name: "a gang that lost its place is not woken", from: with(eligible, func(s *State) { s.Lost = EndStalled }), in: timer(40, 4, false),
			want: with(eligible, func(s *State) { s.Lost = EndStalled }), wantE: Effects{StopTimer: true}},
		{name: "a timer of a gang no longer waiting stops", from: State{Seen: true}, in: timer(40, 4, false),
			want: State{Seen: true}, wantE: Effects{StopTimer: true}},

		// BelowMinMember, from the pod and PodGroup handlers.
		{name: "a held reservation ends at once when the gang falls below minMember", from: held,
			in:    Input{Event: BelowMinMember, Now: at(45), Message: "3 of minMember 4 live members exist"},
			want:  State{Phase: Waiting, WaitingSince: at(0), LastTried: at(40), PlannedAt: at(40), Prio: 5, Lost: EndBelowMinMember, Ended: EndBelowMinMember, EndMessage: "3 of minMember 4 live members exist", Seen: true},
			wantE: Effects{End: EndBelowMinMember, EndMessage: "3 of minMember 4 live members exist", StopTimer: true}},
		{name: "a waiting gang below minMember loses its place at once", from: eligible,
			in: Input{Event: BelowMinMember, Now: at(45), Message: "3 of minMember 4 live members exist"},
			want: with(eligible, func(s *State) {
				s.Lost, s.Ended, s.EndMessage = EndBelowMinMember, EndBelowMinMember, "the gang lost its place in the reservation order: 3 of minMember 4 live members exist"
			}),
			wantE: Effects{Lost: EndBelowMinMember, StopTimer: true}},
		{name: "a gang not waiting has no place to lose", from: State{Seen: true}, in: Input{Event: BelowMinMember, Now: at(45)}, want: State{Seen: true}},

		// Preempting, QuorumReached, Deleted.
		{name: "a held reservation ends when the gang preempts instead", from: held, in: Input{Event: Preempting, Now: at(45), Message: "preempts"},
			want:  State{Phase: Waiting, WaitingSince: at(0), LastTried: at(40), PlannedAt: at(40), Prio: 5, Ended: EndPreempting, EndMessage: "preempts", Seen: true},
			wantE: Effects{End: EndPreempting, EndMessage: "preempts", StopTimer: true}},
		{name: "a waiting gang that preempts keeps its wait", from: eligible, in: Input{Event: Preempting, Now: at(45)}, want: eligible},
		{name: "the quorum ends a held reservation", from: held, in: Input{Event: QuorumReached, Now: at(45)},
			want:  State{Prio: 5, Ended: EndQuorumReached, EndMessage: "the gang reached its quorum", Seen: true},
			wantE: Effects{End: EndQuorumReached, EndMessage: "the gang reached its quorum", StopTimer: true}},
		{name: "the quorum ends a wait", from: with(eligible, func(s *State) { s.Unfit = true }), in: Input{Event: QuorumReached, Now: at(45)},
			want: State{Prio: 5, Seen: true}, wantE: Effects{StopTimer: true}},
		{name: "the quorum of a gang that never waited changes nothing", from: State{}, in: Input{Event: QuorumReached, Now: at(45)}, want: State{}},
		{name: "a PodGroup deleted ends its reservation", from: held, in: Input{Event: Deleted, Now: at(45), Message: "the PodGroup was deleted"},
			want:  State{Prio: 5, Ended: EndPodGroupDeleted, EndMessage: "the PodGroup was deleted", Seen: true},
			wantE: Effects{End: EndPodGroupDeleted, EndMessage: "the PodGroup was deleted", StopTimer: true}},
		{name: "a PodGroup deleted ends its wait (what this process saw stays)", from: eligible, in: Input{Event: Deleted, Now: at(45)}, want: State{Seen: true}, wantE: Effects{StopTimer: true}},
		{name: "a replica its job's room is not for gives up its place (what this process saw stays)", from: eligible, in: Input{Event: LeftOut, Now: at(45)}, want: State{Seen: true}, wantE: Effects{StopTimer: true}},
		{name: "left out, a held reservation stays (its holder's room is the job's)", from: held, in: Input{Event: LeftOut, Now: at(45)}, want: held},
		{name: "a wait that ends keeps how the last reservation ended and that this process saw it (the gang's state is dropped with it)",
			from: with(eligible, func(s *State) {
				s.Lost, s.Ended, s.EndMessage = EndBelowMinMember, EndBelowMinMember, "2 of minMember 3 live members exist"
			}),
			in:   Input{Event: Deleted, Now: at(45), Message: "no live member is left"},
			want: State{Ended: EndBelowMinMember, EndMessage: "2 of minMember 3 live members exist", Seen: true}, wantE: Effects{StopTimer: true}},

		// Adopt: a reservation a previous leader left.
		{name: "a fresh gang adopts a reservation; its start is the condition's", from: State{},
			in:    Input{Event: Adopt, Now: at(100), AdoptSince: at(40), Nominated: true},
			want:  State{Phase: Held, WaitingSince: at(40), LastTried: at(100), Since: at(40), PlannedAt: at(40)},
			wantE: Effects{Hold: true, Wake: true, WakeAt: at(110)}},
		{name: "an adopted reservation past its timeout ends at once", from: State{},
			in:    Input{Event: Adopt, Now: at(400), AdoptSince: at(40), Nominated: true},
			want:  State{Phase: Waiting, WaitingSince: at(400), LastTried: at(400), PlannedAt: at(400), Ended: EndTimedOut, EndMessage: "the reservation timed out after 5m0s"},
			wantE: Effects{End: EndTimedOut, EndMessage: "the reservation timed out after 5m0s", Wake: true, WakeAt: at(430)}},
		{name: "a reservation this process ended is not adopted again", from: State{Phase: Waiting, WaitingSince: at(340), Ended: EndTimedOut, Seen: true},
			in: Input{Event: Adopt, Now: at(341), AdoptSince: at(40)}, want: State{Phase: Waiting, WaitingSince: at(340), Ended: EndTimedOut, Seen: true}},
		{name: "beyond maxGangs the reservation is not adopted: it ends, once", from: State{}, in: Input{Event: Adopt, Now: at(100), AdoptSince: at(40), Others: 1, Nominated: true},
			want:  State{Ended: EndNoRoom, EndMessage: "1 gangs hold reservations, the most allowed", Seen: true},
			wantE: Effects{End: EndNoRoom, EndMessage: "1 gangs hold reservations, the most allowed"}},
		{name: "with reservation turned off it is not adopted: it ends", args: &off, from: State{}, in: Input{Event: Adopt, Now: at(100), AdoptSince: at(40), Nominated: true},
			want:  State{Ended: EndNoRoom, EndMessage: "reservation is turned off", Seen: true},
			wantE: Effects{End: EndNoRoom, EndMessage: "reservation is turned off"}},
		{name: "a reservation none of whose members is nominated holds no room: it ends", from: State{}, in: Input{Event: Adopt, Now: at(100), AdoptSince: at(40)},
			want:  State{Ended: EndNoRoom, EndMessage: "no member is nominated to the room a previous leader reserved", Seen: true},
			wantE: Effects{End: EndNoRoom, EndMessage: "no member is nominated to the room a previous leader reserved"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			a := args
			if tc.args != nil {
				a = *tc.args
			}
			got, gotE := Step(tc.from, a, tc.in)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("state (-want,+got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.wantE, gotE); diff != "" {
				t.Errorf("effects (-want,+got):\n%s", diff)
			}
		})
	}
}

func TestEligibleAndBefore(t *testing.T) {
	w := State{Phase: Waiting, WaitingSince: at(0), LastTried: at(30), Prio: 5}
	with := func(s State, f func(*State)) State { f(&s); return s }
	for _, tc := range []struct {
		name string
		s    State
		now  time.Time
		want bool
	}{
		{name: "waited afterSeconds and trying", s: w, now: at(30), want: true},
		{name: "not waited long enough", s: w, now: at(29)},
		{name: "held", s: with(w, func(s *State) { s.Phase = Held }), now: at(40)},
		{name: "idle", s: State{}, now: at(40)},
		{name: "lost its place", s: with(w, func(s *State) { s.Lost = EndStalled }), now: at(40)},
		{name: "unfit", s: with(w, func(s *State) { s.Unfit = true }), now: at(40)},
		{name: "stopped trying", s: w, now: at(60)},
	} {
		if got := Eligible(tc.s, args, tc.now); got != tc.want {
			t.Errorf("%s: Eligible = %v, want %v", tc.name, got, tc.want)
		}
	}
	hi := State{Prio: 10, WaitingSince: at(5)}
	lo := State{Prio: 5, WaitingSince: at(0)}
	older := State{Prio: 10, WaitingSince: at(0)}
	if !Before(hi, lo) || Before(lo, hi) || !Before(older, hi) || Before(hi, older) || Before(hi, hi) {
		t.Errorf("Before: priority first, then the longer wait, never itself")
	}
}

// TestReservationRandomized drives gangs' reservations through random events (gangs whose members
// stop reaching PostFilter for a while among them) and checks what must hold whatever the order: a
// reservation never outlives Timeout plus one recheck when its timer fires as armed; a held reservation always has its timer armed at or before its timeout; a gang that
// lost its place is never Eligible; at most MaxGangs hold when the caller counts Others right; every
// end is reported exactly when a Held state leaves Held. SEED=<n> replays a run.
func TestReservationRandomized(t *testing.T) {
	seed := uint64(time.Now().UnixNano())
	if s := os.Getenv("SEED"); s != "" {
		v, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			t.Fatalf("SEED=%q: %v", s, err)
		}
		seed = v
	}
	rng := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	defer func() {
		if t.Failed() {
			t.Logf("replay with SEED=%d go test -run TestReservationRandomized ./pkg/coscheduling/reservation/", seed)
		}
	}()
	const gangs, rounds, steps = 4, 200, 120
	a := Args{After: 3 * time.Second, Timeout: 20 * time.Second, MaxGangs: 1, Recheck: 2 * time.Second, StallAfter: 6 * time.Second}
	for round := range rounds {
		states := make([]State, gangs)
		wakeAt := make([]time.Time, gangs)
		// quiet gangs send no NoRoom (their members do not reach PostFilter).
		quiet := make([]bool, gangs)
		now := t0
		for step := range steps {
			now = now.Add(time.Duration(rng.IntN(1500)) * time.Millisecond)
			// Fire every timer that is due first, as the clock would.
			for i := range states {
				if !wakeAt[i].IsZero() && !now.Before(wakeAt[i]) {
					fire := wakeAt[i]
					wakeAt[i] = time.Time{}
					// A gang gathering its quorum in the room, or whose members are held back
					// (quiet), is timed out by its timer alone.
					apply(t, &states[i], &wakeAt[i], Input{Event: Timer, Now: fire, Live: 4, MinMember: 4, Trying: quiet[i]}, a, round, step)
				}
			}
			for j, s := range states {
				if s.Phase == Held && now.Sub(s.Since) > a.Timeout+a.Recheck {
					t.Fatalf("round %d step %d: gang %d held since %v at %v: past its timeout plus a recheck", round, step, j, s.Since.Sub(t0), now.Sub(t0))
				}
			}
			if rng.IntN(20) == 0 {
				q := rng.IntN(gangs)
				quiet[q] = !quiet[q]
			}
			i := rng.IntN(gangs)
			others, ahead := 0, false
			for j := range states {
				if j == i {
					continue
				}
				if states[j].Phase == Held {
					others++
				} else if Eligible(states[j], a, now) && Before(states[j], states[i]) {
					ahead = true
				}
			}
			var in Input
			switch rng.IntN(10) {
			case 0, 1, 2, 3:
				if quiet[i] {
					continue
				}
				in = Input{Event: NoRoom, Now: now, Prio: int32(rng.IntN(2)), Others: others, Ahead: ahead}
				e := apply(t, &states[i], &wakeAt[i], in, a, round, step)
				if e.Plan {
					in = Input{Event: Planned, Now: now, Others: others, Ahead: ahead, Plan: Plan{OK: rng.IntN(5) > 0, Same: rng.IntN(2) == 0}}
				} else {
					continue
				}
			case 4:
				in = Input{Event: BelowMinMember, Now: now}
			case 5:
				in = Input{Event: Preempting, Now: now}
			case 6:
				in = Input{Event: QuorumReached, Now: now}
			case 7:
				in = Input{Event: Deleted, Now: now}
			default:
				continue
			}
			apply(t, &states[i], &wakeAt[i], in, a, round, step)
			held := 0
			for _, s := range states {
				if s.Phase == Held {
					held++
				}
			}
			if held > a.MaxGangs {
				t.Fatalf("round %d step %d: %d gangs hold reservations, maxGangs %d", round, step, held, a.MaxGangs)
			}
		}
	}
}

// apply runs one Step for the randomized test, keeps the gang's timer as the plugin does, and checks
// the step's promises.
func apply(t *testing.T, s *State, wakeAt *time.Time, in Input, a Args, round, step int) Effects {
	t.Helper()
	where := fmt.Sprintf("round %d step %d %v at %v", round, step, in.Event, in.Now.Sub(t0))
	before := *s
	next, e := Step(*s, a, in)
	*s = next
	if e.StopTimer {
		*wakeAt = time.Time{}
	}
	if e.Wake && (wakeAt.IsZero() || !wakeAt.After(in.Now) || e.WakeAt.Before(*wakeAt)) {
		*wakeAt = e.WakeAt
	}
	if (before.Phase == Held && s.Phase != Held) != (e.End != "") {
		t.Fatalf("%s: %v -> %v with end %q: an end is reported exactly when a reservation stops being held", where, before.Phase, s.Phase, e.End)
	}
	if s.Phase == Held {
		if in.Now.Sub(s.Since) > a.Timeout+a.Recheck {
			t.Fatalf("%s: held since %v, past its timeout plus a recheck", where, s.Since.Sub(t0))
		}
		if wakeAt.IsZero() || wakeAt.After(s.Since.Add(a.Timeout)) {
			t.Fatalf("%s: held since %v with its timer at %v: it must fire by the timeout", where, s.Since.Sub(t0), wakeAt.Sub(t0))
		}
	}
	if s.Lost != "" && Eligible(*s, a, in.Now) {
		t.Fatalf("%s: a gang that lost its place (%s) is eligible", where, s.Lost)
	}
	return e
}

// TestArgsOf: a profile's seconds become durations, reservation off (no gangs) stays off, and every
// profile rechecks and stalls alike.
func TestArgsOf(t *testing.T) {
	for _, tc := range []struct {
		name string
		in   config.ReservationArgs
		want Args
	}{
		{"on", config.ReservationArgs{AfterSeconds: 60, TimeoutSeconds: 600, MaxGangs: 2},
			Args{After: time.Minute, Timeout: 10 * time.Minute, MaxGangs: 2, Recheck: 10 * time.Second, StallAfter: 30 * time.Second}},
		{"off", config.ReservationArgs{}, Args{Recheck: 10 * time.Second, StallAfter: 30 * time.Second}},
	} {
		if got := ArgsOf(tc.in); got != tc.want {
			t.Errorf("%s: ArgsOf = %+v, want %+v", tc.name, got, tc.want)
		}
	}
}
