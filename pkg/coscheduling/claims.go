package coscheduling

import (
	"sync"
	"sync/atomic"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"
	corev1helpers "k8s.io/component-helpers/scheduling/corev1"
	podutil "k8s.io/kubernetes/pkg/api/v1/pod"

	"github.com/custom-scheduler/custom-scheduler/pkg/coscheduling/podgroup"
)

// claims follows, from the scheduler's pod informer, the pods nominated to a node and not bound yet
// (status.nominatedNodeName: the room preemption made for them). The Filter plugins count those of
// at least a pod's priority as if they ran there; the whole-gang check does the same, so that a gang
// does not start an attempt on room kept for another (which its members' Filters would then refuse,
// failing the attempt over and over instead of letting the gang preempt). Usually empty: the check
// pays one atomic load.
//
// A gang member reserved on a node is assumed there by the scheduler's cache, so the snapshot already
// counts it; while it waits at Permit and binds, the scheduler also sets its nominatedNodeName (the
// NominatedNodeNameForExpectation feature). Such a member claims nothing more (as the scheduler's own
// nominator ignores assumed pods): it is held in assumed from Reserve until it is bound, unreserved or
// gone, and its nomination is not recorded, nor does it make cached checks stale.
type claims struct {
	n        atomic.Int64
	nAssumed atomic.Int64
	mu       sync.Mutex
	// pods are the nominated pods by UID.
	pods map[types.UID]*v1.Pod
	// assumed are the gang members reserved and not yet bound or unreserved.
	assumed map[types.UID]struct{}
}

// set records pod's nomination, or forgets it when it has none (or is bound or not live, or assumed).
// It reports whether the claims changed.
func (c *claims) set(pod *v1.Pod) bool {
	want := pod.Status.NominatedNodeName != "" && pod.Spec.NodeName == "" && podgroup.IsLive(pod)
	if !want && c.n.Load() == 0 && c.nAssumed.Load() == 0 {
		return false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, assumed := c.assumed[pod.UID]; assumed {
		if want {
			// Nominated by the scheduler while it waits at Permit or binds: counted on its node.
			want = false
		} else if pod.Spec.NodeName != "" || !podgroup.IsLive(pod) {
			c.unassumeLocked(pod.UID)
		}
	}
	old, had := c.pods[pod.UID]
	switch {
	case want:
		if c.pods == nil {
			c.pods = map[types.UID]*v1.Pod{}
		}
		c.pods[pod.UID] = pod
		c.n.Store(int64(len(c.pods)))
		return !had || old.Status.NominatedNodeName != pod.Status.NominatedNodeName
	case had:
		delete(c.pods, pod.UID)
		c.n.Store(int64(len(c.pods)))
		return true
	}
	return false
}

// forget drops pod's claim (and its assumed mark); it reports whether it had a claim.
func (c *claims) forget(pod *v1.Pod) bool {
	if c.n.Load() == 0 && c.nAssumed.Load() == 0 {
		return false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.unassumeLocked(pod.UID)
	if _, had := c.pods[pod.UID]; !had {
		return false
	}
	delete(c.pods, pod.UID)
	c.n.Store(int64(len(c.pods)))
	return true
}

// has reports whether pod has a claim here (its nomination, as the informer showed it or as this
// plugin recorded it before its status patch).
func (c *claims) has(uid types.UID) bool {
	if c.n.Load() == 0 {
		return false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	_, ok := c.pods[uid]
	return ok
}

// assume marks a reserved gang member as assumed on its node and drops its claim, if it had one (it
// reports that).
func (c *claims) assume(pod *v1.Pod) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.assumed == nil {
		c.assumed = map[types.UID]struct{}{}
	}
	c.assumed[pod.UID] = struct{}{}
	c.nAssumed.Store(int64(len(c.assumed)))
	if _, had := c.pods[pod.UID]; !had {
		return false
	}
	delete(c.pods, pod.UID)
	c.n.Store(int64(len(c.pods)))
	return true
}

// unassume undoes assume when the member is unreserved (the scheduler forgets it on its node).
func (c *claims) unassume(uid types.UID) {
	if c.nAssumed.Load() == 0 {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.unassumeLocked(uid)
}

func (c *claims) unassumeLocked(uid types.UID) {
	if _, ok := c.assumed[uid]; ok {
		delete(c.assumed, uid)
		c.nAssumed.Store(int64(len(c.assumed)))
	}
}

// against lists the nominated pods that hold room against a gang of priority prio: those of at least
// that priority, not of the gang itself (group key own).
func (c *claims) against(prio int32, own string) []*v1.Pod {
	if c.n.Load() == 0 {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []*v1.Pod
	for _, p := range c.pods {
		if corev1helpers.PodPriority(p) < prio {
			continue
		}
		if name, ok := podgroup.Of(p); ok && podgroup.Key(p.Namespace, name) == own {
			continue
		}
		out = append(out, p)
	}
	return out
}

// capacityEventHandler watches every pod of the scheduler's informer (not only gang members) for
// what changes the whole-gang check's answer: an assigned pod deleted or finished frees room, and a
// nomination made or dropped moves room kept for a preemptor. Either makes cached checks stale (the
// epoch), whichever queue the gang's members are in when it happens.
func (pl *Coscheduling) capacityEventHandler() cache.ResourceEventHandler {
	return cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj interface{}) {
			if pod, ok := obj.(*v1.Pod); ok && pl.claims.set(pod) {
				pl.epoch.Add(1)
			}
		},
		UpdateFunc: func(oldObj, newObj interface{}) {
			old, ok1 := oldObj.(*v1.Pod)
			pod, ok2 := newObj.(*v1.Pod)
			if !ok1 || !ok2 {
				return
			}
			changed := pl.claims.set(pod)
			if pod.Spec.NodeName != "" && finished(pod) && !finished(old) {
				changed = true
			}
			if changed {
				pl.epoch.Add(1)
			}
		},
		DeleteFunc: func(obj interface{}) {
			if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = tomb.Obj
			}
			pod, ok := obj.(*v1.Pod)
			if !ok {
				return
			}
			// Any pod's request may have been cached (a nominated plain pod's, for the claims).
			pl.fit.Forget(pod.UID)
			if pl.claims.forget(pod) || pod.Spec.NodeName != "" {
				pl.epoch.Add(1)
			}
		},
	}
}

func finished(pod *v1.Pod) bool {
	return podutil.IsPodTerminal(pod)
}
