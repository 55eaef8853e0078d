package gangfit

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/klog/v2/ktesting"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/custom-scheduler/custom-scheduler/pkg/apis/scheduling/v1alpha1"
)

// quantities compares resource amounts by value.
var quantities = cmp.Comparer(func(a, b resource.Quantity) bool { return a.Cmp(b) == 0 })

// cpuRow is a CPU row of a shortfall: requested in total, free in total, the largest member, the
// roomiest node's free.
func cpuRow(requested, free, member, largest string) v1alpha1.ResourceShortfall {
	return v1alpha1.ResourceShortfall{Name: v1.ResourceCPU, Requested: resource.MustParse(requested), Free: resource.MustParse(free),
		Member: resource.MustParse(member), LargestFree: resource.MustParse(largest)}
}

// TestShortfall checks the numbers of every way the whole-gang check can fail, as the PodGroup's
// status carries them: each row is one reason.
func TestShortfall(t *testing.T) {
	logger, _ := ktesting.NewTestContext(t)
	two := []fwk.NodeInfo{node("a", "4"), node("b", "4")}
	eights := []fwk.NodeInfo{node("a", "8"), node("b", "8")}
	cases := []struct {
		name         string
		candidates   []*v1.Pod
		need         int
		nodes        []fwk.NodeInfo
		minResources v1.ResourceList
		want         *v1alpha1.PodGroupShortfall
	}{
		{name: "too few members exist", candidates: gangOf(2, "1"), need: 3, nodes: two,
			want: &v1alpha1.PodGroupShortfall{Reason: v1alpha1.ShortfallTooFewMembers, Needed: 3, Unscheduled: 2}},
		{name: "the nodes fit only some, node by node", candidates: gangOf(3, "3"), need: 3, nodes: two,
			want: &v1alpha1.PodGroupShortfall{Reason: v1alpha1.ShortfallNodeRoom, Needed: 3, Placeable: 2, Unscheduled: 3,
				Resources: []v1alpha1.ResourceShortfall{cpuRow("9", "8", "3", "4")}, LargestFreeNode: "a"}},
		{name: "a member larger than the roomiest node, though the total would do", candidates: gangOf(1, "12"), need: 1, nodes: eights,
			want: &v1alpha1.PodGroupShortfall{Reason: v1alpha1.ShortfallNodeRoom, Needed: 1, Unscheduled: 1,
				Resources: []v1alpha1.ResourceShortfall{cpuRow("12", "16", "12", "8")}, LargestFreeNode: "a"}},
		{name: "the roomiest node is the one with most free CPU", candidates: gangOf(2, "5"), need: 2,
			nodes: []fwk.NodeInfo{node("a", "4"), nodeWith("b", "8", running("x", "", "b", "2", 0)), node("c", "3")},
			want: &v1alpha1.PodGroupShortfall{Reason: v1alpha1.ShortfallNodeRoom, Needed: 2, Placeable: 1, Unscheduled: 2,
				Resources: []v1alpha1.ResourceShortfall{cpuRow("10", "13", "5", "6")}, LargestFreeNode: "b"}},
		{name: "a mixed member fits nowhere: its own request", candidates: []*v1.Pod{member("x", "g", "12"), member("y", "g", "1")}, need: 2, nodes: eights,
			want: &v1alpha1.PodGroupShortfall{Reason: v1alpha1.ShortfallMemberFitsNowhere, Needed: 2, Placeable: 1, Unscheduled: 2,
				Resources: []v1alpha1.ResourceShortfall{cpuRow("13", "16", "12", "8")}, LargestFreeNode: "a"}},
		{name: "minResources exceed the free room", candidates: gangOf(2, "1"), need: 2, nodes: two,
			minResources: v1.ResourceList{v1.ResourceCPU: resource.MustParse("10")},
			want: &v1alpha1.PodGroupShortfall{Reason: v1alpha1.ShortfallMinResources, Needed: 2, Unscheduled: 2,
				Resources: []v1alpha1.ResourceShortfall{cpuRow("10", "8", "1", "4")}, LargestFreeNode: "a"}},
		{name: "each resource's own roomiest node and largest request", need: 3,
			candidates: []*v1.Pod{
				rsPod("g0", map[v1.ResourceName]string{v1.ResourceCPU: "1", rsGPU: "1"}), rsPod("g1", map[v1.ResourceName]string{v1.ResourceCPU: "1", rsGPU: "1"}),
				rsPod("g2", map[v1.ResourceName]string{v1.ResourceCPU: "1", rsGPU: "1"})},
			nodes: []fwk.NodeInfo{rsNode("a", map[v1.ResourceName]string{v1.ResourceCPU: "8"}), rsNode("b", map[v1.ResourceName]string{v1.ResourceCPU: "4", rsGPU: "2"})},
			want: &v1alpha1.PodGroupShortfall{Reason: v1alpha1.ShortfallNodeRoom, Needed: 3, Placeable: 2, Unscheduled: 3, LargestFreeNode: "a",
				Resources: []v1alpha1.ResourceShortfall{cpuRow("3", "12", "1", "8"),
					{Name: rsGPU, Requested: resource.MustParse("3"), Free: resource.MustParse("2"), Member: resource.MustParse("1"), LargestFree: resource.MustParse("2")}}}},
		{name: "the request shown is the first member that fits nowhere, not a larger spare one", need: 1,
			candidates: []*v1.Pod{member("small", "g", "2"), member("spare", "g", "12")}, nodes: []fwk.NodeInfo{nodeWith("a", "4", running("x", "", "a", "3", 0))},
			want: &v1alpha1.PodGroupShortfall{Reason: v1alpha1.ShortfallMemberFitsNowhere, Needed: 1, Unscheduled: 2, LargestFreeNode: "a",
				Resources: []v1alpha1.ResourceShortfall{cpuRow("2", "1", "2", "1")}}},
		{name: "feasible: none", candidates: gangOf(2, "1"), need: 2, nodes: two},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			res, f := Check(logger, "ns/g", tc.candidates, tc.need, tc.nodes, tc.minResources, nil, nil, nil)
			if f != nil {
				defer f.Done()
			}
			if diff := cmp.Diff(tc.want, res.Shortfall, quantities); diff != "" {
				t.Errorf("shortfall (-want,+got):\n%s", diff)
			}
		})
	}
}

