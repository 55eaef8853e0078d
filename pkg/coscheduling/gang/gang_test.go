package gang

import (
	"sort"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	testingclock "k8s.io/utils/clock/testing"

	"github.com/custom-scheduler/custom-scheduler/pkg/coscheduling/attempt"
	"github.com/custom-scheduler/custom-scheduler/pkg/coscheduling/gangfit"
	"github.com/custom-scheduler/custom-scheduler/pkg/coscheduling/internal/gangtest"
	"github.com/custom-scheduler/custom-scheduler/pkg/coscheduling/podgroup"
	resv "github.com/custom-scheduler/custom-scheduler/pkg/coscheduling/reservation"
)

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// withWaiting is a gang whose members names are reserved and wait at Permit, and bound are bound.
func withWaiting(waiting []string, bound ...string) *Gang {
	g := New("ns", "g", "uid")
	for _, n := range waiting {
		p := gangtest.Member(n, "g", "1")
		g.CountReserved(p.UID, "node-"+n)
		g.AddWaiting(p)
	}
	for _, n := range bound {
		g.CountBound(types.UID(n))
	}
	return g
}

func names(pods []*v1.Pod) []string {
	out := make([]string, 0, len(pods))
	for _, p := range pods {
		out = append(out, p.Name)
	}
	sort.Strings(out)
	return out
}

// dirty gives a gang everything an attempt leaves behind.
func dirty(g *Gang) *Gang {
	g.Unplaced[types.UID("u")] = struct{}{}
	g.SetLead(gangtest.Member("lead", "g", "1"))
	g.NominatedNodes = []string{"n1"}
	g.Plan = &gangfit.PlacementPlan{}
	g.NoPlan = true
	g.Placement = &gangfit.Placement{Key: "rack", Value: "a"}
	g.Feasibility = &gangfit.Result{Feasible: true}
	g.Refuse("rack=b", t0, "node(s) didn't have free ports for the requested pod ports")
	return g
}

