package gangfit

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/klog/v2/ktesting"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/utils/ptr"
)

func TestStays(t *testing.T) {
	ds := running("ds", "", "n", "1", 0)
	ds.OwnerReferences = []metav1.OwnerReference{{Kind: "DaemonSet", Name: "agent", Controller: ptr.To(true)}}
	notController := running("owned", "", "n", "1", 0)
	notController.OwnerReferences = []metav1.OwnerReference{{Kind: "DaemonSet", Name: "agent"}}
	rs := running("rs", "", "n", "1", 0)
	rs.OwnerReferences = []metav1.OwnerReference{{Kind: "ReplicaSet", Name: "web", Controller: ptr.To(true)}}
	mirror := running("static", "", "n", "1", 0)
	mirror.Annotations = map[string]string{v1.MirrorPodAnnotationKey: "x"}
	cases := []struct {
		name string
		pod  *v1.Pod
		prio int32
		want bool
	}{
		{name: "a pod of higher priority stays", pod: running("hi", "", "n", "1", 10), prio: 5, want: true},
		{name: "a pod of the gang's priority is kept off or finishes", pod: running("eq", "", "n", "1", 5), prio: 5},
		{name: "a pod of lower priority", pod: running("lo", "", "n", "1", 1), prio: 5},
		{name: "a DaemonSet's pod stays", pod: ds, prio: 5, want: true},
		{name: "owned by a DaemonSet that is not its controller", pod: notController, prio: 5},
		{name: "a ReplicaSet's pod", pod: rs, prio: 5},
		{name: "a static pod stays", pod: mirror, prio: 5, want: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := Stays(tc.pod, tc.prio); got != tc.want {
				t.Errorf("Stays = %v, want %v", got, tc.want)
			}
		})
	}
}

