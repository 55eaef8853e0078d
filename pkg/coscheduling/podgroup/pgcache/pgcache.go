// Package pgcache reads PodGroups and gang pods from the scheduler's informers, and builds the
// PodGroup client and informer (the generated ones). It is kept apart
// from package podgroup, which is pure (membership rules over API objects), so that the pure
// placement package can use podgroup without depending on client-go's informer machinery.
package pgcache

import (
	"fmt"
	"sync"

	v1 "k8s.io/api/core/v1"
	schedulingv1alpha3 "k8s.io/api/scheduling/v1alpha3"
	schedulingv1beta1 "k8s.io/api/scheduling/v1beta1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
	"k8s.io/client-go/discovery"
	compositeinformers "k8s.io/client-go/informers/scheduling/v1alpha3"
	schedulinginformers "k8s.io/client-go/informers/scheduling/v1beta1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
	"k8s.io/kubernetes/pkg/features"

	"github.com/custom-scheduler/custom-scheduler/pkg/apis/scheduling/v1alpha1"
	"github.com/custom-scheduler/custom-scheduler/pkg/coscheduling/podgroup"
	"github.com/custom-scheduler/custom-scheduler/pkg/coscheduling/tree"
	"github.com/custom-scheduler/custom-scheduler/pkg/generated/clientset/versioned"
	pginformers "github.com/custom-scheduler/custom-scheduler/pkg/generated/informers/externalversions/scheduling/v1alpha1"
)

// Unwrap is the object an informer's delete is about: the last state a tombstone holds, else obj.
func Unwrap(obj interface{}) interface{} {
	if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		return tomb.Obj
	}
	return obj
}

// IsGangPod reports whether an informer object (or its tombstone) is a pod with the PodGroup label.
func IsGangPod(obj interface{}) bool {
	pod, ok := Unwrap(obj).(*v1.Pod)
	if !ok {
		return false
	}
	_, ok = podgroup.Of(pod)
	return ok
}

// Lister reads PodGroups from the informers' stores: ours from Store; the in-tree ones (group names
// with podgroup.InTreePrefix) from InTree, as podgroup.FromInTree makes them (converted once per
// version of the object, see inTreeCache); InTree is nil while the in-tree API is not served. A
// PodGroup being deleted reads as gone. (The generated lister does the same with a NotFound error
// allocated per miss; the extension points ask for PodGroups on every cycle.)
type Lister struct {
	Store  cache.Store
	InTree cache.Store
	conv   *inTreeCache
}

// Get returns the group namespace/name, or nil when no store holds it or it is being deleted.
func (l Lister) Get(namespace, name string) *v1alpha1.PodGroup {
	store := l.Store
	if bare, ok := podgroup.InTreeName(name); ok {
		store, name = l.InTree, bare
	}
	if store == nil {
		return nil
	}
	obj, ok, err := store.GetByKey(namespace + "/" + name)
	if err != nil || !ok {
		return nil
	}
	if pg := l.convert(obj); pg != nil && pg.DeletionTimestamp == nil {
		return pg
	}
	return nil // (being deleted: its members are held back as if it were gone)
}

// InTreePodGroup returns the in-tree PodGroup namespace/name as the informer holds it (not
// converted: the device model reads its spec.resourceClaims and status.resourceClaimStatuses), or nil
// when the in-tree PodGroups are not read or it is not there.
func (l Lister) InTreePodGroup(namespace, name string) *schedulingv1beta1.PodGroup {
	if l.InTree == nil {
		return nil
	}
	obj, ok, err := l.InTree.GetByKey(namespace + "/" + name)
	if err != nil || !ok {
		return nil
	}
	pg, _ := obj.(*schedulingv1beta1.PodGroup)
	return pg
}

// Of returns the PodGroups of groups that the stores hold (see Get), in order; the others are left
// out.
func (l Lister) Of(groups []tree.Node) []*v1alpha1.PodGroup {
	var out []*v1alpha1.PodGroup
	for _, n := range groups {
		if pg := l.Get(n.Namespace, n.Name); pg != nil {
			out = append(out, pg)
		}
	}
	return out
}

// List returns every PodGroup the stores hold.
func (l Lister) List() []*v1alpha1.PodGroup {
	var out []*v1alpha1.PodGroup
	for _, store := range []cache.Store{l.Store, l.InTree} {
		if store == nil {
			continue
		}
		for _, o := range store.List() {
			if pg := l.convert(o); pg != nil {
				out = append(out, pg)
			}
		}
	}
	return out
}

// convert is a stored object as our type.
func (l Lister) convert(obj interface{}) *v1alpha1.PodGroup {
	switch o := obj.(type) {
	case *v1alpha1.PodGroup:
		return o
	case *schedulingv1beta1.PodGroup:
		if l.conv == nil {
			return podgroup.FromInTree(o)
		}
		return l.conv.of(o)
	}
	return nil
}

// inTreeCache keeps each in-tree PodGroup's conversion by UID, valid while the store holds the very
// object it was made from (an update stores a new one), so that reading one allocates only after it
// changed. Safe for concurrent use.
type inTreeCache struct {
	mu sync.RWMutex
	m  map[types.UID]converted
}

type converted struct {
	from *schedulingv1beta1.PodGroup
	pg   *v1alpha1.PodGroup
}

