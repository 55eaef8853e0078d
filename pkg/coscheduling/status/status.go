// Package status writes the status of the PodGroups a scheduler profile schedules: phase, member
// counts, the Scheduled and Topology conditions, scheduleStartTime and occupiedBy, from the group's
// pods and a snapshot of the scheduler's attempt (see Attempt), off the scheduling cycle. It also
// reports gangs bound below their quorum for longer than their schedule timeout.
package status

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/custom-scheduler/custom-scheduler/pkg/apis/scheduling/v1alpha1"
	"github.com/custom-scheduler/custom-scheduler/pkg/coscheduling/podgroup"
	"github.com/custom-scheduler/custom-scheduler/pkg/coscheduling/podgroup/pgcache"
	resv "github.com/custom-scheduler/custom-scheduler/pkg/coscheduling/reservation"
	"github.com/custom-scheduler/custom-scheduler/pkg/coscheduling/tree"
	"github.com/custom-scheduler/custom-scheduler/pkg/generated/clientset/versioned"
)

// coalesceDelay gathers the pod events of a burst (a gang binding) into one status patch.
const coalesceDelay = 250 * time.Millisecond

// The types of the PodGroup conditions the scheduler maintains, and the reasons of its own (see
// podgroup/reasons.go, where tools that read the status find them without the plugin).
const (
	ConditionScheduled = podgroup.ConditionScheduled
	ConditionTopology  = podgroup.ConditionTopology
	ConditionReserved  = podgroup.ConditionReserved
	ReasonRoomHeld     = podgroup.ReasonRoomHeld
)

// ReasonPending is the Scheduled condition's reason while minMember live pods exist and no attempt has
// started or ended yet.
const ReasonPending = podgroup.ReasonPending

// Attempt is what the status needs from the scheduler's in-memory state of a gang.
type Attempt struct {
	// Waiting: members wait at Permit right now.
	Waiting bool
	// Counted: live members reserved in the scheduler or bound; AtPermit: those waiting at Permit.
	Counted, AtPermit int
	// Reason and Message: the last attempt's result (a Scheduled condition reason: GangInfeasible,
	// GangRejected, GangTimedOut, Preempting, QuorumReached), empty while nothing happened yet.
	Reason, Message string
	// PlacementLevel and PlacementMessage: the gang's topology placement, if it has one.
	PlacementLevel, PlacementMessage string
	// Reserved: the gang holds a reservation (ReservedMessage says where); ReservationEnded: how its
	// last one ended (ReservedMessage says why), empty when it had none.
	Reserved                          bool
	ReservationEnded, ReservedMessage string
	// Shortfall: the numbers of a GangInfeasible Reason (nil otherwise).
	Shortfall *v1alpha1.PodGroupShortfall
	// BackoffUntil: when the last back-off ends; ReservedUntil: when a held reservation ends at the
	// latest (zero: none).
	BackoffUntil, ReservedUntil time.Time
}

// Config is what an Updater works from.
type Config struct {
	// Client is the cluster's clientset (for the informer of finished pods); PodGroups patches the
	// PodGroups' status.
	Client    kubernetes.Interface
	PodGroups versioned.Interface
	// Lister reads the PodGroups from the scheduler's PodGroup informer.
	Lister pgcache.Lister
	// Live is the scheduler's pod informer, indexed by podgroup.IndexName (live members only).
	Live  cache.SharedIndexInformer
	Clock clock.Clock
	// Attempt returns the scheduler's state of the group "namespace/name".
	Attempt func(key string) Attempt
	// ScheduleTimeout is the group's schedule timeout (BelowQuorum is reported after it).
	ScheduleTimeout func(*v1alpha1.PodGroup) time.Duration
	// Event records an event on a PodGroup.
	Event func(pg *v1alpha1.PodGroup, eventType, reason, msg string)
	// Profile is the scheduler profile whose pods' groups this updater writes.
	Profile string
	// InTree: the in-tree PodGroups are read too, whose members carry no label: the finished pods
	// are then selected by scheduler name instead.
	InTree bool
	// Children returns the PodGroups directly under a composite of ours (nil: composites get no
	// status of their own).
	Children func(namespace, name string) []*v1alpha1.PodGroup
	// Composites is the informer of the in-tree CompositePodGroups (nil where they are not served:
	// they get no conditions), Trees the plugin's index of the trees they head (see intreecomposite.go).
	Composites cache.SharedIndexInformer
	Trees      *tree.Index
}

