package gang

import (
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/custom-scheduler/custom-scheduler/pkg/coscheduling/podgroup"
)

// Held devices: a rule of the reservation, and of every nomination. Upstream's hold (nominated pods
// count as if they ran, for the Filter plugins of pods of their priority or lower) keeps other pods
// off a held node's CPU and memory, but not off its devices: the DynamicResources plugin never sees a
// nominated pod's claims. So a pod that may claim devices is kept off the held nodes where its
// devices do not fit beside those the pods held there wait for: the members a reservation of its
// priority or more (not its own gang's) nominated there, and the other pods nominated there of its
// priority or more (a gang's preemption, upstream's preemption of a plain pod). Backfill stays: a pod
// whose devices fit beside the held ones still goes there. HeldDevices is who waits where; it depends
// on the reservations and nominations only, not on the pod, and is computed once per change of them
// (the plugin keeps it per priority and group). Whether the pod's devices fit beside them is the
// device model's question (devices.Source.KeptOff), asked outside the plugin's lock, and its answer
// comes into the pod's PreFilter step as PreFilterIn.KeptOff.

// HeldDevices are, by node, the unbound pods whose devices another pod must leave there, and, per
// node, for whom (the first reservation, else the nominated pods' groups or names). Read only.
type HeldDevices struct {
	Waiting map[string][]*v1.Pod
	Whose   map[string]string
}

// Empty reports whether no pod waits for devices anywhere.
func (h HeldDevices) Empty() bool { return len(h.Waiting) == 0 }

// Without is h less the pod itself (a pod never leaves room for itself).
func (h HeldDevices) Without(uid types.UID) HeldDevices {
	for node, pods := range h.Waiting {
		if slices.ContainsFunc(pods, func(p *v1.Pod) bool { return p.UID == uid }) {
			waiting := make(map[string][]*v1.Pod, len(h.Waiting))
			for n, ps := range h.Waiting {
				waiting[n] = ps
			}
			waiting[node] = slices.DeleteFunc(slices.Clone(pods), func(p *v1.Pod) bool { return p.UID == uid })
			if len(waiting[node]) == 0 {
				delete(waiting, node)
			}
			return HeldDevices{Waiting: waiting, Whose: h.Whose}
		}
	}
	return h
}

// HeldDevicesAgainst gathers the held devices a pod must leave: the unbound members that the
// reservations held against it (HeldAgainst) nominated, by node (members lists a gang's members),
// and the other nominated pods that may claim devices (nominated: those of its priority or more, not
// of its gang). Pure.
func HeldDevicesAgainst(held []HeldRoom, members func(namespace, name string) []*v1.Pod, nominated []*v1.Pod, mayClaim func(*v1.Pod) bool) HeldDevices {
	h := HeldDevices{Waiting: map[string][]*v1.Pod{}, Whose: map[string]string{}}
	seen := sets.New[types.UID]()
	for _, r := range held {
		for _, m := range members(r.Namespace, r.Name) {
			if node, ok := r.Node[m.UID]; ok && m.Spec.NodeName == "" && !seen.Has(m.UID) {
				seen.Insert(m.UID)
				h.Waiting[node] = append(h.Waiting[node], m)
				if _, ok := h.Whose[node]; !ok {
					h.Whose[node] = fmt.Sprintf("PodGroup %s/%s (a reservation since %s)", r.Namespace, r.Name, r.Since.UTC().Format(time.RFC3339))
				}
			}
		}
	}
	nominated = slices.Clone(nominated)
	sort.Slice(nominated, func(i, j int) bool {
		return nominated[i].Namespace+"/"+nominated[i].Name < nominated[j].Namespace+"/"+nominated[j].Name
	})
	named := map[string][]string{}
	for _, p := range nominated {
		node := p.Status.NominatedNodeName
		if node == "" || p.Spec.NodeName != "" || seen.Has(p.UID) || !mayClaim(p) {
			continue
		}
		seen.Insert(p.UID)
		h.Waiting[node] = append(h.Waiting[node], p)
		n := "pod " + p.Namespace + "/" + p.Name
		if g, ok := podgroup.Of(p); ok {
			n = "PodGroup " + podgroup.Key(p.Namespace, g)
		}
		if !slices.Contains(named[node], n) {
			named[node] = append(named[node], n)
		}
	}
	for node, ns := range named {
		if _, ok := h.Whose[node]; !ok {
			h.Whose[node] = strings.Join(ns, ", ") + " (nominated there)"
		}
	}
	return h
}

// KeptOffNodes says why the pod is kept off each node of off (the nodes where its devices do not fit
// beside the held ones).
func (h HeldDevices) KeptOffNodes(off sets.Set[string]) map[string]string {
	if off.Len() == 0 {
		return nil
	}
	why := make(map[string]string, off.Len())
	for n := range off {
		why[n] = "devices on the node are held for " + h.Whose[n]
	}
	return why
}

// DeviceFit says on which held nodes a pod's devices do not fit beside those the pods held there
// wait for (devices.Source.KeptOff, over the cycle's device read; node looks up a node of the
// cycle's snapshot, nil when there is none).
type DeviceFit interface {
	KeptOff(logger klog.Logger, pod *v1.Pod, held map[string][]*v1.Pod, node func(name string) fwk.NodeInfo) (sets.Set[string], error)
}

// KeptOff returns the held nodes whose devices pod would take, each with why (nil: none), as fit
// answers over the nodes of infos; the pod's own hold is left out (Without). A failed comparison
// keeps the pod off nothing.
func (h HeldDevices) KeptOff(logger klog.Logger, pod *v1.Pod, fit DeviceFit, infos fwk.NodeInfoLister) map[string]string {
	h = h.Without(pod.UID)
	if h.Empty() {
		return nil
	}
	off, err := fit.KeptOff(logger, pod, h.Waiting, func(name string) fwk.NodeInfo {
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

// HeldCache keeps HeldDevices per priority and group while the reservations and nominations do not
// change (their versions). Safe for concurrent use.
type HeldCache struct {
	mu      sync.Mutex
	version [2]uint64
	by      map[heldKey]HeldDevices
}

type heldKey struct {
	prio int32
	own  string
}

// Of returns the held devices against pods of priority prio and group own at version, computing them
// with compute once per version, priority and group.
func (c *HeldCache) Of(version [2]uint64, prio int32, own string, compute func() HeldDevices) HeldDevices {
	k := heldKey{prio: prio, own: own}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.version != version || c.by == nil {
		c.version, c.by = version, map[heldKey]HeldDevices{}
	}
	if h, ok := c.by[k]; ok {
		return h
	}
	h := compute()
	c.by[k] = h
	return h
}
