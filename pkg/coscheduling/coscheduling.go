// Package coscheduling is the Coscheduling plugin: all-or-nothing (gang) scheduling of the pods of a
// PodGroup (scheduling.x-k8s.io/v1alpha1). Members are kept adjacent in the queue, held back while
// their group is incomplete, checked as a whole against the snapshot before the first member holds
// anything, and wait at Permit until minMember of them are reserved or bound; any failure before that
// rejects every waiting member so that what they held is released at once.
package coscheduling

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/events"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework"
	"k8s.io/utils/clock"

	"github.com/custom-scheduler/custom-scheduler/pkg/apis/config"
	"github.com/custom-scheduler/custom-scheduler/pkg/apis/config/validation"
	"github.com/custom-scheduler/custom-scheduler/pkg/apis/scheduling/v1alpha1"
)

// Name is the plugin's name in the registry and in profiles.
const Name = "Coscheduling"

var (
	_ fwk.PreEnqueuePlugin  = &Coscheduling{}
	_ fwk.QueueSortPlugin   = &Coscheduling{}
	_ fwk.PreFilterPlugin   = &Coscheduling{}
	_ fwk.PostFilterPlugin  = &Coscheduling{}
	_ fwk.ReservePlugin     = &Coscheduling{}
	_ fwk.PermitPlugin      = &Coscheduling{}
	_ fwk.EnqueueExtensions = &Coscheduling{}
	_ fwk.SignPlugin        = &Coscheduling{}
)

// Event reasons, on pods.
const (
	// EventPodGroupNotFound: the pod's PodGroup does not exist; the pod waits without holding anything.
	EventPodGroupNotFound = "PodGroupNotFound"
	// EventWaitingForMembers: fewer than minMember pods of the group exist; the pod waits.
	EventWaitingForMembers = "WaitingForMembers"
	// EventGangInfeasible: the nodes' free resources cannot hold the gang; nothing was reserved.
	EventGangInfeasible = "GangInfeasible"
	// EventWaitingForQuorum: the pod is reserved and waits at Permit for the rest of the quorum.
	EventWaitingForQuorum = "WaitingForQuorum"
	// EventQuorumReached: minMember members are reserved or bound; the waiting ones go on to bind.
	EventQuorumReached = "QuorumReached"
	// EventGangRejected: the attempt failed (a member could not be placed or was rejected); every
	// waiting member was rejected and released what it held.
	EventGangRejected = "GangRejected"
	// EventGangTimedOut: the quorum was not reached within the schedule timeout.
	EventGangTimedOut = "GangTimedOut"
)

const (
	// podGroupIndex indexes the scheduler's pods by "namespace/podgroup".
	podGroupIndex = "custom-scheduler/pod-group"
	// rejectedByPreFilterKey marks a cycle whose pod this plugin's PreFilter rejected, for PostFilter.
	rejectedByPreFilterKey fwk.StateKey = Name + "/rejected-by-prefilter"
	// feasibilityCacheTTL bounds how long a feasibility result is reused for the members of one burst.
	feasibilityCacheTTL = 2 * time.Second
	// podGroupSyncTimeout bounds the wait for the PodGroup cache in New.
	podGroupSyncTimeout = time.Minute
)

// Coscheduling is the gang scheduling plugin.
type Coscheduling struct {
	handle   fwk.Handle
	recorder events.EventRecorderLogger
	clock    clock.WithDelayedExecution
	profile  string

	permitTimeout time.Duration
	backoff       time.Duration

	podGroups podGroupLister
	// pods is the scheduler's pod informer store (non-terminal pods), indexed by podGroupIndex. It is
	// the store the scheduling queue's events come from, so PreEnqueue and the hints count members
	// consistently with the event being handled.
	pods cache.Indexer

	mu    sync.RWMutex
	gangs map[string]*gang
	// gated is the last gating reason per pod, so each reason is reported once per pod.
	gated map[types.UID]string
	// waitingGangs counts gangs with at least one member at Permit (the gauge's value).
	waitingGangs int

	// epoch increases on cluster events that free capacity; cached feasibility results from an older
	// epoch are recomputed.
	epoch atomic.Uint64
	// running is set once the scheduling queue calls the plugin; only then may handle.Activate be used.
	running atomic.Bool
	// hintMemo remembers the member count computed for the last pod-add event per group, so the hint
	// for n gated members costs one count, not n.
	hintMemo map[string]hintCount

	// ctx lives as long as the scheduler; background work (status updater, retries) uses it.
	ctx         context.Context
	status      *statusUpdater
	startStatus sync.Once
}

