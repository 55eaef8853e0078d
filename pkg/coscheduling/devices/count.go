package devices

import (
	"context"
	"fmt"
	"slices"

	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/dynamic-resource-allocation/structured"
	"k8s.io/utils/ptr"
)

// nodeDevices are the devices of a node's own ResourceSlices (see freeBound, plainCount).
type nodeDevices struct {
	slices []*resourceapi.ResourceSlice
	ids    []structured.DeviceID
	// shared is set when some device takes more than one allocation (DRAConsumableCapacity):
	// free devices then bound nothing.
	shared bool
	// plain is set when each of the node's pools is one slice that says so, and no device has a
	// taint, binding conditions, counters it consumes or shares: a device is then free for a
	// request when it is not allocated and matches it.
	plain bool
}

// devicesOf returns the devices of the node's own slices; built for every node at the first call of
// a check, from the slices the check's allocator reads.
func (c *Check) devicesOf(node string) *nodeDevices {
	if c.byNode == nil {
		c.byNode = map[string]*nodeDevices{}
		type pool struct{ node, driver, name string }
		pools := map[pool]int{}
		for _, sl := range c.slices {
			name := ptr.Deref(sl.Spec.NodeName, "")
			if name == "" {
				continue
			}
			nd := c.byNode[name]
			if nd == nil {
				nd = &nodeDevices{plain: true}
				c.byNode[name] = nd
			}
			nd.slices = append(nd.slices, sl)
			pools[pool{name, sl.Spec.Driver, sl.Spec.Pool.Name}]++
			if sl.Spec.Pool.ResourceSliceCount != 1 || len(sl.Spec.SharedCounters) > 0 {
				nd.plain = false
			}
			for i := range sl.Spec.Devices {
				d := &sl.Spec.Devices[i]
				if ptr.Deref(d.AllowMultipleAllocations, false) {
					nd.shared = true
				}
				if len(d.Taints) > 0 || len(d.BindingConditions) > 0 || len(d.BindingFailureConditions) > 0 || len(d.ConsumesCounters) > 0 {
					nd.plain = false
				}
			}
			nd.ids = append(nd.ids, c.src.deviceIDs(sl)...)
		}
		for p, n := range pools {
			if nd := c.byNode[p.node]; n != 1 || nd.shared {
				nd.plain = false
			}
		}
	}
	if nd := c.byNode[node]; nd != nil {
		return nd
	}
	return &nodeDevices{}
}

// freeBound is an upper bound on how many members of kind kd the node's free devices hold, counted
// without the allocator: its devices not allocated in state, less the fewest the claims allocated
// with the members (the PodGroup's pending claims, the nominated pods' held claims) take, over the
// fewest one member takes. A device counted free may still not be usable (another class, a taint, a
// partition's counters, a stale slice), so the bound only spares Allocate calls that cannot
// succeed: the upstream allocator tries every assignment of identical claims to devices before it
// fails, factorial in the devices a node has free. ok is false when there is no bound: slices not
// of one node, shared devices, or members that may take no device.
func (c *Check) freeBound(state *structured.AllocatedState, kd *kind, extended []extendedRequest, held []*resourceapi.ResourceClaim, node string) (n int, ok bool) {
	if c.nodeless || state == nil {
		return 0, false
	}
	per := leastDevices(kd.claims)
	for _, e := range extended {
		per += max(e.count, 0)
	}
	if per <= 0 {
		return 0, false
	}
	nd := c.devicesOf(node)
	if nd.shared {
		return 0, false
	}
	free := int64(0)
	for _, id := range nd.ids {
		if !state.AllocatedDevices.Has(id) {
			free++
		}
	}
	free -= leastDevices(kd.group.pending) + leastDevices(held)
	return int(max(free, 0) / per), true
}

// leastDevices is the fewest devices the claims take: an exact count's count, the smallest of a
// request's alternatives; a request for all matching devices, or for admin access (which takes
// no device from others), counts none.
func leastDevices(claims []*resourceapi.ResourceClaim) int64 {
	total := int64(0)
	for _, claim := range claims {
		for _, r := range claim.Spec.Devices.Requests {
			switch {
			case r.Exactly != nil:
				if !ptr.Deref(r.Exactly.AdminAccess, false) {
					total += exactCount(r.Exactly.AllocationMode, r.Exactly.Count)
				}
			case len(r.FirstAvailable) > 0:
				least := int64(-1)
				for _, sr := range r.FirstAvailable {
					if n := exactCount(sr.AllocationMode, sr.Count); least < 0 || n < least {
						least = n
					}
				}
				total += max(least, 0)
			}
		}
	}
	return total
}

// exactCount is the devices a request of the mode takes at least: its count (at least one, as
// defaulted) for an exact count, none for all.
func exactCount(mode resourceapi.DeviceAllocationMode, count int64) int64 {
	if mode == resourceapi.DeviceAllocationModeAll {
		return 0
	}
	return max(count, 1)
}

