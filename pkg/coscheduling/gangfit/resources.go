package gangfit

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"sort"
	"strings"

	resourcehelper "k8s.io/component-helpers/resource"

	v1 "k8s.io/api/core/v1"
	fwk "k8s.io/kube-scheduler/framework"
)

// Resources as the fit counts them: the scalar dimensions a check tracks, a pod's request and a node's
// free amount in them, and the arithmetic over them.

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

// shares are a member's shares of the cluster's free resources, largest first: members compared by
// them (see bySize) are ordered by their dominant share, then, where it ties (members that each
// claim one device, whose share of the free devices is the largest), by their next largest share.
func shares(r, totals resources) []float64 {
	out := make([]float64, 0, 2+len(r.scalar))
	add := func(v, t int64) {
		switch {
		case v <= 0:
		case t > 0:
			out = append(out, float64(v)/float64(t))
		default:
			out = append(out, math.Inf(1))
		}
	}
	add(r.milliCPU, totals.milliCPU)
	add(r.memory, totals.memory)
	for i, v := range r.scalar {
		add(v, scalarAt(totals.scalar, i))
	}
	slices.SortFunc(out, func(a, b float64) int { return cmp.Compare(b, a) })
	return out
}

// bySize compares two members' shares (see shares): negative when a is the smaller.
func bySize(a, b []float64) int {
	for i := range min(len(a), len(b)) {
		if c := cmp.Compare(a[i], b[i]); c != 0 {
			return c
		}
	}
	return cmp.Compare(len(a), len(b))
}
