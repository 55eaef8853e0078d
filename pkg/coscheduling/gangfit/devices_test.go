package gangfit

import (
	"fmt"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"
	"k8s.io/klog/v2/ktesting"
	fwk "k8s.io/kube-scheduler/framework"
	st "k8s.io/kubernetes/pkg/scheduler/testing"
)

// fakeDevices is a device model with one kind: members in kind claim it; devices[node] is how many
// members' claims each node's free devices hold; delegated are the extended resources it counts.
type fakeDevices struct {
	kind      map[string]bool
	devices   map[string]int
	delegated map[v1.ResourceName]bool
	// unmodelled are the members some of whose ResourceClaims the model does not count.
	unmodelled map[string]bool
	calls      int
}

func (d *fakeDevices) ForCheck(_ klog.Logger, members []*v1.Pod) DeviceCheck {
	for _, m := range members {
		if d.kind[m.Name] {
			return d
		}
	}
	if len(d.delegated) > 0 {
		return d
	}
	return nil
}
func (d *fakeDevices) Kinds() int {
	if len(d.kind) == 0 {
		return 0
	}
	return 1
}
func (d *fakeDevices) Kind(p *v1.Pod) int {
	if d.kind[p.Name] {
		return 0
	}
	return -1
}
func (d *fakeDevices) Name(int) v1.ResourceName            { return "devices/gpu.example.com" }
func (d *fakeDevices) Delegated(name v1.ResourceName) bool { return d.delegated[name] }
func (d *fakeDevices) Modelled(p *v1.Pod) bool {
	return len(p.Spec.ResourceClaims) == 0 || (d.kind[p.Name] && !d.unmodelled[p.Name])
}
func (d *fakeDevices) Copies(_ int, ni fwk.NodeInfo, limit int) int {
	d.calls++
	return min(d.devices[ni.Node().Name], limit)
}

// gpuMembers are n members of "g" asking cpu and 1 of the extended resource example.com/gpu.
func gpuMembers(n int, cpu string) []*v1.Pod {
	pods := gangOf(n, cpu)
	for _, p := range pods {
		p.Spec.Containers[0].Resources.Requests["example.com/gpu"] = st.MakePod().Req(map[v1.ResourceName]string{"example.com/gpu": "1"}).Obj().Spec.Containers[0].Resources.Requests["example.com/gpu"]
	}
	return pods
}

func kindOf(pods []*v1.Pod) map[string]bool {
	out := map[string]bool{}
	for _, p := range pods {
		out[p.Name] = true
	}
	return out
}

func TestCheckCountsDevices(t *testing.T) {
	logger, _ := ktesting.NewTestContext(t)
	four := []fwk.NodeInfo{node("n0", "8"), node("n1", "8"), node("n2", "8"), node("n3", "8")}
	cases := []struct {
		name     string
		gang     []*v1.Pod
		devices  map[string]int
		noDevice bool // the members claim no devices the model counts
		feasible bool
		message  string
	}{
		{name: "one device per node, four members: fits", gang: gpuMembers(4, "1"),
			devices: map[string]int{"n0": 1, "n1": 1, "n2": 1, "n3": 1}, feasible: true},
		{name: "three devices for four members: infeasible, and the message names the class", gang: gpuMembers(4, "1"),
			devices: map[string]int{"n0": 1, "n1": 1, "n2": 1}, message: "the free devices of gpu.example.com hold 3 of the 4 members that claim them"},
		{name: "devices on one node only: CPU limits it", gang: gpuMembers(4, "3"),
			devices: map[string]int{"n0": 4}, message: "fit only 2 of them"},
		{name: "a DRA-backed extended resource is not read from node allocatable", gang: gpuMembers(4, "1"),
			noDevice: true, feasible: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			d := &fakeDevices{kind: kindOf(tc.gang), devices: tc.devices, delegated: map[v1.ResourceName]bool{"example.com/gpu": true}}
			if tc.noDevice {
				d.kind = nil
			}
			res, f := Check(logger, "ns/g", tc.gang, len(tc.gang), four, nil, nil, nil, &Shared{Devices: d})
			defer f.Done()
			if res.Feasible != tc.feasible {
				t.Fatalf("feasible = %v, want %v (%s)", res.Feasible, tc.feasible, res.Message)
			}
			if !strings.Contains(res.Message, tc.message) {
				t.Errorf("message %q does not say %q", res.Message, tc.message)
			}
			if !tc.noDevice && d.calls > len(four) {
				t.Errorf("%d device counts for %d nodes: want at most one per node", d.calls, len(four))
			}
		})
	}
}

// Without a device model a DRA-backed extended resource is read from node allocatable, where it never
// appears: the gang cannot fit (what the model fixes).
func TestCheckWithoutDeviceModel(t *testing.T) {
	logger, _ := ktesting.NewTestContext(t)
	nodes := []fwk.NodeInfo{node("n0", "8"), node("n1", "8")}
	res, f := Check(logger, "ns/g", gpuMembers(2, "1"), 2, nodes, nil, nil, nil, &Shared{})
	defer f.Done()
	if res.Feasible {
		t.Fatal("feasible without a device model")
	}
}