// TestPlanReservation: the room a reservation counts on is allocatable less the pods that stay, less
// the room claimed by others; the members are placed there, in the gang's domain when it has one.
func TestPlanReservation(t *testing.T) {
	logger, _ := ktesting.NewTestContext(t)
	nominated := func(name, node, cpu string) *v1.Pod {
		p := running(name, "other", "", cpu, 100)
		p.Status.NominatedNodeName = node
		return p
	}
	busy := func(node string, prios ...int32) []*v1.Pod {
		var out []*v1.Pod
		for i, p := range prios {
			out = append(out, running(node+"-"+string(rune('a'+i)), "", node, "1", p))
		}
		return out
	}
	cases := []struct {
		name       string
		nodes      []fwk.NodeInfo
		gang       []*v1.Pod
		need       int
		claimed    []*v1.Pod
		policy     Policy
		pinned     map[string]string
		wantOK     bool
		wantAssign map[string]string
		wantNodes  []string
		wantCPU    int64
		wantMsg    string
	}{
		{name: "busy nodes of the gang's priority count as free", need: 4, gang: gangOf(4, "1"),
			nodes:  []fwk.NodeInfo{cpuNode("a", "2", busy("a", 0, 0)...), cpuNode("b", "2", busy("b", 0, 0)...)},
			wantOK: true, wantAssign: map[string]string{"m0": "a", "m1": "a", "m2": "b", "m3": "b"}, wantNodes: []string{"a", "b"}, wantCPU: 4000,
			wantMsg: "holds room for 4 members on 2 nodes (cpu 4000m, memory 0)"},
		{name: "pods of higher priority stay: the gang goes around them", need: 2, gang: gangOf(2, "1"),
			nodes:  []fwk.NodeInfo{cpuNode("a", "2", busy("a", 5, 5)...), cpuNode("b", "2", busy("b", 0, 0)...)},
			wantOK: true, wantAssign: map[string]string{"m0": "b", "m1": "b"}, wantNodes: []string{"b"}, wantCPU: 2000,
			wantMsg: "holds room for 2 members on 1 nodes (cpu 2000m, memory 0)"},
		{name: "a gang that never fits reserves nothing", need: 5, gang: gangOf(5, "1"),
			nodes:   []fwk.NodeInfo{cpuNode("a", "2"), cpuNode("b", "2")},
			wantMsg: "5 more members do not fit even once the pods of its priority or lower are gone: the room that frees fits 4"},
		{name: "higher-priority pods make it never fit", need: 2, gang: gangOf(2, "2"),
			nodes:   []fwk.NodeInfo{cpuNode("a", "2", busy("a", 9)...), cpuNode("b", "2", busy("b", 9)...)},
			wantMsg: "2 more members do not fit even once the pods of its priority or lower are gone: the room that frees fits 0"},
		{name: "room claimed by another reservation is not counted", need: 2, gang: gangOf(2, "2"),
			nodes:   []fwk.NodeInfo{cpuNode("a", "2"), cpuNode("b", "2")},
			claimed: []*v1.Pod{nominated("c", "a", "2")},
			wantMsg: "2 more members do not fit even once the pods of its priority or lower are gone: the room that frees fits 1"},
		{name: "within the required rack", need: 3, gang: gangOf(3, "4"), policy: Policy{Required: rackKey},
			nodes:  rackedCluster(),
			wantOK: true, wantAssign: map[string]string{"m0": "r3-0", "m1": "r3-1", "m2": "r3-2"}, wantNodes: []string{"r3-0", "r3-1", "r3-2"}, wantCPU: 12000,
			wantMsg: "holds room for 3 members on 3 nodes (cpu 12000m, memory 0) in example.com/rack=r3 (required example.com/rack)"},
		{name: "no rack holds them", need: 5, gang: gangOf(5, "4"), policy: Policy{Required: rackKey},
			nodes:   rackedCluster(),
			wantMsg: "the room that frees has no domain for it: no example.com/rack domain has room for 5 members; the best fits 4"},
		{name: "the rack its bound members pin", need: 1, gang: gangOf(1, "4"), policy: Policy{Required: rackKey}, pinned: map[string]string{rackKey: "r1"},
			nodes:  rackedCluster(),
			wantOK: true, wantAssign: map[string]string{"m0": "r1-0"}, wantNodes: []string{"r1-0"}, wantCPU: 4000,
			wantMsg: "holds room for 1 members on 1 nodes (cpu 4000m, memory 0) in example.com/rack=r1 (required example.com/rack)"},
		{name: "no member missing", need: 0, gang: gangOf(1, "1"), nodes: []fwk.NodeInfo{cpuNode("a", "2")},
			wantMsg: "no member is missing"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := NewReservable(logger, "ns/g", tc.gang, tc.need, tc.nodes, tc.claimed, 0, nil)
			got := PlanReservation(f, tc.policy, tc.pinned)
			f.Done()
			if got.OK != tc.wantOK || got.Message != tc.wantMsg {
				t.Fatalf("plan = ok %v %q, want ok %v %q", got.OK, got.Message, tc.wantOK, tc.wantMsg)
			}
			if !got.OK {
				if len(got.Assignment) != 0 || len(got.Nodes) != 0 {
					t.Errorf("a plan that does not fit holds %v on %v", got.Assignment, got.Nodes)
				}
				return
			}
			assign := map[string]string{}
			for _, a := range got.Assignment {
				assign[a.Pod.Name] = a.Node
			}
			if diff := cmp.Diff(tc.wantAssign, assign); diff != "" {
				t.Errorf("assignment (-want,+got): %s", diff)
			}
			if diff := cmp.Diff(tc.wantNodes, got.Nodes); diff != "" {
				t.Errorf("nodes (-want,+got): %s", diff)
			}
			if got.MilliCPU != tc.wantCPU {
				t.Errorf("held cpu = %dm, want %dm", got.MilliCPU, tc.wantCPU)
			}
		})
	}
}

// TestReservableLeavesTheSnapshotAlone: the view of the pods that stay does not change the NodeInfos.
func TestReservableLeavesTheSnapshotAlone(t *testing.T) {
	logger, _ := ktesting.NewTestContext(t)
	ni := cpuNode("a", "4", running("x", "", "a", "3", 0))
	f := NewReservable(logger, "ns/g", gangOf(1, "4"), 1, []fwk.NodeInfo{ni}, nil, 0, nil)
	if got := PlanReservation(f, Policy{}, nil); !got.OK {
		t.Fatalf("plan: %s", got.Message)
	}
	if got := ni.GetRequested().GetMilliCPU(); got != 3000 {
		t.Errorf("the snapshot's requested cpu is %dm, want 3000m", got)
	}
	if f := New(logger, "ns/g", gangOf(1, "4"), 1, []fwk.NodeInfo{ni}, nil, nil, nil, false); f.placeable(nil) != 0 {
		t.Error("the free check sees room that only frees later")
	}
}