type hintCount struct {
	uid   types.UID
	count int
}

// New builds the plugin: it validates the args, starts a PodGroup informer on the scheduler's
// connection and waits for it to sync, and indexes the scheduler's pods by PodGroup.
func New(ctx context.Context, obj runtime.Object, h fwk.Handle) (fwk.Plugin, error) {
	args, ok := obj.(*config.CoschedulingArgs)
	if !ok {
		return nil, fmt.Errorf("want args of type CoschedulingArgs, got %T", obj)
	}
	if err := validation.ValidateCoschedulingArgs(nil, args); err != nil {
		return nil, err
	}
	logger := klog.FromContext(ctx)
	cfg := h.KubeConfig()
	if cfg == nil {
		return nil, fmt.Errorf("%s needs a connection to the apiserver to read PodGroups", Name)
	}
	client, err := newPodGroupClient(cfg)
	if err != nil {
		return nil, err
	}
	pgInformer := newPodGroupInformer(client)
	podInformer := h.SharedInformerFactory().Core().V1().Pods().Informer()
	if err := addPodGroupIndex(podInformer); err != nil {
		return nil, err
	}

	pl := newPlugin(ctx, h, args, clock.RealClock{}, podGroupLister{store: pgInformer.GetStore()}, podInformer.GetIndexer())
	pl.status = newStatusUpdater(h.ClientSet(), client, pl.podGroups, pl.clock, pl.attempting, pl.profile)
	// The updater's run loop starts with the first gang member and shuts its queue down when it ends;
	// a scheduler that never sees a gang must still release the queue's goroutines when it stops.
	context.AfterFunc(ctx, pl.status.queue.ShutDown)
	if _, err := podInformer.AddEventHandler(pl.podEventHandler()); err != nil {
		return nil, fmt.Errorf("watching pods: %w", err)
	}
	if _, err := pgInformer.AddEventHandler(pl.podGroupEventHandler()); err != nil {
		return nil, fmt.Errorf("watching PodGroups: %w", err)
	}
	go pgInformer.RunWithContext(ctx)
	syncCtx, cancel := context.WithTimeout(ctx, podGroupSyncTimeout)
	defer cancel()
	if !cache.WaitForCacheSync(syncCtx.Done(), pgInformer.HasSynced) {
		return nil, fmt.Errorf("the PodGroup cache (%s.%s) did not sync within %v: install the CRD from manifests/crds and let the scheduler list and watch podgroups",
			podGroupResource, v1alpha1.GroupName, podGroupSyncTimeout)
	}
	logger.V(2).Info("Coscheduling ready", "profile", pl.profile, "permitWaitingTime", pl.permitTimeout, "podGroupBackoff", pl.backoff)
	return pl, nil
}

// newPlugin builds the plugin from its parts without starting anything; tests drive it directly.
func newPlugin(ctx context.Context, h fwk.Handle, args *config.CoschedulingArgs, clk clock.WithDelayedExecution, podGroups podGroupLister, pods cache.Indexer) *Coscheduling {
	RegisterMetrics()
	pl := &Coscheduling{
		handle:        h,
		clock:         clk,
		permitTimeout: time.Duration(args.PermitWaitingTimeSeconds) * time.Second,
		backoff:       time.Duration(args.PodGroupBackoffSeconds) * time.Second,
		podGroups:     podGroups,
		pods:          pods,
		gangs:         map[string]*gang{},
		gated:         map[types.UID]string{},
		hintMemo:      map[string]hintCount{},
		ctx:           ctx,
	}
	if h != nil {
		pl.recorder = h.EventRecorder()
		pl.profile = h.ProfileName()
	}
	return pl
}

// Name returns the plugin's name.
func (pl *Coscheduling) Name() string { return Name }

