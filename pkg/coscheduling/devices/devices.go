// Package devices models, for the whole-gang check, the devices gang members claim through Dynamic
// Resource Allocation (resource.k8s.io/v1): their own ResourceClaims (named, or made from a template)
// and the extended resources a DeviceClass backs. It reads the scheduler's own DRA state (the claims
// with the allocations in flight, the ResourceSlices with device taints, the DeviceClasses) and asks
// upstream's structured allocator, the one the DynamicResources plugin uses, how many members' claims
// a node's free devices hold: CEL selectors, partitionable devices, consumable capacity and admin
// access mean what they mean to the real plugin. See gangfit.DeviceSource.
package devices

import (
	"context"
	"fmt"
	"slices"
	"time"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
	"k8s.io/dynamic-resource-allocation/cel"
	"k8s.io/dynamic-resource-allocation/structured"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/dynamicresources"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/feature"

	"github.com/custom-scheduler/custom-scheduler/pkg/coscheduling/gangfit"
)

// checkBudget bounds the allocator's time in a preemption search's count of freed devices
// (Released). A check's own budget is the source's (DefaultCheckBudget unless the profile sets
// another); a check that runs out counts the nodes it did not reach as holding every member (the
// check stays a relaxation: the real filters decide, and a node they refuse is remembered, see
// refused.go).
const checkBudget = 2 * time.Second

// Source is the scheduler's DRA state, read once per check. Its zero value and a nil *Source model
// no devices.
type Source struct {
	dra      fwk.SharedDRAManager
	features structured.Features
	cel      *cel.Cache
	extended bool
	// consumable is DRAConsumableCapacity: shared device allocations are tracked apart.
	consumable bool
	// freed are the pods whose devices a reservation's plan counts as free (see Freeing): the
	// devices of the claims reserved for these pods only.
	freed sets.Set[types.UID]
	// claimed are pods nominated to nodes (see Claiming): the devices they claim are not free
	// there.
	claimed []*v1.Pod
	// group looks up the in-tree PodGroups whose claims members use (see workload.go); nil where
	// the scheduler's DRAWorkloadResourceClaims gate is off or the in-tree API is not read.
	group GroupLookup
	// matchCache keeps the selectors' answers across checks (see matches); shared by the
	// source's copies, nil in tests that build a Source by hand (nothing kept).
	matchCache *matchCache
	// read is the DRA state a scheduling cycle reads once (see ForCycle); nil: each check reads its
	// own.
	read *cycleRead
	// budget is the allocator's time in one check (0: DefaultCheckBudget); refused are, by node,
	// the members the real filter found no devices for there (see refused.go).
	budget  time.Duration
	refused map[string][]types.UID
	// strict: no node counts as holding the members when the allocator does not answer in time (a
	// preemption search's model, see Refusing).
	strict bool
}

var _ gangfit.DeviceSource = &Source{}

// New returns the source of a scheduler whose DRA manager is dra; nil when Dynamic Resource
// Allocation is off (no devices to count). The allocator's features follow the scheduler's gates, as
// the DynamicResources plugin's do.
func New(dra fwk.SharedDRAManager) *Source {
	fts := feature.NewSchedulerFeaturesFromGates(utilfeature.DefaultFeatureGate)
	if !fts.EnableDynamicResourceAllocation || dra == nil {
		return nil
	}
	return &Source{
		dra:      dra,
		features: dynamicresources.AllocatorFeatures(fts),
		cel: cel.NewCache(10, cel.Features{
			EnableConsumableCapacity: fts.EnableDRAConsumableCapacity,
			EnableListTypeAttributes: fts.EnableDRAListTypeAttributes,
		}),
		extended:   fts.EnableDRAExtendedResource,
		consumable: fts.EnableDRAConsumableCapacity,
		matchCache: &matchCache{},
	}
}

// kind is the device claims that a group of members share in shape.
type kind struct {
	name     v1.ResourceName
	claims   []*resourceapi.ResourceClaim
	extended []extendedRequest
	// copies caches the claims of members, per set of extended resources left to DRA (see
	// claimsFor): a check asks for the same claims on many nodes.
	copies map[string][]*resourceapi.ResourceClaim
	// merged caches, per variant and count, the members' claims as one (see merged); nil where
	// they cannot be.
	merged map[string]*resourceapi.ResourceClaim
	// plain caches, per variant, the kind's one request resolved for plainCount (nil where there is
	// none).
	plain map[string]*plainRequest
	// group is where the PodGroup claims the kind's members use put them (see workload.go): those
	// not allocated yet are allocated once with the members on a node, the allocated ones keep the
	// members on their nodes. whole is set when a node holds all the kind's members or none
	// (wholeOnOneNode).
	group groupPlacement
	whole bool
}