// Updater keeps PodGroup status (phase, counts, the Scheduled condition, scheduleStartTime,
// occupiedBy) current, off the scheduling cycle, for the groups whose pods name this profile as their
// scheduler: pod and PodGroup events queue the group's key, a worker recomputes the status from the
// group's pods and the scheduler's attempt state, and sends a merge patch of the status subresource
// only when something changed. Live members come from the scheduler's own pod informer (its
// PodGroup index); finished members (Succeeded, Failed), which that informer drops, come from a
// second informer that lists and watches only finished pods with the PodGroup label (where in-tree
// PodGroups are read, whose members have no label: finished pods of this profile's scheduler). A second
// informer of every gang pod would double the apiserver's pod watch traffic; under load the apiserver
// closes pod watchers that fall behind, and every close costs a full relist of all pods (measured:
// hundreds of closes per benchmark run with such an informer, a handful without). Keys are
// deduplicated and delayed, so a burst of events costs one patch; failures are retried with back-off.
// It runs only in the replica that leads, from the moment it leads (see leader.go), and then
// recomputes every PodGroup once.
//
// It also watches for gangs bound below their quorum: a group with some but fewer than minMember live
// members bound (and not finishing: succeeded members count as placed) is BelowQuorum; once it has
// been so for longer than its schedule timeout, the PodGroup gets a BelowQuorum event and the
// gangs_below_quorum gauge counts it, until it is whole again or gone.
type Updater struct {
	client    versioned.Interface
	kube      kubernetes.Interface
	podGroups pgcache.Lister
	factory   informers.SharedInformerFactory
	// live is the scheduler's pod informer (non-terminal pods, indexed by podgroup.IndexName: live members
	// only); finished holds this updater's finished pods with the PodGroup label, same index name.
	live            cache.SharedIndexInformer
	finished        cache.SharedIndexInformer
	queue           workqueue.TypedRateLimitingInterface[string]
	clock           clock.Clock
	attempt         func(key string) Attempt
	scheduleTimeout func(*v1alpha1.PodGroup) time.Duration
	event           func(pg *v1alpha1.PodGroup, eventType, reason, msg string)
	children        func(namespace, name string) []*v1alpha1.PodGroup
	composites      cache.SharedIndexInformer
	trees           *tree.Index
	profile         string
	// Started is set when the updater's Run starts (see the plugin's leader detection).
	Started atomic.Bool

	mu sync.Mutex
	// belowQuorum holds the groups reported bound below their quorum for longer than their timeout.
	belowQuorum map[string]struct{}
	// inTree is our status of each in-tree group, disrupted the message of those preempted whole
	// (see intree.go).
	inTree    map[string]v1alpha1.PodGroupStatus
	disrupted map[string]string
}

// finishedPodsSelector selects pods that have finished: Succeeded or Failed.
const finishedPodsSelector = "status.phase!=Pending,status.phase!=Running,status.phase!=Unknown"

// New builds the updater; cfg.Live must be indexed by podgroup.IndexName.
func New(cfg Config) *Updater {
	RegisterMetrics()
	factory := informers.NewSharedInformerFactoryWithOptions(cfg.Client, 0, informers.WithTweakListOptions(func(o *metav1.ListOptions) {
		o.LabelSelector, o.FieldSelector = v1alpha1.PodGroupLabel, finishedPodsSelector
		if cfg.InTree {
			o.LabelSelector, o.FieldSelector = "", finishedPodsSelector+",spec.schedulerName="+cfg.Profile
		}
	}))
	finished := factory.Core().V1().Pods().Informer()
	utilruntime.Must(finished.AddIndexers(cache.Indexers{podgroup.IndexName: podgroup.IndexFunc}))
	return &Updater{
		client:    cfg.PodGroups,
		kube:      cfg.Client,
		podGroups: cfg.Lister,
		factory:   factory,
		live:      cfg.Live,
		finished:  finished,
		queue: workqueue.NewTypedRateLimitingQueueWithConfig(workqueue.DefaultTypedControllerRateLimiter[string](),
			workqueue.TypedRateLimitingQueueConfig[string]{Name: "coscheduling-podgroup-status"}),
		clock:           cfg.Clock,
		attempt:         cfg.Attempt,
		scheduleTimeout: cfg.ScheduleTimeout,
		event:           cfg.Event,
		children:        cfg.Children,
		composites:      cfg.Composites,
		trees:           cfg.Trees,
		profile:         cfg.Profile,
		belowQuorum:     map[string]struct{}{},
		inTree:          map[string]v1alpha1.PodGroupStatus{},
		disrupted:       map[string]string{},
	}
}

