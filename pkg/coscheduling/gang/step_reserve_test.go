package gang

import (
	"errors"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/custom-scheduler/custom-scheduler/pkg/coscheduling/gangfit"
	"github.com/custom-scheduler/custom-scheduler/pkg/coscheduling/internal/gangtest"
	resv "github.com/custom-scheduler/custom-scheduler/pkg/coscheduling/reservation"
)

// TestReserveRoom is every outcome of a reservation step for a member that found no room: a row per
// way the gang waits, plans, starts, holds on, moves, ends or adopts a reservation, with what it
// holds afterwards and which of its readers it called (the group's pods at most once).
func TestReserveRoom(t *testing.T) {
	args := resv.Args{After: time.Minute, Timeout: 10 * time.Minute, MaxGangs: 2, Recheck: 10 * time.Second, StallAfter: 30 * time.Second}
	low := func(node string) *v1.Pod { return gangtest.Running("low-"+node, "", node, "4", 10) }
	high := func(node string) *v1.Pod { return gangtest.Running("high-"+node, "", node, "4", 200) }
	roomOnA := []fwk.NodeInfo{gangtest.NodeWith("a", "4", low("a")), gangtest.NodeWith("b", "4", high("b"))}
	noRoom := []fwk.NodeInfo{gangtest.NodeWith("a", "4", high("a")), gangtest.NodeWith("b", "4", high("b"))}
	m0 := preemptor("m0", "4")
	nominated := m0.DeepCopy()
	nominated.Status.NominatedNodeName = "a"
	waiting := func() *Gang {
		g := New("ns", "g", "uid")
		g.Reserve.State = resv.State{Phase: resv.Waiting, WaitingSince: t0.Add(-2 * time.Minute), LastTried: t0.Add(-time.Second), Prio: 100}
		return g
	}
	holding := func(node string) func() *Gang {
		return func() *Gang {
			g := New("ns", "g", "uid")
			g.Reserve.State = resv.State{Phase: resv.Held, WaitingSince: t0.Add(-5 * time.Minute), Since: t0.Add(-3 * time.Minute),
				PlannedAt: t0.Add(-20 * time.Second), LastTried: t0.Add(-time.Second), Prio: 100, Seen: true}
			g.Reserve.Hold(gangfit.ReservationPlan{OK: true, Message: "holds room on " + node, Assignment: []gangfit.Nomination{{Pod: m0, Node: node}}, Nodes: []string{node}})
			return g
		}
	}
	reserved := &metav1.Condition{Type: "Reserved", Status: metav1.ConditionTrue, Message: "holds room on a", LastTransitionTime: metav1.NewTime(t0.Add(-time.Minute))}

	type reads struct{ members, nodes, claims int }
	cases := []struct {
		name     string
		gang     func() *Gang
		args     *resv.Args
		adopt    *metav1.Condition
		members  []*v1.Pod
		nodes    []fwk.NodeInfo
		nodesErr error
		ahead    bool
		// wantSteps counts the machine's events (Adopt when it adopted, NoRoom, Planned when it
		// planned); wantHeld is the node m0 holds room on ("": none).
		wantSteps   int
		wantPlanned bool
		wantLast    func(resv.Effects) bool
		wantHeld    string
		wantAdopted bool
		wantReads   reads
		check       func(t *testing.T, g *Gang, out ReserveOut)
	}{
		{name: "reservation is off: nothing is planned, nothing read",
			gang: func() *Gang { return New("ns", "g", "uid") }, args: &resv.Args{MaxGangs: 0},
			wantSteps: 1, wantLast: func(e resv.Effects) bool { return e.Why == "reservation is turned off" }},
		{name: "the gang has not waited long enough: it waits, its timer set for when it has",
			gang:      func() *Gang { return New("ns", "g", "uid") },
			wantSteps: 1, wantLast: func(e resv.Effects) bool { return e.Wake && e.WakeAt.Equal(t0.Add(time.Minute)) && !e.Plan },
			check: func(t *testing.T, g *Gang, _ ReserveOut) {
				if g.Reserve.Phase != resv.Waiting || !g.Reserve.WaitingSince.Equal(t0) {
					t.Errorf("reservation %+v, want waiting since now", g.Reserve.State)
				}
			}},
		{name: "waited long enough, nothing ahead, room frees: the reservation starts on it",
			gang: waiting, nodes: roomOnA,
			wantSteps: 2, wantPlanned: true, wantLast: func(e resv.Effects) bool { return e.Start && e.Hold },
			wantHeld: "a", wantReads: reads{members: 1, nodes: 1, claims: 1},
			check: func(t *testing.T, g *Gang, out ReserveOut) {
				if len(out.Plan.Assignment) != 1 || out.Plan.Assignment[0].Pod.Name != "m0" || out.Plan.Assignment[0].Node != "a" {
					t.Errorf("plan %+v, want m0 on a", out.Plan.Assignment)
				}
			}},
		{name: "a gang earlier in the order reserves first: it plans only to learn whether it fits",
			gang: waiting, nodes: roomOnA, ahead: true,
			wantSteps: 2, wantPlanned: true, wantLast: func(e resv.Effects) bool { return !e.Start && !e.Hold },
			wantReads: reads{members: 1, nodes: 1, claims: 1}},
		{name: "the members do not fit the room that frees: nothing held, the gang is unfit",
			gang: waiting, nodes: noRoom,
			wantSteps: 2, wantPlanned: true, wantLast: func(e resv.Effects) bool { return !e.Start && !e.Hold },
			wantReads: reads{members: 1, nodes: 1, claims: 1},
			check: func(t *testing.T, g *Gang, _ ReserveOut) {
				if !g.Reserve.Unfit {
					t.Error("the gang is not marked unfit")
				}
			}},
		{name: "the nodes cannot be read: the plan says why, nothing held",
			gang: waiting, nodesErr: errors.New("no snapshot"),
			wantSteps: 2, wantPlanned: true, wantLast: func(e resv.Effects) bool { return !e.Start },
			wantReads: reads{members: 1, nodes: 1},
			check: func(t *testing.T, _ *Gang, out ReserveOut) {
				if out.Plan.OK || out.Plan.Message != "no snapshot" {
					t.Errorf("plan %+v, want not OK with the error", out.Plan)
				}
			}},
		{name: "held, recheck due, the same room: it holds on, nobody nominated anew",
			gang: holding("a"), nodes: roomOnA,
			wantSteps: 2, wantPlanned: true, wantLast: func(e resv.Effects) bool { return e.Hold && !e.Moved && !e.Start },
			wantHeld: "a", wantReads: reads{members: 1, nodes: 1, claims: 1}},
		{name: "held, the room it counts on moved: it holds the new room",
			gang: holding("b"), nodes: roomOnA,
			wantSteps: 2, wantPlanned: true, wantLast: func(e resv.Effects) bool { return e.Hold && e.Moved },
			wantHeld: "a", wantReads: reads{members: 1, nodes: 1, claims: 1}},
		{name: "held, the room is gone: the reservation ends",
			gang: holding("a"), nodes: noRoom,
			wantSteps: 2, wantPlanned: true, wantLast: func(e resv.Effects) bool { return e.End == resv.EndNoRoom },
			wantReads: reads{members: 1, nodes: 1, claims: 1}},
		{name: "held, no recheck due: no plan, nothing read",
			gang: func() *Gang {
				g := holding("a")()
				g.Reserve.PlannedAt = t0.Add(-time.Second)
				return g
			},
			wantSteps: 1, wantLast: func(e resv.Effects) bool { return e.Hold && !e.Plan }, wantHeld: "a"},
		{name: "a previous leader's reservation is adopted, then rechecked, listing the group once",
			gang: func() *Gang { return New("ns", "g", "uid") }, adopt: reserved, members: []*v1.Pod{nominated}, nodes: roomOnA,
			wantSteps: 3, wantPlanned: true, wantAdopted: true,
			wantLast: func(e resv.Effects) bool { return e.Hold && !e.Moved }, wantHeld: "a", wantReads: reads{members: 1, nodes: 1, claims: 1},
			check: func(t *testing.T, g *Gang, _ ReserveOut) {
				if !g.Reserve.Since.Equal(reserved.LastTransitionTime.Time) {
					t.Errorf("adopted since %v, want the condition's %v", g.Reserve.Since, reserved.LastTransitionTime.Time)
				}
			}},
		{name: "a gang this process saw trying adopts nothing",
			gang: func() *Gang {
				g := New("ns", "g", "uid")
				g.Reserve.Seen = true
				return g
			}, adopt: reserved, members: []*v1.Pod{nominated},
			wantSteps: 1, wantLast: func(e resv.Effects) bool { return !e.Hold }},
		{name: "no member is nominated: the previous leader's reservation holds no room and ends (its condition must not stay True)",
			gang: func() *Gang { return New("ns", "g", "uid") }, adopt: reserved, members: []*v1.Pod{m0},
			wantSteps: 2, wantLast: func(e resv.Effects) bool { return !e.Hold }, wantReads: reads{members: 1},
			check: func(t *testing.T, g *Gang, out ReserveOut) {
				if out.Steps[0].End != resv.EndNoRoom || g.Reserve.Ended != resv.EndNoRoom {
					t.Errorf("adopt step's end %q, state's %q; want NoRoom", out.Steps[0].End, g.Reserve.Ended)
				}
			}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := tc.gang()
			a := args
			if tc.args != nil {
				a = *tc.args
			}
			members := tc.members
			if members == nil {
				members = []*v1.Pod{m0}
			}
			var got reads
			in := ReserveIn{Args: a, Now: t0, Pod: m0, PodGroup: gangtest.PodGroup("ns", "g", 1, t0), Adopt: tc.adopt, Logger: klog.Background(),
				Members: func() []*v1.Pod { got.members++; return members },
				Queue:   func(int32) (int, bool) { return 0, tc.ahead },
				Nodes:   func() ([]fwk.NodeInfo, error) { got.nodes++; return tc.nodes, tc.nodesErr },
				Claims:  func(int32) []*v1.Pod { got.claims++; return nil },
			}
			// As the plugin does: the step under its lock, the plan outside it, then Planned.
			out := g.ReserveRoom(in)
			if out.Room != nil {
				g.Planned(in, PlanRoom(in, *out.Room), &out)
			}
			if len(out.Steps) != tc.wantSteps {
				t.Fatalf("%d machine steps, want %d", len(out.Steps), tc.wantSteps)
			}
			if out.Planned != tc.wantPlanned || out.Adopted != tc.wantAdopted {
				t.Errorf("planned %v, adopted %v; want %v, %v", out.Planned, out.Adopted, tc.wantPlanned, tc.wantAdopted)
			}
			if !tc.wantLast(out.Last()) {
				t.Errorf("last step's effects %+v", out.Last())
			}
			held := ""
			if g.Reserve.Held() {
				held = g.Reserve.Node[m0.UID]
			}
			if held != tc.wantHeld {
				t.Errorf("m0 holds room on %q, want %q (reservation %+v)", held, tc.wantHeld, g.Reserve.State)
			}
			if got != tc.wantReads {
				t.Errorf("reads %+v, want %+v", got, tc.wantReads)
			}
			if tc.check != nil {
				tc.check(t, g, out)
			}
		})
	}
}

