package devices

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/dynamic-resource-allocation/structured"
	"k8s.io/klog/v2/ktesting"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework/preemption"
	"k8s.io/utils/ptr"

	"github.com/custom-scheduler/custom-scheduler/pkg/coscheduling/gangfit"
	"github.com/custom-scheduler/custom-scheduler/pkg/coscheduling/internal/gangtest"
)

// Issue #47, with the structured allocator: (a) a gang preemption evicts only the device holders it
// needs, (b) the devices of nominated pods are taken for other gangs' checks and preemptions, (c)
// device kinds that compete for the same devices are counted together.

// classNamed is a DeviceClass for claims (no extended resource) selecting the driver's devices,
// those of model when model is not "".
func classNamed(name, model string) *resourceapi.DeviceClass {
	c := gpuClass(model)
	c.Name = name
	c.Spec.ExtendedResourceName = nil
	return c
}

// claimOf is a member's own claim of count devices of className.
func claimOf(pod *v1.Pod, className string, count int64) *resourceapi.ResourceClaim {
	c := claimFor(pod, count)
	c.Spec.Devices.Requests[0].Exactly.DeviceClassName = className
	return c
}

// asking is a pending member of group at prio with its own claim of count devices of className,
// created in d.
func asking(d *fakeDRA, name, group, className string, count int64, prio int32) *v1.Pod {
	p := gangtest.Member(name, group, "1")
	p.Spec.Priority = ptr.To(prio)
	c := claimOf(p, className, count)
	d.claims[p.Namespace+"/"+c.Name] = c
	return withClaim(p, c)
}

// holding is a pod running on node at prio whose claim holds the node's devices (indexes).
func holding(d *fakeDRA, name, node string, prio int32, devices ...int) *v1.Pod {
	var devs []string
	for _, i := range devices {
		devs = append(devs, fmt.Sprintf("%s/gpu-%d", node, i))
	}
	c := held(name+"-gpu", devs, name)
	d.claims["ns/"+c.Name] = c
	return gangtest.Running(name, "", node, "1", prio)
}

func leavingPod(p *v1.Pod) *v1.Pod {
	now := metav1.Now()
	p.DeletionTimestamp = &now
	p.Status.Conditions = []v1.PodCondition{{Type: v1.DisruptionTarget, Status: v1.ConditionTrue, Reason: v1.PodReasonPreemptionByScheduler}}
	return p
}

func newSource(d *fakeDRA) *Source {
	return &Source{dra: d, features: structured.Features{}, cel: newTestCache(), extended: true}
}

func podNames(pods []*v1.Pod) []string {
	var out []string
	for _, p := range pods {
		out = append(out, p.Name)
	}
	slices.Sort(out)
	return out
}

// TestPreemptionEvictsOnlyTheHoldersNeeded is issue #47 (a) with the allocator: several
// lower-priority pods hold one node's devices, and the gang evicts only as many as it needs, the
// least important first.
func TestPreemptionEvictsOnlyTheHoldersNeeded(t *testing.T) {
	cases := []struct {
		name string
		gpus int
		hold map[string][]int // holder: its devices on n0
		prio map[string]int32
		gang []int64 // devices each member asks
		fits bool
		want []string
	}{
		{name: "two holders of 2, a member of 2: the lower-priority one only", gpus: 4,
			hold: map[string][]int{"p": {0, 1}, "q": {2, 3}}, prio: map[string]int32{"p": 1, "q": 0},
			gang: []int64{2}, fits: true, want: []string{"q"}},
		{name: "two holders of 2, a member of 3: both", gpus: 4,
			hold: map[string][]int{"p": {0, 1}, "q": {2, 3}}, prio: map[string]int32{"p": 1, "q": 0},
			gang: []int64{3}, fits: true, want: []string{"p", "q"}},
		{name: "three holders of 2, two members of 2: the two least important", gpus: 6,
			hold: map[string][]int{"p": {0, 1}, "q": {2, 3}, "r": {4, 5}}, prio: map[string]int32{"p": 5, "q": 0, "r": 1},
			gang: []int64{2, 2}, fits: true, want: []string{"q", "r"}},
		{name: "a free device and two holders of 1, a member of 2: one holder", gpus: 3,
			hold: map[string][]int{"p": {0}, "q": {1}}, prio: map[string]int32{"p": 0, "q": 3},
			gang: []int64{2}, fits: true, want: []string{"p"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			logger, _ := ktesting.NewTestContext(t)
			models := make([]string, tc.gpus)
			for i := range models {
				models[i] = "a"
			}
			d := &fakeDRA{claims: map[string]*resourceapi.ResourceClaim{}, classes: map[string]*resourceapi.DeviceClass{class: gpuClass("")},
				slices: []*resourceapi.ResourceSlice{slice("n0", models...)}}
			var running []*v1.Pod
			for _, name := range slices.Sorted(maps.Keys(tc.hold)) {
				running = append(running, holding(d, name, "n0", tc.prio[name], tc.hold[name]...))
			}
			var gang []*v1.Pod
			for i, n := range tc.gang {
				gang = append(gang, asking(d, fmt.Sprintf("hi-%d", i), "hi", class, n, 100))
			}
			nodes := []fwk.NodeInfo{gangtest.CPUNode("n0", "64", running...)}
			f := gangfit.New(logger, "ns/hi", gang, len(gang), nodes, nil, nil, &gangfit.Shared{Devices: newSource(d)}, true)
			defer f.Done()
			plan := gangfit.PlanPreemption(f, nodes, gangfit.Policy{}, nil, 100, "ns/hi", preemption.PodTerminatingByPreemption, nil)
			if plan.Fits != tc.fits {
				t.Fatalf("fits = %v, want %v", plan.Fits, tc.fits)
			}
			if got := podNames(plan.Victims); !slices.Equal(got, tc.want) {
				t.Errorf("victims %v, want %v", got, tc.want)
			}
		})
	}
}

