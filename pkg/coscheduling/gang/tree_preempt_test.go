package gang

import (
	"fmt"
	"maps"
	"reflect"
	"slices"
	"testing"

	v1 "k8s.io/api/core/v1"
	policy "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/utils/ptr"

	"github.com/custom-scheduler/custom-scheduler/pkg/coscheduling/claims"
	"github.com/custom-scheduler/custom-scheduler/pkg/coscheduling/gangfit"
	"github.com/custom-scheduler/custom-scheduler/pkg/coscheduling/internal/gangtest"
	"github.com/custom-scheduler/custom-scheduler/pkg/coscheduling/tree"
)

// TestJobPreemptionOwnNominations: decode's member d0 is nominated to node b (its own earlier
// preemption; its victim is gone). The job's claims leave its own groups' nominations out
// (claims.Against with the job's keys, as PreFilter's do), so the job (3 nodes) is short by one node:
// one victim. Counted as claims too (preemptForGang did before), d0's room on b was taken and d0
// placed again: two victims.
func TestJobPreemptionOwnNominations(t *testing.T) {
	low := func(name, node string) *v1.Pod { return gangtest.Running(name, "", node, "4", 10) }
	member := func(name, group string) *v1.Pod {
		p := gangtest.Member(name, group, "4")
		p.Spec.Priority = ptr.To[int32](100)
		return p
	}
	p0, p1, d0 := member("p0", "prefill"), member("p1", "prefill"), member("d0", "decode")
	nominated := d0.DeepCopy()
	nominated.Status.NominatedNodeName = "b"
	var c claims.Claims
	if !c.Set(nominated) {
		t.Fatal("claim not recorded")
	}
	nodes := []fwk.NodeInfo{gangtest.Node("a", "4"), gangtest.Node("b", "4"),
		gangtest.NodeWith("c", "4", low("x", "c")), gangtest.NodeWith("d", "4", low("y", "d"))}
	for _, tc := range []struct {
		name   string
		claims []*v1.Pod
	}{
		{"the job's own nominations left out", c.Against(100, "ns/prefill", "ns/decode")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			job := JobPreemption{Job: "ns/serve", Unit: "ns/serve", Members: []*v1.Pod{p0, p1, nominated}, Nominated: []string{"b"},
				Groups: []gangfit.Group{{Key: "ns/prefill", Candidates: []*v1.Pod{p0, p1}, Need: 2}, {Key: "ns/decode", Candidates: []*v1.Pod{nominated}, Need: 1}}}
			in := PreemptIn{Pod: p0, PodGroup: gangtest.PodGroup("ns", "prefill", 2, t0), Members: job.Members, Nodes: nodes, Job: &job,
				Fit: &gangfit.Shared{}, Logger: klog.Background(),
				Terminating: func([]string, int32) int { return 0 },
				Claims:      func() []*v1.Pod { return tc.claims },
				PDBs:        func() ([]*policy.PodDisruptionBudget, error) { return nil, nil }}
			out := Preempt(in)
			if out.Result != PreemptVictims || len(out.Plan.Victims) != 1 {
				var names []string
				for _, v := range out.Plan.Victims {
					names = append(names, v.Name)
				}
				t.Errorf("result %s %q, victims %v; want exactly one victim (the job lacks one node)", out.Result, out.Message, names)
			}
		})
	}
}

