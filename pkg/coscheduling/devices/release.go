package devices

import (
	"context"
	"fmt"
	"slices"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/dynamic-resource-allocation/structured"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/utils/ptr"

	"github.com/custom-scheduler/custom-scheduler/pkg/coscheduling/gangfit"
)

// The devices a preemption's victims free (gangfit.DeviceRelease). A claim is deallocated once
// nobody reserves it (the resourceclaim controller clears status.allocation when its last reserving
// pod is gone, and deletes the claims made for a pod: from a template, or for the pod's DRA-backed
// extended resources), so the claims whose every reserver is a victim free their devices, and a
// claim also reserved by a pod that stays frees nothing. Only claims whose devices are all on one
// node (node-local pools) are counted freed: a network-attached device freed by a victim on one node
// is not promised to the others.

// Released implements gangfit.DeviceRelease: one list of the claims, one allocated state less the
// freeable claims' devices, one allocator over it, then the kinds' copies on the nodes where devices
// are freed. Out of time (checkBudget), a node counts what it held before.
func (c *Check) Released(pods []*v1.Pod, nodes []fwk.NodeInfo, need int) map[string]gangfit.NodeRelease {
	if c == nil || c.src == nil || c.allocator == nil || len(c.kinds) == 0 || len(pods) == 0 || need <= 0 {
		return nil
	}
	out, err := c.released(pods, nodes, need)
	if err != nil {
		c.logger.V(2).Info("Gang preemption counts no devices freed by its victims", "err", err)
		return nil
	}
	return out
}

func (c *Check) released(pods []*v1.Pod, nodes []fwk.NodeInfo, need int) (map[string]gangfit.NodeRelease, error) {
	claims, err := c.src.dra.ResourceClaims().List()
	if err != nil {
		return nil, fmt.Errorf("listing ResourceClaims: %w", err)
	}
	victims := sets.New[types.UID]()
	for _, p := range pods {
		victims.Insert(p.UID)
	}
	byNode := freeable(claims, victims, poolNodesOf(c.slices))
	if len(byNode) == 0 {
		return nil, nil
	}
	state, err := c.src.dra.ResourceClaims().GatherAllocatedState()
	if err != nil {
		return nil, fmt.Errorf("gathering allocated devices: %w", err)
	}
	var freed []*resourceapi.ResourceClaim
	for _, fc := range byNode {
		freed = append(freed, fc.Claims...)
	}
	rest := without(*state, freed, claims, c.src.consumable)
	a, err := structured.NewAllocator(context.Background(), c.src.features, rest, c.src.dra.DeviceClasses(), c.slices, c.src.cel)
	if err != nil {
		return nil, fmt.Errorf("building the allocator: %w", err)
	}
	ctx, cancel := context.WithTimeout(klog.NewContext(context.Background(), c.logger), checkBudget)
	defer cancel()
	out := make(map[string]gangfit.NodeRelease, len(byNode))
	for _, ni := range nodes {
		node := ni.Node()
		if node == nil {
			continue
		}
		fc, ok := byNode[node.Name]
		if !ok {
			continue
		}
		nr := gangfit.NodeRelease{Holders: fc.Holders, Copies: make([]int, len(c.kinds))}
		for k := range c.kinds {
			// Out of time, an Allocate does not fit: devices are counted freed only when the
			// allocator says so.
			nr.Copies[k] = c.copies(ctx, a, false, k, ni, need)
		}
		out[node.Name] = nr
	}
	return out, nil
}

// nodeClaims are the freeable claims whose devices are on one node, and their reservers.
type nodeClaims struct {
	Claims  []*resourceapi.ResourceClaim
	Holders []types.UID
}

// poolKey names a resource pool.
type poolKey struct{ driver, pool string }

// poolNodesOf maps each pool all of whose slices are on one node (node-local devices) to that node.
func poolNodesOf(slices []*resourceapi.ResourceSlice) map[poolKey]string {
	out := map[poolKey]string{}
	mixed := map[poolKey]bool{}
	for _, s := range slices {
		k := poolKey{s.Spec.Driver, s.Spec.Pool.Name}
		node := ptr.Deref(s.Spec.NodeName, "")
		if prev, seen := out[k]; node == "" || (seen && prev != node) {
			mixed[k] = true
		}
		out[k] = node
	}
	for k := range mixed {
		delete(out, k)
	}
	return out
}