// TestNominatedDevicesAreTaken is issue #47 (b) for gangs: the devices a pod nominated to a node
// waits for are not free for another gang's check, nor for its preemption.
func TestNominatedDevicesAreTaken(t *testing.T) {
	logger, _ := ktesting.NewTestContext(t)
	nominated := func(p *v1.Pod, node string) *v1.Pod {
		p.Status.NominatedNodeName = node
		return p
	}
	t.Run("check", func(t *testing.T) {
		for _, tc := range []struct {
			name     string
			waits    int64 // devices the nominated pod waits for (0: no nominated pod)
			feasible bool
		}{
			{name: "no nominated pod: the free devices hold the gang", feasible: true},
			{name: "a pod nominated to the node waits for every device: the gang does not fit", waits: 4},
			{name: "a pod nominated to the node waits for 2 of 4: the gang fits beside it", waits: 2, feasible: true},
		} {
			t.Run(tc.name, func(t *testing.T) {
				d := newFakeDRA(map[string]int{"n0": 4})
				var claimed []*v1.Pod
				if tc.waits > 0 {
					claimed = append(claimed, nominated(asking(d, "a-0", "a", class, tc.waits, 100), "n0"))
				}
				gang := []*v1.Pod{asking(d, "b-0", "b", class, 2, 100)}
				nodes := []fwk.NodeInfo{nodeInfo("n0", nil)}
				res, f := gangfit.Check(logger, "ns/b", gang, 1, nodes, nil, nil, claimed, &gangfit.Shared{Devices: newSource(d)})
				defer f.Done()
				if res.Feasible != tc.feasible {
					t.Errorf("feasible = %v, want %v (%s)", res.Feasible, tc.feasible, res.Message)
				}
			})
		}
	})
	t.Run("preemption", func(t *testing.T) {
		for _, tc := range []struct {
			name    string
			leaving bool // the holder is leaving already (a's preemption evicted it)
			waits   int64
			fits    bool
			want    []string
		}{
			{name: "the free devices are the nominated pod's: the gang evicts the holder", waits: 2, fits: true, want: []string{"v"}},
			{name: "the leaving holder's devices are the nominated pod's: nothing to evict", leaving: true, waits: 4},
		} {
			t.Run(tc.name, func(t *testing.T) {
				d := newFakeDRA(map[string]int{"n0": 4})
				v := holding(d, "v", "n0", 0, 0, 1)
				if tc.leaving {
					v = leavingPod(v)
				}
				claimed := []*v1.Pod{nominated(asking(d, "a-0", "a", class, tc.waits, 100), "n0")}
				gang := []*v1.Pod{asking(d, "b-0", "b", class, 2, 50)}
				nodes := []fwk.NodeInfo{gangtest.CPUNode("n0", "64", v)}
				f := gangfit.New(logger, "ns/b", gang, 1, nodes, nil, claimed, &gangfit.Shared{Devices: newSource(d)}, true)
				defer f.Done()
				plan := gangfit.PlanPreemption(f, nodes, gangfit.Policy{}, nil, 50, "ns/b", preemption.PodTerminatingByPreemption, nil)
				if plan.Fits != tc.fits {
					t.Fatalf("fits = %v, want %v (victims %v)", plan.Fits, tc.fits, podNames(plan.Victims))
				}
				if got := podNames(plan.Victims); !slices.Equal(got, tc.want) {
					t.Errorf("victims %v, want %v", got, tc.want)
				}
			})
		}
	})
}