// TestJobForPreemptionUnderBasicRoot: a basic composite "fleet" above two independent jobs (gang
// composites serve and other). The job decode preempts for is serve's tree, its unit: other's members
// do not join the preemptor (their priority would become its), nor are its nominations waited on.
func TestJobForPreemptionUnderBasicRoot(t *testing.T) {
	x := tree.NewIndex()
	x.Set(tree.Node{Namespace: "ns", Name: "fleet", Composite: true, Min: 1})
	x.Set(tree.Node{Namespace: "ns", Name: "serve", Composite: true, Gang: true, Min: 2, Parent: "fleet"})
	x.Set(tree.Node{Namespace: "ns", Name: "decode", Gang: true, Min: 4, Parent: "serve"})
	x.Set(tree.Node{Namespace: "ns", Name: "prefill", Gang: true, Min: 2, Parent: "serve"})
	x.Set(tree.Node{Namespace: "ns", Name: "other", Composite: true, Gang: true, Min: 1, Parent: "fleet"})
	x.Set(tree.Node{Namespace: "ns", Name: "o1", Gang: true, Min: 1, Parent: "other"})
	root, _ := x.Resolve("ns", "decode")
	o1 := role("o1", 1, "1")
	o1[0].Spec.Priority = ptr.To[int32](1)
	o1[0].Status.NominatedNodeName = "elsewhere"
	pods := map[string][]*v1.Pod{"decode": role("decode", 4, "2"), "prefill": role("prefill", 2, "3"), "o1": o1}
	for _, ps := range pods {
		for _, p := range ps {
			if p.Spec.Priority == nil {
				p.Spec.Priority = ptr.To[int32](100)
			}
		}
	}
	g := New("ns", "decode", "uid")
	j, ok := g.JobForPreemption(treeIn(g, pods["decode"][0], 4, nil, map[string]*Gang{g.Key(): g}, root, pods), root)
	if !ok {
		t.Fatal("no job")
	}
	prio, _ := Priority(pods["decode"][0], j.Members)
	if len(j.Members) != 6 || len(j.Nominated) != 0 || prio != 100 {
		t.Errorf("job members %d (want 6), nominated %v (want none), priority %d (want 100): another job under the same basic root is read as this one's", len(j.Members), j.Nominated, prio)
	}
}

// TestPreFilterTreePreferredFallsBack: the composite prefers one block; decode's own policy requires
// one rack. Block b2 (the tightest that holds the job's 14 CPU) has four racks of one node: decode
// (4x2 CPU) fits no rack there. Block b1 has two racks of three nodes: the job fits, decode in one
// rack. A preferred key never refuses a job that fits (it was refused, "in block=b2, its job's
// domain", and its preemption found nothing to evict: pending for ever).
func TestPreFilterTreePreferredFallsBack(t *testing.T) {
	x := tree.NewIndex()
	x.Set(tree.Node{Namespace: "ns", Name: "serve", Composite: true, Gang: true, Min: 2, Preferred: []string{gangtest.BlockKey}})
	x.Set(tree.Node{Namespace: "ns", Name: "decode", Gang: true, Min: 4, Parent: "serve"})
	x.Set(tree.Node{Namespace: "ns", Name: "prefill", Gang: true, Min: 2, Parent: "serve"})
	root, _ := x.Resolve("ns", "decode")
	var nodes []fwk.NodeInfo
	for i, r := range []string{"r2a", "r2b", "r2c", "r2d"} {
		nodes = append(nodes, gangtest.RackedNode(fmt.Sprint("b2-", i), "z", "b2", r))
	}
	for i := range 6 {
		nodes = append(nodes, gangtest.RackedNode(fmt.Sprint("b1-", i), "z", "b1", fmt.Sprint("r1", i/3)))
	}
	g := New("ns", "decode", "uid")
	pods := map[string][]*v1.Pod{"decode": role("decode", 4, "2"), "prefill": role("prefill", 2, "3")}
	in := treeIn(g, pods["decode"][0], 4, nodes, map[string]*Gang{g.Key(): g}, root, pods)
	in.Policy = gangfit.Policy{Required: gangtest.RackKey, Source: "spec"}
	out := g.PreFilter(in)
	if out.Reject {
		t.Errorf("refused (tree %v): %s; want placed (block b1 holds the job, decode in one rack)", out.Tree, out.Message)
	}
}

