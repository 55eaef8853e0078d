package gangfit

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/klog/v2/ktesting"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework"
	st "k8s.io/kubernetes/pkg/scheduler/testing"

	"github.com/custom-scheduler/custom-scheduler/pkg/apis/config"
	"github.com/custom-scheduler/custom-scheduler/pkg/apis/scheduling/v1alpha1"
)

// domNode is a node with cpu CPUs, mem memory, 110 pod slots and the labels.
func domNode(name, cpu, mem string, labels map[string]string, pods ...*v1.Pod) fwk.NodeInfo {
	n := st.MakeNode().Name(name).Capacity(map[v1.ResourceName]string{v1.ResourceCPU: cpu, v1.ResourceMemory: mem, v1.ResourcePods: "110"}).Obj()
	n.Labels = labels
	ni := framework.NewNodeInfo(pods...)
	ni.SetNode(n)
	return ni
}

// domCluster is rackedCluster's layout (r1: 2 nodes, r2: 4 in block b1; r3: 3 in block b2; "bare")
// with every node of the listed racks full (a 4-CPU pod of priority 0 on each).
func domCluster(fullRacks ...string) []fwk.NodeInfo {
	full := sets.New(fullRacks...)
	var nodes []fwk.NodeInfo
	for _, ni := range rackedCluster() {
		n := ni.Node()
		rack := n.Labels[rackKey]
		if !full.Has(rack) {
			nodes = append(nodes, ni)
			continue
		}
		nodes = append(nodes, rackedNode(n.Name, n.Labels[zoneKey], n.Labels[blockKey], rack, running("busy-"+n.Name, "", n.Name, "4", 0)))
	}
	return nodes
}

// domNames lists the nodes named by prefix and index range, e.g. ("r2-", 0, 4) → r2-0..r2-3.
func domNames(prefix string, from, to int) []string {
	var out []string
	for i := from; i < to; i++ {
		out = append(out, fmt.Sprintf("%s%d", prefix, i))
	}
	return out
}

func TestPolicyLevels(t *testing.T) {
	cases := []struct {
		name      string
		policy    Policy
		want      []topologyLevel
		wantEmpty bool
	}{
		{name: "empty policy", policy: Policy{Source: "default"}, want: []topologyLevel{}, wantEmpty: true},
		{name: "an empty preferred list is empty", policy: Policy{Preferred: []string{}}, want: []topologyLevel{}, wantEmpty: true},
		{name: "required only", policy: Policy{Required: rackKey}, want: []topologyLevel{{key: rackKey, required: true}}},
		{name: "preferred only, narrowest first", policy: Policy{Preferred: []string{rackKey, blockKey}},
			want: []topologyLevel{{key: rackKey, rank: 1}, {key: blockKey, rank: 2}}},
		{name: "preferred keys then the required one", policy: Policy{Required: zoneKey, Preferred: []string{rackKey, blockKey}},
			want: []topologyLevel{{key: rackKey, rank: 1}, {key: blockKey, rank: 2}, {key: zoneKey, required: true}}},
		{name: "a preferred key equal to the required one is tried once, as required", policy: Policy{Required: blockKey, Preferred: []string{rackKey, blockKey}},
			want: []topologyLevel{{key: rackKey, rank: 1}, {key: blockKey, required: true}}},
		{name: "the required key listed first among the preferred still comes last", policy: Policy{Required: zoneKey, Preferred: []string{zoneKey, rackKey}},
			want: []topologyLevel{{key: rackKey, rank: 2}, {key: zoneKey, required: true}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, tc.policy.levels(), cmp.AllowUnexported(topologyLevel{})); diff != "" {
				t.Errorf("levels (-want,+got):\n%s", diff)
			}
			if got := tc.policy.Empty(); got != tc.wantEmpty {
				t.Errorf("Empty() = %v, want %v", got, tc.wantEmpty)
			}
		})
	}
}