// TestStep is every way the attempt's step changes a gang's state: what it allows or rejects, and what
// it keeps or drops of what earlier attempts left.
func TestStep(t *testing.T) {
	gathering := attempt.Attempt{Phase: attempt.PhaseGathering, Start: t0, Deadline: t0.Add(time.Minute), NeedsQuorum: true}
	cases := []struct {
		name    string
		gang    *Gang
		attempt attempt.Attempt
		in      attempt.Input
		// want: the decision's flags, the members returned, what counts and waits afterwards, and
		// whether the attempt's leftovers stay (lead; unplaced members, plan, and at a failure the
		// placement and the check; a quorum keeps the placement, which later members are pinned to).
		allow, reject bool
		pods          []string
		members       []types.UID
		waiting       int
		keepsLeads    bool
		keepsLeftover bool
		outcome       string
		phase         attempt.Phase
	}{
		{
			name: "the last member's Permit reaches the quorum: every waiting member is allowed and the attempt's leftovers go",
			gang: dirty(withWaiting([]string{"a", "b"}, "c")), attempt: gathering,
			in:    attempt.Input{Kind: attempt.Permit, Now: t0.Add(time.Second), Want: 3, Counted: 3, Confirmed: 3},
			allow: true, pods: []string{"a", "b"}, members: []types.UID{"a", "b", "c"},
			keepsLeftover: false, outcome: podgroup.ReasonQuorumReached, phase: attempt.PhaseQuorum,
		},
		{
			name: "below the quorum a member waits: nothing changes",
			gang: dirty(withWaiting([]string{"a"})), attempt: gathering,
			in:      attempt.Input{Kind: attempt.Permit, Now: t0.Add(time.Second), Want: 3, Counted: 1},
			members: []types.UID{"a"}, waiting: 1, keepsLeads: true, keepsLeftover: true, phase: attempt.PhaseGathering,
		},
		{
			name: "a member leaves before the quorum: the waiting members are rejected and stop counting, bound ones stay",
			gang: dirty(withWaiting([]string{"a", "b"}, "c")), attempt: gathering,
			in:     attempt.Input{Kind: attempt.Unreserve, Now: t0.Add(time.Second), WasWaiting: true, WasReserved: true},
			reject: true, pods: []string{"a", "b"}, members: []types.UID{"c"}, keepsLeads: true,
			keepsLeftover: false, phase: attempt.PhaseFailed,
		},
		{
			name: "the deadline passes at Permit: the waiting members are rejected",
			gang: withWaiting([]string{"a", "b"}), attempt: gathering,
			in:     attempt.Input{Kind: attempt.Permit, Now: t0.Add(time.Minute), Want: 3, Counted: 2},
			reject: true, pods: []string{"a", "b"}, keepsLeads: true, phase: attempt.PhaseFailed,
		},
		{
			name: "the PodGroup is deleted: the waiting members are rejected and the history starts anew",
			gang: withWaiting([]string{"a"}), attempt: gathering,
			in:     attempt.Input{Kind: attempt.PodGroupDeleted, Now: t0.Add(time.Second)},
			reject: true, pods: []string{"a"}, keepsLeads: true, phase: attempt.PhaseFailed,
		},
		{
			name: "an echo of a rejection already made changes nothing",
			gang: dirty(withWaiting(nil, "c")), attempt: attempt.Attempt{Phase: attempt.PhaseFailed},
			in:      attempt.Input{Kind: attempt.Unreserve, Now: t0.Add(time.Second), WasReserved: false},
			members: []types.UID{"c"}, keepsLeads: true, keepsLeftover: true, phase: attempt.PhaseFailed,
		},
		{
			name: "minMember lowered to what is reserved lets the waiting members through",
			gang: withWaiting([]string{"a", "b"}), attempt: gathering,
			in:    attempt.Input{Kind: attempt.PodGroupEdited, Now: t0.Add(time.Second), Want: 2, Counted: 2, Confirmed: 2},
			allow: true, pods: []string{"a", "b"}, members: []types.UID{"a", "b"}, outcome: podgroup.ReasonQuorumReached, phase: attempt.PhaseQuorum,
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := tc.gang
			g.Attempt = tc.attempt
			hadPlacement, refused := g.Placement != nil, len(g.Refused)
			d, pods := g.Step(tc.in, 10*time.Second)
			if len(g.Refused) != refused {
				t.Errorf("the step changed the refused domains to %v: they outlive attempts", g.Refused)
			}
			if d.AllowWaiting != tc.allow || d.RejectWaiting != tc.reject {
				t.Errorf("decision allow=%v reject=%v, want allow=%v reject=%v", d.AllowWaiting, d.RejectWaiting, tc.allow, tc.reject)
			}
			if diff := cmp.Diff(tc.pods, names(pods), cmp.Comparer(func(a, b []string) bool { return len(a) == 0 && len(b) == 0 || cmp.Equal(a, b) })); diff != "" {
				t.Errorf("members to allow or reject (-want,+got):\n%s", diff)
			}
			var members []types.UID
			for uid := range g.Members {
				members = append(members, uid)
			}
			sort.Slice(members, func(i, j int) bool { return members[i] < members[j] })
			if !(len(members) == 0 && len(tc.members) == 0) && !cmp.Equal(tc.members, members) {
				t.Errorf("members that count = %v, want %v", members, tc.members)
			}
			for uid := range g.ReservedOn {
				if g.Members[uid]&Reserved == 0 {
					t.Errorf("%s keeps its reserved node but counts as reserved no more", uid)
				}
			}
			if len(g.Waiting) != tc.waiting {
				t.Errorf("%d members wait, want %d", len(g.Waiting), tc.waiting)
			}
			if leads := g.Lead != "" || g.LedBy != nil; leads != (tc.keepsLeads && tc.gang.LedBy != nil) {
				t.Errorf("lead %q, ledBy %v after the step; want them kept: %v", g.Lead, g.LedBy, tc.keepsLeads)
			}
			left := g.Plan != nil || len(g.Unplaced) > 0 || (!tc.allow && (g.Placement != nil || g.Feasibility != nil))
			if tc.keepsLeftover != left && (tc.keepsLeftover || tc.allow || tc.reject) {
				t.Errorf("plan %v, placement %v, check %v, unplaced %v after the step; want kept: %v", g.Plan, g.Placement, g.Feasibility, g.Unplaced, tc.keepsLeftover)
			}
			if tc.allow && (g.NoPlan || len(g.NominatedNodes) > 0) {
				t.Errorf("the quorum left noPlan=%v, nominations %v", g.NoPlan, g.NominatedNodes)
			}
			if tc.allow && hadPlacement && g.Placement == nil {
				t.Errorf("the quorum dropped the placement its later members are pinned to")
			}
			if tc.outcome != "" && g.Outcome.Reason != tc.outcome {
				t.Errorf("outcome %q, want %q", g.Outcome.Reason, tc.outcome)
			}
			if g.Phase != tc.phase {
				t.Errorf("phase %v, want %v", g.Phase, tc.phase)
			}
		})
	}
}

