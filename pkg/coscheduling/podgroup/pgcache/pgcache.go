// Package pgcache reads PodGroups and gang pods from the scheduler's informers, and builds the
// PodGroup client and informer (the generated ones). It is kept apart
// from package podgroup, which is pure (membership rules over API objects), so that the pure
// placement package can use podgroup without depending on client-go's informer machinery.
package pgcache

import (
	"fmt"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
	"k8s.io/client-go/discovery"
	schedulinginformers "k8s.io/client-go/informers/scheduling/v1beta1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
	"k8s.io/kubernetes/pkg/features"

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

// Lister reads PodGroups from the informers' stores: ours from Store, the in-tree ones (group names
// with podgroup.InTreePrefix) from InTree, which holds them as podgroup.FromInTree made them (see
// InTreeInformer); InTree is nil while the in-tree API is not served. (The generated lister does the
// same with a NotFound error allocated per miss; the extension points ask for PodGroups on every
// cycle.)
type Lister struct {
	Store  cache.Store
	InTree cache.Store
}

// Get returns the group namespace/name, or nil when no store holds it or it is being deleted.
func (l Lister) Get(namespace, name string) *v1alpha1.PodGroup {
	store := l.Store
	if _, ok := podgroup.InTreeName(name); ok {
		store = l.InTree
	}
	if store == nil {
		return nil
	}
	obj, ok, err := store.GetByKey(namespace + "/" + name)
	if err != nil || !ok {
		return nil
	}
	if pg, _ := obj.(*v1alpha1.PodGroup); pg != nil && pg.DeletionTimestamp == nil {
		return pg
	}
	return nil // (being deleted: its members are held back as if it were gone)
}

// List returns every PodGroup the stores hold.
func (l Lister) List() []*v1alpha1.PodGroup {
	var out []*v1alpha1.PodGroup
	for _, store := range []cache.Store{l.Store, l.InTree} {
		if store == nil {
			continue
		}
		for _, o := range store.List() {
			if pg, ok := o.(*v1alpha1.PodGroup); ok {
				out = append(out, pg)
			}
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

// InTreeServed reports whether the apiserver serves the in-tree PodGroups (podgroups of
// scheduling.k8s.io/v1beta1): a cluster without the GenericWorkload gate and that API enabled does
// not (false, no error).
func InTreeServed(d discovery.DiscoveryInterface) (bool, error) {
	list, err := d.ServerResourcesForGroupVersion(podgroup.InTreeGroupVersion.String())
	if apierrors.IsNotFound(err) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("asking the apiserver whether it serves %s: %w", podgroup.InTreeGroupVersion, err)
	}
	for _, r := range list.APIResources {
		if r.Name == "podgroups" {
			return true, nil
		}
	}
	return false, nil
}

// NewInTreeInformer returns an informer over every in-tree PodGroup of the cluster whose store holds
// them as podgroup.FromInTree makes them (the scheduler's own informer of them, which it runs with
// the GenericWorkload gate, keeps the API's type: this one is the plugin's own), or nil when the
// apiserver does not serve them (which it logs at V(2) only: the default of a 1.37 cluster).
func NewInTreeInformer(logger klog.Logger, cs kubernetes.Interface) (cache.SharedIndexInformer, error) {
	if served, err := InTreeServed(cs.Discovery()); err != nil || !served {
		logger.V(2).Info("In-tree PodGroups are not served; only PodGroups of "+v1alpha1.SchemeGroupVersion.String()+" make gangs",
			"api", podgroup.InTreeGroupVersion.String(), "err", err)
		return nil, err
	}
	if utilfeature.DefaultFeatureGate.Enabled(features.GenericWorkload) {
		logger.Info("Warning: the GenericWorkload feature gate is on in this scheduler, so kube-scheduler sends the pods of in-tree PodGroups "+
			"through its own pod-group cycle, which skips Coscheduling's gang preemption (PostFilter) and reports a group scheduled before "+
			"its quorum is placed; turn the gate off in this scheduler (the apiserver's gate is what serves the API)", "api", podgroup.InTreeGroupVersion.String())
	}
	informer := schedulinginformers.NewPodGroupInformer(cs, metav1.NamespaceAll, 0, cache.Indexers{})
	if err := informer.SetTransform(podgroup.TransformInTree); err != nil {
		return nil, fmt.Errorf("reading in-tree PodGroups: %w", err)
	}
	return informer, nil
}

// NewInformer returns the generated informer over every PodGroup of the cluster.
func NewInformer(cs versioned.Interface) cache.SharedIndexInformer {
	return pginformers.NewPodGroupInformer(cs, metav1.NamespaceAll, 0, cache.Indexers{})
}
