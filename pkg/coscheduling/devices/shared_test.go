package devices

import (
	"fmt"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2/ktesting"

	"github.com/custom-scheduler/custom-scheduler/pkg/coscheduling/internal/gangtest"
)

// A ResourceClaim several members of a gang name (resourceClaimName, no PodGroup of upstream's):
// allocated already (or in flight), it pins them all to the node its devices are on, and the check
// counts them only there; not allocated yet, it is left to the real filters (a gang that waits at
// Permit cannot share it: the first member's allocation stays in flight while it waits, and
// DynamicResources refuses the others meanwhile).
func TestSharedClaimPinsItsUsers(t *testing.T) {
	logger, _ := ktesting.NewTestContext(t)
	cases := []struct {
		name  string
		nodes map[string]int
		// shared is the claim's size; allocatedOn the node its allocation is on ("" none),
		// inFlightOn the node its allocation in flight is on; own each member's own claim size (0 none).
		shared                  int64
		allocatedOn, inFlightOn string
		own                     int64
		want                    map[string]int // members node n holds, of kind 0
		unmodelled              string
	}{
		{name: "allocated on n1: the members go only there",
			nodes: map[string]int{"n0": 4, "n1": 2}, shared: 2, allocatedOn: "n1",
			want: map[string]int{"n0": 0, "n1": 4}},
		{name: "in flight on n1 (its first user waits at Permit or binds): as allocated there",
			nodes: map[string]int{"n0": 4, "n1": 2}, shared: 2, inFlightOn: "n1",
			want: map[string]int{"n0": 0, "n1": 4}},
		{name: "allocated on n1, a device each besides: n1's devices the claim leaves hold 2",
			nodes: map[string]int{"n0": 8, "n1": 4}, shared: 2, allocatedOn: "n1", own: 1,
			want: map[string]int{"n0": 0, "n1": 2}},
		{name: "not allocated yet: left to the real filters",
			nodes: map[string]int{"n0": 1}, shared: 1,
			want: map[string]int{"n0": 4}, unmodelled: "claim team is shared with other members"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			d := newFakeDRA(tc.nodes)
			team := groupClaim("team", tc.shared, tc.allocatedOn)
			d.claims["ns/team"] = team
			if tc.inFlightOn != "" {
				// Its devices are allocated in the state (a held claim of the fake); the claim shows none.
				pending := groupClaim("pending", tc.shared, tc.inFlightOn).Status.Allocation
				d.pending = map[types.UID]*resourceapi.AllocationResult{team.UID: pending}
				d.claims["other/in-flight"] = &resourceapi.ResourceClaim{Status: resourceapi.ResourceClaimStatus{Allocation: pending}}
			}
			var members []*v1.Pod
			for i := range 4 {
				p := gangtest.Member(fmt.Sprintf("m%d", i), "g", "1")
				p.Namespace = "ns"
				p.Spec.ResourceClaims = []v1.PodResourceClaim{podNamedClaim("team", "team")}
				if tc.own > 0 {
					c := claimFor(p, tc.own)
					d.claims["ns/"+c.Name] = c
					p.Spec.ResourceClaims = append(p.Spec.ResourceClaims, podTemplateClaim("gpu", "gpu-template"))
					p.Status.ResourceClaimStatuses = []v1.PodResourceClaimStatus{{Name: "gpu", ResourceClaimName: &c.Name}}
				}
				members = append(members, p)
			}
			dc := (&Source{dra: d, cel: newTestCache(), extended: true}).ForCheck(logger, members)
			if dc == nil {
				t.Fatal("no device check")
			}
			check := dc.(*Check)
			for _, m := range members {
				if got := check.Unmodelled[m.UID]; !strings.Contains(got, tc.unmodelled) || (tc.unmodelled == "") != (got == "") {
					t.Errorf("member %s: unmodelled %q, want %q", m.Name, got, tc.unmodelled)
				}
			}
			if tc.unmodelled != "" {
				return
			}
			if check.Kinds() != 1 {
				t.Fatalf("%d kinds, want 1", check.Kinds())
			}
			for _, m := range members {
				if !check.Modelled(m) {
					t.Errorf("member %s not modelled", m.Name)
				}
			}
			for n, want := range tc.want {
				if got := check.Copies(0, nodeInfo(n, nil), 4); got != want {
					t.Errorf("node %s holds %d members, want %d", n, got, want)
				}
			}
		})
	}
}
