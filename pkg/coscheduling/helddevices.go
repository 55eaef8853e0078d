package coscheduling

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	corev1helpers "k8s.io/component-helpers/scheduling/corev1"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/custom-scheduler/custom-scheduler/pkg/coscheduling/devices"
	"github.com/custom-scheduler/custom-scheduler/pkg/coscheduling/effects"
	"github.com/custom-scheduler/custom-scheduler/pkg/coscheduling/gang"
	"github.com/custom-scheduler/custom-scheduler/pkg/coscheduling/podgroup"
)

// A reservation holds the devices its members wait for. Upstream's hold (nominated pods count as if
// they ran, for the Filter plugins of pods of their priority or lower) keeps other pods off a held
// node's CPU and memory, but not off its devices: the DynamicResources plugin never sees a nominated
// pod's claims. So, while a gang holds a reservation, PreFilter asks the device model, for a pod that
// may claim devices and that the reservation keeps off (of its priority or lower, not of the gang),
// on which held nodes its devices do not fit beside those the members nominated there wait for
// (devices.Source.KeptOff: one allocator, one Allocate per held node), and Filter keeps it off them.
// Backfill stays: a pod whose devices fit beside the held ones still goes there. Pods kept off are
// brought back when the reservation ends.
//
// The same holds for every pod nominated to a node, whoever nominated it (a gang's preemption, a
// reservation, upstream's preemption of a plain pod): upstream counts a nominated pod of the pod's
// priority or higher as if it ran on its node, for CPU and memory, and so do the devices here. A
// gang's preemption frees devices for its members; until they bind, a lone pod of their priority or
// lower is kept off those devices (and a second gang's whole-gang check counts them taken, see
// devices.Source.Claiming). All the pods held on a node are compared at once. Pods kept off are
// brought back when a nomination is dropped (the member bound, or the nomination cleared).

// heldDevicesKey marks, in a cycle, the held nodes whose devices the pod would take.
const heldDevicesKey fwk.StateKey = Name + "/heldDevices"

// maxKeptOff bounds the pods remembered for activation when a reservation ends (past it, the queue's
// own flush brings the rest back).
const maxKeptOff = 10000

// heldDevices are the nodes a pod is kept off, each with why. Never changed once written.
type heldDevices struct{ why map[string]string }

func (h *heldDevices) Clone() fwk.StateData { return h }

// keepOffHeldDevices writes, for a pod that may claim devices while some gang holds a reservation, or
// some pod is nominated to a node, that it must leave room for, the held nodes whose devices it would
// take; it reports whether there are any (Filter must then run).
func (pl *Coscheduling) keepOffHeldDevices(ctx context.Context, state fwk.CycleState, pod *v1.Pod) bool {
	if (pl.reserved.Load() == 0 && pl.claims.Len() == 0) || !devices.MayClaim(pod) {
		return false
	}
	src, ok := pl.fit.Devices.(*devices.Source)
	if !ok || src == nil {
		return false
	}
	var held []gang.HeldRoom
	if pl.reserved.Load() > 0 {
		pl.mu.RLock()
		held = gang.HeldAgainst(pl.gangs, pod)
		pl.mu.RUnlock()
	}
	own := ""
	if name, ok := podgroup.Of(pod); ok {
		own = podgroup.Key(pod.Namespace, name)
	}
	nominated := pl.claims.Against(corev1helpers.PodPriority(pod), own)
	if len(held) == 0 && len(nominated) == 0 {
		return false
	}
	logger := klog.FromContext(ctx)
	infos := pl.handle.SnapshotSharedLister().NodeInfos()
	node := func(name string) fwk.NodeInfo {
		ni, err := infos.Get(name)
		if err != nil {
			return nil
		}
		return ni
	}
	waiting, whose := heldPods(pod, held, pl.members.InGroup, nominated)
	if len(waiting) == 0 {
		return false
	}
	off, err := src.KeptOff(logger, pod, waiting, node)
	if err != nil {
		logger.V(3).Info("Held devices not compared", "pod", klog.KObj(pod), "err", err)
		return false
	}
	why := map[string]string{}
	for n := range off {
		why[n] = "devices on the node are held for " + whose[n]
	}
	if len(why) == 0 {
		return false
	}
	logger.V(4).Info("Pod kept off the devices held for reserved or nominated pods", "pod", klog.KObj(pod), "nodes", len(why))
	state.Write(heldDevicesKey, &heldDevices{why: why})
	pl.keptOff.add(pod)
	return true
}

