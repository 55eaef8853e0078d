package gangfit

import (
	"fmt"
	"slices"
	"sort"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"

	fwk "k8s.io/kube-scheduler/framework"

	"github.com/custom-scheduler/custom-scheduler/pkg/apis/scheduling/v1alpha1"
)

// The feasibility check answers, once per gang attempt and before any member is reserved: can the
// `need` members still missing from the quorum be placed at once on the snapshot's free resources?
//
// It is a relaxation of the real Filter plugins, so it never rejects a gang the scheduler could place:
// it models per-node free CPU, memory, ephemeral storage, extended resources and pod slots (so
// fragmentation is caught: free capacity summed over nodes is not enough), NoSchedule/NoExecute taints,
// node.spec.unschedulable and the required node selector/affinity. Pods already reserved (members of
// this or other waiting gangs) are assumed in the snapshot and so are accounted for.
//
// Placement is first-fit decreasing. For identical members (the usual gang: one pod template) it is
// exact. For mixed members FFD can miss a packing that exists; then the check falls back to a weaker,
// still sound, test (every member fits some node and the totals fit) and admits the gang when that
// passes, leaving the final word to Filter and PostFilter.

// feasibility is the outcome of one check.
type Result struct {
	Feasible bool
	// Message says why a gang is infeasible, for the pod's status and events.
	Message string
	// Shortfall says the same in numbers (nil when Feasible).
	Shortfall *v1alpha1.PodGroupShortfall
	// Tree: the gang fits alone, but not with the other groups its job needs (see FitTogether):
	// no preemption or reservation is made for it alone.
	Tree bool
}

// gangMember is a member still to be placed, with its request.
type gangMember struct {
	pod *v1.Pod
	req resources
}

// Fit is one whole-gang check's inputs, prepared once: the `need` smallest candidate members and
// the snapshot's free capacity per node, so that placement can be tried on the whole cluster or on any
// subset of its nodes (a topology domain) without preparing them again.
type Fit struct {
	logger   klog.Logger
	groupKey string
	need     int
	// names are the extended resources the check tracks.
	names scalarNames
	// members are the `need` smallest candidates, by dominant share of the cluster's free capacity;
	// all are every candidate, in that order.
	members, all []gangMember
	// free is read only when it is the shared table (release is set): see freeCapacity.
	free        []freeNode
	eligible    *eligibility
	homogeneous bool
	// alike is set when every candidate is identical (request and constraints), not only members:
	// then no other choice of members could fit where these do not.
	alike   bool
	totals  resources
	release func()
	// devices models the members' DRA devices (nil: none claims any); their kinds are the dimensions
	// of names from deviceIndex on (see devices.go).
	devices     DeviceCheck
	deviceIndex int
	// released is what a preemption search's victims free in devices (nil: nothing; see
	// releaseDevices).
	released *deviceRelease
	// infos are the NodeInfos of free (with devices only); joint is set when members of several
	// device kinds are placed with the model's DevicePacker (see devices.go).
	infos []fwk.NodeInfo
	joint bool
}

// Shared is what the checks of one plugin instance share (see capacity.go). A nil *Shared
// computes everything afresh.
type Shared struct {
	capacity freeCapacity
	requests requestCache
	// Devices models the devices members claim through DRA (nil: none is counted).
	Devices DeviceSource
	// tables, when set, holds the capacity and request tables (see WithDevices).
	tables *Shared
	// refused are, by node, the members the real filter found no devices for there (see
	// WithRefused).
	refused map[string][]types.UID
	// search: a preemption search's (see ForSearch).
	search bool
}

// deviceCheck is the device model of a check over members, with the devices of the claimed pods
// (nominated to nodes, see New) taken when the source counts them.
func (s *Shared) deviceCheck(logger klog.Logger, members, claimed []*v1.Pod) DeviceCheck {
	if s == nil || s.Devices == nil {
		return nil
	}
	src := s.Devices
	if r, ok := src.(RefusingDevices); ok && (len(s.refused) > 0 || s.search) {
		src = r.Refusing(s.refused, s.search)
	}
	if c, ok := src.(ClaimingDevices); ok && len(claimed) > 0 {
		src = c.Claiming(claimed)
	}
	return src.ForCheck(logger, members)
}

func (s *Shared) requestCache() *requestCache {
	if s == nil {
		return nil
	}
	return &s.own().requests
}

