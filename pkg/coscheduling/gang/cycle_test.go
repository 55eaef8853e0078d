package gang

import (
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework"
	testingclock "k8s.io/utils/clock/testing"

	"github.com/custom-scheduler/custom-scheduler/pkg/coscheduling/attempt"
	"github.com/custom-scheduler/custom-scheduler/pkg/coscheduling/gangfit"
	"github.com/custom-scheduler/custom-scheduler/pkg/coscheduling/internal/gangtest"
	"github.com/custom-scheduler/custom-scheduler/pkg/coscheduling/podgroup"
)

const backoff = 10 * time.Second

var gathering = attempt.Attempt{Phase: attempt.PhaseGathering, Start: t0, Deadline: t0.Add(time.Minute), NeedsQuorum: true}

func counting(n int) func() int { return func() int { return n } }

// never is a store count that must not be asked for.
func never(t *testing.T) func() int {
	return func() int { t.Helper(); t.Errorf("the store was asked for the quorum count"); return 0 }
}

// pod is member name of group g.
func pod(name string) *v1.Pod { return gangtest.Member(name, "g", "1") }

// TestOnNoNode is every outcome of PostFilter for a member that found no node.
func TestOnNoNode(t *testing.T) {
	cases := []struct {
		name     string
		gang     func() *Gang
		want     int
		existing int
		verdict  attempt.Verdict
		failed   bool
		lead     bool
		msg      string
		unplaced int
	}{
		{name: "the quorum is met: placed alone", gang: func() *Gang { return withWaiting(nil, "a", "b") }, want: 2, existing: 3,
			verdict: attempt.VerdictPreemptAlone},
		{name: "enough others exist to reach the quorum: only counted as unplaced", gang: func() *Gang { return withWaiting([]string{"a"}) }, want: 2, existing: 4,
			verdict: attempt.VerdictRefuse, unplaced: 1},
		{name: "the quorum is out of reach with others reserved: the attempt fails, led by this member next",
			gang: func() *Gang { return withWaiting([]string{"a"}) }, want: 3, existing: 3,
			verdict: attempt.VerdictRefuse, failed: true, lead: true, msg: "cannot be placed, so the quorum of 3 cannot be reached now; retrying in a moment with it placed first"},
		{name: "the quorum is out of reach and nobody waits: the attempt fails and backs off",
			gang: func() *Gang { return New("ns", "g", "") }, want: 3, existing: 3,
			verdict: attempt.VerdictRefuse, failed: true, msg: "PodGroup ns/g rejected: member ns/x cannot be placed, so the quorum of 3 cannot be reached now"},
		{name: "a member that led once does not lead again", gang: func() *Gang {
			g := withWaiting([]string{"a"})
			g.SetLead(pod("x"))
			g.CountReserved("x", "n")
			g.RemoveWaiting("x")
			return g
		}, want: 4, existing: 4, verdict: attempt.VerdictRefuse, failed: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := tc.gang()
			g.Attempt = gathering
			r := g.OnNoNode(pod("x"), t0.Add(time.Second), tc.want, tc.existing, backoff, nil)
			if r.Verdict != tc.verdict || r.Failed() != tc.failed {
				t.Errorf("verdict %v, failed %v; want %v, %v", r.Verdict, r.Failed(), tc.verdict, tc.failed)
			}
			if r.Lead != tc.lead || (tc.lead && g.Lead != "x") || (tc.failed && !tc.lead && g.Lead != "") {
				t.Errorf("lead %v (gang's %q), want %v", r.Lead, g.Lead, tc.lead)
			}
			if tc.lead && !g.BackoffUntil.Equal(t0.Add(time.Second+attempt.LeadRetryDelay)) {
				t.Errorf("a led retry backs off until %v, want the lead retry delay", g.BackoffUntil)
			}
			if tc.msg != "" && !strings.Contains(r.Message, tc.msg) {
				t.Errorf("message %q, want %q", r.Message, tc.msg)
			}
			if tc.failed && (g.Outcome.Reason != podgroup.ReasonGangRejected || g.Outcome.Message != r.Message) {
				t.Errorf("outcome %+v, want GangRejected with the message", g.Outcome)
			}
			if len(g.Unplaced) != tc.unplaced {
				t.Errorf("%d unplaced, want %d", len(g.Unplaced), tc.unplaced)
			}
		})
	}
}

