package gangfit

import (
	"fmt"
	"math"
	"slices"
	"sort"
	"strings"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	resourcehelper "k8s.io/component-helpers/resource"
	v1helper "k8s.io/component-helpers/scheduling/corev1"
	"k8s.io/component-helpers/scheduling/corev1/nodeaffinity"
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

// scalarNames are the extended resources one check deals with (those the members or minResources ask
// for), in a fixed order: every resources value of the check holds their amounts at the same indexes,
// so a node's free capacity is a few integers in one shared array, not a map per node.
type scalarNames []v1.ResourceName

func (n scalarNames) index(name v1.ResourceName) int {
	for i, m := range n {
		if m == name {
			return i
		}
	}
	return -1
}

// with adds the extended resources of rl that n does not hold yet.
func (n scalarNames) with(rl v1.ResourceList) scalarNames {
	for name, q := range rl {
		if isScalar(name) && !q.IsZero() && n.index(name) < 0 {
			n = append(n, name)
		}
	}
	return n
}

func isScalar(name v1.ResourceName) bool {
	switch name {
	case v1.ResourceCPU, v1.ResourceMemory, v1.ResourceEphemeralStorage, v1.ResourcePods:
		return false
	}
	return true
}

// resources is a request or a free amount: millicores, bytes, and the check's extended resources
// (scalar[i] is the amount of scalarNames[i]; nil means none).
type resources struct {
	milliCPU  int64
	memory    int64
	ephemeral int64
	scalar    []int64
}

// resourcesFromList converts a resource list, keeping the extended resources among names.
func resourcesFromList(rl v1.ResourceList, names scalarNames) resources {
	return requestFromList(rl).resources(names)
}

// podRequestList is what a pod needs on a node, with init containers and overhead, as
// NodeResourcesFit counts it.
func podRequestList(pod *v1.Pod) v1.ResourceList {
	return resourcehelper.PodRequests(pod, resourcehelper.PodResourcesOptions{})
}

func scalarAt(s []int64, i int) int64 {
	if i < len(s) {
		return s[i]
	}
	return 0
}

func (r resources) add(o resources) resources {
	out := resources{milliCPU: r.milliCPU + o.milliCPU, memory: r.memory + o.memory, ephemeral: r.ephemeral + o.ephemeral}
	if n := max(len(r.scalar), len(o.scalar)); n > 0 {
		out.scalar = make([]int64, n)
		for i := range out.scalar {
			out.scalar[i] = scalarAt(r.scalar, i) + scalarAt(o.scalar, i)
		}
	}
	return out
}

// fits reports whether r fits into free.
// As NodeResourcesFit does, a dimension the request does not ask for is not compared: a node whose
// free amount of it is negative (overcommitted, or a device gone unhealthy) still fits.
func (r resources) fits(free resources) bool {
	if (r.milliCPU > 0 && r.milliCPU > free.milliCPU) || (r.memory > 0 && r.memory > free.memory) || (r.ephemeral > 0 && r.ephemeral > free.ephemeral) {
		return false
	}
	for i, v := range r.scalar {
		if v > 0 && v > scalarAt(free.scalar, i) {
			return false
		}
	}
	return true
}

// subFrom subtracts r from free in place (free holds every extended resource of the check).
func (r resources) subFrom(free *resources) {
	free.milliCPU -= r.milliCPU
	free.memory -= r.memory
	free.ephemeral -= r.ephemeral
	for i, v := range r.scalar {
		free.scalar[i] -= v
	}
}

// addTo adds r to free in place (free holds every extended resource of the check).
func (r resources) addTo(free *resources) {
	free.milliCPU += r.milliCPU
	free.memory += r.memory
	free.ephemeral += r.ephemeral
	for i, v := range r.scalar {
		free.scalar[i] += v
	}
}

// copies returns how many copies of r fit into free (r non-zero in at least one dimension).
func (r resources) copies(free resources, limit int) int {
	n := limit
	div := func(have, want int64) {
		if want > 0 {
			if c := int(have / want); c < n {
				n = c
			}
		}
	}
	div(free.milliCPU, r.milliCPU)
	div(free.memory, r.memory)
	div(free.ephemeral, r.ephemeral)
	for i, v := range r.scalar {
		div(scalarAt(free.scalar, i), v)
	}
	if n < 0 {
		return 0
	}
	return n
}

func (r resources) equal(o resources) bool {
	if r.milliCPU != o.milliCPU || r.memory != o.memory || r.ephemeral != o.ephemeral {
		return false
	}
	for i := range max(len(r.scalar), len(o.scalar)) {
		if scalarAt(r.scalar, i) != scalarAt(o.scalar, i) {
			return false
		}
	}
	return true
}

// shortfall names the resources in which want exceeds have, e.g. "cpu 6 > 4".
func shortfall(want, have resources, names scalarNames) string {
	var parts []string
	if want.milliCPU > have.milliCPU {
		parts = append(parts, fmt.Sprintf("cpu %dm > %dm", want.milliCPU, have.milliCPU))
	}
	if want.memory > have.memory {
		parts = append(parts, fmt.Sprintf("memory %d > %d", want.memory, have.memory))
	}
	if want.ephemeral > have.ephemeral {
		parts = append(parts, fmt.Sprintf("ephemeral-storage %d > %d", want.ephemeral, have.ephemeral))
	}
	for i, v := range want.scalar {
		if h := scalarAt(have.scalar, i); v > h {
			parts = append(parts, fmt.Sprintf("%s %d > %d", names[i], v, h))
		}
	}
	sort.Strings(parts)
	return strings.Join(parts, ", ")
}

// freeNode is a node's free capacity in the simulation.
type freeNode struct {
	node  *v1.Node
	free  resources
	slots int
}

// nodeFree is a node's free capacity; its extended resources (those of names) go into scalar, a
// slice of the check's shared array.
func nodeFree(ni fwk.NodeInfo, names scalarNames, scalar []int64) freeNode {
	alloc, req := ni.GetAllocatable(), ni.GetRequested()
	f := freeNode{
		node: ni.Node(),
		free: resources{
			milliCPU:  alloc.GetMilliCPU() - req.GetMilliCPU(),
			memory:    alloc.GetMemory() - req.GetMemory(),
			ephemeral: alloc.GetEphemeralStorage() - req.GetEphemeralStorage(),
		},
		slots: alloc.GetAllowedPodNumber() - len(ni.GetPods()),
	}
	if len(names) > 0 {
		have, used := alloc.GetScalarResources(), req.GetScalarResources()
		for i, name := range names {
			scalar[i] = have[name] - used[name]
		}
		f.free.scalar = scalar
	}
	return f
}

// feasibility is the outcome of one check.
type Result struct {
	Feasible bool
	// Message says why a gang is infeasible, for the pod's status and events.
	Message string
	// Shortfall says the same in numbers (nil when Feasible).
	Shortfall *v1alpha1.PodGroupShortfall
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
}

// deviceCheck is the device model of a check over members, with the devices of the claimed pods
// (nominated to nodes, see New) taken when the source counts them.
func (s *Shared) deviceCheck(logger klog.Logger, members, claimed []*v1.Pod) DeviceCheck {
	if s == nil || s.Devices == nil {
		return nil
	}
	src := s.Devices
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

// usable reports, per node, whether some member may use it. One pass per distinct eligibility (the
// members of a gang usually share one), not per member.
func (f *Fit) usable() []bool {
	if f.homogeneous {
		return f.eligible.of(f.members[0].pod)
	}
	return f.usableBy(f.members)
}

// usableBy reports, per node, whether one of members may use it.
func (f *Fit) usableBy(members []gangMember) []bool {
	out := make([]bool, len(f.free))
	seen := map[*bool]bool{}
	for _, m := range members {
		elig := f.eligible.of(m.pod)
		if len(elig) == 0 || seen[&elig[0]] {
			continue
		}
		seen[&elig[0]] = true
		for i, ok := range elig {
			out[i] = out[i] || ok
		}
	}
	return out
}

// placeable returns how many of the gang's `need` members fit at once on the nodes at the given
// indexes of f.free (all nodes when idx is nil), at most need: exact for identical members, first-fit
// decreasing for mixed ones.
func (f *Fit) placeable(idx []int) int {
	placed := 0
	if f.homogeneous {
		elig := f.eligible.of(f.members[0].pod)
		eachNode(idx, len(f.free), func(i int) bool {
			if elig[i] && f.free[i].slots > 0 {
				placed += f.members[0].req.copies(f.free[i].free, f.free[i].slots)
			}
			return placed < f.need
		})
		return min(placed, f.need)
	}
	for _, node := range f.assign(idx) {
		if node >= 0 {
			placed++
		}
	}
	return placed
}

// assign places the gang's members first-fit decreasing (largest first, each on the first node with
// room) on the nodes at the given indexes of f.free (all nodes when idx is nil), and returns each
// member's node index (-1: no room), in the order of f.members.
func (f *Fit) assign(idx []int) []int {
	order := make([]int, len(f.members))
	for i := range order {
		order[i] = i
	}
	sort.SliceStable(order, func(i, j int) bool {
		return dominantShare(f.members[order[i]].req, f.totals) > dominantShare(f.members[order[j]].req, f.totals)
	})
	out := make([]int, len(f.members))
	sim := map[int]freeNode{}
	// kinds counts, with joint devices, the members of each device kind put on a node.
	var kinds map[int][]int
	for _, mi := range order {
		m := f.members[mi]
		out[mi] = -1
		elig := f.eligible.of(m.pod)
		eachNode(idx, len(f.free), func(i int) bool {
			n, ok := sim[i]
			if !ok {
				n = f.free[i]
				n.free = n.free.clone()
			}
			if elig[i] && n.slots > 0 && m.req.fits(n.free) && f.devicesFit(i, kinds[i], m) {
				m.req.subFrom(&n.free)
				n.slots--
				sim[i] = n
				out[mi] = i
				if k := f.kindOf(m); k >= 0 {
					if kinds == nil {
						kinds = map[int][]int{}
					}
					if kinds[i] == nil {
						kinds[i] = make([]int, f.devices.Kinds())
					}
					kinds[i][k]++
				}
				return false
			}
			return true
		})
	}
	return out
}

// kindOf is a member's device kind when the check places device kinds jointly, else -1.
func (f *Fit) kindOf(m gangMember) int {
	if !f.joint {
		return -1
	}
	return f.devices.Kind(m.pod)
}

// eachNode calls fn with each index of idx (0..n-1 when idx is nil) until fn returns false.
func eachNode(idx []int, n int, fn func(i int) bool) {
	if idx == nil {
		for i := range n {
			if !fn(i) {
				return
			}
		}
		return
	}
	for _, i := range idx {
		if !fn(i) {
			return
		}
	}
}

// leftover is the free CPU and memory the nodes at idx keep once the gang's members are placed on
// them: the smaller, the tighter the fit.
func (f *Fit) leftover(idx []int) (milliCPU, memory int64) {
	for _, i := range idx {
		milliCPU += max(f.free[i].free.milliCPU, 0)
		memory += max(f.free[i].free.memory, 0)
	}
	for _, m := range f.members {
		milliCPU -= m.req.milliCPU
		memory -= m.req.memory
	}
	return milliCPU, memory
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

func (r resources) clone() resources {
	out := r
	out.scalar = slices.Clone(r.scalar)
	return out
}

func clusterTotals(free []freeNode) resources {
	var t resources
	for _, f := range free {
		t.addClamped(f.free)
	}
	return t
}

// addClamped adds the non-negative part of o to r, in place.
func (r *resources) addClamped(o resources) {
	r.milliCPU += max(o.milliCPU, 0)
	r.memory += max(o.memory, 0)
	r.ephemeral += max(o.ephemeral, 0)
	if len(o.scalar) > len(r.scalar) {
		r.scalar = append(r.scalar, make([]int64, len(o.scalar)-len(r.scalar))...)
	}
	for i, v := range o.scalar {
		r.scalar[i] += max(v, 0)
	}
}

// dominantShare is a member's largest share of the cluster's free CPU, memory or extended resources,
// to order members by size. A request of a resource the cluster has none of free is infinitely large.
func dominantShare(r, totals resources) float64 {
	share := 0.0
	if totals.milliCPU > 0 {
		share = float64(r.milliCPU) / float64(totals.milliCPU)
	}
	if totals.memory > 0 {
		share = max(share, float64(r.memory)/float64(totals.memory))
	}
	for i, v := range r.scalar {
		if v <= 0 {
			continue
		}
		if t := scalarAt(totals.scalar, i); t > 0 {
			share = max(share, float64(v)/float64(t))
		} else {
			return math.Inf(1)
		}
	}
	return share
}

func homogeneous(members []gangMember, e *eligibility) bool {
	key := e.key(members[0].pod)
	for _, m := range members[1:] {
		if !m.req.equal(members[0].req) || e.key(m.pod) != key {
			return false
		}
	}
	return true
}

// eligibility caches, per distinct placement constraints (node selector, required node affinity,
// tolerations), which nodes a member may use. Members of a gang usually share one template, so this is
// one pass over the nodes. Constraints are told apart by a hash of their fields, then compared: no
// encoding per member.
type eligibility struct {
	logger  klog.Logger
	nodes   []freeNode
	classes []eligibilityClass
	// byHash lists the classes whose constraints have a hash.
	byHash map[uint64][]int
	// classOf remembers each member's class, so it is found once per check, not once per use.
	classOf map[*v1.Pod]int
}

// eligibilityClass is one set of placement constraints, as a pod that has them, and its nodes (nil
// until asked for).
type eligibilityClass struct {
	rep *v1.Pod
	ok  []bool
}

func newEligibility(logger klog.Logger, nodes []freeNode) *eligibility {
	return &eligibility{logger: logger, nodes: nodes, byHash: map[uint64][]int{}, classOf: map[*v1.Pod]int{}}
}

// key is the pod's constraint class: pods with equal keys may use the same nodes.
func (e *eligibility) key(pod *v1.Pod) int {
	if c, ok := e.classOf[pod]; ok {
		return c
	}
	h := constraintsHash(pod)
	for _, c := range e.byHash[h] {
		if sameConstraints(e.classes[c].rep, pod) {
			e.classOf[pod] = c
			return c
		}
	}
	c := len(e.classes)
	e.classes = append(e.classes, eligibilityClass{rep: pod})
	e.byHash[h] = append(e.byHash[h], c)
	e.classOf[pod] = c
	return c
}

func nodeAffinityOf(pod *v1.Pod) *v1.NodeAffinity {
	if pod.Spec.Affinity == nil {
		return nil
	}
	return pod.Spec.Affinity.NodeAffinity
}

// sameConstraints reports whether two pods' node selector, required node affinity and tolerations are
// equal (written out: reflection would cost more than the rest of the check per member).
func sameConstraints(a, b *v1.Pod) bool {
	sa, sb := a.Spec.NodeSelector, b.Spec.NodeSelector
	if len(sa) != len(sb) {
		return false
	}
	for k, v := range sa {
		if w, ok := sb[k]; !ok || w != v {
			return false
		}
	}
	ta, tb := a.Spec.Tolerations, b.Spec.Tolerations
	if len(ta) != len(tb) {
		return false
	}
	for i := range ta {
		x, y := &ta[i], &tb[i]
		if x.Key != y.Key || x.Operator != y.Operator || x.Value != y.Value || x.Effect != y.Effect {
			return false
		}
		if (x.TolerationSeconds == nil) != (y.TolerationSeconds == nil) || (x.TolerationSeconds != nil && *x.TolerationSeconds != *y.TolerationSeconds) {
			return false
		}
	}
	na, nb := nodeAffinityOf(a), nodeAffinityOf(b)
	if na == nil || nb == nil {
		return na == nb
	}
	return equality.Semantic.DeepEqual(na, nb)
}

// constraintsHash hashes what sameConstraints compares (the node selector independently of map order,
// the tolerations in order, and whether there is a node affinity): equal constraints hash equal.
func constraintsHash(pod *v1.Pod) uint64 {
	var sel uint64
	for k, v := range pod.Spec.NodeSelector {
		sel ^= fnvAdd(fnvAdd(fnvOffset, k), v)
	}
	h := fnvAdd(fnvOffset, "")
	h ^= sel
	for i := range pod.Spec.Tolerations {
		t := &pod.Spec.Tolerations[i]
		h = fnvAdd(fnvAdd(fnvAdd(fnvAdd(h, t.Key), string(t.Operator)), t.Value), string(t.Effect))
	}
	if nodeAffinityOf(pod) != nil {
		h = fnvAdd(h, "affinity")
	}
	return h
}

const (
	fnvOffset = 14695981039346656037
	fnvPrime  = 1099511628211
)

// fnvAdd folds s, then a separator, into an FNV-1a hash.
func fnvAdd(h uint64, s string) uint64 {
	for i := 0; i < len(s); i++ {
		h ^= uint64(s[i])
		h *= fnvPrime
	}
	h ^= 0xff
	h *= fnvPrime
	return h
}

func (e *eligibility) of(pod *v1.Pod) []bool {
	c := e.key(pod)
	if ok := e.classes[c].ok; ok != nil {
		return ok
	}
	required := nodeaffinity.GetRequiredNodeAffinity(pod)
	ok := make([]bool, len(e.nodes))
	for i, f := range e.nodes {
		if f.node.Spec.Unschedulable && !tolerates(e.logger, pod, &v1.Taint{Key: v1.TaintNodeUnschedulable, Effect: v1.TaintEffectNoSchedule}) {
			continue
		}
		if match, err := required.Match(f.node); err != nil || !match {
			continue
		}
		if _, untolerated := v1helper.FindMatchingUntoleratedTaint(e.logger, f.node.Spec.Taints, pod.Spec.Tolerations, func(t *v1.Taint) bool {
			return t.Effect == v1.TaintEffectNoSchedule || t.Effect == v1.TaintEffectNoExecute
		}, false); untolerated {
			continue
		}
		ok[i] = true
	}
	e.classes[c].ok = ok
	return ok
}

func tolerates(logger klog.Logger, pod *v1.Pod, taint *v1.Taint) bool {
	return v1helper.TolerationsTolerateTaint(logger, pod.Spec.Tolerations, taint, false)
}
