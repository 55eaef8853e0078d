// Package pgcache reads PodGroups and gang pods from the scheduler's informers, and builds the
// PodGroup client and informer (the generated ones). It is kept apart
// from package podgroup, which is pure (membership rules over API objects), so that the pure
// placement package can use podgroup without depending on client-go's informer machinery.
package pgcache

import (
	"fmt"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"

	"github.com/custom-scheduler/custom-scheduler/pkg/apis/scheduling/v1alpha1"
	"github.com/custom-scheduler/custom-scheduler/pkg/coscheduling/podgroup"
	"github.com/custom-scheduler/custom-scheduler/pkg/generated/clientset/versioned"
	pginformers "github.com/custom-scheduler/custom-scheduler/pkg/generated/informers/externalversions/scheduling/v1alpha1"
)

// IsGangPod reports whether an informer object (or its tombstone) is a pod with the PodGroup label.
func IsGangPod(obj interface{}) bool {
	if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = tomb.Obj
	}
	pod, ok := obj.(*v1.Pod)
	if !ok {
		return false
	}
	_, ok = podgroup.Of(pod)
	return ok
}

// Lister reads PodGroups from an informer's store. (The generated lister does the same with a
// NotFound error allocated per miss; the extension points ask for PodGroups on every cycle.)
type Lister struct {
	Store cache.Store
}

// Get returns the PodGroup namespace/name, or nil when the store does not hold it.
func (l Lister) Get(namespace, name string) *v1alpha1.PodGroup {
	obj, ok, err := l.Store.GetByKey(namespace + "/" + name)
	if err != nil || !ok {
		return nil
	}
	pg, _ := obj.(*v1alpha1.PodGroup)
	return pg
}

// List returns every PodGroup the store holds.
func (l Lister) List() []*v1alpha1.PodGroup {
	objs := l.Store.List()
	out := make([]*v1alpha1.PodGroup, 0, len(objs))
	for _, o := range objs {
		if pg, ok := o.(*v1alpha1.PodGroup); ok {
			out = append(out, pg)
		}
	}
	return out
}

// NewClient builds the generated PodGroup clientset on the scheduler's connection. CRDs speak JSON
// only, so the content type is forced to JSON whatever the scheduler's own client uses.
func NewClient(cfg *rest.Config) (versioned.Interface, error) {
	c := rest.CopyConfig(cfg)
	c.ContentType = runtime.ContentTypeJSON
	c.AcceptContentTypes = runtime.ContentTypeJSON
	cs, err := versioned.NewForConfig(c)
	if err != nil {
		return nil, fmt.Errorf("building the %s client: %w", v1alpha1.SchemeGroupVersion, err)
	}
	return cs, nil
}

// NewInformer returns the generated informer over every PodGroup of the cluster.
func NewInformer(cs versioned.Interface) cache.SharedIndexInformer {
	return pginformers.NewPodGroupInformer(cs, metav1.NamespaceAll, 0, cache.Indexers{})
}
