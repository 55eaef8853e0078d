package gangfit

import (
	"fmt"
	"sort"
	"strings"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	corev1helpers "k8s.io/component-helpers/scheduling/corev1"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework"
)

// Reservation against starvation: a large gang that waited too long for room holds the room that
// frees on the nodes its missing members will use, so that pods of its priority or lower do not take
// it first. The hold is upstream's own: the members are nominated to those nodes, and the Filter
// plugins count nominated pods of at least a pod's priority as if they ran there, so a smaller pod
// still goes where it fits beside the held room (backfill), and a pod of higher priority ignores it.
// What is decided here: which capacity a reservation may count on, where the members go, and when a
// reservation starts, stays and ends.

// Stays reports whether a pod keeps its room however long a gang of priority prio waits: a pod of
// higher priority (neither kept off by the reservation nor preempted by the gang), a DaemonSet's pod
// or a static pod, which do not finish.
func Stays(pod *v1.Pod, prio int32) bool {
	if corev1helpers.PodPriority(pod) > prio {
		return true
	}
	if _, mirror := pod.Annotations[v1.MirrorPodAnnotationKey]; mirror {
		return true
	}
	for _, ref := range pod.OwnerReferences {
		if ref.Controller != nil && *ref.Controller && ref.Kind == "DaemonSet" {
			return true
		}
	}
	return false
}

// NewReservable prepares a check of placing `need` of the candidates on the room a reservation of
// priority prio may count on: each node's allocatable less what the pods that stay there (Stays) ask
// for, less the room nominated to others (claimed: other reservations and preemptors of at least
// prio). Pods that will leave (finish, or be kept off) are not counted. With devices (nil: none are
// counted), the members' DRA devices are counted as the whole-gang check counts them, the devices of
// the claims only leaving pods hold counting as free (see FreeingDevices). It reads every pod of every
// node, so it is for a reservation's start and its periodic check, not for every cycle.
func NewReservable(logger klog.Logger, groupKey string, candidates []*v1.Pod, need int, nodes []fwk.NodeInfo, claimed []*v1.Pod, prio int32, devices DeviceSource) *Fit {
	staying := make([]fwk.NodeInfo, 0, len(nodes))
	leaving := sets.New[types.UID]()
	for _, ni := range nodes {
		if ni.Node() == nil {
			continue
		}
		staying = append(staying, stayingView{NodeInfo: ni, prio: prio})
		if devices != nil {
			for _, pi := range ni.GetPods() {
				if p := pi.GetPod(); !Stays(p, prio) {
					leaving.Insert(p.UID)
				}
			}
		}
	}
	var shared *Shared
	if devices != nil {
		if f, ok := devices.(FreeingDevices); ok {
			devices = f.Freeing(leaving)
		}
		// Only for the device model: the staying room is not the scheduler's free capacity, and the
		// check is private (nothing is held once it is made).
		shared = &Shared{Devices: devices}
	}
	return New(logger, groupKey, candidates, need, staying, nil, claimed, shared, shared != nil)
}

// stayingView is a NodeInfo whose requested resources and pods are only those that stay (see Stays).
type stayingView struct {
	fwk.NodeInfo
	prio int32
}

func (s stayingView) pods() []fwk.PodInfo {
	var out []fwk.PodInfo
	for _, pi := range s.NodeInfo.GetPods() {
		if Stays(pi.GetPod(), s.prio) {
			out = append(out, pi)
		}
	}
	return out
}

func (s stayingView) GetPods() []fwk.PodInfo { return s.pods() }

func (s stayingView) GetRequested() fwk.Resource {
	var total v1.ResourceList
	for _, pi := range s.pods() {
		total = addLists(total, podRequestList(pi.GetPod()))
	}
	return framework.NewResource(total)
}

// Plan is where a reservation holds room: the gang's domain when it has a topology policy, and each
// missing member's node.
type ReservationPlan struct {
	// OK is false when the missing members do not fit the room that frees (Message says why).
	OK      bool
	Message string
	// Placement is the gang's domain (Level Anywhere without a policy).
	Placement Placement
	// Assignment is each missing member's node; Nodes the distinct nodes, sorted.
	Assignment []Nomination
	Nodes      []string
	// MilliCPU and Memory are what the members hold in all; Devices how many of them hold the DRA
	// devices their claims ask for (the model counts them).
	MilliCPU, Memory int64
	Devices          int
}

