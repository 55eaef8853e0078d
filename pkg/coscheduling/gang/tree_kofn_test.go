package gang

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	policy "k8s.io/api/policy/v1"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/utils/ptr"

	"github.com/custom-scheduler/custom-scheduler/pkg/coscheduling/gangfit"
	"github.com/custom-scheduler/custom-scheduler/pkg/coscheduling/internal/gangtest"
	"github.com/custom-scheduler/custom-scheduler/pkg/coscheduling/tree"
)

// TestPreFilterTreeKOfNComposites: a set needing 2 of 3 replicas, each a composite of a leader group
// (1 pod) and a worker group (2 pods), all of 2 CPU: a leader's check places its own replica's worker
// group and exactly one other replica's two groups (the replicas alike), so a cluster with room for
// one replica only refuses it before anything is held; replicas not alike are each a way the check
// tries in turn (the first that fits places the job).
func TestPreFilterTreeKOfNComposites(t *testing.T) {
	x := tree.NewIndex()
	x.Set(tree.Node{Namespace: "ns", Name: "set", Composite: true, Gang: true, Min: 2})
	for i := range 3 {
		rep := fmt.Sprintf("rep-%d", i)
		x.Set(tree.Node{Namespace: "ns", Name: rep, Composite: true, Gang: true, Min: 2, Parent: "set"})
		x.Set(tree.Node{Namespace: "ns", Name: fmt.Sprintf("lead-%d", i), Gang: true, Min: 1, Parent: rep})
		x.Set(tree.Node{Namespace: "ns", Name: fmt.Sprintf("work-%d", i), Gang: true, Min: 2, Parent: rep})
	}
	root, p := x.Resolve("ns", "lead-0")
	if p != nil {
		t.Fatal(p)
	}
	alike := func(work2CPU string) map[string][]*v1.Pod {
		pods := map[string][]*v1.Pod{}
		for i := range 3 {
			cpu := "2"
			if i == 2 {
				cpu = work2CPU
			}
			pods[fmt.Sprintf("lead-%d", i)] = role(fmt.Sprintf("lead-%d", i), 1, "2")
			pods[fmt.Sprintf("work-%d", i)] = role(fmt.Sprintf("work-%d", i), 2, cpu)
		}
		return pods
	}
	for _, tc := range []struct {
		name    string
		pods    map[string][]*v1.Pod
		nodes   []string
		cpu     string // each node's ("4" if empty)
		refused bool
		msg     string
		placed  []string // the other groups of the check's first way
		ways    int      // how many ways the check has (1 if 0)
	}{
		{name: "room for one replica: refused with one other replica's groups", pods: alike("2"), nodes: []string{"a", "b"},
			refused: true, msg: "ns/lead-1: 1, ns/work-1: 2", placed: []string{"ns/lead-1", "ns/work-1", "ns/work-0"}},
		{name: "room for two replicas: placed with exactly one other", pods: alike("2"), nodes: []string{"a", "b", "c"},
			placed: []string{"ns/lead-1", "ns/work-1", "ns/work-0"}},
		{name: "replicas not alike, room for one: refused with the first way's groups", pods: alike("3"), nodes: []string{"a", "b"},
			refused: true, msg: "ns/lead-1: 1, ns/work-1: 2", placed: []string{"ns/lead-1", "ns/work-1", "ns/work-0"}, ways: 2},
		{name: "a replica with no pods yet is a way last, and never taken as fitting", pods: without(alike("2"), "lead-2", "work-2"), nodes: []string{"a", "b"},
			refused: true, msg: "ns/lead-1: 1, ns/work-1: 2", placed: []string{"ns/lead-1", "ns/work-1", "ns/work-0"}, ways: 2},
		{name: "a replica whose spare members differ is a way the check cannot judge, never taken as fitting", pods: spare(alike("2")), nodes: []string{"a", "b"},
			refused: true, msg: "ns/lead-1: 1, ns/work-1: 2", placed: []string{"ns/lead-1", "ns/work-1", "ns/work-0"}, ways: 2},
		{name: "replicas not alike: placed with the second way, the first not fitting", pods: alike("1"), nodes: []string{"a", "b"}, cpu: "5",
			placed: []string{"ns/lead-1", "ns/work-1", "ns/work-0"}, ways: 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := New("ns", "lead-0", "uid")
			gangs := map[string]*Gang{g.Key(): g}
			in := treeIn(g, tc.pods["lead-0"][0], 1, cpuNodes(cmp.Or(tc.cpu, "4"), tc.nodes...), gangs, root, tc.pods)
			in.Members = func() []*v1.Pod { return tc.pods["lead-0"] }
			ways := in.neededWays(root, g.Key(), nil)
			if len(ways) != max(tc.ways, 1) || !slices.Equal(keysOf(ways[0]), tc.placed) {
				t.Errorf("%d ways, the first %v; want %d, %v", len(ways), keysOf(ways[0]), max(tc.ways, 1), tc.placed)
			}
			out := g.PreFilter(in)
			if out.Reject != tc.refused || out.Tree != tc.refused {
				t.Fatalf("reject %v, tree %v (%s); want %v", out.Reject, out.Tree, out.Message, tc.refused)
			}
			if !strings.Contains(out.Message, tc.msg) {
				t.Errorf("message %q, want it to say %q", out.Message, tc.msg)
			}
		})
	}
}