func TestDomainsOf(t *testing.T) {
	free := func(nodes ...fwk.NodeInfo) []freeNode {
		out := make([]freeNode, len(nodes))
		for i, ni := range nodes {
			out[i] = freeNode{node: ni.Node()}
		}
		return out
	}
	mixed := free(rackedNode("n0", "", "", "rb"), rackedNode("n1", "z1", "", ""), rackedNode("n2", "", "", "ra"),
		rackedNode("n3", "", "", "rb"), rackedNode("n4", "", "", "rc"), rackedNode("n5", "", "", "rb"))
	cases := []struct {
		name       string
		free       []freeNode
		key        string
		wantValues []string
		wantDoms   map[string][]int
	}{
		{name: "values sorted, index lists in node order, nodes without the label in no domain", free: mixed, key: rackKey,
			wantValues: []string{"ra", "rb", "rc"}, wantDoms: map[string][]int{"ra": {2}, "rb": {0, 3, 5}, "rc": {4}}},
		{name: "another key of the same nodes", free: mixed, key: zoneKey,
			wantValues: []string{"z1"}, wantDoms: map[string][]int{"z1": {1}}},
		{name: "no node has the label", free: mixed, key: "example.com/pod", wantDoms: map[string][]int{}},
		{name: "no nodes", key: rackKey, wantDoms: map[string][]int{}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			values, doms := domainsOf(tc.free, tc.key)
			if diff := cmp.Diff(tc.wantValues, values); diff != "" {
				t.Errorf("values (-want,+got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.wantDoms, doms); diff != "" {
				t.Errorf("domains (-want,+got):\n%s", diff)
			}
		})
	}

	// The lists share one array: growing one must not write into the next one's elements.
	for _, grown := range []string{"rb", "ra", "rc"} {
		t.Run("appending to "+grown+" leaves the other domains alone", func(t *testing.T) {
			_, doms := domainsOf(mixed, rackKey)
			want := map[string][]int{"ra": {2}, "rb": {0, 3, 5}, "rc": {4}}
			_ = append(doms[grown], 99, 98)
			if diff := cmp.Diff(want, doms); diff != "" {
				t.Errorf("domains after an append to %s (-want,+got):\n%s", grown, diff)
			}
		})
	}
}

func TestPinnedDomains(t *testing.T) {
	policy := Policy{Required: zoneKey, Preferred: []string{rackKey, blockKey}}
	at := func(nis ...fwk.NodeInfo) []*v1.Node {
		out := make([]*v1.Node, len(nis))
		for i, ni := range nis {
			out[i] = ni.Node()
		}
		return out
	}
	r1a, r1b := rackedNode("r1-0", "z1", "b1", "r1"), rackedNode("r1-1", "z1", "b1", "r1")
	r2 := rackedNode("r2-0", "z1", "b1", "r2")
	r3 := rackedNode("r3-0", "z1", "b2", "r3")
	noRack := rackedNode("x", "z1", "b1", "")
	bare := rackedNode("bare", "", "", "")
	cases := []struct {
		name   string
		policy Policy
		bound  []*v1.Node
		want   map[string]string
	}{
		{name: "no bound members", policy: policy, want: nil},
		{name: "no bound members (empty list)", policy: policy, bound: []*v1.Node{}, want: nil},
		{name: "one bound member", policy: policy, bound: at(r2), want: map[string]string{rackKey: "r2", blockKey: "b1", zoneKey: "z1"}},
		{name: "all in one rack: that rack, block and zone", policy: policy, bound: at(r1a, r1b, r1a),
			want: map[string]string{rackKey: "r1", blockKey: "b1", zoneKey: "z1"}},
		{name: "split across racks of one block", policy: policy, bound: at(r1a, r2),
			want: map[string]string{rackKey: "", blockKey: "b1", zoneKey: "z1"}},
		{name: "split across blocks", policy: policy, bound: at(r1a, r3),
			want: map[string]string{rackKey: "", blockKey: "", zoneKey: "z1"}},
		{name: "a node without the rack label, first", policy: policy, bound: at(noRack, r1a),
			want: map[string]string{rackKey: "", blockKey: "b1", zoneKey: "z1"}},
		{name: "a node without the rack label, last", policy: policy, bound: at(r1a, noRack),
			want: map[string]string{rackKey: "", blockKey: "b1", zoneKey: "z1"}},
		{name: "a node without any label", policy: policy, bound: at(r1a, bare),
			want: map[string]string{rackKey: "", blockKey: "", zoneKey: ""}},
		{name: "only the policy's keys", policy: Policy{Required: rackKey}, bound: at(r1a, r1b), want: map[string]string{rackKey: "r1"}},
		{name: "an empty policy pins nothing", policy: Policy{}, bound: at(r1a), want: map[string]string{}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, PinnedDomains(tc.policy, tc.bound)); diff != "" {
				t.Errorf("pinned (-want,+got):\n%s", diff)
			}
		})
	}
}

