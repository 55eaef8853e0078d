package gang

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/clock"
	testingclock "k8s.io/utils/clock/testing"

	"github.com/custom-scheduler/custom-scheduler/pkg/apis/scheduling/v1alpha1"
	resv "github.com/custom-scheduler/custom-scheduler/pkg/coscheduling/reservation"
)

// TestReservationArm: which timer runs after Arm, when it fires, and whether the one it replaces is
// stopped.
func TestReservationArm(t *testing.T) {
	now := time.Unix(1000, 0)
	cases := []struct {
		name string
		// armedAt is when a timer is armed for before the call (zero: none).
		armedAt, at  time.Time
		wantArmed    bool
		wantAt       time.Time
		wantAfter    time.Duration
		wantOldFires bool
	}{
		{name: "no timer", at: now.Add(time.Minute), wantArmed: true, wantAt: now.Add(time.Minute), wantAfter: time.Minute},
		{name: "armed earlier stays", armedAt: now.Add(time.Second), at: now.Add(time.Minute), wantAt: now.Add(time.Second), wantOldFires: true},
		{name: "armed for then stays", armedAt: now.Add(time.Minute), at: now.Add(time.Minute), wantAt: now.Add(time.Minute), wantOldFires: true},
		{name: "armed later is replaced", armedAt: now.Add(time.Hour), at: now.Add(time.Minute), wantArmed: true, wantAt: now.Add(time.Minute), wantAfter: time.Minute},
		{name: "due is armed again", armedAt: now, at: now.Add(time.Minute), wantArmed: true, wantAt: now.Add(time.Minute), wantAfter: time.Minute},
		{name: "in the past fires at once", at: now.Add(-time.Minute), wantArmed: true, wantAt: now.Add(-time.Minute)},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			clk := testingclock.NewFakeClock(now)
			var r Reservation
			oldFired := false
			if !tc.armedAt.IsZero() {
				r.TimerAt, r.Timer = tc.armedAt, clk.AfterFunc(tc.armedAt.Sub(now)+time.Millisecond, func() { oldFired = true })
			}
			after := time.Duration(-1)
			armed := r.Arm(tc.at, now, func(d time.Duration) clock.Timer { after = d; return clk.AfterFunc(d, func() {}) })
			if armed != tc.wantArmed || !r.TimerAt.Equal(tc.wantAt) || r.Timer == nil {
				t.Fatalf("Arm = %v, timer at %v (%v); want %v at %v", armed, r.TimerAt, r.Timer, tc.wantArmed, tc.wantAt)
			}
			if tc.wantArmed && after != tc.wantAfter {
				t.Errorf("armed after %v, want %v", after, tc.wantAfter)
			}
			clk.Step(2 * time.Hour)
			if oldFired != tc.wantOldFires {
				t.Errorf("the timer armed before fired: %v, want %v", oldFired, tc.wantOldFires)
			}
		})
	}
}

// TestReservationIdle: only a reservation that neither waits nor holds, with no timer, is idle.
func TestReservationIdle(t *testing.T) {
	clk := testingclock.NewFakeClock(time.Unix(1000, 0))
	cases := []struct {
		name  string
		phase resv.Phase
		timer bool
		want  bool
	}{
		{name: "idle", phase: resv.Idle, want: true},
		{name: "idle with a timer", phase: resv.Idle, timer: true},
		{name: "waiting", phase: resv.Waiting},
		{name: "held", phase: resv.Held},
	}
	for _, tc := range cases {
		r := Reservation{State: resv.State{Phase: tc.phase}}
		if tc.timer {
			r.Timer = clk.AfterFunc(time.Minute, func() {})
		}
		if got := r.Idle(); got != tc.want {
			t.Errorf("%s: Idle = %v, want %v", tc.name, got, tc.want)
		}
	}
}

// TestArmBackoff: the back-off timer armed replaces, and stops, the one before.
func TestArmBackoff(t *testing.T) {
	now := time.Unix(1000, 0)
	for _, before := range []bool{false, true} {
		clk := testingclock.NewFakeClock(now)
		g := New("ns", "g", "")
		oldFired, fired := false, false
		if before {
			g.BackoffTimer = clk.AfterFunc(time.Second, func() { oldFired = true })
		}
		g.ArmBackoff(time.Minute, func(d time.Duration) clock.Timer { return clk.AfterFunc(d, func() { fired = true }) })
		clk.Step(time.Second)
		if oldFired || fired {
			t.Errorf("before %v: after 1s, the old timer fired %v, the new one %v; want neither", before, oldFired, fired)
		}
		clk.Step(time.Minute)
		if !fired {
			t.Errorf("before %v: the back-off timer did not fire after its minute", before)
		}
	}
}

// TestRegistryBelowMinMember: which reservations hear that a group fell below minMember: its own
// while it waits or holds one, and its job's held by another group's gang.
func TestRegistryBelowMinMember(t *testing.T) {
	at := time.Unix(1000, 0)
	pg := &v1alpha1.PodGroup{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "g"}, Spec: v1alpha1.PodGroupSpec{MinMember: 3}}
	own := "2 of minMember 3 live members exist"
	job := "PodGroup ns/g of its job: 2 of minMember 3 live members exist"
	cases := []struct {
		name string
		// phase is g's reservation's; holder whether another gang holds its job's room for it.
		phase  resv.Phase
		holder bool
		pg     *v1alpha1.PodGroup
		live   int
		want   []string // "gang: message"
	}{
		{name: "idle, no job", phase: resv.Idle, pg: pg, live: 1},
		{name: "enough", phase: resv.Held, holder: true, pg: pg, live: 3},
		{name: "PodGroup gone", phase: resv.Held, holder: true, live: 0},
		{name: "own reservation", phase: resv.Waiting, pg: pg, live: 1, want: []string{"ns/g: " + own}},
		{name: "own held: its job's is not told", phase: resv.Held, holder: true, pg: pg, live: 1, want: []string{"ns/g: " + own}},
		{name: "job's", phase: resv.Idle, holder: true, pg: pg, live: 1, want: []string{"ns/h: " + job}},
		{name: "both", phase: resv.Waiting, holder: true, pg: pg, live: 1, want: []string{"ns/g: " + own, "ns/h: " + job}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := NewRegistry(nil)
			g, _ := r.Bound("ns", "g")
			g.Credit = 1
			g.Reserve.Phase = tc.phase
			if tc.holder {
				h := holding("h", at, 0, "n1")
				h.Reserve.Groups = []string{"ns/g"}
				r.Put(h)
			}
			var got []string
			r.BelowMinMember(g, tc.pg, tc.live, at, func(s *Gang, in resv.Input) {
				if in.Event != resv.BelowMinMember || !in.Now.Equal(at) {
					t.Errorf("input %+v, want BelowMinMember at %v", in, at)
				}
				got = append(got, s.Key()+": "+in.Message)
			})
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("steps (-want +got):\n%s", diff)
			}
		})
	}
}