// TestDomainShortfall checks a required topology key's shortfall: how many members each domain fits,
// the roomiest first.
func TestDomainShortfall(t *testing.T) {
	logger, _ := ktesting.NewTestContext(t)
	cases := []struct {
		name   string
		gang   []*v1.Pod
		policy Policy
		pinned map[string]string
		want   *v1alpha1.PodGroupShortfall
	}{
		{name: "no rack holds five 3-CPU members", gang: gangOf(5, "3"), policy: Policy{Required: rackKey},
			want: &v1alpha1.PodGroupShortfall{Reason: v1alpha1.ShortfallTopologyDomain, Needed: 5, Placeable: 4, Unscheduled: 5,
				Resources: []v1alpha1.ResourceShortfall{cpuRow("15", "40", "3", "4")}, LargestFreeNode: "r1-0", TopologyKey: rackKey,
				Domains: []v1alpha1.DomainShortfall{{Value: "r2", Placeable: 4}, {Value: "r3", Placeable: 3}, {Value: "r1", Placeable: 2}}}},
		{name: "no node has the key: no domain to list", gang: gangOf(2, "3"), policy: Policy{Required: "example.com/none"},
			want: &v1alpha1.PodGroupShortfall{Reason: v1alpha1.ShortfallTopologyDomain, Needed: 2, Unscheduled: 2,
				Resources: []v1alpha1.ResourceShortfall{cpuRow("6", "40", "3", "4")}, LargestFreeNode: "r1-0", TopologyKey: "example.com/none",
				Domains: []v1alpha1.DomainShortfall{}}},
		{name: "bound members in two racks", gang: gangOf(1, "3"), policy: Policy{Required: rackKey}, pinned: map[string]string{},
			want: &v1alpha1.PodGroupShortfall{Reason: v1alpha1.ShortfallTopologyDomain, Needed: 1, Unscheduled: 1,
				Resources: []v1alpha1.ResourceShortfall{cpuRow("3", "40", "3", "4")}, LargestFreeNode: "r1-0", TopologyKey: rackKey,
				Domains: []v1alpha1.DomainShortfall{}}},
		{name: "a rack fits: none", gang: gangOf(4, "3"), policy: Policy{Required: rackKey}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p, _ := choosePlacementOn(logger, nil, tc.gang, tc.policy, tc.pinned, nil)
			if diff := cmp.Diff(tc.want, p.Shortfall, quantities); diff != "" {
				t.Errorf("shortfall (-want,+got):\n%s", diff)
			}
		})
	}
}

// TestDomainShortfallsAtMost caps the domains listed and orders ties by value.
func TestDomainShortfallsAtMost(t *testing.T) {
	placeable := map[string]int{}
	for i := range maxShortfallDomains + 4 {
		placeable[string(rune('a'+i))] = i % 3
	}
	got := domainShortfalls(placeable)
	if len(got) != maxShortfallDomains {
		t.Fatalf("listed %d domains, want %d", len(got), maxShortfallDomains)
	}
	for i := 1; i < len(got); i++ {
		a, b := got[i-1], got[i]
		if a.Placeable < b.Placeable || (a.Placeable == b.Placeable && a.Value > b.Value) {
			t.Errorf("domains %d and %d out of order: %+v, %+v", i-1, i, a, b)
		}
	}
}