func TestChoosePlacementCases(t *testing.T) {
	logger, _ := ktesting.NewTestContext(t)
	b1 := append(domNames("r1-", 0, 2), domNames("r2-", 0, 4)...)
	z1 := append(append([]string(nil), b1...), domNames("r3-", 0, 3)...)
	oneRack := func(name, rack, mem string) fwk.NodeInfo {
		return domNode(name, "4", mem, map[string]string{rackKey: rack})
	}
	cases := []struct {
		name      string
		gang      []*v1.Pod
		policy    Policy
		nodes     []fwk.NodeInfo
		pinned    map[string]string
		busy      map[string]bool
		nominated map[string]bool
		refused   map[string]time.Time
		wantOK    bool
		want      Placement
		wantNodes []string
	}{
		{name: "the only rack that fits and is not busy, though looser", gang: gangOf(2, "3"), policy: Policy{Required: rackKey},
			busy:   map[string]bool{rackKey + "=r1": true, rackKey + "=r3": true},
			wantOK: true, want: Placement{Key: rackKey, Value: "r2", Level: LevelRequired, Message: "placed in example.com/rack=r2 (required example.com/rack)"},
			wantNodes: domNames("r2-", 0, 4)},
		{name: "every rack that fits is busy: the tightest of them", gang: gangOf(2, "3"), policy: Policy{Required: rackKey},
			busy:   map[string]bool{rackKey + "=r1": true, rackKey + "=r2": true, rackKey + "=r3": true},
			wantOK: true, want: Placement{Key: rackKey, Value: "r1", Level: LevelRequired, Message: "placed in example.com/rack=r1 (required example.com/rack)"},
			wantNodes: domNames("r1-", 0, 2)},
		// A job that preempted in parts nominated this group's members in its part's rack: the group
		// goes there, not to the tighter rack another part's members are nominated to.
		{name: "the rack the members are nominated in, though looser", gang: gangOf(2, "3"), policy: Policy{Required: rackKey},
			nominated: map[string]bool{rackKey + "=r2": true},
			wantOK:    true, want: Placement{Key: rackKey, Value: "r2", Level: LevelRequired, Message: "placed in example.com/rack=r2 (required example.com/rack)"},
			wantNodes: domNames("r2-", 0, 4)},
		{name: "a nominated rack before a busy one, though busy", gang: gangOf(2, "3"), policy: Policy{Required: rackKey},
			nominated: map[string]bool{rackKey + "=r2": true}, busy: map[string]bool{rackKey + "=r2": true},
			wantOK: true, want: Placement{Key: rackKey, Value: "r2", Level: LevelRequired, Message: "placed in example.com/rack=r2 (required example.com/rack)"},
			wantNodes: domNames("r2-", 0, 4)},
		{name: "a nominated rack the filters refused comes after one they did not", gang: gangOf(2, "3"), policy: Policy{Required: rackKey},
			nominated: map[string]bool{rackKey + "=r2": true}, refused: map[string]time.Time{rackKey + "=r2": time.Unix(1, 0)},
			wantOK: true, want: Placement{Key: rackKey, Value: "r1", Level: LevelRequired, Message: "placed in example.com/rack=r1 (required example.com/rack): avoiding example.com/rack=r2, refused by the filters recently"},
			wantNodes: domNames("r1-", 0, 2)},
		{name: "a stale nomination in a rack without room steers nothing", gang: gangOf(3, "3"), policy: Policy{Required: rackKey},
			nominated: map[string]bool{rackKey + "=r1": true},
			wantOK:    true, want: Placement{Key: rackKey, Value: "r3", Level: LevelRequired, Message: "placed in example.com/rack=r3 (required example.com/rack)"},
			wantNodes: domNames("r3-", 0, 3)},
		{name: "a busy domain of another key does not count", gang: gangOf(2, "3"), policy: Policy{Required: rackKey},
			busy:   map[string]bool{blockKey + "=b1": true, "r1": true},
			wantOK: true, want: Placement{Key: rackKey, Value: "r1", Level: LevelRequired, Message: "placed in example.com/rack=r1 (required example.com/rack)"},
			wantNodes: domNames("r1-", 0, 2)},
		{name: "a tie on leftover goes to the first name, whatever the node order", gang: gangOf(1, "3"), policy: Policy{Required: rackKey},
			nodes:  []fwk.NodeInfo{oneRack("c", "rc", "8Gi"), oneRack("a", "ra", "8Gi"), oneRack("b", "rb", "8Gi")},
			wantOK: true, want: Placement{Key: rackKey, Value: "ra", Level: LevelRequired, Message: "placed in example.com/rack=ra (required example.com/rack)"},
			wantNodes: []string{"a"}},
		{name: "equal CPU left: the least memory left wins over the name", gang: gangOf(1, "3"), policy: Policy{Required: rackKey},
			nodes:  []fwk.NodeInfo{oneRack("a", "ra", "16Gi"), oneRack("b", "rb", "8Gi")},
			wantOK: true, want: Placement{Key: rackKey, Value: "rb", Level: LevelRequired, Message: "placed in example.com/rack=rb (required example.com/rack)"},
			wantNodes: []string{"b"}},
		{name: "a pinned rack too small for the required key", gang: gangOf(3, "3"), policy: Policy{Required: rackKey},
			pinned: map[string]string{rackKey: "r1"},
			want:   Placement{Message: "no example.com/rack domain has room for 3 members; the best fits 2"}},
		{name: "bound members split across racks fall through to their block", gang: gangOf(1, "3"), policy: Policy{Preferred: []string{rackKey, blockKey}},
			pinned: map[string]string{rackKey: "", blockKey: "b1"},
			wantOK: true, want: Placement{Key: blockKey, Value: "b1", Level: LevelPreferred,
				Message: "placed in example.com/block=b1 (preferred level 2 of 2): the bound members are not in one example.com/rack domain"},
			wantNodes: b1},
		{name: "bound members sharing no preferred domain: anywhere", gang: gangOf(1, "3"), policy: Policy{Preferred: []string{rackKey}},
			pinned: map[string]string{rackKey: ""},
			wantOK: true, want: Placement{Level: LevelAnywhere, Message: "placed anywhere: the bound members are not in one example.com/rack domain"}},
		{name: "a pinned map without the required key is a split", gang: gangOf(1, "3"), policy: Policy{Required: rackKey},
			pinned: map[string]string{blockKey: "b1"},
			want:   Placement{Message: "the bound members are not in one example.com/rack domain"}},
		{name: "notes for each level that did not fit", gang: gangOf(7, "3"), policy: Policy{Required: zoneKey, Preferred: []string{rackKey, blockKey}},
			wantOK: true, want: Placement{Key: zoneKey, Value: "z1", Level: LevelRequired,
				Message: "placed in topology.kubernetes.io/zone=z1 (required topology.kubernetes.io/zone): " +
					"no example.com/rack domain has room for 7 members; the best fits 4; no example.com/block domain has room for 7 members; the best fits 6"},
			wantNodes: z1},
		{name: "the first preferred level that fits, its number in the message", gang: gangOf(5, "3"), policy: Policy{Preferred: []string{rackKey, blockKey, zoneKey}},
			wantOK: true, want: Placement{Key: blockKey, Value: "b1", Level: LevelPreferred,
				Message: "placed in example.com/block=b1 (preferred level 2 of 3): no example.com/rack domain has room for 5 members; the best fits 4"},
			wantNodes: b1},
		{name: "no node has the preferred label: anywhere", gang: gangOf(1, "3"), policy: Policy{Preferred: []string{"example.com/pod"}},
			wantOK: true, want: Placement{Level: LevelAnywhere, Message: "placed anywhere: no node has the label example.com/pod"}},
		{name: "no node has the required label", gang: gangOf(1, "3"), policy: Policy{Required: "example.com/pod"},
			want: Placement{Message: "no node has the label example.com/pod"}},
		// A preferred domain must lie in one domain of the required key: with no node carrying the
		// required label, no rack qualifies and the required level finds no domain.
		{name: "a preferred rack outside every required domain is not taken", gang: gangOf(1, "3"),
			policy: Policy{Required: "example.com/pod", Preferred: []string{rackKey}},
			want:   Placement{Message: "no example.com/rack domain lies in one example.com/pod domain; no node has the label example.com/pod"}},
		{name: "an empty policy: anywhere", gang: gangOf(1, "3"), policy: Policy{},
			wantOK: true, want: Placement{Level: LevelAnywhere, Message: "placed anywhere"}},
		{name: "a preferred key equal to the required one is tried once", gang: gangOf(5, "3"), policy: Policy{Required: rackKey, Preferred: []string{rackKey}},
			want: Placement{Message: "no example.com/rack domain has room for 5 members; the best fits 4"}},
		{name: "members fitting nowhere: the best domain fits none", gang: gangOf(1, "5"), policy: Policy{Required: blockKey},
			want: Placement{Message: "no example.com/block domain has room for 1 members; the best fits 0"}},
		// A pinned value that no node of the check carries is a domain of no node: nothing fits there.
		{name: "a pinned value no node carries holds nothing", gang: gangOf(1, "3"), policy: Policy{Required: rackKey},
			pinned: map[string]string{rackKey: "r9"},
			want:   Placement{Message: "no example.com/rack domain has room for 1 members; the best fits 0"}},
		// Racks of one name in two zones are one rack label value, which spans both zones: it is no
		// preferred domain of a gang whose zone is required, which goes to one zone instead.
		{name: "a rack name reused in two zones is not one domain", gang: gangOf(2, "3"), policy: Policy{Required: zoneKey, Preferred: []string{rackKey}},
			nodes:  []fwk.NodeInfo{rackedNode("za", "z1", "", "rack-1"), rackedNode("zb", "z2", "", "rack-1"), rackedNode("zc", "z2", "", "rack-2")},
			wantOK: true, want: Placement{Key: zoneKey, Value: "z2", Level: LevelRequired,
				Message: "placed in topology.kubernetes.io/zone=z2 (required topology.kubernetes.io/zone): no example.com/rack domain has room for 2 members; the best fits 1"},
			wantNodes: []string{"zb", "zc"}},
		{name: "the preferred level's number counts the required key's place in the list", gang: gangOf(1, "3"),
			policy: Policy{Required: zoneKey, Preferred: []string{zoneKey, rackKey}}, pinned: map[string]string{zoneKey: "z1", rackKey: "r1"},
			wantOK: true, want: Placement{Key: rackKey, Value: "r1", Level: LevelPreferred, Message: "placed in example.com/rack=r1 (preferred level 2 of 2)"},
			wantNodes: domNames("r1-", 0, 2)},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := choosePlacementAvoiding(logger, tc.nodes, tc.gang, tc.policy, tc.pinned, Avoid{Busy: tc.busy, Refused: tc.refused, Nominated: tc.nominated})
			if ok != tc.wantOK {
				t.Errorf("ok = %v, want %v", ok, tc.wantOK)
			}
			want := tc.want
			if tc.wantNodes != nil {
				want.Nodes = sets.New(tc.wantNodes...)
			}
			// The shortfall's numbers are TestShortfall's; here: one exactly when no domain fits.
			if diff := cmp.Diff(want, got, cmpopts.IgnoreFields(Placement{}, "Shortfall")); diff != "" {
				t.Errorf("placement (-want,+got):\n%s", diff)
			}
			if (got.Shortfall != nil) != !ok || (got.Shortfall != nil && got.Shortfall.Reason != v1alpha1.ShortfallTopologyDomain) {
				t.Errorf("ok %v with shortfall %+v", ok, got.Shortfall)
			}
		})
	}
}

