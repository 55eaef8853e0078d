package gang

import (
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"

	"github.com/custom-scheduler/custom-scheduler/pkg/coscheduling/attempt"
	"github.com/custom-scheduler/custom-scheduler/pkg/coscheduling/gangfit"
	"github.com/custom-scheduler/custom-scheduler/pkg/coscheduling/internal/gangtest"
	"github.com/custom-scheduler/custom-scheduler/pkg/coscheduling/podgroup"
	"github.com/google/go-cmp/cmp"
)

// TestStage is every stage a member's PreFilter can take, in the order the conditions are read, and
// when the store is asked for the quorum count.
func TestStage(t *testing.T) {
	cases := []struct {
		name      string
		gang      func() *Gang
		member    types.UID
		want      int
		confirmed int
		stage     Stage
		msg       string
		// asks: Confirmed is called (it lists the group).
		asks bool
	}{
		{name: "backing off: refused, whatever else holds", gang: func() *Gang {
			g := withWaiting([]string{"a"})
			g.BackoffUntil = t0.Add(time.Second)
			return g
		}, member: "b", want: 1, stage: Refuse, msg: "backs off until 2026-01-01T00:00:01Z"},
		{name: "a back-off that ended refuses nothing", gang: func() *Gang {
			g := New("ns", "g", "")
			g.BackoffUntil = t0
			return g
		}, member: "a", want: 2, stage: Check},
		{name: "a sibling of the attempt's lead waits for it", gang: func() *Gang {
			g := New("ns", "g", "")
			g.SetLead(gangtest.Member("lead", "g", "1"))
			return g
		}, member: "b", want: 2, stage: Refuse, msg: "places member lead first"},
		{name: "the lead itself goes", gang: func() *Gang {
			g := New("ns", "g", "")
			g.SetLead(gangtest.Member("lead", "g", "1"))
			return g
		}, member: "lead", want: 2, stage: Check},
		{name: "a sibling goes once the lead is reserved", gang: func() *Gang {
			g := withWaiting([]string{"lead"})
			g.SetLead(gangtest.Member("lead", "g", "1"))
			return g
		}, member: "b", want: 2, stage: Join},
		{name: "an attempt under way: joined, the store not asked", gang: func() *Gang { return withWaiting([]string{"a", "b"}) },
			member: "c", want: 2, stage: Join},
		{name: "the quorum is bound: an extra member", gang: func() *Gang { return withWaiting(nil, "a", "b") },
			member: "c", want: 2, confirmed: 2, asks: true, stage: Extra},
		{name: "the member set says quorum, the store does not (a restart in flight): a new attempt", gang: func() *Gang { return withWaiting(nil, "a", "b") },
			member: "c", want: 2, confirmed: 1, asks: true, stage: Check},
		{name: "below the quorum: the first member of an attempt, the store not asked", gang: func() *Gang { return withWaiting(nil, "a") },
			member: "c", want: 2, stage: Check},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			asked := false
			in := StageIn{Now: t0, Member: tc.member, Want: tc.want, Confirmed: func() int { asked = true; return tc.confirmed }}
			stage, msg := tc.gang().Stage(in)
			if stage != tc.stage {
				t.Errorf("stage %v, want %v", stage, tc.stage)
			}
			if tc.msg != "" && !strings.Contains(msg, tc.msg) {
				t.Errorf("message %q, want it to say %q", msg, tc.msg)
			}
			if tc.msg == "" && msg != "" {
				t.Errorf("message %q for stage %v", msg, stage)
			}
			if asked != tc.asks {
				t.Errorf("the store was asked for the quorum: %v, want %v", asked, tc.asks)
			}
		})
	}
}

// plan is a placement plan with one member to place on each of nodes.
func plan(nodes ...string) *gangfit.PlacementPlan {
	var planned []gangfit.PlannedNode
	for _, n := range nodes {
		planned = append(planned, gangfit.PlannedNode{Name: n, Members: 1})
	}
	return gangfit.NewPlacementPlan(planned)
}