// Check is one check's device model (gangfit.DeviceCheck).
type Check struct {
	ctx       context.Context
	cancel    context.CancelFunc
	logger    klog.Logger
	allocator structured.Allocator
	kinds     []*kind
	kindOf    map[types.UID]int
	delegated sets.Set[v1.ResourceName]
	// sliceNodes are the nodes with node-local ResourceSlices; nodeless is set when some slice serves
	// more than one node (all nodes, a node selector, or per device): then every node is asked.
	sliceNodes sets.Set[string]
	nodeless   bool
	// src, state and slices are the source, the allocated devices and the slices the allocator
	// was built from (see Released).
	src    *Source
	state  *structured.AllocatedState
	slices []*resourceapi.ResourceSlice
	// byNode are the devices of each node's own slices (see freeBound), built once.
	byNode map[string]*nodeDevices
	// pinHolders are the pods that reserve an allocated claim the members share (see Pins).
	pinHolders sets.Set[types.UID]
	// nominated are, by node, the pods nominated there whose devices the model counts (see
	// Claiming); held caches, by node, the claims they wait for there.
	nominated map[string][]member
	held      map[string][]*resourceapi.ResourceClaim
	// rel is the last preemption search's freed devices (see Released, ReleasedBy); together
	// caches FitTogether's answers.
	rel      *release
	together map[string]bool
	// Unmodelled says, per member, what of its claims the model leaves to the real filters.
	Unmodelled map[types.UID]string
	// pinned are the members with a claim allocated already.
	pinned sets.Set[types.UID]
	// refused are, by node, the kinds the real filter refused a member of there (see refused.go);
	// strict: every node, every kind.
	refused map[string]sets.Set[int]
	strict  bool
}

var _ gangfit.DeviceCheck = &Check{}

// ForCheck reads the DRA state once and groups the members by the devices they claim; nil when none
// of them claims a device through DRA.
func (s *Source) ForCheck(logger klog.Logger, pods []*v1.Pod) gangfit.DeviceCheck {
	if s == nil || s.dra == nil {
		return nil
	}
	members := make([]member, len(pods))
	shared := s.sharedClaims(pods)
	delegated := sets.New[v1.ResourceName]()
	claiming := false
	for i, p := range pods {
		members[i] = s.memberOf(p, shared, true, delegated)
		claiming = claiming || len(members[i].claims) > 0 || len(members[i].group) > 0 || len(members[i].extended) > 0 || members[i].why != "" || members[i].pending
	}
	fromTemplates(members)
	if !claiming && delegated.Len() == 0 {
		return nil
	}
	c := &Check{logger: logger, kindOf: map[types.UID]int{}, delegated: delegated, Unmodelled: map[types.UID]string{}, pinned: sets.New[types.UID]()}
	for i, p := range pods {
		c.pinHolders = pinHolders(c.pinHolders, members[i].group)
		if members[i].why != "" {
			c.Unmodelled[p.UID] = members[i].why
		}
		if members[i].pinned {
			c.pinned.Insert(p.UID)
		}
	}
	v := s.state()
	if v.err != nil {
		// Today's behaviour, less the extended resources DRA backs (never in node allocatable).
		logger.V(2).Info("Gang check counts no devices: the DRA state could not be read", "err", v.err)
		return c
	}
	c.allocator, c.state, c.sliceNodes, c.nodeless, c.src, c.slices = v.allocator, v.allocated, v.sliceNodes, v.nodeless, s, v.slices
	c.nominated = s.nominatedMembers(pods)
	budget := s.budget
	if budget <= 0 {
		budget = DefaultCheckBudget
	}
	c.ctx, c.cancel = context.WithTimeout(klog.NewContext(context.Background(), logger), budget)
	bySig := map[uint64]int{}
	size := map[int]int{}
	for i, p := range pods {
		m := members[i]
		if len(m.claims) == 0 && len(m.extended) == 0 && len(m.group) == 0 {
			continue
		}
		sig := signature(m)
		k, ok := bySig[sig]
		if !ok {
			placement, err := placeGroupClaims(m.group)
			if err != nil {
				c.Unmodelled[p.UID] = err.Error()
				continue
			}
			k = len(c.kinds)
			bySig[sig] = k
			c.kinds = append(c.kinds, &kind{claims: m.claims, extended: m.extended, group: placement})
			c.kinds[k].name = gangfit.DeviceKindName(classesOf(m), k, func(n v1.ResourceName) bool {
				return slices.ContainsFunc(c.kinds[:k], func(o *kind) bool { return o.name == n })
			})
		}
		c.kindOf[p.UID] = k
		size[k]++
	}
	for k, kd := range c.kinds {
		kd.whole = wholeOnOneNode(len(kd.group.pending), c.nodeless, size[k], len(pods))
	}
	c.refused, c.strict = refusedKinds(s.refused, c.kindOf), s.strict
	return c
}

