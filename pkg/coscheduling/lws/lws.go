// Package lws makes the PodGroups of LeaderWorkerSet replica groups (podgroup.LWSPodGroups): one per
// replica, named after its leader pod and owned by it, and a gang composite per set when its pods ask
// for K of N. The plugin places a replica's pods as a gang once its PodGroup exists (until then they
// are held back as any member of a missing PodGroup is), so a user of LWS writes no PodGroup.
//
// It is the I/O at the edge: the decisions are podgroup's. The leader's pod events queue its replica;
// a worker, started when this scheduler leads, makes what is missing and replaces a PodGroup left by
// an earlier leader pod of the same name (a replica LWS recreated). A PodGroup of that name the
// scheduler did not make is the user's and is left as it is.
//
// A set with startupPolicy LeaderReady makes its workers only once the leader is Ready: its replica
// PodGroups are made of minMember 1 (the leader placed alone, the workers as they come), read from the
// LeaderWorkerSet object (leaderworkerset.x-k8s.io/v1) when the scheduler may read it; as LWS's own
// Volcano integration does. A leader whose PodGroups the informer holds already is left alone: its
// updates read nothing and write nothing.
package lws

import (
	"context"
	"fmt"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"

	"github.com/custom-scheduler/custom-scheduler/pkg/apis/scheduling/v1alpha1"
	"github.com/custom-scheduler/custom-scheduler/pkg/coscheduling/podgroup"
	"github.com/custom-scheduler/custom-scheduler/pkg/generated/clientset/versioned"
)

// ReasonInvalidGroup (pod, Warning): a LeaderWorkerSet leader's labels or annotations do not make a
// PodGroup (the message says which); its replica's pods stay held back until they are fixed.
const ReasonInvalidGroup = "InvalidLeaderWorkerSetGroup"

// Maker makes the PodGroups of the LeaderWorkerSet replicas of one scheduler profile.
type Maker struct {
	// Client writes our PodGroups.
	Client versioned.Interface
	// Pods is the scheduler's pod informer's store (leader pods are read from it by key).
	Pods cache.Store
	// Scheduler is the profile whose pods are made gangs.
	Scheduler string
	// Warn reports a malformed leader on its pod.
	Warn func(pod *v1.Pod, reason, msg string)
	// StartupPolicy reads the spec.startupPolicy of the LeaderWorkerSet namespace/name ("" where the
	// set, its API or the right to read it is missing; nil: never read).
	StartupPolicy func(ctx context.Context, namespace, name string) (string, error)
	// Groups reads a PodGroup of ours from the scheduler's informer (nil when it holds none; a nil
	// Groups: always made through the API).
	Groups func(namespace, name string) *v1alpha1.PodGroup

	// cfg makes StartupPolicy's client when Run starts (nil: none).
	cfg   *rest.Config
	queue workqueue.TypedRateLimitingInterface[types.NamespacedName]
}

// New returns a Maker whose queue is ready for events; Run works it off. cfg (nil: none) reads the
// sets' startup policy (see StartupPolicy); groups is Groups.
func New(client versioned.Interface, cfg *rest.Config, groups func(namespace, name string) *v1alpha1.PodGroup, pods cache.Store, scheduler string, warn func(pod *v1.Pod, reason, msg string)) *Maker {
	return &Maker{Client: client, Pods: pods, Scheduler: scheduler, Warn: warn, Groups: groups, cfg: cfg,
		queue: workqueue.NewTypedRateLimitingQueueWithConfig(
			workqueue.NewTypedItemExponentialFailureRateLimiter[types.NamespacedName](100*time.Millisecond, 30*time.Second),
			workqueue.TypedRateLimitingQueueConfig[types.NamespacedName]{Name: "leaderworkerset-podgroups"})}
}

