package coscheduling

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/custom-scheduler/custom-scheduler/pkg/apis/scheduling/v1alpha1"
)

// statusCoalesceDelay gathers the pod events of a burst (a gang binding) into one status patch.
const statusCoalesceDelay = 250 * time.Millisecond

// statusUpdater keeps PodGroup status (phase, counts, scheduleStartTime, occupiedBy) current, off the
// scheduling cycle, for the groups whose pods name this profile as their scheduler: pod and PodGroup events queue the group's key, a worker recomputes the status
// from a label-selected pod informer (which, unlike the scheduler's, also holds finished pods) and
// sends a merge patch of the status subresource only when something changed. Keys are deduplicated
// and delayed, so a burst of events costs one patch; failures are retried with back-off.
type statusUpdater struct {
	client     *podGroupClient
	podGroups  podGroupLister
	factory    informers.SharedInformerFactory
	pods       cache.SharedIndexInformer
	queue      workqueue.TypedRateLimitingInterface[string]
	clock      clock.Clock
	attempting func(key string) bool
	profile    string
}

func newStatusUpdater(cs kubernetes.Interface, client *podGroupClient, podGroups podGroupLister, clk clock.Clock, attempting func(string) bool, profile string) *statusUpdater {
	factory := informers.NewSharedInformerFactoryWithOptions(cs, 0, informers.WithTweakListOptions(func(o *metav1.ListOptions) {
		o.LabelSelector = v1alpha1.PodGroupLabel
	}))
	pods := factory.Core().V1().Pods().Informer()
	utilruntime.Must(pods.AddIndexers(cache.Indexers{podGroupIndex: podGroupIndexFunc}))
	return &statusUpdater{
		client:    client,
		podGroups: podGroups,
		factory:   factory,
		pods:      pods,
		queue: workqueue.NewTypedRateLimitingQueueWithConfig(workqueue.DefaultTypedControllerRateLimiter[string](),
			workqueue.TypedRateLimitingQueueConfig[string]{Name: "coscheduling-podgroup-status"}),
		clock:      clk,
		attempting: attempting,
		profile:    profile,
	}
}

func (u *statusUpdater) enqueue(key string) { u.queue.AddAfter(key, statusCoalesceDelay) }

// run starts the pod informer and one worker until ctx ends.
func (u *statusUpdater) run(ctx context.Context) {
	logger := klog.FromContext(ctx).WithName("podgroup-status")
	defer u.queue.ShutDown()
	onPod := func(obj interface{}) {
		if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
			obj = tomb.Obj
		}
		if keys, _ := podGroupIndexFunc(obj); len(keys) == 1 {
			u.enqueue(keys[0])
		}
	}
	if _, err := u.pods.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    onPod,
		UpdateFunc: func(_, obj interface{}) { onPod(obj) },
		DeleteFunc: onPod,
	}); err != nil {
		logger.Error(err, "PodGroup status updates are off")
		return
	}
	u.factory.Start(ctx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), u.pods.HasSynced) {
		return
	}
	for _, obj := range u.podGroups.store.List() {
		if pg, ok := obj.(*v1alpha1.PodGroup); ok {
			u.enqueue(groupKey(pg.Namespace, pg.Name))
		}
	}
	logger.V(2).Info("PodGroup status updater started")
	go wait.UntilWithContext(ctx, func(ctx context.Context) {
		for u.processNext(ctx, logger) {
		}
	}, time.Second)
	<-ctx.Done()
	u.factory.Shutdown()
}

func (u *statusUpdater) processNext(ctx context.Context, logger klog.Logger) bool {
	key, quit := u.queue.Get()
	if quit {
		return false
	}
	defer u.queue.Done(key)
	if err := u.sync(ctx, key); err != nil {
		statusUpdates.WithLabelValues(u.profile, "error").Inc()
		logger.V(2).Info("Updating PodGroup status failed; retrying", "podGroup", key, "err", err)
		u.queue.AddRateLimited(key)
		return true
	}
	u.queue.Forget(key)
	return true
}