func TestOnReserve(t *testing.T) {
	t.Run("the first member starts an attempt and counts", func(t *testing.T) {
		g := New("ns", "g", "")
		g.Unplaced["a"] = struct{}{}
		r, planned := g.OnReserve("a", "", "n1", t0, 3, time.Minute, never(t), backoff)
		if r.Verdict == attempt.VerdictRefuse || planned {
			t.Fatalf("OnReserve = %+v, planned %v", r, planned)
		}
		if g.Phase != attempt.PhaseGathering || !g.Deadline.Equal(t0.Add(time.Minute)) || g.Members["a"] != Reserved || g.ReservedOn["a"] != "n1" || len(g.Unplaced) != 0 {
			t.Errorf("after the first Reserve: %+v, members %v, on %v, unplaced %v", g.Attempt, g.Members, g.ReservedOn, g.Unplaced)
		}
	})
	t.Run("a planned member takes its place in the plan", func(t *testing.T) {
		g := New("ns", "g", "")
		g.Plan = gangfit.NewPlacementPlan([]gangfit.PlannedNode{{Name: "n1", Members: 1}})
		if _, planned := g.OnReserve("a", "", "n1", t0, 3, time.Minute, never(t), backoff); !planned {
			t.Errorf("a member reserved on its planned node is not counted as planned")
		}
		if _, planned := g.OnReserve("b", "", "n1", t0, 3, time.Minute, never(t), backoff); planned {
			t.Errorf("a second member on a node planned for one is counted as planned")
		}
	})
	t.Run("backing off: refused, not counted", func(t *testing.T) {
		g := New("ns", "g", "")
		g.BackoffUntil = t0.Add(time.Second)
		r, _ := g.OnReserve("a", "", "n1", t0, 3, time.Minute, never(t), backoff)
		if r.Verdict != attempt.VerdictRefuse || !strings.Contains(r.Message, "backs off") || len(g.Members) != 0 {
			t.Errorf("OnReserve while backing off = %+v, members %v", r, g.Members)
		}
	})
	t.Run("an extra member of a bound quorum asks the store and starts no attempt", func(t *testing.T) {
		g := withWaiting(nil, "a", "b")
		asked := false
		g.OnReserve("c", "", "n1", t0, 2, time.Minute, func() int { asked = true; return 2 }, backoff)
		if !asked || g.Phase != attempt.PhaseIdle {
			t.Errorf("asked %v, phase %v; want the store asked and no attempt", asked, g.Phase)
		}
	})
}

func TestOnUnreserve(t *testing.T) {
	cases := []struct {
		name    string
		gang    func() *Gang
		attempt attempt.Attempt
		member  string
		now     time.Time
		failed  bool
		retry   bool
		reason  string
		msg     string
		rejects int
	}{
		{name: "a waiting member rejected before the quorum fails the attempt", gang: func() *Gang { return withWaiting([]string{"a", "b", "c"}) }, attempt: gathering,
			member: "a", now: t0.Add(time.Second), failed: true, reason: podgroup.ReasonGangRejected, msg: "member ns/a left the attempt", rejects: 2},
		{name: "past the deadline it is a timeout", gang: func() *Gang { return withWaiting([]string{"a", "b"}) }, attempt: gathering,
			member: "a", now: t0.Add(time.Minute), failed: true, reason: podgroup.ReasonGangTimedOut, msg: "timed out: 2 members were reserved or bound within 1m0s", rejects: 1},
		{name: "a bind failure after the quorum retries the member", gang: func() *Gang {
			g := withWaiting(nil, "b")
			g.CountReserved("a", "n1")
			return g
		}, attempt: attempt.Attempt{Phase: attempt.PhaseQuorum}, member: "a", now: t0.Add(time.Second), retry: true},
		{name: "the echo of a rejection already made", gang: func() *Gang { return New("ns", "g", "") }, attempt: attempt.Attempt{Phase: attempt.PhaseFailed},
			member: "a", now: t0.Add(time.Second)},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := tc.gang()
			g.Attempt = tc.attempt
			r := g.OnUnreserve(pod(tc.member), tc.now, backoff)
			if r.Failed() != tc.failed || r.RetryMember != tc.retry || len(r.Pods) != tc.rejects {
				t.Errorf("failed %v, retry %v, %d rejected; want %v, %v, %d", r.Failed(), r.RetryMember, len(r.Pods), tc.failed, tc.retry, tc.rejects)
			}
			if tc.failed && (r.Reason != tc.reason || !strings.Contains(r.Message, tc.msg) || g.Outcome.Message != r.Message) {
				t.Errorf("reason %q, message %q, outcome %+v; want %q, %q", r.Reason, r.Message, g.Outcome, tc.reason, tc.msg)
			}
			if _, counts := g.Members[types.UID(tc.member)]; counts || g.Waiting[types.UID(tc.member)] != nil {
				t.Errorf("the unreserved member still counts or waits")
			}
		})
	}
}

