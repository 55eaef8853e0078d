// Package claims keeps the room nominated to pods not yet bound (preemptors, reservations), as the
// whole-gang checks must count it. Its own lock; no plugin state.
package claims

import (
	"slices"
	"sync"
	"sync/atomic"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	corev1helpers "k8s.io/component-helpers/scheduling/corev1"

	"github.com/custom-scheduler/custom-scheduler/pkg/coscheduling/podgroup"
)

// Claims follows, from the scheduler's pod informer, the pods nominated to a node and not bound yet
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
type Claims struct {
	n        atomic.Int64
	version  atomic.Uint64
	nAssumed atomic.Int64
	mu       sync.Mutex
	// pods are the nominated pods by UID.
	pods map[types.UID]*v1.Pod
	// assumed are the gang members reserved and not yet bound or unreserved.
	assumed map[types.UID]struct{}
	// byPrio is, per priority of the pods whose claims changed, the version of the last change (see
	// VersionAgainst).
	byPrio map[int32]uint64
	// Dropped, when set (before the handler runs), is called by the handler after a nomination is
	// dropped: the room, devices included, kept for it is free for others again.
	Dropped func()
}

// Len counts the nominations recorded (one atomic load).
func (c *Claims) Len() int { return int(c.n.Load()) }

// Set records pod's nomination, or forgets it when it has none (or is bound or not live, or assumed).
// It reports whether the claims changed.
func (c *Claims) Set(pod *v1.Pod) bool {
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
		if had && old.Status.NominatedNodeName == pod.Status.NominatedNodeName {
			return false
		}
		c.changedLocked(pod)
		return true
	case had:
		delete(c.pods, pod.UID)
		c.changedLocked(pod)
		return true
	}
	return false
}

// SetIfPresent records pod's nomination as Set does, for a copy listed earlier, unless current (the
// pod store's word, read after the claim is in place) no longer holds it live: a pod deleted since it
// was listed has had its Forget already, and a claim set after that would keep its room for ever.
// Race-free with the informer's handler: the claim is published (n) before the store is read, and the
// store is updated before any handler runs, so either the read sees the pod gone or the handler's
// Forget sees the claim (and waits for this call's lock). It reports whether the claim was kept.
func (c *Claims) SetIfPresent(pod *v1.Pod, current func(*v1.Pod) (*v1.Pod, bool)) bool {
	if pod.Status.NominatedNodeName == "" || pod.Spec.NodeName != "" || !podgroup.IsLive(pod) {
		c.Set(pod)
		return false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, assumed := c.assumed[pod.UID]; assumed {
		return false
	}
	if c.pods == nil {
		c.pods = map[types.UID]*v1.Pod{}
	}
	c.pods[pod.UID] = pod
	c.changedLocked(pod)
	if cur, ok := current(pod); ok && Present(pod, cur) {
		return true
	}
	delete(c.pods, pod.UID)
	c.changedLocked(pod)
	return false
}

// Present reports whether cur, the store's copy under pod's name, is pod still live and unbound (the
// nominator's own check before it records a nomination).
func Present(pod, cur *v1.Pod) bool {
	return cur != nil && cur.UID == pod.UID && cur.Spec.NodeName == "" && podgroup.IsLive(cur)
}

// Forget drops pod's claim (and its assumed mark); it reports whether it had a claim.
func (c *Claims) Forget(pod *v1.Pod) bool {
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
	c.changedLocked(pod)
	return true
}

// Has reports whether pod has a claim here (its nomination, as the informer showed it or as this
// plugin recorded it before its status patch).
func (c *Claims) Has(uid types.UID) bool {
	if c.n.Load() == 0 {
		return false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	_, ok := c.pods[uid]
	return ok
}

// Assume marks a reserved gang member as assumed on its node and drops its claim, if it had one (it
// reports that).
func (c *Claims) Assume(pod *v1.Pod) bool {
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
	c.changedLocked(pod)
	return true
}

// Unassume undoes assume when the member is unreserved (the scheduler forgets it on its node).
func (c *Claims) Unassume(uid types.UID) {
	if c.nAssumed.Load() == 0 {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.unassumeLocked(uid)
}

func (c *Claims) unassumeLocked(uid types.UID) {
	if _, ok := c.assumed[uid]; ok {
		delete(c.assumed, uid)
		c.nAssumed.Store(int64(len(c.assumed)))
	}
}

// Any reports whether some pod is nominated (Against lists none otherwise). O(1).
func (c *Claims) Any() bool { return c.n.Load() > 0 }

// Against lists the nominated pods that hold room against a gang of priority prio: those of at least
// that priority, not of the gang itself (group key own) nor of the other groups of its job (also, for
// a group in a job of several roles: their members are placed with its own).
func (c *Claims) Against(prio int32, own string, also ...string) []*v1.Pod {
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
		if name, ok := podgroup.Of(p); ok {
			if k := podgroup.Key(p.Namespace, name); k == own || slices.Contains(also, k) {
				continue
			}
		}
		out = append(out, p)
	}
	return out
}

// changedLocked publishes the count after pod's claim changed, and moves the versions.
func (c *Claims) changedLocked(pod *v1.Pod) {
	c.n.Store(int64(len(c.pods)))
	v := c.version.Add(1)
	if c.byPrio == nil {
		c.byPrio = map[int32]uint64{}
	}
	c.byPrio[corev1helpers.PodPriority(pod)] = v
}

// Version moves whenever a claim is made, moved or dropped: an answer that read no claim since it was
// taken at this version still holds for the claims.
func (c *Claims) Version() uint64 { return c.version.Load() }

// VersionAgainst moves whenever a claim that holds room against a gang of priority prio (see Against)
// is made, moved or dropped: a claim of a pod of lower priority never does. A check cached under it
// stays good through the nominations it never counted. O(priorities seen).
func (c *Claims) VersionAgainst(prio int32) uint64 {
	if c.version.Load() == 0 {
		return 0
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	var v uint64
	for p, pv := range c.byPrio {
		if p >= prio {
			v = max(v, pv)
		}
	}
	return v
}

// Assumed counts the members marked assumed (for tests).
func (c *Claims) Assumed() int64 { return c.nAssumed.Load() }
