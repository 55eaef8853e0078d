package devices

import (
	"context"
	"fmt"
	"sort"
	"time"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/dynamic-resource-allocation/structured"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/custom-scheduler/custom-scheduler/pkg/coscheduling/gangfit"
)

// Devices in a reservation (see gangfit.NewReservable and the plugin's reservation). A gang that
// holds a reservation waits for the devices of the nodes its members are nominated to, as it waits
// for their CPU. Upstream's hold (nominated pods count as if they ran, for the Filter plugins of
// pods of their priority or lower) does not cover devices: the DynamicResources plugin has no
// PreFilterExtensions, so it never sees a nominated pod's claims. Two things close that gap here:
// the reservation's plan counts the devices that free as free (Freeing), and a pod that would take
// the devices the held members wait for is kept off their node (KeptOff).

// keptOffBudget bounds the allocator's time in one KeptOff (every held node together); a node not
// reached keeps nobody off.
const keptOffBudget = time.Second

var _ gangfit.FreeingDevices = &Source{}

// Freeing implements gangfit.FreeingDevices: a source like s whose checks count as free the devices
// of the claims reserved for leaving pods only (the pods a reservation's plan counts as leaving).
func (s *Source) Freeing(leaving sets.Set[types.UID]) gangfit.DeviceSource {
	if s == nil {
		return nil
	}
	c := *s
	c.freed = leaving
	return &c
}

// freedState is state less the devices of the claims whose consumers are all in freed (see without:
// each dedicated device, shared allocation and consumed capacity they alone hold is released). A
// claim reserved for nobody (allocated, not in use yet) keeps its devices.
func freedState(state *structured.AllocatedState, claims []*resourceapi.ResourceClaim, freed sets.Set[types.UID], consumable bool) *structured.AllocatedState {
	var gone []*resourceapi.ResourceClaim
	for _, claim := range claims {
		if claim.Status.Allocation != nil && onlyFor(claim, freed) {
			gone = append(gone, claim)
		}
	}
	out := without(*state, gone, claims, consumable)
	return &out
}

// onlyFor reports whether a claim is reserved for pods, all of them in pods. A claim reserved for a
// PodGroup is not: it stays allocated while the PodGroup exists (see workload.go).
func onlyFor(claim *resourceapi.ResourceClaim, pods sets.Set[types.UID]) bool {
	if len(claim.Status.ReservedFor) == 0 {
		return false
	}
	for _, ref := range claim.Status.ReservedFor {
		if ref.Resource != "pods" || ref.APIGroup != "" || !pods.Has(ref.UID) {
			return false
		}
	}
	return true
}

// KeptOff returns the nodes of held (a node, and the unbound members a reservation nominated there)
// on which pod's devices do not fit beside those the held members wait for: there the pod would take
// devices that the reservation holds, so it is kept off, as NodeResourcesFit keeps it off the held
// CPU. Only devices the model counts are compared: the pod's and the members' own claims that are
// not allocated yet and shared with no other of them, and the extended resources DRA backs on that
// node; on a node where the members wait for no such device, nobody is kept off. node looks up the
// cycle's node of a name (nil when there is none). Nil when the pod claims no device the model counts.
func (s *Source) KeptOff(logger klog.Logger, pod *v1.Pod, held map[string][]*v1.Pod, node func(name string) fwk.NodeInfo) (sets.Set[string], error) {
	if s == nil || s.dra == nil || len(held) == 0 {
		return nil, nil
	}
	all := []*v1.Pod{pod}
	for _, ms := range held {
		all = append(all, ms...)
	}
	shared := s.sharedClaims(all)
	delegated := sets.New[v1.ResourceName]()
	own := s.memberOf(pod, shared, delegated)
	if len(own.claims) == 0 && len(own.extended) == 0 && len(unallocatedOnce(nil, sets.New[types.UID](), own.group)) == 0 {
		return nil, nil
	}
	names := make([]string, 0, len(held))
	for n := range held {
		names = append(names, n)
	}
	sort.Strings(names)
	// The claims to compare per node, first: a reservation whose members wait for no device the
	// model counts (a CPU gang) costs no allocator.
	compare := map[string][]*resourceapi.ResourceClaim{}
	for _, name := range names {
		ni := node(name)
		if ni == nil || ni.Node() == nil {
			continue
		}
		serial := 0
		var waiting []*resourceapi.ResourceClaim
		// A PodGroup's claim not allocated yet is waited for once on the node, however many of its
		// members are held there (see workload.go); allocated, its devices are taken already.
		groups := sets.New[types.UID]()
		for _, m := range held[name] {
			mm := s.memberOf(m, shared, delegated)
			waiting = append(waiting, claimsOn(mm, ni, &serial)...)
			waiting = unallocatedOnce(waiting, groups, mm.group)
		}
		if len(waiting) == 0 {
			continue
		}
		mine := claimsOn(own, ni, &serial)
		// The pod's PodGroup's claims, unless the held members use them too.
		mine = unallocatedOnce(mine, groups, own.group)
		if len(mine) > 0 {
			compare[name] = append(waiting, mine...)
		}
	}
	if len(compare) == 0 {
		return nil, nil
	}
	v := s.state()
	if v.err != nil {
		return nil, v.err
	}
	allocator := v.allocator
	ctx, cancel := context.WithTimeout(klog.NewContext(context.Background(), logger), keptOffBudget)
	defer cancel()
	out := sets.New[string]()
	for _, name := range names {
		claims, ok := compare[name]
		if !ok {
			continue
		}
		res, err := allocator.Allocate(ctx, node(name).Node(), claims)
		if err != nil && ctx.Err() != nil {
			logger.V(4).Info("Held devices not compared: out of time", "pod", klog.KObj(pod), "node", name)
			break
		}
		if err == nil && res != nil {
			continue
		}
		out.Insert(name)
	}
	return out, nil
}

// claimsOn are the claims the model counts for a member on a node: its own unallocated claims, and
// the claim the DynamicResources plugin would make for the extended resources DRA backs there (not
// those the node's device plugin advertises), named apart by serial.
func claimsOn(m member, ni fwk.NodeInfo, serial *int) []*resourceapi.ResourceClaim {
	out := append([]*resourceapi.ResourceClaim(nil), m.claims...)
	var extended []extendedRequest
	for _, e := range m.extended {
		if ni.GetAllocatable().GetScalarResources()[e.name] > 0 {
			continue
		}
		extended = append(extended, e)
	}
	if len(extended) > 0 {
		c := extendedClaim(extended, *serial)
		c.Name = fmt.Sprintf("held-%s", c.Name)
		c.UID = types.UID(c.Name)
		*serial++
		out = append(out, c)
	}
	return out
}
