package gang

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/custom-scheduler/custom-scheduler/pkg/coscheduling/gangfit"
	"github.com/custom-scheduler/custom-scheduler/pkg/coscheduling/internal/gangtest"
	"github.com/custom-scheduler/custom-scheduler/pkg/coscheduling/tree"
)

// role is n members of PodGroup group ("<group>-<i>"), each requesting cpu.
func role(group string, n int, cpu string) []*v1.Pod {
	pods := make([]*v1.Pod, n)
	for i := range pods {
		pods[i] = gangtest.Member(fmt.Sprintf("%s-%d", group, i), group, cpu)
	}
	return pods
}

// treeIn is the PreFilterIn of member (a member of g, of its job root) wanting want members on
// nodes; pods are each group's live pods by name.
func treeIn(g *Gang, member *v1.Pod, want int, nodes []fwk.NodeInfo, gangs map[string]*Gang, root *tree.Branch, pods map[string][]*v1.Pod) PreFilterIn {
	return PreFilterIn{Now: t0, Logger: klog.Background(), Member: member, Want: want, UID: "uid", Nodes: nodes, CacheTTL: 2 * time.Second,
		Members: func() []*v1.Pod { return pods[g.Name] }, Claimed: func(int32) []*v1.Pod { return nil },
		Gangs: gangs, Fit: &gangfit.Shared{},
		Tree:         func() *tree.Branch { return root },
		GroupMembers: func(key string) []*v1.Pod { return pods[strings.TrimPrefix(key, "ns/")] }}
}

// gangsWith are g's state and those others makes (nil: none), by key.
func gangsWith(g *Gang, others func() map[string]*Gang) map[string]*Gang {
	gangs := map[string]*Gang{g.Key(): g}
	if others != nil {
		for k, o := range others() {
			gangs[k] = o
		}
	}
	return gangs
}

// wantPlaced fails t unless out allows exactly the nodes allowed or, allowed nil, says msg.
func wantPlaced(t *testing.T, out PreFilterOut, allowed []string, msg string) {
	t.Helper()
	if allowed != nil {
		if got := sets.List(out.Nodes); !slices.Equal(got, allowed) {
			t.Errorf("nodes %v (%+v); want %v", got, out.Placement, allowed)
		}
	} else if !strings.Contains(out.Message, msg) {
		t.Errorf("message %q, want it to say %q", out.Message, msg)
	}
}

// threeRacks are racks r1, r2 and r3 of two 4-CPU nodes each in one block: r1's nodes running
// victims of victimCPU while victims (a preemption's, still leaving), r2 free, r3's nodes running
// pods of otherCPU.
func threeRacks(victims bool, victimCPU, otherCPU [2]string) []fwk.NodeInfo {
	running := func(name, node, cpu string) []*v1.Pod { return []*v1.Pod{gangtest.Running(name, "", node, cpu, 0)} }
	var r10, r11 []*v1.Pod
	if victims {
		r10, r11 = running("victim-0", "r1-0", victimCPU[0]), running("victim-1", "r1-1", victimCPU[1])
	}
	return []fwk.NodeInfo{gangtest.RackedNode("r1-0", "z", "b", "r1", r10...), gangtest.RackedNode("r1-1", "z", "b", "r1", r11...),
		gangtest.RackedNode("r2-0", "z", "b", "r2"), gangtest.RackedNode("r2-1", "z", "b", "r2"),
		gangtest.RackedNode("r3-0", "z", "b", "r3", running("other-0", "r3-0", otherCPU[0])...),
		gangtest.RackedNode("r3-1", "z", "b", "r3", running("other-1", "r3-1", otherCPU[1])...)}
}