func TestPinnedPlacement(t *testing.T) {
	policy := Policy{Required: zoneKey, Preferred: []string{rackKey, blockKey}}
	nodes := append(rackedCluster(), framework.NewNodeInfo()) // one NodeInfo without its node
	b1 := append(domNames("r1-", 0, 2), domNames("r2-", 0, 4)...)
	anywhere := Placement{Level: LevelAnywhere, Message: "placed anywhere: its bound members share no domain of the policy"}
	cases := []struct {
		name      string
		policy    Policy
		pinned    map[string]string
		want      Placement
		wantNodes []string
	}{
		{name: "the narrowest shared level: a preferred rack", policy: policy, pinned: map[string]string{rackKey: "r1", blockKey: "b1", zoneKey: "z1"},
			want:      Placement{Key: rackKey, Value: "r1", Level: LevelPreferred, Message: "placed in example.com/rack=r1, where its bound members are"},
			wantNodes: domNames("r1-", 0, 2)},
		{name: "split racks: the block", policy: policy, pinned: map[string]string{rackKey: "", blockKey: "b1", zoneKey: "z1"},
			want:      Placement{Key: blockKey, Value: "b1", Level: LevelPreferred, Message: "placed in example.com/block=b1, where its bound members are"},
			wantNodes: b1},
		{name: "only the required zone is shared", policy: policy, pinned: map[string]string{rackKey: "", blockKey: "", zoneKey: "z1"},
			want:      Placement{Key: zoneKey, Value: "z1", Level: LevelRequired, Message: "placed in topology.kubernetes.io/zone=z1, where its bound members are"},
			wantNodes: append(b1, domNames("r3-", 0, 3)...)},
		{name: "a required rack", policy: Policy{Required: rackKey}, pinned: map[string]string{rackKey: "r3"},
			want:      Placement{Key: rackKey, Value: "r3", Level: LevelRequired, Message: "placed in example.com/rack=r3, where its bound members are"},
			wantNodes: domNames("r3-", 0, 3)},
		{name: "a shared value of no node: no nodes", policy: Policy{Required: rackKey}, pinned: map[string]string{rackKey: "r9"},
			want:      Placement{Key: rackKey, Value: "r9", Level: LevelRequired, Message: "placed in example.com/rack=r9, where its bound members are"},
			wantNodes: []string{}},
		{name: "nothing shared: anywhere", policy: policy, pinned: map[string]string{rackKey: "", blockKey: "", zoneKey: ""}, want: anywhere},
		{name: "no bound members: anywhere", policy: policy, want: anywhere},
		{name: "an empty policy: anywhere", policy: Policy{}, pinned: map[string]string{rackKey: "r1"}, want: anywhere},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			want := tc.want
			if tc.wantNodes != nil {
				want.Nodes = sets.New(tc.wantNodes...)
			}
			if diff := cmp.Diff(want, PinnedPlacement(tc.policy, tc.pinned, nodes)); diff != "" {
				t.Errorf("placement (-want,+got):\n%s", diff)
			}
		})
	}
}

