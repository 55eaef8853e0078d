package devices

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
	"k8s.io/dynamic-resource-allocation/cel"
	"k8s.io/dynamic-resource-allocation/structured"
	"k8s.io/klog/v2"
	"k8s.io/klog/v2/ktesting"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/dynamicresources"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/feature"
	st "k8s.io/kubernetes/pkg/scheduler/testing"
	"k8s.io/utils/ptr"

	"github.com/custom-scheduler/custom-scheduler/pkg/coscheduling/internal/gangtest"
)

const (
	driver = "gpu.example.com"
	class  = "gpu"
	// extended is the extended resource the class backs.
	extended = v1.ResourceName("example.com/gpu")
)

// fakeDRA is the scheduler's DRA state for a test: claims (allocated ones hold their devices),
// slices and classes.
type fakeDRA struct {
	claims map[string]*resourceapi.ResourceClaim
	// pending are allocations in flight, by claim UID (see GetPendingAllocation).
	pending map[types.UID]*resourceapi.AllocationResult
	slices  []*resourceapi.ResourceSlice
	classes map[string]*resourceapi.DeviceClass
	// conflicts is how many reads of the allocated state fail first, as the tracker's do when an
	// allocation leaves the in-flight set during the read.
	conflicts int
}

type fakeTracker struct {
	fwk.ResourceClaimTracker
	d *fakeDRA
}

func (t fakeTracker) Get(ns, name string) (*resourceapi.ResourceClaim, error) {
	if c, ok := t.d.claims[ns+"/"+name]; ok {
		return c, nil
	}
	return nil, apierrors.NewNotFound(resourceapi.Resource("resourceclaims"), name)
}

func (t fakeTracker) GatherAllocatedState() (*structured.AllocatedState, error) {
	if t.d.conflicts > 0 {
		t.d.conflicts--
		return nil, errors.New("conflicting concurrent modification")
	}
	s := &structured.AllocatedState{AllocatedDevices: sets.New[structured.DeviceID](), AllocatedSharedDeviceIDs: sets.New[structured.SharedDeviceID](),
		AggregatedCapacity: structured.NewConsumedCapacityCollection()}
	for _, c := range t.d.claims {
		if c.Status.Allocation != nil {
			for _, r := range c.Status.Allocation.Devices.Results {
				s.AllocatedDevices.Insert(structured.MakeDeviceID(r.Driver, r.Pool, r.Device))
			}
		}
	}
	return s, nil
}

type fakeSlices struct{ d *fakeDRA }

func (s fakeSlices) ListWithDeviceTaintRules() ([]*resourceapi.ResourceSlice, error) {
	return s.d.slices, nil
}

type fakeClasses struct{ d *fakeDRA }

func (c fakeClasses) List() ([]*resourceapi.DeviceClass, error) {
	var out []*resourceapi.DeviceClass
	for _, dc := range c.d.classes {
		out = append(out, dc)
	}
	return out, nil
}
func (c fakeClasses) Get(name string) (*resourceapi.DeviceClass, error) {
	if dc, ok := c.d.classes[name]; ok {
		return dc, nil
	}
	return nil, apierrors.NewNotFound(resourceapi.Resource("deviceclasses"), name)
}

type fakeResolver struct{ d *fakeDRA }

func (r fakeResolver) GetDeviceClass(name v1.ResourceName) *resourceapi.DeviceClass {
	for _, dc := range r.d.classes {
		if dc.Spec.ExtendedResourceName != nil && *dc.Spec.ExtendedResourceName == string(name) {
			return dc
		}
	}
	return nil
}

func (d *fakeDRA) ResourceClaims() fwk.ResourceClaimTracker     { return fakeTracker{d: d} }
func (d *fakeDRA) ResourceSlices() fwk.ResourceSliceLister      { return fakeSlices{d: d} }
func (d *fakeDRA) DeviceClasses() fwk.DeviceClassLister         { return fakeClasses{d: d} }
func (d *fakeDRA) DeviceClassResolver() fwk.DeviceClassResolver { return fakeResolver{d: d} }

// gpuClass selects the driver's devices whose model is "a" (all when model is "").
func gpuClass(model string) *resourceapi.DeviceClass {
	expr := fmt.Sprintf("device.driver == %q", driver)
	if model != "" {
		expr += fmt.Sprintf(" && device.attributes[%q].model == %q", driver, model)
	}
	return &resourceapi.DeviceClass{ObjectMeta: metav1.ObjectMeta{Name: class},
		Spec: resourceapi.DeviceClassSpec{ExtendedResourceName: ptr.To(string(extended)),
			Selectors: []resourceapi.DeviceSelector{{CEL: &resourceapi.CELDeviceSelector{Expression: expr}}}}}
}