// TestPreFilterTree: the first member of a group in a job checks the groups the job needs with it
// (the whole-tree check): a job whose groups fit alone but not together is refused before anything
// is held, and that refusal asks for no preemption (Tree); the next member of the burst gets the
// same answer from the cache.
func TestPreFilterTree(t *testing.T) {
	job := func(nodes ...tree.Node) *tree.Branch {
		x := tree.NewIndex()
		for _, n := range nodes {
			x.Set(n)
		}
		root, _ := x.Resolve("ns", "decode")
		return root
	}
	composite := func(name string, k int) tree.Node {
		return tree.Node{Namespace: "ns", Name: name, Composite: true, Gang: true, Min: k}
	}
	leaf := func(name string, min int) tree.Node {
		return tree.Node{Namespace: "ns", Name: name, Gang: true, Min: min, Parent: "serve"}
	}
	disaggregated := job(composite("serve", 2), leaf("decode", 4), leaf("prefill", 2))
	replicas := job(composite("serve", 2), leaf("decode", 4), leaf("r1", 2), leaf("r2", 2))
	for _, tc := range []struct {
		name    string
		root    *tree.Branch
		pods    map[string][]*v1.Pod
		others  func() map[string]*Gang
		refused bool
		msg     string
	}{
		{name: "each role fits alone, not together: refused, nothing preempted", root: disaggregated,
			pods:    map[string][]*v1.Pod{"decode": role("decode", 4, "2"), "prefill": role("prefill", 2, "3")},
			refused: true, msg: "PodGroup ns/decode fits, but not together with the groups its job ns/serve needs with it"},
		{name: "the other role is whole already: its own check only", root: disaggregated,
			pods: map[string][]*v1.Pod{"decode": role("decode", 4, "2"), "prefill": role("prefill", 2, "3")},
			others: func() map[string]*Gang {
				g := New("ns", "prefill", "p")
				for _, p := range role("prefill", 2, "3") {
					g.CountBound(p.UID)
				}
				return map[string]*Gang{g.Key(): g}
			}},
		{name: "a choice among replicas not alike: refused when no way fits, with the first's groups", root: replicas,
			pods:    map[string][]*v1.Pod{"decode": role("decode", 4, "2"), "r1": role("r1", 2, "3"), "r2": role("r2", 2, "1")},
			refused: true, msg: "ns/r1: 2"},
		{name: "a choice among alike replicas: checked with the one picked", root: replicas,
			pods:    map[string][]*v1.Pod{"decode": role("decode", 4, "2"), "r1": role("r1", 2, "3"), "r2": role("r2", 2, "3")},
			refused: true, msg: "ns/r1: 2"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := New("ns", "decode", "uid")
			gangs := map[string]*Gang{g.Key(): g}
			if tc.others != nil {
				for k, o := range tc.others() {
					gangs[k] = o
				}
			}
			in := treeIn(g, nil, 4, cpuNodes("4", "a", "b"), gangs, tc.root, tc.pods)
			for i, m := range tc.pods["decode"][:2] {
				in.Member = m
				out := g.PreFilter(in)
				if out.Reject != tc.refused || out.Infeasible != tc.refused || out.Tree != tc.refused {
					t.Fatalf("member %d: reject %v, infeasible %v, tree %v (%s); want all %v", i, out.Reject, out.Infeasible, out.Tree, out.Message, tc.refused)
				}
				if !strings.Contains(out.Message, tc.msg) {
					t.Errorf("member %d: message %q, want it to say %q", i, out.Message, tc.msg)
				}
				if checked := i == 0; out.Checked != checked {
					t.Errorf("member %d: checked %v, want %v (the second is answered from the cache)", i, out.Checked, checked)
				}
			}
		})
	}
}

