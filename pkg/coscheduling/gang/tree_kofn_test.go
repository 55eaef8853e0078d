package gang

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"

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