// TestPreFilterTreeKOfNCacheSeesNewPods: a leader's check refused while the only replica it fits
// with had no pods yet (a way the check cannot judge) answers no more once that replica's pods exist,
// within the cache's time: the next member's check places the job with it. Cached on the leader's
// own group alone, the refusal stood for the rest of the burst, and the replicas gathering meanwhile
// were rejected with it.
func TestPreFilterTreeKOfNCacheSeesNewPods(t *testing.T) {
	x := tree.NewIndex()
	x.Set(tree.Node{Namespace: "ns", Name: "set", Composite: true, Gang: true, Min: 2})
	pods := map[string][]*v1.Pod{}
	for i := range 3 {
		rep := fmt.Sprintf("rep-%d", i)
		x.Set(tree.Node{Namespace: "ns", Name: rep, Composite: true, Gang: true, Min: 2, Parent: "set"})
		x.Set(tree.Node{Namespace: "ns", Name: fmt.Sprintf("lead-%d", i), Gang: true, Min: 1, Parent: rep})
		x.Set(tree.Node{Namespace: "ns", Name: fmt.Sprintf("work-%d", i), Gang: true, Min: 2, Parent: rep})
		cpu := "2"
		if i == 2 {
			cpu = "1"
		}
		pods[fmt.Sprintf("lead-%d", i)] = role(fmt.Sprintf("lead-%d", i), 1, "2")
		pods[fmt.Sprintf("work-%d", i)] = role(fmt.Sprintf("work-%d", i), 2, cpu)
	}
	root, p := x.Resolve("ns", "lead-0")
	if p != nil {
		t.Fatal(p)
	}
	all := maps.Clone(pods)
	without(pods, "lead-2", "work-2")
	g := New("ns", "lead-0", "uid")
	in := treeIn(g, pods["lead-0"][0], 1, cpuNodes("5", "a", "b"), map[string]*Gang{g.Key(): g}, root, pods)
	if out := g.PreFilter(in); !out.Reject || !out.Tree {
		t.Fatalf("replica 2 without pods: reject %v, tree %v (%s); want refused", out.Reject, out.Tree, out.Message)
	}
	in = treeIn(g, all["lead-0"][0], 1, cpuNodes("5", "a", "b"), map[string]*Gang{g.Key(): g}, root, all)
	in.Now = t0.Add(time.Second)
	if out := g.PreFilter(in); out.Reject {
		t.Errorf("replica 2's pods created: refused (%s); want placed with replica 2", out.Message)
	}
}

// spare is pods with a third worker of 3 CPU in work-2 (minimum 2): its members are not alike.
func spare(pods map[string][]*v1.Pod) map[string][]*v1.Pod {
	pods["work-2"] = append(pods["work-2"], gangtest.Member("work-2-2", "work-2", "3"))
	return pods
}

// without is pods less the groups named.
func without(pods map[string][]*v1.Pod, names ...string) map[string][]*v1.Pod {
	for _, n := range names {
		delete(pods, n)
	}
	return pods
}