// leader reports whether obj is a live leader pod of this profile's LeaderWorkerSet replicas.
func (m *Maker) leader(obj interface{}) (*v1.Pod, bool) {
	pod, ok := obj.(*v1.Pod)
	if !ok || pod.Spec.SchedulerName != m.Scheduler || !podgroup.IsLive(pod) || !podgroup.LWSLeader(pod) || podgroup.Labelled(pod) {
		return nil, false
	}
	_, ok = podgroup.LWSGroup(pod)
	return pod, ok
}

// Handler queues a replica when its leader pod is added or updated (the pod informer's events).
func (m *Maker) Handler() cache.ResourceEventHandler {
	return cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj interface{}) { m.enqueue(obj) },
		UpdateFunc: func(_, obj interface{}) { m.enqueue(obj) },
	}
}

func (m *Maker) enqueue(obj interface{}) {
	if pod, ok := m.leader(obj); ok {
		m.queue.Add(types.NamespacedName{Namespace: pod.Namespace, Name: pod.Name})
	}
}

// GroupDeleted queues the replica of a PodGroup the scheduler made and that was deleted while its
// leader may still live (the group is named after the leader pod).
func (m *Maker) GroupDeleted(pg *v1alpha1.PodGroup) {
	if pg.Labels[podgroup.LabelManagedBy] == podgroup.ManagedBy && pg.Labels[podgroup.LWSGroupIndexLabel] != "" {
		m.queue.Add(types.NamespacedName{Namespace: pg.Namespace, Name: pg.Name})
	}
}

// Run makes PodGroups until ctx ends.
func (m *Maker) Run(ctx context.Context) {
	context.AfterFunc(ctx, m.queue.ShutDown)
	if m.StartupPolicy == nil && m.cfg != nil {
		dyn, err := dynamic.NewForConfig(m.cfg)
		if err != nil {
			klog.FromContext(ctx).Error(err, "No client for LeaderWorkerSets: startupPolicy LeaderReady is not read, every replica is a gang of its size")
		} else {
			m.StartupPolicy = startupPolicy(dyn)
		}
	}
	for {
		key, shutdown := m.queue.Get()
		if shutdown {
			return
		}
		if err := m.sync(ctx, key); err != nil {
			klog.FromContext(ctx).V(2).Info("Making a LeaderWorkerSet replica's PodGroup, retrying", "pod", key, "err", err)
			m.queue.AddRateLimited(key)
		} else {
			m.queue.Forget(key)
		}
		m.queue.Done(key)
	}
}

// ShutDown stops the queue (for a scheduler that never leads).
func (m *Maker) ShutDown() { m.queue.ShutDown() }

// sync makes the PodGroups the leader pod key stands for, if it is a leader that lives.
func (m *Maker) sync(ctx context.Context, key types.NamespacedName) error {
	obj, exists, err := m.Pods.GetByKey(key.String())
	if err != nil || !exists {
		return err
	}
	pod, ok := m.leader(obj)
	if !ok {
		return nil
	}
	group, composite, err := podgroup.LWSPodGroups(pod)
	if err != nil {
		m.Warn(pod, ReasonInvalidGroup, err.Error()+"; the replica's pods are not placed until it is fixed")
		return nil
	}
	if m.made(group) && (composite == nil || m.made(composite)) {
		return nil // a leader's update: its PodGroups are there
	}
	if m.StartupPolicy != nil {
		policy, err := m.StartupPolicy(ctx, pod.Namespace, pod.Labels[podgroup.LWSNameLabel])
		if err != nil {
			return err
		}
		if policy == LeaderReady {
			// Its workers come only once the leader is Ready: the leader is placed alone.
			group.Spec.MinMember = 1
		}
	}
	if composite != nil {
		if err := m.ensure(ctx, composite); err != nil {
			return err
		}
	}
	return m.ensure(ctx, group)
}

