package pgcache

import (
	"sync"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/custom-scheduler/custom-scheduler/pkg/coscheduling/podgroup"
)

// Members counts each group's members (live, ungated pods, as podgroup.LiveIndexFunc indexes them) of
// one scheduler profile, so that a count is a map read: counting the index's entries copies the
// group's pointers, and a group's activation counts once per member (a 1000-member group copied a
// million pointers to be let in). The pod informer's handler keeps it (Track on every add and update,
// Forget on a delete), so it trails the informer's store by that handler's delay; a decision that must
// agree with the store to the pod (a quorum) reads the store instead. It also counts, per group, the
// members whose ResourceClaims from templates are not made yet (Unmade decides), and, per group and
// run, the members bound (BoundInRun: whether the run is in progress, for the finished-member rule).
// Safe for concurrent use.
type Members struct {
	profile string
	// Unmade reports whether a pod's claims from templates are still to be made (nil: never). Set
	// before the first Track.
	Unmade func(*v1.Pod) bool

	mu sync.RWMutex
	// of is each member's group key ("namespace/name"), whether its claims are unmade and, for a
	// bound member, its run key (see runKey); n the count of members per key, unmade the count of
	// those with unmade claims, bound the count of bound members per run key.
	of     map[types.UID]membership
	n      map[string]int
	unmade map[string]int
	bound  map[string]int
}

type membership struct {
	key    string
	unmade bool
	// boundIn is the run key of a member bound to a node; "" while it is not bound.
	boundIn string
}

// runKey keys a group's run: "namespace/name|run".
func runKey(key string, run types.UID) string { return key + "|" + string(run) }

// NewMembers returns an empty count for the pods of scheduler profile.
func NewMembers(profile string) *Members {
	return &Members{profile: profile, of: map[types.UID]membership{}, n: map[string]int{}, unmade: map[string]int{}, bound: map[string]int{}}
}

// Track counts pod in its group while it is a member of this profile's, and uncounts it when it stops
// being one (it finished, is being deleted, was gated, changed scheduler or group). It reports whether
// this call made the pod a member with its claims made that was not one before (a new member, or its
// last claim made), which is when the group's Ready count grew. Idempotent.
func (m *Members) Track(pod *v1.Pod) (ready bool) {
	var now membership
	if name, ok := podgroup.Of(pod); ok && podgroup.IsMember(pod) && pod.Spec.SchedulerName == m.profile {
		now = membership{key: podgroup.Key(pod.Namespace, name), unmade: m.Unmade != nil && m.Unmade(pod)}
		if pod.Spec.NodeName != "" {
			now.boundIn = runKey(now.key, podgroup.Run(pod))
		}
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.moveLocked(pod.UID, now)
}

// Forget uncounts a deleted pod.
func (m *Members) Forget(pod *v1.Pod) {
	m.mu.Lock()
	m.moveLocked(pod.UID, membership{})
	m.mu.Unlock()
}

func (m *Members) moveLocked(uid types.UID, now membership) (ready bool) {
	prev, had := m.of[uid]
	if had && prev == now {
		return false
	}
	if had {
		if m.n[prev.key]--; m.n[prev.key] <= 0 {
			delete(m.n, prev.key)
		}
		if prev.unmade {
			if m.unmade[prev.key]--; m.unmade[prev.key] <= 0 {
				delete(m.unmade, prev.key)
			}
		}
		if prev.boundIn != "" {
			if m.bound[prev.boundIn]--; m.bound[prev.boundIn] <= 0 {
				delete(m.bound, prev.boundIn)
			}
		}
		delete(m.of, uid)
	}
	if now.key == "" {
		return false
	}
	m.of[uid] = now
	m.n[now.key]++
	if now.boundIn != "" {
		m.bound[now.boundIn]++
	}
	if now.unmade {
		m.unmade[now.key]++
		return false
	}
	return !had || prev.key != now.key || prev.unmade
}

// Count is the number of members of group namespace/name. O(1).
func (m *Members) Count(namespace, name string) int {
	m.mu.RLock()
	defer m.mu.RUnlock()
	return m.n[podgroup.Key(namespace, name)]
}

// Ready is the number of members of group namespace/name whose claims from templates are all made.
// O(1).
func (m *Members) Ready(namespace, name string) int {
	key := podgroup.Key(namespace, name)
	m.mu.RLock()
	defer m.mu.RUnlock()
	return m.n[key] - m.unmade[key]
}

// BoundInRun is the number of members of group namespace/name and run (see podgroup.Run) bound to a
// node: while it is above 0 the run is in progress, and its succeeded members count toward its quorum
// (see podgroup.RunInProgress). O(1).
func (m *Members) BoundInRun(namespace, name string, run types.UID) int {
	m.mu.RLock()
	defer m.mu.RUnlock()
	return m.bound[runKey(podgroup.Key(namespace, name), run)]
}

// Len is the number of pods counted in any group (for tests that check the count is freed).
func (m *Members) Len() int {
	m.mu.RLock()
	defer m.mu.RUnlock()
	return len(m.of)
}