// TestPreFilterTreeDomain: a job whose composite requires one block: the first group's check chooses
// the first block where the job's groups fit together, or the block its placed members pin, and the
// member is narrowed to it; a job no block fits is refused.
func TestPreFilterTreeDomain(t *testing.T) {
	x := tree.NewIndex()
	x.Set(tree.Node{Namespace: "ns", Name: "serve", Composite: true, Gang: true, Min: 2, Domain: gangtest.BlockKey})
	x.Set(tree.Node{Namespace: "ns", Name: "decode", Gang: true, Min: 4, Parent: "serve"})
	x.Set(tree.Node{Namespace: "ns", Name: "prefill", Gang: true, Min: 2, Parent: "serve"})
	root, _ := x.Resolve("ns", "decode")
	// b1 fits decode alone (8 CPU), b2 the whole job (16 CPU), b3 only a little.
	nodes := []fwk.NodeInfo{gangtest.RackedNode("b1-0", "z", "b1", "r1"), gangtest.RackedNode("b1-1", "z", "b1", "r1"),
		gangtest.RackedNode("b3-0", "z", "b3", "r3")}
	for i := range 4 {
		nodes = append(nodes, gangtest.RackedNode(fmt.Sprint("b2-", i), "z", "b2", "r2"))
	}
	b2 := []string{"b2-0", "b2-1", "b2-2", "b2-3"}
	// b4 holds the job too, as loosely as b2 (b2 first by name).
	withB4, b4 := slices.Clone(nodes), []string{"b4-0", "b4-1", "b4-2", "b4-3"}
	for _, n := range b4 {
		withB4 = append(withB4, gangtest.RackedNode(n, "z", "b4", "r4"))
	}
	reservedOnB3 := func() map[string]*Gang {
		g := New("ns", "prefill", "p")
		g.CountReserved("prefill-0", "b3-0")
		return map[string]*Gang{g.Key(): g}
	}
	for _, tc := range []struct {
		name    string
		nodes   []fwk.NodeInfo
		prefill []*v1.Pod
		others  func() map[string]*Gang
		allowed []string
		msg     string
	}{
		{name: "chosen: the first block where the groups fit together", nodes: nodes, prefill: role("prefill", 2, "3"), allowed: b2,
			msg: "placed in example.com/block=b2 with the other groups of its job ns/serve"},
		{name: "pinned: the block of a member reserved, where the job does not fit", nodes: nodes, prefill: role("prefill", 2, "3"), others: reservedOnB3,
			msg: "in example.com/block=b3, its job's domain: PodGroup ns/decode needs 4 more members"},
		{name: "pinned: the block of a member reserved, where the job fits", nodes: nodes, prefill: role("prefill", 2, "3"), allowed: b2,
			others: func() map[string]*Gang {
				g := New("ns", "prefill", "p")
				g.CountReserved("prefill-0", "b2-3")
				return map[string]*Gang{g.Key(): g}
			}, msg: "placed in example.com/block=b2 with the other groups of its job ns/serve"},
		{name: "chosen away from a block the filters refused another group of the job in", nodes: withB4, prefill: role("prefill", 2, "3"), allowed: b4,
			others: func() map[string]*Gang {
				g := New("ns", "prefill", "p")
				g.Refuse(gangtest.BlockKey+"=b2", t0, "2 node(s) didn't have free ports")
				return map[string]*Gang{g.Key(): g}
			}, msg: "placed in example.com/block=b4 with the other groups of its job ns/serve"},
		// A job that preempted nominated its members in b4: its groups go there, though b2 comes first.
		{name: "chosen: the block the job's members are nominated in", nodes: withB4, allowed: b4,
			prefill: func() []*v1.Pod {
				pods := role("prefill", 2, "3")
				for i, p := range pods {
					p.Status.NominatedNodeName = b4[i]
				}
				return pods
			}(), msg: "placed in example.com/block=b4 with the other groups of its job ns/serve"},
		{name: "no block fits the job: refused", nodes: nodes[:3], prefill: role("prefill", 2, "3"),
			msg: "no domain of example.com/block fits the groups its job ns/serve needs placed in one"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := New("ns", "decode", "uid")
			gangs := map[string]*Gang{g.Key(): g}
			if tc.others != nil {
				for k, o := range tc.others() {
					gangs[k] = o
				}
			}
			pods := map[string][]*v1.Pod{"decode": role("decode", 4, "2"), "prefill": tc.prefill}
			out := g.PreFilter(treeIn(g, pods["decode"][0], 4, tc.nodes, gangs, root, pods))
			if refused := tc.allowed == nil; out.Reject != refused || out.Tree != refused {
				t.Fatalf("reject %v, tree %v (%s); want %v", out.Reject, out.Tree, out.Message, refused)
			}
			if tc.allowed != nil {
				if got := sets.List(out.Nodes); !slices.Equal(got, tc.allowed) || !out.DomainChosen || !strings.Contains(out.Placement.Message, tc.msg) {
					t.Errorf("nodes %v, domain chosen %v (%+v); want %v and %q", got, out.DomainChosen, out.Placement, tc.allowed, tc.msg)
				}
			} else if !strings.Contains(out.Message, tc.msg) {
				t.Errorf("message %q, want it to say %q", out.Message, tc.msg)
			}
			// Short in the job's domain (pinned by a member reserved there): the job's next choices
			// avoid it (see Done.Short).
			if short := strings.Contains(tc.msg, "its job's domain"); short != (g.RefusedDomains(t0)[gangtest.BlockKey+"=b3"] != time.Time{}) {
				t.Errorf("refused domains %v; want b3 refused: %v", g.RefusedDomains(t0), short)
			}
		})
	}
}

// TestPreFilterTreeExtraAndPlan: a member past its group's quorum stays in its job's domain; a job's
// first group is planned with the groups it needs, so its member is offered only its own places.
func TestPreFilterTreeExtraAndPlan(t *testing.T) {
	x := tree.NewIndex()
	x.Set(tree.Node{Namespace: "ns", Name: "serve", Composite: true, Gang: true, Min: 2, Domain: gangtest.BlockKey})
	x.Set(tree.Node{Namespace: "ns", Name: "decode", Gang: true, Min: 2, Parent: "serve"})
	x.Set(tree.Node{Namespace: "ns", Name: "prefill", Gang: true, Min: 2, Parent: "serve"})
	inBlock, _ := x.Resolve("ns", "decode")
	nodes := []fwk.NodeInfo{gangtest.RackedNode("b1-0", "z", "b1", "r1"), gangtest.RackedNode("b2-0", "z", "b2", "r2"), gangtest.RackedNode("b2-1", "z", "b2", "r2")}

	t.Run("a member past the quorum stays in its job's domain", func(t *testing.T) {
		g := New("ns", "decode", "uid")
		decode := role("decode", 3, "1")
		for i, n := range []string{"b2-0", "b2-1"} {
			decode[i].Spec.NodeName = n
			g.CountBound(decode[i].UID)
		}
		pods := map[string][]*v1.Pod{"decode": decode, "prefill": role("prefill", 2, "1")}
		out := g.PreFilter(treeIn(g, decode[2], 2, nodes, map[string]*Gang{g.Key(): g}, inBlock, pods))
		if out.Stage != Extra || out.Reject || !slices.Equal(sets.List(out.Nodes), []string{"b2-0", "b2-1"}) {
			t.Errorf("stage %v, reject %v, nodes %v; want an extra member kept to block b2", out.Stage, out.Reject, sets.List(out.Nodes))
		}
	})

	t.Run("the first group is offered only the places planned for it", func(t *testing.T) {
		y := tree.NewIndex()
		y.Set(tree.Node{Namespace: "ns", Name: "job", Composite: true, Gang: true, Min: 2})
		y.Set(tree.Node{Namespace: "ns", Name: "any", Gang: true, Min: 2, Parent: "job"})
		y.Set(tree.Node{Namespace: "ns", Name: "onx", Gang: true, Min: 2, Parent: "job"})
		root, _ := y.Resolve("ns", "any")
		onX := role("onx", 2, "3")
		for _, p := range onX {
			p.Spec.NodeSelector = map[string]string{gangtest.RackKey: "x"}
		}
		pods := map[string][]*v1.Pod{"any": role("any", 2, "3"), "onx": onX}
		big := gangtest.CPUNode("big", "8")
		cluster := []fwk.NodeInfo{gangtest.RackedNode("x-0", "z", "b", "x"), gangtest.RackedNode("x-1", "z", "b", "x"), big}
		g := New("ns", "any", "uid")
		in := treeIn(g, pods["any"][0], 2, cluster, map[string]*Gang{g.Key(): g}, root, pods)
		in.Plannable, in.CandidateNodes = true, 2
		out := g.PreFilter(in)
		if out.Reject || out.Plan == nil || !out.Offered || !slices.Equal(sets.List(out.Nodes), []string{"big"}) {
			t.Errorf("reject %v (%s), planned %v, offered %v %v; want the member planned and offered big only (x's nodes are onx's)", out.Reject, out.Message, out.Plan != nil, out.Offered, sets.List(out.Nodes))
		}
	})
}

