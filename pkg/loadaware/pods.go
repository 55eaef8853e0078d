package loadaware

import (
	"fmt"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
)

// registerPodHandlers keeps the estimates of pods bound by anyone (another profile, another scheduler,
// a controller setting nodeName), follows them until they have run long enough to show in a sample,
// and drops them when pods finish or go away.
func (pl *LoadAware) registerPodHandlers() error {
	if pl.handle == nil || pl.handle.SharedInformerFactory() == nil {
		return nil
	}
	_, err := pl.handle.SharedInformerFactory().Core().V1().Pods().Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    pl.onPodUpsert,
		UpdateFunc: func(_, obj interface{}) { pl.onPodUpsert(obj) },
		DeleteFunc: pl.onPodDelete,
	})
	if err != nil {
		return fmt.Errorf("adding the LoadAware pod event handler: %w", err)
	}
	return nil
}

// onPodUpsert counts an assigned pod by estimate until its usage can be in a sample: until it has
// been Running for one metrics window plus the warm-up (the drop happens at the refresh whose sample
// window starts after that). A finished pod stops counting at once.
func (pl *LoadAware) onPodUpsert(obj interface{}) {
	pod, ok := obj.(*v1.Pod)
	if !ok || pod.Spec.NodeName == "" {
		return
	}
	pl.rejected.remove(pod.UID)
	if pod.Status.Phase == v1.PodSucceeded || pod.Status.Phase == v1.PodFailed {
		pl.store.removePod(pod.UID)
		return
	}
	readyAt := pl.readyAt(pod)
	if pl.store.setReady(pod.UID, readyAt) {
		return
	}
	// Nothing is counted while no node has a sample; the first sample resyncs.
	if pl.store.sampled.Load() == 0 {
		return
	}
	// Most updates are about pods that have run long enough for every fresh sample, and every
	// aggregation's window of them, to show them.
	if readyAt != 0 && readyAt < pl.clock.Now().Add(-pl.staleness-pl.store.agg.window()).UnixNano() {
		return
	}
	pl.store.addPod(pod.UID, pod.Spec.NodeName, pl.est.estimate(pod), readyAt)
}

func (pl *LoadAware) onPodDelete(obj interface{}) {
	if tombstone, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = tombstone.Obj
	}
	pod, ok := obj.(*v1.Pod)
	if !ok {
		return
	}
	pl.rejected.remove(pod.UID)
	pl.store.removePod(pod.UID)
}

// resyncPods counts the assigned pods from the informer's cache, after the first sample.
func (pl *LoadAware) resyncPods(logger klog.Logger) {
	if pl.handle == nil || pl.handle.SharedInformerFactory() == nil {
		return
	}
	pods, err := pl.handle.SharedInformerFactory().Core().V1().Pods().Lister().List(labels.Everything())
	if err != nil {
		logger.Error(err, "Listing pods to estimate the ones bound before the first metrics sample")
		return
	}
	for _, p := range pods {
		pl.onPodUpsert(p)
	}
}

// readyAt is when the pod will have run for the warm-up (unix nanoseconds), from runningSince; 0
// while it is not Running, or a container has not started yet.
func (pl *LoadAware) readyAt(pod *v1.Pod) int64 {
	since, ok := runningSince(pod)
	if !ok {
		return 0
	}
	return since.Add(pl.warmup).UnixNano()
}

// runningSince is when the pod's usage started to show, if the pod is Running and every container
// has started: the latest first start of its containers. A container that finished (a Job's
// container that exited while a sidecar runs on) counts from when it started; a container that
// restarted counts as started before (its usage was in samples before the restart), so a restart,
// or the back-off after it, never makes the pod new again. With no container start known, the
// pod's start time.
func runningSince(pod *v1.Pod) (time.Time, bool) {
	if pod.Status.Phase != v1.PodRunning {
		return time.Time{}, false
	}
	var since time.Time
	for i := range pod.Status.ContainerStatuses {
		cs := &pod.Status.ContainerStatuses[i]
		if cs.RestartCount > 0 {
			continue
		}
		switch {
		case cs.State.Running != nil:
			if cs.State.Running.StartedAt.Time.After(since) {
				since = cs.State.Running.StartedAt.Time
			}
		case cs.State.Terminated != nil:
			if cs.State.Terminated.StartedAt.Time.After(since) {
				since = cs.State.Terminated.StartedAt.Time
			}
		default:
			return time.Time{}, false
		}
	}
	if since.IsZero() {
		if pod.Status.StartTime == nil {
			return time.Time{}, false
		}
		since = pod.Status.StartTime.Time
	}
	return since, true
}
