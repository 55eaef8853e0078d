package gang

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/custom-scheduler/custom-scheduler/pkg/coscheduling/attempt"
	"github.com/custom-scheduler/custom-scheduler/pkg/coscheduling/gangfit"
	"github.com/custom-scheduler/custom-scheduler/pkg/coscheduling/internal/gangtest"
	"github.com/custom-scheduler/custom-scheduler/pkg/coscheduling/podgroup"
)

// bound is a member of "g" bound to node.
func bound(name, node, cpu string) *v1.Pod {
	p := gangtest.Member(name, "g", cpu)
	p.Spec.NodeName = node
	return p
}

// reservedOn is a gang whose member name is reserved on node and waits at Permit.
func reservedOn(name, node string) *Gang {
	g := New("ns", "g", "uid")
	p := gangtest.Member(name, "g", "1")
	g.CountReserved(p.UID, node)
	g.AddWaiting(p)
	return g
}

func cpuNodes(cpu string, names ...string) []fwk.NodeInfo {
	var out []fwk.NodeInfo
	for _, n := range names {
		out = append(out, gangtest.Node(n, cpu))
	}
	return out
}

var rackPolicy = gangfit.Policy{Required: gangtest.RackKey, Source: "spec"}

// TestPreFilter is every outcome of a member's PreFilter step: a row per way the member is refused,
// joined, placed on its own or checked, with the nodes it gets, what it asks the plugin to report, and
// how often it lists the group and the claims (at most once each, and never for a refused or joining
// member whose attempt has a placement).
func TestPreFilter(t *testing.T) {
	rackR1 := &gangfit.Placement{Key: gangtest.RackKey, Value: "r1", Level: gangfit.LevelRequired, Nodes: sets.New("r1-0", "r1-1"), Message: "rack r1"}
	cases := []struct {
		name    string
		gang    func() *Gang
		member  *v1.Pod
		members []*v1.Pod
		// want is minMember (default 2).
		want      int
		nodes     []fwk.NodeInfo
		policy    gangfit.Policy
		plannable bool
		others    map[string]*Gang

		stage                           Stage
		reject, infeasible, checked     bool
		infeasibleChanged, domainChosen bool
		offered, planned                bool
		msg                             string
		nodesOut                        []string
		listed, claimed                 int
		check                           func(t *testing.T, g *Gang)
	}{
		{name: "backing off: refused, nothing read", gang: func() *Gang {
			g := New("ns", "g", "uid")
			g.BackoffUntil = t0.Add(time.Second)
			return g
		}, stage: Refuse, reject: true, msg: "backs off until"},
		{name: "a sibling of the last attempt's lead waits for it", gang: func() *Gang {
			g := New("ns", "g", "uid")
			g.SetLead(gangtest.Member("lead", "g", "1"))
			return g
		}, stage: Refuse, reject: true, msg: "places member lead first"},
		{name: "an attempt under way, no domain nor plan: joined, every node", gang: func() *Gang { return withWaiting([]string{"a"}) },
			stage: Join},
		{name: "joined to the attempt's domain", gang: func() *Gang {
			g := withWaiting([]string{"a"})
			g.Placement = rackR1
			return g
		}, policy: rackPolicy, stage: Join, nodesOut: []string{"r1-0", "r1-1"}},
		{name: "joined and offered the attempt's plan", gang: func() *Gang {
			g := withWaiting([]string{"a"})
			g.Placement, g.Plan = rackR1, plan("r1-1", "r1-0")
			return g
		}, policy: rackPolicy, plannable: true, stage: Join, offered: true, nodesOut: []string{"r1-1"}},
		{name: "joined but not plannable: the domain, not the offer", gang: func() *Gang {
			g := withWaiting([]string{"a"})
			g.Placement, g.Plan = rackR1, plan("r1-1")
			return g
		}, policy: rackPolicy, stage: Join, nodesOut: []string{"r1-0", "r1-1"}},
		{name: "an adopted attempt without a domain: pinned where its members are", gang: func() *Gang { return reservedOn("a", "r2-0") },
			members: []*v1.Pod{gangtest.Member("a", "g", "1")}, nodes: gangtest.RackedCluster(), policy: rackPolicy,
			stage: Join, nodesOut: []string{"r2-0", "r2-1", "r2-2", "r2-3"}, listed: 1,
			check: func(t *testing.T, g *Gang) {
				if g.Placement == nil || g.Placement.Value != "r2" {
					t.Errorf("placement %+v, want the adopted attempt pinned to rack r2", g.Placement)
				}
			}},
		{name: "the quorum is bound: an extra member without a policy gets every node", gang: func() *Gang { return withWaiting(nil, "a", "b") },
			members: []*v1.Pod{bound("a", "n1", "1"), bound("b", "n1", "1"), gangtest.Member("c", "g", "1")}, nodes: cpuNodes("4", "n1"),
			stage: Extra, listed: 1},
		{name: "an extra member with a required policy goes to its gang's rack", gang: func() *Gang { return withWaiting(nil, "a", "b") },
			members: []*v1.Pod{bound("a", "r1-0", "1"), bound("b", "r1-0", "1"), gangtest.Member("c", "g", "1")}, nodes: gangtest.RackedCluster(), policy: rackPolicy,
			stage: Extra, nodesOut: []string{"r1-0", "r1-1"}, listed: 1, claimed: 1},
		{name: "the member set says quorum, the store does not: a new attempt is checked", gang: func() *Gang { return withWaiting(nil, "a", "b") },
			members: []*v1.Pod{gangtest.Member("a", "g", "1"), gangtest.Member("b", "g", "1")}, nodes: cpuNodes("4", "n1"),
			stage: Check, checked: true, listed: 1, claimed: 1},
		{name: "the first member, the gang fits: checked, every node", gang: func() *Gang { return New("ns", "g", "uid") },
			members: gangtest.GangOf(2, "1"), nodes: cpuNodes("4", "n1"),
			stage: Check, checked: true, listed: 1, claimed: 1,
			check: func(t *testing.T, g *Gang) {
				if g.Feasibility == nil || !g.Feasibility.Feasible || g.CacheKey.Existing != 2 {
					t.Errorf("the check was not recorded: %+v %+v", g.Feasibility, g.CacheKey)
				}
			}},
		{name: "the first member, the gang does not fit: infeasible, the outcome changes", gang: func() *Gang { return New("ns", "g", "uid") },
			members: gangtest.GangOf(2, "3"), nodes: cpuNodes("4", "n1"),
			stage: Check, reject: true, infeasible: true, checked: true, infeasibleChanged: true, msg: "ns/g", listed: 1, claimed: 1,
			check: func(t *testing.T, g *Gang) {
				if g.Outcome.Reason != podgroup.ReasonGangInfeasible {
					t.Errorf("outcome %q, want GangInfeasible", g.Outcome.Reason)
				}
			}},
		{name: "a gang whose preemption's room is nominated stays Preempting when it does not fit yet", gang: func() *Gang {
			g := New("ns", "g", "uid")
			g.Preempted([]string{"n1"}, "preempting 2 pods")
			return g
		}, members: gangtest.GangOf(2, "3"), nodes: cpuNodes("4", "n1"),
			stage: Check, reject: true, infeasible: true, checked: true, listed: 1, claimed: 1,
			check: func(t *testing.T, g *Gang) {
				if g.Outcome.Reason != podgroup.ReasonPreempting {
					t.Errorf("outcome %q, want Preempting kept", g.Outcome.Reason)
				}
			}},
		{name: "the cache answers infeasible: refused without a check", gang: func() *Gang {
			g := New("ns", "g", "uid")
			g.Checked(gangfit.Result{Message: "no room"}, FeasibilityKey{UID: "uid", Want: 2, Existing: 2, At: t0.Add(-time.Second)}, nil, nil)
			return g
		}, members: gangtest.GangOf(2, "1"), nodes: cpuNodes("4", "n1"),
			stage: Check, reject: true, infeasible: true, msg: "no room", listed: 1},
		{name: "the cache answers feasible: the cached domain, without a check", gang: func() *Gang {
			g := New("ns", "g", "uid")
			g.Checked(gangfit.Result{Feasible: true}, FeasibilityKey{UID: "uid", Want: 2, Existing: 2, At: t0.Add(-time.Second)}, rackR1, nil)
			return g
		}, members: gangtest.GangOf(2, "1"), nodes: gangtest.RackedCluster(), policy: rackPolicy,
			stage: Check, nodesOut: []string{"r1-0", "r1-1"}, listed: 1},
		{name: "a cache made under another minMember (an in-tree edit keeps the generation) is checked again", gang: func() *Gang {
			g := New("ns", "g", "uid")
			g.Checked(gangfit.Result{Message: "needs 3"}, FeasibilityKey{UID: "uid", Want: 3, Existing: 2, At: t0.Add(-time.Second)}, nil, nil)
			return g
		}, members: gangtest.GangOf(2, "1"), nodes: cpuNodes("4", "n1"),
			stage: Check, checked: true, listed: 1, claimed: 1},
		{name: "a stale cache (older than its TTL) is checked again", gang: func() *Gang {
			g := New("ns", "g", "uid")
			g.Checked(gangfit.Result{Message: "no room"}, FeasibilityKey{UID: "uid", Want: 2, Existing: 2, At: t0.Add(-2 * time.Second)}, nil, nil)
			return g
		}, members: gangtest.GangOf(2, "1"), nodes: cpuNodes("4", "n1"),
			stage: Check, checked: true, listed: 1, claimed: 1},
		{name: "a required policy: the tightest rack that holds the gang is chosen", gang: func() *Gang { return New("ns", "g", "uid") },
			members: gangtest.GangOf(2, "4"), nodes: gangtest.RackedCluster(), policy: rackPolicy,
			stage: Check, checked: true, domainChosen: true, nodesOut: []string{"r1-0", "r1-1"}, listed: 1, claimed: 1},
		{name: "a rack another gang gathers in is avoided while another fits", gang: func() *Gang { return New("ns", "g", "uid") },
			others: map[string]*Gang{"ns/other": func() *Gang {
				o := New("ns", "other", "other")
				p := gangtest.Member("o1", "other", "1")
				o.CountReserved(p.UID, "r1-0")
				o.AddWaiting(p)
				o.Placement = rackR1
				o.Phase = attempt.PhaseGathering
				return o
			}()},
			members: gangtest.GangOf(2, "4"), nodes: gangtest.RackedCluster(), policy: rackPolicy,
			stage: Check, checked: true, domainChosen: true, nodesOut: []string{"r3-0", "r3-1", "r3-2"}, listed: 1, claimed: 1},
		{name: "a required policy no rack can hold: infeasible, the message names the policy", gang: func() *Gang { return New("ns", "g", "uid") },
			members: gangtest.GangOf(5, "4"), want: 5, nodes: gangtest.RackedCluster(), policy: rackPolicy,
			stage: Check, reject: true, infeasible: true, checked: true, infeasibleChanged: true, msg: "(topology policy from spec)", listed: 1, claimed: 1},
		{name: "plannable: the check's plan is kept and offers its nodes", gang: func() *Gang { return New("ns", "g", "uid") },
			members: gangtest.GangOf(2, "2"), nodes: cpuNodes("4", "n1", "n2", "n3"), plannable: true,
			stage: Check, checked: true, offered: true, planned: true, nodesOut: []string{"n1"}, listed: 1, claimed: 1},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := tc.gang()
			gangs := map[string]*Gang{g.Key(): g}
			for k, o := range tc.others {
				gangs[k] = o
			}
			member := tc.member
			if member == nil {
				member = gangtest.Member("m0", "g", "1")
			}
			want := tc.want
			if want == 0 {
				want = 2
			}
			listed, claimed := 0, 0
			in := PreFilterIn{
				Now: t0, Logger: klog.Background(), Member: member, Want: want, UID: "uid",
				Policy: tc.policy, Nodes: tc.nodes, Plannable: tc.plannable, CandidateNodes: 1, CacheTTL: 2 * time.Second,
				Members: func() []*v1.Pod { listed++; return tc.members },
				Claimed: func(int32) []*v1.Pod { claimed++; return nil },
				Gangs:   gangs, Fit: &gangfit.Shared{},
			}
			out := g.PreFilter(in)
			if out.Stage != tc.stage {
				t.Errorf("stage %v, want %v", out.Stage, tc.stage)
			}
			got := struct{ Reject, Infeasible, Checked, InfeasibleChanged, DomainChosen, Offered, Planned bool }{
				out.Reject, out.Infeasible, out.Checked, out.InfeasibleChanged, out.DomainChosen, out.Offered, out.Plan != nil}
			wantFlags := struct{ Reject, Infeasible, Checked, InfeasibleChanged, DomainChosen, Offered, Planned bool }{
				tc.reject, tc.infeasible, tc.checked, tc.infeasibleChanged, tc.domainChosen, tc.offered, tc.planned}
			if diff := cmp.Diff(wantFlags, got); diff != "" {
				t.Errorf("what the plugin is asked to do (-want +got):\n%s", diff)
			}
			if tc.msg != "" && !strings.Contains(out.Message, tc.msg) {
				t.Errorf("message %q, want it to say %q", out.Message, tc.msg)
			}
			if !tc.reject && out.Message != "" {
				t.Errorf("message %q for a member that is not refused", out.Message)
			}
			var nodes []string
			if out.Nodes != nil {
				nodes = sets.List(out.Nodes)
			}
			if diff := cmp.Diff(tc.nodesOut, nodes); diff != "" {
				t.Errorf("nodes (-want +got):\n%s", diff)
			}
			if out.DomainChosen && (out.Placement == nil || out.Placement.Message == "") {
				t.Errorf("a chosen domain without its placement: %+v", out.Placement)
			}
			if listed != tc.listed || claimed != tc.claimed {
				t.Errorf("listed the group %d times and the claims %d, want %d and %d", listed, claimed, tc.listed, tc.claimed)
			}
			if tc.check != nil {
				tc.check(t, g)
			}
		})
	}
}

