package gang

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/custom-scheduler/custom-scheduler/pkg/coscheduling/internal/gangtest"
	"github.com/custom-scheduler/custom-scheduler/pkg/coscheduling/tree"
)

// TestPreFilterTreeNestedPreferred: the job in one block (its root's required key), its replica (a
// composite of groups lead and work) preferably in one rack of it (the replica's preferred key). The
// rack is chosen where the replica's groups fit together within the block, and a rack the replica's
// placed members share is kept while the rest fit there; a replica no rack holds is placed across
// the block's racks, never refused for its preferred key.
func TestPreFilterTreeNestedPreferred(t *testing.T) {
	x := tree.NewIndex()
	x.Set(tree.Node{Namespace: "ns", Name: "serve", Composite: true, Gang: true, Min: 1, Domain: gangtest.BlockKey})
	x.Set(tree.Node{Namespace: "ns", Name: "rep", Composite: true, Gang: true, Min: 2, Preferred: []string{gangtest.RackKey}, Parent: "serve"})
	x.Set(tree.Node{Namespace: "ns", Name: "lead", Gang: true, Min: 1, Parent: "rep"})
	x.Set(tree.Node{Namespace: "ns", Name: "work", Gang: true, Min: 2, Parent: "rep"})
	root, _ := x.Resolve("ns", "work")
	filler := func(node, cpu string) *v1.Pod { return gangtest.Running("filler-"+node+"-"+cpu, "", node, cpu, 0) }
	// One block of two racks of three 4-CPU nodes. The replica asks 3 + 3 (work) + 2 (lead) CPU.
	block := func(fill map[string]string) []fwk.NodeInfo {
		var nodes []fwk.NodeInfo
		for _, r := range []string{"r1", "r2"} {
			for i := range 3 {
				name := fmt.Sprintf("%s-%d", r, i)
				var pods []*v1.Pod
				if cpu := fill[name]; cpu != "" {
					pods = append(pods, filler(name, cpu))
				}
				nodes = append(nodes, gangtest.RackedNode(name, "z", "b1", r, pods...))
			}
		}
		return nodes
	}
	for _, tc := range []struct {
		name    string
		fill    map[string]string
		others  func() map[string]*Gang
		allowed []string
		msg     string
	}{
		{name: "a free block: the replica in its first rack", allowed: []string{"r1-0", "r1-1", "r1-2"},
			msg: "placed in example.com/rack=r1 with the other groups of its job ns/rep"},
		{name: "r1 too full for the replica: r2", fill: map[string]string{"r1-0": "3", "r1-1": "3"}, allowed: []string{"r2-0", "r2-1", "r2-2"},
			msg: "placed in example.com/rack=r2"},
		{name: "the rack the leader is reserved in is kept while the workers fit there",
			others: func() map[string]*Gang {
				g := New("ns", "lead", "l")
				g.CountReserved("lead-0", "r2-1")
				return map[string]*Gang{g.Key(): g}
			}, allowed: []string{"r2-0", "r2-1", "r2-2"}, msg: "placed in example.com/rack=r2"},
		{name: "no rack holds the replica: placed across the block's racks, not refused",
			fill:    map[string]string{"r1-0": "2", "r1-1": "2", "r2-0": "2", "r2-1": "2"},
			allowed: []string{"r1-0", "r1-1", "r1-2", "r2-0", "r2-1", "r2-2"}, msg: "example.com/block=b1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := New("ns", "work", "uid")
			pods := map[string][]*v1.Pod{"work": role("work", 2, "3"), "lead": role("lead", 1, "2")}
			out := g.PreFilter(treeIn(g, pods["work"][0], 2, block(tc.fill), gangsWith(g, tc.others), root, pods))
			if out.Reject {
				t.Fatalf("rejected (%s); want placed", out.Message)
			}
			if got := sets.List(out.Nodes); !slices.Equal(got, tc.allowed) || !strings.Contains(out.Placement.Message, tc.msg) {
				t.Errorf("nodes %v (%+v); want %v and %q", got, out.Placement, tc.allowed, tc.msg)
			}
		})
	}
}