// A check's result is not used for a job whose domain or groups changed while it ran.
func TestDoneForTreeJob(t *testing.T) {
	base := &Job{Gang: "ns/decode", Need: 2, Job: "ns/serve", Together: []gangfit.Group{{Key: "ns/prefill", Need: 2}},
		Domain: &TreeDomain{Composite: "ns/serve", Key: gangtest.BlockKey}}
	d := &Done{job: base}
	for _, tc := range []struct {
		name string
		edit func(j *Job)
		want bool
	}{
		{name: "the same job", edit: func(*Job) {}, want: true},
		{name: "its domain pinned since", edit: func(j *Job) { j.Domain = &TreeDomain{Composite: "ns/serve", Key: gangtest.BlockKey, Value: "b2"} }},
		{name: "no domain any more", edit: func(j *Job) { j.Domain = nil }},
		{name: "another group needs fewer", edit: func(j *Job) { j.Together = []gangfit.Group{{Key: "ns/prefill", Need: 1}} }},
		{name: "no other group needed", edit: func(j *Job) { j.Together = nil }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			j := *base
			tc.edit(&j)
			if got := d.For(&j); got != tc.want {
				t.Errorf("For = %v, want %v", got, tc.want)
			}
		})
	}
}

// TestPreFilterTreePreferred: a composite's preferred key keeps its job in one block where it fits
// (b2), and a job no block holds is placed anywhere, not refused, unlike a required key.
func TestPreFilterTreePreferred(t *testing.T) {
	x := tree.NewIndex()
	x.Set(tree.Node{Namespace: "ns", Name: "serve", Composite: true, Gang: true, Min: 2, Preferred: []string{gangtest.BlockKey}})
	x.Set(tree.Node{Namespace: "ns", Name: "decode", Gang: true, Min: 4, Parent: "serve"})
	x.Set(tree.Node{Namespace: "ns", Name: "prefill", Gang: true, Min: 2, Parent: "serve"})
	root, _ := x.Resolve("ns", "decode")
	block := func(b string, n int) []fwk.NodeInfo {
		var out []fwk.NodeInfo
		for i := range n {
			out = append(out, gangtest.RackedNode(fmt.Sprintf("%s-%d", b, i), "z", b, b+"r"))
		}
		return out
	}
	for _, tc := range []struct {
		name  string
		nodes []fwk.NodeInfo
		// allowed nil: every node.
		allowed []string
	}{
		{name: "the tightest block that holds the job", nodes: append(block("b1", 2), block("b2", 4)...), allowed: []string{"b2-0", "b2-1", "b2-2", "b2-3"}},
		{name: "no block holds the job, two together do: anywhere", nodes: append(block("b1", 2), block("b3", 2)...)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := New("ns", "decode", "uid")
			pods := map[string][]*v1.Pod{"decode": role("decode", 4, "2"), "prefill": role("prefill", 2, "3")}
			out := g.PreFilter(treeIn(g, pods["decode"][0], 4, tc.nodes, map[string]*Gang{g.Key(): g}, root, pods))
			if out.Reject {
				t.Fatalf("refused (%s); a preferred key never refuses a job that fits", out.Message)
			}
			if got := sets.List(out.Nodes); !slices.Equal(got, tc.allowed) {
				t.Errorf("nodes %v, want %v", got, tc.allowed)
			}
		})
	}
}