// EventsToRegister returns the events that can make a gang member schedulable, with hints that only
// requeue the members they concern.
func (pl *Coscheduling) EventsToRegister(_ context.Context) ([]fwk.ClusterEventWithHint, error) {
	return []fwk.ClusterEventWithHint{
		// A new member may complete its group (PreEnqueue counts members). The scheduler reports
		// unscheduled pods added only with the GenericWorkload gate; without it, the plugin's own pod
		// handler activates the group.
		{Event: fwk.ClusterEvent{Resource: fwk.UnscheduledPod, ActionType: fwk.Add}, QueueingHintFn: pl.isSchedulableAfterPodAdded},
		{Event: fwk.ClusterEvent{Resource: fwk.AssignedPod, ActionType: fwk.Add}, QueueingHintFn: pl.isSchedulableAfterPodAdded},
		// Freed capacity may make an infeasible gang fit (this includes reservations released by a
		// rejected gang: the scheduler reports those as assigned pods deleted).
		{Event: fwk.ClusterEvent{Resource: fwk.AssignedPod, ActionType: fwk.Delete | fwk.UpdatePodScaleDown}, QueueingHintFn: pl.isSchedulableAfterCapacityFreed},
		{Event: fwk.ClusterEvent{Resource: fwk.Node, ActionType: fwk.Add | fwk.UpdateNodeAllocatable | fwk.UpdateNodeLabel | fwk.UpdateNodeTaint}, QueueingHintFn: pl.isSchedulableAfterNodeChange},
		// A PodGroup created, or changed (e.g. minMember lowered), may let its members in.
		{Event: fwk.ClusterEvent{Resource: podGroupEventResource, ActionType: fwk.Add | fwk.Update}, QueueingHintFn: pl.isSchedulableAfterPodGroupChange},
	}, nil
}

// PreEnqueue keeps a member out of the scheduling queue, holding nothing, while its PodGroup does not
// exist, fewer than minMember of its pods exist, or the group backs off after a failed attempt.
func (pl *Coscheduling) PreEnqueue(ctx context.Context, pod *v1.Pod) *fwk.Status {
	name, ok := podGroupName(pod)
	if !ok {
		return nil
	}
	pl.running.Store(true)
	key := groupKey(pod.Namespace, name)
	pg := pl.podGroups.get(pod.Namespace, name)
	if pg == nil {
		return pl.gate(ctx, pod, EventPodGroupNotFound,
			fmt.Sprintf("PodGroup %s does not exist; the pod waits for it without holding resources", key))
	}
	if existing, want := pl.countMembers(pod.Namespace, name), minMember(pg); existing < want {
		return pl.gate(ctx, pod, EventWaitingForMembers,
			fmt.Sprintf("%d of minMember %d pods of PodGroup %s exist; the pod waits for the rest without holding resources", existing, want, key))
	}
	if until := pl.backoffUntil(key); pl.clock.Now().Before(until) {
		return pl.gate(ctx, pod, "",
			fmt.Sprintf("PodGroup %s backs off until %s after a failed attempt", key, until.UTC().Format(time.RFC3339)))
	}
	pl.mu.Lock()
	delete(pl.gated, pod.UID)
	pl.mu.Unlock()
	return nil
}

// Less orders the queue by priority, then by the group's timestamp (the PodGroup's creation time, or
// its last failure, which puts a group that just lost behind the others), then by group, then by pod
// creation time and by the time each pod entered the queue. Members of one group are therefore adjacent; pods without a group
// are ordered as PrioritySort orders them.
func (pl *Coscheduling) Less(a, b fwk.QueuedEntityInfo) bool {
	pa, pb := a.GetPriority(), b.GetPriority()
	if pa != pb {
		return pa > pb
	}
	ta, ka := pl.sortKey(a)
	tb, kb := pl.sortKey(b)
	if !ta.Equal(tb) {
		return ta.Before(tb)
	}
	if ka != kb {
		return ka < kb
	}
	if ka != "" {
		// Members of one group: in creation order (a Job's index order), then queue order.
		ca, cb := podOf(a).CreationTimestamp.Time, podOf(b).CreationTimestamp.Time
		if !ca.Equal(cb) {
			return ca.Before(cb)
		}
	}
	return a.GetTimestamp().Before(b.GetTimestamp())
}