// PlanReservation places the gang's `need` missing members on f (see NewReservable): in the
// tightest domain of its policy that holds them all (see ChoosePlacement), first fit, largest first.
func PlanReservation(f *Fit, p Policy, pinned map[string]string) ReservationPlan {
	if f == nil {
		return ReservationPlan{Message: "no member is missing"}
	}
	pl := Placement{Level: LevelAnywhere, Message: "placed anywhere"}
	var idx []int
	if !p.Empty() {
		chosen, ok := ChoosePlacement(f, p, pinned, nil)
		if !ok {
			return ReservationPlan{Message: "the room that frees has no domain for it: " + chosen.Message}
		}
		pl = chosen
		idx = f.indexesIn(chosen.Nodes)
	}
	plan := ReservationPlan{Placement: pl}
	nodes := map[string]bool{}
	for mi, ni := range f.assign(idx) {
		if ni < 0 {
			continue
		}
		m := f.members[mi]
		name := f.free[ni].node.Name
		plan.Assignment = append(plan.Assignment, Nomination{Pod: m.pod, Node: name})
		plan.MilliCPU += m.req.milliCPU
		plan.Memory += m.req.memory
		if f.devices != nil && f.devices.Kind(m.pod) >= 0 {
			plan.Devices++
		}
		nodes[name] = true
	}
	if len(plan.Assignment) < f.need {
		return ReservationPlan{Message: fmt.Sprintf("%d more members do not fit even once the pods of its priority or lower are gone: the room that frees fits %d", f.need, len(plan.Assignment))}
	}
	for n := range nodes {
		plan.Nodes = append(plan.Nodes, n)
	}
	sort.Strings(plan.Nodes)
	plan.OK = true
	plan.Message = fmt.Sprintf("holds room for %d members on %d nodes (cpu %dm, memory %d", len(plan.Assignment), len(plan.Nodes), plan.MilliCPU, plan.Memory)
	if plan.Devices > 0 {
		plan.Message += fmt.Sprintf(", the devices of %d members", plan.Devices)
	}
	plan.Message += ")"
	if !p.Empty() {
		plan.Message += " " + strings.TrimPrefix(pl.Message, "placed ")
	}
	return plan
}

// JoinReservations is the plan of parts planned one after the other (each OK, see gang.JobPart),
// in the domain pl of their job (Level Anywhere: none).
func JoinReservations(parts []ReservationPlan, pl Placement) ReservationPlan {
	plan := ReservationPlan{OK: true, Placement: pl}
	nodes := sets.New[string]()
	for _, p := range parts {
		plan.Assignment = append(plan.Assignment, p.Assignment...)
		nodes.Insert(p.Nodes...)
		plan.MilliCPU += p.MilliCPU
		plan.Memory += p.Memory
		plan.Devices += p.Devices
	}
	plan.Nodes = sets.List(nodes)
	plan.Message = fmt.Sprintf("holds room for %d members on %d nodes (cpu %dm, memory %d", len(plan.Assignment), len(plan.Nodes), plan.MilliCPU, plan.Memory)
	if plan.Devices > 0 {
		plan.Message += fmt.Sprintf(", the devices of %d members", plan.Devices)
	}
	plan.Message += ")"
	if len(parts) > 1 {
		plan.Message += fmt.Sprintf(", each of its %d parts in one domain of its own", len(parts))
	}
	if pl.Level != LevelAnywhere && pl.Key != "" {
		plan.Message += fmt.Sprintf(", in %s=%s", pl.Key, pl.Value)
	}
	return plan
}

// Same reports whether two plans hold the same members on the same nodes, in whatever order.
func (p ReservationPlan) Same(o ReservationPlan) bool {
	if len(p.Assignment) != len(o.Assignment) {
		return false
	}
	node := make(map[types.UID]string, len(p.Assignment))
	for _, a := range p.Assignment {
		node[a.Pod.UID] = a.Node
	}
	for _, a := range o.Assignment {
		if n, ok := node[a.Pod.UID]; !ok || n != a.Node {
			return false
		}
	}
	return true
}

// addLists sums two resource lists.
func addLists(a, b v1.ResourceList) v1.ResourceList {
	if a == nil {
		a = v1.ResourceList{}
	}
	for name, q := range b {
		sum := a[name]
		sum.Add(q)
		a[name] = sum
	}
	return a
}