// slice publishes models[i] as device gpu-i on node, as a driver would.
func slice(node string, models ...string) *resourceapi.ResourceSlice {
	s := &resourceapi.ResourceSlice{ObjectMeta: metav1.ObjectMeta{Name: node + "-" + driver},
		Spec: resourceapi.ResourceSliceSpec{Driver: driver, NodeName: ptr.To(node),
			Pool: resourceapi.ResourcePool{Name: node, Generation: 1, ResourceSliceCount: 1}}}
	for i, m := range models {
		s.Spec.Devices = append(s.Spec.Devices, resourceapi.Device{Name: fmt.Sprintf("gpu-%d", i),
			Attributes: map[resourceapi.QualifiedName]resourceapi.DeviceAttribute{"model": {StringValue: ptr.To(m)}}})
	}
	return s
}

func nodeInfo(name string, alloc map[v1.ResourceName]string) fwk.NodeInfo {
	capacity := map[v1.ResourceName]string{v1.ResourceCPU: "64", v1.ResourceMemory: "64Gi", v1.ResourcePods: "110"}
	for k, v := range alloc {
		capacity[k] = v
	}
	ni := framework.NewNodeInfo()
	ni.SetNode(st.MakeNode().Name(name).Capacity(capacity).Obj())
	return ni
}

// claimFor is a member's own claim (as the resourceclaim controller makes it from a template) asking
// count devices of the class.
func claimFor(pod *v1.Pod, count int64) *resourceapi.ResourceClaim {
	return &resourceapi.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Namespace: pod.Namespace, Name: pod.Name + "-gpu", UID: types.UID(pod.Name + "-gpu")},
		Spec: resourceapi.ResourceClaimSpec{Devices: resourceapi.DeviceClaim{Requests: []resourceapi.DeviceRequest{{Name: "gpu",
			Exactly: &resourceapi.ExactDeviceRequest{DeviceClassName: class, AllocationMode: resourceapi.DeviceAllocationModeExactCount, Count: count}}}}}}
}

// withClaim gives a member a claim made from a template, named in its status.
func withClaim(pod *v1.Pod, claim *resourceapi.ResourceClaim) *v1.Pod {
	pod.Spec.ResourceClaims = []v1.PodResourceClaim{{Name: "gpu", ResourceClaimTemplateName: ptr.To("gpu-template")}}
	pod.Status.ResourceClaimStatuses = []v1.PodResourceClaimStatus{{Name: "gpu", ResourceClaimName: ptr.To(claim.Name)}}
	return pod
}

func withExtended(pod *v1.Pod, n string) *v1.Pod {
	pod.Spec.Containers[0].Resources.Requests[extended] = resource.MustParse(n)
	pod.Spec.Containers[0].Resources.Limits = v1.ResourceList{extended: resource.MustParse(n)}
	return pod
}