// TestAdoptReservation: the adopted plan is read from the members' nominations (those not bound),
// its start is the condition's, and one over the limit of reservations is not taken over: it ends.
func TestAdoptReservation(t *testing.T) {
	args := resv.Args{After: time.Minute, Timeout: 10 * time.Minute, MaxGangs: 1, Recheck: 10 * time.Second, StallAfter: 30 * time.Second}
	c := &metav1.Condition{Type: "Reserved", Status: metav1.ConditionTrue, Message: "holds room on a, b", LastTransitionTime: metav1.NewTime(t0.Add(-time.Minute))}
	m0, m1, m2 := gangtest.Member("m0", "g", "1"), gangtest.Member("m1", "g", "1"), bound("m2", "c", "1")
	m0.Status.NominatedNodeName, m1.Status.NominatedNodeName, m2.Status.NominatedNodeName = "a", "b", "c"
	g := New("ns", "g", "uid")
	if e := g.AdoptReservation(args, c, []*v1.Pod{m0, m1, m2}, nil, t0, func(int32) (int, bool) { return 0, false }); !e.Hold || !g.Reserve.Held() {
		t.Fatalf("adopt effects %+v, held %v; want it held", e, g.Reserve.Held())
	}
	if g.Reserve.Node["m0"] != "a" || g.Reserve.Node["m1"] != "b" || len(g.Reserve.Node) != 2 || !strings.Contains(g.Reserve.Plan.Message, "a, b") {
		t.Errorf("adopted plan %v (%q), want m0 on a and m1 on b (not the bound m2) with the condition's message", g.Reserve.Node, g.Reserve.Plan.Message)
	}
	if !g.Reserve.Since.Equal(c.LastTransitionTime.Time) {
		t.Errorf("adopted since %v, want the condition's %v", g.Reserve.Since, c.LastTransitionTime.Time)
	}
	placed := New("ns", "g", "uid")
	if e := placed.AdoptReservation(args, c, []*v1.Pod{m2}, nil, t0, func(int32) (int, bool) { return 0, false }); e != (resv.Effects{}) || placed.Reserve.Ended != "" {
		t.Errorf("every member bound: effects %+v, ended %q; want nothing (the status says how it was placed)", e, placed.Reserve.Ended)
	}
	full := New("ns", "g", "uid")
	if e := full.AdoptReservation(args, c, []*v1.Pod{m0}, nil, t0, func(int32) (int, bool) { return 1, false }); e.End != resv.EndNoRoom || full.Reserve.Held() {
		t.Errorf("over the limit: effects %+v, held %v; want it ended, nothing held", e, full.Reserve.Held())
	}
}