// merged returns the claims of n members of kind kd, with extended the kind's extended resources
// this node leaves to DRA, as one claim whose requests each ask n times what the member's request
// asks. The allocator then matches each device against each request once, where n copies of the
// claims have it match every device against every copy, and try every order of the copies before it
// fails. The same question only while requests are independent: ok is false when some claim has a
// constraint (which holds within a claim), a request has alternatives, admin access, a capacity or
// asks for all devices, or the claim would exceed what one allocation result holds. Made once per
// check, variant and n.
func (c *Check) merged(kd *kind, extended []extendedRequest, variant string, n int) (*resourceapi.ResourceClaim, bool) {
	key := fmt.Sprintf("%s|%d", variant, n)
	if claim, ok := kd.merged[key]; ok {
		return claim, claim != nil
	}
	if kd.merged == nil {
		kd.merged = map[string]*resourceapi.ResourceClaim{}
	}
	claim := mergeClaims(slices.Concat(kd.claims, extendedClaims(extended)), n)
	kd.merged[key] = claim
	return claim, claim != nil
}

// extendedClaims is the claim extendedClaim makes for one member, none without extended resources.
func extendedClaims(extended []extendedRequest) []*resourceapi.ResourceClaim {
	if len(extended) == 0 {
		return nil
	}
	return []*resourceapi.ResourceClaim{extendedClaim(extended, 0)}
}

// mergeClaims is merged's claim: nil when the claims' requests are not independent exact counts
// of at most AllocationResultsMaxSize devices in all.
func mergeClaims(claims []*resourceapi.ResourceClaim, n int) *resourceapi.ResourceClaim {
	if len(claims) == 0 || n <= 0 {
		return nil
	}
	out := &resourceapi.ResourceClaim{ObjectMeta: metav1.ObjectMeta{
		Name: fmt.Sprintf("merged-%d", n), UID: types.UID(fmt.Sprintf("merged-%d", n)),
	}}
	total := int64(0)
	for j, claim := range claims {
		if len(claim.Spec.Devices.Constraints) > 0 {
			return nil
		}
		for _, r := range claim.Spec.Devices.Requests {
			e := r.Exactly
			if e == nil || ptr.Deref(e.AdminAccess, false) || e.Capacity != nil ||
				(e.AllocationMode != "" && e.AllocationMode != resourceapi.DeviceAllocationModeExactCount) {
				return nil
			}
			cp := e.DeepCopy()
			cp.AllocationMode = resourceapi.DeviceAllocationModeExactCount
			cp.Count = max(e.Count, 1) * int64(n)
			total += cp.Count
			out.Spec.Devices.Requests = append(out.Spec.Devices.Requests, resourceapi.DeviceRequest{
				Name: fmt.Sprintf("claim-%d-%s", j, r.Name), Exactly: cp,
			})
		}
	}
	if total > resourceapi.AllocationResultsMaxSize || len(out.Spec.Devices.Requests) > resourceapi.DeviceRequestsMaxSize {
		return nil
	}
	return out
}

// plainCount is how many members of kind kd the node's free devices hold, counted without the
// allocator where the allocator's answer is plain: the kind asks for one exact count of devices of
// one class (one request in all), no claim is allocated with the members there (the PodGroup's, a
// nominated pod's), the node is plain (see nodeDevices). Its devices that are not allocated in
// state and match the class's and the request's selectors, over the count, at most limit. The
// selectors' answers are kept across checks for each slice's version (see matchCache), so a
// check reads each device once and evaluates no CEL for slices it has seen. ok is false where the
// allocator must answer (a selector that is not CEL, or fails to compile or to evaluate).
func (c *Check) plainCount(ctx context.Context, state *structured.AllocatedState, kd *kind, extended []extendedRequest, variant string, held []*resourceapi.ResourceClaim, node string, limit int) (int, bool) {
	if c.nodeless || state == nil || len(held) > 0 || len(kd.group.pending) > 0 || c.src == nil {
		return 0, false
	}
	pr := c.plainRequestOf(kd, extended, variant)
	if pr == nil {
		return 0, false
	}
	nd := c.devicesOf(node)
	if !nd.plain {
		return 0, false
	}
	free, i := int64(0), 0
	for _, sl := range nd.slices {
		matches, ok := c.src.matches(ctx, sl, pr)
		if !ok {
			return 0, false
		}
		for j := range sl.Spec.Devices {
			if matches[j] && !state.AllocatedDevices.Has(nd.ids[i+j]) {
				free++
			}
		}
		i += len(sl.Spec.Devices)
	}
	return int(min(free/pr.count, int64(limit))), true
}

// plainRequestOf is the one request of kind kd with extended left to DRA, resolved once per check and
// variant (nil: the kind is not one exact count of one class, or the allocator must answer).
func (c *Check) plainRequestOf(kd *kind, extended []extendedRequest, variant string) *plainRequest {
	if pr, ok := kd.plain[variant]; ok {
		return pr
	}
	if kd.plain == nil {
		kd.plain = map[string]*plainRequest{}
	}
	var pr *plainRequest
	if one, ok := c.merged(kd, extended, variant, 1); ok && len(one.Spec.Devices.Requests) == 1 {
		if r, ok := c.src.resolve(one.Spec.Devices.Requests[0].Exactly); ok {
			pr = r
		}
	}
	kd.plain[variant] = pr
	return pr
}