func TestCopies(t *testing.T) {
	logger, _ := ktesting.NewTestContext(t)
	m := func(name string) *v1.Pod { return gangtest.Member(name, "g", "1") }
	cases := []struct {
		name string
		// devices per node (models); a node absent has no slice.
		nodes map[string][]string
		// allocNode advertises the extended resource itself (a device plugin): its allocatable.
		pluginNode map[string]string
		model      string
		members    func(d *fakeDRA) []*v1.Pod
		allocated  []string // devices of n0 already allocated ("gpu-i")
		limit      int
		want       map[string]int
		kinds      int
	}{
		{name: "extended resource: one device each", nodes: map[string][]string{"n0": {"a"}, "n1": {"a"}, "n2": nil},
			members: func(*fakeDRA) []*v1.Pod { return []*v1.Pod{withExtended(m("m0"), "1"), withExtended(m("m1"), "1")} },
			limit:   4, want: map[string]int{"n0": 1, "n1": 1, "n2": 0, "n3": 0}, kinds: 1},
		{name: "extended resource of 2 devices on nodes of 5", nodes: map[string][]string{"n0": {"a", "a", "a", "a", "a"}},
			members: func(*fakeDRA) []*v1.Pod { return []*v1.Pod{withExtended(m("m0"), "2")} },
			limit:   8, want: map[string]int{"n0": 2}, kinds: 1},
		{name: "the class's CEL selector: model b does not count", nodes: map[string][]string{"n0": {"a", "b", "b", "a"}}, model: "a",
			members: func(*fakeDRA) []*v1.Pod { return []*v1.Pod{withExtended(m("m0"), "1")} },
			limit:   8, want: map[string]int{"n0": 2}, kinds: 1},
		{name: "allocated devices are not free", nodes: map[string][]string{"n0": {"a", "a", "a", "a"}}, allocated: []string{"gpu-0", "gpu-2"},
			members: func(*fakeDRA) []*v1.Pod { return []*v1.Pod{withExtended(m("m0"), "1")} },
			limit:   8, want: map[string]int{"n0": 2}, kinds: 1},
		{name: "capped by the limit", nodes: map[string][]string{"n0": {"a", "a", "a", "a"}},
			members: func(*fakeDRA) []*v1.Pod { return []*v1.Pod{withExtended(m("m0"), "1")} },
			limit:   3, want: map[string]int{"n0": 3}, kinds: 1},
		{name: "a device plugin's node counts its allocatable", nodes: map[string][]string{}, pluginNode: map[string]string{"p0": "3"},
			members: func(*fakeDRA) []*v1.Pod { return []*v1.Pod{withExtended(m("m0"), "1")} },
			limit:   8, want: map[string]int{"p0": 3}, kinds: 1},
		{name: "claims from a template, 2 devices a member", nodes: map[string][]string{"n0": {"a", "a", "a"}, "n1": {"a", "a", "a", "a"}},
			members: func(d *fakeDRA) []*v1.Pod {
				var out []*v1.Pod
				for _, name := range []string{"m0", "m1", "m2"} {
					p := m(name)
					c := claimFor(p, 2)
					d.claims[p.Namespace+"/"+c.Name] = c
					out = append(out, withClaim(p, c))
				}
				return out
			},
			limit: 8, want: map[string]int{"n0": 1, "n1": 2}, kinds: 1},
		{name: "members that claim differently are two kinds", nodes: map[string][]string{"n0": {"a", "a", "a", "a"}},
			members: func(*fakeDRA) []*v1.Pod { return []*v1.Pod{withExtended(m("m0"), "1"), withExtended(m("m1"), "2")} },
			limit:   8, want: map[string]int{"n0": 4}, kinds: 2},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			d := &fakeDRA{claims: map[string]*resourceapi.ResourceClaim{}, classes: map[string]*resourceapi.DeviceClass{class: gpuClass(tc.model)}}
			for n, models := range tc.nodes {
				if models != nil {
					d.slices = append(d.slices, slice(n, models...))
				}
			}
			for _, dev := range tc.allocated {
				d.claims["other/held-"+dev] = &resourceapi.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "other", Name: "held-" + dev},
					Status: resourceapi.ResourceClaimStatus{Allocation: &resourceapi.AllocationResult{Devices: resourceapi.DeviceAllocationResult{
						Results: []resourceapi.DeviceRequestAllocationResult{{Request: "r", Driver: driver, Pool: "n0", Device: dev}}}}}}
			}
			src := &Source{dra: d, features: structured.Features{}, cel: newTestCache()}
			src.extended = true
			check := src.ForCheck(logger, tc.members(d))
			if check == nil {
				t.Fatal("no device check for members that claim devices")
			}
			if got := check.Kinds(); got != tc.kinds {
				t.Fatalf("%d kinds, want %d", got, tc.kinds)
			}
			if !check.Delegated(extended) && tc.kinds > 0 && tc.members(d)[0].Spec.ResourceClaims == nil {
				t.Errorf("%s not delegated to DRA", extended)
			}
			for n, want := range tc.want {
				ni := nodeInfo(n, nil)
				if a, ok := tc.pluginNode[n]; ok {
					ni = nodeInfo(n, map[v1.ResourceName]string{extended: a})
				}
				if got := check.Copies(0, ni, tc.limit); got != want {
					t.Errorf("node %s holds %d members, want %d", n, got, want)
				}
			}
		})
	}
}

// No member claims a device: no check (the gang is checked as before).
func TestForCheckWithoutDevices(t *testing.T) {
	logger, _ := ktesting.NewTestContext(t)
	d := &fakeDRA{claims: map[string]*resourceapi.ResourceClaim{}, classes: map[string]*resourceapi.DeviceClass{class: gpuClass("")}}
	src := &Source{dra: d, cel: newTestCache(), extended: true}
	if c := src.ForCheck(logger, gangtest.GangOf(3, "1")); c != nil {
		t.Fatalf("a device check for members that claim none: %d kinds", c.Kinds())
	}
	var nilSource *Source
	if c := nilSource.ForCheck(logger, gangtest.GangOf(1, "1")); c != nil {
		t.Fatal("a nil source made a check")
	}
}

