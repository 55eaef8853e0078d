package gang

import (
	"math/rand"
	"slices"
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/custom-scheduler/custom-scheduler/pkg/coscheduling/internal/gangtest"
	"github.com/custom-scheduler/custom-scheduler/pkg/coscheduling/tree"
)

func partsPlan(t *testing.T, x *tree.Index, nodes []fwk.NodeInfo, pods map[string][]*v1.Pod, own map[string]string) ([]string, bool, *JobPreemption) {
	root, _ := x.Resolve("ns", "decode")
	g := New("ns", "decode", "uid")
	gangs := map[string]*Gang{g.Key(): g}
	in := treeIn(g, pods["decode"][0], 0, nodes, gangs, root, pods)
	in.OwnDomain = own
	j, ok := JobToReserve(in, root, g.Key())
	if !ok {
		t.Fatalf("JobToReserve refused")
	}
	rin := ReserveIn{Pod: pods["decode"][0], Logger: klog.Background(), Job: &j,
		Nodes:  func() ([]fwk.NodeInfo, error) { return nodes, nil },
		Claims: func(int32) []*v1.Pod { return nil }}
	p := PlanRoom(rin, *j.room())
	var racks []string
	for _, a := range p.Assignment {
		for _, ni := range nodes {
			if ni.Node().Name == a.Node {
				racks = append(racks, ni.Node().Labels[gangtest.RackKey])
			}
		}
	}
	slices.Sort(racks)
	return slices.Compact(racks), p.OK, &j
}

// TestJobRoomInTheDomainThatHoldsIt: a required rack on a composite holding the whole job (below its
// gang composite, or a basic one above it) holds the job's room when there are no parts: not across
// racks.
func TestJobRoomInTheDomainThatHoldsIt(t *testing.T) {
	nodes := []fwk.NodeInfo{gangtest.RackedNode("n1", "z1", "b1", "r1"), gangtest.RackedNode("n2", "z1", "b1", "r2")}
	pods := map[string][]*v1.Pod{"decode": role("decode", 4, "1"), "prefill": role("prefill", 2, "1")}
	decode := func(parent string) tree.Node {
		return tree.Node{Namespace: "ns", Name: "decode", Gang: true, Min: 4, Parent: parent}
	}
	prefill := func(parent string) tree.Node {
		return tree.Node{Namespace: "ns", Name: "prefill", Gang: true, Min: 2, Parent: parent}
	}
	for name, x := range map[string]*tree.Index{
		"rack composite below the job": indexOf(
			tree.Node{Namespace: "ns", Name: "serve", Composite: true, Gang: true, Min: 1},
			tree.Node{Namespace: "ns", Name: "rep", Composite: true, Gang: true, Min: 2, Parent: "serve", Domain: gangtest.RackKey},
			decode("rep"), prefill("rep")),
		"basic rack composite above the job": indexOf(
			tree.Node{Namespace: "ns", Name: "top", Composite: true, Min: 1, Domain: gangtest.RackKey},
			tree.Node{Namespace: "ns", Name: "serve", Composite: true, Gang: true, Min: 2, Parent: "top"},
			decode("serve"), prefill("serve")),
	} {
		t.Run(name, func(t *testing.T) {
			racks, ok, j := partsPlan(t, x, nodes, pods, nil)
			t.Logf("outer=%+v parts=%d domain=%v", j.Outer, len(j.Parts), j.Domain)
			if ok && len(racks) > 1 {
				t.Errorf("plan OK across racks %v: the job's required rack is split", racks)
			}
		})
	}
}