func TestBoundNodes(t *testing.T) {
	nodes := append(rackedCluster(), framework.NewNodeInfo())
	on := func(name, nodeName string) *v1.Pod {
		p := member(name, "g", "1")
		p.Spec.NodeName = nodeName
		return p
	}
	cases := []struct {
		name string
		pods []*v1.Pod
		want []string // nil: no list at all
	}{
		{name: "no pods", want: nil},
		{name: "unbound pods only", pods: []*v1.Pod{on("a", ""), on("b", "")}, want: nil},
		{name: "in the snapshot's order, each node once, unbound and unknown nodes ignored",
			pods: []*v1.Pod{on("a", "r3-1"), on("b", ""), on("c", "r1-0"), on("d", "gone"), on("e", "r3-1"), on("f", "r1-0")},
			want: []string{"r1-0", "r3-1"}},
		{name: "bound only to nodes not in the snapshot: an empty list", pods: []*v1.Pod{on("a", "gone")}, want: []string{}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := BoundNodes(tc.pods, nodes)
			var names []string
			if got != nil {
				names = []string{}
				for _, n := range got {
					names = append(names, n.Name)
				}
			}
			if diff := cmp.Diff(tc.want, names); diff != "" {
				t.Errorf("bound nodes (-want,+got):\n%s", diff)
			}
		})
	}
}