// PreFilter checks, once per gang attempt and before any member is reserved, whether the members
// still missing from the quorum fit the snapshot's nodes at once (see checkFeasible). An infeasible
// gang is rejected here, holding nothing, until an event frees capacity.
func (pl *Coscheduling) PreFilter(ctx context.Context, state fwk.CycleState, pod *v1.Pod, nodes []fwk.NodeInfo) (*fwk.PreFilterResult, *fwk.Status) {
	name, ok := podGroupName(pod)
	if !ok {
		return nil, fwk.NewStatus(fwk.Skip)
	}
	pl.running.Store(true)
	pl.startBackground()
	key := groupKey(pod.Namespace, name)
	pg := pl.podGroups.get(pod.Namespace, name)
	if pg == nil {
		return pl.rejectInPreFilter(state, fmt.Sprintf("PodGroup %s does not exist", key))
	}
	want := minMember(pg)
	now := pl.clock.Now()

	pl.mu.Lock()
	g := pl.gangLocked(pod.Namespace, name)
	if g.backingOff(now) {
		until := g.backoffUntil
		pl.mu.Unlock()
		return pl.rejectInPreFilter(state, fmt.Sprintf("PodGroup %s backs off until %s after a failed attempt", key, until.UTC().Format(time.RFC3339)))
	}
	if len(g.members) >= want || len(g.waiting) > 0 {
		// The quorum is met (this is an extra member) or an attempt is under way and was checked.
		pl.mu.Unlock()
		return nil, nil
	}
	pl.mu.Unlock()

	// The first member of an attempt: list the group (outside the lock) and check it as a whole.
	members := pl.membersOf(pod.Namespace, name)
	pl.mu.Lock()
	if len(g.waiting) > 0 {
		pl.mu.Unlock()
		return nil, nil
	}
	var candidates []*v1.Pod
	var counted resources
	countedN := 0
	for _, m := range members {
		if _, isMember := g.members[m.UID]; isMember || m.Spec.NodeName != "" {
			countedN++
			counted = counted.add(podRequests(m))
			continue
		}
		if m.DeletionTimestamp == nil {
			candidates = append(candidates, m)
		}
	}
	countedN = max(countedN, len(g.members))
	ck := feasibilityKey{epoch: pl.epoch.Load(), resourceVersion: pg.ResourceVersion, existing: len(members), counted: countedN}
	if g.feasibility != nil && g.cacheKey.matches(ck) && now.Sub(g.cacheKey.at) < feasibilityCacheTTL {
		res := *g.feasibility
		pl.mu.Unlock()
		if !res.feasible {
			return pl.rejectInPreFilter(state, res.message)
		}
		return nil, nil
	}
	pl.mu.Unlock()

	res := checkFeasible(klog.FromContext(ctx), key, candidates, want-countedN, nodes, pg.Spec.MinResources, counted)
	ck.at = now
	pl.mu.Lock()
	g.feasibility, g.cacheKey = &res, ck
	pl.mu.Unlock()
	if !res.feasible {
		klog.FromContext(ctx).V(3).Info("Gang is infeasible on the current snapshot", "pod", klog.KObj(pod), "podGroup", key, "reason", res.message)
		gangRejections.WithLabelValues(pl.profile, reasonInfeasible).Inc()
		pl.event(pod, v1.EventTypeWarning, EventGangInfeasible, res.message)
		pl.notifyStatus(key)
		return pl.rejectInPreFilter(state, res.message)
	}
	return nil, nil
}

// PreFilterExtensions returns nil: the check does not depend on other pods' placement in the cycle.
func (pl *Coscheduling) PreFilterExtensions() fwk.PreFilterExtensions { return nil }

// SignPod signs every pod with no fragment: this plugin filters no node (its PreFilter accepts or
// rejects the pod as a whole and returns no node subset), so pods that are alike for the other plugins
// may share a batched scheduling result whether or not they belong to a gang.
func (pl *Coscheduling) SignPod(_ context.Context, _ *v1.Pod) ([]fwk.SignFragment, *fwk.Status) {
	return nil, nil
}

// PostFilter runs when a member found no node. If the gang cannot reach its quorum without that
// member, the attempt fails: every waiting member is rejected (releasing what it holds) and the group
// backs off, so that it does not hold resources another gang could use.
func (pl *Coscheduling) PostFilter(ctx context.Context, state fwk.CycleState, pod *v1.Pod, _ fwk.NodeToStatusReader) (*fwk.PostFilterResult, *fwk.Status) {
	name, ok := podGroupName(pod)
	if !ok {
		return nil, fwk.NewStatus(fwk.Unschedulable)
	}
	if _, err := state.Read(rejectedByPreFilterKey); err == nil {
		// Rejected as a whole by PreFilter: nothing is held, and hints requeue the gang.
		return nil, fwk.NewStatus(fwk.Unschedulable)
	}
	key := groupKey(pod.Namespace, name)
	pg := pl.podGroups.get(pod.Namespace, name)
	if pg == nil {
		return nil, fwk.NewStatus(fwk.Unschedulable)
	}
	want := minMember(pg)
	existing := pl.countMembers(pod.Namespace, name)
	now := pl.clock.Now()

	pl.mu.Lock()
	g := pl.gangLocked(pod.Namespace, name)
	if len(g.members) >= want {
		pl.mu.Unlock()
		return nil, fwk.NewStatus(fwk.Unschedulable, fmt.Sprintf("PodGroup %s already has its quorum; only this member waits", key))
	}
	g.unplaced[pod.UID] = struct{}{}
	if existing-len(g.unplaced) >= want {
		// Enough other members exist to reach the quorum without those that found no node.
		pl.mu.Unlock()
		return nil, fwk.NewStatus(fwk.Unschedulable)
	}
	msg := fmt.Sprintf("PodGroup %s rejected: member %s cannot be placed, so the quorum of %d cannot be reached now", key, klog.KObj(pod), want)
	victims := pl.failAttemptLocked(g, now)
	pl.mu.Unlock()

	klog.FromContext(ctx).V(3).Info("Gang attempt failed: a member found no node", "pod", klog.KObj(pod), "podGroup", key, "rejectedWaiting", len(victims))
	gangRejections.WithLabelValues(pl.profile, reasonMemberUnschedulable).Inc()
	pl.rejectWaiting(victims, msg)
	pl.event(pod, v1.EventTypeWarning, EventGangRejected, msg)
	for _, v := range victims {
		pl.event(v, v1.EventTypeWarning, EventGangRejected, msg)
	}
	pl.notifyStatus(key)
	return nil, fwk.NewStatus(fwk.Unschedulable, msg)
}