// TestCompetingKinds is issue #47 (c): members of two device kinds that compete for the same
// devices are counted together, for the check and for a preemption.
func TestCompetingKinds(t *testing.T) {
	const other = "gpu-too" // a second class over the same devices
	both := func(d *fakeDRA) []*v1.Pod {
		return []*v1.Pod{asking(d, "m0", "g", class, 1, 100), asking(d, "m1", "g", other, 1, 100)}
	}
	withExt := func(d *fakeDRA) []*v1.Pod {
		return []*v1.Pod{withExtended(gangtest.Member("m0", "g", "1"), "1"), asking(d, "m1", "g", class, 1, 100)}
	}
	twoClasses := func(d *fakeDRA) []*v1.Pod {
		// m0 asks a device of each class, m1 one of the first.
		p := gangtest.Member("m0", "g", "1")
		c := claimOf(p, class, 1)
		c.Spec.Devices.Requests = append(c.Spec.Devices.Requests, resourceapi.DeviceRequest{Name: "other",
			Exactly: &resourceapi.ExactDeviceRequest{DeviceClassName: other, AllocationMode: resourceapi.DeviceAllocationModeExactCount, Count: 1}})
		d.claims["ns/"+c.Name] = c
		return []*v1.Pod{withClaim(p, c), asking(d, "m1", "g", class, 1, 100)}
	}
	cases := []struct {
		name     string
		gang     func(d *fakeDRA) []*v1.Pod
		gpus     int
		taken    int // devices a higher-priority pod holds
		feasible bool
	}{
		{name: "two classes over 2 devices, one member each: fits", gang: both, gpus: 2, feasible: true},
		{name: "two classes over 1 free device, one member each: does not fit", gang: both, gpus: 2, taken: 1},
		{name: "an extended resource and a claim over 1 free device: does not fit", gang: withExt, gpus: 2, taken: 1},
		{name: "an extended resource and a claim over 2 devices: fits", gang: withExt, gpus: 2, feasible: true},
		{name: "a member of two classes and one of one over 2 devices: does not fit", gang: twoClasses, gpus: 2},
		{name: "a member of two classes and one of one over 3 devices: fits", gang: twoClasses, gpus: 3, feasible: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			logger, _ := ktesting.NewTestContext(t)
			d := newFakeDRA(map[string]int{"n0": tc.gpus})
			d.classes[other] = classNamed(other, "")
			var pods []*v1.Pod
			if tc.taken > 0 {
				var devs []int
				for i := range tc.taken {
					devs = append(devs, i)
				}
				pods = append(pods, holding(d, "x", "n0", 1000, devs...))
			}
			gang := tc.gang(d)
			nodes := []fwk.NodeInfo{gangtest.CPUNode("n0", "64", pods...)}
			res, f := gangfit.Check(logger, "ns/g", gang, len(gang), nodes, nil, nil, nil, &gangfit.Shared{Devices: newSource(d)})
			defer f.Done()
			if res.Feasible != tc.feasible {
				t.Errorf("feasible = %v, want %v (%s)", res.Feasible, tc.feasible, res.Message)
			}
			if !tc.feasible && !strings.Contains(res.Message, "counted together") {
				t.Errorf("message %q does not say the kinds are counted together", res.Message)
			}
		})
	}
	t.Run("preemption evicts the holder the two kinds need", func(t *testing.T) {
		logger, _ := ktesting.NewTestContext(t)
		d := newFakeDRA(map[string]int{"n0": 2})
		d.classes[other] = classNamed(other, "")
		lo := holding(d, "lo", "n0", 0, 0)
		gang := both(d)
		nodes := []fwk.NodeInfo{gangtest.CPUNode("n0", "64", lo)}
		f := gangfit.New(logger, "ns/g", gang, len(gang), nodes, nil, nil, &gangfit.Shared{Devices: newSource(d)}, true)
		defer f.Done()
		plan := gangfit.PlanPreemption(f, nodes, gangfit.Policy{}, nil, 100, "ns/g", preemption.PodTerminatingByPreemption, nil)
		if !plan.Fits || !slices.Equal(podNames(plan.Victims), []string{"lo"}) {
			t.Errorf("fits = %v, victims %v; want the holder evicted", plan.Fits, podNames(plan.Victims))
		}
		if len(plan.Assignment) != 2 {
			t.Errorf("assignment %v, want both members on n0", plan.Assignment)
		}
	})
}