// TestPreFilterRecordsOnce: after the first member's fresh check, the other members of one burst are
// answered from it (the cache), so a burst costs one whole-gang check; each member still lists the
// group once (the cache key counts its members).
func TestPreFilterRecordsOnce(t *testing.T) {
	g := New("ns", "g", "uid")
	members := gangtest.GangOf(3, "1")
	listed, claimsRead := 0, 0
	in := PreFilterIn{Now: t0, Logger: klog.Background(), Want: 3, UID: "uid", Nodes: cpuNodes("4", "n1"), CacheTTL: 2 * time.Second,
		Members: func() []*v1.Pod { listed++; return members },
		// A fresh check reads the claims once; the cache reads none.
		Claimed: func(int32) []*v1.Pod { claimsRead++; return nil },
		Gangs:   map[string]*Gang{g.Key(): g}, Fit: &gangfit.Shared{}}
	for i, m := range members {
		in.Member = m
		in.Now = t0.Add(time.Duration(i) * 100 * time.Millisecond)
		out := g.PreFilter(in)
		if out.Reject {
			t.Fatalf("member %s refused: %s", m.Name, out.Message)
		}
		if want := i == 0; out.Checked != want {
			t.Errorf("member %s: checked afresh %v, want %v", m.Name, out.Checked, want)
		}
	}
	if claimsRead != 1 {
		t.Errorf("%d whole-gang checks for one burst, want 1", claimsRead)
	}
	if listed != len(members) {
		t.Errorf("the group was listed %d times for %d members, want once each", listed, len(members))
	}
}