// Reserve counts the member toward its group's quorum and starts an attempt when none is under way.
// A member of a group that backs off is refused, so a late member cannot hold resources alone.
func (pl *Coscheduling) Reserve(_ context.Context, _ fwk.CycleState, pod *v1.Pod, _ string) *fwk.Status {
	name, ok := podGroupName(pod)
	if !ok {
		return nil
	}
	key := groupKey(pod.Namespace, name)
	pg := pl.podGroups.get(pod.Namespace, name)
	if pg == nil {
		return fwk.NewStatus(fwk.Unschedulable, fmt.Sprintf("PodGroup %s does not exist", key))
	}
	want := minMember(pg)
	now := pl.clock.Now()
	pl.mu.Lock()
	defer pl.mu.Unlock()
	g := pl.gangLocked(pod.Namespace, name)
	if g.backingOff(now) {
		return fwk.NewStatus(fwk.Unschedulable, fmt.Sprintf("PodGroup %s backs off after a failed attempt", key))
	}
	if len(g.waiting) == 0 && len(g.members) < want {
		g.attemptStart = now
		g.deadline = now.Add(pl.scheduleTimeout(pg))
		g.quorumMet, g.failed, g.activated = false, false, false
		g.needsQuorum = true
	}
	g.set(pod.UID, reserved)
	delete(g.unplaced, pod.UID)
	return nil
}

// Unreserve undoes Reserve. Before the quorum is met, a member leaving (rejected, timed out, deleted,
// or failed by a later plugin) fails the whole attempt: every other waiting member is rejected so the
// resources they hold are released at once, and the group backs off.
func (pl *Coscheduling) Unreserve(ctx context.Context, _ fwk.CycleState, pod *v1.Pod, _ string) {
	name, ok := podGroupName(pod)
	if !ok {
		return
	}
	key := groupKey(pod.Namespace, name)
	now := pl.clock.Now()
	pl.mu.Lock()
	g := pl.gangs[key]
	if g == nil {
		pl.mu.Unlock()
		return
	}
	wasWaiting := pl.removeWaitingLocked(g, pod.UID)
	wasReserved := g.clear(pod.UID, reserved)
	if (!wasWaiting && !wasReserved) || g.quorumMet || g.failed {
		// Never reserved here, a bind failure after the quorum (the member retries and is let
		// through at once), or the echo of a rejection this plugin made.
		pl.mu.Unlock()
		return
	}
	timedOut := !g.deadline.IsZero() && !now.Before(g.deadline)
	count, attemptStart := len(g.members), g.attemptStart
	victims := pl.failAttemptLocked(g, now)
	pl.mu.Unlock()

	var msg, reason, metricReason string
	if timedOut {
		msg = fmt.Sprintf("PodGroup %s timed out: %d members were reserved or bound within %s, fewer than minMember; all waiting members were rejected",
			key, count+1, now.Sub(attemptStart).Round(time.Second))
		reason, metricReason = EventGangTimedOut, reasonTimeout
		gangTimeouts.WithLabelValues(pl.profile).Inc()
	} else {
		msg = fmt.Sprintf("PodGroup %s rejected: member %s left the attempt before the quorum was reached; all waiting members were rejected", key, klog.KObj(pod))
		reason, metricReason = EventGangRejected, reasonMemberRejected
	}
	klog.FromContext(ctx).V(3).Info("Gang attempt failed", "pod", klog.KObj(pod), "podGroup", key, "timedOut", timedOut, "rejectedWaiting", len(victims))
	gangRejections.WithLabelValues(pl.profile, metricReason).Inc()
	pl.rejectWaiting(victims, msg)
	pl.event(pod, v1.EventTypeWarning, reason, msg)
	for _, v := range victims {
		pl.event(v, v1.EventTypeWarning, reason, msg)
	}
	pl.notifyStatus(key)
}

