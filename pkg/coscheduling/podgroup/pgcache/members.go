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
// agree with the store to the pod (a quorum) reads the store instead. Safe for concurrent use.
type Members struct {
	profile string

	mu sync.RWMutex
	// of is the group key ("namespace/name") of each pod while it is a member; n the count per key.
	of map[types.UID]string
	n  map[string]int
}

// NewMembers returns an empty count for the pods of scheduler profile.
func NewMembers(profile string) *Members {
	return &Members{profile: profile, of: map[types.UID]string{}, n: map[string]int{}}
}

// Track counts pod in its group while it is a member of this profile's, and uncounts it when it stops
// being one (it finished, is being deleted, was gated, changed scheduler or group). Idempotent.
func (m *Members) Track(pod *v1.Pod) {
	key := ""
	if name, ok := podgroup.Of(pod); ok && podgroup.IsMember(pod) && pod.Spec.SchedulerName == m.profile {
		key = podgroup.Key(pod.Namespace, name)
	}
	m.mu.Lock()
	m.moveLocked(pod.UID, key)
	m.mu.Unlock()
}

// Forget uncounts a deleted pod.
func (m *Members) Forget(pod *v1.Pod) {
	m.mu.Lock()
	m.moveLocked(pod.UID, "")
	m.mu.Unlock()
}

func (m *Members) moveLocked(uid types.UID, key string) {
	prev, had := m.of[uid]
	if had && prev == key {
		return
	}
	if had {
		if m.n[prev]--; m.n[prev] <= 0 {
			delete(m.n, prev)
		}
		delete(m.of, uid)
	}
	if key != "" {
		m.of[uid] = key
		m.n[key]++
	}
}

// Count is the number of members of group namespace/name. O(1).
func (m *Members) Count(namespace, name string) int {
	m.mu.RLock()
	defer m.mu.RUnlock()
	return m.n[podgroup.Key(namespace, name)]
}

// Len is the number of pods counted in any group (for tests that check the count is freed).
func (m *Members) Len() int {
	m.mu.RLock()
	defer m.mu.RUnlock()
	return len(m.of)
}