func TestPlacementPreFilterResult(t *testing.T) {
	cases := []struct {
		name string
		pl   *Placement
		want *fwk.PreFilterResult
	}{
		{name: "no placement", pl: nil, want: nil},
		{name: "anywhere", pl: &Placement{Level: LevelAnywhere, Message: "placed anywhere"}, want: nil},
		{name: "a domain: its nodes", pl: &Placement{Key: rackKey, Value: "r1", Level: LevelRequired, Nodes: sets.New("r1-0", "r1-1")},
			want: &fwk.PreFilterResult{NodeNames: sets.New("r1-0", "r1-1")}},
		{name: "a domain of no node: no node", pl: &Placement{Key: rackKey, Value: "r9", Nodes: sets.New[string]()},
			want: &fwk.PreFilterResult{NodeNames: sets.New[string]()}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, tc.pl.PreFilterResult()); diff != "" {
				t.Errorf("PreFilterResult (-want,+got):\n%s", diff)
			}
		})
	}
}

func TestPolicyForRows(t *testing.T) {
	plain := makePG("ns", "g", 2, time.Time{})
	withSpec := func(tp *v1alpha1.TopologyPolicy) *v1alpha1.PodGroup {
		pg := makePG("ns", "g", 2, time.Time{})
		pg.Spec.TopologyPolicy = tp
		return pg
	}
	annotated := func(ann map[string]string) *v1.Pod {
		p := member("m", "g", "1")
		p.Annotations = ann
		return p
	}
	labelErr := func(key string) string { return strings.Join(validation.IsQualifiedName(key), "; ") }
	def := config.TopologyPolicy{Required: zoneKey, Preferred: []string{blockKey}}
	cases := []struct {
		name    string
		pg      *v1alpha1.PodGroup
		pod     *v1.Pod
		want    Policy
		wantErr string
	}{
		{name: "a spec with only preferred keys", pg: withSpec(&v1alpha1.TopologyPolicy{Preferred: []v1alpha1.TopologyKey{rackKey, blockKey}}),
			pod:  annotated(map[string]string{AnnotationTopologyRequired: zoneKey}),
			want: Policy{Preferred: []string{rackKey, blockKey}, Source: "spec"}},
		{name: "an empty spec policy gives way to the annotations", pg: withSpec(&v1alpha1.TopologyPolicy{}),
			pod:  annotated(map[string]string{AnnotationTopologyRequired: rackKey}),
			want: Policy{Required: rackKey, Source: "annotation"}},
		{name: "an empty spec policy and no annotation: the default", pg: withSpec(&v1alpha1.TopologyPolicy{Preferred: []v1alpha1.TopologyKey{}}),
			pod: member("m", "g", "1"), want: Policy{Required: zoneKey, Preferred: []string{blockKey}, Source: "default"}},
		{name: "an annotation with only preferred keys", pg: plain, pod: annotated(map[string]string{AnnotationTopologyPreferred: rackKey}),
			want: Policy{Preferred: []string{rackKey}, Source: "annotation"}},
		{name: "whitespace around keys is trimmed", pg: plain,
			pod:  annotated(map[string]string{AnnotationTopologyRequired: "  " + zoneKey + " ", AnnotationTopologyPreferred: " " + rackKey + " ,\t" + blockKey}),
			want: Policy{Required: zoneKey, Preferred: []string{rackKey, blockKey}, Source: "annotation"}},
		{name: "other annotations do not count", pg: plain, pod: annotated(map[string]string{"example.com/other": rackKey}),
			want: Policy{Required: zoneKey, Preferred: []string{blockKey}, Source: "default"}},
		{name: "a malformed required annotation", pg: plain, pod: annotated(map[string]string{AnnotationTopologyRequired: "not a key", AnnotationTopologyPreferred: rackKey}),
			wantErr: `annotation custom-scheduler.io/topology-required="not a key" is not a label key: ` + labelErr("not a key")},
		{name: "an empty required annotation", pg: plain, pod: annotated(map[string]string{AnnotationTopologyRequired: " "}),
			wantErr: `annotation custom-scheduler.io/topology-required=" " is not a label key: ` + labelErr("")},
		{name: "an empty preferred key", pg: plain, pod: annotated(map[string]string{AnnotationTopologyPreferred: rackKey + ","}),
			wantErr: `annotation custom-scheduler.io/topology-preferred="example.com/rack,": "" is not a label key: ` + labelErr("")},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := PolicyFor(tc.pg, tc.pod, def)
			gotErr := ""
			if err != nil {
				gotErr = err.Error()
			}
			if gotErr != tc.wantErr {
				t.Fatalf("error %q, want %q", gotErr, tc.wantErr)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("policy (-want,+got):\n%s", diff)
			}
		})
	}
}

