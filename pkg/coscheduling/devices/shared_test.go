package devices

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/klog/v2/ktesting"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework/preemption"
	"k8s.io/utils/ptr"

	"github.com/custom-scheduler/custom-scheduler/pkg/coscheduling/gangfit"
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
		// leaving: the claim is reserved for one pod, which the source counts as leaving (Freeing).
		leaving    bool
		want       map[string]int // members node n holds, of kind 0
		unmodelled string
	}{
		{name: "allocated on n1: the members go only there",
			nodes: map[string]int{"n0": 4, "n1": 2}, shared: 2, allocatedOn: "n1",
			want: map[string]int{"n0": 0, "n1": 4}},
		{name: "in flight on n1 (a member waits at Permit with it): left to the real filters, which refuse the others until it is written",
			nodes: map[string]int{"n0": 4, "n1": 2}, shared: 2, inFlightOn: "n1",
			unmodelled: "claim team is shared with other members"},
		{name: "allocated on n1 only for a pod a reservation's plan counts as leaving: its allocation goes with it",
			nodes: map[string]int{"n0": 4, "n1": 2}, shared: 2, allocatedOn: "n1", leaving: true,
			unmodelled: "claim team is shared with other members"},
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
			team := teamClaim(tc.shared, tc.allocatedOn, "first")
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
			src := gangfit.DeviceSource(&Source{dra: d, cel: newTestCache(), extended: true})
			if tc.leaving {
				src = src.(*Source).Freeing(sets.New[types.UID]("first"))
			}
			dc := src.ForCheck(logger, members)
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

// teamClaim is the claim "team" of count devices, allocated on node ("": not allocated) and reserved
// for the pods reservers, as DynamicResources leaves a claim pods share.
func teamClaim(count int64, node string, reservers ...string) *resourceapi.ResourceClaim {
	c := groupClaim("team", count, node)
	c.Status.ReservedFor = nil
	if node == "" {
		return c
	}
	for _, p := range reservers {
		c.Status.ReservedFor = append(c.Status.ReservedFor, resourceapi.ResourceClaimConsumerReference{Resource: "pods", Name: p, UID: types.UID(p)})
	}
	return c
}

// A gang pinned to n0 by the claim it shares with "first" (of lower priority, its only other user)
// preempts there, but never "first": evicting it would free the claim, and the gang, no longer pinned,
// could then never share it (an unallocated claim cannot be shared by a gang that waits at Permit).
func TestPreemptionSparesThePinsReservers(t *testing.T) {
	for _, tc := range []struct {
		name    string
		lo      bool // a low-priority pod of no claim takes 4 CPUs of n0 beside first
		victims []string
	}{
		{name: "only the claim's other user takes the room: nothing to evict", victims: nil},
		{name: "a pod of no claim takes room too: it is evicted, first stays", lo: true, victims: []string{"lo"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			logger, _ := ktesting.NewTestContext(t)
			d := newFakeDRA(map[string]int{"n0": 1, "n1": 1})
			d.claims["ns/team"] = teamClaim(1, "n0", "first")
			first := gangtest.Running("first", "", "n0", "5", 0)
			first.Spec.ResourceClaims = []v1.PodResourceClaim{podNamedClaim("team", "team")}
			on := []*v1.Pod{first}
			if tc.lo {
				first.Spec.Containers[0].Resources.Requests[v1.ResourceCPU] = resource.MustParse("2")
				on = append(on, gangtest.Running("lo", "", "n0", "4", 0))
			}
			sharing := func(name string) *v1.Pod {
				p := gangtest.Member(name, "hi", "2")
				p.Spec.Priority = ptr.To[int32](100)
				p.Spec.ResourceClaims = []v1.PodResourceClaim{podNamedClaim("team", "team")}
				return p
			}
			gang := []*v1.Pod{sharing("hi-0"), sharing("hi-1")}
			nodes := []fwk.NodeInfo{gangtest.CPUNode("n0", "8", on...), gangtest.CPUNode("n1", "8")}
			f := gangfit.New(logger, "ns/hi", gang, 2, nodes, nil, nil, &gangfit.Shared{Devices: newSource(d)}, true)
			defer f.Done()
			plan := gangfit.PlanPreemption(f, nodes, gangfit.Policy{}, nil, 100, "ns/hi", preemption.PodTerminatingByPreemption, nil)
			if got := podNames(plan.Victims); !slices.Equal(got, tc.victims) {
				t.Errorf("fits %v, victims %v; want %v", plan.Fits, got, tc.victims)
			}
		})
	}
}
