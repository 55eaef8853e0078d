package pgcache

import (
	"context"
	"fmt"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	"github.com/custom-scheduler/custom-scheduler/pkg/apis/scheduling/v1alpha1"
	"github.com/custom-scheduler/custom-scheduler/pkg/coscheduling/podgroup"
	"github.com/custom-scheduler/custom-scheduler/pkg/generated/clientset/versioned"
)

// Sources are the informers of the two gang sources: the PodGroups of ours, always, and the in-tree
// PodGroups where the apiserver serves them (see podgroup/intree.go). The in-tree store keeps the
// API's objects; Lister and the handler Start registers hand them on as our type.
type Sources struct {
	// Client is the clientset of our PodGroups (the status writer patches them with it).
	Client    versioned.Interface
	informers []cache.SharedIndexInformer
	// Lister reads both stores.
	Lister Lister
	// composites is the informer of the in-tree CompositePodGroups (scheduling.k8s.io/v1alpha3)
	// where the apiserver serves them, with the in-tree PodGroups (nil otherwise).
	composites cache.SharedIndexInformer
}

// NewSources builds the informers (discovery decides whether the in-tree one is needed) without
// starting them.
func NewSources(logger klog.Logger, cfg *rest.Config, cs kubernetes.Interface) (*Sources, error) {
	client, err := NewClient(cfg)
	if err != nil {
		return nil, err
	}
	s := &Sources{Client: client, informers: []cache.SharedIndexInformer{NewInformer(client)}}
	s.Lister.Store = s.informers[0].GetStore()
	inTree, err := NewInTreeInformer(logger, cs)
	if err != nil {
		return nil, err
	} else if inTree != nil {
		s.informers, s.Lister.InTree = append(s.informers, inTree), inTree.GetStore()
		s.Lister.conv = newInTreeCache()
		if s.composites, err = NewCompositeInformer(logger, cs); err != nil {
			return nil, err
		}
	}
	return s, nil
}

// Composites is the informer of the in-tree CompositePodGroups, nil where they are not served (the
// status writer writes their conditions).
func (s *Sources) Composites() cache.SharedIndexInformer { return s.composites }

// InTree reports whether the in-tree PodGroups are read.
func (s *Sources) InTree() bool { return s.Lister.InTree != nil }

// Start hands handler every PodGroup event of both sources, runs the informers until ctx ends and
// waits (at most timeout) for them to sync.
func (s *Sources) Start(ctx context.Context, handler, composites cache.ResourceEventHandler, timeout time.Duration) error {
	synced := make([]cache.InformerSynced, 0, len(s.informers)+1)
	if s.composites != nil {
		// First, so that the trees are known when the PodGroups' handler sees their children.
		if _, err := s.composites.AddEventHandler(composites); err != nil {
			return fmt.Errorf("watching CompositePodGroups: %w", err)
		}
		go s.composites.RunWithContext(ctx)
		synced = append(synced, s.composites.HasSynced)
	}
	for i, informer := range s.informers {
		h := handler
		if i > 0 {
			h = s.Lister.inTreeHandler(handler)
		}
		if _, err := informer.AddEventHandler(h); err != nil {
			return fmt.Errorf("watching PodGroups: %w", err)
		}
		go informer.RunWithContext(ctx)
		synced = append(synced, informer.HasSynced)
	}
	syncCtx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	if !cache.WaitForCacheSync(syncCtx.Done(), synced...) {
		return fmt.Errorf("the PodGroup caches (podgroups.%s, and podgroups.%s if served) did not sync within %v: install the CRD from manifests/crds and let the scheduler list and watch podgroups",
			v1alpha1.GroupName, podgroup.InTreeGroupVersion.Group, timeout)
	}
	return nil
}
