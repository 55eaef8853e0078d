package coscheduling

import (
	"fmt"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/custom-scheduler/custom-scheduler/pkg/apis/scheduling/v1alpha1"
)

// podGroupIndexFunc indexes a pod by "namespace/podgroup" when it carries the PodGroup label.
func podGroupIndexFunc(obj interface{}) ([]string, error) {
	pod, ok := obj.(*v1.Pod)
	if !ok {
		return nil, nil
	}
	name, ok := podGroupName(pod)
	if !ok {
		return nil, nil
	}
	return []string{groupKey(pod.Namespace, name)}, nil
}

// addPodGroupIndex adds the PodGroup index to a pod informer, unless another profile's instance of
// this plugin already did.
func addPodGroupIndex(informer cache.SharedIndexInformer) error {
	if _, exists := informer.GetIndexer().GetIndexers()[podGroupIndex]; exists {
		return nil
	}
	if err := informer.AddIndexers(cache.Indexers{podGroupIndex: podGroupIndexFunc}); err != nil {
		return fmt.Errorf("indexing pods by PodGroup: %w", err)
	}
	return nil
}

func isGangPod(obj interface{}) bool {
	if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = tomb.Obj
	}
	pod, ok := obj.(*v1.Pod)
	if !ok {
		return false
	}
	_, ok = podGroupName(pod)
	return ok
}

// podEventHandler keeps the quorum counts current from the scheduler's pod informer: a member that is
// bound counts (also after a restart, from the initial list), a deleted one stops counting. Pods
// without the label are filtered out before any work.
func (pl *Coscheduling) podEventHandler() cache.ResourceEventHandler {
	return cache.FilteringResourceEventHandler{
		FilterFunc: isGangPod,
		Handler: cache.ResourceEventHandlerFuncs{
			AddFunc:    pl.onPodAdd,
			UpdateFunc: func(_, obj interface{}) { pl.onPod(obj) },
			DeleteFunc: pl.onPodDelete,
		},
	}
}

// onPodAdd also lets a group in once its last missing member appears. The scheduler broadcasts
// unscheduled-pod additions to the queue only with the GenericWorkload feature gate, so the members
// PreEnqueue held back are activated from here (this handler runs after the store has the new pod,
// so PreEnqueue counts it).
func (pl *Coscheduling) onPodAdd(obj interface{}) {
	pl.onPod(obj)
	pod, ok := obj.(*v1.Pod)
	if !ok || pod.Spec.NodeName != "" {
		return
	}
	name, _ := podGroupName(pod)
	pg := pl.podGroups.get(pod.Namespace, name)
	if pg == nil || pl.countMembers(pod.Namespace, name) < minMember(pg) {
		return
	}
	pl.activateGroup(pod.Namespace, name)
}

func (pl *Coscheduling) onPod(obj interface{}) {
	pod, ok := obj.(*v1.Pod)
	if !ok || pod.Spec.NodeName == "" {
		return
	}
	name, _ := podGroupName(pod)
	pl.mu.Lock()
	pl.gangLocked(pod.Namespace, name).set(pod.UID, bound)
	pl.mu.Unlock()
}

func (pl *Coscheduling) onPodDelete(obj interface{}) {
	if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = tomb.Obj
	}
	pod, ok := obj.(*v1.Pod)
	if !ok {
		return
	}
	name, _ := podGroupName(pod)
	key := groupKey(pod.Namespace, name)
	pl.mu.Lock()
	delete(pl.gated, pod.UID)
	if g := pl.gangs[key]; g != nil {
		g.clear(pod.UID, bound)
		delete(g.unplaced, pod.UID)
		if g.idle(pl.clock.Now()) {
			delete(pl.gangs, key)
		}
	}
	pl.mu.Unlock()
}

// podGroupEventHandler reacts to PodGroups from this plugin's own informer: a new or changed group
// has its members re-examined (PreEnqueue reads this informer, so activating from here cannot race
// with it), and its status refreshed; a deleted group's state is dropped.
func (pl *Coscheduling) podGroupEventHandler() cache.ResourceEventHandler {
	return cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj interface{}) {
			if pg, ok := obj.(*v1alpha1.PodGroup); ok {
				pl.activateGroup(pg.Namespace, pg.Name)
				pl.notifyStatus(groupKey(pg.Namespace, pg.Name))
			}
		},
		UpdateFunc: func(oldObj, newObj interface{}) {
			oldPG, ok1 := oldObj.(*v1alpha1.PodGroup)
			pg, ok2 := newObj.(*v1alpha1.PodGroup)
			if !ok1 || !ok2 {
				return
			}
			if oldPG.Generation != pg.Generation {
				pl.activateGroup(pg.Namespace, pg.Name)
			}
			pl.notifyStatus(groupKey(pg.Namespace, pg.Name))
		},
		DeleteFunc: func(obj interface{}) {
			if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = tomb.Obj
			}
			pg, ok := obj.(*v1alpha1.PodGroup)
			if !ok {
				return
			}
			key := groupKey(pg.Namespace, pg.Name)
			pl.mu.Lock()
			if g := pl.gangs[key]; g != nil {
				// Forget the group's history; keep the counts of members that still exist, in
				// case a PodGroup of the same name comes back for them.
				if g.backoffTimer != nil {
					g.backoffTimer.Stop()
				}
				g.backoffUntil, g.lastFailure, g.feasibility = time.Time{}, time.Time{}, nil
				if len(g.members) == 0 && len(g.waiting) == 0 {
					delete(pl.gangs, key)
				}
			}
			delete(pl.hintMemo, key)
			pl.mu.Unlock()
		},
	}
}
