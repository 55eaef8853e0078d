package devices

import (
	"maps"
	"slices"
	"sort"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/dynamic-resource-allocation/structured"
	"k8s.io/klog/v2/ktesting"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/utils/ptr"

	"github.com/custom-scheduler/custom-scheduler/pkg/coscheduling/gangfit"
	"github.com/custom-scheduler/custom-scheduler/pkg/coscheduling/internal/gangtest"
)

func (t fakeTracker) List() ([]*resourceapi.ResourceClaim, error) {
	var out []*resourceapi.ResourceClaim
	for _, k := range slices.Sorted(maps.Keys(t.d.claims)) {
		out = append(out, t.d.claims[k])
	}
	return out, nil
}

// held is an allocated claim of the devices (pool/device) reserved by the pods.
func held(name string, devices []string, reservers ...string) *resourceapi.ResourceClaim {
	c := &resourceapi.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, UID: types.UID(name)},
		Status: resourceapi.ResourceClaimStatus{Allocation: &resourceapi.AllocationResult{}}}
	for _, d := range devices {
		pool, dev, _ := strings.Cut(d, "/")
		c.Status.Allocation.Devices.Results = append(c.Status.Allocation.Devices.Results,
			resourceapi.DeviceRequestAllocationResult{Request: "gpu", Driver: driver, Pool: pool, Device: dev})
	}
	for _, r := range reservers {
		c.Status.ReservedFor = append(c.Status.ReservedFor, resourceapi.ResourceClaimConsumerReference{Resource: "pods", Name: r, UID: types.UID(r)})
	}
	return c
}

func TestFreeable(t *testing.T) {
	network := &resourceapi.ResourceSlice{Spec: resourceapi.ResourceSliceSpec{Driver: driver, AllNodes: ptr.To(true),
		Pool: resourceapi.ResourcePool{Name: "net", ResourceSliceCount: 1}}}
	pools := poolNodesOf([]*resourceapi.ResourceSlice{slice("n0", "a", "a"), slice("n1", "a"), network})
	cases := []struct {
		name    string
		claims  []*resourceapi.ResourceClaim
		victims []string
		want    map[string][]string // node: claims
		holders map[string][]string
	}{
		{name: "a claim reserved by a victim is freed on its node",
			claims: []*resourceapi.ResourceClaim{held("c0", []string{"n0/gpu-0"}, "a")}, victims: []string{"a"},
			want: map[string][]string{"n0": {"c0"}}, holders: map[string][]string{"n0": {"a"}}},
		{name: "a claim also reserved by a pod that stays is not",
			claims: []*resourceapi.ResourceClaim{held("c0", []string{"n0/gpu-0"}, "a", "x")}, victims: []string{"a"}},
		{name: "a claim shared by two victims is freed, both hold it",
			claims: []*resourceapi.ResourceClaim{held("c0", []string{"n0/gpu-0"}, "a", "b")}, victims: []string{"a", "b"},
			want: map[string][]string{"n0": {"c0"}}, holders: map[string][]string{"n0": {"a", "b"}}},
		{name: "a claim nobody reserves (in flight, or a driver's) is not",
			claims: []*resourceapi.ResourceClaim{held("c0", []string{"n0/gpu-0"})}, victims: []string{"a"}},
		{name: "an unallocated claim frees nothing",
			claims: []*resourceapi.ResourceClaim{{ObjectMeta: metav1.ObjectMeta{Name: "c0"}, Status: resourceapi.ResourceClaimStatus{
				ReservedFor: []resourceapi.ResourceClaimConsumerReference{{Resource: "pods", Name: "a", UID: "a"}}}}}, victims: []string{"a"}},
		{name: "a network-attached device is not promised to a node",
			claims: []*resourceapi.ResourceClaim{held("c0", []string{"net/gpu-0"}, "a")}, victims: []string{"a"}},
		{name: "a claim reserved by a PodGroup is not",
			claims: []*resourceapi.ResourceClaim{func() *resourceapi.ResourceClaim {
				c := held("c0", []string{"n0/gpu-0"})
				c.Status.ReservedFor = []resourceapi.ResourceClaimConsumerReference{{APIGroup: "scheduling.k8s.io", Resource: "podgroups", Name: "g", UID: "a"}}
				return c
			}()}, victims: []string{"a"}},
		{name: "claims of several victims on several nodes",
			claims: []*resourceapi.ResourceClaim{held("c0", []string{"n0/gpu-0"}, "a"), held("c1", []string{"n0/gpu-1"}, "b"),
				held("c2", []string{"n1/gpu-0"}, "c"), held("c3", []string{"n1/gpu-0"}, "x")},
			victims: []string{"a", "b", "c"},
			want:    map[string][]string{"n0": {"c0", "c1"}, "n1": {"c2"}}, holders: map[string][]string{"n0": {"a", "b"}, "n1": {"c"}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			victims := sets.New[types.UID]()
			for _, v := range tc.victims {
				victims.Insert(types.UID(v))
			}
			got := freeable(tc.claims, victims, pools)
			gotClaims, gotHolders := map[string][]string{}, map[string][]string{}
			for n, nc := range got {
				for _, c := range nc.Claims {
					gotClaims[n] = append(gotClaims[n], c.Name)
				}
				for _, h := range nc.Holders {
					gotHolders[n] = append(gotHolders[n], string(h))
				}
			}
			if tc.want == nil {
				tc.want, tc.holders = map[string][]string{}, map[string][]string{}
			}
			if !maps.EqualFunc(gotClaims, tc.want, slices.Equal) || !maps.EqualFunc(gotHolders, tc.holders, slices.Equal) {
				t.Errorf("freeable = %v held by %v, want %v held by %v", gotClaims, gotHolders, tc.want, tc.holders)
			}
		})
	}
}

