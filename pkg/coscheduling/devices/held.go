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
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
)

// Held devices (see the plugin's held devices and gang.HeldDevices): whether a pod's devices fit on a
// held node beside those the pods held there wait for.

// keptOffBudget bounds the allocator's time in one KeptOff (every held node together); a node not
// reached keeps nobody off.
const keptOffBudget = time.Second

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
	own, waits := s.heldMembers(pod, held)
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
		for _, mm := range waits[name] {
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

// unallocatedOnce appends to out the claims not allocated yet whose UID seen does not hold, and
// records them in seen: a PodGroup's claim compared once, however many members use it.
func unallocatedOnce(out []*resourceapi.ResourceClaim, seen sets.Set[types.UID], claims []*resourceapi.ResourceClaim) []*resourceapi.ResourceClaim {
	for _, c := range claims {
		if c.Status.Allocation != nil || seen.Has(c.UID) {
			continue
		}
		seen.Insert(c.UID)
		out = append(out, c)
	}
	return out
}
