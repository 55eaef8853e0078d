package gangfit

import (
	"cmp"
	"fmt"
	"slices"
	"strings"

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
		row := v1alpha1.ResourceShortfall{Name: n, Requested: *w.Name(n, resource.DecimalSI), Free: *fr.Name(n, resource.DecimalSI),
			Member: *m.Name(n, resource.DecimalSI), LargestFree: *l.Name(n, resource.DecimalSI)}
		if IsDeviceKind(n) {
			row.DeviceClass, row.Unit = DeviceClassOf(n), v1alpha1.ShortfallUnitMembers
			row.LargestFreeNode = f.largestFreeNode(n)
		}
		s.Resources = append(s.Resources, row)
	}
	return s
}

// DeviceClassOf is the device class(es) of a device kind's row name: "devices/gpu.example.com#1"
// -> "gpu.example.com" (see DeviceKindName).
func DeviceClassOf(name v1.ResourceName) string {
	class := strings.TrimPrefix(string(name), devicePrefix)
	if i := strings.LastIndexByte(class, '#'); i >= 0 {
		class = class[:i]
	}
	return class
}

// largestFreeNode is the node (among those the members may use) whose free amount of the scalar
// resource name is the largest, the first in node order on a tie; "" when none has any.
func (f *Fit) largestFreeNode(name v1.ResourceName) string {
	idx := slices.Index(f.names, name)
	if idx < 0 {
		return ""
	}
	best, most := "", int64(0)
	for i, ok := range f.usable() {
		if v := scalarAt(f.free[i].free.scalar, idx); ok && v > most {
			best, most = f.free[i].node.Name, v
		}
	}
	return best
}

// domainDeviceNote says, for a gang with device kinds that no domain of key holds, for each kind
// whose free devices in every domain hold fewer members than claim it: at most how many one domain's
// hold (doms: the domains' nodes, from domainsOf); "" when devices are not what falls short.
func (f *Fit) domainDeviceNote(key string, doms map[string][]int) string {
	if f.devices == nil || f.devices.Kinds() == 0 {
		return ""
	}
	usable := f.usable()
	var parts []string
	for k := range f.devices.Kinds() {
		i := f.deviceIndex + k
		want := int64(0)
		for _, m := range f.members {
			want += scalarAt(m.req.scalar, i)
		}
		if want == 0 {
			continue
		}
		best := int64(0)
		for _, nodes := range doms {
			var free int64
			for _, n := range nodes {
				if usable[n] {
					free += max(scalarAt(f.free[n].free.scalar, i), 0)
				}
			}
			best = max(best, free)
		}
		if best < want {
			parts = append(parts, fmt.Sprintf("the free devices of %s in one %s domain hold at most %d of the %d members that claim them", DeviceClassOf(f.names[i]), key, best, want))
		}
	}
	if len(parts) == 0 {
		return ""
	}
	return "; " + strings.Join(parts, ", ")
}

// domainDevices says, per domain of key listed in domains, how many members' claims of each device
// kind its nodes' free devices hold (summed over the nodes the members may use); nothing for a gang
// without device kinds.
func (f *Fit) domainDevices(key string, domains []v1alpha1.DomainShortfall) {
	if f.devices == nil || f.devices.Kinds() == 0 || len(domains) == 0 {
		return
	}
	usable := f.usable()
	_, doms := domainsOf(f.free, key)
	for d := range domains {
		for k := range f.devices.Kinds() {
			i := f.deviceIndex + k
			var free int64
			for _, n := range doms[domains[d].Value] {
				if usable[n] {
					free += max(scalarAt(f.free[n].free.scalar, i), 0)
				}
			}
			domains[d].Devices = append(domains[d].Devices, v1alpha1.DomainDeviceShortfall{Name: f.names[i], Free: int32(free)})
		}
	}
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