// New prepares a check of placing `need` of the candidates on nodes; minResources' extended
// resources are tracked too. It returns nil when need is not positive or there are too few
// candidates (Check reports those). With shared, the free capacity may be the shared table,
// which the check holds until done is called; private asks for a copy the caller may change.
func New(logger klog.Logger, groupKey string, candidates []*v1.Pod, need int, nodes []fwk.NodeInfo, minResources v1.ResourceList, claimed []*v1.Pod, shared *Shared, private bool) *Fit {
	if need <= 0 || len(candidates) < need {
		return nil
	}
	requests := shared.requestCache()
	reqs := make([]podRequest, len(candidates))
	names := scalarNames(nil).with(minResources)
	for i, p := range candidates {
		reqs[i] = requests.of(p)
		names = names.withRequest(reqs[i])
	}
	f := &Fit{logger: logger, groupKey: groupKey, need: need, devices: shared.deviceCheck(logger, candidates, claimed)}
	if f.devices != nil {
		// The device kinds are this check's own dimensions: the shared table does not hold them.
		names, f.deviceIndex = withDevices(names, f.devices)
	}
	if shared != nil && f.devices == nil {
		if free, tracked, totals, ok := shared.own().capacity.acquire(nodes, names); ok {
			f.names, f.free, f.totals, f.release = tracked, free, totals, shared.own().capacity.mu.Unlock
			if private || len(claimed) > 0 {
				f.names, f.free = slices.Clone(tracked), cloneFree(free, len(tracked))
				f.totals = totals.clone()
				f.Done()
			}
		}
	}
	if f.free == nil {
		f.names = names
		f.free = make([]freeNode, 0, len(nodes))
		backing := make([]int64, len(nodes)*len(names))
		for i, ni := range nodes {
			if ni.Node() == nil {
				continue
			}
			fn := nodeFree(ni, names, backing[i*len(names):(i+1)*len(names)])
			if f.devices != nil {
				deviceFree(&fn, ni, f.devices, f.deviceIndex, need)
				f.infos = append(f.infos, ni)
			}
			f.free = append(f.free, fn)
		}
		if d, ok := f.devices.(interface{ Done() }); ok {
			// The device counts are made: the model's allocator budget is released.
			d.Done()
		}
		f.totals = clusterTotals(f.free)
	}
	if len(claimed) > 0 {
		// Room nominated to other pods (see claims) is not free.
		byName := make(map[string]int, len(f.free))
		for i, fn := range f.free {
			byName[fn.node.Name] = i
		}
		for _, p := range claimed {
			if i, ok := byName[p.Status.NominatedNodeName]; ok {
				requests.of(p).resources(f.names).subFrom(&f.free[i].free)
				f.free[i].slots--
			}
		}
		f.totals = clusterTotals(f.free)
	}
	f.eligible = newEligibility(logger, f.free)
	members := make([]gangMember, len(candidates))
	for i, p := range candidates {
		members[i] = gangMember{pod: p, req: reqs[i].resources(f.names)}
		if f.devices != nil {
			if k := f.devices.Kind(p); k >= 0 {
				if members[i].req.scalar == nil {
					members[i].req.scalar = make([]int64, len(f.names))
				}
				members[i].req.scalar[f.deviceIndex+k] = 1
			}
		}
	}
	// Optimistically pick the `need` smallest members: if they cannot be placed, no choice can.
	sort.SliceStable(members, func(i, j int) bool {
		return dominantShare(members[i].req, f.totals) < dominantShare(members[j].req, f.totals)
	})
	f.all, f.members = members, members[:need]
	f.joint = f.jointDevices()
	f.homogeneous = homogeneous(f.members, f.eligible)
	f.alike = f.homogeneous && (len(members) == need || homogeneous(members, f.eligible))
	return f
}

// smallestSum is, resource by resource, the sum of the n smallest requests among members: a lower
// bound of what any n of them ask for together.
func smallestSum(members []gangMember, n, scalars int) resources {
	vals := make([]int64, len(members))
	least := func(get func(r resources) int64) int64 {
		for i, m := range members {
			vals[i] = get(m.req)
		}
		slices.Sort(vals)
		var sum int64
		for _, v := range vals[:n] {
			sum += v
		}
		return sum
	}
	out := resources{
		milliCPU:  least(func(r resources) int64 { return r.milliCPU }),
		memory:    least(func(r resources) int64 { return r.memory }),
		ephemeral: least(func(r resources) int64 { return r.ephemeral }),
	}
	if scalars > 0 {
		out.scalar = make([]int64, scalars)
		for i := range out.scalar {
			out.scalar[i] = least(func(r resources) int64 { return scalarAt(r.scalar, i) })
		}
	}
	return out
}

// Done releases the shared free capacity the check reads, if it does; f must not be used after.
func (f *Fit) Done() {
	if f != nil && f.release != nil {
		f.release()
		f.release = nil
	}
}

// cloneFree copies free capacity, with its extended resources in a new array.
func cloneFree(free []freeNode, stride int) []freeNode {
	out := slices.Clone(free)
	backing := make([]int64, len(free)*stride)
	for i := range out {
		if stride > 0 {
			s := backing[i*stride : (i+1)*stride]
			copy(s, free[i].free.scalar)
			out[i].free.scalar = s
		}
	}
	return out
}

