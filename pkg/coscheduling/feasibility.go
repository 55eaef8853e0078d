package coscheduling

import (
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"strings"

	v1 "k8s.io/api/core/v1"
	resourcehelper "k8s.io/component-helpers/resource"
	v1helper "k8s.io/component-helpers/scheduling/corev1"
	"k8s.io/component-helpers/scheduling/corev1/nodeaffinity"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
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

// resources is a request or a free amount: millicores, bytes, and extended resources.
type resources struct {
	milliCPU  int64
	memory    int64
	ephemeral int64
	scalar    map[v1.ResourceName]int64
}

func resourcesFromList(rl v1.ResourceList) resources {
	var r resources
	for name, q := range rl {
		switch name {
		case v1.ResourceCPU:
			r.milliCPU = q.MilliValue()
		case v1.ResourceMemory:
			r.memory = q.Value()
		case v1.ResourceEphemeralStorage:
			r.ephemeral = q.Value()
		case v1.ResourcePods:
			// Pod slots are counted separately.
		default:
			if q.Value() == 0 {
				continue
			}
			if r.scalar == nil {
				r.scalar = map[v1.ResourceName]int64{}
			}
			r.scalar[name] = q.Value()
		}
	}
	return r
}

// podRequests is what a pod needs on a node, with init containers and overhead, as NodeResourcesFit
// counts it.
func podRequests(pod *v1.Pod) resources {
	return resourcesFromList(resourcehelper.PodRequests(pod, resourcehelper.PodResourcesOptions{}))
}

func (r resources) add(o resources) resources {
	out := resources{milliCPU: r.milliCPU + o.milliCPU, memory: r.memory + o.memory, ephemeral: r.ephemeral + o.ephemeral}
	if len(r.scalar)+len(o.scalar) > 0 {
		out.scalar = make(map[v1.ResourceName]int64, len(r.scalar)+len(o.scalar))
		for k, v := range r.scalar {
			out.scalar[k] += v
		}
		for k, v := range o.scalar {
			out.scalar[k] += v
		}
	}
	return out
}

// fits reports whether r fits into free.
func (r resources) fits(free resources) bool {
	if r.milliCPU > free.milliCPU || r.memory > free.memory || r.ephemeral > free.ephemeral {
		return false
	}
	for k, v := range r.scalar {
		if v > free.scalar[k] {
			return false
		}
	}
	return true
}

// sub subtracts r from free in place.
func (r resources) subFrom(free *resources) {
	free.milliCPU -= r.milliCPU
	free.memory -= r.memory
	free.ephemeral -= r.ephemeral
	for k, v := range r.scalar {
		free.scalar[k] -= v
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
	for k, v := range r.scalar {
		div(free.scalar[k], v)
	}
	if n < 0 {
		return 0
	}
	return n
}

func (r resources) equal(o resources) bool {
	if r.milliCPU != o.milliCPU || r.memory != o.memory || r.ephemeral != o.ephemeral || len(r.scalar) != len(o.scalar) {
		return false
	}
	for k, v := range r.scalar {
		if o.scalar[k] != v {
			return false
		}
	}
	return true
}

// shortfall names the resources in which want exceeds have, e.g. "cpu 6 > 4".
func shortfall(want, have resources) string {
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
	for k, v := range want.scalar {
		if v > have.scalar[k] {
			parts = append(parts, fmt.Sprintf("%s %d > %d", k, v, have.scalar[k]))
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

func nodeFree(ni fwk.NodeInfo) freeNode {
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
	if s := alloc.GetScalarResources(); len(s) > 0 {
		f.free.scalar = make(map[v1.ResourceName]int64, len(s))
		used := req.GetScalarResources()
		for k, v := range s {
			f.free.scalar[k] = v - used[k]
		}
	}
	return f
}

// feasibility is the outcome of one check.
type feasibility struct {
	feasible bool
	// message says why a gang is infeasible, for the pod's status and events.
	message string
}

// gangMember is a member still to be placed, with its request.
type gangMember struct {
	pod *v1.Pod
	req resources
}

// gangFit is one whole-gang check's inputs, prepared once: the `need` smallest candidate members and
// the snapshot's free capacity per node, so that placement can be tried on the whole cluster or on any
// subset of its nodes (a topology domain) without preparing them again.
type gangFit struct {
	logger   klog.Logger
	groupKey string
	need     int
	// members are the `need` smallest candidates, by dominant share of the cluster's free capacity.
	members     []gangMember
	free        []freeNode
	eligible    *eligibility
	homogeneous bool
	totals      resources
}

// newGangFit prepares a check of placing `need` of the candidates on nodes. It returns nil when need
// is not positive or there are too few candidates (checkFeasible reports those).
func newGangFit(logger klog.Logger, groupKey string, candidates []*v1.Pod, need int, nodes []fwk.NodeInfo) *gangFit {
	if need <= 0 || len(candidates) < need {
		return nil
	}
	members := make([]gangMember, len(candidates))
	for i, p := range candidates {
		members[i] = gangMember{pod: p, req: podRequests(p)}
	}
	free := make([]freeNode, 0, len(nodes))
	for _, ni := range nodes {
		if ni.Node() == nil {
			continue
		}
		free = append(free, nodeFree(ni))
	}
	f := &gangFit{logger: logger, groupKey: groupKey, need: need, free: free, eligible: newEligibility(logger, free), totals: clusterTotals(free)}
	// Optimistically pick the `need` smallest members: if they cannot be placed, no choice can.
	sort.SliceStable(members, func(i, j int) bool {
		return dominantShare(members[i].req, f.totals) < dominantShare(members[j].req, f.totals)
	})
	f.members = members[:need]
	f.homogeneous = homogeneous(f.members, f.eligible)
	return f
}

// placeable returns how many of the gang's `need` members fit at once on the nodes at the given
// indexes of f.free (all nodes when idx is nil), at most need: exact for identical members, first-fit
// decreasing for mixed ones.
func (f *gangFit) placeable(idx []int) int {
	each := func(fn func(i int) bool) {
		if idx == nil {
			for i := range f.free {
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
	placed := 0
	if f.homogeneous {
		elig := f.eligible.of(f.members[0].pod)
		each(func(i int) bool {
			if elig[i] && f.free[i].slots > 0 {
				placed += f.members[0].req.copies(f.free[i].free, f.free[i].slots)
			}
			return placed < f.need
		})
		return min(placed, f.need)
	}
	members := slices.Clone(f.members)
	sort.SliceStable(members, func(i, j int) bool {
		return dominantShare(members[i].req, f.totals) > dominantShare(members[j].req, f.totals)
	})
	sim := map[int]freeNode{}
	for _, m := range members {
		elig := f.eligible.of(m.pod)
		each(func(i int) bool {
			n, ok := sim[i]
			if !ok {
				n = f.free[i]
				n.free = n.free.clone()
			}
			if elig[i] && n.slots > 0 && m.req.fits(n.free) {
				m.req.subFrom(&n.free)
				n.slots--
				sim[i] = n
				placed++
				return false
			}
			return true
		})
	}
	return placed
}

// leftover is the free CPU and memory the nodes at idx keep once the gang's members are placed on
// them: the smaller, the tighter the fit.
func (f *gangFit) leftover(idx []int) (milliCPU, memory int64) {
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

// checkFeasible simulates placing `need` of the candidate members on nodes. minResources, when set, is
// compared with the free capacity summed over the nodes the members may use, less what the members
// already reserved or bound (counted) hold. It also returns the prepared check, for a topology
// placement to reuse (nil when the gang needs no more members or has too few).
func checkFeasible(logger klog.Logger, groupKey string, candidates []*v1.Pod, need int, nodes []fwk.NodeInfo, minResources v1.ResourceList, counted resources) (feasibility, *gangFit) {
	if need <= 0 {
		return feasibility{feasible: true}, nil
	}
	if len(candidates) < need {
		return feasibility{message: fmt.Sprintf("PodGroup %s needs %d more members placed at once, but only %d unscheduled members exist", groupKey, need, len(candidates))}, nil
	}
	f := newGangFit(logger, groupKey, candidates, need, nodes)

	var eligibleTotal resources
	anyEligible := make([]bool, len(f.free))
	for _, m := range f.members {
		for i, ok := range f.eligible.of(m.pod) {
			if ok {
				anyEligible[i] = true
			}
		}
	}
	for i, fn := range f.free {
		if anyEligible[i] {
			eligibleTotal.addClamped(fn.free)
		}
	}
	if len(minResources) > 0 {
		want := resourcesFromList(minResources)
		remaining := resources{
			milliCPU:  max(want.milliCPU-counted.milliCPU, 0),
			memory:    max(want.memory-counted.memory, 0),
			ephemeral: max(want.ephemeral-counted.ephemeral, 0),
		}
		for k, v := range want.scalar {
			if r := v - counted.scalar[k]; r > 0 {
				if remaining.scalar == nil {
					remaining.scalar = map[v1.ResourceName]int64{}
				}
				remaining.scalar[k] = r
			}
		}
		if !remaining.fits(eligibleTotal) {
			return feasibility{message: fmt.Sprintf("PodGroup %s: spec.minResources exceed the free resources of the nodes its members may use (%s)", groupKey, shortfall(remaining, eligibleTotal))}, f
		}
	}

	placed := f.placeable(nil)
	if placed >= need {
		return feasibility{feasible: true}, f
	}
	if f.homogeneous {
		return feasibility{message: fmt.Sprintf("PodGroup %s needs %d more members placed at once, but the nodes' free resources fit only %d of them (checked per node, not in total)", groupKey, need, placed)}, f
	}
	// FFD is not exact for mixed sizes: admit the gang if the sound, weaker test passes.
	var sum resources
	for _, m := range f.members {
		sum = sum.add(m.req)
		fitsSomewhere := false
		elig := f.eligible.of(m.pod)
		for i, fn := range f.free {
			if elig[i] && fn.slots > 0 && m.req.fits(fn.free) {
				fitsSomewhere = true
				break
			}
		}
		if !fitsSomewhere {
			return feasibility{message: fmt.Sprintf("PodGroup %s: member %s fits on no node's free resources", groupKey, klog.KObj(m.pod))}, f
		}
	}
	if !sum.fits(eligibleTotal) {
		return feasibility{message: fmt.Sprintf("PodGroup %s needs %d more members placed at once, but the nodes' free resources fit only %d of them (%s)", groupKey, need, placed, shortfall(sum, eligibleTotal))}, f
	}
	logger.V(5).Info("First-fit decreasing could not place a mixed gang, admitting it on the aggregate test", "podGroup", groupKey, "need", need, "placed", placed)
	return feasibility{feasible: true}, f
}

func (r resources) clone() resources {
	out := r
	if r.scalar != nil {
		out.scalar = make(map[v1.ResourceName]int64, len(r.scalar))
		for k, v := range r.scalar {
			out.scalar[k] = v
		}
	}
	return out
}

func clusterTotals(free []freeNode) resources {
	var t resources
	for _, f := range free {
		t.addClamped(f.free)
	}
	return t
}

// addClamped adds the non-negative part of o to r, in place (no allocation per call once r holds the
// extended resources' names).
func (r *resources) addClamped(o resources) {
	r.milliCPU += max(o.milliCPU, 0)
	r.memory += max(o.memory, 0)
	r.ephemeral += max(o.ephemeral, 0)
	for k, v := range o.scalar {
		if r.scalar == nil {
			r.scalar = make(map[v1.ResourceName]int64, len(o.scalar))
		}
		r.scalar[k] += max(v, 0)
	}
}

// dominantShare is a member's largest share of the cluster's free CPU or memory, to order members by size.
func dominantShare(r, totals resources) float64 {
	share := 0.0
	if totals.milliCPU > 0 {
		share = float64(r.milliCPU) / float64(totals.milliCPU)
	}
	if totals.memory > 0 {
		share = max(share, float64(r.memory)/float64(totals.memory))
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
// one pass over the nodes.
type eligibility struct {
	logger klog.Logger
	nodes  []freeNode
	byKey  map[string][]bool
}

func newEligibility(logger klog.Logger, nodes []freeNode) *eligibility {
	return &eligibility{logger: logger, nodes: nodes, byKey: map[string][]bool{}}
}

func (e *eligibility) key(pod *v1.Pod) string {
	var affinity *v1.NodeAffinity
	if pod.Spec.Affinity != nil {
		affinity = pod.Spec.Affinity.NodeAffinity
	}
	if len(pod.Spec.NodeSelector) == 0 && affinity == nil && len(pod.Spec.Tolerations) == 0 {
		return ""
	}
	b, err := json.Marshal([]any{pod.Spec.NodeSelector, affinity, pod.Spec.Tolerations})
	if err != nil {
		return string(pod.UID)
	}
	return string(b)
}

func (e *eligibility) of(pod *v1.Pod) []bool {
	k := e.key(pod)
	if ok, found := e.byKey[k]; found {
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
	e.byKey[k] = ok
	return ok
}

func tolerates(logger klog.Logger, pod *v1.Pod, taint *v1.Taint) bool {
	return v1helper.TolerationsTolerateTaint(logger, pod.Spec.Tolerations, taint, false)
}
