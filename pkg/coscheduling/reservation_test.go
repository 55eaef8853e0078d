package coscheduling

import (
	"context"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/tools/events"
	"k8s.io/component-base/metrics/testutil"

	"github.com/custom-scheduler/custom-scheduler/pkg/apis/config"
	"github.com/custom-scheduler/custom-scheduler/pkg/apis/scheduling/v1alpha1"
	"github.com/custom-scheduler/custom-scheduler/pkg/coscheduling/gang"
	"github.com/custom-scheduler/custom-scheduler/pkg/coscheduling/gangfit"
	"github.com/custom-scheduler/custom-scheduler/pkg/coscheduling/metrics"
	"github.com/custom-scheduler/custom-scheduler/pkg/coscheduling/podgroup"
	resv "github.com/custom-scheduler/custom-scheduler/pkg/coscheduling/reservation"
	"github.com/custom-scheduler/custom-scheduler/pkg/coscheduling/status"
)

// TestReservationQueue: which other gangs count as holding a reservation, and which go before a
// gang: a gang that waited long enough, holds none, is still trying and is not known never to fit,
// of higher priority or of the same and waiting longer.
func TestReservationQueue(t *testing.T) {
	args := defaultArgs()
	args.Reservation = config.ReservationArgs{AfterSeconds: 30, TimeoutSeconds: 300, MaxGangs: 1}
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	now := t0.Add(2 * time.Minute)
	waiting := func(since time.Time, prio int32) resv.State {
		return resv.State{Phase: resv.Waiting, WaitingSince: since, LastTried: now.Add(-time.Second), Prio: prio}
	}
	with := func(s resv.State, f func(*resv.State)) resv.State { f(&s); return s }
	self := waiting(t0.Add(time.Minute), 10)
	cases := []struct {
		name       string
		self       resv.State
		others     []resv.State
		wantOthers int
		wantAhead  bool
	}{
		{name: "alone", self: self},
		{name: "one holding a reservation", self: self, others: []resv.State{{Phase: resv.Held}}, wantOthers: 1},
		{name: "one that waited longer", self: self, others: []resv.State{waiting(t0, 10)}, wantAhead: true},
		{name: "one that came later", self: self, others: []resv.State{waiting(t0.Add(90*time.Second), 10)}},
		{name: "one of higher priority that came later", self: self, others: []resv.State{waiting(t0.Add(90*time.Second), 20)}, wantAhead: true},
		{name: "one of lower priority that waited longer", self: self, others: []resv.State{waiting(t0, 5)}},
		{name: "one that never fits goes before no one", self: self, others: []resv.State{with(waiting(t0, 10), func(s *resv.State) { s.Unfit = true })}},
		{name: "one that has not waited long enough", self: self, others: []resv.State{waiting(now.Add(-10*time.Second), 20)}},
		{name: "one not waiting", self: self, others: []resv.State{{Prio: 20}}},
		{name: "one below minMember goes before no one", self: self,
			others: []resv.State{with(waiting(t0, 10), func(s *resv.State) { s.Lost = resv.EndBelowMinMember })}},
		{name: "one that stopped trying goes before no one", self: self,
			others: []resv.State{with(waiting(t0, 10), func(s *resv.State) { s.LastTried = now.Add(-resv.StallAfter) })}},
		{name: "a gang new to waiting counts from now", self: resv.State{Prio: 10}, others: []resv.State{waiting(t0, 10)}, wantAhead: true},
		{name: "several", self: self, others: []resv.State{{Phase: resv.Held}, {Phase: resv.Held}, waiting(t0, 10)}, wantOthers: 2, wantAhead: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			env := newTestEnv(t, args, nil, nil)
			g := gang.New("ns", "self", "")
			g.Reserve.State = tc.self
			env.pl.gangs.Put(g)
			for i, s := range tc.others {
				o := gang.New("ns", string(rune('a'+i)), "")
				o.Reserve.State = s
				env.pl.gangs.Put(o)
			}
			env.pl.mu.Lock()
			others, ahead := env.pl.gangs.QueueFor(g, env.pl.reservation, now)(10)
			env.pl.mu.Unlock()
			if others != tc.wantOthers || ahead != tc.wantAhead {
				t.Errorf("QueueFor = %d, %v, want %d, %v", others, ahead, tc.wantOthers, tc.wantAhead)
			}
		})
	}
}