// Check simulates placing `need` of the candidate members on nodes. minResources, when set, is
// compared with the free capacity summed over the nodes the members may use, less what the members
// already reserved or bound (counted) hold. It also returns the prepared check, for a topology
// placement to reuse (nil when the gang needs no more members or has too few); the caller calls its
// done when it no longer needs it.
func Check(logger klog.Logger, groupKey string, candidates []*v1.Pod, need int, nodes []fwk.NodeInfo, minResources v1.ResourceList, counted, claimed []*v1.Pod, shared *Shared) (Result, *Fit) {
	if need <= 0 {
		return Result{Feasible: true}, nil
	}
	if len(candidates) < need {
		return Result{Message: fmt.Sprintf("PodGroup %s needs %d more members placed at once, but only %d unscheduled members exist", groupKey, need, len(candidates)),
			Shortfall: &v1alpha1.PodGroupShortfall{Reason: v1alpha1.ShortfallTooFewMembers, Needed: int32(need), Unscheduled: int32(len(candidates))}}, nil
	}
	f := New(logger, groupKey, candidates, need, nodes, minResources, claimed, shared, false)

	var eligibleTotal resources
	anyEligible := f.usable()
	for i, fn := range f.free {
		if anyEligible[i] {
			eligibleTotal.addClamped(fn.free)
		}
	}
	if len(minResources) > 0 {
		remaining := resourcesFromList(minResources, f.names)
		var held resources
		for _, p := range counted {
			held = held.add(shared.requestCache().of(p).resources(f.names))
		}
		remaining.milliCPU = max(remaining.milliCPU-held.milliCPU, 0)
		remaining.memory = max(remaining.memory-held.memory, 0)
		remaining.ephemeral = max(remaining.ephemeral-held.ephemeral, 0)
		for i := range remaining.scalar {
			remaining.scalar[i] = max(remaining.scalar[i]-scalarAt(held.scalar, i), 0)
		}
		if !remaining.fits(eligibleTotal) {
			s := f.shortfall(v1alpha1.ShortfallMinResources, 0, remaining, f.largest())
			return Result{Message: fmt.Sprintf("PodGroup %s: spec.minResources exceed the free resources of the nodes its members may use (%s)", groupKey, shortfall(remaining, eligibleTotal, f.names)), Shortfall: s}, f
		}
	}

	placed := f.placeable(nil)
	if placed >= need {
		return Result{Feasible: true}, f
	}
	if f.homogeneous && f.alike {
		s := f.shortfall(v1alpha1.ShortfallNodeRoom, placed, total(f.members), f.largest())
		return Result{Message: fmt.Sprintf("PodGroup %s needs %d more members placed at once, but the nodes' free resources fit only %d of them (checked per node, not in total)%s", groupKey, need, placed, f.deviceNote()), Shortfall: s}, f
	}
	if f.joint {
		// Members of several device kinds: the kinds' amounts are bounds, and the weaker tests
		// below would sum kinds that compete for the same devices. Admitted only on a placement
		// found with the devices counted together (see devices.go).
		s := f.shortfall(v1alpha1.ShortfallNodeRoom, placed, total(f.members), f.largest())
		return Result{Message: fmt.Sprintf("PodGroup %s needs %d more members placed at once, but the nodes' free resources fit only %d of them (their devices of %d kinds counted together, member after member)%s", groupKey, need, placed, f.devices.Kinds(), f.deviceNote()), Shortfall: s}, f
	}
	// Neither first-fit decreasing nor the choice of the smallest members is exact for mixed members:
	// admit the gang if the sound, weaker tests pass over every candidate. Enough of them fit some
	// node each, and, resource by resource, the `need` smallest requests of those fit the free
	// capacity of the nodes they may use (any choice asks for at least that much).
	var fitting []gangMember
	var missing *v1.Pod
	var missingReq resources
	for _, m := range f.all {
		elig := f.eligible.of(m.pod)
		fitsSomewhere := false
		for i, fn := range f.free {
			if elig[i] && fn.slots > 0 && m.req.fits(fn.free) {
				fitsSomewhere = true
				break
			}
		}
		if fitsSomewhere {
			fitting = append(fitting, m)
		} else if missing == nil {
			missing, missingReq = m.pod, m.req
		}
	}
	if len(fitting) < need {
		s := f.shortfall(v1alpha1.ShortfallMemberFitsNowhere, len(fitting), total(f.members), missingReq)
		if len(f.all) == need {
			return Result{Message: fmt.Sprintf("PodGroup %s: member %s fits on no node's free resources%s", groupKey, klog.KObj(missing), f.deviceNote()), Shortfall: s}, f
		}
		return Result{Message: fmt.Sprintf("PodGroup %s needs %d more members placed at once, but only %d of its %d unscheduled members fit on any node's free resources%s", groupKey, need, len(fitting), len(f.all), f.deviceNote()), Shortfall: s}, f
	}
	var fittingTotal resources
	for i, ok := range f.usableBy(fitting) {
		if ok {
			fittingTotal.addClamped(f.free[i].free)
		}
	}
	if least := smallestSum(fitting, need, len(f.names)); !least.fits(fittingTotal) {
		s := f.shortfall(v1alpha1.ShortfallNodeRoom, placed, least, f.largest())
		return Result{Message: fmt.Sprintf("PodGroup %s needs %d more members placed at once, but the nodes' free resources fit only %d of them (%s)", groupKey, need, placed, shortfall(least, fittingTotal, f.names)), Shortfall: s}, f
	}
	logger.V(5).Info("First-fit decreasing could not place a mixed gang, admitting it on the aggregate test", "podGroup", groupKey, "need", need, "placed", placed)
	return Result{Feasible: true}, f
}