func TestExtraMemberPlacement(t *testing.T) {
	logger, _ := ktesting.NewTestContext(t)
	b1 := append(domNames("r1-", 0, 2), domNames("r2-", 0, 4)...)
	inR1 := map[string]string{rackKey: "r1", blockKey: "b1", zoneKey: "z1"}
	cases := []struct {
		name      string
		nodes     []fwk.NodeInfo
		noFit     bool
		policy    Policy
		pinned    map[string]string
		want      Placement
		wantNodes []string
	}{
		{name: "no check: the pinned required domain", nodes: domCluster(), noFit: true, policy: Policy{Required: blockKey, Preferred: []string{rackKey}}, pinned: inR1,
			want:      Placement{Key: blockKey, Value: "b1", Level: LevelRequired, Message: "placed in example.com/block=b1, where its bound members are"},
			wantNodes: b1},
		{name: "no check and no required key: anywhere, the preferred pins aside", nodes: domCluster(), noFit: true, policy: Policy{Preferred: []string{rackKey}}, pinned: inR1,
			want: Placement{Level: LevelAnywhere, Message: "placed anywhere: its bound members share no domain of the policy"}},
		{name: "the narrowest shared domain has room", nodes: domCluster(), policy: Policy{Preferred: []string{rackKey, blockKey}}, pinned: inR1,
			want:      Placement{Key: rackKey, Value: "r1", Level: LevelPreferred, Message: "placed in example.com/rack=r1 (preferred level 1 of 2)"},
			wantNodes: domNames("r1-", 0, 2)},
		{name: "the narrowest shared domain is full: the next preferred level", nodes: domCluster("r1"), policy: Policy{Preferred: []string{rackKey, blockKey}}, pinned: inR1,
			want: Placement{Key: blockKey, Value: "b1", Level: LevelPreferred,
				Message: "placed in example.com/block=b1 (preferred level 2 of 2): no example.com/rack domain has room for 1 members; the best fits 0"},
			wantNodes: b1},
		{name: "the preferred rack is full: the required block", nodes: domCluster("r1"), policy: Policy{Required: blockKey, Preferred: []string{rackKey}}, pinned: inR1,
			want: Placement{Key: blockKey, Value: "b1", Level: LevelRequired,
				Message: "placed in example.com/block=b1 (required example.com/block): no example.com/rack domain has room for 1 members; the best fits 0"},
			wantNodes: b1},
		{name: "the shared required rack is kept though full", nodes: domCluster("r1"), policy: Policy{Required: rackKey}, pinned: inR1,
			want:      Placement{Key: rackKey, Value: "r1", Level: LevelRequired, Message: "placed in example.com/rack=r1, where its bound members are"},
			wantNodes: domNames("r1-", 0, 2)},
		{name: "every preferred shared domain full, none required: anywhere", nodes: domCluster("r1", "r2"), policy: Policy{Preferred: []string{rackKey, blockKey}}, pinned: inR1,
			want: Placement{Level: LevelAnywhere, Message: "placed anywhere: no example.com/rack domain has room for 1 members; the best fits 0; " +
				"no example.com/block domain has room for 1 members; the best fits 0"}},
		{name: "no bound members: the tightest rack with room", nodes: domCluster("r1"), policy: Policy{Required: rackKey},
			want:      Placement{Key: rackKey, Value: "r3", Level: LevelRequired, Message: "placed in example.com/rack=r3 (required example.com/rack)"},
			wantNodes: domNames("r3-", 0, 3)},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var f *Fit
			if !tc.noFit {
				f = New(logger, "ns/g", []*v1.Pod{member("extra", "g", "1")}, 1, tc.nodes, nil, nil, nil, false)
			}
			want := tc.want
			if tc.wantNodes != nil {
				want.Nodes = sets.New(tc.wantNodes...)
			}
			if diff := cmp.Diff(want, ExtraMemberPlacement(f, tc.policy, tc.pinned, tc.nodes)); diff != "" {
				t.Errorf("placement (-want,+got):\n%s", diff)
			}
		})
	}
}