// freeable returns, by node, the allocated claims that evicting victims deallocates: every
// reserver is a pod among victims, and every device of its allocation is in a pool of that one
// node (poolNodes). Claims nobody reserves (allocations in flight, or a driver's own) are not, nor
// are those reserved for a PodGroup (KEP-5729: the resourceclaim controller keeps such a claim
// allocated while the PodGroup exists, whichever of its members are evicted; see workload.go).
// Pure; the order of each node's claims and holders follows claims.
func freeable(claims []*resourceapi.ResourceClaim, victims sets.Set[types.UID], poolNodes map[poolKey]string) map[string]*nodeClaims {
	out := map[string]*nodeClaims{}
	for _, claim := range claims {
		if claim.Status.Allocation == nil || len(claim.Status.ReservedFor) == 0 {
			continue
		}
		all := true
		for _, r := range claim.Status.ReservedFor {
			all = all && r.APIGroup == "" && r.Resource == "pods" && victims.Has(r.UID)
		}
		if !all {
			continue
		}
		node := ""
		for _, res := range claim.Status.Allocation.Devices.Results {
			n, ok := poolNodes[poolKey{res.Driver, res.Pool}]
			if !ok || (node != "" && n != node) {
				node = ""
				break
			}
			node = n
		}
		if node == "" {
			continue
		}
		nc := out[node]
		if nc == nil {
			nc = &nodeClaims{}
			out[node] = nc
		}
		nc.Claims = append(nc.Claims, claim)
		for _, r := range claim.Status.ReservedFor {
			if !slices.Contains(nc.Holders, r.UID) {
				nc.Holders = append(nc.Holders, r.UID)
			}
		}
	}
	return out
}

// without returns a copy of state less the devices of the freed claims, as GatherAllocatedState
// would gather it once they are deallocated: a device another allocated claim of claims also holds
// stays allocated. consumable is DRAConsumableCapacity (shared allocations tracked apart, by share
// and consumed capacity; without it a shared device counts as allocated whole). Pure.
func without(state structured.AllocatedState, freed, claims []*resourceapi.ResourceClaim, consumable bool) structured.AllocatedState {
	out := structured.AllocatedState{
		AllocatedDevices:         state.AllocatedDevices.Clone(),
		AllocatedSharedDeviceIDs: state.AllocatedSharedDeviceIDs.Clone(),
		AggregatedCapacity:       state.AggregatedCapacity.Clone(),
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
	gone := sets.New[types.UID]()
	for _, c := range freed {
		gone.Insert(c.UID)
	}
	// The whole devices the other allocated claims hold.
	held := sets.New[structured.DeviceID]()
	for _, c := range claims {
		if c.Status.Allocation == nil || gone.Has(c.UID) {
			continue
		}
		for _, r := range c.Status.Allocation.Devices.Results {
			if ptr.Deref(r.AdminAccess, false) || (consumable && r.ShareID != nil) {
				continue
			}
			held.Insert(structured.MakeDeviceID(r.Driver, r.Pool, r.Device))
		}
	}
	for _, c := range freed {
		for _, r := range c.Status.Allocation.Devices.Results {
			if ptr.Deref(r.AdminAccess, false) {
				// Not counted as allocated.
				continue
			}
			id := structured.MakeDeviceID(r.Driver, r.Pool, r.Device)
			if consumable && r.ShareID != nil {
				out.AllocatedSharedDeviceIDs.Delete(structured.MakeSharedDeviceID(id, r.ShareID))
				if r.ConsumedCapacity != nil {
					out.AggregatedCapacity.Remove(structured.NewDeviceConsumedCapacity(id, r.ConsumedCapacity))
				}
				continue
			}
			if !held.Has(id) {
				out.AllocatedDevices.Delete(id)
			}
		}
	}
	return out
}

var _ gangfit.DeviceRelease = &Check{}