func TestMembers(t *testing.T) {
	g := New("ns", "g", "uid")
	g.Unplaced["a"] = struct{}{}
	g.CountReserved("a", "n1")
	g.CountReserved("b", "n2")
	if _, ok := g.Unplaced["a"]; ok {
		t.Errorf("a reserved member still counts as unplaced")
	}
	g.CountBound("b")
	if got := g.ReservedNodes(); !cmp.Equal(got, []string{"n1"}) {
		t.Errorf("reserved nodes %v, want [n1]: b is bound", got)
	}
	if g.Members["b"] != Bound {
		t.Errorf("b's flags %v, want Bound alone", g.Members["b"])
	}
	if !g.Clear("a", Reserved) || g.Clear("a", Reserved) {
		t.Errorf("Clear reports a reserved member once")
	}
	if g.Clear("b", Reserved) {
		t.Errorf("Clear(Reserved) of a bound member reports true")
	}
	g.Set("c", Reserved)
	g.Set("c", Bound)
	if !g.Clear("c", Reserved) || g.Members["c"] != Bound {
		t.Errorf("a member both reserved and bound still counts as bound after Clear(Reserved): %v", g.Members["c"])
	}
	g.SetLead(gangtest.Member("c", "g", "1"))
	g.Forget("c")
	if _, ok := g.Members["c"]; ok || g.Lead != "" {
		t.Errorf("a forgotten member still counts (%v) or leads (%q)", ok, g.Lead)
	}
	if g.Key() != "ns/g" {
		t.Errorf("Key = %q", g.Key())
	}
}

func TestWaiting(t *testing.T) {
	g := New("ns", "g", "uid")
	a, b := gangtest.Member("a", "g", "1"), gangtest.Member("b", "g", "1")
	if !g.AddWaiting(a) || g.AddWaiting(b) {
		t.Errorf("AddWaiting reports the first waiting member only")
	}
	if !g.InProgress() {
		t.Errorf("an attempt with waiting members is not in progress")
	}
	if was, emptied := g.RemoveWaiting("x"); was || emptied {
		t.Errorf("RemoveWaiting of a member that does not wait = %v, %v", was, emptied)
	}
	if was, emptied := g.RemoveWaiting("a"); !was || emptied {
		t.Errorf("RemoveWaiting(a) = %v, %v; want it waited, and b still waits", was, emptied)
	}
	if got := names(g.TakeWaiting()); !cmp.Equal(got, []string{"b"}) || g.InProgress() {
		t.Errorf("TakeWaiting = %v (in progress after: %v), want [b] and none left", got, g.InProgress())
	}
	if g.TakeWaiting() != nil {
		t.Errorf("TakeWaiting of an empty set returned members")
	}
	if was, emptied := g.RemoveWaiting("b"); was || emptied {
		t.Errorf("RemoveWaiting after TakeWaiting = %v, %v", was, emptied)
	}
}