// TestPreFilterAvoidsRefusedDomains: a gang's check avoids the domains the filters refused it in
// while another domain of the level fits; it takes the least recently refused when every domain with
// room was refused (required level), passes a preferred level whose domains with room were all refused,
// forgets refusals that ended, and never avoids the domain its bound members pin. RackedCluster: racks
// r1 (2 nodes), r2 (4), r3 (3), 4 CPUs each; the gang's two 4-CPU members fit r1 tightest, then r3.
func TestPreFilterAvoidsRefusedDomains(t *testing.T) {
	refused := func(ago time.Duration, racks ...string) func(g *Gang) {
		return func(g *Gang) {
			for _, r := range racks {
				g.Refuse(gangtest.RackKey+"="+r, t0.Add(-ago), "")
			}
		}
	}
	gathering := func(rack string) *Gang {
		o := New("ns", "other-"+rack, types.UID("other-"+rack))
		p := gangtest.Member("o-"+rack, "other-"+rack, "1")
		o.CountReserved(p.UID, rack+"-0")
		o.AddWaiting(p)
		o.Placement = &gangfit.Placement{Key: gangtest.RackKey, Value: rack, Level: gangfit.LevelRequired}
		o.Phase = attempt.PhaseGathering
		return o
	}
	r1, r2, r3 := []string{"r1-0", "r1-1"}, []string{"r2-0", "r2-1", "r2-2", "r2-3"}, []string{"r3-0", "r3-1", "r3-2"}
	preferred := gangfit.Policy{Preferred: []string{gangtest.RackKey, gangtest.BlockKey}, Source: "spec"}
	cases := []struct {
		name    string
		refuse  []func(g *Gang)
		busy    []string
		members []*v1.Pod
		policy  gangfit.Policy

		nodes []string
		// key, level: the placement's; msg: what its message says; left: the refusals kept.
		key, level string
		msg        string
		left       int
	}{
		{name: "no refusal: the tightest rack", policy: rackPolicy,
			nodes: r1, key: gangtest.RackKey, level: gangfit.LevelRequired},
		{name: "the tightest rack refused: the next tightest", refuse: []func(*Gang){refused(time.Second, "r1")}, policy: rackPolicy,
			nodes: r3, key: gangtest.RackKey, level: gangfit.LevelRequired, msg: "avoiding example.com/rack=r1, refused by the filters recently", left: 1},
		{name: "a refusal that ended is forgotten: the tightest rack again", refuse: []func(*Gang){refused(RefusedDomainTTL, "r1")}, policy: rackPolicy,
			nodes: r1, key: gangtest.RackKey, level: gangfit.LevelRequired},
		{name: "every rack refused: the least recently refused, and says so",
			refuse: []func(*Gang){refused(time.Minute, "r1"), refused(2*time.Minute, "r3"), refused(3*time.Minute, "r2")}, policy: rackPolicy,
			nodes: r2, key: gangtest.RackKey, level: gangfit.LevelRequired, left: 3,
			msg: "every example.com/rack domain with room was refused by the filters recently (example.com/rack=r1, example.com/rack=r2, example.com/rack=r3); retrying the least recently refused"},
		{name: "a refused rack goes after a busy one", refuse: []func(*Gang){refused(time.Second, "r1")}, busy: []string{"r2", "r3"}, policy: rackPolicy,
			nodes: r3, key: gangtest.RackKey, level: gangfit.LevelRequired, left: 1, msg: "avoiding example.com/rack=r1"},
		{name: "a rack the bound members pin wins though refused", refuse: []func(*Gang){refused(time.Second, "r1")}, policy: rackPolicy,
			members: []*v1.Pod{bound("m0", "r1-0", "4"), gangtest.Member("m1", "g", "4")},
			nodes:   r1, key: gangtest.RackKey, level: gangfit.LevelRequired, left: 1},
		{name: "preferred: another rack of the level first", refuse: []func(*Gang){refused(time.Second, "r1")}, policy: preferred,
			nodes: r3, key: gangtest.RackKey, level: gangfit.LevelPreferred, left: 1, msg: "(preferred level 1 of 2): avoiding example.com/rack=r1"},
		{name: "preferred: every rack with room refused: the block level, not a refused rack",
			refuse: []func(*Gang){refused(time.Second, "r1", "r2", "r3")}, policy: preferred,
			nodes: r3, key: gangtest.BlockKey, level: gangfit.LevelPreferred, left: 3,
			msg: "placed in example.com/block=b2 (preferred level 2 of 2): example.com/rack=r1, example.com/rack=r2, example.com/rack=r3 refused by the filters recently"},
		{name: "preferred racks only, all refused: anywhere",
			refuse: []func(*Gang){refused(time.Second, "r1", "r2", "r3")}, policy: gangfit.Policy{Preferred: []string{gangtest.RackKey}, Source: "spec"},
			level: gangfit.LevelAnywhere, left: 3, msg: "placed anywhere: example.com/rack=r1, example.com/rack=r2, example.com/rack=r3 refused by the filters recently"},
		{name: "refused domains of another key do not matter", refuse: []func(*Gang){func(g *Gang) { g.Refuse(gangtest.BlockKey+"=b1", t0, "") }}, policy: rackPolicy,
			nodes: r1, key: gangtest.RackKey, level: gangfit.LevelRequired, left: 1},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := New("ns", "g", "uid")
			for _, f := range tc.refuse {
				f(g)
			}
			gangs := map[string]*Gang{g.Key(): g}
			for _, r := range tc.busy {
				o := gathering(r)
				gangs[o.Key()] = o
			}
			members := tc.members
			if members == nil {
				members = gangtest.GangOf(2, "4")
			}
			out := g.PreFilter(PreFilterIn{
				Now: t0, Logger: klog.Background(), Member: members[len(members)-1], Want: 2, UID: "uid",
				Policy: tc.policy, Nodes: gangtest.RackedCluster(), CacheTTL: 2 * time.Second,
				Members: func() []*v1.Pod { return members },
				Claimed: func(int32) []*v1.Pod { return nil },
				Gangs:   gangs, Fit: &gangfit.Shared{},
			})
			if out.Stage != Check || out.Reject || out.Placement == nil {
				t.Fatalf("stage %v, reject %v (%s), placement %+v; want a checked gang with a placement", out.Stage, out.Reject, out.Message, out.Placement)
			}
			var nodes []string
			if out.Nodes != nil {
				nodes = sets.List(out.Nodes)
			}
			if diff := cmp.Diff(tc.nodes, nodes); diff != "" {
				t.Errorf("nodes (-want +got):\n%s", diff)
			}
			if p := out.Placement; p.Key != tc.key || p.Level != tc.level || !strings.Contains(p.Message, tc.msg) {
				t.Errorf("placement %s=%s (%s): %q; want key %s, level %s, a message saying %q", p.Key, p.Value, p.Level, p.Message, tc.key, tc.level, tc.msg)
			}
			if tc.msg == "" && strings.Contains(out.Placement.Message, "refused") {
				t.Errorf("placement message %q speaks of refusals that do not matter", out.Placement.Message)
			}
			if len(g.Refused) != tc.left {
				t.Errorf("refusals kept %v, want %d", g.Refused, tc.left)
			}
		})
	}
}

