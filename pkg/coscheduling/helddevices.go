package coscheduling

import (
	"sync"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/custom-scheduler/custom-scheduler/pkg/coscheduling/devices"
	"github.com/custom-scheduler/custom-scheduler/pkg/coscheduling/effects"
	"github.com/custom-scheduler/custom-scheduler/pkg/coscheduling/gang"
)

// The devices held for reservations and nominations (the rule: gang.HeldDevices). Who waits where is
// kept per priority and group, computed once per change of the reservations (heldVersion) or the
// nominations (claims.Version), not per pod; whether a pod's devices fit beside them is asked of the
// cycle's device read, outside the plugin's lock, and only for a pod that may claim devices while
// some are held. Pods kept off are brought back when a reservation ends or a nomination is dropped.

// maxKeptOff bounds the pods remembered for activation when a reservation ends (past it, the queue's
// own flush brings the rest back).
const maxKeptOff = 10000

// keptOffHeld returns the held nodes whose devices pod (of priority prio and group own, "" for none)
// would take, each with why (nil: none, or the pod claims no device, or nothing is held), over the
// cycle's device read src.
func (pl *Coscheduling) keptOffHeld(logger klog.Logger, pod *v1.Pod, prio int32, own string, src *devices.Source) map[string]string {
	if src == nil || (pl.reserved.Load() == 0 && pl.claims.Len() == 0) || !devices.MayClaim(pod) {
		return nil
	}
	h := pl.held.of(pl, heldKey{prio: prio, own: own}).Without(pod.UID)
	if h.Empty() {
		return nil
	}
	infos := pl.handle.SnapshotSharedLister().NodeInfos()
	off, err := src.KeptOff(logger, pod, h.Waiting, func(name string) fwk.NodeInfo {
		ni, err := infos.Get(name)
		if err != nil {
			return nil
		}
		return ni
	})
	if err != nil {
		logger.V(3).Info("Held devices not compared", "pod", klog.KObj(pod), "err", err)
		return nil
	}
	return h.KeptOffNodes(off)
}

// heldKey is what the held devices depend on besides the reservations and nominations: the pod's
// priority and group.
type heldKey struct {
	prio int32
	own  string
}

// heldCache keeps gang.HeldDevices per heldKey while the reservations and nominations do not change.
type heldCache struct {
	mu      sync.Mutex
	version [2]uint64
	by      map[heldKey]gang.HeldDevices
}

// of returns the held devices against pods of k's priority and group (see gang.HeldDevicesAgainst).
func (c *heldCache) of(pl *Coscheduling, k heldKey) gang.HeldDevices {
	version := [2]uint64{pl.heldVersion.Load(), pl.claims.Version()}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.version != version || c.by == nil {
		c.version, c.by = version, map[heldKey]gang.HeldDevices{}
	}
	if h, ok := c.by[k]; ok {
		return h
	}
	var held []gang.HeldRoom
	if pl.reserved.Load() > 0 {
		pl.mu.RLock()
		held = gang.HeldAgainst(pl.gangs, k.prio, k.own)
		pl.mu.RUnlock()
	}
	h := gang.HeldDevicesAgainst(held, pl.members.InGroup, pl.claims.Against(k.prio, k.own), devices.MayClaim)
	c.by[k] = h
	return h
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
