package devices

import (
	"context"
	"fmt"
	"slices"
	"strings"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/dynamic-resource-allocation/structured"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/utils/ptr"

	"github.com/custom-scheduler/custom-scheduler/pkg/coscheduling/gangfit"
)

// Members of several device kinds on one node. Copies counts each kind as if it had the node's
// devices to itself: right for a gang of one kind, but two kinds may compete for the same devices
// (two DeviceClasses whose selectors overlap, a member asking two classes beside one asking one of
// them, an extended resource DRA backs beside a claim of the same devices), and then the sum of the
// kinds' counts is more than the node holds. FitTogether asks the allocator as the real cycle would:
// the pods nominated to the node first, then one member after the other, one Allocate with all of
// the member's claims, its result folded into the allocated state before the next.

var _ gangfit.DevicePacker = &Check{}

// FitTogether implements gangfit.DevicePacker: whether counts[k] members of each kind k fit at once on
// the node's devices, with the freeable claims reserved only by gone (holders a preemption search
// evicts, see Released) deallocated. Answers are cached per check. Out of time, or with the DRA state
// unread, it answers false (a placement is promised only when the allocator found it).
func (c *Check) FitTogether(ni fwk.NodeInfo, counts []int, gone []types.UID) bool {
	node := ni.Node()
	if c.allocator == nil || node == nil {
		return false
	}
	key := togetherKey(node.Name, counts, gone)
	if ok, seen := c.together[key]; seen {
		return ok
	}
	ok := c.fitTogether(ni, counts, gone)
	if c.together == nil {
		c.together = map[string]bool{}
	}
	c.together[key] = ok
	return ok
}

func (c *Check) fitTogether(ni fwk.NodeInfo, counts []int, gone []types.UID) bool {
	node := ni.Node()
	// What each member claims through DRA on this node, kind by kind (the extended resources the
	// node's device plugin serves are counted from its allocatable, as in Copies).
	var groups [][]*resourceapi.ResourceClaim
	if held := c.heldOn(ni); len(held) > 0 {
		groups = append(groups, held)
	}
	members := 0
	for k, n := range counts {
		if n <= 0 || k >= len(c.kinds) {
			continue
		}
		kd := c.kinds[k]
		var extended []extendedRequest
		for _, e := range kd.extended {
			if ni.GetAllocatable().GetScalarResources()[e.name] == 0 {
				extended = append(extended, e)
			}
		}
		per := len(kd.claims)
		if len(extended) > 0 {
			per++
		}
		if per == 0 {
			continue
		}
		all := c.claimsFor(kd, extended, n)
		for i := range n {
			groups = append(groups, all[i*per:(i+1)*per])
			members++
		}
	}
	if members == 0 {
		return true
	}
	if !c.nodeless && !c.sliceNodes.Has(node.Name) {
		return false
	}
	state := cloneState(*c.state)
	if len(gone) > 0 && c.rel != nil {
		if fc := c.rel.byNode[node.Name]; fc != nil {
			in := sets.New(gone...)
			var freed []*resourceapi.ResourceClaim
			for _, claim := range fc.Claims {
				if onlyFor(claim, in) {
					freed = append(freed, claim)
				}
			}
			state = without(state, freed, c.rel.claims, c.src.consumable)
		}
	}
	ctx, cancel := context.WithTimeout(klog.NewContext(context.Background(), c.logger), keptOffBudget)
	defer cancel()
	nodeSlices := slicesOf(c.slices, node.Name)
	for _, claims := range groups {
		a, err := structured.NewAllocator(ctx, c.src.features, state, c.src.dra.DeviceClasses(), nodeSlices, c.src.cel)
		if err != nil {
			c.logger.V(2).Info("Members' devices not counted together", "node", node.Name, "err", err)
			return false
		}
		res, err := a.Allocate(ctx, node, claims)
		if err != nil || res == nil {
			return false
		}
		fold(&state, res, c.src.consumable)
	}
	return true
}

// togetherKey names a FitTogether question.
func togetherKey(node string, counts []int, gone []types.UID) string {
	var b strings.Builder
	b.WriteString(node)
	for _, n := range counts {
		fmt.Fprintf(&b, "|%d", n)
	}
	g := make([]string, len(gone))
	for i, u := range gone {
		g[i] = string(u)
	}
	slices.Sort(g)
	b.WriteString("|" + strings.Join(g, ","))
	return b.String()
}

// cloneState copies an allocated state (fold changes its copy).
func cloneState(s structured.AllocatedState) structured.AllocatedState {
	out := structured.AllocatedState{
		AllocatedDevices:         s.AllocatedDevices.Clone(),
		AllocatedSharedDeviceIDs: s.AllocatedSharedDeviceIDs.Clone(),
		AggregatedCapacity:       s.AggregatedCapacity.Clone(),
	}
	if out.AllocatedDevices == nil {
		out.AllocatedDevices = sets.New[structured.DeviceID]()
	}
	if out.AllocatedSharedDeviceIDs == nil {
		out.AllocatedSharedDeviceIDs = sets.New[structured.SharedDeviceID]()
	}
	if out.AggregatedCapacity == nil {
		out.AggregatedCapacity = structured.NewConsumedCapacityCollection()
	}
	return out
}

// fold adds the devices of allocation results to state, as GatherAllocatedState counts an allocation
// in flight (see forCounted). Pure but for state.
func fold(state *structured.AllocatedState, results []resourceapi.AllocationResult, consumable bool) {
	for _, a := range results {
		forCounted(a.Devices.Results, consumable, func(id structured.DeviceID) { state.AllocatedDevices.Insert(id) },
			func(id structured.DeviceID, r *resourceapi.DeviceRequestAllocationResult) {
				state.AllocatedSharedDeviceIDs.Insert(structured.MakeSharedDeviceID(id, r.ShareID))
				if r.ConsumedCapacity != nil {
					state.AggregatedCapacity.Insert(structured.NewDeviceConsumedCapacity(id, r.ConsumedCapacity))
				}
			})
	}
}

// forCounted walks the devices of allocation results as GatherAllocatedState counts them: whole for
// a device allocated whole, shared (nil: skipped) for a share of one (with DRAConsumableCapacity);
// a device allocated for admin access counts as neither. fold and without walk it in opposite
// directions.
func forCounted(results []resourceapi.DeviceRequestAllocationResult, consumable bool, whole func(structured.DeviceID), shared func(structured.DeviceID, *resourceapi.DeviceRequestAllocationResult)) {
	for i := range results {
		r := &results[i]
		if ptr.Deref(r.AdminAccess, false) {
			continue
		}
		id := structured.MakeDeviceID(r.Driver, r.Pool, r.Device)
		if consumable && r.ShareID != nil {
			if shared != nil {
				shared(id, r)
			}
			continue
		}
		whole(id)
	}
}