// TestJobPreemptionWays: a set needing 2 of 3 replicas not alike (a leader and 2, 3 or 1 workers,
// all of 2 CPU, at priority 100) on three 4-CPU nodes each full of two low pods of 2 CPU. lead-0's
// first way (with rep-1, 7 pods) does not fit even with every low pod evicted; its second (with
// rep-2, 5 pods) does: the preemption searches it and evicts five low pods. Searching the first way
// only, it evicted nothing, for ever.
func TestJobPreemptionWays(t *testing.T) {
	x := tree.NewIndex()
	x.Set(tree.Node{Namespace: "ns", Name: "set", Composite: true, Gang: true, Min: 2})
	pods := map[string][]*v1.Pod{}
	for i, workers := range []int{2, 3, 1} {
		rep := fmt.Sprintf("rep-%d", i)
		lead, work := fmt.Sprintf("lead-%d", i), fmt.Sprintf("work-%d", i)
		x.Set(tree.Node{Namespace: "ns", Name: rep, Composite: true, Gang: true, Min: 2, Parent: "set"})
		x.Set(tree.Node{Namespace: "ns", Name: lead, Gang: true, Min: 1, Parent: rep})
		x.Set(tree.Node{Namespace: "ns", Name: work, Gang: true, Min: workers, Parent: rep})
		pods[lead], pods[work] = role(lead, 1, "2"), role(work, workers, "2")
	}
	for _, ps := range pods {
		for _, p := range ps {
			p.Spec.Priority = ptr.To[int32](100)
		}
	}
	root, p := x.Resolve("ns", "lead-0")
	if p != nil {
		t.Fatal(p)
	}
	var nodes []fwk.NodeInfo
	for i := range 3 {
		n := fmt.Sprint("n", i)
		nodes = append(nodes, gangtest.NodeWith(n, "4", gangtest.Running("low-"+n+"-a", "", n, "2", 10), gangtest.Running("low-"+n+"-b", "", n, "2", 10)))
	}
	g := New("ns", "lead-0", "uid")
	j, ok := g.JobForPreemption(treeIn(g, pods["lead-0"][0], 1, nodes, map[string]*Gang{g.Key(): g}, root, pods), root)
	if !ok || len(j.Ways) != 1 {
		t.Fatalf("JobForPreemption: ok %v, %d other ways; want ok and 1", ok, len(j.Ways))
	}
	if got, want := keysOf(j.Ways[0].Groups), []string{"ns/lead-0", "ns/lead-2", "ns/work-2", "ns/work-0"}; !slices.Equal(got, want) {
		t.Errorf("the other way places %v, want %v", got, want)
	}
	in := PreemptIn{Pod: pods["lead-0"][0], PodGroup: gangtest.PodGroup("ns", "lead-0", 1, t0), Members: j.Members, Nodes: nodes, Job: &j,
		Fit: &gangfit.Shared{}, Logger: klog.Background(),
		Terminating: func([]string, int32) int { return 0 },
		Claims:      func() []*v1.Pod { return nil },
		PDBs:        func() ([]*policy.PodDisruptionBudget, error) { return nil, nil }}
	if out := Preempt(in); out.Result != PreemptVictims || len(out.Plan.Victims) != 5 {
		t.Errorf("with its ways: %s %q, %d victims; want 5 victims (the second way)", out.Result, out.Message, len(out.Plan.Victims))
	}
	first := j
	first.Ways = nil
	in.Job = &first
	if out := Preempt(in); out.Result != PreemptNotHelpful {
		t.Errorf("the first way alone: %s %q; want not helpful", out.Result, out.Message)
	}
	// Replica 2's leader nominated (a search made room for it): its way is the first, as the check's.
	pods["lead-2"][0].Status.NominatedNodeName = "n1"
	j, _ = g.JobForPreemption(treeIn(g, pods["lead-0"][0], 1, nodes, map[string]*Gang{g.Key(): g}, root, pods), root)
	if got, want := keysOf(j.Groups), []string{"ns/lead-0", "ns/lead-2", "ns/work-2", "ns/work-0"}; !slices.Equal(got, want) {
		t.Errorf("with replica 2 nominated, the first way places %v, want %v", got, want)
	}
	if !slices.Contains(j.Nominated, "n1") {
		t.Errorf("the job's nominated nodes %v, want n1 among them", j.Nominated)
	}
}