func TestOnPermit(t *testing.T) {
	cases := []struct {
		name      string
		gang      func() *Gang
		attempt   attempt.Attempt
		now       time.Time
		want      int
		confirmed func(t *testing.T) func() int
		check     func(t *testing.T, g *Gang, r Result)
	}{
		{name: "below the quorum the member waits, the first one activates its siblings", gang: func() *Gang { g := New("ns", "g", ""); g.CountReserved("x", "n"); return g },
			attempt: gathering, now: t0.Add(time.Second), want: 3, confirmed: never,
			check: func(t *testing.T, g *Gang, r Result) {
				if r.Verdict != attempt.VerdictWait || r.WaitFor != 59*time.Second || !r.ActivateSiblings || g.Waiting["x"] == nil {
					t.Errorf("OnPermit = %+v; want a wait of 59s with siblings activated, and x waiting", r)
				}
				if !strings.Contains(r.Message, "1 of minMember 3 members of PodGroup ns/g are reserved or bound; waiting up to 59s") {
					t.Errorf("message %q", r.Message)
				}
			}},
		{name: "the last member reaches the quorum on the store's word", gang: func() *Gang { g := withWaiting([]string{"a", "b"}); g.CountReserved("x", "n"); return g },
			attempt: gathering, now: t0.Add(2 * time.Second), want: 3, confirmed: func(*testing.T) func() int { return counting(3) },
			check: func(t *testing.T, g *Gang, r Result) {
				if !r.AllowWaiting || !r.FirstQuorum || len(r.Pods) != 2 || r.Count != 3 || !r.Start.Equal(t0) || g.InProgress() {
					t.Errorf("OnPermit = %+v; want both waiting allowed, the first quorum of 3 since t0", r)
				}
				if r.Message != "3 of minMember 3 live members reserved or bound; 2 waiting members go on to bind" {
					t.Errorf("message %q", r.Message)
				}
			}},
		{name: "the member set says quorum but the store does not: it waits", gang: func() *Gang { g := withWaiting([]string{"a", "b"}); g.CountReserved("x", "n"); return g },
			attempt: gathering, now: t0.Add(2 * time.Second), want: 3, confirmed: func(*testing.T) func() int { return counting(2) },
			check: func(t *testing.T, g *Gang, r Result) {
				if r.Verdict != attempt.VerdictWait || r.Count != 2 {
					t.Errorf("OnPermit = %+v; want a wait on the store's count of 2", r)
				}
			}},
		{name: "past the deadline: the attempt times out", gang: func() *Gang { g := withWaiting([]string{"a"}); g.CountReserved("x", "n"); return g },
			attempt: gathering, now: t0.Add(time.Minute), want: 3, confirmed: never,
			check: func(t *testing.T, g *Gang, r Result) {
				if !r.Failed() || r.Reason != podgroup.ReasonGangTimedOut || !strings.Contains(r.Message, "timed out: 2 members were reserved or bound within 1m0s, fewer than minMember 3") {
					t.Errorf("OnPermit = %+v", r)
				}
			}},
		{name: "an attempt that failed meanwhile refuses the member", gang: func() *Gang { g := New("ns", "g", ""); g.CountReserved("x", "n"); return g },
			attempt: attempt.Attempt{Phase: attempt.PhaseFailed, Deadline: t0.Add(time.Minute)}, now: t0.Add(time.Second), want: 3, confirmed: never,
			check: func(t *testing.T, g *Gang, r Result) {
				if r.Verdict != attempt.VerdictRefuse || r.Message != "PodGroup ns/g was rejected in this attempt" || g.InProgress() {
					t.Errorf("OnPermit = %+v", r)
				}
			}},
		{name: "an attempt whose deadline passed with nobody waiting refuses the member", gang: func() *Gang { g := New("ns", "g", ""); g.CountReserved("x", "n"); return g },
			attempt: gathering, now: t0.Add(2 * time.Minute), want: 3, confirmed: never,
			check: func(t *testing.T, g *Gang, r Result) {
				if r.Verdict != attempt.VerdictRefuse || r.Message != "PodGroup ns/g timed out waiting for its quorum" {
					t.Errorf("OnPermit = %+v", r)
				}
			}},
		{name: "after the quorum a member passes at once, without asking the store", gang: func() *Gang { g := withWaiting(nil, "a", "b"); g.CountReserved("x", "n"); return g },
			attempt: attempt.Attempt{Phase: attempt.PhaseQuorum}, now: t0.Add(time.Second), want: 2, confirmed: never,
			check: func(t *testing.T, g *Gang, r Result) {
				if !r.AllowWaiting || r.FirstQuorum {
					t.Errorf("OnPermit = %+v; want passed, not a first quorum", r)
				}
			}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := tc.gang()
			g.Attempt = tc.attempt
			tc.check(t, g, g.OnPermit(pod("x"), tc.now, tc.want, tc.confirmed(t), backoff))
		})
	}
}

