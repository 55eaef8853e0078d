package gang

import (
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
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
			r := g.OnNoNode(pod("x"), t0.Add(time.Second), tc.want, tc.existing, backoff)
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
		r, planned := g.OnReserve("a", "n1", t0, 3, time.Minute, never(t), backoff)
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
		if _, planned := g.OnReserve("a", "n1", t0, 3, time.Minute, never(t), backoff); !planned {
			t.Errorf("a member reserved on its planned node is not counted as planned")
		}
		if _, planned := g.OnReserve("b", "n1", t0, 3, time.Minute, never(t), backoff); planned {
			t.Errorf("a second member on a node planned for one is counted as planned")
		}
	})
	t.Run("backing off: refused, not counted", func(t *testing.T) {
		g := New("ns", "g", "")
		g.BackoffUntil = t0.Add(time.Second)
		r, _ := g.OnReserve("a", "n1", t0, 3, time.Minute, never(t), backoff)
		if r.Verdict != attempt.VerdictRefuse || !strings.Contains(r.Message, "backs off") || len(g.Members) != 0 {
			t.Errorf("OnReserve while backing off = %+v, members %v", r, g.Members)
		}
	})
	t.Run("an extra member of a bound quorum asks the store and starts no attempt", func(t *testing.T) {
		g := withWaiting(nil, "a", "b")
		asked := false
		g.OnReserve("c", "n1", t0, 2, time.Minute, func() int { asked = true; return 2 }, backoff)
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
