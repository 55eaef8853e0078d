package gangfit

import (
	"fmt"
	"slices"
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
// Each kind's free amount on a node is counted as if the kind had the node's devices to itself. Two
// kinds may compete for the same devices (DeviceClasses whose selectors overlap, a member asking two
// classes beside one asking one of them, an extended resource DRA backs beside a claim of the same
// devices), so for a gang of several kinds the amounts are only a bound: the members are then placed
// first-fit decreasing with the model's DevicePacker asked, for each member put on a node, whether
// the members put there fit its devices together (as the real cycle allocates them, member after
// member), and the gang is admitted, planned or preempted for only on a placement found that way.

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

// PinningDevices is a DeviceCheck whose members are pinned to nodes by claims other pods reserve (a
// ResourceClaim the members share, allocated already): evicting its reservers may free the claim, and
// a gang that waits at Permit cannot share an unallocated claim (DynamicResources refuses the others
// while the first member's allocation is in flight), so its members could then never be placed.
type PinningDevices interface {
	// Pins reports whether pod reserves such a claim: it is never a victim of the check's preemption.
	Pins(pod *v1.Pod) bool
}

// FreeingDevices is a DeviceSource that can count, for a reservation's plan, the devices of pods
// that leave as free (see NewReservable).
type FreeingDevices interface {
	DeviceSource
	// Freeing returns a source whose checks count the devices of the claims reserved for leaving
	// pods only as free.
	Freeing(leaving sets.Set[types.UID]) DeviceSource
}

// DevicePacker is a DeviceCheck that can tell whether members of several kinds fit a node's devices
// together (see above).
type DevicePacker interface {
	// FitTogether reports whether counts[k] members of each kind k fit the node's devices at once,
	// with the devices that evicting gone frees freed (the holders of the last Released).
	FitTogether(node fwk.NodeInfo, counts []int, gone []types.UID) bool
}

// ClaimingDevices is a DeviceSource that can count the devices of pods nominated to nodes (the room
// claimed against a gang, see New) as taken there: the DynamicResources plugin never sees a
// nominated pod, so without it their devices look free.
type ClaimingDevices interface {
	DeviceSource
	// Claiming returns a source whose checks count the devices the claimed pods claim as taken on
	// the nodes they are nominated to.
	Claiming(claimed []*v1.Pod) DeviceSource
}

// RefusingDevices is a DeviceSource whose model may count a node it could not ask in time as holding
// every member (a relaxation: the real filters decide), and can give that up: on the nodes where the
// real filter found no devices for some members in an earlier attempt, for those members' kinds (see
// Shared.WithRefused), or everywhere, for a preemption search (Shared.ForSearch).
type RefusingDevices interface {
	DeviceSource
	// Refusing returns a source whose checks count no member of the kind of the members refused on
	// each node of refused where the model cannot tell in time, nor, with all, of any kind on any node.
	Refusing(refused map[string][]types.UID, all bool) DeviceSource
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
// which node and how many members of each kind the node's devices hold once they are all gone; and,
// while the search puts victims back one by one, how many they hold once only some of the node's
// holders are gone (ReleasedBy, asked once per distinct set of holders gone). Devices are freed only
// when they truly are (never counted freed while their claim's holder stays), so the search's answer
// is exact in the model, a gang that lacks devices evicts nothing for CPU alone, and of several
// lower-priority holders on a node only as many are evicted as the gang needs, the least important
// first (as upstream's reprieve does).

// DeviceRelease is a DeviceCheck that models what evicting pods frees in devices.
type DeviceRelease interface {
	// Released returns, for each node where claims reserved only by the pods (the candidate
	// victims) hold devices, those claims' reservers and how many members of each kind (at most
	// need) the node's devices hold once those claims are deallocated. Nodes absent free nothing.
	Released(pods []*v1.Pod, nodes []fwk.NodeInfo, need int) map[string]NodeRelease
	// ReleasedBy returns, for a node of the last Released, how many members of each kind (at most
	// need) its devices hold once only the claims all of whose reservers are among holders (a subset
	// of the node's Holders) are deallocated; nil when that frees nothing the model can tell.
	ReleasedBy(node string, holders []types.UID, need int) []int
}

// NodeRelease is what a node's devices hold once the claims of its holders are deallocated.
type NodeRelease struct {
	// Holders are the pods whose claims hold the node's freed devices.
	Holders []types.UID
	// Copies is, per device kind, how many members the node's devices hold then.
	Copies []int
}

// deviceRelease is a search's freed devices, per node index of its Fit (nil: the node frees none).
type deviceRelease struct {
	rel   DeviceRelease
	need  int
	nodes []*releasedNode
}

// maxSubsetHolders bounds the holder units of one node whose subsets are asked about; past it, a
// node's devices count freed only with all of its holders evicted.
const maxSubsetHolders = 64

// releasedNode is one node's holder units and the devices they free.
type releasedNode struct {
	name string
	// units are the node's holder units, uids the pods of each that hold the node's devices; gone
	// marks those evicted now, count how many are.
	units []*gangUnit
	uids  [][]types.UID
	gone  []bool
	count int
	// base is the kinds' amounts with no holder evicted, full with all of them; subsets caches
	// ReleasedBy's answers by the mask of the units gone (nil: frees nothing).
	base, full []int64
	subsets    map[uint64][]int64
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
	r := &deviceRelease{rel: rel, need: f.need, nodes: make([]*releasedNode, len(f.free))}
	for name, nr := range byNode {
		n, ok := nodeIdx[name]
		if !ok || len(nr.Copies) != kinds {
			continue
		}
		rn := &releasedNode{name: name}
		known := true
		for _, uid := range nr.Holders {
			u := unitOf[uid]
			if u == nil {
				known = false
				break
			}
			i := slices.Index(rn.units, u)
			if i < 0 {
				i = len(rn.units)
				rn.units, rn.uids = append(rn.units, u), append(rn.uids, nil)
			}
			rn.uids[i] = append(rn.uids[i], uid)
		}
		if !known || len(rn.units) == 0 {
			// A holder that is no candidate: the node's devices are not freed.
			continue
		}
		rn.gone = make([]bool, len(rn.units))
		rn.base = slices.Clone(f.free[n].free.scalar[f.deviceIndex : f.deviceIndex+kinds])
		rn.full = make([]int64, kinds)
		for k, c := range nr.Copies {
			rn.full[k] = int64(c)
		}
		for _, u := range rn.units {
			u.devNodes = append(u.devNodes, n)
		}
		r.nodes[n] = rn
	}
	f.released = r
}

// step evicts (or puts back) holder unit u of node n: the node's devices hold what they hold with
// the claims of the node's evicted holders deallocated (see DeviceRelease), and never less than
// before. Past maxSubsetHolders holders, all of them or nothing.
func (r *deviceRelease) step(f *Fit, n int, u *gangUnit, evict bool) {
	rn := r.nodes[n]
	if rn == nil {
		return
	}
	i := slices.Index(rn.units, u)
	if i < 0 || rn.gone[i] == evict {
		return
	}
	rn.gone[i] = evict
	if evict {
		rn.count++
	} else {
		rn.count--
	}
	var freed []int64
	switch {
	case rn.count == 0:
	case rn.count == len(rn.units):
		freed = rn.full
	case len(rn.units) <= maxSubsetHolders:
		freed = r.subset(rn)
	}
	free := f.free[n].free.scalar[f.deviceIndex : f.deviceIndex+len(rn.base)]
	copy(free, rn.base)
	for k, c := range freed {
		free[k] = max(free[k], c)
	}
}

// goneOn are the pods a search evicts now whose claims hold the devices of node n.
func (r *deviceRelease) goneOn(n int) []types.UID {
	if r == nil || r.nodes[n] == nil {
		return nil
	}
	rn := r.nodes[n]
	var out []types.UID
	for i, gone := range rn.gone {
		if gone {
			out = append(out, rn.uids[i]...)
		}
	}
	return out
}

// jointDevices reports whether the check places members of several device kinds with the model's
// DevicePacker (see above).
func (f *Fit) jointDevices() bool {
	if f.devices == nil || f.devices.Kinds() < 2 || f.infos == nil {
		return false
	}
	_, ok := f.devices.(DevicePacker)
	return ok
}

// devicesFit reports whether member m fits the devices of node i beside the members counted there
// (counts, per kind): always without joint devices.
func (f *Fit) devicesFit(i int, counts []int, m gangMember) bool {
	if !f.joint {
		return true
	}
	k := f.devices.Kind(m.pod)
	if k < 0 {
		return true
	}
	c := make([]int, f.devices.Kinds())
	copy(c, counts)
	c[k]++
	return f.devices.(DevicePacker).FitTogether(f.infos[i], c, f.released.goneOn(i))
}

// subset is what the node's devices hold with only its evicted holders gone (asked once per set).
func (r *deviceRelease) subset(rn *releasedNode) []int64 {
	var mask uint64
	var uids []types.UID
	for i, gone := range rn.gone {
		if gone {
			mask |= 1 << i
			uids = append(uids, rn.uids[i]...)
		}
	}
	if got, ok := rn.subsets[mask]; ok {
		return got
	}
	var out []int64
	if copies := r.rel.ReleasedBy(rn.name, uids, r.need); len(copies) == len(rn.base) {
		out = make([]int64, len(copies))
		for k, c := range copies {
			out[k] = int64(c)
		}
	}
	if rn.subsets == nil {
		rn.subsets = map[uint64][]int64{}
	}
	rn.subsets[mask] = out
	return out
}