func TestWithout(t *testing.T) {
	id := func(pool, dev string) structured.DeviceID { return structured.MakeDeviceID(driver, pool, dev) }
	c0 := held("c0", []string{"n0/gpu-0", "n0/gpu-1"}, "a")
	c1 := held("c1", []string{"n0/gpu-2"}, "x")
	admin := held("admin", []string{"n0/gpu-2"}, "a")
	admin.Status.Allocation.Devices.Results[0].AdminAccess = ptr.To(true)
	// Shared allocations (consumable capacity): two claims share gpu-3 by share IDs.
	share := func(name, shareID string, mem string, reservers ...string) *resourceapi.ResourceClaim {
		c := held(name, []string{"n0/gpu-3"}, reservers...)
		r := &c.Status.Allocation.Devices.Results[0]
		r.ShareID = ptr.To(types.UID(shareID))
		r.ConsumedCapacity = map[resourceapi.QualifiedName]resource.Quantity{"memory": resource.MustParse(mem)}
		return c
	}
	s0, s1 := share("s0", "s-0", "4Gi", "a"), share("s1", "s-1", "2Gi", "x")
	state := func(consumable bool) structured.AllocatedState {
		st := structured.AllocatedState{AllocatedDevices: sets.New(id("n0", "gpu-0"), id("n0", "gpu-1"), id("n0", "gpu-2")),
			AllocatedSharedDeviceIDs: sets.New[structured.SharedDeviceID](), AggregatedCapacity: structured.NewConsumedCapacityCollection()}
		if !consumable {
			st.AllocatedDevices.Insert(id("n0", "gpu-3"))
			return st
		}
		for _, c := range []*resourceapi.ResourceClaim{s0, s1} {
			r := c.Status.Allocation.Devices.Results[0]
			st.AllocatedSharedDeviceIDs.Insert(structured.MakeSharedDeviceID(id("n0", "gpu-3"), r.ShareID))
			st.AggregatedCapacity.Insert(structured.NewDeviceConsumedCapacity(id("n0", "gpu-3"), r.ConsumedCapacity))
		}
		return st
	}
	all := []*resourceapi.ResourceClaim{c0, c1, admin, s0, s1}
	cases := []struct {
		name       string
		freed      []*resourceapi.ResourceClaim
		consumable bool
		want       []string
		wantShares int
		wantMemory string
	}{
		{name: "a freed claim's devices are free", freed: []*resourceapi.ResourceClaim{c0}, want: []string{"gpu-2", "gpu-3"}},
		{name: "an admin-access result frees nothing: the device is another claim's", freed: []*resourceapi.ResourceClaim{admin},
			want: []string{"gpu-0", "gpu-1", "gpu-2", "gpu-3"}},
		{name: "without consumable capacity a shared device stays allocated while another claim shares it",
			freed: []*resourceapi.ResourceClaim{s0}, want: []string{"gpu-0", "gpu-1", "gpu-2", "gpu-3"}},
		{name: "without consumable capacity a shared device is freed with its last claim",
			freed: []*resourceapi.ResourceClaim{s0, s1}, want: []string{"gpu-0", "gpu-1", "gpu-2"}},
		{name: "with consumable capacity the share and its capacity are freed", consumable: true,
			freed: []*resourceapi.ResourceClaim{s0}, want: []string{"gpu-0", "gpu-1", "gpu-2"}, wantShares: 1, wantMemory: "2Gi"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			in := state(tc.consumable)
			before := len(in.AllocatedDevices)
			got := without(in, tc.freed, all, tc.consumable)
			var names []string
			for d := range got.AllocatedDevices {
				names = append(names, d.Device.String())
			}
			sort.Strings(names)
			if !slices.Equal(names, tc.want) {
				t.Errorf("allocated %v, want %v", names, tc.want)
			}
			if len(in.AllocatedDevices) != before {
				t.Errorf("the gathered state was changed")
			}
			if tc.consumable {
				if got.AllocatedSharedDeviceIDs.Len() != tc.wantShares {
					t.Errorf("%d shares allocated, want %d", got.AllocatedSharedDeviceIDs.Len(), tc.wantShares)
				}
				mem := got.AggregatedCapacity[id("n0", "gpu-3")]["memory"]
				if mem == nil || mem.String() != tc.wantMemory {
					t.Errorf("gpu-3's consumed memory %v, want %s", mem, tc.wantMemory)
				}
			}
		})
	}
}