// TestJobRoomInPartsIsTheSameWhateverTheOrder: the plan in parts does not depend on the order the pod
// store lists members in, so a recheck finds the same room.
func TestJobRoomInPartsIsTheSameWhateverTheOrder(t *testing.T) {
	x := indexOf(tree.Node{Namespace: "ns", Name: "serve", Composite: true, Gang: true, Min: 2, Domain: gangtest.BlockKey},
		tree.Node{Namespace: "ns", Name: "decode", Gang: true, Min: 4, Parent: "serve"},
		tree.Node{Namespace: "ns", Name: "prefill", Gang: true, Min: 2, Parent: "serve"})
	own := map[string]string{"ns/prefill": gangtest.RackKey, "ns/decode": gangtest.RackKey}
	var first *JobPreemption
	var firstPlan []string
	rng := rand.New(rand.NewSource(1))
	for i := 0; i < 30; i++ {
		pods := map[string][]*v1.Pod{"decode": role("decode", 6, "1"), "prefill": role("prefill", 3, "1")}
		for _, ps := range pods {
			rng.Shuffle(len(ps), func(a, b int) { ps[a], ps[b] = ps[b], ps[a] })
		}
		nodes := gangtest.RackedCluster()
		root, _ := x.Resolve("ns", "decode")
		g := New("ns", "decode", "uid")
		in := treeIn(g, pods["decode"][0], 0, nodes, map[string]*Gang{g.Key(): g}, root, pods)
		in.OwnDomain = own
		j, ok := JobToReserve(in, root, g.Key())
		if !ok || len(j.Parts) != 2 {
			t.Fatalf("ok %v parts %d", ok, len(j.Parts))
		}
		p := PlanRoom(ReserveIn{Pod: pods["decode"][0], Logger: klog.Background(), Job: &j,
			Nodes: func() ([]fwk.NodeInfo, error) { return nodes, nil }, Claims: func(int32) []*v1.Pod { return nil }}, *j.room())
		var got []string
		for _, a := range p.Assignment {
			got = append(got, a.Pod.Name+"@"+a.Node)
		}
		slices.Sort(got)
		if first == nil {
			first, firstPlan = &j, got
			t.Logf("plan %v: %s", got, p.Message)
		} else if !slices.Equal(got, firstPlan) {
			t.Fatalf("round %d: plan %v, first %v", i, got, firstPlan)
		}
	}
}

// TestJobRoomInPartsPinsTheirSharedDomain: two replicas (decode's, prefill's) under a pair that
// requires one block, not placed yet, each replica requiring a rack: block b1 has one rack, b2 two.
// The room is held in b2, a rack each, never across the blocks.
func TestJobRoomInPartsPinsTheirSharedDomain(t *testing.T) {
	nodes := []fwk.NodeInfo{gangtest.RackedNode("n1", "z1", "b1", "r1"), gangtest.RackedNode("n3", "z1", "b2", "r3"), gangtest.RackedNode("n4", "z1", "b2", "r4")}
	pods := map[string][]*v1.Pod{"decode": role("decode", 2, "2"), "prefill": role("prefill", 2, "2")}
	x := indexOf(
		tree.Node{Namespace: "ns", Name: "set", Composite: true, Gang: true, Min: 1, Domain: gangtest.ZoneKey},
		tree.Node{Namespace: "ns", Name: "pair", Composite: true, Gang: true, Min: 2, Parent: "set", Domain: gangtest.BlockKey},
		tree.Node{Namespace: "ns", Name: "rep0", Composite: true, Gang: true, Min: 1, Parent: "pair", Domain: gangtest.RackKey},
		tree.Node{Namespace: "ns", Name: "rep1", Composite: true, Gang: true, Min: 1, Parent: "pair", Domain: gangtest.RackKey},
		tree.Node{Namespace: "ns", Name: "decode", Gang: true, Min: 2, Parent: "rep0"},
		tree.Node{Namespace: "ns", Name: "prefill", Gang: true, Min: 2, Parent: "rep1"})
	racks, ok, j := partsPlan(t, x, nodes, pods, nil)
	if !ok || !slices.Equal(racks, []string{"r3", "r4"}) {
		t.Errorf("plan OK %v in racks %v (%d parts); want b2's racks r3 and r4", ok, racks, len(j.Parts))
	}
}
