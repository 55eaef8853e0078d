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
	c.rel, c.together = nil, nil
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
	var freed []*resourceapi.ResourceClaim
	for _, fc := range byNode {
		freed = append(freed, fc.Claims...)
	}
	// The check's own allocated state: allocations in flight, and what a reservation's plan
	// counts as leaving.
	rest := without(*c.state, freed, claims, c.src.consumable)
	a, err := structured.NewAllocator(context.Background(), c.src.features, rest, c.src.dra.DeviceClasses(), c.slices, c.src.cel)
	if err != nil {
		return nil, fmt.Errorf("building the allocator: %w", err)
	}
	ctx, cancel := context.WithTimeout(klog.NewContext(context.Background(), c.logger), checkBudget)
	defer cancel()
	out := make(map[string]gangfit.NodeRelease, len(byNode))
	rel := &release{claims: claims, byNode: byNode, nodes: map[string]fwk.NodeInfo{}}
	for _, ni := range nodes {
		node := ni.Node()
		if node == nil {
			continue
		}
		fc, ok := byNode[node.Name]
		if !ok {
			continue
		}
		rel.nodes[node.Name] = ni
		nr := gangfit.NodeRelease{Holders: fc.Holders, Copies: make([]int, len(c.kinds))}
		for k := range c.kinds {
			// Out of time, an Allocate does not fit: devices are counted freed only when the
			// allocator says so.
			nr.Copies[k] = c.copies(ctx, a, &rest, false, k, ni, need)
		}
		out[node.Name] = nr
	}
	c.rel = rel
	return out, nil
}

// release is what a preemption search's Released read, for ReleasedBy.
type release struct {
	claims []*resourceapi.ResourceClaim
	byNode map[string]*nodeClaims
	nodes  map[string]fwk.NodeInfo
}

// ReleasedBy implements gangfit.DeviceRelease: how many members of each kind the node's devices hold
// once only the freeable claims all of whose reservers are among holders are deallocated (some of
// the node's holders evicted, the others staying). One allocator over the node's own slices (and
// those not of one node), one count per kind. Nil when those claims free nothing, or out of time.
func (c *Check) ReleasedBy(node string, holders []types.UID, need int) []int {
	if c == nil || c.rel == nil {
		return nil
	}
	fc, ni := c.rel.byNode[node], c.rel.nodes[node]
	if fc == nil || ni == nil {
		return nil
	}
	in := sets.New(holders...)
	var freed []*resourceapi.ResourceClaim
	for _, claim := range fc.Claims {
		if onlyFor(claim, in) {
			freed = append(freed, claim)
		}
	}
	if len(freed) == 0 {
		return nil
	}
	rest := without(*c.state, freed, c.rel.claims, c.src.consumable)
	a, err := structured.NewAllocator(context.Background(), c.src.features, rest, c.src.dra.DeviceClasses(), slicesOf(c.slices, node), c.src.cel)
	if err != nil {
		c.logger.V(2).Info("Gang preemption counts no devices freed by some of a node's holders", "node", node, "err", err)
		return nil
	}
	ctx, cancel := context.WithTimeout(klog.NewContext(context.Background(), c.logger), keptOffBudget)
	defer cancel()
	out := make([]int, len(c.kinds))
	for k := range c.kinds {
		out[k] = c.copies(ctx, a, &rest, false, k, ni, need)
	}
	return out
}

// slicesOf are the slices an Allocate on the node reads: the node's own, and those not of one node.
func slicesOf(all []*resourceapi.ResourceSlice, node string) []*resourceapi.ResourceSlice {
	var out []*resourceapi.ResourceSlice
	for _, s := range all {
		if n := ptr.Deref(s.Spec.NodeName, ""); n == "" || n == node {
			out = append(out, s)
		}
	}
	return out
}

// Releasing counts the allocated claims on the given nodes whose every reserver is a pod in gone
// (pods an earlier preemption evicted): the resourceclaim controller deallocates such a claim once
// its pods are deleted, but until it does the allocator counts its devices taken, and a preemptor
// nominated there that searched again would evict more holders for devices already on their way
// to it. A nil source counts none.
func (s *Source) Releasing(nodes []string, gone sets.Set[types.UID]) (int, error) {
	if s == nil || s.dra == nil || gone.Len() == 0 || len(nodes) == 0 {
		return 0, nil
	}
	claims, err := s.dra.ResourceClaims().List()
	if err != nil {
		return 0, fmt.Errorf("listing ResourceClaims: %w", err)
	}
	slicesList, err := s.dra.ResourceSlices().ListWithDeviceTaintRules()
	if err != nil {
		return 0, fmt.Errorf("listing ResourceSlices: %w", err)
	}
	byNode := freeable(claims, gone, poolNodesOf(slicesList))
	n := 0
	for _, node := range sets.List(sets.New(nodes...)) {
		if nc := byNode[node]; nc != nil {
			n += len(nc.Claims)
		}
	}
	return n, nil
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
	out := cloneState(state)
	gone := sets.New[types.UID]()
	for _, c := range freed {
		gone.Insert(c.UID)
	}
	// The whole devices the other allocated claims hold.
	held := sets.New[structured.DeviceID]()
	for _, c := range claims {
		if c.Status.Allocation != nil && !gone.Has(c.UID) {
			forCounted(c.Status.Allocation.Devices.Results, consumable, func(id structured.DeviceID) { held.Insert(id) }, nil)
		}
	}
	for _, c := range freed {
		forCounted(c.Status.Allocation.Devices.Results, consumable, func(id structured.DeviceID) {
			if !held.Has(id) {
				out.AllocatedDevices.Delete(id)
			}
		}, func(id structured.DeviceID, r *resourceapi.DeviceRequestAllocationResult) {
			out.AllocatedSharedDeviceIDs.Delete(structured.MakeSharedDeviceID(id, r.ShareID))
			if r.ConsumedCapacity != nil {
				out.AggregatedCapacity.Remove(structured.NewDeviceConsumedCapacity(id, r.ConsumedCapacity))
			}
		})
	}
	return out
}

var _ gangfit.DeviceRelease = &Check{}
