package coscheduling

import (
	v1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/cache"
	podutil "k8s.io/kubernetes/pkg/api/v1/pod"
)

// capacityEventHandler watches every pod of the scheduler's informer (not only gang members) for
// what changes the whole-gang check's answer: an assigned pod deleted or finished frees room, and a
// nomination made or dropped moves room kept for a preemptor. Either makes cached checks stale (the
// epoch), whichever queue the gang's members are in when it happens.
func (pl *Coscheduling) capacityEventHandler() cache.ResourceEventHandler {
	return cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj interface{}) {
			if pod, ok := obj.(*v1.Pod); ok && pl.claims.Set(pod) {
				pl.epoch.Add(1)
			}
		},
		UpdateFunc: func(oldObj, newObj interface{}) {
			old, ok1 := oldObj.(*v1.Pod)
			pod, ok2 := newObj.(*v1.Pod)
			if !ok1 || !ok2 {
				return
			}
			changed := pl.claims.Set(pod)
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
			if pl.claims.Forget(pod) || pod.Spec.NodeName != "" {
				pl.epoch.Add(1)
			}
		},
	}
}

func finished(pod *v1.Pod) bool {
	return podutil.IsPodTerminal(pod)
}