// Finished is the informer of this profile's finished gang pods (Succeeded, Failed), which the
// scheduler reads too (the finished-member rule).
func (u *Updater) Finished() cache.SharedIndexInformer { return u.finished }

// StartFinished starts the informer of finished pods until ctx ends, without waiting for it; Run
// starts it too (once).
func (u *Updater) StartFinished(ctx context.Context) { u.factory.Start(ctx.Done()) }

// Enqueue asks for the group "namespace/name" to be written (after coalesceDelay).
func (u *Updater) Enqueue(key string) { u.queue.AddAfter(key, coalesceDelay) }

// ShutDown releases the updater's queue (a scheduler that never leads never runs it).
func (u *Updater) ShutDown() { u.queue.ShutDown() }

// Run starts the pod informer and one worker until ctx ends.
func (u *Updater) Run(ctx context.Context) {
	logger := klog.FromContext(ctx).WithName("podgroup-status")
	defer u.queue.ShutDown()
	onPod := func(obj interface{}) {
		if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
			obj = tomb.Obj
		}
		if keys, _ := podgroup.IndexFunc(obj); len(keys) == 1 {
			u.Enqueue(keys[0])
		}
	}
	handler := cache.ResourceEventHandlerFuncs{
		AddFunc:    onPod,
		UpdateFunc: func(_, obj interface{}) { onPod(obj) },
		DeleteFunc: onPod,
	}
	// The scheduler's informer: a member that finishes leaves it with a delete (and joins the finished
	// informer with an add); both queue the group.
	// Only this profile's pods: another scheduler's never change our status (GroupPods leaves them
	// out), and on a cluster where every Job's pods name an in-tree PodGroup, theirs would queue a
	// sync of every such group on every pod event.
	ours := func(obj interface{}) bool {
		if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
			obj = tomb.Obj
		}
		pod, ok := obj.(*v1.Pod)
		return ok && pod.Spec.SchedulerName == u.profile && pgcache.IsGangPod(pod)
	}
	liveReg, err := u.live.AddEventHandler(cache.FilteringResourceEventHandler{FilterFunc: ours, Handler: handler})
	if err != nil {
		logger.Error(err, "PodGroup status updates are off")
		return
	}
	defer func() { _ = u.live.RemoveEventHandler(liveReg) }()
	if _, err := u.finished.AddEventHandler(handler); err != nil {
		logger.Error(err, "PodGroup status updates are off")
		return
	}
	synced := []cache.InformerSynced{u.live.HasSynced, liveReg.HasSynced, u.finished.HasSynced}
	if u.composites != nil && u.trees != nil {
		// An in-tree composite's own events (made, its spec or conditions changed) queue it too.
		reg, err := u.composites.AddEventHandler(cache.ResourceEventHandlerFuncs{
			AddFunc:    u.enqueueComposite,
			UpdateFunc: func(_, obj interface{}) { u.enqueueComposite(obj) },
			DeleteFunc: u.enqueueComposite,
		})
		if err != nil {
			logger.Error(err, "PodGroup status updates are off")
			return
		}
		defer func() { _ = u.composites.RemoveEventHandler(reg) }()
		synced = append(synced, reg.HasSynced)
	}
	u.factory.Start(ctx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), synced...) {
		return
	}
	// Every existing PodGroup (and in-tree composite) once: after a failover, the new leader's view
	// replaces whatever the previous leader last wrote.
	for _, pg := range u.podGroups.List() {
		u.queue.Add(podgroup.Key(pg.Namespace, pg.Name))
	}
	if u.composites != nil && u.trees != nil {
		for _, obj := range u.composites.GetStore().List() {
			u.enqueueComposite(obj)
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

func (u *Updater) processNext(ctx context.Context, logger klog.Logger) bool {
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

// sync patches one PodGroup's status if it changed, and follows a gang bound below its quorum.
func (u *Updater) sync(ctx context.Context, key string) error {
	namespace, name, ok := strings.Cut(key, "/")
	if !ok {
		return nil
	}
	now := u.clock.Now()
	if bare, ok := strings.CutPrefix(name, tree.InTreeCompositePrefix); ok {
		return u.syncComposite(ctx, namespace, bare, now)
	}
	pg := u.podGroups.Get(namespace, name)
	if pg == nil {
		u.setBelowQuorum(key, false)
		u.forgetInTree(key)
		return nil
	}
	if parent := pg.Annotations[tree.AnnotationParent]; parent != "" && (!podgroup.IsInTree(pg) || u.writesComposites()) {
		u.Enqueue(podgroup.Key(namespace, parent)) // its composite's status follows from this group's
	}
	if _, ok := compositeNode(pg); ok && u.children != nil {
		// Written by the profile whose pods are under it (another profile's updater, whose children
		// it would read from their written status only, leaves it alone).
		want, ours, err := u.statusOf(pg, now, 0)
		if err != nil || !ours || statusEqual(want, pg.Status) {
			return err
		}
		return u.patch(ctx, key, want)
	}
	pods, err := u.podsOf(namespace, name)
	if err != nil {
		return err
	}
	if podgroup.IsInTree(pg) {
		// Written only on our word (a placement, a failed attempt, a preemption; see intree.go):
		// a group without pods gets nothing, and a group preempted whole has no live pods left.
		return u.syncInTree(ctx, key, pg, pods, now)
	}
	if len(pods) == 0 {
		// Not a group of this profile (yet): leave its status to whoever schedules it, but for a
		// reservation nobody holds any more.
		u.setBelowQuorum(key, false)
		return u.endStaleReservation(ctx, key, pg, now)
	}
	want := ComputeStatus(pg, pods, u.attempt(key), now)
	u.followBelowQuorum(key, pg, want, now)
	if statusEqual(want, pg.Status) {
		return nil
	}
	return u.patch(ctx, key, want)
}

// podsOf returns the group's pods of this profile, live and finished.
func (u *Updater) podsOf(namespace, name string) ([]*v1.Pod, error) {
	finished, err := u.finished.GetIndexer().ByIndex(podgroup.IndexName, podgroup.Key(namespace, name))
	if err != nil {
		return nil, err
	}
	live, err := u.live.GetIndexer().ByIndex(podgroup.IndexName, podgroup.MemberKey(u.profile, namespace, name))
	if err != nil {
		return nil, err
	}
	return GroupPods(u.profile, finished, live), nil
}

// statusOf is the status of pg as sync computes it: a PodGroup's from its pods (as written while it
// has none of this profile), a composite's from its children's, at most tree.MaxDepth levels down;
// ours says whether a pod of this profile is in pg or under it.
func (u *Updater) statusOf(pg *v1alpha1.PodGroup, now time.Time, depth int) (st v1alpha1.PodGroupStatus, ours bool, err error) {
	if n, ok := compositeNode(pg); ok && u.children != nil && depth <= tree.MaxDepth {
		var kids []Child
		for _, c := range u.children(pg.Namespace, pg.Name) {
			st, mine, err := u.statusOf(c, now, depth+1)
			if err != nil {
				return st, false, err
			}
			ours = ours || mine
			min := podgroup.MinMember(c)
			if cn, ok := compositeNode(c); ok {
				min = cn.Min
			}
			kids = append(kids, Child{Name: c.Name, Min: min, Status: st})
		}
		return ComputeComposite(pg, n.Min, kids, now), ours, nil
	}
	pods, err := u.podsOf(pg.Namespace, pg.Name)
	if err != nil || len(pods) == 0 {
		return pg.Status, false, err
	}
	key := podgroup.Key(pg.Namespace, pg.Name)
	if podgroup.IsInTree(pg) {
		// Our status of an in-tree group is kept in memory (see intree.go).
		own := pg.DeepCopy()
		u.mu.Lock()
		own.Status = u.inTree[key]
		u.mu.Unlock()
		pg = own
	}
	return ComputeStatus(pg, pods, u.attempt(key), now), true, nil
}

// patch writes want as the status of the PodGroup key.
func (u *Updater) patch(ctx context.Context, key string, want v1alpha1.PodGroupStatus) error {
	namespace, name, _ := strings.Cut(key, "/")
	patch, err := json.Marshal(map[string]any{"status": statusPatch(want)})
	if err != nil {
		return err
	}
	if _, err := u.client.SchedulingV1alpha1().PodGroups(namespace).Patch(ctx, name, types.MergePatchType, patch, metav1.PatchOptions{}, "status"); err != nil {
		return fmt.Errorf("patching the status of PodGroup %s: %w", key, err)
	}
	statusUpdates.WithLabelValues(u.profile, "success").Inc()
	return nil
}

// staleReservationGrace is how long past its reservedUntil a reservation shown on a group without
// pods is left before the updater ends it (a scheduler that holds it renews reservedUntil first).
const staleReservationGrace = 5 * time.Second

// endStaleReservation turns False the Reserved condition of a group that has no pods of this profile,
// once its reservedUntil has passed by staleReservationGrace and this profile holds no reservation
// for it: no scheduler holds room for such a gang then (a reservation ends at its timeout), and with
// no pods nothing else would write its status again (the gang's pods all deleted while it held room).
// Until then the group is looked at again when that time comes.
func (u *Updater) endStaleReservation(ctx context.Context, key string, pg *v1alpha1.PodGroup, now time.Time) error {
	stale, recheck := staleReservation(pg, u.attempt(key).Reserved, now)
	if recheck > 0 {
		u.queue.AddAfter(key, recheck)
	}
	if !stale {
		return nil
	}
	want := *pg.Status.DeepCopy()
	want.ReservedUntil = nil
	want.Conditions = withCondition(want.Conditions, metav1.Condition{Type: ConditionReserved, Status: metav1.ConditionFalse,
		Reason: resv.EndBelowMinMember, ObservedGeneration: pg.Generation,
		Message: fmt.Sprintf("the reservation ended: 0 of minMember %d live members exist", podgroup.MinMember(pg))}, now)
	patch, err := json.Marshal(map[string]any{"status": statusPatch(want)})
	if err != nil {
		return err
	}
	if _, err := u.client.SchedulingV1alpha1().PodGroups(pg.Namespace).Patch(ctx, pg.Name, types.MergePatchType, patch, metav1.PatchOptions{}, "status"); err != nil {
		return fmt.Errorf("patching the status of PodGroup %s: %w", key, err)
	}
	statusUpdates.WithLabelValues(u.profile, "success").Inc()
	return nil
}

// followBelowQuorum reports a group bound below its quorum once it has been so for longer than its
// schedule timeout (measured from the condition's lastTransitionTime, which survives a failover), and
// checks again when that time comes.
func (u *Updater) followBelowQuorum(key string, pg *v1alpha1.PodGroup, st v1alpha1.PodGroupStatus, now time.Time) {
	c := meta.FindStatusCondition(st.Conditions, ConditionScheduled)
	if c == nil || c.Reason != podgroup.ReasonBelowQuorum {
		u.setBelowQuorum(key, false)
		return
	}
	if due := c.LastTransitionTime.Add(u.scheduleTimeout(pg)); now.Before(due) {
		u.queue.AddAfter(key, due.Sub(now)+coalesceDelay)
		return
	}
	if u.setBelowQuorum(key, true) {
		u.event(pg, v1.EventTypeWarning, podgroup.ReasonBelowQuorum, c.Message+fmt.Sprintf(" for more than %s", u.scheduleTimeout(pg)))
	}
}

// setBelowQuorum records whether a group is reported below its quorum; it returns true when the
// group was not reported before.
func (u *Updater) setBelowQuorum(key string, below bool) bool {
	u.mu.Lock()
	defer u.mu.Unlock()
	_, was := u.belowQuorum[key]
	if below {
		u.belowQuorum[key] = struct{}{}
	} else {
		delete(u.belowQuorum, key)
	}
	gangsBelowQuorum.WithLabelValues(u.profile).Set(float64(len(u.belowQuorum)))
	return below && !was
}
