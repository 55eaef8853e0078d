package gangfit

import (
	"cmp"
	"slices"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/custom-scheduler/custom-scheduler/pkg/apis/scheduling/v1alpha1"
)

// maxShortfallDomains is how many domains a shortfall lists (the roomiest).
const maxShortfallDomains = 16

// list is r as a resource list: CPU in millicores, memory and ephemeral storage in bytes, the
// extended resources of names; negative amounts (an overcommitted node) count as none, zero
// amounts are left out.
func (r resources) list(names scalarNames) v1.ResourceList {
	out := v1.ResourceList{}
	if r.milliCPU > 0 {
		out[v1.ResourceCPU] = *resource.NewMilliQuantity(r.milliCPU, resource.DecimalSI)
	}
	if r.memory > 0 {
		out[v1.ResourceMemory] = *resource.NewQuantity(r.memory, resource.BinarySI)
	}
	if r.ephemeral > 0 {
		out[v1.ResourceEphemeralStorage] = *resource.NewQuantity(r.ephemeral, resource.BinarySI)
	}
	for i, v := range r.scalar {
		if v > 0 && i < len(names) {
			out[names[i]] = *resource.NewQuantity(v, resource.DecimalSI)
		}
	}
	return out
}

// shortfall is an infeasible check's numbers: the members needed and placeable, the unscheduled
// members, and for each resource want or member asks for: want (in total), member (the largest
// request of a member to place), and what is free on the nodes the members may use, in total and on
// the one with most of it (resource by resource); the roomiest node is the one with most free CPU,
// then memory.
func (f *Fit) shortfall(reason v1alpha1.ShortfallReason, placeable int, want, member resources) *v1alpha1.PodGroupShortfall {
	s := &v1alpha1.PodGroupShortfall{Reason: reason, Needed: int32(f.need), Placeable: int32(placeable), Unscheduled: int32(len(f.all))}
	var free, largest resources
	best := -1
	for i, ok := range f.usable() {
		if !ok {
			continue
		}
		free.addClamped(f.free[i].free)
		largest = largest.max(f.free[i].free)
		if best < 0 || f.free[i].free.milliCPU > f.free[best].free.milliCPU ||
			(f.free[i].free.milliCPU == f.free[best].free.milliCPU && f.free[i].free.memory > f.free[best].free.memory) {
			best = i
		}
	}
	if best >= 0 {
		s.LargestFreeNode = f.free[best].node.Name
	}
	w, m, fr, l := want.list(f.names), member.list(f.names), free.list(f.names), largest.list(f.names)
	names := make([]v1.ResourceName, 0, len(w)+len(m))
	for n := range w {
		names = append(names, n)
	}
	for n := range m {
		if _, ok := w[n]; !ok {
			names = append(names, n)
		}
	}
	slices.Sort(names)
	for _, n := range names {
		s.Resources = append(s.Resources, v1alpha1.ResourceShortfall{Name: n, Requested: *w.Name(n, resource.DecimalSI), Free: *fr.Name(n, resource.DecimalSI),
			Member: *m.Name(n, resource.DecimalSI), LargestFree: *l.Name(n, resource.DecimalSI)})
	}
	return s
}

// largest is, resource by resource, the largest request of the members to place.
func (f *Fit) largest() resources {
	var l resources
	for _, m := range f.members {
		l = l.max(m.req)
	}
	return l
}

// max is r and o's larger amount of each resource (none below zero).
func (r resources) max(o resources) resources {
	out := resources{milliCPU: max(r.milliCPU, o.milliCPU, 0), memory: max(r.memory, o.memory, 0), ephemeral: max(r.ephemeral, o.ephemeral, 0)}
	if n := max(len(r.scalar), len(o.scalar)); n > 0 {
		out.scalar = make([]int64, n)
		for i := range out.scalar {
			out.scalar[i] = max(scalarAt(r.scalar, i), scalarAt(o.scalar, i), 0)
		}
	}
	return out
}

// total is the sum of members' requests.
func total(members []gangMember) resources {
	var t resources
	for _, m := range members {
		t = t.add(m.req)
	}
	return t
}

// domainShortfalls lists how many members each domain fits, the roomiest first (then by value), at
// most maxShortfallDomains of them.
func domainShortfalls(placeable map[string]int) []v1alpha1.DomainShortfall {
	out := make([]v1alpha1.DomainShortfall, 0, len(placeable))
	for v, n := range placeable {
		out = append(out, v1alpha1.DomainShortfall{Value: v, Placeable: int32(n)})
	}
	slices.SortFunc(out, func(a, b v1alpha1.DomainShortfall) int {
		return cmp.Or(cmp.Compare(b.Placeable, a.Placeable), cmp.Compare(a.Value, b.Value))
	})
	if len(out) > maxShortfallDomains {
		out = out[:maxShortfallDomains]
	}
	return out
}
