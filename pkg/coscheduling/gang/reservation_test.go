package gang

import (
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	corev1helpers "k8s.io/component-helpers/scheduling/corev1"

	"github.com/custom-scheduler/custom-scheduler/pkg/coscheduling/gangfit"
	"github.com/custom-scheduler/custom-scheduler/pkg/coscheduling/internal/gangtest"
	"github.com/custom-scheduler/custom-scheduler/pkg/coscheduling/podgroup"
	resv "github.com/custom-scheduler/custom-scheduler/pkg/coscheduling/reservation"
)

var args = resv.Args{After: time.Minute, Timeout: 10 * time.Minute, MaxGangs: 2, Recheck: 10 * time.Second, StallAfter: 30 * time.Second}

// holding is a gang named name that holds a reservation since since, at priority prio, of plan.
func holding(name string, since time.Time, prio int32, nodes ...string) *Gang {
	g := New("ns", name, "")
	g.Reserve.State = resv.State{Phase: resv.Held, Since: since, WaitingSince: since.Add(-time.Minute), LastTried: since, Prio: prio}
	g.Reserve.Hold(gangfit.ReservationPlan{OK: true, Nodes: nodes, MilliCPU: 1000 * int64(len(nodes)), Memory: 1 << 30 * int64(len(nodes))})
	return g
}

// waitingFor is a gang that has waited for room since since, last trying at tried.
func waitingFor(name string, since, tried time.Time, prio int32) *Gang {
	g := New("ns", name, "")
	g.Reserve.State = resv.State{Phase: resv.Waiting, WaitingSince: since, LastTried: tried, Prio: prio}
	return g
}

func gangs(gs ...*Gang) map[string]*Gang {
	m := map[string]*Gang{}
	for _, g := range gs {
		m[g.Key()] = g
	}
	return m
}

func TestStepReservation(t *testing.T) {
	g := holding("g", t0, 0, "n1")
	e := g.StepReservation(args, resv.Input{Event: resv.QuorumReached, Now: t0.Add(time.Second)})
	if e.End != resv.EndQuorumReached {
		t.Fatalf("a held reservation's quorum: end %q, want %q", e.End, resv.EndQuorumReached)
	}
	if g.Reserve.Held() || len(g.Reserve.Plan.Nodes) != 0 || g.Reserve.Node != nil {
		t.Errorf("an ended reservation keeps its plan: %+v", g.Reserve)
	}
	idle := New("ns", "idle", "")
	if e := idle.StepReservation(args, resv.Input{Event: resv.QuorumReached, Now: t0}); e.End != "" {
		t.Errorf("an idle gang's quorum ends a reservation: %q", e.End)
	}
}

func TestHoldAndAdoptable(t *testing.T) {
	a, b, c := gangtest.Member("a", "g", "1"), gangtest.Member("b", "g", "1"), gangtest.Member("c", "g", "1")
	a.Status.NominatedNodeName = "n1"
	b.Status.NominatedNodeName = "n2"
	b.Spec.NodeName = "n2" // bound: its nomination holds nothing
	if _, ok := Adoptable([]*v1.Pod{b, c}, "m"); ok {
		t.Errorf("members without a pending nomination left a plan to adopt")
	}
	p, ok := Adoptable([]*v1.Pod{a, b, c}, "holds 1 node")
	if !ok || !p.OK || p.Message != "holds 1 node" || len(p.Assignment) != 1 || p.Assignment[0].Pod != a || p.Assignment[0].Node != "n1" {
		t.Fatalf("Adoptable = %+v, %v; want a on n1 with the condition's message", p, ok)
	}
	var r Reservation
	r.Hold(p)
	if diff := cmp.Diff(map[string]string{"a": "n1"}, func() map[string]string {
		out := map[string]string{}
		for uid, n := range r.Node {
			out[string(uid)] = n
		}
		return out
	}()); diff != "" {
		t.Errorf("held nodes (-want,+got):\n%s", diff)
	}
}

func TestQueue(t *testing.T) {
	now := t0.Add(5 * time.Minute)
	self := New("ns", "self", "")
	cases := []struct {
		name   string
		others []*Gang
		prio   int32
		held   int
		ahead  bool
	}{
		{name: "alone"},
		{name: "two hold", others: []*Gang{holding("a", t0, 0, "n1"), holding("b", t0, 0, "n2")}, held: 2},
		{name: "an older waiting gang that tries goes first", others: []*Gang{waitingFor("a", t0, now.Add(-time.Second), 0)}, ahead: true},
		{name: "an older gang of lower priority does not", others: []*Gang{waitingFor("a", t0, now.Add(-time.Second), 0)}, prio: 10},
		{name: "an older gang that stopped trying does not", others: []*Gang{waitingFor("a", t0, now.Add(-time.Hour), 0)}},
		{name: "an older gang that lost its place does not", others: []*Gang{func() *Gang {
			g := waitingFor("a", t0, now.Add(-time.Second), 0)
			g.Reserve.Lost = resv.EndBelowMinMember
			return g
		}()}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			held, ahead := Queue(gangs(append(tc.others, self)...), self, args, tc.prio, now)
			if held != tc.held || ahead != tc.ahead {
				t.Errorf("Queue = %d held, ahead %v; want %d, %v", held, ahead, tc.held, tc.ahead)
			}
		})
	}
}