// TestEndedReservationOutlivesTheGangsState: a reservation that ended just before its gang's state was
// dropped (every member gone) still shows as ended to the status writer, which would otherwise keep
// the PodGroup's Reserved condition True (it keeps one it has no word on, for a new leader to adopt),
// and the gang's next state starts from that end; a deleted PodGroup forgets it.
func TestEndedReservationOutlivesTheGangsState(t *testing.T) {
	pg := makePG("ns", "g", 2, time.Time{})
	env := newTestEnv(t, defaultArgs(), []*v1alpha1.PodGroup{pg}, nil)
	env.pl.mu.Lock()
	g := env.pl.gangForLocked(pg)
	g.Reserve.Ended, g.Reserve.EndMessage = resv.EndBelowMinMember, "1 of minMember 2 live members exist"
	env.pl.dropIfUnusedLocked(g, env.clock.Now())
	tracked := env.pl.gangs.Get("ns/g") != nil
	env.pl.mu.Unlock()
	if tracked {
		t.Fatal("the gang's state was not dropped")
	}
	if a := env.pl.attemptInfo("ns/g"); a.ReservationEnded != resv.EndBelowMinMember || a.Reserved {
		t.Errorf("attemptInfo after the drop = %+v, want the reservation ended (BelowMinMember)", a)
	}
	env.pl.mu.Lock()
	again := env.pl.gangForLocked(pg)
	env.pl.mu.Unlock()
	if again.Reserve.Ended != resv.EndBelowMinMember {
		t.Errorf("the gang's next state starts with reservation end %q, want BelowMinMember", again.Reserve.Ended)
	}
	env.pl.mu.Lock()
	env.pl.dropIfUnusedLocked(again, env.clock.Now())
	env.pl.mu.Unlock()
	env.pl.onPodGroupDelete(pg)
	if a := env.pl.attemptInfo("ns/g"); a.ReservationEnded != "" {
		t.Errorf("attemptInfo after the PodGroup was deleted = %+v, want nothing", a)
	}
}

// TestRecreatedPodGroupEndsItsReservation: a scheduling cycle that reads a PodGroup recreated under
// its name (another UID) before the handler hears of the old one's delete starts afresh, and the old
// PodGroup's reservation is ended as its delete would have ended it, outside that cycle: its timer
// stopped, ReservationEnded recorded, the members' nominations cleared, the gauge back to none, and a
// gang waiting behind it activated.
func TestRecreatedPodGroupEndsItsReservation(t *testing.T) {
	m0, m1, w0 := member("m0", "g", "1"), member("m1", "g", "1"), member("w0", "w", "1")
	m0.Status.NominatedNodeName, m1.Status.NominatedNodeName = "n0", "n1"
	old, waiting := makePG("ns", "g", 2, time.Time{}), makePG("ns", "w", 1, time.Time{})
	old.UID = "old"
	env := newTestEnv(t, defaultArgs(), []*v1alpha1.PodGroup{old, waiting}, []*v1.Pod{m0, m1, w0})
	h := &nominatingHandle{fakeHandle: env.handle, nominated: map[string]string{}}
	env.pl.handle = h
	rec := events.NewFakeRecorder(10)
	env.pl.recorder.Events = rec
	var fired atomic.Bool

	env.pl.mu.Lock()
	g := env.pl.gangForLocked(old)
	g.Reserve.Phase, g.Reserve.Since = resv.Held, env.clock.Now()
	g.Reserve.Hold(gangfit.ReservationPlan{OK: true, Message: "holds room on 2 nodes",
		Assignment: []gangfit.Nomination{{Pod: m0, Node: "n0"}, {Pod: m1, Node: "n1"}}})
	g.Reserve.Timer = env.clock.AfterFunc(time.Minute, func() { fired.Store(true) })
	env.pl.gangForLocked(waiting).Reserve.Phase = resv.Waiting
	env.pl.reservationMetricsLocked()
	env.pl.mu.Unlock()

	recreated := old.DeepCopy()
	recreated.UID = "new"
	if err := env.pgs.Update(recreated); err != nil {
		t.Fatal(err)
	}
	env.pl.mu.Lock()
	held := env.pl.gangForLocked(recreated).Reserve.Held()
	env.pl.mu.Unlock()
	if held {
		t.Error("the recreated PodGroup's state holds the old one's reservation")
	}
	select {
	case e := <-rec.Events:
		if !strings.Contains(e, podgroup.ReasonReservationEnded) || !strings.Contains(e, "the PodGroup was recreated") {
			t.Errorf("event %q, want ReservationEnded for the recreated PodGroup", e)
		}
	case <-time.After(wait.ForeverTestTimeout):
		t.Fatal("the old PodGroup's reservation was never ended")
	}
	// The event is recorded after the nominations are cleared, before the waiting gang is activated.
	for _, m := range []string{"m0", "m1"} {
		if n, ok := h.nominated[m]; !ok || n != "" {
			t.Errorf("%s's nomination after the end: %q (cleared: %v), want cleared", m, n, ok)
		}
	}
	if err := wait.PollUntilContextTimeout(context.Background(), 10*time.Millisecond, wait.ForeverTestTimeout, true, func(context.Context) (bool, error) {
		return slices.Contains(env.handle.activatedPods(), "ns/w0"), nil
	}); err != nil {
		t.Errorf("activated %v, want the gang waiting behind the reservation (ns/w0)", env.handle.activatedPods())
	}
	if v, err := testutil.GetGaugeMetricValue(metrics.ReservedGangs.WithLabelValues("test")); err != nil || v != 0 {
		t.Errorf("reserved gangs gauge = %v (%v), want 0", v, err)
	}
	env.clock.Step(2 * time.Minute)
	if fired.Load() {
		t.Error("the old reservation's timer fired after the PodGroup was recreated")
	}
}