func TestOffer(t *testing.T) {
	g := New("ns", "g", "")
	if g.Offer(nil, true, 2) != nil {
		t.Errorf("an attempt without a plan offers nodes")
	}
	g.Plan = plan("n1", "n2", "n3")
	if got := g.Offer(nil, false, 2); got != nil {
		t.Errorf("a member that may not be planned is offered %v", got)
	}
	if got := g.Offer(nil, true, 2); got.Len() != 2 || !got.Has("n1") {
		t.Errorf("offer %v, want the plan's first 2 nodes", got)
	}
	g.Plan.Take("", "n1")
	g.Plan.Take("", "n2")
	g.Plan.Take("", "n3")
	if got := g.Offer(nil, true, 2); got != nil {
		t.Errorf("a plan that places nobody more offers %v", got)
	}
}

func TestCached(t *testing.T) {
	k := FeasibilityKey{Epoch: 1, UID: "u", Generation: 1, Existing: 3, Counted: 0, At: t0}
	g := New("ns", "g", "")
	if _, ok := g.Cached(k, time.Second); ok {
		t.Errorf("a gang never checked has a cached check")
	}
	g.Checked(gangfit.Result{Feasible: false, Message: "no room"}, k, nil, nil)
	later := k
	later.At = t0.Add(999 * time.Millisecond)
	if res, ok := g.Cached(later, time.Second); !ok || res.Message != "no room" {
		t.Errorf("Cached within the TTL = %v, %v; want the check", res, ok)
	}
	later.At = t0.Add(time.Second)
	if _, ok := g.Cached(later, time.Second); ok {
		t.Errorf("a check as old as the TTL still answers")
	}
	other := k
	other.Epoch = 2
	if _, ok := g.Cached(other, time.Second); ok {
		t.Errorf("a check of another epoch answers")
	}
}

func TestChecked(t *testing.T) {
	rackA := &gangfit.Placement{Key: "rack", Value: "a", Level: "rack"}
	rackB := &gangfit.Placement{Key: "rack", Value: "b", Level: "rack"}
	k := FeasibilityKey{Epoch: 1}
	cases := []struct {
		name        string
		gang        func() *Gang
		res         gangfit.Result
		chosen      *gangfit.Placement
		plan        *gangfit.PlacementPlan
		newDomain   bool
		changed     bool
		outcome     string
		keepsPlan   bool
		nominations int
	}{
		{name: "fits with a first domain", gang: func() *Gang { return New("ns", "g", "") }, res: gangfit.Result{Feasible: true}, chosen: rackA, newDomain: true},
		{name: "fits in the domain it had", gang: func() *Gang { g := New("ns", "g", ""); g.Placement = rackA; return g }, res: gangfit.Result{Feasible: true}, chosen: rackA},
		{name: "fits in another domain", gang: func() *Gang { g := New("ns", "g", ""); g.Placement = rackA; return g }, res: gangfit.Result{Feasible: true}, chosen: rackB, newDomain: true},
		{name: "fits without a policy, with a plan", gang: func() *Gang { return New("ns", "g", "") }, res: gangfit.Result{Feasible: true}, plan: plan("n1"), keepsPlan: true},
		{name: "does not fit: infeasible, once", gang: func() *Gang { return New("ns", "g", "") }, res: gangfit.Result{Message: "no room"},
			changed: true, outcome: podgroup.ReasonGangInfeasible},
		{name: "does not fit, as before: no change", gang: func() *Gang {
			g := New("ns", "g", "")
			g.SetOutcome(podgroup.ReasonGangInfeasible, "no room")
			return g
		},
			res: gangfit.Result{Message: "no room"}, outcome: podgroup.ReasonGangInfeasible},
		{name: "a gang that preempted stays Preempting while its room is nominated", gang: func() *Gang {
			g := New("ns", "g", "")
			g.Preempted([]string{"n1"}, "preempting 2 pods")
			return g
		}, res: gangfit.Result{Message: "no room"}, outcome: podgroup.ReasonPreempting, nominations: 1},
		{name: "a gang that preempted, its nominations gone, is infeasible", gang: func() *Gang {
			g := New("ns", "g", "")
			g.SetOutcome(podgroup.ReasonPreempting, "preempting 2 pods")
			return g
		}, res: gangfit.Result{Message: "no room"}, changed: true, outcome: podgroup.ReasonGangInfeasible},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := tc.gang()
			newDomain, changed := g.Checked(tc.res, k, tc.chosen, tc.plan)
			if newDomain != tc.newDomain || changed != tc.changed {
				t.Errorf("newDomain %v, outcome changed %v; want %v, %v", newDomain, changed, tc.newDomain, tc.changed)
			}
			if g.Placement != tc.chosen {
				t.Errorf("placement %v, want the chosen %v", g.Placement, tc.chosen)
			}
			if g.Feasibility == nil || *g.Feasibility != tc.res || g.CacheKey != k {
				t.Errorf("the check was not recorded: %v under %+v", g.Feasibility, g.CacheKey)
			}
			if (g.Plan != nil) != tc.keepsPlan {
				t.Errorf("plan kept %v, want %v", g.Plan != nil, tc.keepsPlan)
			}
			if tc.outcome != "" && g.Outcome.Reason != tc.outcome {
				t.Errorf("outcome %q, want %q", g.Outcome.Reason, tc.outcome)
			}
			if len(g.NominatedNodes) != tc.nominations {
				t.Errorf("nominated nodes %v, want %d", g.NominatedNodes, tc.nominations)
			}
		})
	}
}

