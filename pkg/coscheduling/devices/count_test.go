package devices

import (
	"context"
	"testing"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/utils/ptr"
)

func request(name string, mode resourceapi.DeviceAllocationMode, count int64) resourceapi.DeviceRequest {
	return resourceapi.DeviceRequest{Name: name, Exactly: &resourceapi.ExactDeviceRequest{DeviceClassName: class, AllocationMode: mode, Count: count}}
}

func claimWith(reqs ...resourceapi.DeviceRequest) *resourceapi.ResourceClaim {
	return &resourceapi.ResourceClaim{Spec: resourceapi.ResourceClaimSpec{Devices: resourceapi.DeviceClaim{Requests: reqs}}}
}

func TestLeastDevices(t *testing.T) {
	exact := resourceapi.DeviceAllocationModeExactCount
	admin := request("admin", exact, 4)
	admin.Exactly.AdminAccess = ptr.To(true)
	alternatives := resourceapi.DeviceRequest{Name: "alt", FirstAvailable: []resourceapi.DeviceSubRequest{
		{Name: "big", DeviceClassName: class, AllocationMode: exact, Count: 4},
		{Name: "small", DeviceClassName: class, AllocationMode: exact, Count: 2},
	}}
	withAll := alternatives.DeepCopy()
	withAll.FirstAvailable = append(withAll.FirstAvailable, resourceapi.DeviceSubRequest{Name: "all", DeviceClassName: class, AllocationMode: resourceapi.DeviceAllocationModeAll})
	cases := []struct {
		name   string
		claims []*resourceapi.ResourceClaim
		want   int64
	}{
		{name: "none", want: 0},
		{name: "exact counts add up over requests and claims", claims: []*resourceapi.ResourceClaim{claimWith(request("a", exact, 2), request("b", exact, 1)), claimWith(request("c", exact, 3))}, want: 6},
		{name: "a count left to defaulting is one", claims: []*resourceapi.ResourceClaim{claimWith(request("a", "", 0))}, want: 1},
		{name: "all devices: none for sure", claims: []*resourceapi.ResourceClaim{claimWith(request("a", resourceapi.DeviceAllocationModeAll, 0))}, want: 0},
		{name: "admin access takes none from others", claims: []*resourceapi.ResourceClaim{claimWith(admin, request("b", exact, 1))}, want: 1},
		{name: "alternatives: the smallest", claims: []*resourceapi.ResourceClaim{claimWith(alternatives)}, want: 2},
		{name: "alternatives with all devices: none", claims: []*resourceapi.ResourceClaim{claimWith(*withAll)}, want: 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := leastDevices(tc.claims); got != tc.want {
				t.Errorf("leastDevices = %d, want %d", got, tc.want)
			}
		})
	}
}

func TestMergeClaims(t *testing.T) {
	exact := resourceapi.DeviceAllocationModeExactCount
	constrained := claimWith(request("a", exact, 1), request("b", exact, 1))
	constrained.Spec.Devices.Constraints = []resourceapi.DeviceConstraint{{MatchAttribute: ptr.To(resourceapi.FullyQualifiedName("gpu.example.com/numa"))}}
	admin := request("admin", exact, 1)
	admin.Exactly.AdminAccess = ptr.To(true)
	alternatives := resourceapi.DeviceRequest{Name: "alt", FirstAvailable: []resourceapi.DeviceSubRequest{{Name: "one", DeviceClassName: class, AllocationMode: exact, Count: 1}}}
	cases := []struct {
		name   string
		claims []*resourceapi.ResourceClaim
		n      int
		// want are the merged requests' counts; nil: not merged.
		want []int64
	}{
		{name: "one request: n times its count", claims: []*resourceapi.ResourceClaim{claimWith(request("gpu", exact, 2))}, n: 3, want: []int64{6}},
		{name: "requests of several claims stay apart", claims: []*resourceapi.ResourceClaim{claimWith(request("gpu", exact, 1)), claimWith(request("nic", "", 0))}, n: 4, want: []int64{4, 4}},
		{name: "a constraint holds within a claim: not merged", claims: []*resourceapi.ResourceClaim{constrained}, n: 2},
		{name: "all devices: not merged", claims: []*resourceapi.ResourceClaim{claimWith(request("a", resourceapi.DeviceAllocationModeAll, 0))}, n: 2},
		{name: "admin access: not merged", claims: []*resourceapi.ResourceClaim{claimWith(admin)}, n: 2},
		{name: "alternatives: not merged", claims: []*resourceapi.ResourceClaim{claimWith(alternatives)}, n: 2},
		{name: "32 devices merge", claims: []*resourceapi.ResourceClaim{claimWith(request("gpu", exact, 4))}, n: 8, want: []int64{32}},
		{name: "more than one allocation result holds: not merged", claims: []*resourceapi.ResourceClaim{claimWith(request("gpu", exact, 4))}, n: 9},
		{name: "no claims", n: 2},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := mergeClaims(tc.claims, tc.n)
			if tc.want == nil {
				if got != nil {
					t.Fatalf("merged into %d requests, want not merged", len(got.Spec.Devices.Requests))
				}
				return
			}
			if got == nil {
				t.Fatal("not merged")
			}
			var counts []int64
			for _, r := range got.Spec.Devices.Requests {
				counts = append(counts, r.Exactly.Count)
				if r.Exactly.AllocationMode != exact {
					t.Errorf("request %s: mode %q", r.Name, r.Exactly.AllocationMode)
				}
			}
			if len(counts) != len(tc.want) {
				t.Fatalf("counts %v, want %v", counts, tc.want)
			}
			for i := range counts {
				if counts[i] != tc.want[i] {
					t.Fatalf("counts %v, want %v", counts, tc.want)
				}
			}
		})
	}
}

// The selectors' answers are kept per version of a slice and of the class: a slice or a class
// changed is evaluated again.
func TestMatchCache(t *testing.T) {
	d := &fakeDRA{claims: map[string]*resourceapi.ResourceClaim{}, classes: map[string]*resourceapi.DeviceClass{class: gpuClass("a")}}
	src := &Source{dra: d, cel: newTestCache(), matchCache: &matchCache{}}
	req := &resourceapi.ExactDeviceRequest{DeviceClassName: class, Count: 1}
	sl := slice("n0", "a", "b")
	sl.UID, sl.ResourceVersion = "s0", "1"
	ask := func(want ...bool) {
		t.Helper()
		pr, ok := src.resolve(req)
		if !ok {
			t.Fatalf("request %v not resolved", req)
		}
		got, ok := src.matches(context.Background(), sl, pr)
		if !ok || len(got) != len(want) {
			t.Fatalf("matches = %v, %v; want %v", got, ok, want)
		}
		for i := range want {
			if got[i] != want[i] {
				t.Fatalf("matches = %v, want %v", got, want)
			}
		}
	}
	ask(true, false)
	// The same version answers from the cache, even where the object changed (it does not, in
	// an informer's cache, without a new version).
	sl.Spec.Devices[1].Attributes["model"] = resourceapi.DeviceAttribute{StringValue: ptr.To("a")}
	ask(true, false)
	sl.ResourceVersion = "2"
	ask(true, true)
	cls := gpuClass("b")
	cls.ResourceVersion = "7"
	d.classes[class] = cls
	ask(false, false)
	// A selector that does not compile: the allocator answers.
	req.Selectors = []resourceapi.DeviceSelector{{CEL: &resourceapi.CELDeviceSelector{Expression: "device.nope("}}}
	if _, ok := src.resolve(req); ok {
		t.Error("a selector that does not compile resolved")
	}
}