// TestReleased: with the allocator, on the scheduler's DRA state: the nodes whose devices the
// victims' claims hold, and how many members those nodes hold once they are deallocated.
func TestReleased(t *testing.T) {
	logger, _ := ktesting.NewTestContext(t)
	pod := func(name string) *v1.Pod { return gangtest.Running(name, "lo", "n0", "1", 0) }
	cases := []struct {
		name    string
		claims  []*resourceapi.ResourceClaim
		victims []string
		want    map[string]gangfit.NodeRelease
	}{
		{name: "every device held by the victims is freed",
			claims:  []*resourceapi.ResourceClaim{held("c0", []string{"n0/gpu-0"}, "a"), held("c1", []string{"n0/gpu-1"}, "b"), held("c2", []string{"n1/gpu-0"}, "c")},
			victims: []string{"a", "b", "c"},
			want: map[string]gangfit.NodeRelease{"n0": {Holders: []types.UID{"a", "b"}, Copies: []int{2}},
				"n1": {Holders: []types.UID{"c"}, Copies: []int{1}}}},
		{name: "devices held by a pod that stays stay held",
			claims:  []*resourceapi.ResourceClaim{held("c0", []string{"n0/gpu-0"}, "a"), held("c1", []string{"n0/gpu-1"}, "x"), held("c2", []string{"n1/gpu-0"}, "c", "y")},
			victims: []string{"a", "c"},
			want:    map[string]gangfit.NodeRelease{"n0": {Holders: []types.UID{"a"}, Copies: []int{1}}}},
		{name: "no victim holds devices", claims: []*resourceapi.ResourceClaim{held("c0", []string{"n0/gpu-0"}, "x")}, victims: []string{"a"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			d := &fakeDRA{claims: map[string]*resourceapi.ResourceClaim{}, classes: map[string]*resourceapi.DeviceClass{class: gpuClass("")},
				slices: []*resourceapi.ResourceSlice{slice("n0", "a", "a"), slice("n1", "a")}}
			for _, c := range tc.claims {
				d.claims["ns/"+c.Name] = c
			}
			src := &Source{dra: d, features: structured.Features{}, cel: newTestCache(), extended: true}
			members := []*v1.Pod{withExtended(gangtest.Member("m0", "g", "1"), "1"), withExtended(gangtest.Member("m1", "g", "1"), "1")}
			check := src.ForCheck(logger, members)
			if check == nil {
				t.Fatal("no device check")
			}
			nodes := []fwk.NodeInfo{nodeInfo("n0", nil), nodeInfo("n1", nil)}
			var victims []*v1.Pod
			for _, v := range tc.victims {
				victims = append(victims, pod(v))
			}
			got := check.(gangfit.DeviceRelease).Released(victims, nodes, 4)
			if len(got) != len(tc.want) {
				t.Fatalf("released %v, want %v", got, tc.want)
			}
			for n, w := range tc.want {
				g, ok := got[n]
				if !ok || !slices.Equal(g.Holders, w.Holders) || !slices.Equal(g.Copies, w.Copies) {
					t.Errorf("node %s: released %+v, want %+v", n, g, w)
				}
			}
		})
	}
}

