package gang

import (
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	policy "k8s.io/api/policy/v1"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/custom-scheduler/custom-scheduler/pkg/coscheduling/attempt"
	"github.com/custom-scheduler/custom-scheduler/pkg/coscheduling/gangfit"
	"github.com/custom-scheduler/custom-scheduler/pkg/coscheduling/internal/gangtest"
	"github.com/custom-scheduler/custom-scheduler/pkg/coscheduling/podgroup"
)

// TestPreemptKey: the key a preemption's answer is kept under is made of the gang's priority, the
// claims' version, the epoch, the PodGroup's spec and live pods, and the time.
func TestPreemptKey(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	pg := gangtest.PodGroup("ns", "g", 3, t0)
	pg.UID, pg.Generation = "pg", 2
	for _, tc := range []struct {
		name string
		in   PreemptIn
		want PreemptKey
	}{
		{name: "a gang", in: PreemptIn{PodGroup: pg, Members: gangtest.GangOf(4, "1")},
			want: PreemptKey{Priority: 100, Claims: 5, FeasibilityKey: FeasibilityKey{Epoch: 7, UID: "pg", Generation: 2, Want: 3, Existing: 4, At: t0}}},
		{name: "none of its pods live", in: PreemptIn{PodGroup: pg},
			want: PreemptKey{Priority: 100, Claims: 5, FeasibilityKey: FeasibilityKey{Epoch: 7, UID: "pg", Generation: 2, Want: 3, At: t0}}},
	} {
		if diff := cmp.Diff(tc.want, tc.in.Key(100, 5, 7, t0)); diff != "" {
			t.Errorf("%s: Key (-want,+got):\n%s", tc.name, diff)
		}
	}
}

// TestCachedPreemption: a gang's "not helpful" answer serves the attempt's other members while its key
// holds (same epoch, spec, members and priority, within the TTL); any change, another result, or a
// recreated PodGroup drops it.
func TestCachedPreemption(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	k := PreemptKey{Priority: 100, FeasibilityKey: FeasibilityKey{Epoch: 7, UID: "pg", Generation: 1, Want: 4, Existing: 4, Counted: 0, At: t0}}
	notHelpful := PreemptOut{Result: PreemptNotHelpful, DropNominations: true, Message: "does not fit even if all ..."}
	with := func(f func(*PreemptKey)) PreemptKey { c := k; f(&c); return c }
	cases := []struct {
		name     string
		remember PreemptOut
		ask      PreemptKey
		want     bool
	}{
		{"the same attempt, a moment later", notHelpful, with(func(c *PreemptKey) { c.At = t0.Add(time.Second) }), true},
		{"capacity freed (the epoch moved)", notHelpful, with(func(c *PreemptKey) { c.Epoch++ }), false},
		{"a member more", notHelpful, with(func(c *PreemptKey) { c.Existing++ }), false},
		{"a member reserved", notHelpful, with(func(c *PreemptKey) { c.Counted++ }), false},
		{"minMember edited", notHelpful, with(func(c *PreemptKey) { c.Want--; c.Generation++ }), false},
		{"another priority (a member of another priority joined)", notHelpful, with(func(c *PreemptKey) { c.Priority = 10 }), false},
		{"past the TTL", notHelpful, with(func(c *PreemptKey) { c.At = t0.Add(2 * time.Second) }), false},
		{"a preemption that evicted is not kept", PreemptOut{Result: PreemptVictims}, k, false},
		{"waiting for victims is not kept", PreemptOut{Result: PreemptWaiting}, k, false},
	}
	for _, tc := range cases {
		g := New("ns", "g", "pg")
		g.RememberPreemption(k, tc.remember)
		got, ok := g.CachedPreemption(tc.ask, 2*time.Second)
		if ok != tc.want || (ok && (got.Result != tc.remember.Result || got.Message != tc.remember.Message)) {
			t.Errorf("%s: cached %v (%+v), want %v", tc.name, ok, got, tc.want)
		}
	}
	g := New("ns", "g", "pg")
	g.RememberPreemption(k, notHelpful)
	g.RememberPreemption(k, PreemptOut{Result: PreemptVictims})
	if _, ok := g.CachedPreemption(k, time.Minute); ok {
		t.Error("a later result that is not kept left the earlier one cached")
	}
	g.RememberPreemption(k, notHelpful)
	g.ResetHistory("pg2")
	if _, ok := g.CachedPreemption(k, time.Minute); ok {
		t.Error("a recreated PodGroup kept its predecessor's answer")
	}
}

