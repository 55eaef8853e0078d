package gangfit

import (
	"fmt"
	"strings"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
)

// Devices in the whole-gang check. Members that claim devices through Dynamic Resource Allocation
// (their ResourceClaims, or an extended resource a DeviceClass backs) need devices on the node they
// go to, which node allocatable never shows. A DeviceSource (package devices, over the scheduler's
// DRA state and upstream's structured allocator) models them for one check: members that claim the
// same devices are one device kind, and each kind is one more dimension of the check's resources, in
// units of one member's claims: a member asks for 1 of its kind, and a node's free amount of it is how
// many members of that kind the node's free devices hold at once. First-fit decreasing, the topology
// domains, the plan and the shortfall then count devices as they count CPU, and an extended resource
// that DRA backs is no longer compared with node allocatable, where it never appears.
//
// Kinds are counted each on its own: members of two kinds that compete for the same devices are
// counted as if each had the devices to itself, so for such mixed gangs the check stays a
// relaxation, and the real filters (DynamicResources) have the last word.

// DeviceSource models the devices members claim, once per check. A nil DeviceSource models none.
type DeviceSource interface {
	// ForCheck returns the device model of one check over members, or nil when none of them claims
	// devices through DRA.
	ForCheck(logger klog.Logger, members []*v1.Pod) DeviceCheck
}

// DeviceCheck is the device model of one check (see DeviceSource).
type DeviceCheck interface {
	// Kinds is the number of device kinds among the members.
	Kinds() int
	// Kind returns the member's device kind, in [0, Kinds()), or -1 when it claims no device the
	// model counts.
	Kind(pod *v1.Pod) int
	// Name is a kind's name in messages and shortfall rows ("devices/<class>").
	Name(kind int) v1.ResourceName
	// Delegated reports whether an extended resource is one DRA backs: the device kinds count it, so
	// the check does not compare it with node allocatable.
	Delegated(name v1.ResourceName) bool
	// Copies is how many members of kind the node's free devices hold at once, at most limit.
	Copies(kind int, node fwk.NodeInfo, limit int) int
	// Modelled reports whether the model counts every ResourceClaim of the member (true when it has
	// none): then the nodes the check counts for it are where its claims fit, and a placement plan
	// may narrow its cycle to them. Claims shared with other members, allocated already, or not
	// created yet are not counted.
	Modelled(pod *v1.Pod) bool
}

// FreeingDevices is a DeviceSource that can count, for a reservation's plan, the devices of pods
// that leave as free (see NewReservable).
type FreeingDevices interface {
	DeviceSource
	// Freeing returns a source whose checks count the devices of the claims reserved for leaving
	// pods only as free.
	Freeing(leaving sets.Set[types.UID]) DeviceSource
}

// devicePrefix starts the name of a device kind's dimension.
const devicePrefix = "devices/"

// IsDeviceKind reports whether a resource name is a device kind's dimension (see DeviceCheck.Name).
func IsDeviceKind(name v1.ResourceName) bool { return strings.HasPrefix(string(name), devicePrefix) }

// DeviceKindName names a kind after the device classes its members claim.
func DeviceKindName(classes []string, kind int, taken func(v1.ResourceName) bool) v1.ResourceName {
	name := v1.ResourceName(devicePrefix + strings.Join(classes, "+"))
	if taken(name) {
		name = v1.ResourceName(fmt.Sprintf("%s#%d", name, kind))
	}
	return name
}

// withDevices drops from names the extended resources dev delegates to DRA and appends one
// dimension per device kind; it returns the names and the index of kind 0 (each kind follows).
func withDevices(names scalarNames, dev DeviceCheck) (scalarNames, int) {
	out := make(scalarNames, 0, len(names)+dev.Kinds())
	for _, n := range names {
		if !dev.Delegated(n) {
			out = append(out, n)
		}
	}
	first := len(out)
	for k := range dev.Kinds() {
		out = append(out, dev.Name(k))
	}
	return out, first
}

// deviceFree fills a node's free amount of the device kinds: how many members of each kind its free
// devices hold at once, at most need and its pod slots. One DeviceCheck.Copies per kind, once per
// check.
func deviceFree(fn *freeNode, ni fwk.NodeInfo, dev DeviceCheck, first, need int) {
	limit := min(need, fn.slots)
	for k := range dev.Kinds() {
		if limit <= 0 {
			fn.free.scalar[first+k] = 0
			continue
		}
		fn.free.scalar[first+k] = int64(dev.Copies(k, ni, limit))
	}
}