// TestRefusedDomainNextAttempts: the steps in a row. An attempt placed in the tightest rack fails there
// (the filters refused every node); the next attempt, after the back-off, is placed in another rack;
// once the refusal ends the tightest rack is chosen again; a recreated PodGroup starts without it.
func TestRefusedDomainNextAttempts(t *testing.T) {
	g := New("ns", "g", "uid")
	members := gangtest.GangOf(2, "4")
	check := func(now time.Time) PreFilterOut {
		t.Helper()
		out := g.PreFilter(PreFilterIn{
			Now: now, Logger: klog.Background(), Member: members[0], Want: 2, UID: g.PodGroupUID,
			Policy: rackPolicy, Nodes: gangtest.RackedCluster(), CacheTTL: 2 * time.Second,
			Members: func() []*v1.Pod { return members },
			Claimed: func(int32) []*v1.Pod { return nil },
			Gangs:   map[string]*Gang{g.Key(): g}, Fit: &gangfit.Shared{},
		})
		if out.Stage != Check || out.Reject || out.Placement == nil {
			t.Fatalf("at %v: stage %v, reject %v (%s); want a checked gang with a placement", now, out.Stage, out.Reject, out.Message)
		}
		return out
	}
	rackOf := func(out PreFilterOut) string { return out.Placement.Value }

	if out := check(t0); rackOf(out) != "r1" || !out.DomainChosen {
		t.Fatalf("first attempt placed in %s (chosen %v), want r1", rackOf(out), out.DomainChosen)
	}
	failedAt := t0.Add(time.Second)
	r := g.OnNoNode(members[0], failedAt, 2, 2, backoff, portsRefused())
	if !r.Failed() || !strings.Contains(r.Message, "cannot be placed in example.com/rack=r1 (2 node(s) didn't have free ports") {
		t.Fatalf("the failure in r1 = failed %v: %q", r.Failed(), r.Message)
	}
	if out := g.PreFilter(PreFilterIn{Now: failedAt, Member: members[1], Want: 2}); out.Stage != Refuse {
		t.Fatalf("during the back-off: stage %v, want Refuse", out.Stage)
	}
	next := failedAt.Add(backoff)
	out := check(next)
	if rackOf(out) != "r3" || !out.DomainChosen || !strings.Contains(out.Placement.Message, "avoiding example.com/rack=r1") {
		t.Errorf("after the back-off placed in %s (chosen %v): %q; want r3, avoiding r1", rackOf(out), out.DomainChosen, out.Placement.Message)
	}
	if out := check(failedAt.Add(RefusedDomainTTL - 3*time.Second)); rackOf(out) != "r3" {
		t.Errorf("shortly before the refusal ends placed in %s, want r3", rackOf(out))
	}
	if out := check(failedAt.Add(RefusedDomainTTL)); rackOf(out) != "r1" || g.Refused != nil {
		t.Errorf("once the refusal ended placed in %s, refusals %v; want r1, none", rackOf(out), g.Refused)
	}

	g.Refuse("example.com/rack=r1", next, "")
	g.Recreated("uid2")
	if g.Refused != nil {
		t.Errorf("a recreated PodGroup keeps the refusals %v", g.Refused)
	}
	if out := check(next.Add(time.Minute)); rackOf(out) != "r1" {
		t.Errorf("the recreated PodGroup placed in %s, want r1", rackOf(out))
	}
}