func TestOnEvicted(t *testing.T) {
	g := withWaiting([]string{"a", "b"}, "c")
	g.Attempt = gathering
	if _, ok := g.OnEvicted(pod("c"), t0, backoff); ok {
		t.Errorf("a bound victim moved the attempt: its gang is preempted whole, and its delete uncounts it")
	}
	r, ok := g.OnEvicted(pod("a"), t0.Add(time.Second), backoff)
	if !ok || !r.Failed() || len(r.Pods) != 1 || r.Pods[0].Name != "b" || !strings.Contains(r.Message, "member ns/a was preempted") {
		t.Fatalf("OnEvicted(a) = %+v, %v; want the attempt failed and b rejected", r, ok)
	}
	if g.Members["a"] != 0 || g.Outcome.Reason != podgroup.ReasonGangRejected {
		t.Errorf("after the eviction: a counts %v, outcome %+v", g.Members["a"], g.Outcome)
	}
	q := withWaiting(nil, "c")
	q.CountReserved("d", "n")
	q.Attempt = attempt.Attempt{Phase: attempt.PhaseQuorum}
	if r, ok := q.OnEvicted(pod("d"), t0, backoff); !ok || r.Failed() {
		t.Errorf("a victim of a gang past its quorum failed it: %+v", r)
	}
}

func TestOnEdited(t *testing.T) {
	g := withWaiting([]string{"a", "b"})
	g.Attempt = gathering
	if r := g.OnEdited(t0.Add(time.Second), 3, never(t), backoff); r.AllowWaiting {
		t.Errorf("minMember 3 with 2 reserved allowed them")
	}
	r := g.OnEdited(t0.Add(time.Second), 2, counting(2), backoff)
	if !r.AllowWaiting || len(r.Pods) != 2 || r.Message != "minMember lowered to 2: 2 live members reserved or bound; 2 waiting members go on to bind" {
		t.Errorf("OnEdited to 2 = %+v", r)
	}
}