// TestPlannedReadsTheOrderAgain: the plan is made between two lock holds, so Planned reads the order
// again: a gang whose last free slot another gang took meanwhile starts nothing, and holds nothing.
func TestPlannedReadsTheOrderAgain(t *testing.T) {
	args := resv.Args{After: time.Minute, Timeout: 10 * time.Minute, MaxGangs: 1, Recheck: 10 * time.Second, StallAfter: 30 * time.Second}
	m0 := preemptor("m0", "4")
	g := New("ns", "g", "uid")
	g.Reserve.State = resv.State{Phase: resv.Waiting, WaitingSince: t0.Add(-2 * time.Minute), LastTried: t0.Add(-time.Second), Prio: 100}
	others := 0
	in := ReserveIn{Args: args, Now: t0, Pod: m0, PodGroup: gangtest.PodGroup("ns", "g", 1, t0), Logger: klog.Background(),
		Members: func() []*v1.Pod { return []*v1.Pod{m0} },
		Queue:   func(int32) (int, bool) { return others, false },
		Nodes: func() ([]fwk.NodeInfo, error) {
			return []fwk.NodeInfo{gangtest.NodeWith("a", "4", gangtest.Running("low", "", "a", "4", 10))}, nil
		},
		Claims: func(int32) []*v1.Pod { return nil },
	}
	out := g.ReserveRoom(in)
	if out.Room == nil {
		t.Fatal("no plan asked for")
	}
	p := PlanRoom(in, *out.Room)
	others = 1 // another gang reserved while the plan was made
	g.Planned(in, p, &out)
	if !p.OK || out.Last().Start || g.Reserve.Held() {
		t.Errorf("plan OK %v, started %v, held %v; want a good plan that starts nothing while the slot is taken", p.OK, out.Last().Start, g.Reserve.Held())
	}
}