// TestEndOutlivesALostWait: a gang whose reservation ended (it fell below minMember) and whose last
// member is then gone has its state dropped; the status writer must still hear that the reservation
// ended, or it keeps the PodGroup's Reserved condition True (it keeps a condition it has no word on)
// until the gang is placed.
func TestEndOutlivesALostWait(t *testing.T) {
	pg := makePG("ns", "g", 3, time.Time{})
	env := newTestEnv(t, defaultArgs(), []*v1alpha1.PodGroup{pg}, nil)
	now := env.clock.Now()
	env.pl.mu.Lock()
	g := env.pl.gangForLocked(pg)
	g.Reserve.State = resv.State{Phase: resv.Held, WaitingSince: now, Since: now, Seen: true}
	env.pl.stepReservationLocked(g, resv.Input{Event: resv.BelowMinMember, Now: now, Message: "2 of minMember 3 live members exist"})
	env.pl.dropIfUnusedLocked(g, now) // no live member is left
	tracked := env.pl.gangs.Get("ns/g") != nil
	env.pl.mu.Unlock()
	if tracked {
		t.Fatal("the gang's state was not dropped")
	}
	if a := env.pl.attemptInfo("ns/g"); a.ReservationEnded != resv.EndBelowMinMember || a.Reserved {
		t.Errorf("attemptInfo after the drop = %+v, want the reservation ended (BelowMinMember)", a)
	}
}

// TestNewLeaderEndsAReservationItCannotAdopt: a Reserved condition a previous leader left True, none
// of whose members is nominated any more (it ended there, and the status write did not land), holds
// no room; the new leader ends it, so that the status says so instead of keeping the condition True
// until the gang is placed.
func TestNewLeaderEndsAReservationItCannotAdopt(t *testing.T) {
	env := newTestEnv(t, defaultArgs(), []*v1alpha1.PodGroup{reservedPG()}, []*v1.Pod{member("m0", "g", "1"), member("m1", "g", "1")})
	env.pl.reservation.MaxGangs = 1
	env.pl.handle = &nominatingHandle{fakeHandle: env.handle, nominated: map[string]string{}}
	rec := events.NewFakeRecorder(10)
	env.pl.recorder.Events = rec
	env.pl.adoptReservations(context.Background())
	if a := env.pl.attemptInfo("ns/g"); a.Reserved || a.ReservationEnded != resv.EndNoRoom {
		t.Errorf("attemptInfo = %+v, want the reservation ended (NoRoom), not held", a)
	}
	if got := drainEvents(rec); len(got) != 1 || !strings.Contains(got[0], podgroup.ReasonReservationEnded) {
		t.Errorf("events %v, want one ReservationEnded", got)
	}
}