func TestReservationPlanSame(t *testing.T) {
	a, b := member("a", "g", "1"), member("b", "g", "1")
	plan := func(n ...Nomination) ReservationPlan { return ReservationPlan{OK: true, Assignment: n} }
	cases := []struct {
		name string
		x, y ReservationPlan
		want bool
	}{
		{name: "the same members on the same nodes", x: plan(Nomination{a, "n1"}, Nomination{b, "n2"}), y: plan(Nomination{a, "n1"}, Nomination{b, "n2"}), want: true},
		{name: "the same members on the same nodes, listed in another order", x: plan(Nomination{a, "n1"}, Nomination{b, "n2"}), y: plan(Nomination{b, "n2"}, Nomination{a, "n1"}), want: true},
		{name: "two members swapped", x: plan(Nomination{a, "n1"}, Nomination{b, "n2"}), y: plan(Nomination{a, "n2"}, Nomination{b, "n1"})},
		{name: "a member on another node", x: plan(Nomination{a, "n1"}), y: plan(Nomination{a, "n2"})},
		{name: "another member", x: plan(Nomination{a, "n1"}), y: plan(Nomination{b, "n1"})},
		{name: "one member more", x: plan(Nomination{a, "n1"}), y: plan(Nomination{a, "n1"}, Nomination{b, "n2"})},
		{name: "both empty", want: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.x.Same(tc.y); got != tc.want {
				t.Errorf("Same = %v, want %v", got, tc.want)
			}
		})
	}
}

// freeingDevices is fakeDevices that frees, for a reservation's plan, the devices of leaving pods:
// frees[pod] is the node and how many members' claims its devices hold.
type freeingDevices struct {
	*fakeDevices
	frees   map[string]string
	leaving sets.Set[types.UID]
}

func (d *freeingDevices) Freeing(leaving sets.Set[types.UID]) DeviceSource {
	d.leaving = leaving
	out := &fakeDevices{kind: d.kind, devices: map[string]int{}}
	for n, c := range d.devices {
		out.devices[n] = c
	}
	for p, n := range d.frees {
		if leaving.Has(types.UID(p)) {
			out.devices[n]++
		}
	}
	return out
}

// A reservation's plan counts devices: the members hold room where the devices free (those of pods
// that leave), never on a node whose devices stay taken, however much CPU it frees.
func TestPlanReservationCountsDevices(t *testing.T) {
	logger, _ := ktesting.NewTestContext(t)
	gang := claimMembers(2, "1")
	nodes := []fwk.NodeInfo{
		cpuNode("cpu-only", "8"),
		cpuNode("busy-low", "8", running("low-a", "", "busy-low", "4", 0), running("low-b", "", "busy-low", "4", 0)),
		cpuNode("busy-high", "8", running("high-a", "", "busy-high", "4", 100), running("high-b", "", "busy-high", "4", 100)),
	}
	d := &freeingDevices{fakeDevices: &fakeDevices{kind: kindOf(gang), devices: map[string]int{}},
		frees: map[string]string{"low-a": "busy-low", "low-b": "busy-low", "high-a": "busy-high", "high-b": "busy-high"}}
	p := PlanReservation(NewReservable(logger, "ns/g", gang, 2, nodes, nil, 0, d), Policy{}, nil)
	if !p.OK {
		t.Fatalf("no plan: %s", p.Message)
	}
	if diff := cmp.Diff([]string{"busy-low"}, p.Nodes); diff != "" {
		t.Errorf("held nodes (-want +got):\n%s", diff)
	}
	if !d.leaving.Has("low-a") || d.leaving.Has("high-a") {
		t.Errorf("leaving pods %v: want the pods of the gang's priority or lower", sets.List(d.leaving))
	}
	if want := "holds room for 2 members on 1 nodes (cpu 2000m, memory 0, the devices of 2 members)"; p.Message != want {
		t.Errorf("message %q, want %q", p.Message, want)
	}
	// Without the device model the plan counts CPU only (the CPU-only node is as good).
	p = PlanReservation(NewReservable(logger, "ns/g", gang, 2, nodes, nil, 0, nil), Policy{}, nil)
	if !p.OK || p.Devices != 0 {
		t.Errorf("without devices: %+v", p)
	}
}