// deviceNote says, for an infeasible check of a gang with device kinds, how many members the free
// devices of the nodes they may use hold, kind by kind, when that is fewer than needed: "" otherwise.
func (f *Fit) deviceNote() string {
	if f.devices == nil {
		return ""
	}
	usable := f.usable()
	var parts []string
	for k := range f.devices.Kinds() {
		i := f.deviceIndex + k
		want := 0
		for _, m := range f.members {
			want += int(scalarAt(m.req.scalar, i))
		}
		if want == 0 {
			continue
		}
		held := 0
		for n, ok := range usable {
			if ok {
				held += int(max(scalarAt(f.free[n].free.scalar, i), 0))
			}
		}
		if held < want {
			parts = append(parts, fmt.Sprintf("the free devices of %s hold %d of the %d members that claim them", strings.TrimPrefix(string(f.names[i]), devicePrefix), held, want))
		}
	}
	if len(parts) == 0 {
		return ""
	}
	return "; " + strings.Join(parts, ", ")
}

// Devices in a preemption search. A victim's devices are freed once it is gone: the claims whose
// every reserver (status.reservedFor) is among the victims are deallocated (the resourceclaim
// controller clears the allocation of a claim nobody reserves, and deletes the claims made for a pod,
// from a template or for its DRA-backed extended resources); a claim also reserved by a pod that
// stays keeps its devices. A DeviceRelease tells, once per search, which pods hold such devices on
// which node and how many members of each kind the node's devices hold once they are all gone. The
// search counts those amounts only while every such holder on the node is evicted, and the amounts
// it counted before otherwise: devices are freed only when they truly are (never counted freed while
// a holder stays), so with every unit evicted the answer is exact, and a gang that lacks devices
// evicts nothing for CPU alone. Putting one of several holders of a node back takes all of the
// node's freed devices off, so with several lower-priority holders on a node the search may evict
// more of them than the fewest that would do.

// DeviceRelease is a DeviceCheck that models what evicting pods frees in devices.
type DeviceRelease interface {
	// Released returns, for each node where claims reserved only by the pods (the candidate
	// victims) hold devices, those claims' reservers and how many members of each kind (at most
	// need) the node's devices hold once those claims are deallocated. Nodes absent free nothing.
	Released(pods []*v1.Pod, nodes []fwk.NodeInfo, need int) map[string]NodeRelease
}

// NodeRelease is what a node's devices hold once the claims of its holders are deallocated.
type NodeRelease struct {
	// Holders are the pods whose claims hold the node's freed devices.
	Holders []types.UID
	// Copies is, per device kind, how many members the node's devices hold then.
	Copies []int
}

// deviceRelease is a search's freed devices, per node index of its Fit.
type deviceRelease struct {
	// waiting is how many holder units are still in place; freed the kinds' amounts once none is;
	// kept the amounts they replaced.
	waiting []int
	freed   [][]int64
	kept    [][]int64
}

// releaseDevices asks the check's device model, once, what the units free in devices, and gives
// each unit the nodes where it holds them (see DeviceRelease). No-op without devices.
func (f *Fit) releaseDevices(nodes []fwk.NodeInfo, nodeIdx map[string]int, units []*gangUnit) {
	f.released = nil
	rel, ok := f.devices.(DeviceRelease)
	if !ok || len(units) == 0 {
		return
	}
	unitOf := map[types.UID]*gangUnit{}
	var pods []*v1.Pod
	for _, u := range units {
		for _, pi := range u.Pods() {
			pods = append(pods, pi.GetPod())
			unitOf[pi.GetPod().UID] = u
		}
	}
	byNode := rel.Released(pods, nodes, f.need)
	if len(byNode) == 0 {
		return
	}
	kinds := f.devices.Kinds()
	r := &deviceRelease{waiting: make([]int, len(f.free)), freed: make([][]int64, len(f.free)), kept: make([][]int64, len(f.free))}
	for name, nr := range byNode {
		n, ok := nodeIdx[name]
		if !ok || len(nr.Copies) != kinds {
			continue
		}
		holders := map[*gangUnit]bool{}
		known := true
		for _, uid := range nr.Holders {
			u := unitOf[uid]
			known = known && u != nil
			holders[u] = true
		}
		if !known || len(holders) == 0 {
			// A holder that is no candidate: the node's devices are not freed.
			continue
		}
		r.waiting[n] = len(holders)
		r.freed[n] = make([]int64, kinds)
		for k, c := range nr.Copies {
			r.freed[n][k] = int64(c)
		}
		r.kept[n] = make([]int64, kinds)
		for u := range holders {
			u.devNodes = append(u.devNodes, n)
		}
	}
	f.released = r
}

// step evicts (or puts back) one holder unit of node n: the node's freed devices count once the
// last holder is evicted, and no more once one is back.
func (r *deviceRelease) step(f *Fit, n int, evict bool) {
	free := f.free[n].free.scalar[f.deviceIndex : f.deviceIndex+len(r.freed[n])]
	if evict {
		r.waiting[n]--
		if r.waiting[n] == 0 {
			copy(r.kept[n], free)
			for k, c := range r.freed[n] {
				free[k] = max(free[k], c)
			}
		}
		return
	}
	if r.waiting[n] == 0 {
		copy(free, r.kept[n])
	}
	r.waiting[n]++
}
