package gangfit

import (
	"slices"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
	"k8s.io/klog/v2/ktesting"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework/preemption"
)

// releasingDevices is fakeDevices whose victims free devices: claims[node] are the node's allocated
// claims, each the names of the pods that reserve it; once every reserver of every claim of a node
// is among the victims, the node's devices hold freed[node] members.
type releasingDevices struct {
	fakeDevices
	claims   map[string][][]string
	freed    map[string]int
	searches int
	subsets  int
}

func (d *releasingDevices) ForCheck(logger klog.Logger, members []*v1.Pod) DeviceCheck {
	if d.fakeDevices.ForCheck(logger, members) == nil {
		return nil
	}
	return d
}

func (d *releasingDevices) Released(pods []*v1.Pod, _ []fwk.NodeInfo, need int) map[string]NodeRelease {
	d.searches++
	in := map[types.UID]bool{}
	for _, p := range pods {
		in[p.UID] = true
	}
	out := map[string]NodeRelease{}
	for node, claims := range d.claims {
		var holders []types.UID
		all := true
		for _, c := range claims {
			for _, r := range c {
				all = all && in[types.UID(r)]
				holders = append(holders, types.UID(r))
			}
		}
		if all {
			out[node] = NodeRelease{Holders: holders, Copies: []int{min(d.freed[node], need)}}
		}
	}
	return out
}

// ReleasedBy: each claim of the node all of whose reservers are among holders frees one member's
// devices (at most freed[node]).
func (d *releasingDevices) ReleasedBy(node string, holders []types.UID, need int) []int {
	d.subsets++
	in := map[types.UID]bool{}
	for _, h := range holders {
		in[h] = true
	}
	n := 0
	for _, c := range d.claims[node] {
		all := true
		for _, r := range c {
			all = all && in[types.UID(r)]
		}
		if all {
			n++
		}
	}
	if n == 0 {
		return nil
	}
	return []int{min(n, d.freed[node], need)}
}