func TestHoldsNothing(t *testing.T) {
	cases := []struct {
		name string
		gang func() *Gang
		want bool
	}{
		{name: "empty", gang: func() *Gang { return New("ns", "g", "") }, want: true},
		{name: "a member counts", gang: func() *Gang { g := New("ns", "g", ""); g.CountBound("a"); return g }},
		{name: "a member waits", gang: func() *Gang { g := New("ns", "g", ""); g.AddWaiting(gangtest.Member("a", "g", "1")); return g }},
		{name: "backing off", gang: func() *Gang { g := New("ns", "g", ""); g.BackoffUntil = t0.Add(time.Second); return g }},
		{name: "a back-off that ended", gang: func() *Gang { g := New("ns", "g", ""); g.BackoffUntil = t0; return g }, want: true},
	}
	for _, tc := range cases {
		if got := tc.gang().HoldsNothing(t0); got != tc.want {
			t.Errorf("%s: HoldsNothing = %v, want %v", tc.name, got, tc.want)
		}
	}
}

func TestResetHistory(t *testing.T) {
	clk := testingclock.NewFakeClock(t0)
	g := dirty(withWaiting([]string{"a"}, "b"))
	g.BackoffTimer = clk.NewTimer(time.Minute)
	g.Reserve = Reservation{State: resv.State{Phase: resv.Held}, Timer: clk.NewTimer(time.Minute)}
	g.Attempt = attempt.Attempt{Phase: attempt.PhaseFailed, BackoffUntil: t0.Add(time.Minute)}
	g.SetOutcome(podgroup.ReasonGangRejected, "x")
	g.CacheKey = FeasibilityKey{Epoch: 3}
	timers := g.ResetHistory("new")
	if len(timers) != 2 || timers[0] == nil || timers[1] == nil {
		t.Errorf("ResetHistory returned timers %v, want the back-off's and the reservation's", timers)
	}
	if g.PodGroupUID != "new" || g.BackoffTimer != nil || g.Attempt != (attempt.Attempt{}) || g.Feasibility != nil ||
		g.CacheKey != (FeasibilityKey{}) || g.Placement != nil || g.Plan != nil || g.NoPlan || g.NominatedNodes != nil ||
		g.Outcome != (Outcome{}) || g.Reserve.Held() || g.Reserve.Timer != nil || g.Lead != "" || g.LedBy != nil || g.Refused != nil {
		t.Errorf("history left after ResetHistory: %+v", g)
	}
	if len(g.Members) != 2 || len(g.Waiting) != 1 {
		t.Errorf("ResetHistory dropped facts about live pods: members %v, waiting %d", g.Members, len(g.Waiting))
	}
}

func TestSetOutcome(t *testing.T) {
	g := New("ns", "g", "")
	if !g.SetOutcome("A", "m") || g.SetOutcome("A", "m") || !g.SetOutcome("A", "n") {
		t.Errorf("SetOutcome reports a change only when reason or message changes")
	}
}

func TestLead(t *testing.T) {
	a, b, c, d := gangtest.Member("a", "g", "1"), gangtest.Member("b", "g", "1"), gangtest.Member("c", "g", "1"), gangtest.Member("d", "g", "1")
	g := New("ns", "g", "")
	if g.MayLead("a") {
		t.Errorf("a member may lead an attempt in which nobody waits")
	}
	g.AddWaiting(d)
	if !g.MayLead("a") {
		t.Errorf("a member may not lead while others wait")
	}
	g.SetLead(a)
	if g.MayLead("a") {
		t.Errorf("a member may lead twice")
	}
	if !g.WaitsForLead("b") || g.WaitsForLead("a") {
		t.Errorf("WaitsForLead: b = %v (want true), a = %v (want false)", g.WaitsForLead("b"), g.WaitsForLead("a"))
	}
	g.CountReserved("a", "n")
	if g.WaitsForLead("b") {
		t.Errorf("b waits for a lead that is reserved")
	}
	if g.Rank(a) != 0 || g.Rank(b) != 2 {
		t.Errorf("ranks a=%d b=%d, want 0 and 2", g.Rank(a), g.Rank(b))
	}
	g.SetLead(b)
	g.SetLead(c)
	if g.MayLead("d") {
		t.Errorf("a fourth member may lead: at most %d do", MaxLeads)
	}
	g.ClearLead()
	if g.Lead != "" || len(g.LedBy) != MaxLeads {
		t.Errorf("ClearLead: lead %q, ledBy %v; want no lead and the %d that led remembered", g.Lead, g.LedBy, MaxLeads)
	}
}