func TestOnDeleted(t *testing.T) {
	clk := testingclock.NewFakeClock(t0)
	g := dirty(withWaiting([]string{"a"}))
	g.BackoffTimer = clk.NewTimer(time.Minute)
	g.Attempt = gathering
	r, timers := g.OnDeleted(t0.Add(time.Second))
	if !r.Failed() || len(r.Pods) != 1 || r.Event != attempt.PodGroupDeleted || r.Message != "PodGroup ns/g was deleted; its waiting members were rejected" {
		t.Errorf("OnDeleted = %+v", r)
	}
	if len(timers) != 2 || timers[0] == nil {
		t.Errorf("timers to stop %v, want the back-off's (and the reservation's slot)", timers)
	}
	if g.Lead != "" || g.Placement != nil || g.PodGroupUID != "" {
		t.Errorf("the deleted PodGroup's history stays: %+v", g)
	}
	idle := New("ns", "g", "")
	if r, _ := idle.OnDeleted(t0); r.Failed() || r.Message != "" {
		t.Errorf("a gang with nobody waiting: %+v", r)
	}
}

// portsRefused are a cycle's filter statuses: rack r1's nodes refuse the member for its host port (one
// also for its CPU), every other node is outside the member's domain.
func portsRefused() fwk.NodeToStatusReader {
	ports := func() *fwk.Status {
		return fwk.NewStatus(fwk.Unschedulable, "node(s) didn't have free ports for the requested pod ports").WithPlugin("NodePorts")
	}
	cpu := fwk.NewStatus(fwk.Unschedulable, "node(s) didn't have free ports for the requested pod ports", "Insufficient cpu").WithPlugin("NodePorts")
	outside := fwk.NewStatus(fwk.UnschedulableAndUnresolvable, "node(s) didn't satisfy plugin(s) [Coscheduling]")
	return framework.NewNodeToStatus(map[string]*fwk.Status{"r1-0": ports(), "r1-1": cpu}, outside)
}