// Permit lets a member through once minMember members of its group are reserved or bound, and then
// allows every waiting member at once; until then the member waits, up to the group's deadline. The
// count is a map length, so Permit is O(1) apart from the members it releases.
func (pl *Coscheduling) Permit(ctx context.Context, state fwk.CycleState, pod *v1.Pod, _ string) (*fwk.Status, time.Duration) {
	name, ok := podGroupName(pod)
	if !ok {
		return nil, 0
	}
	key := groupKey(pod.Namespace, name)
	pg := pl.podGroups.get(pod.Namespace, name)
	if pg == nil {
		return fwk.NewStatus(fwk.Unschedulable, fmt.Sprintf("PodGroup %s was deleted", key)), 0
	}
	want := minMember(pg)
	now := pl.clock.Now()

	pl.mu.Lock()
	g := pl.gangLocked(pod.Namespace, name)
	count := len(g.members)
	if count >= want {
		first := !g.quorumMet && g.needsQuorum
		g.quorumMet = true
		clear(g.unplaced)
		allowed := pl.takeWaitingLocked(g)
		start := g.attemptStart
		pl.mu.Unlock()
		for _, w := range allowed {
			if wp := pl.handle.GetWaitingPod(w.UID); wp != nil {
				wp.Allow(Name)
			}
		}
		if first {
			timeToQuorum.WithLabelValues(pl.profile).Observe(now.Sub(start).Seconds())
			msg := fmt.Sprintf("PodGroup %s reached its quorum: %d of minMember %d members reserved or bound; %d waiting members go on to bind",
				key, count, want, len(allowed))
			klog.FromContext(ctx).V(3).Info("Gang reached its quorum", "pod", klog.KObj(pod), "podGroup", key, "members", count, "allowed", len(allowed))
			pl.event(pod, v1.EventTypeNormal, EventQuorumReached, msg)
			pl.notifyStatus(key)
		}
		return nil, 0
	}
	if g.failed {
		pl.mu.Unlock()
		return fwk.NewStatus(fwk.Unschedulable, fmt.Sprintf("PodGroup %s was rejected in this attempt", key)), 0
	}
	remaining := g.deadline.Sub(now)
	if remaining <= 0 {
		pl.mu.Unlock()
		return fwk.NewStatus(fwk.Unschedulable, fmt.Sprintf("PodGroup %s timed out waiting for its quorum", key)), 0
	}
	pl.addWaitingLocked(g, pod)
	activate := !g.activated
	g.activated = true
	pl.mu.Unlock()

	if activate {
		// The attempt has begun: bring the group's other unscheduled members forward so they are
		// tried next, together, instead of whenever their own back-off ends.
		pl.activateSiblings(state, pod)
		pl.notifyStatus(key)
	}
	msg := fmt.Sprintf("%d of minMember %d members of PodGroup %s are reserved or bound; waiting up to %s for the rest",
		count, want, key, remaining.Round(time.Second))
	pl.event(pod, v1.EventTypeNormal, EventWaitingForQuorum, msg)
	return fwk.NewStatus(fwk.Wait, msg), remaining
}

// --- helpers ---

// scheduleTimeout is the PodGroup's spec.scheduleTimeoutSeconds, else the plugin's default, capped at
// the framework's 15-minute limit.
func (pl *Coscheduling) scheduleTimeout(pg *v1alpha1.PodGroup) time.Duration {
	d := pl.permitTimeout
	if s := pg.Spec.ScheduleTimeoutSeconds; s != nil && *s > 0 {
		d = time.Duration(*s) * time.Second
	}
	return min(d, 15*time.Minute)
}

// gangLocked returns the group's state, creating it. Callers hold pl.mu.
func (pl *Coscheduling) gangLocked(namespace, name string) *gang {
	key := groupKey(namespace, name)
	g := pl.gangs[key]
	if g == nil {
		g = newGang(namespace, name)
		pl.gangs[key] = g
	}
	return g
}

func (pl *Coscheduling) addWaitingLocked(g *gang, pod *v1.Pod) {
	if len(g.waiting) == 0 {
		pl.waitingGangs++
		gangsWaiting.WithLabelValues(pl.profile).Set(float64(pl.waitingGangs))
	}
	g.waiting[pod.UID] = pod
}