// hopeless is a cluster where a gang of `members` 4-CPU members at priority 100 cannot fit even with
// every lower-priority pod evicted: `nodes` 4-CPU nodes, each running `perNode` pods, one in four of
// priority 10 (1 CPU, a plain pod) and the rest of priority 1000 (members of 2-pod gangs).
func hopeless(nodes, perNode, members int) (in PreemptIn) {
	infos := make([]fwk.NodeInfo, nodes)
	for i := range nodes {
		name := fmt.Sprintf("n%d", i)
		var pods []*v1.Pod
		for j := range perNode {
			pn := fmt.Sprintf("p%d-%d", i, j)
			if j%4 == 0 {
				pods = append(pods, gangtest.Running(pn, "", name, "100m", 10))
			} else {
				pods = append(pods, gangtest.Running(pn, fmt.Sprintf("hi%d-%d", i, j/2), name, "100m", 1000))
			}
		}
		infos[i] = gangtest.NodeWith(name, "4", pods...)
	}
	ms := make([]*v1.Pod, members)
	for i := range ms {
		ms[i] = preemptor(fmt.Sprintf("m%d", i), "4")
	}
	return PreemptIn{Pod: ms[0], PodGroup: gangtest.PodGroup("ns", "g", int32(members), time.Now()), Members: ms, Nodes: infos,
		Split: func() ([]*v1.Pod, int, []string) { return ms, members, nil },
		Fit:   &gangfit.Shared{}, Logger: klog.Background(),
		Terminating: func([]string, int32) int { return 0 },
		Claims:      func() []*v1.Pod { return nil },
		PDBs:        func() ([]*policy.PodDisruptionBudget, error) { return nil, nil },
		Leaving:     func(*v1.Pod) bool { return false }}
}

// BenchmarkGangPreemptPostFilter is the preemption part of PostFilter for every member of a gang that
// cannot fit even with every lower-priority pod evicted (the "hopeless high-priority gang"): one op
// is one attempt, i.e. all N members' PostFilters. uncached: each member searches (the code before
// #48); cached: the first member searches and the others reuse its answer (CachedPreemption).
// searches/attempt is exact; ns/op is the machine's (do not compare runs on a shared machine).
func BenchmarkGangPreemptPostFilter(b *testing.B) {
	const nodes, perNode, members = 500, 20, 16
	in := hopeless(nodes, perNode, members)
	if out := Preempt(in); out.Result != PreemptNotHelpful {
		b.Fatalf("the gang is not hopeless: %s %s", out.Result, out.Message)
	}
	k := PreemptKey{Priority: 100, FeasibilityKey: FeasibilityKey{Epoch: 1, UID: "pg", Want: members, Existing: members, At: time.Now()}}
	for _, cached := range []bool{false, true} {
		name := "uncached"
		if cached {
			name = "cached"
		}
		b.Run(fmt.Sprintf("%s/members=%d/nodes=%d/pods=%d", name, members, nodes, nodes*perNode), func(b *testing.B) {
			searches := 0
			b.ReportAllocs()
			for b.Loop() {
				g := New("ns", "g", "pg")
				k.Epoch++ // a new attempt (capacity freed somewhere)
				for _, m := range in.Members {
					in.Pod = m
					if cached {
						if _, ok := g.CachedPreemption(k, time.Minute); ok {
							continue
						}
					}
					searches++
					g.RememberPreemption(k, Preempt(in))
				}
			}
			b.ReportMetric(float64(searches)/float64(b.N), "searches/attempt")
		})
	}
}

// TestSparedByDelete: a hopeless gang's members stay put for the delete of a plain pod below its
// priority, and only for that, while its answer is still its own.
func TestSparedByDelete(t *testing.T) {
	k := PreemptKey{Priority: 100, Claims: 3, FeasibilityKey: FeasibilityKey{Epoch: 7, Counted: 0}}
	hopelessOut := PreemptOut{Result: PreemptNotHelpful, Hopeless: true}
	low, high := gangtest.Running("low", "", "n", "1", 10), gangtest.Running("high", "", "n", "1", 100)
	lowMember := gangtest.Running("v0", "v", "n", "1", 10)
	cases := []struct {
		name    string
		out     PreemptOut
		deleted *v1.Pod
		claims  uint64
		change  func(g *Gang)
		want    bool
	}{
		{"a plain lower-priority pod", hopelessOut, low, 3, nil, true},
		{"a plain pod of the gang's priority", hopelessOut, high, 3, nil, false},
		{"a lower-priority gang member (its gang may outrank the preemptor)", hopelessOut, lowMember, 3, nil, false},
		{"a claim moved since", hopelessOut, low, 4, nil, false},
		{"not helpful only because it fits without evicting", PreemptOut{Result: PreemptNotHelpful}, low, 3, nil, false},
		{"a member reserved since", hopelessOut, low, 3, func(g *Gang) { g.CountReserved("m0", "n") }, false},
		{"a check found room since", hopelessOut, low, 3, func(g *Gang) { g.Feasibility = &gangfit.Result{Feasible: true} }, false},
		{"no answer", PreemptOut{}, low, 3, nil, false},
	}
	for _, tc := range cases {
		g := New("ns", "g", "pg")
		if tc.out.Result != "" {
			g.RememberPreemption(k, tc.out)
		}
		if tc.change != nil {
			tc.change(g)
		}
		if got := g.SparedByDelete(tc.deleted, tc.claims); got != tc.want {
			t.Errorf("%s: SparedByDelete = %v, want %v", tc.name, got, tc.want)
		}
	}
}