// TestJobForPreemption: the job a group's member preempts for is the groups its whole-tree check
// places together, with every member of the job and the nodes any of its groups is nominated to;
// there is none when the group alone is short (its own preemption) or it is in no job.
func TestJobForPreemption(t *testing.T) {
	x := tree.NewIndex()
	x.Set(tree.Node{Namespace: "ns", Name: "serve", Composite: true, Gang: true, Min: 2})
	x.Set(tree.Node{Namespace: "ns", Name: "decode", Gang: true, Min: 4, Parent: "serve"})
	x.Set(tree.Node{Namespace: "ns", Name: "prefill", Gang: true, Min: 2, Parent: "serve"})
	root, _ := x.Resolve("ns", "decode")
	nominated := role("prefill", 2, "3")
	nominated[1].Status.NominatedNodeName = "n1"
	wholePrefill := func() *Gang {
		o := New("ns", "prefill", "p")
		for _, p := range role("prefill", 2, "3") {
			o.CountBound(p.UID)
		}
		return o
	}
	for _, tc := range []struct {
		name    string
		root    *tree.Branch
		prefill []*v1.Pod
		other   *Gang
		want    bool
		// wantGroups are each group's key and need.
		wantGroups    []string
		wantNominated []string
	}{
		{name: "two roles, none placed: both, with their nominations", root: root, prefill: nominated,
			other: func() *Gang { o := New("ns", "prefill", "p"); o.NominatedNodes = []string{"n2"}; return o }(),
			want:  true, wantGroups: []string{"ns/decode:4", "ns/prefill:2"}, wantNominated: []string{"n2", "n1"}},
		{name: "the other role whole: the group preempts for itself", root: root, prefill: role("prefill", 2, "3"), other: wholePrefill()},
		{name: "in no job", prefill: role("prefill", 2, "3")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := New("ns", "decode", "uid")
			gangs := map[string]*Gang{g.Key(): g}
			if tc.other != nil {
				gangs[tc.other.Key()] = tc.other
			}
			pods := map[string][]*v1.Pod{"decode": role("decode", 4, "2"), "prefill": tc.prefill}
			j, ok := g.JobForPreemption(treeIn(g, pods["decode"][0], 4, nil, gangs, tc.root, pods), tc.root)
			if ok != tc.want {
				t.Fatalf("job %+v, %v; want %v", j, ok, tc.want)
			}
			if !ok {
				return
			}
			var groups []string
			for _, gr := range j.Groups {
				groups = append(groups, fmt.Sprintf("%s:%d", gr.Key, gr.Need))
			}
			if !slices.Equal(groups, tc.wantGroups) || !slices.Equal(j.Nominated, tc.wantNominated) || len(j.Members) != 6 || j.Job != "ns/serve" || j.Unit != "ns/serve" {
				t.Errorf("job %v, nominated %v, %d members, job %s, unit %s; want %v, %v, 6, ns/serve", groups, j.Nominated, len(j.Members), j.Job, j.Unit, tc.wantGroups, tc.wantNominated)
			}
		})
	}
}

// TestPreFilterTreeNestedDomains: the job in one block (its root's required key), its replica (a
// composite of groups lead and work) in one rack of it (the replica's own). The rack is chosen where
// the replica's groups fit together within the block; a block none of whose racks holds the replica
// is passed over for the next; a rack the replica's placed members pin is kept.
func TestPreFilterTreeNestedDomains(t *testing.T) {
	x := tree.NewIndex()
	x.Set(tree.Node{Namespace: "ns", Name: "serve", Composite: true, Gang: true, Min: 1, Domain: gangtest.BlockKey})
	x.Set(tree.Node{Namespace: "ns", Name: "rep", Composite: true, Gang: true, Min: 2, Domain: gangtest.RackKey, Parent: "serve"})
	x.Set(tree.Node{Namespace: "ns", Name: "lead", Gang: true, Min: 1, Parent: "rep"})
	x.Set(tree.Node{Namespace: "ns", Name: "work", Gang: true, Min: 2, Parent: "rep"})
	root, _ := x.Resolve("ns", "work")
	if got := root.DomainsBelow(root, "ns/work"); len(got) != 1 || got[0].Name != "rep" {
		t.Fatalf("DomainsBelow = %v, want [rep]", got)
	}
	filler := func(node string) *v1.Pod { return gangtest.Running("filler-"+node, "", node, "2", 0) }
	// b1 holds the job's 8 CPU (r1a: two nodes half taken, r1b: two free) but no rack of it holds the
	// replica; b2's racks (three free nodes each) do.
	b1 := []fwk.NodeInfo{gangtest.RackedNode("r1a-0", "z", "b1", "r1a", filler("r1a-0")), gangtest.RackedNode("r1a-1", "z", "b1", "r1a", filler("r1a-1")),
		gangtest.RackedNode("r1b-0", "z", "b1", "r1b"), gangtest.RackedNode("r1b-1", "z", "b1", "r1b")}
	var b2 []fwk.NodeInfo
	for _, r := range []string{"r2a", "r2b"} {
		for i := range 3 {
			b2 = append(b2, gangtest.RackedNode(fmt.Sprintf("%s-%d", r, i), "z", "b2", r))
		}
	}
	for _, tc := range []struct {
		name    string
		nodes   []fwk.NodeInfo
		others  func() map[string]*Gang
		allowed []string
		msg     string
	}{
		{name: "b1 holds the job, none of its racks the replica: the replica in the first rack of b2", nodes: slices.Concat(b1, b2),
			allowed: []string{"r2a-0", "r2a-1", "r2a-2"}, msg: "placed in example.com/rack=r2a with the other groups of its job ns/rep"},
		{name: "the rack the leader is reserved in is kept", nodes: slices.Concat(b1, b2),
			others: func() map[string]*Gang {
				g := New("ns", "lead", "l")
				g.CountReserved("lead-0", "r2b-1")
				return map[string]*Gang{g.Key(): g}
			}, allowed: []string{"r2b-0", "r2b-1", "r2b-2"}, msg: "placed in example.com/rack=r2b"},
		{name: "only b1: refused, never split over its racks", nodes: b1,
			msg: "no domain of example.com/rack fits the groups ns/rep needs placed in one (its required topology) within its job's"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := New("ns", "work", "uid")
			pods := map[string][]*v1.Pod{"work": role("work", 2, "3"), "lead": role("lead", 1, "2")}
			out := g.PreFilter(treeIn(g, pods["work"][0], 2, tc.nodes, gangsWith(g, tc.others), root, pods))
			if refused := tc.allowed == nil; out.Reject != refused || out.Tree != refused {
				t.Fatalf("reject %v, tree %v (%s); want %v", out.Reject, out.Tree, out.Message, refused)
			}
			if tc.allowed != nil {
				if got := sets.List(out.Nodes); !slices.Equal(got, tc.allowed) || !strings.Contains(out.Placement.Message, tc.msg) {
					t.Errorf("nodes %v (%+v); want %v and %q", got, out.Placement, tc.allowed, tc.msg)
				}
			} else if !strings.Contains(out.Message, tc.msg) {
				t.Errorf("message %q, want it to say %q", out.Message, tc.msg)
			}
		})
	}
}

