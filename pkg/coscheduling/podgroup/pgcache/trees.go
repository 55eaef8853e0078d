package pgcache

import (
	schedulingv1alpha3 "k8s.io/api/scheduling/v1alpha3"
	"k8s.io/client-go/tools/cache"

	"github.com/custom-scheduler/custom-scheduler/pkg/apis/scheduling/v1alpha1"
	"github.com/custom-scheduler/custom-scheduler/pkg/coscheduling/tree"
)

// TreeHandler keeps x current from PodGroup events (node reads a PodGroup's node, see tree.FromPodGroup) and
// then hands each event to next, so that next sees the tree the event made.
func TreeHandler(x *tree.Index, node func(*v1alpha1.PodGroup) tree.Node, next cache.ResourceEventHandler) cache.ResourceEventHandler {
	set := func(obj interface{}) {
		if pg, ok := obj.(*v1alpha1.PodGroup); ok {
			if pg.DeletionTimestamp != nil {
				x.Delete(pg.Namespace, pg.Name)
				return
			}
			x.Set(node(pg))
		}
	}
	return cache.ResourceEventHandlerDetailedFuncs{
		AddFunc: func(obj interface{}, initial bool) {
			set(obj)
			next.OnAdd(obj, initial)
		},
		UpdateFunc: func(oldObj, newObj interface{}) {
			set(newObj)
			next.OnUpdate(oldObj, newObj)
		},
		DeleteFunc: func(obj interface{}) {
			if pg, ok := Unwrap(obj).(*v1alpha1.PodGroup); ok {
				x.Delete(pg.Namespace, pg.Name)
			}
			next.OnDelete(obj)
		},
	}
}

// CompositeHandler keeps x current from in-tree CompositePodGroup events and then calls changed with
// the groups under the composite (their members may be let in now).
func CompositeHandler(x *tree.Index, changed func([]tree.Node)) cache.ResourceEventHandler {
	set := func(obj interface{}) {
		c, ok := obj.(*schedulingv1alpha3.CompositePodGroup)
		if !ok {
			return
		}
		n := tree.FromComposite(c)
		if c.DeletionTimestamp != nil {
			x.Delete(n.Namespace, n.Name)
		} else {
			x.Set(n)
		}
		changed(x.Under(n.Namespace, n.Name))
	}
	return cache.ResourceEventHandlerFuncs{
		AddFunc:    set,
		UpdateFunc: func(_, newObj interface{}) { set(newObj) },
		DeleteFunc: func(obj interface{}) {
			if c, ok := Unwrap(obj).(*schedulingv1alpha3.CompositePodGroup); ok {
				n := tree.FromComposite(c)
				x.Delete(n.Namespace, n.Name)
				changed(x.Under(n.Namespace, n.Name))
			}
		},
	}
}
