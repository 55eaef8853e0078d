package gang

import (
	"slices"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/custom-scheduler/custom-scheduler/pkg/coscheduling/attempt"
	"github.com/custom-scheduler/custom-scheduler/pkg/coscheduling/internal/gangtest"
	"github.com/custom-scheduler/custom-scheduler/pkg/coscheduling/podgroup"
	"github.com/custom-scheduler/custom-scheduler/pkg/coscheduling/tree"
)

// job is the tree of the job "serve" over prefill (minMember 2) and decode (minMember 2), a gang
// composite needing both, resolved for prefill.
func job(t *testing.T) *tree.Branch {
	t.Helper()
	x := tree.NewIndex()
	x.Set(tree.Node{Namespace: "ns", Name: "serve", Composite: true, Gang: true, Min: 2})
	x.Set(tree.Node{Namespace: "ns", Name: "prefill", Gang: true, Min: 2, Parent: "serve"})
	x.Set(tree.Node{Namespace: "ns", Name: "decode", Gang: true, Min: 2, Parent: "serve"})
	root, p := x.Resolve("ns", "prefill")
	if p != nil {
		t.Fatal(p)
	}
	return root
}

// gathered is group name's gang gathering its attempt, with waiting members reserved.
func gathered(name string, waiting ...string) *Gang {
	g := New("ns", name, types.UID("uid-"+name))
	g.Attempt = gathering
	for _, n := range waiting {
		p := gangtest.Member(n, name, "1")
		g.CountReserved(p.UID, "node-"+n)
		g.AddWaiting(p)
	}
	return g
}

// TestRegistryFollow: a group's quorum lets through the siblings its job now admits, its failure
// fails those that can no longer be ready; a follower's step moves nobody, nor does a group in no
// tree, and the tree is resolved only when needed.
func TestRegistryFollow(t *testing.T) {
	now := t0.Add(time.Second)
	quorum := Result{Decision: attempt.Decision{AllowWaiting: true}, Now: now, Event: attempt.Permit}
	failed := Result{Decision: attempt.Decision{RejectWaiting: true}, Message: "prefill timed out", Now: now, Event: attempt.Unreserve}
	for _, tc := range []struct {
		name     string
		decode   func() *Gang // nil: not tracked
		res      Result
		noTree   bool
		resolved bool
		want     []string // the moved groups' waiting members
		event    [3]string
	}{
		{name: "quorum: the sibling with its own quorum is let through", decode: func() *Gang { return gathered("decode", "d0", "d1") },
			res: quorum, resolved: true, want: []string{"d0", "d1"},
			event: [3]string{v1.EventTypeNormal, podgroup.ReasonQuorumReached, "2 of minMember 2 live members reserved or bound, and the other groups of its job are ready; 2 waiting members go on to bind"}},
		{name: "quorum: a sibling short of its own quorum stays", decode: func() *Gang { return gathered("decode", "d0") },
			res: quorum, resolved: true},
		{name: "failure: the sibling the job needs fails with it", decode: func() *Gang { return gathered("decode", "d0") },
			res: failed, resolved: true, want: []string{"d0"},
			event: [3]string{v1.EventTypeWarning, podgroup.ReasonGangRejected, "PodGroup ns/decode rejected with the other groups of its job: prefill timed out"}},
		{name: "failure: a sibling already failed and backing off is out", decode: func() *Gang {
			g := gathered("decode", "d0")
			g.Phase, g.BackoffUntil = attempt.PhaseFailed, now.Add(time.Minute)
			return g
		}, res: failed, resolved: true},
		{name: "a sibling not tracked is passed over", res: failed, resolved: true},
		{name: "a follower's step moves nobody else, and no tree is resolved", decode: func() *Gang { return gathered("decode", "d0") },
			res: Result{Decision: attempt.Decision{RejectWaiting: true}, Now: now, Event: attempt.TreeFailed}},
		{name: "a group in no tree moves nobody", decode: func() *Gang { return gathered("decode", "d0") }, res: failed, noTree: true, resolved: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := NewRegistry(nil)
			prefill := gathered("prefill", "p0", "p1")
			r.Put(prefill)
			if tc.decode != nil {
				r.Put(tc.decode())
			}
			resolved := false
			root := func() *tree.Branch {
				resolved = true
				if tc.noTree {
					return nil
				}
				return job(t)
			}
			var stepped []string
			step := func(g *Gang, s func() Result) Result { stepped = append(stepped, g.Name); return s() }
			moved := r.Follow(prefill, tc.res, root, backoff, func(g *Gang) int { return g.Count() }, step)
			if resolved != tc.resolved {
				t.Errorf("tree resolved %v, want %v", resolved, tc.resolved)
			}
			if got := names(FollowedPods(moved)); strings.Join(got, ",") != strings.Join(tc.want, ",") {
				t.Errorf("moved members %v, want %v", got, tc.want)
			}
			if slices.Contains(stepped, "prefill") {
				t.Errorf("the leading group was stepped again")
			}
			if len(moved) == 0 {
				return
			}
			if moved[0].Key != "ns/decode" {
				t.Errorf("moved %q, want ns/decode", moved[0].Key)
			}
			if typ, reason, msg := moved[0].Event(); [3]string{typ, reason, msg} != tc.event {
				t.Errorf("event %q %q %q, want %q", typ, reason, msg, tc.event)
			}
		})
	}
}