func TestConstrained(t *testing.T) {
	base := func() *v1.Pod { return gangtest.Member("a", "g", "1") }
	cases := []struct {
		name string
		pod  func() *v1.Pod
		want bool
	}{
		{name: "resources only", pod: base},
		{name: "a node selector", pod: func() *v1.Pod { p := base(); p.Spec.NodeSelector = map[string]string{"k": "v"}; return p }, want: true},
		{name: "a hard spread", pod: func() *v1.Pod {
			p := base()
			p.Spec.TopologySpreadConstraints = []v1.TopologySpreadConstraint{{WhenUnsatisfiable: v1.DoNotSchedule}}
			return p
		}, want: true},
		{name: "a soft spread", pod: func() *v1.Pod {
			p := base()
			p.Spec.TopologySpreadConstraints = []v1.TopologySpreadConstraint{{WhenUnsatisfiable: v1.ScheduleAnyway}}
			return p
		}},
		{name: "required node affinity", pod: func() *v1.Pod {
			p := base()
			p.Spec.Affinity = &v1.Affinity{NodeAffinity: &v1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &v1.NodeSelector{}}}
			return p
		}, want: true},
		{name: "preferred node affinity", pod: func() *v1.Pod {
			p := base()
			p.Spec.Affinity = &v1.Affinity{NodeAffinity: &v1.NodeAffinity{PreferredDuringSchedulingIgnoredDuringExecution: []v1.PreferredSchedulingTerm{{}}}}
			return p
		}},
		{name: "required pod affinity", pod: func() *v1.Pod {
			p := base()
			p.Spec.Affinity = &v1.Affinity{PodAffinity: &v1.PodAffinity{RequiredDuringSchedulingIgnoredDuringExecution: []v1.PodAffinityTerm{{}}}}
			return p
		}, want: true},
		{name: "required pod anti-affinity", pod: func() *v1.Pod {
			p := base()
			p.Spec.Affinity = &v1.Affinity{PodAntiAffinity: &v1.PodAntiAffinity{RequiredDuringSchedulingIgnoredDuringExecution: []v1.PodAffinityTerm{{}}}}
			return p
		}, want: true},
	}
	for _, tc := range cases {
		if got := Constrained(tc.pod()); got != tc.want {
			t.Errorf("%s: Constrained = %v, want %v", tc.name, got, tc.want)
		}
	}
	g := New("ns", "g", "")
	p := cases[1].pod()
	if g.Rank(p) != 1 {
		t.Errorf("a constrained member's rank = %d, want 1", g.Rank(p))
	}
}

func TestKeepPlan(t *testing.T) {
	plan := &gangfit.PlacementPlan{}
	cases := []struct {
		name string
		gang func() *Gang
		plan *gangfit.PlacementPlan
		want bool
	}{
		{name: "a fresh plan is kept", gang: func() *Gang { return New("ns", "g", "") }, plan: plan, want: true},
		{name: "no plan replaces the old one", gang: func() *Gang { g := New("ns", "g", ""); g.Plan = plan; return g }},
		{name: "not after a fall-back in this attempt", gang: func() *Gang { g := New("ns", "g", ""); g.MissPlan(); return g }, plan: plan},
		{name: "not while a preemption's nominations hold", gang: func() *Gang { g := New("ns", "g", ""); g.NominatedNodes = []string{"n"}; return g }, plan: plan},
		{name: "not while a reservation holds", gang: func() *Gang { g := New("ns", "g", ""); g.Reserve.Phase = resv.Held; return g }, plan: plan},
	}
	for _, tc := range cases {
		g := tc.gang()
		g.KeepPlan(tc.plan)
		if got := g.Plan != nil; got != tc.want {
			t.Errorf("%s: plan kept = %v, want %v", tc.name, got, tc.want)
		}
	}
	g := New("ns", "g", "")
	g.MissPlan()
	g.DropPlan()
	if g.NoPlan || g.Plan != nil {
		t.Errorf("DropPlan left the fall-back")
	}
}

