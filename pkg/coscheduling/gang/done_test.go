package gang

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	testingclock "k8s.io/utils/clock/testing"

	"github.com/custom-scheduler/custom-scheduler/pkg/apis/scheduling/v1alpha1"
	resv "github.com/custom-scheduler/custom-scheduler/pkg/coscheduling/reservation"
)

// TestRegistryApplied: a step's timer stop and the gangs waiting behind an end; what is left to do.
func TestRegistryApplied(t *testing.T) {
	t0 := time.Unix(1000, 0)
	cases := []struct {
		name        string
		e           resv.Effects
		want        ReservationDone
		wantStopped bool
	}{
		{name: "nothing", want: ReservationDone{}},
		{name: "timer stopped", e: resv.Effects{StopTimer: true}, wantStopped: true},
		{name: "an end", e: resv.Effects{End: resv.EndTimedOut, EndMessage: "m", StopTimer: true}, wantStopped: true,
			want: ReservationDone{End: resv.EndTimedOut, EndMessage: "m", Waiting: [][2]string{{"ns", "w"}}}},
		{name: "lost its place", e: resv.Effects{Lost: resv.EndStalled}, want: ReservationDone{Lost: resv.EndStalled}},
		{name: "a recheck", e: resv.Effects{Activate: true}, want: ReservationDone{Activate: true}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			clk := testingclock.NewFakeClock(t0)
			r := NewRegistry(nil)
			g, _ := r.Bound("ns", "g")
			g.Reserve.Phase, g.Reserve.TimerAt = resv.Held, t0.Add(time.Minute)
			g.Reserve.Timer = clk.AfterFunc(time.Minute, func() {})
			r.Put(waitingFor("w", t0, t0, 1))
			r.Put(waitingFor("lost", t0, t0, 1))
			r.Get("ns/lost").Reserve.Lost = resv.EndStalled
			d := r.Applied(g, tc.e)
			if diff := cmp.Diff(tc.want, d); diff != "" {
				t.Errorf("Applied (-want +got):\n%s", diff)
			}
			if d.Empty() != (tc.want.End == "" && tc.want.Lost == "" && !tc.want.Activate) {
				t.Errorf("Empty = %v for %+v", d.Empty(), d)
			}
			if stopped := g.Reserve.Timer == nil && !clk.HasWaiters(); stopped != tc.wantStopped {
				t.Errorf("timer stopped %v, want %v", stopped, tc.wantStopped)
			}
		})
	}
}

func TestRearm(t *testing.T) {
	now := time.Unix(1000, 0)
	clk := testingclock.NewFakeClock(now)
	armed := func(at time.Time) Reservation {
		return Reservation{Timer: clk.AfterFunc(time.Hour, func() {}), TimerAt: at}
	}
	cases := []struct {
		name string
		r    Reservation
		at   time.Time
		want bool
	}{
		{name: "no timer", at: now.Add(time.Minute), want: true},
		{name: "armed earlier", r: armed(now.Add(time.Second)), at: now.Add(time.Minute)},
		{name: "armed for then", r: armed(now.Add(time.Minute)), at: now.Add(time.Minute)},
		{name: "armed later", r: armed(now.Add(time.Hour)), at: now.Add(time.Minute), want: true},
		{name: "armed and due", r: armed(now), at: now.Add(time.Minute), want: true},
	}
	for _, tc := range cases {
		if got := tc.r.Rearm(tc.at, now); got != tc.want {
			t.Errorf("%s: Rearm = %v, want %v", tc.name, got, tc.want)
		}
	}
}

func TestTimerInputAndBelowMinMember(t *testing.T) {
	at := time.Unix(1000, 0)
	pg := &v1alpha1.PodGroup{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "g", UID: "a"}, Spec: v1alpha1.PodGroupSpec{MinMember: 3}}
	other := pg.DeepCopy()
	other.UID = "b"
	g := New("ns", "g", "a")
	g.Credit = 1
	deleted := resv.Input{Event: resv.Deleted, Now: at, Message: "the PodGroup was deleted"}
	for name, tc := range map[string]struct {
		pg   *v1alpha1.PodGroup
		want resv.Input
	}{
		"gone":      {want: deleted},
		"recreated": {pg: other, want: deleted},
		"timer":     {pg: pg, want: resv.Input{Event: resv.Timer, Now: at, Live: 2, MinMember: 3}},
	} {
		if diff := cmp.Diff(tc.want, g.TimerInput(tc.pg, 1, at)); diff != "" {
			t.Errorf("TimerInput %s (-want +got):\n%s", name, diff)
		}
	}

	cases := []struct {
		name  string
		phase resv.Phase
		pg    *v1alpha1.PodGroup
		live  int
		want  string
	}{
		{name: "idle", phase: resv.Idle, pg: pg, live: 0},
		{name: "PodGroup gone", phase: resv.Held, live: 0},
		{name: "enough with the succeeded", phase: resv.Held, pg: pg, live: 2},
		{name: "below", phase: resv.Waiting, pg: pg, live: 1, want: "2 of minMember 3 live members exist"},
	}
	for _, tc := range cases {
		g.Reserve.Phase = tc.phase
		in, ok := g.BelowMinMember(tc.pg, tc.live, at)
		if ok != (tc.want != "") || in.Message != tc.want || (ok && (in.Event != resv.BelowMinMember || !in.Now.Equal(at))) {
			t.Errorf("%s: BelowMinMember = %+v, %v; want message %q", tc.name, in, ok, tc.want)
		}
	}
}

// TestReservationTimerFired: only the current timer's firing counts, and it is forgotten then; a
// timer replaced or stopped since is not the reservation's.
func TestReservationTimerFired(t *testing.T) {
	at := t0.Add(10 * time.Second)
	for _, tc := range []struct {
		name    string
		timerAt time.Time
		want    bool
	}{
		{"the current timer", at, true},
		{"replaced by an earlier one", t0.Add(5 * time.Second), false},
		{"stopped since", time.Time{}, false},
	} {
		clk := testingclock.NewFakeClock(t0)
		r := Reservation{TimerAt: tc.timerAt}
		if !tc.timerAt.IsZero() {
			r.Timer = clk.AfterFunc(time.Minute, func() {})
		}
		if got := r.Fired(at); got != tc.want {
			t.Errorf("%s: Fired = %v, want %v", tc.name, got, tc.want)
		}
		if forgot := r.Timer == nil && r.TimerAt.IsZero(); tc.want && !forgot {
			t.Errorf("%s: the fired timer is kept: %v", tc.name, r.TimerAt)
		} else if !tc.want && !r.TimerAt.Equal(tc.timerAt) {
			t.Errorf("%s: another timer changed: %v", tc.name, r.TimerAt)
		}
	}
}