func TestPreemptionOutcomes(t *testing.T) {
	g := New("ns", "g", "")
	g.Checked(gangfit.Result{Message: "no room"}, FeasibilityKey{}, nil, nil)
	g.Preempted([]string{"n1", "n2"}, "preempting 3 pods")
	if g.Outcome.Reason != podgroup.ReasonPreempting || g.Feasibility != nil || len(g.NominatedNodes) != 2 {
		t.Fatalf("after Preempted: outcome %q, check %v, nominated %v; want Preempting, no check, 2 nodes", g.Outcome.Reason, g.Feasibility, g.NominatedNodes)
	}
	// The next check still does not fit, but the room is nominated: Preempting stays.
	g.Checked(gangfit.Result{Message: "no room"}, FeasibilityKey{}, nil, nil)
	if g.Outcome.Reason != podgroup.ReasonPreempting {
		t.Errorf("outcome %q while the preemption's room is nominated, want Preempting", g.Outcome.Reason)
	}
	msg, changed := g.StoppedPreempting()
	if !changed || msg != "no room" || g.Outcome.Reason != podgroup.ReasonGangInfeasible || g.NominatedNodes != nil {
		t.Errorf("StoppedPreempting = %q, %v (outcome %q, nominated %v); want the check's message, infeasible, none nominated", msg, changed, g.Outcome.Reason, g.NominatedNodes)
	}
	if _, changed := g.StoppedPreempting(); changed {
		t.Errorf("StoppedPreempting changed the outcome twice")
	}
	fits := New("ns", "g", "")
	fits.Preempted([]string{"n1"}, "preempting")
	fits.Checked(gangfit.Result{Feasible: true}, FeasibilityKey{}, nil, nil)
	if _, changed := fits.StoppedPreempting(); changed || fits.Outcome.Reason != podgroup.ReasonPreempting {
		t.Errorf("a gang whose check fits turned infeasible when preemption stopped")
	}
}

func TestBusyDomains(t *testing.T) {
	inRack := func(name, rack string, phase attempt.Phase, waiting bool) *Gang {
		g := New("ns", name, "")
		if waiting {
			g.AddWaiting(gangtest.Member(name+"-0", name, "1"))
		}
		g.Phase = phase
		if rack != "" {
			g.Placement = &gangfit.Placement{Key: "rack", Value: rack}
		}
		return g
	}
	self := inRack("self", "a", attempt.PhaseGathering, true)
	all := gangs(self,
		inRack("gathering", "b", attempt.PhaseGathering, true),
		inRack("quorum", "c", attempt.PhaseQuorum, true),
		inRack("idle", "d", attempt.PhaseGathering, false),
		inRack("anywhere", "", attempt.PhaseGathering, true),
	)
	if diff := cmp.Diff(map[string]bool{"rack=b": true}, BusyDomains(all, self)); diff != "" {
		t.Errorf("busy domains (-want,+got):\n%s", diff)
	}
	if got := BusyDomains(gangs(self), self); got != nil {
		t.Errorf("a gang alone sees busy domains %v", got)
	}
}