func TestReleasing(t *testing.T) {
	claims := []*resourceapi.ResourceClaim{held("c0", []string{"n0/gpu-0"}, "a"), held("c1", []string{"n0/gpu-1"}, "b", "x"),
		held("c2", []string{"n1/gpu-0"}, "c")}
	cases := []struct {
		name  string
		nodes []string
		gone  []string
		want  int
	}{
		{name: "a claim only an evicted pod reserves, on a nominated node", nodes: []string{"n0"}, gone: []string{"a", "b"}, want: 1},
		{name: "a node named twice counts once", nodes: []string{"n0", "n0"}, gone: []string{"a"}, want: 1},
		{name: "a claim a live pod also reserves is not releasing", nodes: []string{"n0"}, gone: []string{"b"}, want: 0},
		{name: "claims on other nodes are not counted", nodes: []string{"n0"}, gone: []string{"c"}, want: 0},
		{name: "every nominated node", nodes: []string{"n0", "n1"}, gone: []string{"a", "c"}, want: 2},
		{name: "nothing evicted", nodes: []string{"n0", "n1"}, want: 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			d := &fakeDRA{claims: map[string]*resourceapi.ResourceClaim{}, classes: map[string]*resourceapi.DeviceClass{class: gpuClass("")},
				slices: []*resourceapi.ResourceSlice{slice("n0", "a", "a"), slice("n1", "a")}}
			for _, c := range claims {
				d.claims["ns/"+c.Name] = c
			}
			src := &Source{dra: d}
			gone := sets.New[types.UID]()
			for _, g := range tc.gone {
				gone.Insert(types.UID(g))
			}
			got, err := src.Releasing(tc.nodes, gone)
			if err != nil || got != tc.want {
				t.Errorf("Releasing(%v, %v) = %d, %v; want %d", tc.nodes, tc.gone, got, err, tc.want)
			}
		})
	}
	if n, err := (*Source)(nil).Releasing([]string{"n0"}, sets.New[types.UID]("a")); n != 0 || err != nil {
		t.Errorf("a nil source: %d, %v; want 0", n, err)
	}
}