func TestWaitingBehind(t *testing.T) {
	self := holding("self", t0, 0, "n1")
	lost := waitingFor("lost", t0, t0, 0)
	lost.Reserve.Lost = resv.EndStalled
	got := WaitingBehind(gangs(self, waitingFor("w", t0, t0, 0), lost, holding("h", t0, 0, "n2"), New("ns", "idle", "")), self)
	if diff := cmp.Diff([][2]string{{"ns", "w"}}, got); diff != "" {
		t.Errorf("WaitingBehind (-want,+got):\n%s", diff)
	}
}

func TestHeld(t *testing.T) {
	if got := Held(gangs(New("ns", "idle", ""))); got != (HeldTotals{}) {
		t.Errorf("Held with none held = %+v", got)
	}
	got := Held(gangs(holding("a", t0.Add(time.Minute), 0, "n1", "n2"), holding("b", t0, 0, "n3"), waitingFor("w", t0, t0, 0)))
	want := HeldTotals{Gangs: 2, MilliCPU: 3000, Memory: 3 << 30, OldestSince: t0}
	if got != want {
		t.Errorf("Held = %+v, want %+v", got, want)
	}
}

func TestKeptOff(t *testing.T) {
	pod := func(group string, prio int32) *v1.Pod {
		p := gangtest.Member("p", group, "1")
		p.Spec.Priority = &prio
		return p
	}
	all := gangs(holding("hi", t0, 100, "n1"), holding("lo", t0, 0, "n2", "n3"), waitingFor("w", t0, t0, 100))
	all["ns/lo"].Reserve.Groups = []string{"ns/lo-b"} // lo holds its job's reservation, lo-b's members in it
	cases := []struct {
		name string
		pod  *v1.Pod
		want []string
	}{
		{name: "a low pod is kept off both", pod: pod("", 0), want: []string{"n1", "n2, n3"}},
		{name: "a pod above one is kept off the other", pod: pod("", 50), want: []string{"n1"}},
		{name: "a member is not kept off its own gang's room", pod: pod("lo", 0), want: []string{"n1"}},
		{name: "nor off the room its job's reservation holds", pod: pod("lo-b", 0), want: []string{"n1"}},
		{name: "nothing keeps a top pod off", pod: pod("", 1000)},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := KeptOff(all, tc.pod)
			if len(tc.want) == 0 && got != "" {
				t.Errorf("KeptOff = %q, want nothing", got)
			}
			for _, nodes := range tc.want {
				if !strings.Contains(got, fmt.Sprintf("room on %s is held", nodes)) {
					t.Errorf("KeptOff = %q, want it to name %s", got, nodes)
				}
			}
			if n := strings.Count(got, "room on"); n != len(tc.want) {
				t.Errorf("KeptOff names %d reservations, want %d: %q", n, len(tc.want), got)
			}
		})
	}
}

// The reservations whose held devices a pod must leave room for: as KeptOff, those of its priority or
// more, not its own gang's, with where each member is nominated.
func TestHeldAgainst(t *testing.T) {
	pod := func(group string, prio int32) *v1.Pod {
		p := gangtest.Member("p", group, "1")
		p.Spec.Priority = &prio
		return p
	}
	nominated := func(g *Gang, nodes ...string) *Gang {
		p := g.Reserve.Plan
		for i, n := range nodes {
			p.Assignment = append(p.Assignment, gangfit.Nomination{Pod: gangtest.Member(fmt.Sprintf("%s-%d", g.Name, i), g.Name, "1"), Node: n})
		}
		g.Reserve.Hold(p)
		return g
	}
	all := gangs(nominated(holding("hi", t0, 100, "n1"), "n1"), nominated(holding("lo", t0, 0, "n2", "n3"), "n2", "n3"),
		waitingFor("w", t0, t0, 100), holding("planless", t0, 100))
	all["ns/lo"].Reserve.Groups = []string{"ns/lo-b"} // lo holds its job's reservation, lo-b's members in it
	cases := []struct {
		name string
		pod  *v1.Pod
		want []string
	}{
		{name: "a low pod: both", pod: pod("", 0), want: []string{"hi{hi-0:n1}", "lo{lo-0:n2 lo-1:n3}"}},
		{name: "a pod above one: the other", pod: pod("", 50), want: []string{"hi{hi-0:n1}"}},
		{name: "a member: not its own gang's", pod: pod("lo", 0), want: []string{"hi{hi-0:n1}"}},
		{name: "a member of a job: not the reservation its job's holder holds", pod: pod("lo-b", 0), want: []string{"hi{hi-0:n1}"}},
		{name: "a top pod: none", pod: pod("", 1000)},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var got []string
			own := ""
			if name, ok := podgroup.Of(tc.pod); ok {
				own = podgroup.Key(tc.pod.Namespace, name)
			}
			for _, h := range HeldAgainst(all, corev1helpers.PodPriority(tc.pod), own) {
				var parts []string
				for uid, n := range h.Node {
					parts = append(parts, string(uid)+":"+n)
				}
				sort.Strings(parts)
				got = append(got, h.Name+"{"+strings.Join(parts, " ")+"}")
				if !h.Since.Equal(t0) {
					t.Errorf("%s since %v, want %v", h.Name, h.Since, t0)
				}
			}
			if fmt.Sprint(got) != fmt.Sprint(tc.want) {
				t.Errorf("HeldAgainst = %v, want %v", got, tc.want)
			}
		})
	}
}