// heldPods gathers, by node, the unbound pods whose devices pod must leave there: the members a
// reservation held against it nominated (members lists a gang's members), and the other nominated
// pods (nominated: those of its priority or higher, not of its gang); whose says, per node, for
// whom (the first reservation, else the nominated pods' groups or names). Pure.
func heldPods(pod *v1.Pod, held []gang.HeldRoom, members func(namespace, name string) []*v1.Pod, nominated []*v1.Pod) (map[string][]*v1.Pod, map[string]string) {
	waiting, whose := map[string][]*v1.Pod{}, map[string]string{}
	seen := sets.New[types.UID](pod.UID)
	for _, h := range held {
		for _, m := range members(h.Namespace, h.Name) {
			if node, ok := h.Node[m.UID]; ok && m.Spec.NodeName == "" && !seen.Has(m.UID) {
				seen.Insert(m.UID)
				waiting[node] = append(waiting[node], m)
				if _, ok := whose[node]; !ok {
					whose[node] = fmt.Sprintf("PodGroup %s/%s (a reservation since %s)", h.Namespace, h.Name, h.Since.UTC().Format(time.RFC3339))
				}
			}
		}
	}
	sort.Slice(nominated, func(i, j int) bool {
		return nominated[i].Namespace+"/"+nominated[i].Name < nominated[j].Namespace+"/"+nominated[j].Name
	})
	named := map[string][]string{}
	for _, p := range nominated {
		node := p.Status.NominatedNodeName
		if node == "" || p.Spec.NodeName != "" || seen.Has(p.UID) || !devices.MayClaim(p) {
			continue
		}
		seen.Insert(p.UID)
		waiting[node] = append(waiting[node], p)
		n := "pod " + p.Namespace + "/" + p.Name
		if g, ok := podgroup.Of(p); ok {
			n = "PodGroup " + podgroup.Key(p.Namespace, g)
		}
		if !slices.Contains(named[node], n) {
			named[node] = append(named[node], n)
		}
	}
	for node, ns := range named {
		if _, ok := whose[node]; !ok {
			whose[node] = strings.Join(ns, ", ") + " (nominated there)"
		}
	}
	return waiting, whose
}

// heldDevicesFilter rejects a node whose held devices the pod would take (see keepOffHeldDevices).
// Evicting pods there gives it no held device: unresolvable.
func heldDevicesFilter(state fwk.CycleState, node string) *fwk.Status {
	data, err := state.Read(heldDevicesKey)
	if err != nil {
		return nil
	}
	if why, ok := data.(*heldDevices).why[node]; ok {
		return fwk.NewStatus(fwk.UnschedulableAndUnresolvable, why)
	}
	return nil
}

// activateKeptOff brings back the pods kept off held devices (a reservation ended: the devices may be
// theirs now).
func (pl *Coscheduling) activateKeptOff(logger klog.Logger) {
	effects.Activate(logger, pl.handle, pl.keptOff.take()...)
}

// keptOffPods are the pods kept off held devices since the last reservation ended, at most maxKeptOff.
type keptOffPods struct {
	mu   sync.Mutex
	pods map[types.UID]*v1.Pod
}

func (k *keptOffPods) add(pod *v1.Pod) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.pods == nil {
		k.pods = map[types.UID]*v1.Pod{}
	}
	if len(k.pods) < maxKeptOff {
		k.pods[pod.UID] = pod
	}
}

// take returns the pods and forgets them.
func (k *keptOffPods) take() []*v1.Pod {
	k.mu.Lock()
	defer k.mu.Unlock()
	out := make([]*v1.Pod, 0, len(k.pods))
	for _, p := range k.pods {
		out = append(out, p)
	}
	k.pods = nil
	return out
}