var _ gangfit.PinningDevices = &Check{}

// Pins implements gangfit.PinningDevices: the pods that reserve an allocated claim the members share.
func (c *Check) Pins(pod *v1.Pod) bool { return c.pinHolders.Has(pod.UID) }

// pinHolders adds to holders the pods that reserve the allocated claims among group. Pure.
func pinHolders(holders sets.Set[types.UID], group []*resourceapi.ResourceClaim) sets.Set[types.UID] {
	for _, claim := range group {
		if claim.Status.Allocation == nil {
			continue
		}
		for _, ref := range claim.Status.ReservedFor {
			if ref.Resource == "pods" && ref.APIGroup == "" {
				if holders == nil {
					holders = sets.New[types.UID]()
				}
				holders.Insert(ref.UID)
			}
		}
	}
	return holders
}

// Modelled implements gangfit.DeviceCheck: a member with ResourceClaims is modelled when each of
// them is counted (its own, created, not allocated yet, not shared with other members; or its
// PodGroup's, created: see workload.go) and the DRA state could be read.
func (c *Check) Modelled(pod *v1.Pod) bool {
	if len(pod.Spec.ResourceClaims) == 0 {
		return true
	}
	_, counted := c.kindOf[pod.UID]
	return counted && c.allocator != nil && c.Unmodelled[pod.UID] == "" && !c.pinned.Has(pod.UID)
}

// Kinds implements gangfit.DeviceCheck.
func (c *Check) Kinds() int { return len(c.kinds) }

// Kind implements gangfit.DeviceCheck.
func (c *Check) Kind(pod *v1.Pod) int {
	if k, ok := c.kindOf[pod.UID]; ok {
		return k
	}
	return -1
}

// Name implements gangfit.DeviceCheck.
func (c *Check) Name(k int) v1.ResourceName { return c.kinds[k].name }

// Delegated implements gangfit.DeviceCheck.
func (c *Check) Delegated(name v1.ResourceName) bool { return c.delegated.Has(name) }

// Copies implements gangfit.DeviceCheck: the largest n ≤ limit such that n members' claims of kind k
// are allocated at once on the node (one Allocate call when all of them fit, a binary search
// otherwise). An extended resource the node itself advertises (a device plugin) is counted from its
// allocatable instead, as NodeResourcesFit and the DynamicResources plugin split it. Out of time, a
// node counts as holding every member, unless the real filter refused a member of the kind there, or
// the check is a preemption search's (see refused.go): then it holds none.
func (c *Check) Copies(k int, ni fwk.NodeInfo, limit int) int {
	refused := c.strict || c.refused != nil && ni.Node() != nil && c.refused[ni.Node().Name].Has(k)
	return c.copies(c.ctx, c.allocator, c.state, !refused, k, ni, limit)
}