func newInTreeCache() *inTreeCache { return &inTreeCache{m: map[types.UID]converted{}} }

func (c *inTreeCache) of(in *schedulingv1beta1.PodGroup) *v1alpha1.PodGroup {
	c.mu.RLock()
	held := c.m[in.UID]
	c.mu.RUnlock()
	if held.from == in {
		return held.pg
	}
	pg := podgroup.FromInTree(in)
	c.mu.Lock()
	c.m[in.UID] = converted{from: in, pg: pg}
	c.mu.Unlock()
	return pg
}

func (c *inTreeCache) forget(uid types.UID) {
	c.mu.Lock()
	delete(c.m, uid)
	c.mu.Unlock()
}

// inTreeHandler hands the in-tree informer's events on to h as our type (tombstones included), keeps
// which groups are units of preemption (podgroup.TrackInTreeUnit), and forgets a deleted PodGroup's
// conversion. The informer's store keeps the API's objects under their own keys: a transform that
// renamed them would make a relist's keys disagree with the store's.
func (l Lister) inTreeHandler(h cache.ResourceEventHandler) cache.ResourceEventHandler {
	ours := func(obj interface{}) interface{} {
		if pg := l.convert(obj); pg != nil {
			return pg
		}
		return obj
	}
	return cache.ResourceEventHandlerDetailedFuncs{
		AddFunc: func(obj interface{}, initial bool) {
			pg := ours(obj)
			if p, ok := pg.(*v1alpha1.PodGroup); ok {
				podgroup.TrackInTreeUnit(p, false)
			}
			h.OnAdd(pg, initial)
		},
		UpdateFunc: func(oldObj, newObj interface{}) {
			// The old object's conversion is still the cached one (the new one replaces it next).
			old, pg := ours(oldObj), ours(newObj)
			if p, ok := pg.(*v1alpha1.PodGroup); ok {
				podgroup.TrackInTreeUnit(p, false)
			}
			h.OnUpdate(old, pg)
		},
		DeleteFunc: func(obj interface{}) {
			tomb, isTomb := obj.(cache.DeletedFinalStateUnknown)
			if isTomb {
				obj = tomb.Obj
			}
			in, ok := obj.(*schedulingv1beta1.PodGroup)
			if !ok {
				return
			}
			pg := podgroup.FromInTree(in)
			podgroup.TrackInTreeUnit(pg, true)
			if l.conv != nil {
				l.conv.forget(pg.UID)
			}
			if isTomb {
				tomb.Obj = pg
				h.OnDelete(tomb)
				return
			}
			h.OnDelete(pg)
		},
	}
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

// NewInTreeInformer returns an informer over every in-tree PodGroup of the cluster (the plugin's own:
// the scheduler runs one only with its GenericWorkload gate), read through a Lister and handed on by
// Sources as our type, or nil when the apiserver does not serve them (which it logs at V(2) only:
// the default of a 1.37 cluster).
func NewInTreeInformer(logger klog.Logger, cs kubernetes.Interface) (cache.SharedIndexInformer, error) {
	if served, err := InTreeServed(cs.Discovery()); err != nil {
		return nil, err
	} else if !served {
		logger.V(2).Info("In-tree PodGroups are not served; only PodGroups of "+v1alpha1.SchemeGroupVersion.String()+" make gangs",
			"api", podgroup.InTreeGroupVersion.String())
		return nil, nil
	}
	if utilfeature.DefaultFeatureGate.Enabled(features.GenericWorkload) {
		logger.Info("Warning: the GenericWorkload feature gate is on in this scheduler, so kube-scheduler sends the pods of in-tree PodGroups "+
			"through its own pod-group cycle, which skips Coscheduling's gang preemption (PostFilter) and reports a group scheduled before "+
			"its quorum is placed; turn the gate off in this scheduler (the apiserver's gate is what serves the API)", "api", podgroup.InTreeGroupVersion.String())
	}
	podgroup.SetInTreeRead(true)
	return schedulinginformers.NewPodGroupInformer(cs, metav1.NamespaceAll, 0, cache.Indexers{}), nil
}

// NewInformer returns the generated informer over every PodGroup of the cluster.
func NewInformer(cs versioned.Interface) cache.SharedIndexInformer {
	return pginformers.NewPodGroupInformer(cs, metav1.NamespaceAll, 0, cache.Indexers{})
}

// NewCompositeInformer returns an informer over every in-tree CompositePodGroup of the cluster, or nil
// when the apiserver does not serve them (scheduling.k8s.io/v1alpha3, with the CompositePodGroup gate
// and the version turned on in its runtime-config).
func NewCompositeInformer(logger klog.Logger, cs kubernetes.Interface) (cache.SharedIndexInformer, error) {
	gv := schedulingv1alpha3.SchemeGroupVersion.String()
	list, err := cs.Discovery().ServerResourcesForGroupVersion(gv)
	if apierrors.IsNotFound(err) {
		logger.V(2).Info("In-tree CompositePodGroups are not served; jobs of several roles use the PodGroup annotations", "api", gv)
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("asking the apiserver whether it serves %s: %w", gv, err)
	}
	for _, r := range list.APIResources {
		if r.Name == "compositepodgroups" {
			return compositeinformers.NewCompositePodGroupInformer(cs, metav1.NamespaceAll, 0, cache.Indexers{}), nil
		}
	}
	return nil, nil
}
