package devices

import (
	"testing"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/dynamic-resource-allocation/structured"
	"k8s.io/klog/v2/ktesting"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/utils/ptr"

	"github.com/custom-scheduler/custom-scheduler/pkg/coscheduling/internal/gangtest"
)

// allocatedTo is a claim holding the devices of pool node, reserved for the pods (by UID).
func allocatedTo(name, node string, devices []string, pods ...string) *resourceapi.ResourceClaim {
	c := &resourceapi.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "other", Name: name, UID: types.UID(name)},
		Status: resourceapi.ResourceClaimStatus{Allocation: &resourceapi.AllocationResult{}}}
	for _, d := range devices {
		c.Status.Allocation.Devices.Results = append(c.Status.Allocation.Devices.Results,
			resourceapi.DeviceRequestAllocationResult{Request: "r", Driver: driver, Pool: node, Device: d})
	}
	for _, p := range pods {
		c.Status.ReservedFor = append(c.Status.ReservedFor, resourceapi.ResourceClaimConsumerReference{Resource: "pods", Name: p, UID: types.UID(p)})
	}
	return c
}

func newFakeDRA(nodes map[string]int) *fakeDRA {
	d := &fakeDRA{claims: map[string]*resourceapi.ResourceClaim{}, classes: map[string]*resourceapi.DeviceClass{class: gpuClass("")}}
	for n, count := range nodes {
		models := make([]string, count)
		for i := range models {
			models[i] = "a"
		}
		d.slices = append(d.slices, slice(n, models...))
	}
	return d
}

// claimer is a member of group g with its own claim of count devices, created in d.
func claimer(d *fakeDRA, name, group string, count int64) *v1.Pod {
	p := gangtest.Member(name, group, "1")
	c := claimFor(p, count)
	d.claims[p.Namespace+"/"+c.Name] = c
	return withClaim(p, c)
}

// Which members' claims the model counts, and so which a placement plan may narrow.
func TestModelled(t *testing.T) {
	logger, _ := ktesting.NewTestContext(t)
	d := newFakeDRA(map[string]int{"n0": 4})
	own0, own1 := claimer(d, "own0", "g", 1), claimer(d, "own1", "g", 1)
	// Two members naming one claim.
	one := claimFor(gangtest.Member("one", "g", "1"), 1)
	d.claims["ns/"+one.Name] = one
	sharing0 := gangtest.Member("sharing0", "g", "1")
	sharing0.Spec.ResourceClaims = []v1.PodResourceClaim{{Name: "gpu", ResourceClaimName: ptr.To(one.Name)}}
	sharing1 := sharing0.DeepCopy()
	sharing1.Name, sharing1.UID = "sharing1", "sharing1"
	// A claim allocated already.
	pinned := claimer(d, "pinned", "g", 1)
	d.claims["ns/pinned-gpu"].Status.Allocation = &resourceapi.AllocationResult{}
	// A template whose claim is not made yet, and no member's is.
	pending := gangtest.Member("pending", "g", "1")
	pending.Spec.ResourceClaims = []v1.PodResourceClaim{{Name: "gpu", ResourceClaimTemplateName: ptr.To("t")}}
	// The template of own0 and own1, whose claim is not made yet: it claims what theirs do.
	peer := gangtest.Member("peer", "g", "1")
	peer.Spec.ResourceClaims = []v1.PodResourceClaim{{Name: "gpu", ResourceClaimTemplateName: ptr.To("gpu-template")}}
	// Its claim named in its status but not seen yet.
	unseen := peer.DeepCopy()
	unseen.Name, unseen.UID = "unseen", "unseen"
	unseen.Status.ResourceClaimStatuses = []v1.PodResourceClaimStatus{{Name: "gpu", ResourceClaimName: ptr.To("unseen-gpu")}}
	plain := gangtest.Member("plain", "g", "1")

	src := &Source{dra: d, cel: newTestCache(), extended: true}
	check := src.ForCheck(logger, []*v1.Pod{own0, own1, sharing0, sharing1, pinned, pending, peer, unseen, plain})
	for _, tc := range []struct {
		pod  *v1.Pod
		want bool
	}{{own0, true}, {own1, true}, {sharing0, false}, {sharing1, false}, {pinned, false}, {pending, false}, {peer, true}, {unseen, true}, {plain, true}} {
		if got := check.Modelled(tc.pod); got != tc.want {
			t.Errorf("Modelled(%s) = %v, want %v", tc.pod.Name, got, tc.want)
		}
	}
	if check.Kind(peer) != check.Kind(own0) || check.Kind(unseen) != check.Kind(own0) || check.Kind(own0) < 0 {
		t.Errorf("kinds: own0 %d, peer %d, unseen %d: want one counted kind", check.Kind(own0), check.Kind(peer), check.Kind(unseen))
	}
	if got := check.Copies(check.Kind(own0), nodeInfo("n0", nil), 8); got != 4 {
		t.Errorf("n0 holds %d members, want its 4 devices' worth", got)
	}
	// The DRA state could not be read: no claim is counted.
	broken := &Check{kindOf: map[types.UID]int{own0.UID: 0}, pinned: sets.New[types.UID]()}
	if broken.Modelled(own0) {
		t.Error("a member counted by a check without an allocator")
	}
}

