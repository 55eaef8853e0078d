package pgcache

import (
	"sync"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/custom-scheduler/custom-scheduler/pkg/coscheduling/podgroup"
)

// Finished counts, per group and run, the members of one scheduler profile that left by succeeding
// (podgroup.SucceededMember): what the finished-member rule adds to a member's quorum count. It is
// fed from an informer of finished pods (the status writer's): Track on every add and update, Forget
// on a delete. Count is O(1). Safe for concurrent use.
type Finished struct {
	profile string

	mu sync.RWMutex
	// of is each counted pod's key ("namespace/name|run"); n the count per key.
	of map[types.UID]string
	n  map[string]int
}

// NewFinished returns an empty count for the pods of scheduler profile.
func NewFinished(profile string) *Finished {
	return &Finished{profile: profile, of: map[types.UID]string{}, n: map[string]int{}}
}

func finishedKey(namespace, name string, run types.UID) string {
	return podgroup.Key(namespace, name) + "|" + string(run)
}

// Track counts pod while it is a succeeded member of this profile's, and uncounts it when it stops
// being one (it is being deleted). It returns the pod's group and run and whether the count of that
// group's run grew. Idempotent.
func (f *Finished) Track(pod *v1.Pod) (group string, run types.UID, grew bool) {
	key := ""
	if name, ok := podgroup.Of(pod); ok {
		if r, ok := podgroup.SucceededMember(pod, f.profile); ok {
			group, run, key = name, r, finishedKey(pod.Namespace, name, r)
		}
	}
	f.mu.Lock()
	grew = f.moveLocked(pod.UID, key)
	f.mu.Unlock()
	return group, run, grew
}

// Forget uncounts a deleted pod.
func (f *Finished) Forget(pod *v1.Pod) {
	f.mu.Lock()
	f.moveLocked(pod.UID, "")
	f.mu.Unlock()
}

func (f *Finished) moveLocked(uid types.UID, key string) bool {
	prev, had := f.of[uid]
	if had && prev == key {
		return false
	}
	if had {
		if f.n[prev]--; f.n[prev] <= 0 {
			delete(f.n, prev)
		}
		delete(f.of, uid)
	}
	if key == "" {
		return false
	}
	f.of[uid] = key
	f.n[key]++
	return true
}

// Count is the number of succeeded members of group namespace/name in run. O(1). A nil Finished
// counts none.
func (f *Finished) Count(namespace, name string, run types.UID) int {
	if f == nil {
		return 0
	}
	f.mu.RLock()
	defer f.mu.RUnlock()
	return f.n[finishedKey(namespace, name, run)]
}

// Credit is the finished-member rule's part of a quorum count for group namespace/name and run: its
// succeeded members (Count), while the run is in progress (one of its live members is bound, as live
// counts them: podgroup.RunInProgress); none once the run has ended. O(1).
func (f *Finished) Credit(live *Members, namespace, name string, run types.UID) int {
	if !podgroup.RunInProgress(live.BoundInRun(namespace, name, run)) {
		return 0
	}
	return f.Count(namespace, name, run)
}

// Has reports whether pod uid is counted as succeeded (the finished pods' informer can run ahead of
// the scheduler's, which may still hold the pod live for a moment: it must not count twice).
func (f *Finished) Has(uid types.UID) bool {
	if f == nil {
		return false
	}
	f.mu.RLock()
	defer f.mu.RUnlock()
	_, ok := f.of[uid]
	return ok
}

// Len is the number of pods counted (for tests that check the count is freed).
func (f *Finished) Len() int {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return len(f.of)
}