// TestPreFilterTreeDomainBelowTop: the job's only required key is on a composite below its top (group
// a in one rack; group b, beside it under the top, anywhere). The rack holds a's members, not b's too:
// the job is checked whole anywhere, and a within one rack, never a and b in one rack.
func TestPreFilterTreeDomainBelowTop(t *testing.T) {
	x := tree.NewIndex()
	x.Set(tree.Node{Namespace: "ns", Name: "job", Composite: true, Gang: true, Min: 2})
	x.Set(tree.Node{Namespace: "ns", Name: "c", Composite: true, Gang: true, Min: 1, Domain: gangtest.RackKey, Parent: "job"})
	x.Set(tree.Node{Namespace: "ns", Name: "a", Gang: true, Min: 2, Parent: "c"})
	x.Set(tree.Node{Namespace: "ns", Name: "b", Gang: true, Min: 2, Parent: "job"})
	root, _ := x.Resolve("ns", "a")
	// Racks of two 4-CPU nodes: a (2 of 3 CPU) fits one, a and b (2 more of 3 CPU) do not.
	var nodes []fwk.NodeInfo
	for _, r := range []string{"r1", "r2"} {
		for i := range 2 {
			nodes = append(nodes, gangtest.RackedNode(fmt.Sprintf("%s-%d", r, i), "z", "b", r))
		}
	}
	for _, tc := range []struct {
		name    string
		nodes   []fwk.NodeInfo
		allowed []string
		msg     string
	}{
		{name: "a in one rack, b beside it in the other", nodes: nodes, allowed: []string{"r1-0", "r1-1"}},
		{name: "one rack only: the job does not fit", nodes: nodes[:2], msg: "not together with the groups its job ns/job needs"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := New("ns", "a", "uid")
			pods := map[string][]*v1.Pod{"a": role("a", 2, "3"), "b": role("b", 2, "3")}
			out := g.PreFilter(treeIn(g, pods["a"][0], 2, tc.nodes, map[string]*Gang{g.Key(): g}, root, pods))
			if refused := tc.allowed == nil; out.Reject != refused {
				t.Fatalf("reject %v (%s); want %v", out.Reject, out.Message, refused)
			}
			wantPlaced(t, out, tc.allowed, tc.msg)
		})
	}
}