func TestSplitAndConfirmed(t *testing.T) {
	g := New("ns", "g", "")
	reservedHere := gangtest.Member("r", "g", "1")
	g.CountReserved(reservedHere.UID, "n1")
	bound := gangtest.Member("b", "g", "1")
	bound.Spec.NodeName = "n2"
	pending := gangtest.Member("p", "g", "1")
	// Members counted by the handler whose pods the store no longer shows live (a restart in flight).
	g.CountBound("gone")
	g.CountBound("gone too")
	candidates, counted, n := g.Split([]*v1.Pod{reservedHere, bound, pending})
	if got := names(candidates); !cmp.Equal(got, []string{"p"}) {
		t.Errorf("candidates %v, want [p]", got)
	}
	if got := names(counted); !cmp.Equal(got, []string{"b", "r"}) {
		t.Errorf("counted %v, want [b r]", got)
	}
	if n != 3 {
		t.Errorf("countedN = %d, want 3 (the member set is ahead of the store)", n)
	}
	if got := g.Confirmed([]*v1.Pod{reservedHere, bound, pending}); got != 2 {
		t.Errorf("Confirmed = %d, want 2: the store's word, not the member set's", got)
	}
}

func TestFeasibilityKey(t *testing.T) {
	k := FeasibilityKey{Epoch: 1, UID: "u", Generation: 2, Want: 4, Existing: 3, Counted: 1, At: t0}
	same := k
	same.At = t0.Add(time.Hour)
	if !k.Matches(same) {
		t.Errorf("keys that differ only in At do not match")
	}
	for _, o := range []FeasibilityKey{
		{Epoch: 2, UID: "u", Generation: 2, Existing: 3, Counted: 1, Want: 4},
		{Epoch: 1, UID: "v", Generation: 2, Existing: 3, Counted: 1, Want: 4},
		{Epoch: 1, UID: "u", Generation: 3, Existing: 3, Counted: 1, Want: 4},
		{Epoch: 1, UID: "u", Generation: 2, Existing: 4, Counted: 1, Want: 4},
		{Epoch: 1, UID: "u", Generation: 2, Existing: 3, Counted: 2, Want: 4},
		// minMember edited without a new generation (the in-tree API's way).
		{Epoch: 1, UID: "u", Generation: 2, Existing: 3, Counted: 1, Want: 3},
	} {
		if k.Matches(o) {
			t.Errorf("%+v matches %+v", k, o)
		}
	}
}

func TestRecreated(t *testing.T) {
	for _, tc := range []struct {
		phase   resv.Phase
		wantEnd bool
	}{{resv.Idle, false}, {resv.Waiting, true}, {resv.Held, true}} {
		clk := testingclock.NewFakeClock(t0)
		g := dirty(withWaiting([]string{"a"}, "b"))
		backoff, timer := clk.NewTimer(time.Minute), clk.NewTimer(time.Minute)
		g.BackoffTimer = backoff
		g.Reserve = Reservation{State: resv.State{Phase: tc.phase}, Timer: timer, TimerAt: t0.Add(time.Minute)}
		old, end := g.Recreated("new")
		if end != tc.wantEnd || old.Phase != tc.phase || old.Timer != nil || !old.TimerAt.IsZero() {
			t.Errorf("%v: Recreated = phase %v, timer %v at %v, end %v; want phase %v, no timer, end %v", tc.phase, old.Phase, old.Timer, old.TimerAt, end, tc.phase, tc.wantEnd)
		}
		if backoff.Stop() || timer.Stop() {
			t.Errorf("%v: Recreated left a timer running", tc.phase)
		}
		if g.PodGroupUID != "new" || g.Reserve.Phase != resv.Idle || g.BackoffTimer != nil || len(g.Members) != 2 || g.Refused != nil {
			t.Errorf("%v: state after Recreated: %+v", tc.phase, g)
		}
	}
}