// copies is Copies with allocator a, built over the allocated devices state, under ctx; outOfTime
// is what an Allocate cut short by ctx answers.
func (c *Check) copies(ctx context.Context, a structured.Allocator, state *structured.AllocatedState, outOfTime bool, k int, ni fwk.NodeInfo, limit int) int {
	kd, node := c.kinds[k], ni.Node()
	if !kd.group.allows(node) {
		// An allocated PodGroup claim keeps its members on its nodes.
		return 0
	}
	byPlugin, extended := limit, make([]extendedRequest, 0, len(kd.extended))
	for _, e := range kd.extended {
		if alloc := ni.GetAllocatable().GetScalarResources()[e.name]; alloc > 0 {
			free := alloc - ni.GetRequested().GetScalarResources()[e.name]
			byPlugin = min(byPlugin, int(max(free, 0)/e.count))
			continue
		}
		extended = append(extended, e)
	}
	if len(kd.claims) == 0 && len(extended) == 0 && len(kd.group.pending) == 0 {
		return byPlugin
	}
	limit = byPlugin
	if limit <= 0 {
		return 0
	}
	if !c.nodeless && !c.sliceNodes.Has(node.Name) {
		return 0
	}
	held := c.heldOn(ni)
	if bound, ok := c.freeBound(state, kd, extended, held, node.Name); ok && bound < limit {
		// Fewer devices free than limit members take: no Allocate for more is tried.
		if kd.whole || bound <= 0 {
			return 0
		}
		limit = bound
	}
	variant := extendedVariant(extended)
	if n, ok := c.plainCount(ctx, state, kd, extended, variant, held, node.Name, limit); ok {
		if kd.whole && n < limit {
			return 0
		}
		return n
	}
	fits := func(n int) bool {
		var claims []*resourceapi.ResourceClaim
		if one, ok := c.merged(kd, extended, variant, n); ok {
			claims = []*resourceapi.ResourceClaim{one}
		} else {
			claims = c.claimsFor(kd, extended, n)
		}
		if len(kd.group.pending) > 0 {
			// The PodGroup's claims, once, with the members' own.
			claims = append(slices.Clip(kd.group.pending), claims...)
		}
		if len(held) > 0 {
			// Nominated pods' claims first: they take their devices before the gang's.
			claims = append(slices.Clone(held), claims...)
		}
		res, err := a.Allocate(ctx, node, claims)
		if err != nil && ctx.Err() != nil {
			// Out of time: not counted against the gang in a check.
			return outOfTime
		}
		return err == nil && res != nil
	}
	if fits(limit) {
		return limit
	}
	if kd.whole {
		// The PodGroup's claim pins all its users to the one node it is allocated on.
		return 0
	}
	lo, hi := 0, limit // fits(lo), !fits(hi)
	for hi-lo > 1 {
		mid := (lo + hi) / 2
		if fits(mid) {
			lo = mid
		} else {
			hi = mid
		}
	}
	return lo
}

// Done releases the check's allocator budget (gangfit.New calls it once every node is counted; a
// later Copies counts every node as holding the gang).
func (c *Check) Done() {
	if c.cancel != nil {
		c.cancel()
	}
}

// claimsFor returns the claims of n members of kind kd, each member's copies with names and UIDs of
// their own (the allocator tells claims apart by them); extended are the kind's extended resources
// this node leaves to DRA. The copies are made once per check and variant, and shared read-only.
func (c *Check) claimsFor(kd *kind, extended []extendedRequest, n int) []*resourceapi.ResourceClaim {
	per := len(kd.claims)
	if len(extended) > 0 {
		per++
	}
	variant := extendedVariant(extended)
	if kd.copies == nil {
		kd.copies = map[string][]*resourceapi.ResourceClaim{}
	}
	out := kd.copies[variant]
	for i := len(out) / max(per, 1); i < n; i++ {
		for j, claim := range kd.claims {
			cp := claim.DeepCopy()
			cp.Name = fmt.Sprintf("%s-%d", claim.Name, i)
			cp.UID = types.UID(fmt.Sprintf("%s-%d-%d", claim.UID, i, j))
			out = append(out, cp)
		}
		if len(extended) > 0 {
			out = append(out, extendedClaim(extended, i))
		}
	}
	kd.copies[variant] = out
	return out[:n*per]
}

// extendedVariant names the set of a kind's extended resources a node leaves to DRA.
func extendedVariant(extended []extendedRequest) string {
	variant := ""
	for _, e := range extended {
		variant += string(e.name) + ","
	}
	return variant
}

// extendedClaim is the claim the DynamicResources plugin makes for a member's extended resources on
// a node that leaves them to DRA: one request per resource, of its class, for its count of devices.
func extendedClaim(extended []extendedRequest, i int) *resourceapi.ResourceClaim {
	claim := &resourceapi.ResourceClaim{ObjectMeta: metav1.ObjectMeta{
		Name: fmt.Sprintf("extended-resources-%d", i), UID: types.UID(fmt.Sprintf("extended-resources-%d", i)),
		Annotations: map[string]string{resourceapi.ExtendedResourceClaimAnnotation: "true"},
	}}
	for j, e := range extended {
		claim.Spec.Devices.Requests = append(claim.Spec.Devices.Requests, resourceapi.DeviceRequest{
			Name:    fmt.Sprintf("request-%d", j),
			Exactly: &resourceapi.ExactDeviceRequest{DeviceClassName: e.class, AllocationMode: resourceapi.DeviceAllocationModeExactCount, Count: e.count},
		})
	}
	return claim
}