// TestRegistrySparedByDelete: a gang not tracked, or that never preempted, is spared nothing (its
// claims' version is not even asked); a tracked one answers at its last preemption's priority.
func TestRegistrySparedByDelete(t *testing.T) {
	k := PreemptKey{Priority: 100, Claims: 3}
	low := gangtest.Running("low", "", "n", "1", 10)
	r := NewRegistry(nil)
	hopeless := New("ns", "hopeless", "pg")
	hopeless.RememberPreemption(k, PreemptOut{Result: PreemptNotHelpful, Hopeless: true})
	r.Put(hopeless)
	r.Put(New("ns", "fresh", "pg2"))
	for _, tc := range []struct {
		key      string
		claims   uint64
		want     bool
		wantRead bool
	}{
		{"ns/hopeless", 3, true, true},
		{"ns/hopeless", 4, false, true},
		{"ns/fresh", 3, false, false},
		{"ns/untracked", 3, false, false},
	} {
		read := false
		got := r.SparedByDelete(tc.key, low, func(prio int32) uint64 {
			read = true
			if prio != 100 {
				t.Errorf("%s: claims' version asked at %d, want the preemption's 100", tc.key, prio)
			}
			return tc.claims
		})
		if got != tc.want || read != tc.wantRead {
			t.Errorf("%s (claims %d): SparedByDelete = %v (version read %v), want %v (%v)", tc.key, tc.claims, got, read, tc.want, tc.wantRead)
		}
	}
}

// TestPreemptionUnderWay: while a preemption's API calls are made outside the cycle, every member is
// held back (Refuse), whatever else holds; AssignedNodes are the plan's nodes, once each, sorted.
func TestPreemptionUnderWay(t *testing.T) {
	g := New("ns", "g", "pg")
	g.StartPreempting()
	g.StartPreempting()
	st, msg := g.Stage(StageIn{Now: time.Now(), Member: "m0", Want: 2, Confirmed: func() int { return 0 }})
	if st != Refuse || msg != "PodGroup ns/g is preempting: its evictions and nominations are under way" {
		t.Errorf("Stage = %v %q, want Refuse while the preemption is under way", st, msg)
	}
	g.DonePreempting()
	if out, _ := g.Stage(StageIn{Now: time.Now(), Member: "m0", Want: 2, Confirmed: func() int { return 0 }}); out != Refuse {
		t.Errorf("one of two preemptions done: stage %v, want the members still held back", out)
	}
	g.DonePreempting()
	if st, _ := g.Stage(StageIn{Now: time.Now(), Member: "m0", Want: 2, Confirmed: func() int { return 0 }}); st != Check {
		t.Errorf("Stage = %v once it is done, want Check", st)
	}
	m := gangtest.Member("m", "g", "1")
	got := AssignedNodes([]gangfit.Nomination{{Pod: m, Node: "b"}, {Pod: m, Node: "a"}, {Pod: m, Node: "b"}})
	if fmt.Sprint(got) != "[a b]" {
		t.Errorf("AssignedNodes = %v, want [a b]", got)
	}
}

// TestBindFailuresAfterQuorum (#48, 1b, refuted): a member whose bind fails again and again after its
// gang's quorum is retried each time (RetryMember): each retry's Reserve starts an attempt (the member
// set is below minMember without it) whose Permit reaches the quorum at once, so its Unreserve always
// finds the quorum and never falls to GangRejected. The third failure is like the first.
func TestBindFailuresAfterQuorum(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	g := New("ns", "g", "pg")
	g.CountBound("a")
	g.CountBound("b")
	c := gangtest.Member("c", "g", "1")
	for failure := 1; failure <= 3; failure++ {
		now = now.Add(time.Second)
		if r, _ := g.OnReserve(c.UID, "", "n", now, 3, time.Minute, func() int { return 3 }, 10*time.Second); r.Verdict == attempt.VerdictRefuse {
			t.Fatalf("failure %d: Reserve refused: %s", failure, r.Message)
		}
		if r := g.OnPermit(c, now, 3, func() int { return 3 }, 10*time.Second); !r.AllowWaiting {
			t.Fatalf("failure %d: Permit did not pass the member at the quorum: %+v", failure, r.Decision)
		}
		r := g.OnUnreserve(c, now, 10*time.Second)
		if r.Failed() || !r.RetryMember {
			t.Fatalf("bind failure %d: %+v, want the member retried and the attempt kept", failure, r.Decision)
		}
		if g.Outcome.Reason == podgroup.ReasonGangRejected || g.BackingOff(now) {
			t.Fatalf("bind failure %d: outcome %q, backing off %v", failure, g.Outcome.Reason, g.BackingOff(now))
		}
	}
}