// made reports whether the informer holds a PodGroup of want's name that ensure would leave as it
// is: the one made for want's owner, or the user's.
func (m *Maker) made(want *v1alpha1.PodGroup) bool {
	if m.Groups == nil {
		return false
	}
	have := m.Groups(want.Namespace, want.Name)
	return have != nil && !Stale(have, want)
}

// ensure creates want unless a PodGroup of its name exists: one the scheduler made for an earlier
// owner (a replica recreated) is replaced, any other is left alone. A PodGroup still going (a
// finalizer holds it) is an error, retried with the queue's back-off rather than at once: a few
// rounds of create, read and delete per call, never a tight loop against the apiserver.
func (m *Maker) ensure(ctx context.Context, want *v1alpha1.PodGroup) error {
	pgs := m.Client.SchedulingV1alpha1().PodGroups(want.Namespace)
	for range 3 {
		_, err := pgs.Create(ctx, want, metav1.CreateOptions{})
		if !apierrors.IsAlreadyExists(err) {
			if err != nil {
				return fmt.Errorf("creating PodGroup %s/%s: %w", want.Namespace, want.Name, err)
			}
			klog.FromContext(ctx).V(2).Info("Made the PodGroup of a LeaderWorkerSet replica", "podGroup", klog.KObj(want), "minMember", want.Spec.MinMember)
			return nil
		}
		have, err := pgs.Get(ctx, want.Name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			continue // deleted since: make it
		}
		if err != nil {
			return fmt.Errorf("reading PodGroup %s/%s: %w", want.Namespace, want.Name, err)
		}
		if !Stale(have, want) {
			return nil
		}
		if have.DeletionTimestamp != nil {
			return fmt.Errorf("PodGroup %s/%s of an earlier owner is still being deleted", want.Namespace, want.Name)
		}
		uid := have.UID
		if err := pgs.Delete(ctx, want.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid}}); err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
			return fmt.Errorf("replacing PodGroup %s/%s of an earlier owner: %w", want.Namespace, want.Name, err)
		}
	}
	return fmt.Errorf("PodGroup %s/%s: created, deleted or replaced by someone else meanwhile; retrying", want.Namespace, want.Name)
}

// Stale reports whether have, a PodGroup of want's name, is one the scheduler made for another owner
// (an earlier leader pod of the same name, or set): it is replaced by want.
func Stale(have, want *v1alpha1.PodGroup) bool {
	if have.Labels[podgroup.LabelManagedBy] != podgroup.ManagedBy {
		return false
	}
	h, w := metav1.GetControllerOf(have), metav1.GetControllerOf(want)
	return h == nil || w == nil || h.UID != w.UID
}

// LeaderReady is the LeaderWorkerSet startup policy whose workers are made once the leader is Ready.
const LeaderReady = "LeaderReady"

// setsGVR is LeaderWorkerSet's resource.
var setsGVR = schema.GroupVersionResource{Group: "leaderworkerset.x-k8s.io", Version: "v1", Resource: "leaderworkersets"}

// startupPolicy reads a LeaderWorkerSet's spec.startupPolicy through dyn: "" where the set is gone,
// the API is not served or the scheduler may not read it (the replica is a gang of its size, as
// before); other errors are returned, for the queue to retry.
func startupPolicy(dyn dynamic.Interface) func(ctx context.Context, namespace, name string) (string, error) {
	return func(ctx context.Context, namespace, name string) (string, error) {
		u, err := dyn.Resource(setsGVR).Namespace(namespace).Get(ctx, name, metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err), apierrors.IsForbidden(err), meta.IsNoMatchError(err):
			klog.FromContext(ctx).V(4).Info("LeaderWorkerSet not read: its replicas are gangs of their size", "set", klog.KRef(namespace, name), "err", err)
			return "", nil
		case err != nil:
			return "", fmt.Errorf("reading LeaderWorkerSet %s/%s: %w", namespace, name, err)
		}
		policy, _, _ := unstructured.NestedString(u.Object, "spec", "startupPolicy")
		return policy, nil
	}
}