func (pl *Coscheduling) removeWaitingLocked(g *gang, uid types.UID) bool {
	if _, ok := g.waiting[uid]; !ok {
		return false
	}
	delete(g.waiting, uid)
	if len(g.waiting) == 0 {
		pl.waitingGangs--
		gangsWaiting.WithLabelValues(pl.profile).Set(float64(pl.waitingGangs))
	}
	return true
}

// takeWaitingLocked empties the group's waiting set and returns what it held.
func (pl *Coscheduling) takeWaitingLocked(g *gang) []*v1.Pod {
	if len(g.waiting) == 0 {
		return nil
	}
	out := make([]*v1.Pod, 0, len(g.waiting))
	for _, p := range g.waiting {
		out = append(out, p)
	}
	g.waiting = map[types.UID]*v1.Pod{}
	pl.waitingGangs--
	gangsWaiting.WithLabelValues(pl.profile).Set(float64(pl.waitingGangs))
	return out
}

// failAttemptLocked marks the attempt failed, starts the back-off and returns the waiting members to
// reject. Callers hold pl.mu and reject the members after releasing it.
func (pl *Coscheduling) failAttemptLocked(g *gang, now time.Time) []*v1.Pod {
	g.failed = true
	clear(g.unplaced)
	victims := pl.takeWaitingLocked(g)
	// The victims stop counting now, not when their own Unreserve runs (asynchronously, in their
	// binding cycles): a member reserved meanwhile must not see them as part of a quorum.
	for _, v := range victims {
		g.clear(v.UID, reserved)
	}
	g.feasibility = nil
	g.lastFailure = now
	if pl.backoff > 0 {
		g.backoffUntil = now.Add(pl.backoff)
		if g.backoffTimer != nil {
			g.backoffTimer.Stop()
		}
		namespace, name := g.namespace, g.name
		g.backoffTimer = pl.clock.AfterFunc(pl.backoff, func() { pl.activateGroup(namespace, name) })
	}
	return victims
}

// rejectWaiting rejects waiting members. A member whose Permit returned Wait but that the framework
// has not registered as waiting yet is retried briefly, so no straggler holds resources until its
// own timeout.
func (pl *Coscheduling) rejectWaiting(pods []*v1.Pod, msg string) {
	for _, p := range pods {
		if wp := pl.handle.GetWaitingPod(p.UID); wp != nil {
			wp.Reject(Name, msg)
			continue
		}
		uid := p.UID
		go func() {
			_ = wait.PollUntilContextTimeout(pl.ctx, 20*time.Millisecond, 2*time.Second, false, func(context.Context) (bool, error) {
				if wp := pl.handle.GetWaitingPod(uid); wp != nil {
					wp.Reject(Name, msg)
					return true, nil
				}
				return false, nil
			})
		}()
	}
}

// activateSiblings asks the framework to move the group's other unscheduled members to the active
// queue at the end of this scheduling cycle.
func (pl *Coscheduling) activateSiblings(state fwk.CycleState, pod *v1.Pod) {
	name, _ := podGroupName(pod)
	data, err := state.Read(framework.PodsToActivateKey)
	if err != nil {
		return
	}
	toActivate, ok := data.(*framework.PodsToActivate)
	if !ok {
		return
	}
	pods := pl.unscheduledMembers(pod.Namespace, name, pod.UID)
	if len(pods) == 0 {
		return
	}
	toActivate.Lock()
	defer toActivate.Unlock()
	for _, p := range pods {
		toActivate.Map[p.Namespace+"/"+p.Name] = p
	}
}

// activateGroup moves the group's unscheduled members to the active queue (after a back-off, or when
// the PodGroup appears or changes). PreEnqueue runs again on the way.
func (pl *Coscheduling) activateGroup(namespace, name string) {
	if !pl.running.Load() {
		return
	}
	pods := pl.unscheduledMembers(namespace, name, "")
	if len(pods) == 0 {
		return
	}
	m := make(map[string]*v1.Pod, len(pods))
	for _, p := range pods {
		m[p.Namespace+"/"+p.Name] = p
	}
	pl.handle.Activate(klog.FromContext(pl.ctx), m)
}

// unscheduledMembers are the group's pods without a node and not reserved here, except one.
func (pl *Coscheduling) unscheduledMembers(namespace, name string, except types.UID) []*v1.Pod {
	members := pl.membersOf(namespace, name)
	pl.mu.RLock()
	g := pl.gangs[groupKey(namespace, name)]
	var out []*v1.Pod
	for _, p := range members {
		if p.UID == except || p.Spec.NodeName != "" {
			continue
		}
		if g != nil {
			if _, isMember := g.members[p.UID]; isMember {
				continue
			}
		}
		out = append(out, p)
	}
	pl.mu.RUnlock()
	return out
}