// TestOnNoNodeRefusesDomain: an attempt that fails in a chosen domain names it, with the filters'
// reasons over its nodes, and records it as refused (unless the member leads a retry); nothing is
// recorded without a domain, for anywhere, or while the attempt goes on.
func TestOnNoNodeRefusesDomain(t *testing.T) {
	r1 := &gangfit.Placement{Key: gangtest.RackKey, Value: "r1", Level: gangfit.LevelRequired, Nodes: sets.New("r1-0", "r1-1")}
	anywhere := &gangfit.Placement{Level: gangfit.LevelAnywhere}
	now := t0.Add(time.Second)
	cases := []struct {
		name      string
		gang      func() *Gang
		placement *gangfit.Placement
		existing  int
		statuses  fwk.NodeToStatusReader
		failed    bool
		// refused: the domains recorded afterwards; msg: what the failure says (exactly, when exact).
		refused []string
		msg     string
		exact   bool
	}{
		{name: "no placement (no policy): nothing recorded, the message as before", gang: func() *Gang { return New("ns", "g", "") },
			existing: 3, failed: true, exact: true,
			msg: "PodGroup ns/g rejected: member ns/x cannot be placed, so the quorum of 3 cannot be reached now"},
		{name: "placed anywhere: no domain to refuse", gang: func() *Gang { return New("ns", "g", "") }, placement: anywhere,
			existing: 3, statuses: portsRefused(), failed: true, exact: true,
			msg: "PodGroup ns/g rejected: member ns/x cannot be placed, so the quorum of 3 cannot be reached now"},
		{name: "a chosen rack: refused, named with the filters' reasons and until when it is avoided", gang: func() *Gang { return New("ns", "g", "") },
			placement: r1, existing: 3, statuses: portsRefused(), failed: true, refused: []string{"example.com/rack=r1"}, exact: true,
			msg: "PodGroup ns/g rejected: member ns/x cannot be placed in example.com/rack=r1 (2 node(s) didn't have free ports for the requested pod ports; 1 Insufficient cpu), " +
				"so the quorum of 3 cannot be reached now; example.com/rack=r1 is avoided until 2026-01-01T00:05:01Z while another domain may fit"},
		{name: "a chosen rack without statuses: refused, no reasons", gang: func() *Gang { return New("ns", "g", "") },
			placement: r1, existing: 3, failed: true, refused: []string{"example.com/rack=r1"}, exact: true,
			msg: "PodGroup ns/g rejected: member ns/x cannot be placed in example.com/rack=r1, so the quorum of 3 cannot be reached now; example.com/rack=r1 is avoided until 2026-01-01T00:05:01Z while another domain may fit"},
		{name: "another rack refused earlier stays refused", gang: func() *Gang {
			g := New("ns", "g", "")
			g.Refuse("example.com/rack=r2", t0, "")
			return g
		}, placement: r1, existing: 3, failed: true, refused: []string{"example.com/rack=r1", "example.com/rack=r2"}},
		{name: "others can still make the quorum: the attempt goes on, nothing recorded", gang: func() *Gang { return New("ns", "g", "") },
			placement: r1, existing: 5, statuses: portsRefused()},
		{name: "the member leads a retry (its reserved siblings may be in its way): named, not refused",
			gang: func() *Gang { return withWaiting([]string{"a"}) }, placement: r1, existing: 3, statuses: portsRefused(), failed: true,
			msg: "cannot be placed in example.com/rack=r1 (2 node(s) didn't have free ports for the requested pod ports; 1 Insufficient cpu), so the quorum of 3 cannot be reached now; retrying in a moment with it placed first"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := tc.gang()
			g.Attempt, g.Placement = gathering, tc.placement
			r := g.OnNoNode(pod("x"), now, 3, tc.existing, backoff, tc.statuses)
			if r.Failed() != tc.failed {
				t.Fatalf("failed %v, want %v", r.Failed(), tc.failed)
			}
			if tc.exact && r.Message != tc.msg || !strings.Contains(r.Message, tc.msg) {
				t.Errorf("message\n  %q\nwant\n  %q", r.Message, tc.msg)
			}
			if got := slices.Sorted(maps.Keys(g.Refused)); !slices.Equal(got, tc.refused) {
				t.Errorf("refused %v, want %v", got, tc.refused)
			}
			if rf, ok := g.Refused["example.com/rack=r1"]; ok {
				if !rf.Until.Equal(now.Add(RefusedDomainTTL)) {
					t.Errorf("r1 avoided until %v, want %v", rf.Until, now.Add(RefusedDomainTTL))
				}
				if tc.statuses != nil && !strings.HasPrefix(rf.Why, "2 node(s) didn't have free ports") {
					t.Errorf("r1 refused for %q, want the filters' reasons", rf.Why)
				}
			}
		})
	}
}

// TestDomainReasons: the most common reasons over the domain's nodes, counted in nodes, bounded.
func TestDomainReasons(t *testing.T) {
	long := strings.Repeat("é", 100) // 200 bytes
	many := framework.NewNodeToStatus(map[string]*fwk.Status{
		"a": fwk.NewStatus(fwk.Unschedulable, "r1", "r2"),
		"b": fwk.NewStatus(fwk.Unschedulable, "r1", "r3"),
		"c": fwk.NewStatus(fwk.Unschedulable, "r1", "r2", "r4"),
		"d": fwk.NewStatus(fwk.Unschedulable, long),
	}, fwk.NewStatus(fwk.UnschedulableAndUnresolvable, "absent"))
	for _, tc := range []struct {
		name  string
		nodes sets.Set[string]
		m     fwk.NodeToStatusReader
		want  string
	}{
		{"no statuses", sets.New("a"), nil, ""},
		{"no nodes", nil, many, ""},
		{"the two most common, then how many others", sets.New("a", "b", "c"), many, "3 r1; 2 r2; and 2 other reason(s)"},
		{"a node gone from the snapshot has the absent status", sets.New("a", "gone"), many, "1 absent; 1 r1; and 1 other reason(s)"},
		{"a long reason is cut on a rune boundary", sets.New("d"), many, "1 " + strings.Repeat("é", 58) + "..."},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := DomainReasons(tc.nodes, tc.m); got != tc.want {
				t.Errorf("DomainReasons = %q, want %q", got, tc.want)
			}
		})
	}
}