// sync patches one PodGroup's status if it changed.
func (u *statusUpdater) sync(ctx context.Context, key string) error {
	namespace, name, ok := strings.Cut(key, "/")
	if !ok {
		return nil
	}
	pg := u.podGroups.get(namespace, name)
	if pg == nil {
		return nil
	}
	objs, err := u.pods.GetIndexer().ByIndex(podGroupIndex, key)
	if err != nil {
		return err
	}
	pods := make([]*v1.Pod, 0, len(objs))
	for _, o := range objs {
		if p, ok := o.(*v1.Pod); ok && p.Spec.SchedulerName == u.profile {
			pods = append(pods, p)
		}
	}
	if len(pods) == 0 {
		// Not a group of this profile (yet): leave its status to whoever schedules it.
		return nil
	}
	want := computeStatus(pg, pods, u.attempting(key), u.clock.Now())
	if statusEqual(want, pg.Status) {
		return nil
	}
	patch, err := json.Marshal(map[string]any{"status": statusPatch(want)})
	if err != nil {
		return err
	}
	if err := u.client.patchStatus(ctx, namespace, name, patch); err != nil {
		return fmt.Errorf("patching the status of PodGroup %s: %w", key, err)
	}
	statusUpdates.WithLabelValues(u.profile, "success").Inc()
	return nil
}

// computeStatus derives a PodGroup's status from its pods. attempting says the scheduler holds
// members at Permit right now.
func computeStatus(pg *v1alpha1.PodGroup, pods []*v1.Pod, attempting bool, now time.Time) v1alpha1.PodGroupStatus {
	st := v1alpha1.PodGroupStatus{OccupiedBy: pg.Status.OccupiedBy, ScheduleStartTime: pg.Status.ScheduleStartTime}
	for _, p := range pods {
		if p.Spec.NodeName != "" {
			st.Scheduled++
		}
		switch p.Status.Phase {
		case v1.PodRunning:
			st.Running++
		case v1.PodSucceeded:
			st.Succeeded++
		case v1.PodFailed:
			st.Failed++
		}
		if st.OccupiedBy == "" {
			if ref := metav1.GetControllerOf(p); ref != nil {
				st.OccupiedBy = string(ref.UID)
			}
		}
	}
	want := int32(minMember(pg))
	switch {
	case st.Succeeded >= want:
		st.Phase = v1alpha1.PodGroupFinished
	case st.Running+st.Succeeded >= want:
		st.Phase = v1alpha1.PodGroupRunning
	case st.Failed > 0 && st.Failed+st.Running+st.Succeeded >= want:
		st.Phase = v1alpha1.PodGroupFailed
	case st.Scheduled >= want:
		st.Phase = v1alpha1.PodGroupScheduled
	case st.Scheduled > 0 || attempting:
		st.Phase = v1alpha1.PodGroupScheduling
	case int32(len(pods)) >= want:
		st.Phase = v1alpha1.PodGroupPreScheduling
	default:
		st.Phase = v1alpha1.PodGroupPending
	}
	if st.ScheduleStartTime.IsZero() && st.Phase != v1alpha1.PodGroupPending && st.Phase != v1alpha1.PodGroupPreScheduling {
		st.ScheduleStartTime = metav1.NewTime(now.Truncate(time.Second))
	}
	return st
}

func statusEqual(a, b v1alpha1.PodGroupStatus) bool {
	return a.Phase == b.Phase && a.OccupiedBy == b.OccupiedBy && a.Scheduled == b.Scheduled && a.Running == b.Running &&
		a.Succeeded == b.Succeeded && a.Failed == b.Failed && a.ScheduleStartTime.Equal(&b.ScheduleStartTime)
}

// statusPatch spells every field out, zeros included, so the merge patch overwrites stale counts.
func statusPatch(st v1alpha1.PodGroupStatus) map[string]any {
	p := map[string]any{
		"phase":     st.Phase,
		"scheduled": st.Scheduled,
		"running":   st.Running,
		"succeeded": st.Succeeded,
		"failed":    st.Failed,
	}
	if st.OccupiedBy != "" {
		p["occupiedBy"] = st.OccupiedBy
	}
	if !st.ScheduleStartTime.IsZero() {
		p["scheduleStartTime"] = st.ScheduleStartTime
	}
	return p
}