// TestTreeDomainPinnedNodes: a member past its group's quorum stays in the domains its job's placed
// members pin, the job's and each nested composite's together.
func TestTreeDomainPinnedNodes(t *testing.T) {
	nodes := []fwk.NodeInfo{gangtest.RackedNode("a-0", "z", "b1", "r1"), gangtest.RackedNode("a-1", "z", "b1", "r2"),
		gangtest.RackedNode("c-0", "z", "b2", "r3")}
	block := func(value string) *TreeDomain { return &TreeDomain{Key: gangtest.BlockKey, Value: value} }
	rack := func(value string) *TreeDomain { return &TreeDomain{Key: gangtest.RackKey, Value: value} }
	withInner := func(d *TreeDomain, inner ...*TreeDomain) *TreeDomain { d.Inner = inner; return d }
	for _, tc := range []struct {
		name string
		d    *TreeDomain
		want []string // nil: every node
	}{
		{name: "nothing pinned: every node", d: withInner(block(""), rack(""))},
		{name: "the job's block", d: block("b1"), want: []string{"a-0", "a-1"}},
		{name: "the job's block and the replica's rack in it", d: withInner(block("b1"), rack("r2")), want: []string{"a-1"}},
		{name: "the replica's rack only (the job's block not pinned yet)", d: withInner(block(""), rack("r3")), want: []string{"c-0"}},
		{name: "a rack outside the block: no node", d: withInner(block("b1"), rack("r3")), want: []string{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := tc.d.pinnedNodes(nodes)
			if tc.want == nil {
				if got != nil {
					t.Errorf("nodes %v, want every node (nil)", sets.List(got))
				}
				return
			}
			if got == nil || !slices.Equal(sets.List(got), tc.want) {
				t.Errorf("nodes %v, want %v", got, tc.want)
			}
		})
	}
}

// TestPreFilterTreeNominations: the room nominated to a job's other groups is taken against a group's
// check unless the check places those groups with it: a replica of K of N does not count on the room
// another replica's preemption nominated (both would go there), a group counts the room nominated to
// the groups its job needs with it.
func TestPreFilterTreeNominations(t *testing.T) {
	serve := func(k int) *tree.Branch {
		x := tree.NewIndex()
		x.Set(tree.Node{Namespace: "ns", Name: "serve", Composite: true, Gang: true, Min: k})
		x.Set(tree.Node{Namespace: "ns", Name: "r1", Gang: true, Min: 2, Parent: "serve"})
		x.Set(tree.Node{Namespace: "ns", Name: "r2", Gang: true, Min: 2, Parent: "serve"})
		root, _ := x.Resolve("ns", "r1")
		return root
	}
	nominated := func(pods []*v1.Pod, nodes ...string) []*v1.Pod {
		out := make([]*v1.Pod, len(pods))
		for i, p := range pods {
			out[i] = p.DeepCopy()
			out[i].Status.NominatedNodeName = nodes[i]
		}
		return out
	}
	r2 := nominated(role("r2", 2, "3"), "a", "b")
	for _, tc := range []struct {
		name    string
		k       int
		nodes   []fwk.NodeInfo
		refused bool
	}{
		{name: "both replicas needed: the other's nominations are its own job's room", k: 2, nodes: cpuNodes("4", "a", "b", "c", "d")},
		{name: "one of two: the other replica's nominated room is not this one's", k: 1, nodes: cpuNodes("4", "a", "b"), refused: true},
		{name: "one of two, room beside the other's", k: 1, nodes: cpuNodes("4", "a", "b", "c", "d")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := New("ns", "r1", "uid")
			pods := map[string][]*v1.Pod{"r1": role("r1", 2, "3"), "r2": r2}
			in := treeIn(g, pods["r1"][0], 2, tc.nodes, map[string]*Gang{g.Key(): g}, serve(tc.k), pods)
			in.Claimed = func(int32) []*v1.Pod { return r2 }
			if out := g.PreFilter(in); out.Reject != tc.refused {
				t.Errorf("reject %v (%s), want %v", out.Reject, out.Message, tc.refused)
			}
		})
	}
}