// A group of a job of several roles: its own quorum waits for the gang composites above it
// (TreeShort), the tree becoming ready lets it through, and a sibling's failure fails it.
func TestTreeSteps(t *testing.T) {
	g := withWaiting([]string{"a", "b"})
	g.CountReserved("x", "n")
	g.Attempt = gathering
	g.TreeShort = true
	r := g.OnPermit(pod("x"), t0.Add(time.Second), 3, counting(3), backoff)
	if r.Verdict != attempt.VerdictWait || r.AllowWaiting || !strings.Contains(r.Message, "waiting up to 59s for the other groups of its job") {
		t.Fatalf("OnPermit with the tree short = %+v; want a wait for the other groups", r)
	}
	if r := g.OnTreeReady(t0.Add(2*time.Second), 3, counting(2), backoff); r.AllowWaiting {
		t.Fatalf("OnTreeReady on a count the store does not confirm = %+v; want no quorum", r)
	}
	r = g.OnTreeReady(t0.Add(2*time.Second), 3, counting(3), backoff)
	if !r.AllowWaiting || !r.FirstQuorum || len(r.Pods) != 3 || g.InProgress() || !strings.Contains(r.Message, "the other groups of its job are ready; 3 waiting members") {
		t.Fatalf("OnTreeReady = %+v; want the three waiting members allowed", r)
	}
	if r := g.OnTreeFailed(t0.Add(3*time.Second), "x", backoff); r.Failed() {
		t.Fatalf("OnTreeFailed after the quorum = %+v; want nothing", r)
	}

	h := withWaiting([]string{"a"})
	h.Attempt = gathering
	r = h.OnTreeFailed(t0.Add(time.Second), "PodGroup ns/prefill rejected: member ns/p-0 cannot be placed", backoff)
	if !r.Failed() || len(r.Pods) != 1 || r.Reason != podgroup.ReasonGangRejected ||
		r.Message != "PodGroup ns/g rejected with the other groups of its job: PodGroup ns/prefill rejected: member ns/p-0 cannot be placed" || h.Outcome.Message != r.Message {
		t.Fatalf("OnTreeFailed = %+v; want the waiting member rejected, the sibling's reason said", r)
	}
}

// TestTentative: only a step of kube-scheduler's pod-group cycle is tentative; a plain cycle, or
// none, is the gang's.
func TestTentative(t *testing.T) {
	podGroupCycle := framework.NewCycleState()
	podGroupCycle.SetPodGroupSchedulingCycle(framework.NewCycleState())
	for _, tc := range []struct {
		name  string
		state fwk.CycleState
		want  bool
	}{
		{"no cycle state", nil, false},
		{"a pod's own cycle", framework.NewCycleState(), false},
		{"the pod-group cycle's tentative reservation", podGroupCycle, true},
	} {
		if got := Tentative(tc.state); got != tc.want {
			t.Errorf("%s: Tentative = %v, want %v", tc.name, got, tc.want)
		}
	}
}

// TestBackoffEnded: the fired timer is forgotten; the nominations are cleared only after an attempt
// a member led, where the gang made no preemption.
func TestBackoffEnded(t *testing.T) {
	for _, tc := range []struct {
		name      string
		lead      string
		nominated []string
		want      bool
	}{
		{"no lead", "", nil, false},
		{"led, no preemption", "m0", nil, true},
		{"led, but its preemption nominated nodes", "m0", []string{"a"}, false},
	} {
		clk := testingclock.NewFakeClock(t0)
		g := New("ns", "g", "pg")
		g.Lead, g.NominatedNodes = types.UID(tc.lead), tc.nominated
		g.BackoffTimer = clk.AfterFunc(time.Second, func() {})
		if got := g.BackoffEnded(); got != tc.want {
			t.Errorf("%s: BackoffEnded = %v, want %v", tc.name, got, tc.want)
		}
		if g.BackoffTimer != nil {
			t.Errorf("%s: the fired timer is kept", tc.name)
		}
	}
}
