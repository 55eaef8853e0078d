package loadaware

import (
	"sync"
	"sync/atomic"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
)

// maxRejectedPods bounds the pods remembered for requeueing; beyond it, rejected pods wait for the
// scheduler's own periodic flush of unschedulable pods (podMaxInUnschedulablePodsDuration).
const maxRejectedPods = 10000

// rejectedPods remembers pods the Filter rejected, with their estimates. Node load is not a cluster
// event, so no informer wakes these pods up when a node cools down: the refresher does, through the
// framework's Activate, for the pods whose estimate fits under the thresholds of a node that cooled.
type rejectedPods struct {
	mu   sync.Mutex
	pods map[types.UID]rejectedPod
	// n mirrors len(pods), so pod events skip the lock when nothing is remembered.
	n atomic.Int64
}

type rejectedPod struct {
	pod      *v1.Pod
	estimate usage
}

func newRejectedPods() *rejectedPods {
	return &rejectedPods{pods: map[types.UID]rejectedPod{}}
}

func (r *rejectedPods) add(pod *v1.Pod, estimate usage) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.pods) >= maxRejectedPods {
		return
	}
	r.pods[pod.UID] = rejectedPod{pod: pod, estimate: estimate}
	r.n.Store(int64(len(r.pods)))
}

func (r *rejectedPods) remove(uid types.UID) {
	if r.n.Load() == 0 {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.pods, uid)
	r.n.Store(int64(len(r.pods)))
}

// takeFitting removes and returns the pods whose estimate fits on some node, per fits.
func (r *rejectedPods) takeFitting(fits func(usage) bool) map[string]*v1.Pod {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.pods) == 0 {
		return nil
	}
	var out map[string]*v1.Pod
	decided := map[usage]bool{}
	for uid, rp := range r.pods {
		ok, seen := decided[rp.estimate]
		if !seen {
			ok = fits(rp.estimate)
			decided[rp.estimate] = ok
		}
		if !ok {
			continue
		}
		if out == nil {
			out = map[string]*v1.Pod{}
		}
		out[string(uid)] = rp.pod
		delete(r.pods, uid)
	}
	r.n.Store(int64(len(r.pods)))
	return out
}

// requeue activates the remembered pods whose estimate now fits under the thresholds of one of the
// nodes that cooled down in the last refresh; all of them when anyFits (a node became unmeasured and
// passes the Filter).
func (pl *LoadAware) requeue(logger klog.Logger, cooled []int32, anyFits bool) {
	if pl.rejected.n.Load() == 0 || pl.handle == nil {
		return
	}
	type headroom struct{ cpu, memory int64 }
	rooms := make([]headroom, 0, len(cooled))
	for _, i := range cooled {
		cpu, mem := pl.store.slotAt(i).room()
		rooms = append(rooms, headroom{cpu: cpu, memory: mem})
	}
	if len(rooms) == 0 && !anyFits {
		return
	}
	pods := pl.rejected.takeFitting(func(u usage) bool {
		if anyFits {
			return true
		}
		for _, r := range rooms {
			if u.MilliCPU <= r.cpu && u.Memory <= r.memory {
				return true
			}
		}
		return false
	})
	if len(pods) == 0 {
		return
	}
	logger.V(3).Info("Requeueing pods the LoadAware Filter rejected: node load dropped", "pods", len(pods), "cooledNodes", len(rooms))
	requeuedPods.WithLabelValues(pl.profile).Add(float64(len(pods)))
	pl.handle.Activate(logger, pods)
}