// TestPreFilterTreePartsNominations: a job of two replicas (a leader and a worker group under a
// composite that requires a rack) that preempted in parts: the plan nominated replica a to rack r1,
// where victims still run, and replica b to r2. The job's whole check sets aside the room nominated to
// its groups (and fits: a's members on the nodes of r1 and r3 with room for one each), but a
// replica's rack is chosen with its own groups only: the room nominated to the other replica is taken
// there, and a, in no rack yet, waits, holding nothing. Before, a's leader was placed in r2, the other
// replica's rack, its member was refused there by the filters (which count the nominated pods), and
// the group backed off for 10 s.
func TestPreFilterTreePartsNominations(t *testing.T) {
	job := func(block bool) *tree.Branch {
		x := tree.NewIndex()
		top := tree.Node{Namespace: "ns", Name: "job", Composite: true, Gang: true, Min: 2}
		if block {
			top.Domain = gangtest.BlockKey
		}
		x.Set(top)
		for _, r := range []string{"a", "b"} {
			x.Set(tree.Node{Namespace: "ns", Name: "rep-" + r, Composite: true, Gang: true, Min: 2, Domain: gangtest.RackKey, Parent: "job"})
			x.Set(tree.Node{Namespace: "ns", Name: "lead-" + r, Gang: true, Min: 1, Parent: "rep-" + r})
			x.Set(tree.Node{Namespace: "ns", Name: "work-" + r, Gang: true, Min: 1, Parent: "rep-" + r})
		}
		root, _ := x.Resolve("ns", "lead-a")
		return root
	}
	nominated := func(group, cpu, node string) *v1.Pod {
		p := role(group, 1, cpu)[0]
		p.Status.NominatedNodeName = node
		return p
	}
	pods := map[string][]*v1.Pod{"lead-a": {nominated("lead-a", "2", "r1-0")}, "work-a": {nominated("work-a", "2", "r1-1")},
		"lead-b": {nominated("lead-b", "3", "r2-0")}, "work-b": {nominated("work-b", "3", "r2-1")}}
	// What a member of lead-a leaves room for: the pods nominated but its own group's.
	claimed := []*v1.Pod{pods["work-a"][0], pods["lead-b"][0], pods["work-b"][0]}
	nodes := func(victims bool) []fwk.NodeInfo {
		return threeRacks(victims, [2]string{"2", "4"}, [2]string{"2", "4"})
	}
	for _, tc := range []struct {
		name    string
		block   bool
		victims bool
		allowed []string // nil: refused
		msg     string
	}{
		{name: "the job in a block, victims still in the replica's rack: not the other replica's rack", block: true, victims: true,
			msg: "no domain of example.com/rack fits the groups ns/rep-a needs placed in one (its required topology) within its job's"},
		{name: "the job in no domain, victims still in the replica's rack: not the other replica's rack", victims: true,
			msg: "no domain of example.com/rack fits the groups its job ns/rep-a needs placed in one"},
		{name: "the job in a block, the victims gone: the replica's rack", block: true, allowed: []string{"r1-0", "r1-1"}},
		{name: "the job in no domain, the victims gone: the replica's rack", allowed: []string{"r1-0", "r1-1"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := New("ns", "lead-a", "uid")
			in := treeIn(g, pods["lead-a"][0], 1, nodes(tc.victims), map[string]*Gang{g.Key(): g}, job(tc.block), pods)
			in.Claimed = func(int32) []*v1.Pod { return claimed }
			out := g.PreFilter(in)
			if refused := tc.allowed == nil; out.Reject != refused || out.Tree != refused {
				t.Fatalf("reject %v, tree %v (%s), nodes %v; want %v", out.Reject, out.Tree, out.Message, sets.List(out.Nodes), refused)
			}
			wantPlaced(t, out, tc.allowed, tc.msg)
		})
	}
}

// TestPreFilterTreeOwnDomainNominations: LeaderWorkerSet's shape after a job's preemption in parts:
// two groups under a gang composite needing both, each requiring a rack of its own; set-a's members
// nominated to rack r1, where victims still run, and set-b's to r2. The job's check sets aside the room
// nominated to set-b, but set-a's own check (and its own rack's choice) places its members only: the
// room nominated to set-b is taken there, and set-a, in no rack yet, waits, holding nothing. Before,
// set-a's rack was chosen with set-b's nominated room free, it was placed in r2, its member refused
// there by the filters, and the group backed off for 10 s.
func TestPreFilterTreeOwnDomainNominations(t *testing.T) {
	x := tree.NewIndex()
	x.Set(tree.Node{Namespace: "ns", Name: "job", Composite: true, Gang: true, Min: 2})
	x.Set(tree.Node{Namespace: "ns", Name: "set-a", Gang: true, Min: 2, Parent: "job"})
	x.Set(tree.Node{Namespace: "ns", Name: "set-b", Gang: true, Min: 2, Parent: "job"})
	root, _ := x.Resolve("ns", "set-a")
	nominated := func(group string, i int, cpu, node string) *v1.Pod {
		p := gangtest.Member(fmt.Sprintf("%s-%d", group, i), group, cpu)
		p.Status.NominatedNodeName = node
		return p
	}
	pods := map[string][]*v1.Pod{"set-a": {nominated("set-a", 0, "2", "r1-0"), nominated("set-a", 1, "2", "r1-1")},
		"set-b": {nominated("set-b", 0, "3", "r2-0"), nominated("set-b", 1, "3", "r2-1")}}
	nodes := func(victims bool) []fwk.NodeInfo {
		return threeRacks(victims, [2]string{"4", "4"}, [2]string{"3", "3"})
	}
	for _, tc := range []struct {
		name    string
		victims bool
		allowed []string // nil: refused
	}{
		{name: "victims still in set-a's rack: not set-b's rack", victims: true},
		{name: "the victims gone: set-a's rack", allowed: []string{"r1-0", "r1-1"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := New("ns", "set-a", "uid")
			in := treeIn(g, pods["set-a"][0], 2, nodes(tc.victims), map[string]*Gang{g.Key(): g}, root, pods)
			in.Policy = gangfit.Policy{Required: gangtest.RackKey}
			in.OwnDomain = map[string]string{"ns/set-a": gangtest.RackKey, "ns/set-b": gangtest.RackKey}
			in.Claimed = func(int32) []*v1.Pod { return pods["set-b"] }
			out := g.PreFilter(in)
			if refused := tc.allowed == nil; out.Reject != refused {
				t.Fatalf("reject %v (%s), nodes %v; want %v", out.Reject, out.Message, sets.List(out.Nodes), refused)
			}
			if got := sets.List(out.Nodes); tc.allowed != nil && !slices.Equal(got, tc.allowed) {
				t.Errorf("nodes %v (%+v); want %v", got, out.Placement, tc.allowed)
			}
		})
	}
}
