package gangpreemption

import (
	"context"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/klog/v2"
	"k8s.io/kubernetes/pkg/scheduler/framework/preemption"

	"github.com/custom-scheduler/custom-scheduler/pkg/coscheduling/podgroup"
)

// EvictedMemory is how long an evicted pod is remembered: longer than any scheduling cycle's snapshot
// can still show it after its delete (it is a UID that never comes back).
const EvictedMemory = time.Minute

// Evicted remembers the pods the plugin evicted, each from the moment its eviction succeeded.
type Evicted struct{ at sync.Map } // types.UID → time.Time

// Remember records a victim whose eviction succeeded at at.
func (e *Evicted) Remember(uid types.UID, at time.Time) { e.at.Store(uid, at) }

// Has reports whether the pod is remembered as evicted.
func (e *Evicted) Has(uid types.UID) bool {
	_, ok := e.at.Load(uid)
	return ok
}

// UIDs are the pods evicted within EvictedMemory before now.
func (e *Evicted) UIDs(now time.Time) sets.Set[types.UID] {
	out := sets.New[types.UID]()
	e.at.Range(func(uid, at any) bool {
		if now.Sub(at.(time.Time)) <= EvictedMemory {
			out.Insert(uid.(types.UID))
		}
		return true
	})
	return out
}

// ForgetOld forgets the victims evicted more than EvictedMemory before now.
func (e *Evicted) ForgetOld(now time.Time) {
	e.at.Range(func(uid, at any) bool {
		if now.Sub(at.(time.Time)) > EvictedMemory {
			e.at.Delete(uid)
		}
		return true
	})
}

// Leaving reports whether a pod is on its way out for an earlier preemption: terminating with the
// scheduler's DisruptionTarget condition, or evicted within EvictedMemory (a victim with no grace
// period is deleted at once, and a snapshot taken before the cache learned it still shows it). Its
// room is claimed by that preemptor's nominations, so counting the pod as well would count the room
// twice, and more pods would be evicted than needed.
func (e *Evicted) Leaving(p *v1.Pod) bool {
	return preemption.PodTerminatingByPreemption(p) || e.Has(p.UID)
}

// EvictionRetry bounds the retries of a failed eviction of a gang member whose siblings are leaving.
var EvictionRetry = wait.Backoff{Duration: 100 * time.Millisecond, Factor: 2, Jitter: 0.2, Cap: 5 * time.Second, Steps: 40}

// Follow is what RetryEviction asks of the plugin: whether a victim is gone (deleted, terminating, or
// another pod under its name) or leaving (see Evicted.Leaving), and what to do at each retry and once
// an eviction succeeded.
type Follow struct {
	Gone, Leaving func(*v1.Pod) bool
	Retried       func()
	Evicted       func(*v1.Pod)
}

// RetryEviction follows a gang member whose eviction failed (an API error): a victim gang is evicted
// whole, so while any other member of its gang in the same preemption is leaving, the eviction is
// retried in the background (until bg ends) until it succeeds or the pod is gone. A gang none of
// whose members was evicted is left alone (nothing of it is partial).
func (gp *Preemption) RetryEviction(ctx, bg context.Context, c preemption.Candidate, p preemption.ExecutorPreemptor, victim *v1.Pod, f Follow) {
	name, ok := podgroup.UnitOf(victim)
	if !ok {
		return
	}
	var siblings []*v1.Pod
	for _, v := range c.Victims().Pods {
		if n, ok := podgroup.UnitOf(v); ok && n == name && v.Namespace == victim.Namespace && v.UID != victim.UID {
			siblings = append(siblings, v)
		}
	}
	if len(siblings) == 0 {
		return
	}
	logger := klog.FromContext(ctx)
	go func() {
		// The preemption's other evictions run in parallel with this one: give them a moment.
		idle := 0
		_ = wait.ExponentialBackoffWithContext(bg, EvictionRetry, func(ctx context.Context) (bool, error) {
			if f.Gone(victim) {
				return true, nil
			}
			leaving := false
			for _, s := range siblings {
				if f.Leaving(s) || f.Gone(s) {
					leaving = true
					break
				}
			}
			if !leaving {
				idle++
				return idle > 3, nil
			}
			f.Retried()
			if _, err := gp.EvictOnce(ctx, c, p, victim, gp.plugin); err != nil {
				logger.V(2).Info("Retrying the eviction of a member of a gang being preempted", "pod", klog.KObj(victim), "err", err)
				return false, nil
			}
			f.Evicted(victim)
			logger.V(2).Info("Evicted a member of a gang being preempted after a failed attempt", "pod", klog.KObj(victim))
			return true, nil
		})
	}()
}