// TestJobPlacement: where a job's preemption places its groups' missing members. A job in block b1
// (pinned), its replica in rack r1 (pinned) and, below it, a composite of the leader alone that
// requires one zone (a key the test's nodes give r1's first node only). Without inner composites, the
// job's domain as before; with them, the innermost holding the groups to place, on the nodes of the
// pinned domains above it; refused when it does not hold them all.
func TestJobPlacement(t *testing.T) {
	nodes := []fwk.NodeInfo{gangtest.RackedNode("n0", "z1", "b1", "r1"), gangtest.RackedNode("n1", "", "b1", "r1"),
		gangtest.RackedNode("n2", "", "b1", "r2"), gangtest.RackedNode("n3", "", "b2", "r1")}
	leader, worker := gangfit.Group{Key: "ns/leader", Need: 1}, gangfit.Group{Key: "ns/worker", Need: 2}
	done := gangfit.Group{Key: "ns/worker", Need: 0}
	replica := &TreeDomain{Composite: "ns/replica", Key: gangtest.RackKey, Value: "r1", Leaves: []string{"ns/leader", "ns/worker"}}
	lead := &TreeDomain{Composite: "ns/lead", Key: gangtest.ZoneKey, Leaves: []string{"ns/leader"}}
	outer := func(inner ...*TreeDomain) *TreeDomain {
		return &TreeDomain{Composite: "ns/job", Key: gangtest.BlockKey, Value: "b1", Inner: inner, Leaves: []string{"ns/leader", "ns/worker", "ns/other"}}
	}
	src := func(c string) string { return "composite " + c }
	for _, tc := range []struct {
		name       string
		d          *TreeDomain
		groups     []gangfit.Group
		wantPol    gangfit.Policy
		wantPinned map[string]string
		wantWithin []string
		wantErr    string
	}{
		{name: "no domain: anywhere", groups: []gangfit.Group{leader, worker}},
		{name: "no inner composite: the job's domain, pinned, on every node (as before)", d: outer(), groups: []gangfit.Group{leader, worker},
			wantPol: gangfit.Policy{Required: gangtest.BlockKey, Source: src("ns/job")}, wantPinned: map[string]string{gangtest.BlockKey: "b1"}},
		{name: "both roles under the replica: its rack, on b1's nodes (n3 is in rack r1 too, in b2)", d: outer(replica), groups: []gangfit.Group{leader, worker},
			wantPol: gangfit.Policy{Required: gangtest.RackKey, Source: src("ns/replica")}, wantPinned: map[string]string{gangtest.RackKey: "r1"}, wantWithin: []string{"n0", "n1", "n2"}},
		{name: "the leader alone to place, under the leader's composite: one zone, on the nodes of b1 and r1", d: outer(replica, lead), groups: []gangfit.Group{leader, done},
			wantPol: gangfit.Policy{Required: gangtest.ZoneKey, Source: src("ns/lead")}, wantWithin: []string{"n0", "n1"}},
		{name: "both roles, the leader's composite holding one: refused", d: outer(replica, lead), groups: []gangfit.Group{leader, worker},
			wantErr: "its groups to place are not all under one composite with a required topology of its own (ns/lead, under ns/job, requires one " + gangtest.ZoneKey + " domain for ns/leader; ns/worker are outside it): one search would not keep each composite's groups in one domain, so the job does not preempt as one; nothing was evicted"},
		{name: "a group outside the replica: refused", d: outer(replica), groups: []gangfit.Group{leader, {Key: "ns/other", Need: 1}},
			wantErr: "its groups to place are not all under one composite with a required topology of its own (ns/replica, under ns/job, requires one " + gangtest.RackKey + " domain for ns/leader; ns/other are outside it): one search would not keep each composite's groups in one domain, so the job does not preempt as one; nothing was evicted"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pol, pinned, within, err := JobPlacement(tc.d, tc.groups, nodes)
			gotErr := ""
			if err != nil {
				gotErr = err.Error()
			}
			if gotErr != tc.wantErr {
				t.Errorf("error %q, want %q", gotErr, tc.wantErr)
			}
			if !reflect.DeepEqual(pol, tc.wantPol) || !maps.Equal(pinned, tc.wantPinned) {
				t.Errorf("policy %+v pinned %v, want %+v %v", pol, pinned, tc.wantPol, tc.wantPinned)
			}
			var got []string
			if within != nil {
				got = sets.List(within)
			}
			if !slices.Equal(got, tc.wantWithin) {
				t.Errorf("within %v, want %v", got, tc.wantWithin)
			}
		})
	}
}