// TestChooseVictimsFreesDevices: a gang whose members each claim one device preempts the
// lower-priority pods whose claims hold the devices it lacks, gangs whole, and nothing when the
// devices cannot be freed, whatever CPU victims there are.
func TestChooseVictimsFreesDevices(t *testing.T) {
	preempted := func(p *v1.Pod) *v1.Pod {
		now := metav1.Now()
		p.DeletionTimestamp = &now
		p.Status.Conditions = []v1.PodCondition{{Type: v1.DisruptionTarget, Status: v1.ConditionTrue, Reason: v1.PodReasonPreemptionByScheduler}}
		return p
	}
	cases := []struct {
		name   string
		nodes  []fwk.NodeInfo
		gang   int
		free   map[string]int // members the nodes' free devices hold today
		claims map[string][][]string
		freed  map[string]int
		wantOK bool
		want   []string
	}{
		{
			name: "a low-priority device gang holding every device is evicted whole",
			nodes: []fwk.NodeInfo{
				cpuNode("n0", "8", running("lo-a", "lo", "n0", "1", 0)),
				cpuNode("n1", "8", running("lo-b", "lo", "n1", "1", 0)),
			},
			gang:   2,
			claims: map[string][][]string{"n0": {{"lo-a"}}, "n1": {{"lo-b"}}},
			freed:  map[string]int{"n0": 1, "n1": 1},
			wantOK: true, want: []string{"gang:lo(2)"},
		},
		{
			name: "CPU victims exist but the devices are held by a higher-priority pod: nothing is evicted",
			nodes: []fwk.NodeInfo{
				cpuNode("n0", "8", running("hog", "", "n0", "7", 0), running("x", "", "n0", "1", 1000)),
			},
			gang:   1,
			claims: map[string][][]string{"n0": {{"x"}}},
			freed:  map[string]int{"n0": 1},
			wantOK: false,
		},
		{
			name: "a claim also reserved by a pod that stays is not freed: nothing is evicted",
			nodes: []fwk.NodeInfo{
				cpuNode("n0", "8", running("lo-a", "lo", "n0", "1", 0), running("x", "", "n0", "1", 1000)),
			},
			gang:   1,
			claims: map[string][][]string{"n0": {{"lo-a", "x"}}},
			freed:  map[string]int{"n0": 1},
			wantOK: false,
		},
		{
			name: "the device holder is evicted, not the CPU hog beside it",
			nodes: []fwk.NodeInfo{
				cpuNode("n0", "8", running("lo-a", "lo", "n0", "1", 0), running("hog", "", "n0", "6", 0)),
			},
			gang:   1,
			claims: map[string][][]string{"n0": {{"lo-a"}}},
			freed:  map[string]int{"n0": 1},
			wantOK: true, want: []string{"gang:lo(1)"},
		},
		{
			name: "of two device gangs only the one needed is evicted",
			nodes: []fwk.NodeInfo{
				cpuNode("n0", "8", running("a-0", "a", "n0", "1", 0)),
				cpuNode("n1", "8", running("b-0", "b", "n1", "1", 0)),
			},
			gang:   1,
			claims: map[string][][]string{"n0": {{"a-0"}}, "n1": {{"b-0"}}},
			freed:  map[string]int{"n0": 1, "n1": 1},
			wantOK: true, want: []string{"gang:b(1)"},
		},
		{
			name: "devices already free are used first: nothing is evicted for the rest",
			nodes: []fwk.NodeInfo{
				cpuNode("n0", "8", running("lo-a", "lo", "n0", "1", 0)),
				cpuNode("n1", "8"),
			},
			gang: 1, free: map[string]int{"n1": 1},
			claims: map[string][][]string{"n0": {{"lo-a"}}},
			freed:  map[string]int{"n0": 1},
			wantOK: true,
		},
		{
			name: "too few devices even with every holder gone: nothing is evicted",
			nodes: []fwk.NodeInfo{
				cpuNode("n0", "8", running("lo-a", "lo", "n0", "1", 0)),
				cpuNode("n1", "8", running("hog", "", "n1", "8", 0)),
			},
			gang:   2,
			claims: map[string][][]string{"n0": {{"lo-a"}}},
			freed:  map[string]int{"n0": 1},
			wantOK: false,
		},
		{
			// Issue #47 (a): putting one of them back used to take all of the node's freed devices
			// off, so both were evicted.
			name: "of two holders of one node's devices, only the one needed is evicted",
			nodes: []fwk.NodeInfo{
				cpuNode("n0", "8", running("p", "", "n0", "1", 0), running("q", "", "n0", "1", 0)),
			},
			gang:   1,
			claims: map[string][][]string{"n0": {{"p"}, {"q"}}},
			freed:  map[string]int{"n0": 2},
			wantOK: true, want: []string{"q"},
		},
		{
			name: "of two holders of one node's devices, the lower-priority one is evicted",
			nodes: []fwk.NodeInfo{
				cpuNode("n0", "8", running("p", "", "n0", "1", 0), running("q", "", "n0", "1", 10)),
			},
			gang:   1,
			claims: map[string][][]string{"n0": {{"p"}, {"q"}}},
			freed:  map[string]int{"n0": 2},
			wantOK: true, want: []string{"p"},
		},
		{
			name: "two holders of one node's devices are both evicted when the gang needs both",
			nodes: []fwk.NodeInfo{
				cpuNode("n0", "8", running("p", "", "n0", "1", 0), running("q", "", "n0", "1", 0)),
			},
			gang:   2,
			claims: map[string][][]string{"n0": {{"p"}, {"q"}}},
			freed:  map[string]int{"n0": 2},
			wantOK: true, want: []string{"p", "q"},
		},
		{
			name: "of three holders of a node, a gang of two evicts the two least important",
			nodes: []fwk.NodeInfo{
				cpuNode("n0", "8", running("p", "", "n0", "1", 5), running("q", "", "n0", "1", 0), running("r", "", "n0", "1", 1)),
			},
			gang:   2,
			claims: map[string][][]string{"n0": {{"p"}, {"q"}, {"r"}}},
			freed:  map[string]int{"n0": 3},
			wantOK: true, want: []string{"q", "r"},
		},
		{
			name: "a claim two holders share frees only with both: both evicted",
			nodes: []fwk.NodeInfo{
				cpuNode("n0", "8", running("p", "", "n0", "1", 0), running("q", "", "n0", "1", 0)),
			},
			gang:   1,
			claims: map[string][][]string{"n0": {{"p", "q"}}},
			freed:  map[string]int{"n0": 1},
			wantOK: true, want: []string{"p", "q"},
		},
		{
			name: "a holder already leaving for an earlier preemption frees its devices without a new victim",
			nodes: []fwk.NodeInfo{
				cpuNode("n0", "8", preempted(running("going", "", "n0", "1", 0))),
				cpuNode("n1", "8", running("lo-b", "lo", "n1", "1", 0)),
			},
			gang:   1,
			claims: map[string][][]string{"n0": {{"going"}}, "n1": {{"lo-b"}}},
			freed:  map[string]int{"n0": 1, "n1": 1},
			wantOK: true,
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			logger, _ := ktesting.NewTestContext(t)
			gang := highGang(tc.gang, "1")
			dev := &releasingDevices{fakeDevices: fakeDevices{kind: kindOf(gang), devices: tc.free}, claims: tc.claims, freed: tc.freed}
			f := New(logger, "ns/hi", gang, len(gang), tc.nodes, nil, nil, &Shared{Devices: dev}, true)
			nodeIdx := map[string]int{}
			for i, fn := range f.free {
				nodeIdx[fn.node.Name] = i
			}
			units := gangUnits(f, tc.nodes, nodeIdx, 100, "ns/hi", preemption.PodTerminatingByPreemption)
			chosen, _, ok := chooseVictims(f, units, nil, func() bool { return f.placeable(nil) >= len(gang) })
			if ok != tc.wantOK {
				t.Fatalf("ok = %v, want %v (victims %v)", ok, tc.wantOK, victimNames(chosen))
			}
			if got := victimNames(chosen); !slices.Equal(got, tc.want) {
				t.Errorf("victims = %v, want %v", got, tc.want)
			}
			if dev.searches != 1 {
				t.Errorf("the device model was asked %d times what the victims free, want once per search", dev.searches)
			}
			if ok && f.placeable(nil) < len(gang) {
				t.Errorf("the gang does not fit with the victims gone")
			}
			if !ok {
				// Nothing stays evicted: the devices count what they did.
				for i, fn := range f.free {
					if got := fn.free.scalar[f.deviceIndex]; got != int64(tc.free[fn.node.Name]) {
						t.Errorf("node %d holds %d members after a search that evicts nothing, want %d", i, got, tc.free[fn.node.Name])
					}
				}
			}
		})
	}
}