// A reservation's plan counts the devices of leaving pods as free: the claims reserved for them only.
func TestFreeing(t *testing.T) {
	logger, _ := ktesting.NewTestContext(t)
	d := newFakeDRA(map[string]int{"n0": 4})
	d.claims["other/a"] = allocatedTo("a", "n0", []string{"gpu-0"}, "leaving")
	d.claims["other/b"] = allocatedTo("b", "n0", []string{"gpu-1"}, "leaving", "staying")
	d.claims["other/c"] = allocatedTo("c", "n0", []string{"gpu-2"}, "staying")
	d.claims["other/d"] = allocatedTo("d", "n0", []string{"gpu-3"}) // reserved for nobody yet
	gang := []*v1.Pod{claimer(d, "m0", "g", 1), claimer(d, "m1", "g", 1), claimer(d, "m2", "g", 1)}
	src := &Source{dra: d, cel: newTestCache(), extended: true}
	for _, tc := range []struct {
		name    string
		leaving sets.Set[types.UID]
		want    int
	}{
		{name: "nothing leaves", want: 0},
		{name: "the pod of a leaves: a's device", leaving: sets.New[types.UID]("leaving"), want: 1},
		{name: "both consumers of b leave too", leaving: sets.New[types.UID]("leaving", "staying"), want: 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := src.Freeing(tc.leaving)
			check := s.ForCheck(logger, gang)
			if got := check.Copies(0, nodeInfo("n0", nil), 3); got != tc.want {
				t.Errorf("n0 holds %d members, want %d", got, tc.want)
			}
		})
	}
	// The source itself is unchanged.
	if got := src.ForCheck(logger, gang).Copies(0, nodeInfo("n0", nil), 3); got != 0 {
		t.Errorf("Freeing changed its source: n0 holds %d", got)
	}
}

// freedState releases shared allocations and consumed capacity too.
func TestFreedStateShared(t *testing.T) {
	share := types.UID("s1")
	id := structured.MakeDeviceID(driver, "n0", "gpu-0")
	claim := allocatedTo("a", "n0", nil, "leaving")
	claim.Status.Allocation.Devices.Results = []resourceapi.DeviceRequestAllocationResult{{Request: "r", Driver: driver, Pool: "n0", Device: "gpu-0", ShareID: &share}}
	state := &structured.AllocatedState{AllocatedDevices: sets.New[structured.DeviceID](),
		AllocatedSharedDeviceIDs: sets.New(structured.MakeSharedDeviceID(id, &share)), AggregatedCapacity: structured.NewConsumedCapacityCollection()}
	out := freedState(state, []*resourceapi.ResourceClaim{claim}, sets.New[types.UID]("leaving"), true)
	if out.AllocatedSharedDeviceIDs.Len() != 0 {
		t.Errorf("shared allocation not released: %v", out.AllocatedSharedDeviceIDs)
	}
	if state.AllocatedSharedDeviceIDs.Len() != 1 {
		t.Error("freedState changed its input")
	}
}

// A pod is kept off a held node when its devices do not fit beside those the held members wait for.
func TestKeptOff(t *testing.T) {
	logger, _ := ktesting.NewTestContext(t)
	d := newFakeDRA(map[string]int{"n0": 2, "n1": 4, "n2": 2})
	d.classes[class] = gpuClass("")
	held := map[string][]*v1.Pod{
		"n0": {claimer(d, "m0", "big", 2)},        // both devices of n0 held
		"n1": {claimer(d, "m1", "big", 2)},        // 2 of 4 held: room beside
		"n2": {gangtest.Member("m2", "big", "1")}, // CPU only: no device held
	}
	nodes := map[string]fwk.NodeInfo{"n0": nodeInfo("n0", nil), "n1": nodeInfo("n1", nil), "n2": nodeInfo("n2", nil)}
	src := &Source{dra: d, cel: newTestCache(), extended: true}
	for _, tc := range []struct {
		name string
		pod  *v1.Pod
		want []string
	}{
		{name: "a claim of 1: kept off n0 only", pod: claimer(d, "lone", "", 1), want: []string{"n0"}},
		{name: "a claim of 3: kept off n0 and n1", pod: claimer(d, "lone3", "", 3), want: []string{"n0", "n1"}},
		{name: "an extended resource DRA backs: kept off n0", pod: withExtended(gangtest.Member("ext", "", "1"), "1"), want: []string{"n0"}},
		{name: "no devices: kept off nowhere", pod: gangtest.Member("cpu", "", "1")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := src.KeptOff(logger, tc.pod, held, func(name string) fwk.NodeInfo { return nodes[name] })
			if err != nil {
				t.Fatal(err)
			}
			if !got.Equal(sets.New(tc.want...)) {
				t.Errorf("kept off %v, want %v", sets.List(got), tc.want)
			}
		})
	}
}