// Copies against the allocator's own answer: members placed one by one on a node, each allocation
// folded into the state before the next (as the real cycle allocates member by member), on random
// slices, selectors, allocations, claim sizes, claims of one or two requests and tainted devices
// (the bound, the plain count, the merged claim and the allocator's own path all answer here).
func TestCopiesMatchesSequentialAllocation(t *testing.T) {
	logger, _ := ktesting.NewTestContext(t)
	gangtest.RunSeeded(t, 200, func(t *testing.T, rng *rand.Rand, round int) bool {
		models := []string{"a", "b"}
		d := &fakeDRA{claims: map[string]*resourceapi.ResourceClaim{}, classes: map[string]*resourceapi.DeviceClass{class: gpuClass([]string{"", "a"}[rng.IntN(2)])}}
		nodes := 1 + rng.IntN(4)
		for n := range nodes {
			var ms []string
			for range rng.IntN(9) {
				ms = append(ms, models[rng.IntN(2)])
			}
			name := fmt.Sprintf("n%d", n)
			sl := slice(name, ms...)
			if len(ms) > 0 && rng.IntN(4) == 0 {
				// A tainted device: the node is not plain, the allocator answers.
				sl.Spec.Devices[rng.IntN(len(ms))].Taints = []resourceapi.DeviceTaint{{Key: "example.com/flaky", Effect: resourceapi.DeviceTaintEffectNoSchedule}}
			}
			d.slices = append(d.slices, sl)
			for i := range ms {
				if rng.IntN(4) == 0 {
					dev := fmt.Sprintf("gpu-%d", i)
					d.claims["other/"+name+dev] = &resourceapi.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "other", Name: name + dev},
						Status: resourceapi.ResourceClaimStatus{Allocation: &resourceapi.AllocationResult{Devices: resourceapi.DeviceAllocationResult{
							Results: []resourceapi.DeviceRequestAllocationResult{{Request: "r", Driver: driver, Pool: name, Device: dev}}}}}}
				}
			}
		}
		count := int64(1 + rng.IntN(3))
		limit := 1 + rng.IntN(8)
		var members []*v1.Pod
		useExtended := rng.IntN(2) == 0
		twoRequests := rng.IntN(3) == 0
		for i := range limit {
			p := gangtest.Member(fmt.Sprintf("m%d", i), "g", "1")
			if useExtended {
				members = append(members, withExtended(p, fmt.Sprint(count)))
				continue
			}
			c := claimFor(p, count)
			if twoRequests {
				// Two requests: no plain count; the merged claim asks each for n times its count.
				c.Spec.Devices.Requests = append(c.Spec.Devices.Requests, resourceapi.DeviceRequest{Name: "second",
					Exactly: &resourceapi.ExactDeviceRequest{DeviceClassName: class, AllocationMode: resourceapi.DeviceAllocationModeExactCount, Count: 1}})
			}
			d.claims[p.Namespace+"/"+c.Name] = c
			members = append(members, withClaim(p, c))
		}
		src := &Source{dra: d, cel: newTestCache(), extended: true}
		check := src.ForCheck(logger, members)
		for n := range nodes {
			ni := nodeInfo(fmt.Sprintf("n%d", n), nil)
			got := check.Copies(0, ni, limit)
			want := sequential(t, d, src, ni.Node(), members, limit)
			if got != want && check.(*Check).ctx.Err() != nil {
				// The check's time budget ran out (a loaded machine): by design it then counts the node
				// as holding the gang and lets the real filters decide, so the answers may differ.
				t.Logf("round %d: the check's %s budget ran out; round not compared", round, checkBudget)
				return true
			}
			if got != want {
				t.Errorf("round %d: node %s holds %d members by the check, %d member by member (count %d, extended %v, two requests %v)", round, ni.Node().Name, got, want, count, useExtended, twoRequests)
				return false
			}
		}
		return true
	})
}

// sequential places members on node one at a time with a fresh allocator over the state so far, and
// returns how many were placed (at most limit).
func sequential(t *testing.T, d *fakeDRA, src *Source, node *v1.Node, members []*v1.Pod, limit int) int {
	state, err := d.ResourceClaims().GatherAllocatedState()
	if err != nil {
		t.Fatal(err)
	}
	check := src.ForCheck(ktesting.NewLogger(t, ktesting.NewConfig()), members).(*Check)
	kd := check.kinds[0]
	var extendedReqs []extendedRequest
	extendedReqs = append(extendedReqs, kd.extended...)
	for placed := range limit {
		a, err := structured.NewAllocator(context.Background(), src.features, *state, d.DeviceClasses(), d.slices, src.cel)
		if err != nil {
			t.Fatal(err)
		}
		claims := check.claimsFor(kd, extendedReqs, placed+1)
		res, err := a.Allocate(context.Background(), node, claims[len(claims)-len(claims)/(placed+1):])
		if err != nil || res == nil {
			return placed
		}
		for _, r := range res {
			for _, dev := range r.Devices.Results {
				state.AllocatedDevices.Insert(structured.MakeDeviceID(dev.Driver, dev.Pool, dev.Device))
			}
		}
	}
	return limit
}