// membersOf lists the group's non-terminal pods from the scheduler's pod cache.
func (pl *Coscheduling) membersOf(namespace, name string) []*v1.Pod {
	objs, err := pl.pods.ByIndex(podGroupIndex, groupKey(namespace, name))
	if err != nil {
		return nil
	}
	out := make([]*v1.Pod, 0, len(objs))
	for _, o := range objs {
		if p, ok := o.(*v1.Pod); ok {
			out = append(out, p)
		}
	}
	return out
}

// countMembers counts the group's non-terminal pods.
func (pl *Coscheduling) countMembers(namespace, name string) int {
	keys, err := pl.pods.IndexKeys(podGroupIndex, groupKey(namespace, name))
	if err != nil {
		return 0
	}
	return len(keys)
}

func (pl *Coscheduling) backoffUntil(key string) time.Time {
	pl.mu.RLock()
	defer pl.mu.RUnlock()
	if g := pl.gangs[key]; g != nil {
		return g.backoffUntil
	}
	return time.Time{}
}

// attempting reports whether the group has members waiting at Permit, for the status updater.
func (pl *Coscheduling) attempting(key string) bool {
	pl.mu.RLock()
	defer pl.mu.RUnlock()
	g := pl.gangs[key]
	return g != nil && len(g.waiting) > 0
}

// podOf returns the pod of a queued pod entity, or nil for other entities (in-tree pod groups).
func podOf(e fwk.QueuedEntityInfo) *v1.Pod {
	if withPod, ok := e.(interface{ GetPodInfo() fwk.PodInfo }); ok {
		return withPod.GetPodInfo().GetPod()
	}
	return nil
}

// sortKey is an entity's group timestamp and group key for Less.
func (pl *Coscheduling) sortKey(e fwk.QueuedEntityInfo) (time.Time, string) {
	pod := podOf(e)
	if pod == nil {
		return e.GetTimestamp(), ""
	}
	name, ok := podGroupName(pod)
	if !ok {
		return e.GetTimestamp(), ""
	}
	key := groupKey(pod.Namespace, name)
	pl.mu.RLock()
	var lastFailure time.Time
	if g := pl.gangs[key]; g != nil {
		lastFailure = g.lastFailure
	}
	pl.mu.RUnlock()
	if !lastFailure.IsZero() {
		return lastFailure, key
	}
	if pg := pl.podGroups.get(pod.Namespace, name); pg != nil {
		return pg.CreationTimestamp.Time, key
	}
	return e.GetTimestamp(), key
}

// gate reports a member held back by PreEnqueue: the status message always, an event once per reason.
func (pl *Coscheduling) gate(ctx context.Context, pod *v1.Pod, reason, msg string) *fwk.Status {
	if reason != "" {
		pl.mu.Lock()
		changed := pl.gated[pod.UID] != reason
		pl.gated[pod.UID] = reason
		pl.mu.Unlock()
		if changed {
			klog.FromContext(ctx).V(4).Info("Gang member held back", "pod", klog.KObj(pod), "reason", reason)
			pl.event(pod, v1.EventTypeNormal, reason, msg)
		}
	}
	return fwk.NewStatus(fwk.UnschedulableAndUnresolvable, msg)
}

func (pl *Coscheduling) rejectInPreFilter(state fwk.CycleState, msg string) (*fwk.PreFilterResult, *fwk.Status) {
	state.Write(rejectedByPreFilterKey, rejectedMark{})
	return nil, fwk.NewStatus(fwk.UnschedulableAndUnresolvable, msg)
}

type rejectedMark struct{}

func (rejectedMark) Clone() fwk.StateData { return rejectedMark{} }

func (pl *Coscheduling) event(pod *v1.Pod, eventType, reason, msg string) {
	if pl.recorder == nil {
		return
	}
	pl.recorder.Eventf(pod, nil, eventType, reason, "Scheduling", "%s", msg)
}

func (pl *Coscheduling) notifyStatus(key string) {
	if pl.status != nil {
		pl.status.enqueue(key)
	}
}

// startBackground starts the status updater on the first scheduling cycle of a gang member, i.e. only
// in the scheduler that leads.
func (pl *Coscheduling) startBackground() {
	if pl.status == nil {
		return
	}
	pl.startStatus.Do(func() {
		go pl.status.run(pl.ctx)
	})
}

func (k feasibilityKey) matches(o feasibilityKey) bool {
	return k.epoch == o.epoch && k.resourceVersion == o.resourceVersion && k.existing == o.existing && k.counted == o.counted
}