// A required domain is chosen among those whose devices hold the gang: the tighter CPU fit has none.
func TestChoosePlacementCountsDevices(t *testing.T) {
	logger, _ := ktesting.NewTestContext(t)
	nodes := rackedCluster() // r1: 2 nodes (the tightest fit for 4 members of 2 CPUs), r2: 4 nodes
	gang := gpuMembers(4, "2")
	for _, tc := range []struct {
		name    string
		devices map[string]int
		want    string
		ok      bool
	}{
		{name: "no devices counted: the tightest CPU fit", want: "r1", ok: true},
		{name: "devices in r2 only", devices: map[string]int{"r2-0": 1, "r2-1": 1, "r2-2": 1, "r2-3": 1}, want: "r2", ok: true},
		{name: "too few devices in every rack", devices: map[string]int{"r2-0": 1, "r3-0": 1, "r3-1": 1}, ok: false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := &fakeDevices{kind: kindOf(gang), devices: tc.devices, delegated: map[v1.ResourceName]bool{"example.com/gpu": true}}
			if tc.devices == nil {
				d.kind = nil
			}
			f := New(logger, "ns/g", gang, len(gang), nodes, nil, nil, &Shared{Devices: d}, false)
			defer f.Done()
			p, ok := ChoosePlacement(f, Policy{Required: rackKey}, nil, nil)
			if ok != tc.ok || (ok && p.Value != tc.want) {
				t.Fatalf("placement %+v ok=%v, want %s ok=%v", p, ok, tc.want, tc.ok)
			}
			if !ok && p.Shortfall == nil {
				t.Errorf("no shortfall for an infeasible device gang: %s", p.Message)
			}
		})
	}
}

// claimMembers are n members of "g" asking cpu and a ResourceClaim from the template "gpu".
func claimMembers(n int, cpu string) []*v1.Pod {
	pods := gangOf(n, cpu)
	for _, p := range pods {
		tmpl := "gpu"
		p.Spec.ResourceClaims = []v1.PodResourceClaim{{Name: "gpu", ResourceClaimTemplateName: &tmpl}}
	}
	return pods
}

// A gang whose ResourceClaims the device model counts is planned on the nodes whose devices hold its
// members' claims, each up to the members they hold; one whose claims it does not count is not planned.
func TestPlanPlacementPlansClaims(t *testing.T) {
	logger, _ := ktesting.NewTestContext(t)
	nodes := []fwk.NodeInfo{node("n0", "8"), node("n1", "8"), node("n2", "8"), node("n3", "8")}
	cases := []struct {
		name       string
		gang       []*v1.Pod
		devices    map[string]int
		unmodelled string // a member whose claims the model does not count
		noModel    bool   // no device model at all
		want       []PlannedNode
	}{
		{name: "devices on two nodes: planned there only", gang: claimMembers(4, "1"),
			devices: map[string]int{"n1": 2, "n3": 2},
			want:    []PlannedNode{{Name: "n1", Members: 2}, {Name: "n3", Members: 2}}},
		{name: "devices of one node hold the gang: planned on it whole", gang: claimMembers(3, "1"),
			devices: map[string]int{"n2": 4},
			want:    []PlannedNode{{Name: "n2", Members: 3}}},
		{name: "the tightest device node first", gang: claimMembers(3, "1"),
			devices: map[string]int{"n0": 1, "n1": 4, "n2": 2},
			want:    []PlannedNode{{Name: "n0", Members: 1}, {Name: "n2", Members: 2}}},
		{name: "CPU limits a device node", gang: claimMembers(2, "6"),
			devices: map[string]int{"n0": 2, "n1": 1},
			want:    []PlannedNode{{Name: "n1", Members: 1}, {Name: "n0", Members: 1}}},
		{name: "a member's claim is shared (or allocated, or not created): not planned", gang: claimMembers(2, "1"),
			devices: map[string]int{"n0": 2}, unmodelled: "m1"},
		{name: "no device model: not planned", gang: claimMembers(2, "1"), noModel: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			d := &fakeDevices{kind: kindOf(tc.gang), devices: tc.devices, unmodelled: map[string]bool{tc.unmodelled: true}}
			shared := &Shared{Devices: d}
			if tc.noModel {
				shared = &Shared{}
			}
			f := New(logger, "ns/g", tc.gang, len(tc.gang), nodes, nil, nil, shared, false)
			defer f.Done()
			p := PlanPlacement(f, nil)
			if tc.want == nil {
				if p != nil {
					t.Fatalf("planned %+v, want no plan", p.Nodes)
				}
				return
			}
			if p == nil {
				t.Fatal("no plan")
			}
			if fmt.Sprint(p.Nodes) != fmt.Sprint(tc.want) {
				t.Errorf("plan %+v, want %+v", p.Nodes, tc.want)
			}
		})
	}
}