func newTestCache() *cel.Cache { return cel.NewCache(10, cel.Features{}) }

// BenchmarkDeviceCheck is one whole-gang check's device work for an 8-member gang that asks for one
// DRA-backed GPU a member, on 1000 nodes with 8 devices each: reading the state, building the
// allocator, and one count per node (what gangfit.New does once per attempt). empty: every device
// free; taken: node i has i mod 9 of its devices allocated (8 to 0 free), as a cluster part full of
// gangs has.
func BenchmarkDeviceCheck(b *testing.B) {
	for _, taken := range []bool{false, true} {
		b.Run(map[bool]string{false: "empty", true: "taken"}[taken], func(b *testing.B) {
			logger := klog.Background().V(0) // the scheduler's default verbosity, not the test logger's
			d := &fakeDRA{claims: map[string]*resourceapi.ResourceClaim{}, classes: map[string]*resourceapi.DeviceClass{class: gpuClass("")}}
			var nodes []fwk.NodeInfo
			for n := range 1000 {
				name := fmt.Sprintf("n%d", n)
				sl := slice(name, "a", "a", "a", "a", "a", "a", "a", "a")
				sl.UID, sl.ResourceVersion = types.UID(name), "1" // as read from the API
				d.slices = append(d.slices, sl)
				nodes = append(nodes, nodeInfo(name, nil))
				if !taken {
					continue
				}
				for i := range n % 9 {
					dev := fmt.Sprintf("gpu-%d", i)
					d.claims["other/"+name+dev] = &resourceapi.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "other", Name: name + dev},
						Status: resourceapi.ResourceClaimStatus{Allocation: &resourceapi.AllocationResult{Devices: resourceapi.DeviceAllocationResult{
							Results: []resourceapi.DeviceRequestAllocationResult{{Request: "r", Driver: driver, Pool: name, Device: dev}}}}}}
				}
			}
			var members []*v1.Pod
			for i := range 8 {
				members = append(members, withExtended(gangtest.Member(fmt.Sprintf("m%d", i), "g", "1"), "1"))
			}
			// The allocator the scheduler's gates choose (New does the same).
			src := &Source{dra: d, cel: newTestCache(), extended: true, matchCache: &matchCache{}, features: dynamicresources.AllocatorFeatures(feature.NewSchedulerFeaturesFromGates(utilfeature.DefaultFeatureGate))}
			b.ResetTimer()
			for b.Loop() {
				check := src.ForCheck(logger, members)
				for _, ni := range nodes {
					check.Copies(0, ni, 8)
				}
				check.(*Check).Done()
			}
		})
	}
}

// TestForCheckRetriesConflicts: a read of the allocated state that conflicts with an allocation
// leaving the in-flight set is tried again, as upstream's PreFilter does; the check then counts the
// devices (before, it counted none and every node held the whole gang).
func TestForCheckRetriesConflicts(t *testing.T) {
	logger, _ := ktesting.NewTestContext(t)
	d := &fakeDRA{claims: map[string]*resourceapi.ResourceClaim{}, classes: map[string]*resourceapi.DeviceClass{class: gpuClass("")},
		slices: []*resourceapi.ResourceSlice{slice("n0", "", "")}, conflicts: 3}
	var members []*v1.Pod
	for i := range 4 {
		p := gangtest.Member(fmt.Sprintf("m%d", i), "g", "1")
		c := claimFor(p, 1)
		d.claims[c.Namespace+"/"+c.Name] = c
		members = append(members, withClaim(p, c))
	}
	src := &Source{dra: d, cel: newTestCache()}
	check := src.ForCheck(logger, members)
	if check == nil {
		t.Fatal("no device check for members that claim devices")
	}
	if check.Kinds() != 1 {
		t.Fatalf("%d device kinds, want 1: the check counts no devices", check.Kinds())
	}
	if got := check.Copies(0, nodeInfo("n0", nil), 4); got != 2 {
		t.Errorf("n0 holds %d members, want 2 (its 2 devices), once the conflicting reads are retried", got)
	}
	if d.conflicts != 0 {
		t.Errorf("%d conflicting reads left: the state was not read again", d.conflicts)
	}
}