// TestDeviceShortfallRows checks a device kind's row in a shortfall: named after the class, counted
// in members (Unit Members), the node whose devices hold most, and per domain of a required key the
// members' claims its devices hold.
func TestDeviceShortfallRows(t *testing.T) {
	logger, _ := ktesting.NewTestContext(t)
	const kind = v1.ResourceName("devices/gpu.example.com")
	deviceRow := func(s *v1alpha1.PodGroupShortfall) *v1alpha1.ResourceShortfall {
		if s == nil {
			return nil
		}
		for i := range s.Resources {
			if s.Resources[i].Name == kind {
				return &s.Resources[i]
			}
		}
		return nil
	}
	want := func(requested, free, largest, node string) *v1alpha1.ResourceShortfall {
		return &v1alpha1.ResourceShortfall{Name: kind, Requested: resource.MustParse(requested), Free: resource.MustParse(free),
			Member: resource.MustParse("1"), LargestFree: resource.MustParse(largest),
			DeviceClass: "gpu.example.com", Unit: v1alpha1.ShortfallUnitMembers, LargestFreeNode: node}
	}

	t.Run("node room: 3 members' devices on 3 nodes, 4 needed", func(t *testing.T) {
		gang := gpuMembers(4, "1")
		d := &fakeDevices{kind: kindOf(gang), devices: map[string]int{"n1": 1, "n2": 2, "n3": 0}, delegated: map[v1.ResourceName]bool{"example.com/gpu": true}}
		nodes := []fwk.NodeInfo{node("n0", "8"), node("n1", "8"), node("n2", "8"), node("n3", "8")}
		res, f := Check(logger, "ns/g", gang, 4, nodes, nil, nil, nil, &Shared{Devices: d})
		defer f.Done()
		if res.Feasible || res.Shortfall == nil {
			t.Fatalf("feasible=%v shortfall=%v: want infeasible with a shortfall", res.Feasible, res.Shortfall)
		}
		if diff := cmp.Diff(want("4", "3", "2", "n2"), deviceRow(res.Shortfall), quantities); diff != "" {
			t.Errorf("device row (-want,+got):\n%s", diff)
		}
		for _, r := range res.Shortfall.Resources {
			if r.Name != kind && (r.DeviceClass != "" || r.Unit != "" || r.LargestFreeNode != "") {
				t.Errorf("row %s is not a device row but has %+v", r.Name, r)
			}
		}
	})

	t.Run("required rack: per domain, the members' claims its devices hold", func(t *testing.T) {
		gang := gpuMembers(4, "2")
		d := &fakeDevices{kind: kindOf(gang), devices: map[string]int{"r2-0": 1, "r3-0": 1, "r3-1": 2}, delegated: map[v1.ResourceName]bool{"example.com/gpu": true}}
		f := New(logger, "ns/g", gang, len(gang), rackedCluster(), nil, nil, &Shared{Devices: d}, false)
		defer f.Done()
		p, ok := ChoosePlacement(f, Policy{Required: rackKey}, nil, nil)
		if ok || p.Shortfall == nil {
			t.Fatalf("placement %+v ok=%v: want no rack and a shortfall", p, ok)
		}
		if diff := cmp.Diff(want("4", "4", "2", "r3-1"), deviceRow(p.Shortfall), quantities); diff != "" {
			t.Errorf("device row (-want,+got):\n%s", diff)
		}
		if want := "the free devices of gpu.example.com in one example.com/rack domain hold at most 3 of the 4 members that claim them"; !strings.Contains(p.Message, want) {
			t.Errorf("message %q does not say %q", p.Message, want)
		}
		got := map[string]int32{}
		for _, dom := range p.Shortfall.Domains {
			if len(dom.Devices) != 1 || dom.Devices[0].Name != kind {
				t.Fatalf("domain %s devices %+v, want one row %s", dom.Value, dom.Devices, kind)
			}
			got[dom.Value] = dom.Devices[0].Free
		}
		if diff := cmp.Diff(map[string]int32{"r1": 0, "r2": 1, "r3": 3}, got); diff != "" {
			t.Errorf("devices per rack (-want,+got):\n%s", diff)
		}
	})

	t.Run("no device kind: no device fields", func(t *testing.T) {
		p, _ := choosePlacementOn(logger, nil, gangOf(5, "3"), Policy{Required: rackKey}, nil, nil)
		for _, dom := range p.Shortfall.Domains {
			if dom.Devices != nil {
				t.Errorf("domain %s has devices %+v for a gang that claims none", dom.Value, dom.Devices)
			}
		}
	})
}

func TestDeviceClassOf(t *testing.T) {
	for name, want := range map[v1.ResourceName]string{
		"devices/gpu.example.com":                   "gpu.example.com",
		"devices/gpu.example.com+nic.example.com":   "gpu.example.com+nic.example.com",
		"devices/gpu.example.com#2":                 "gpu.example.com",
		"devices/gpu.example.com+nic.example.com#1": "gpu.example.com+nic.example.com",
	} {
		if got := DeviceClassOf(name); got != want {
			t.Errorf("DeviceClassOf(%s) = %q, want %q", name, got, want)
		}
	}
}