// TestFollowedEvent: a group moved with its tree gets QuorumReached only at its first quorum, its
// failure's reason when it fails.
func TestFollowedEvent(t *testing.T) {
	for _, tc := range []struct {
		name string
		d    attempt.Decision
		want [3]string
	}{
		{name: "first quorum", d: attempt.Decision{AllowWaiting: true, FirstQuorum: true},
			want: [3]string{v1.EventTypeNormal, podgroup.ReasonQuorumReached, "m"}},
		{name: "a later quorum: none", d: attempt.Decision{AllowWaiting: true}},
		{name: "failed", d: attempt.Decision{RejectWaiting: true, Reason: podgroup.ReasonGangTimedOut},
			want: [3]string{v1.EventTypeWarning, podgroup.ReasonGangTimedOut, "m"}},
		{name: "nothing moved: none", d: attempt.Decision{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			typ, reason, msg := Followed{Key: "ns/g", Result: Result{Decision: tc.d, Message: "m"}}.Event()
			if got := [3]string{typ, reason, msg}; got != tc.want {
				t.Errorf("Event() = %q, want %q", got, tc.want)
			}
		})
	}
}

// TestRegistryCredits: each group's credit as its gang's last step counted it, the member's own
// group's as given; untracked groups have none.
func TestRegistryCredits(t *testing.T) {
	r := NewRegistry(nil)
	for name, credit := range map[string]int{"prefill": 5, "decode": 3} {
		g := New("ns", name, "")
		g.Credit = credit
		r.Put(g)
	}
	got := r.Credits(job(t), "ns/prefill", 1)
	if want := map[string]int{"ns/prefill": 1, "ns/decode": 3}; len(got) != len(want) || got["ns/prefill"] != 1 || got["ns/decode"] != 3 {
		t.Errorf("Credits = %v, want %v", got, want)
	}
	if r.Count("ns/decode") != 3 || r.Count("ns/none") != 0 {
		t.Errorf("Count = %d, %d; want 3, 0", r.Count("ns/decode"), r.Count("ns/none"))
	}
}

// TestInfeasible: the failure a group found not to fit brings on its job carries the check's message,
// or says the group does not fit when there is none; none while its job's victims still leave.
func TestInfeasible(t *testing.T) {
	g := New("ns", "g", "")
	if r, ok := g.Infeasible(t0, PreemptNotHelpful); !ok || !r.RejectWaiting || r.Event != attempt.NoNode || !r.Now.Equal(t0) || r.Message != "PodGroup ns/g does not fit the nodes now" {
		t.Errorf("Infeasible() = %+v, %v", r, ok)
	}
	g.Outcome.Message = "short of 2 CPU"
	if r, _ := g.Infeasible(t0, PreemptNotEligible); r.Message != "short of 2 CPU" {
		t.Errorf("Infeasible().Message = %q, want the check's", r.Message)
	}
	if r, ok := g.Infeasible(t0, PreemptWaiting); ok || r.RejectWaiting {
		t.Errorf("Infeasible(waiting for victims) = %+v, %v; want none", r, ok)
	}
}

// TestRegistryFollowKOfN: of a job needing 2 of the groups a, b and c, a's failure rejects c while
// b backs off after failing on its own account (the job cannot be ready without a or b), and leaves
// c waiting while b backs off only for failing with its job: b is not out (a replica that fails at
// every try would otherwise reject b and c in turn, each while the other backs off).
func TestRegistryFollowKOfN(t *testing.T) {
	now := t0.Add(time.Second)
	failed := Result{Decision: attempt.Decision{RejectWaiting: true}, Message: "a does not fit", Now: now, Event: attempt.NoNode}
	x := tree.NewIndex()
	x.Set(tree.Node{Namespace: "ns", Name: "set", Composite: true, Gang: true, Min: 2})
	for _, n := range []string{"a", "b", "c"} {
		x.Set(tree.Node{Namespace: "ns", Name: n, Gang: true, Min: 1, Parent: "set"})
	}
	root, p := x.Resolve("ns", "a")
	if p != nil {
		t.Fatal(p)
	}
	for _, tc := range []struct {
		name    string
		withJob bool
		want    []string
	}{
		{name: "b failed on its own: c is rejected", want: []string{"c0"}},
		{name: "b failed with its job: c waits", withJob: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := NewRegistry(nil)
			a := gathered("a")
			b := New("ns", "b", "uid-b")
			b.Phase, b.BackoffUntil, b.FailedWithJob = attempt.PhaseFailed, now.Add(time.Minute), tc.withJob
			r.Put(a)
			r.Put(b)
			r.Put(gathered("c", "c0"))
			step := func(_ *Gang, s func() Result) Result { return s() }
			moved := r.Follow(a, failed, func() *tree.Branch { return root }, backoff, func(g *Gang) int { return g.Count() }, step)
			if got := names(FollowedPods(moved)); strings.Join(got, ",") != strings.Join(tc.want, ",") {
				t.Errorf("moved members %v, want %v", got, tc.want)
			}
		})
	}
}
