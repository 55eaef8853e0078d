package claims

import (
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"
	podutil "k8s.io/kubernetes/pkg/api/v1/pod"
)

// Handler watches every pod of the scheduler's informer (not only gang members) for what changes
// the whole-gang check's answer: an assigned pod deleted or finished frees room, which calls stale
// (every check cached on the old room is stale), whichever queue the gangs' members are in when it
// happens; a nomination made or dropped moves room kept for a preemptor (recorded in c), which moves
// c's versions only (VersionAgainst: only the checks of gangs it holds room against are stale). A
// deleted pod's cached request is dropped with forget.
func Handler(c *Claims, forget func(types.UID), stale func()) cache.ResourceEventHandler {
	return cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj interface{}) {
			if pod, ok := obj.(*v1.Pod); ok && c.Set(pod) {
				c.dropped(pod)
			}
		},
		UpdateFunc: func(oldObj, newObj interface{}) {
			old, ok1 := oldObj.(*v1.Pod)
			pod, ok2 := newObj.(*v1.Pod)
			if !ok1 || !ok2 {
				return
			}
			moved := c.Set(pod)
			if pod.Spec.NodeName != "" && podutil.IsPodTerminal(pod) && !podutil.IsPodTerminal(old) {
				stale()
			}
			if moved {
				c.dropped(pod)
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
			forget(pod.UID)
			forgot := c.Forget(pod)
			if pod.Spec.NodeName != "" {
				stale()
			}
			if forgot {
				c.dropped(pod)
			}
		},
	}
}

// dropped calls Dropped when pod, whose claim just changed, has none any more.
func (c *Claims) dropped(pod *v1.Pod) {
	if c.Dropped != nil && !c.Has(pod.UID) {
		c.Dropped()
	}
}