// reservedPG is a PodGroup of minMember 2 whose Reserved condition a previous leader left True.
func reservedPG() *v1alpha1.PodGroup {
	pg := makePG("ns", "g", 2, time.Time{})
	pg.Status.Conditions = []metav1.Condition{{Type: status.ConditionReserved, Status: metav1.ConditionTrue, Reason: status.ReasonRoomHeld,
		Message: "holds room for 2 members on 2 nodes", LastTransitionTime: metav1.NewTime(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))}}
	return pg
}

// TestNewLeaderLeavesAPlacedGangToTheStatus: a Reserved condition left True on a gang whose members
// are all bound (the failover came before the status write) is no reservation to end: the new leader
// records no end, and the status writer says how the gang was placed.
func TestNewLeaderLeavesAPlacedGangToTheStatus(t *testing.T) {
	m0, m1 := member("m0", "g", "1"), member("m1", "g", "1")
	m0.Spec.NodeName, m1.Spec.NodeName = "n0", "n1"
	env := newTestEnv(t, defaultArgs(), []*v1alpha1.PodGroup{reservedPG()}, []*v1.Pod{m0, m1})
	env.pl.reservation.MaxGangs = 1
	env.pl.handle = &nominatingHandle{fakeHandle: env.handle, nominated: map[string]string{}}
	rec := events.NewFakeRecorder(10)
	env.pl.recorder.Events = rec
	env.pl.adoptReservations(context.Background())
	if a := env.pl.attemptInfo("ns/g"); a.Reserved || a.ReservationEnded != "" {
		t.Errorf("attemptInfo = %+v, want no word on the reservation (the status writes QuorumReached once placed)", a)
	}
	if got := drainEvents(rec); len(got) != 0 {
		t.Errorf("events %v, want none", got)
	}
}

// TestAReservationEndedHereIsNotEndedAgain: a reservation this process ended (its gang fell below
// minMember, then lost every member, so its state was dropped) is not taken for a previous leader's
// when a new member arrives while the PodGroup still shows Reserved True: no second end.
func TestAReservationEndedHereIsNotEndedAgain(t *testing.T) {
	pg := reservedPG()
	env := newTestEnv(t, defaultArgs(), []*v1alpha1.PodGroup{pg}, nil)
	env.pl.reservation.MaxGangs, env.pl.reservation.After = 1, time.Hour // no plan this test
	env.pl.handle = &nominatingHandle{fakeHandle: env.handle, nominated: map[string]string{}}
	now := env.clock.Now()
	env.pl.mu.Lock()
	g := env.pl.gangForLocked(pg)
	g.Reserve.State = resv.State{Phase: resv.Held, WaitingSince: now, Since: now, Seen: true}
	env.pl.stepReservationLocked(g, resv.Input{Event: resv.BelowMinMember, Now: now, Message: "1 of minMember 2 live members exist"})
	env.pl.dropIfUnusedLocked(g, now)
	env.pl.mu.Unlock()
	rec := events.NewFakeRecorder(10)
	env.pl.recorder.Events = rec
	m0 := member("m0", "g", "1")
	if err := env.pods.Add(m0); err != nil {
		t.Fatal(err)
	}
	env.pl.members.Counts.Track(m0)
	if _, _, held := env.pl.reserveRoom(context.Background(), m0, pg, false); held {
		t.Error("reserveRoom holds a reservation")
	}
	if got := drainEvents(rec); len(got) != 0 {
		t.Errorf("events %v, want none (the reservation ended once already)", got)
	}
	if a := env.pl.attemptInfo("ns/g"); a.ReservationEnded != resv.EndBelowMinMember {
		t.Errorf("attemptInfo = %+v, want the first end (BelowMinMember) kept", a)
	}
}
