// Package coscheduling is the Coscheduling plugin: all-or-nothing (gang) scheduling of the pods of a
// PodGroup (scheduling.x-k8s.io/v1alpha1). Members are kept adjacent in the queue, held back while
// their group is incomplete, checked as a whole against the snapshot before the first member holds
// anything, and wait at Permit until minMember live members are reserved or bound; any failure before
// that rejects every waiting member so that what they held is released at once.
package coscheduling

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/custom-scheduler/custom-scheduler/pkg/coscheduling/claims"

	"github.com/custom-scheduler/custom-scheduler/pkg/coscheduling/attempt"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/events"
	corev1helpers "k8s.io/component-helpers/scheduling/corev1"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/utils/clock"

	"github.com/custom-scheduler/custom-scheduler/pkg/apis/config"
	"github.com/custom-scheduler/custom-scheduler/pkg/apis/config/validation"
	"github.com/custom-scheduler/custom-scheduler/pkg/apis/scheduling/v1alpha1"
	"github.com/custom-scheduler/custom-scheduler/pkg/coscheduling/gang"
	"github.com/custom-scheduler/custom-scheduler/pkg/coscheduling/gangfit"
	"github.com/custom-scheduler/custom-scheduler/pkg/coscheduling/gangpreemption"
	"github.com/custom-scheduler/custom-scheduler/pkg/coscheduling/podgroup"
	"github.com/custom-scheduler/custom-scheduler/pkg/coscheduling/podgroup/pgcache"
	resv "github.com/custom-scheduler/custom-scheduler/pkg/coscheduling/reservation"
	"github.com/custom-scheduler/custom-scheduler/pkg/coscheduling/status"
)

// Name is the plugin's name in the registry and in profiles.
const Name = "Coscheduling"

var (
	_ fwk.PreEnqueuePlugin  = &Coscheduling{}
	_ fwk.QueueSortPlugin   = &Coscheduling{}
	_ fwk.PreFilterPlugin   = &Coscheduling{}
	_ fwk.FilterPlugin      = &Coscheduling{}
	_ fwk.PostFilterPlugin  = &Coscheduling{}
	_ fwk.ReservePlugin     = &Coscheduling{}
	_ fwk.PermitPlugin      = &Coscheduling{}
	_ fwk.EnqueueExtensions = &Coscheduling{}
	_ fwk.SignPlugin        = &Coscheduling{}
)

// Event reasons. The same words are the reasons of the PodGroup's Scheduled condition.
const (
	// EventPodGroupNotFound (pod): the pod's PodGroup does not exist; the pod waits without holding anything.
	EventPodGroupNotFound = "PodGroupNotFound"
	// EventWaitingForMembers (pod, PodGroup): fewer than minMember live pods of the group exist.
	EventWaitingForMembers = podgroup.ReasonWaitingForMembers
	// EventGangInfeasible (PodGroup): the nodes' free resources cannot hold the gang; nothing was reserved.
	EventGangInfeasible = "GangInfeasible"
	// EventWaitingForQuorum (PodGroup): an attempt has been under way for gateEventDelay; its members
	// are reserved one by one and wait at Permit for the rest of the quorum.
	EventWaitingForQuorum = podgroup.ReasonWaitingForQuorum
	// EventQuorumReached (PodGroup): minMember live members are reserved or bound; the waiting ones
	// go on to bind.
	EventQuorumReached = podgroup.ReasonQuorumReached
	// EventGangRejected (pod, PodGroup): the attempt failed (a member could not be placed, was
	// rejected, or the PodGroup was deleted); every waiting member was rejected and released what it held.
	EventGangRejected = podgroup.ReasonGangRejected
	// EventGangTimedOut (pod, PodGroup): the quorum was not reached within the schedule timeout.
	EventGangTimedOut = podgroup.ReasonGangTimedOut
	// EventDomainChosen (PodGroup): a gang with a topology policy was given a domain for its attempt;
	// the message says which and at which level of the policy.
	EventDomainChosen = "DomainChosen"
	// EventInvalidTopologyPolicy (pod): the member's topology annotations are malformed; it is not
	// placed until they are fixed.
	EventInvalidTopologyPolicy = "InvalidTopologyPolicy"
	// EventBelowQuorum (PodGroup): some but fewer than minMember live members have been bound for
	// longer than the group's schedule timeout (e.g. a member's bind failed after the quorum and it
	// cannot be placed again, or members were evicted).
	EventBelowQuorum = podgroup.ReasonBelowQuorum
	// EventPreempting (PodGroup): the gang did not fit, so lower-priority pods (whole gangs among them)
	// are being preempted to make room for it; its members are nominated to the freed nodes and the
	// gang is placed once the victims are gone.
	EventPreempting = "Preempting"
	// EventReserved (PodGroup): the gang waited reservation.afterSeconds for room, and now holds the
	// room that frees on the nodes its missing members will use (its members are nominated there);
	// the message says how many nodes and how much.
	EventReserved = "Reserved"
	// EventReservationEnded (PodGroup): the gang holds its room no more (it timed out, or the room it
	// counted on is gone); the message says why.
	EventReservationEnded = "ReservationEnded"
)

const (
	// rejectedByPreFilterKey marks a cycle whose pod this plugin's PreFilter rejected, for PostFilter.
	rejectedByPreFilterKey fwk.StateKey = Name + "/rejected-by-prefilter"
	// allowedNodesKey holds the nodes PreFilter let a member use (its gang's domain, its plan's
	// offer), for Filter: see allowedNodes.
	allowedNodesKey fwk.StateKey = Name + "/allowed-nodes"
	// infeasibleKey marks a cycle whose gang PreFilter found not to fit the free resources: PostFilter
	// tries to preempt for it.
	infeasibleKey fwk.StateKey = Name + "/infeasible"
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

	permitTimeout   time.Duration
	backoff         time.Duration
	defaultTopology config.TopologyPolicy
	reservation     resv.Args
	planArgs        config.PlacementPlanArgs

	podGroups pgcache.Lister
	// pods is the scheduler's pod informer store (non-terminal pods), indexed by podgroup.IndexName, which
	// holds live pods only: a group's members are listed from it, and a quorum is decided on it.
	pods cache.Indexer
	// counts is each group's member count, O(1) (see pgcache.Members), kept by podEventHandler: what
	// PreEnqueue, the hints and the pod handlers count.
	counts *pgcache.Members

	mu    sync.RWMutex
	gangs map[string]*gang.Gang
	// gated is the last gating reason per pod, so each reason is reported once per pod (see gate).
	gated        map[types.UID]gateState
	gateEpisodes uint64
	// waitingGangs counts gangs with at least one member at Permit (the gauge's value).
	waitingGangs int

	// stamps holds each member's queue order key (types.UID → queueStamp), fixed by PreEnqueue when the
	// member enters the queue, so that Less never reads state that changes while the pod is in the heap.
	stamps sync.Map

	// epoch increases on cluster events that free capacity; cached feasibility results from an older
	// epoch are recomputed.
	epoch atomic.Uint64
	// running is set once the scheduling queue calls the plugin; only then may handle.Activate be used.
	running atomic.Bool
	// reserved counts the gangs that hold a reservation (see reservation.go).
	reserved atomic.Int64
	// waitingMu serializes the plugin's and the preemption's stops of pods waiting at Permit.
	waitingMu sync.Mutex

	// ctx lives as long as the scheduler; background work (status updater, retries) uses it.
	ctx    context.Context
	status *status.Updater
	// claims are the pods nominated to nodes (room kept for preemptors).
	claims claims.Claims
	// fit is what the whole-gang checks share: free capacity per node and members' requests.
	fit gangfit.Shared
	// evicted holds the UIDs of pods this plugin preempted (types.UID → time.Time of the eviction), for
	// evictedMemory (see leaving).
	evicted sync.Map
	// preempt is the preemption machinery (nil: PostFilter does not preempt).
	preempt     *gangpreemption.Preemption
	startStatus sync.Once
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
	client, err := pgcache.NewClient(cfg)
	if err != nil {
		return nil, err
	}
	pgInformer := pgcache.NewInformer(client)
	podInformer := h.SharedInformerFactory().Core().V1().Pods().Informer()
	if err := addPodGroupIndex(podInformer); err != nil {
		return nil, err
	}

	pl := newPlugin(ctx, h, args, clock.RealClock{}, pgcache.Lister{Store: pgInformer.GetStore()}, podInformer.GetIndexer())
	if pl.preempt, err = gangpreemption.New(ctx, h, Name); err != nil {
		return nil, err
	}
	pl.preempt.Evicted, pl.preempt.Failed = pl.onEvicted, pl.victimEvictionFailed
	pl.preempt.WaitingLock = &pl.waitingMu
	pl.status = status.New(status.Config{Client: h.ClientSet(), PodGroups: client, Lister: pl.podGroups, Live: podInformer,
		Clock: pl.clock, Attempt: pl.attemptInfo, ScheduleTimeout: pl.scheduleTimeout, Event: pl.podGroupEvent, Profile: pl.profile})
	// The updater's run loop starts when this replica leads; a scheduler that never leads must still
	// release the queue's goroutines when it stops.
	context.AfterFunc(ctx, pl.status.ShutDown)
	if _, err := podInformer.AddEventHandler(pl.podEventHandler()); err != nil {
		return nil, fmt.Errorf("watching pods: %w", err)
	}
	if _, err := podInformer.AddEventHandler(pl.capacityEventHandler()); err != nil {
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
	go pl.awaitLeadership(ctx)
	logger.V(2).Info("Coscheduling ready", "profile", pl.profile, "permitWaitingTime", pl.permitTimeout, "podGroupBackoff", pl.backoff)
	return pl, nil
}

// newPlugin builds the plugin from its parts without starting anything; tests drive it directly.
func newPlugin(ctx context.Context, h fwk.Handle, args *config.CoschedulingArgs, clk clock.WithDelayedExecution, podGroups pgcache.Lister, pods cache.Indexer) *Coscheduling {
	RegisterMetrics()
	pl := &Coscheduling{
		handle:          h,
		clock:           clk,
		permitTimeout:   time.Duration(args.PermitWaitingTimeSeconds) * time.Second,
		backoff:         time.Duration(args.PodGroupBackoffSeconds) * time.Second,
		defaultTopology: args.DefaultTopologyPolicy,
		reservation: resv.Args{
			After:      time.Duration(args.Reservation.AfterSeconds) * time.Second,
			Timeout:    time.Duration(args.Reservation.TimeoutSeconds) * time.Second,
			MaxGangs:   int(args.Reservation.MaxGangs),
			Recheck:    reservationRecheck,
			StallAfter: reservationStallAfter,
		},
		planArgs:  args.PlacementPlan,
		podGroups: podGroups,
		pods:      pods,
		counts:    pgcache.NewMembers(""),
		gangs:     map[string]*gang.Gang{},
		gated:     map[types.UID]gateState{},
		ctx:       ctx,
	}
	if h != nil {
		pl.recorder = h.EventRecorder()
		pl.profile = h.ProfileName()
		pl.counts = pgcache.NewMembers(pl.profile)
	}
	// The reservation series exist from the start (dashboards and alerts read them before any
	// reservation was made).
	pl.reservationMetricsLocked()
	for _, reason := range resv.Reasons {
		reservationsEnded.WithLabelValues(pl.profile, strings.ToLower(reason)).Add(0)
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
		// A PodGroup created, or its spec changed (e.g. minMember lowered), may let its members in.
		// Status-only updates (the plugin's own status patches) requeue nobody.
		{Event: fwk.ClusterEvent{Resource: podGroupEventResource, ActionType: fwk.Add | fwk.Update}, QueueingHintFn: pl.isSchedulableAfterPodGroupChange},
		// A member refused for malformed topology annotations is retried once they are fixed.
		{Event: fwk.ClusterEvent{Resource: fwk.TargetPod, ActionType: fwk.Update}, QueueingHintFn: pl.isSchedulableAfterOwnUpdate},
	}, nil
}

// PreEnqueue keeps a member out of the scheduling queue, holding nothing, while its PodGroup does not
// exist, fewer than minMember of its live pods exist, or the group backs off after a failed attempt.
// A member let in gets its queue order key here (see Less).
func (pl *Coscheduling) PreEnqueue(ctx context.Context, pod *v1.Pod) *fwk.Status {
	name, ok := podgroup.Of(pod)
	if !ok {
		return nil
	}
	pl.running.Store(true)
	if len(pod.Spec.SchedulingGates) > 0 {
		// Not a member yet: the SchedulingGates plugin holds it, and this plugin says nothing of it.
		return nil
	}
	key := podgroup.Key(pod.Namespace, name)
	pg := pl.podGroups.Get(pod.Namespace, name)
	if pg == nil {
		return pl.gate(ctx, pod, EventPodGroupNotFound,
			fmt.Sprintf("PodGroup %s does not exist; the pod waits for it without holding resources", key))
	}
	if existing, want := pl.countMembers(pod.Namespace, name), podgroup.MinMember(pg); existing < want {
		return pl.gate(ctx, pod, EventWaitingForMembers,
			fmt.Sprintf("%d of minMember %d live pods of PodGroup %s exist; the pod waits for the rest without holding resources", existing, want, key))
	}
	now := pl.clock.Now()
	pl.mu.Lock()
	g := pl.gangForLocked(pg)
	if g.BackingOff(now) {
		until := g.BackoffUntil
		pl.mu.Unlock()
		return pl.gate(ctx, pod, "", backoffMessage(key, until))
	}
	delete(pl.gated, pod.UID)
	stamp := queueStamp{at: pg.CreationTimestamp.Time, key: key, rank: g.Rank(pod)}
	if g.LastFailure.After(stamp.at) {
		stamp.at = g.LastFailure
	}
	pl.mu.Unlock()
	pl.stamps.Store(pod.UID, stamp)
	return nil
}

// queueStamp is a member's queue order key: its group's time (the PodGroup's creation, or the group's
// last failure when the member entered the queue after it) and the group's key.
type queueStamp struct {
	at  time.Time
	key string
	// rank orders the members of one group (see gang.rank).
	rank uint8
}

// Less orders the queue by priority, then by the group's time, then by group, then by the member's
// rank (see gang.rank), then by pod creation time and by the time each pod entered the queue. Members
// of one group are therefore adjacent, and a group whose attempt just failed goes behind the others.
// The group's time, key and rank are fixed for each member by PreEnqueue as it enters the queue
// (every way into the active and backoff queues runs PreEnqueue first), so the order of pods already
// in the queue never changes under the heap. Pods without a group (or members that did not pass this
// PreEnqueue) are ordered as PrioritySort orders them.
func (pl *Coscheduling) Less(a, b fwk.QueuedEntityInfo) bool {
	pa, pb := a.GetPriority(), b.GetPriority()
	if pa != pb {
		return pa > pb
	}
	podA, podB := podOf(a), podOf(b)
	if !hasGroupLabel(podA) && !hasGroupLabel(podB) {
		// Neither has a stamp: what follows would compare their queue times (PrioritySort's order),
		// so do it without looking the stamps up.
		return a.GetTimestamp().Before(b.GetTimestamp())
	}
	sa, sb := pl.queueStamp(a, podA), pl.queueStamp(b, podB)
	if !sa.at.Equal(sb.at) {
		return sa.at.Before(sb.at)
	}
	if sa.key != sb.key {
		return sa.key < sb.key
	}
	if sa.key != "" {
		// Members of one group: the attempt's lead, then constrained members (see gang.rank), then in
		// creation order (a Job's index order), then queue order.
		if sa.rank != sb.rank {
			return sa.rank < sb.rank
		}
		ca, cb := podA.CreationTimestamp.Time, podB.CreationTimestamp.Time
		if !ca.Equal(cb) {
			return ca.Before(cb)
		}
	}
	return a.GetTimestamp().Before(b.GetTimestamp())
}

// queueStamp is an entity's order key for Less: a member's stamp from PreEnqueue, else its queue time.
func (pl *Coscheduling) queueStamp(e fwk.QueuedEntityInfo, pod *v1.Pod) queueStamp {
	if pod != nil {
		if v, ok := pl.stamps.Load(pod.UID); ok {
			return v.(queueStamp)
		}
	}
	return queueStamp{at: e.GetTimestamp()}
}

// PreFilter narrows a member's nodes (see preFilter). The nodes it allows are written to the cycle
// state, and Filter rejects every other node: kube-scheduler tries a pod's nominated node (from a
// preemption or a reservation) and the batching hint before, and regardless of, the PreFilterResult,
// so without the Filter a member nominated outside its gang's chosen domain would bind there and split
// the domain, or bypass its plan's offer. A member whose nodes are not narrowed skips Filter.
func (pl *Coscheduling) PreFilter(ctx context.Context, state fwk.CycleState, pod *v1.Pod, nodes []fwk.NodeInfo) (*fwk.PreFilterResult, *fwk.Status) {
	res, st := pl.preFilter(ctx, state, pod, nodes)
	if !st.IsSuccess() {
		return res, st
	}
	if res.AllNodes() {
		return nil, fwk.NewStatus(fwk.Skip)
	}
	name, _ := podgroup.Of(pod)
	why := "is outside the topology domain chosen for PodGroup " + podgroup.Key(pod.Namespace, name)
	if _, err := state.Read(plannedKey); err == nil {
		why = "is not among the planned nodes PodGroup " + podgroup.Key(pod.Namespace, name) + " offers this member"
	}
	state.Write(allowedNodesKey, &allowedNodes{nodes: res.NodeNames, why: why})
	return res, nil
}

// allowedNodes are the nodes PreFilter let a member use; why says, for a node outside them, why not.
// Never changed once written, so a clone may share it.
type allowedNodes struct {
	nodes sets.Set[string]
	why   string
}

func (a *allowedNodes) Clone() fwk.StateData { return a }

// preFilter checks, once per gang attempt and before any member is reserved, whether the members
// still missing from the quorum fit the snapshot's nodes at once (see checkFeasible), and, for a gang
// with a topology policy, chooses its domain (see topology.go). An infeasible gang is rejected here,
// holding nothing, until an event frees capacity. Every member of a gang with a domain gets the
// domain's nodes as its PreFilterResult, so the framework evaluates only them.
func (pl *Coscheduling) preFilter(ctx context.Context, state fwk.CycleState, pod *v1.Pod, nodes []fwk.NodeInfo) (*fwk.PreFilterResult, *fwk.Status) {
	name, ok := podgroup.Of(pod)
	if !ok {
		return nil, fwk.NewStatus(fwk.Skip)
	}
	pl.running.Store(true)
	// A scheduling cycle runs only in the replica that leads.
	pl.startBackground()
	key := podgroup.Key(pod.Namespace, name)
	pg := pl.podGroups.Get(pod.Namespace, name)
	if pg == nil {
		return pl.rejectInPreFilter(state, fmt.Sprintf("PodGroup %s does not exist", key))
	}
	policy, err := gangfit.PolicyFor(pg, pod, pl.defaultTopology)
	if err != nil {
		msg := fmt.Sprintf("PodGroup %s member %s: %v", key, klog.KObj(pod), err)
		pl.gate(ctx, pod, EventInvalidTopologyPolicy, msg)
		return pl.rejectInPreFilter(state, msg)
	}
	want := podgroup.MinMember(pg)
	now := pl.clock.Now()

	pl.mu.Lock()
	g := pl.gangForLocked(pg)
	if g.BackingOff(now) {
		until := g.BackoffUntil
		pl.mu.Unlock()
		return pl.rejectInPreFilter(state, backoffMessage(key, until))
	}
	if g.WaitsForLead(pod.UID) {
		lead := g.LeadName
		pl.mu.Unlock()
		return pl.rejectInPreFilter(state, fmt.Sprintf("PodGroup %s places member %s first: it found no node behind its siblings in the last attempt", key, lead))
	}
	if g.InProgress() {
		// An attempt is under way and was checked: the member goes where its attempt goes (its
		// planned nodes, when the attempt has a plan; a plan is made only with a chosen placement).
		if g.Placement == nil && !policy.Empty() {
			p := gangfit.PinnedPlacement(policy, gangfit.PinnedDomains(policy, gangfit.BoundNodes(pl.membersOf(pod.Namespace, name), nodes, g.ReservedNodes()...)), nodes)
			g.Placement = &p
		}
		res := pl.narrowLocked(state, g, pod, g.Placement.PreFilterResult())
		pl.mu.Unlock()
		return res, nil
	}
	if len(g.Members) >= want && pl.confirmedCountLocked(g) >= want {
		// The quorum is met: this is an extra (late or replacement) member, placed on its own.
		pl.mu.Unlock()
		if policy.Empty() {
			return nil, nil
		}
		return pl.extraMemberPlacement(ctx, pod, key, policy, nodes).PreFilterResult(), nil
	}
	pl.mu.Unlock()

	// The first member of an attempt: list the group's live pods (outside the lock) and check the
	// members still missing from the quorum as a whole.
	members := pl.membersOf(pod.Namespace, name)
	pl.mu.Lock()
	if g.InProgress() {
		res := pl.narrowLocked(state, g, pod, g.Placement.PreFilterResult())
		pl.mu.Unlock()
		return res, nil
	}
	candidates, counted, countedN := g.Split(members)
	ck := gang.FeasibilityKey{Epoch: pl.epoch.Load(), UID: pg.UID, Generation: pg.Generation, Existing: len(members), Counted: countedN}
	if g.Feasibility != nil && g.CacheKey.Matches(ck) && now.Sub(g.CacheKey.At) < feasibilityCacheTTL {
		res := *g.Feasibility
		if !res.Feasible {
			pl.mu.Unlock()
			return pl.rejectInfeasible(state, res.Message)
		}
		placed := pl.narrowLocked(state, g, pod, g.Placement.PreFilterResult())
		pl.mu.Unlock()
		return placed, nil
	}
	pl.mu.Unlock()

	claimed := pl.claims.Against(corev1helpers.PodPriority(pod), key)
	res, fit := gangfit.Check(klog.FromContext(ctx), key, candidates, want-countedN, nodes, pg.Spec.MinResources, counted, claimed, &pl.fit)
	var chosen *gangfit.Placement
	if res.Feasible && !policy.Empty() {
		pl.mu.RLock()
		busy := pl.busyDomainsLocked(g)
		reservedOn := g.ReservedNodes()
		pl.mu.RUnlock()
		pinned := gangfit.PinnedDomains(policy, gangfit.BoundNodes(members, nodes, reservedOn...))
		if fit == nil {
			p := gangfit.PinnedPlacement(policy, pinned, nodes)
			chosen = &p
		} else if p, ok := gangfit.ChoosePlacement(fit, policy, pinned, busy); ok {
			chosen = &p
		} else {
			res = gangfit.Result{Message: fmt.Sprintf("PodGroup %s (topology policy from %s): %s", key, policy.Source, p.Message)}
		}
	}
	var plan *gangfit.PlacementPlan
	if res.Feasible && pl.plannable(pod) {
		plan = gangfit.PlanPlacement(fit, chosen)
	}
	fit.Done()
	ck.At = now
	pl.mu.Lock()
	g.Feasibility, g.CacheKey = &res, ck
	// A fresh check replaces the plan of the one before (none when the gang does not fit).
	g.KeepPlan(plan)
	placed := pl.narrowLocked(state, g, pod, chosen.PreFilterResult())
	newDomain := chosen != nil && (g.Placement == nil || g.Placement.Key != chosen.Key || g.Placement.Value != chosen.Value || g.Placement.Level != chosen.Level)
	g.Placement = chosen
	var changed bool
	if !res.Feasible && (g.Outcome.Reason != EventPreempting || len(g.NominatedNodes) == 0) {
		// (A gang that preempted stays "Preempting" while the room it made is nominated to it.)
		changed = g.SetOutcome(EventGangInfeasible, res.Message)
	}
	pl.mu.Unlock()
	if !res.Feasible {
		klog.FromContext(ctx).V(3).Info("Gang is infeasible on the current snapshot", "pod", klog.KObj(pod), "podGroup", key, "reason", res.Message)
		gangRejections.WithLabelValues(pl.profile, reasonInfeasible).Inc()
		if changed {
			pl.podGroupEvent(pg, v1.EventTypeWarning, EventGangInfeasible, res.Message)
			pl.notifyStatus(key)
		}
		return pl.rejectInfeasible(state, res.Message)
	}
	if newDomain {
		klog.FromContext(ctx).V(3).Info("Gang placement chosen", "pod", klog.KObj(pod), "podGroup", key, "placement", chosen.Message)
		pl.podGroupEvent(pg, v1.EventTypeNormal, EventDomainChosen, chosen.Message)
		pl.notifyStatus(key)
	}
	if plan != nil && g.Plan == plan {
		klog.FromContext(ctx).V(4).Info("Gang placement planned", "pod", klog.KObj(pod), "podGroup", key, "members", plan.Left(), "nodes", len(plan.Nodes))
	}
	return placed, nil
}

// PreFilterExtensions returns nil: the check does not depend on other pods' placement in the cycle.
func (pl *Coscheduling) PreFilterExtensions() fwk.PreFilterExtensions { return nil }

// Filter rejects a node outside those PreFilter allowed the member (see PreFilter): O(1), and called
// only for members whose nodes PreFilter narrowed. The framework evaluates only the allowed nodes
// anyway, except a nominated node and the batching hint, which it tries first.
func (pl *Coscheduling) Filter(_ context.Context, state fwk.CycleState, _ *v1.Pod, nodeInfo fwk.NodeInfo) *fwk.Status {
	data, err := state.Read(allowedNodesKey)
	if err != nil {
		return nil
	}
	a := data.(*allowedNodes)
	node := nodeInfo.Node().Name
	if a.nodes.Has(node) {
		return nil
	}
	return fwk.NewStatus(fwk.UnschedulableAndUnresolvable, fmt.Sprintf("node %s %s", node, a.why))
}

// SignPod signs pods with no fragment, except members whose PreFilter narrows their nodes: those of a
// gang with a topology policy (restricted to their gang's domain) and those a placement plan may place
// (offered its planned nodes) are signed with their group, so that only members of one gang may share
// a batched scheduling result. Other pods, gang members included, may be batched with any pod alike for
// the other plugins (this plugin accepts or rejects them whole).
func (pl *Coscheduling) SignPod(_ context.Context, pod *v1.Pod) ([]fwk.SignFragment, *fwk.Status) {
	name, ok := podgroup.Of(pod)
	if !ok {
		return nil, nil
	}
	pg := pl.podGroups.Get(pod.Namespace, name)
	if pg == nil {
		return nil, nil
	}
	if policy, err := gangfit.PolicyFor(pg, pod, pl.defaultTopology); err == nil && policy.Empty() && !pl.plannable(pod) {
		return nil, nil
	}
	return []fwk.SignFragment{{Key: signFragmentGroup, Value: podgroup.Key(pod.Namespace, name)}}, nil
}

// signFragmentGroup names the fragment that ties a member with a topology policy to its gang.
const signFragmentGroup = "v1.Pod.Labels[" + v1alpha1.PodGroupLabel + "].TopologyPlacement()"

// PostFilter is the profile's preemption (it replaces DefaultPreemption, see preemption.go) and
// fails gang attempts that cannot succeed:
//   - a gang found not to fit the free resources (PreFilter) preempts lower-priority pods as a whole;
//   - a plain pod, or an extra member of a gang that has its quorum, preempts as DefaultPreemption
//     would, except that a gang member is only ever evicted with its whole gang;
//   - a member of an attempt that found no node: if the gang cannot reach its quorum without it, the
//     attempt fails, every waiting member is rejected (releasing what it holds) and the group backs
//     off, so that it does not hold resources another gang could use.
func (pl *Coscheduling) PostFilter(ctx context.Context, state fwk.CycleState, pod *v1.Pod, m fwk.NodeToStatusReader) (*fwk.PostFilterResult, *fwk.Status) {
	name, ok := podgroup.Of(pod)
	if !ok {
		return pl.preemptForPod(ctx, state, pod, m)
	}
	if mark, err := state.Read(plannedKey); err == nil && missedPlan(mark.(plannedMark).offered, m) {
		return pl.planMissed(ctx, pod, mark.(plannedMark).offered, m)
	}
	if _, err := state.Read(rejectedByPreFilterKey); err == nil {
		// Rejected as a whole by PreFilter: nothing is held, and hints requeue the gang.
		if _, err := state.Read(infeasibleKey); err == nil {
			if pg := pl.podGroups.Get(pod.Namespace, name); pg != nil {
				return pl.preemptOrReserve(ctx, pod, pg)
			}
		}
		return nil, fwk.NewStatus(fwk.Unschedulable)
	}
	key := podgroup.Key(pod.Namespace, name)
	pg := pl.podGroups.Get(pod.Namespace, name)
	if pg == nil {
		return nil, fwk.NewStatus(fwk.Unschedulable)
	}
	want := podgroup.MinMember(pg)
	existing := pl.countMembers(pod.Namespace, name)
	now := pl.clock.Now()

	pl.mu.Lock()
	g := pl.gangForLocked(pg)
	in := attempt.Input{Kind: attempt.NoNode, Now: now, Want: want, Counted: len(g.Members), MayLead: g.MayLead(pod.UID)}
	if in.Counted < want {
		g.Unplaced[pod.UID] = struct{}{}
		in.Reachable = existing-len(g.Unplaced) >= want
	}
	d, victims := pl.stepLocked(g, in)
	switch {
	case d.Verdict == attempt.VerdictPreemptAlone:
		pl.mu.Unlock()
		// The gang has its quorum: this member is placed alone, like a plain pod.
		return pl.preemptForPod(ctx, state, pod, m)
	case !d.RejectWaiting:
		// Enough other members exist to reach the quorum without those that found no node.
		pl.mu.Unlock()
		return nil, fwk.NewStatus(fwk.Unschedulable)
	}
	msg := fmt.Sprintf("PodGroup %s rejected: member %s cannot be placed, so the quorum of %d cannot be reached now", key, klog.KObj(pod), want)
	// Members already reserved may be what is in this one's way (inter-pod anti-affinity, a node only
	// it may use): the attempt is retried after leadRetryDelay, not the back-off, with this member first.
	retry := d.Lead
	if retry {
		g.SetLead(pod)
		msg += "; retrying in a moment with it placed first"
	} else {
		g.ClearLead()
	}
	g.SetOutcome(d.Reason, msg)
	pl.mu.Unlock()

	klog.FromContext(ctx).V(3).Info("Gang attempt failed: a member found no node", "pod", klog.KObj(pod), "podGroup", key, "rejectedWaiting", len(victims), "retryWithItFirst", retry)
	gangRejections.WithLabelValues(pl.profile, reasonMemberUnschedulable).Inc()
	pl.rejectWaiting(victims, msg)
	pl.reportFailure(pg, EventGangRejected, msg, append(victims, pod))
	return nil, fwk.NewStatus(fwk.Unschedulable, msg)
}

// Reserve counts the member toward its group's quorum and starts an attempt when none is under way.
// A member of a group that backs off is refused, so a late member cannot hold resources alone.
func (pl *Coscheduling) Reserve(_ context.Context, _ fwk.CycleState, pod *v1.Pod, nodeName string) *fwk.Status {
	// A reserved pod is assumed on its node: its nomination no longer claims room (the scheduler's
	// nominator drops it here too), or the whole-gang check would count it twice. A gang member
	// stays so while it waits at Permit and binds (see claims).
	name, ok := podgroup.Of(pod)
	if !ok {
		if pl.claims.Forget(pod) {
			pl.epoch.Add(1)
		}
		return nil
	}
	if pl.claims.Assume(pod) {
		pl.epoch.Add(1)
	}
	key := podgroup.Key(pod.Namespace, name)
	pg := pl.podGroups.Get(pod.Namespace, name)
	if pg == nil {
		return fwk.NewStatus(fwk.Unschedulable, fmt.Sprintf("PodGroup %s does not exist", key))
	}
	want := podgroup.MinMember(pg)
	now := pl.clock.Now()
	pl.mu.Lock()
	defer pl.mu.Unlock()
	g := pl.gangForLocked(pg)
	in := attempt.Input{Kind: attempt.Reserve, Now: now, Want: want, Counted: len(g.Members), Timeout: pl.scheduleTimeout(pg)}
	in.Confirmed = in.Counted
	if in.Counted >= want && !g.InProgress() {
		in.Confirmed = pl.confirmedCountLocked(g)
	}
	if d, _ := pl.stepLocked(g, in); d.Verdict == attempt.VerdictRefuse {
		return fwk.NewStatus(fwk.Unschedulable, fmt.Sprintf("PodGroup %s backs off after a failed attempt", key))
	}
	g.CountReserved(pod.UID, nodeName)
	if g.Plan.Take(nodeName) {
		placementPlanMembers.WithLabelValues(pl.profile, planPlaced).Inc()
	}
	return nil
}

// Unreserve undoes Reserve. Before the quorum is met, a member leaving (rejected, timed out, deleted,
// or failed by a later plugin) fails the whole attempt: every other waiting member is rejected so the
// resources they hold are released at once, and the group backs off. After the quorum (a bind
// failure), the member is sent back to the front of the queue to complete its gang again.
func (pl *Coscheduling) Unreserve(ctx context.Context, _ fwk.CycleState, pod *v1.Pod, _ string) {
	name, ok := podgroup.Of(pod)
	if !ok {
		return
	}
	pl.claims.Unassume(pod.UID)
	logger := klog.FromContext(ctx)
	key := podgroup.Key(pod.Namespace, name)
	now := pl.clock.Now()
	pl.mu.Lock()
	g := pl.gangs[key]
	if g == nil {
		pl.mu.Unlock()
		return
	}
	wasWaiting := pl.removeWaitingLocked(g, pod.UID)
	wasReserved := g.Clear(pod.UID, gang.Reserved)
	count, attemptStart := len(g.Members), g.Start
	d, victims := pl.stepLocked(g, attempt.Input{Kind: attempt.Unreserve, Now: now, WasWaiting: wasWaiting, WasReserved: wasReserved})
	if d.RetryMember {
		pl.mu.Unlock()
		// A bind failure after the quorum: retry the member ahead of other work (Activate skips its
		// back-off; it passes Permit at once while the rest of the quorum holds).
		logger.V(3).Info("Gang member failed after the quorum; retrying it at once", "pod", klog.KObj(pod), "podGroup", key)
		if pl.running.Load() {
			pl.handle.Activate(logger, map[string]*v1.Pod{pod.Namespace + "/" + pod.Name: pod})
		}
		pl.notifyStatus(key)
		return
	}
	if !d.RejectWaiting {
		// Never reserved here, or the echo of a rejection this plugin made.
		pl.dropIfUnusedLocked(g, now)
		pl.mu.Unlock()
		return
	}
	timedOut := d.Reason == EventGangTimedOut
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
	g.SetOutcome(reason, msg)
	pl.mu.Unlock()

	logger.V(3).Info("Gang attempt failed", "pod", klog.KObj(pod), "podGroup", key, "timedOut", timedOut, "rejectedWaiting", len(victims))
	gangRejections.WithLabelValues(pl.profile, metricReason).Inc()
	pl.rejectWaiting(victims, msg)
	pl.reportFailure(pl.podGroups.Get(pod.Namespace, name), reason, msg, append(victims, pod))
}

// Permit lets a member through once minMember live members of its group are reserved or bound, and
// then allows every waiting member at once; until then the member waits, up to the group's deadline.
// The count is a map length, so Permit is O(1) apart from the members it releases; it records no
// per-member event (the PodGroup gets one event per attempt transition).
func (pl *Coscheduling) Permit(ctx context.Context, state fwk.CycleState, pod *v1.Pod, _ string) (*fwk.Status, time.Duration) {
	name, ok := podgroup.Of(pod)
	if !ok {
		return nil, 0
	}
	logger := klog.FromContext(ctx)
	key := podgroup.Key(pod.Namespace, name)
	pg := pl.podGroups.Get(pod.Namespace, name)
	if pg == nil {
		return fwk.NewStatus(fwk.Unschedulable, fmt.Sprintf("PodGroup %s was deleted", key)), 0
	}
	want := podgroup.MinMember(pg)
	now := pl.clock.Now()

	pl.mu.Lock()
	g := pl.gangForLocked(pg)
	in := attempt.Input{Kind: attempt.Permit, Now: now, Want: want, Counted: len(g.Members)}
	in.Confirmed = in.Counted
	if in.Counted >= want && g.Phase != attempt.PhaseQuorum {
		// The attempt's quorum is decided once, on the pod store's word (see confirmedCountLocked).
		in.Confirmed = pl.confirmedCountLocked(g)
	}
	count, start := in.Confirmed, g.Start
	d, pods := pl.stepLocked(g, in)
	switch {
	case d.RejectWaiting:
		// Past the attempt's deadline no quorum is declared: the framework is rejecting the waiting
		// members for their timeout, and they would count until their Unreserves run.
		msg := fmt.Sprintf("PodGroup %s timed out: %d members were reserved or bound within %s, fewer than minMember %d; all waiting members were rejected",
			key, count, now.Sub(start).Round(time.Second), want)
		g.SetOutcome(d.Reason, msg)
		pl.mu.Unlock()
		gangTimeouts.WithLabelValues(pl.profile).Inc()
		gangRejections.WithLabelValues(pl.profile, reasonTimeout).Inc()
		pl.rejectWaiting(pods, msg)
		pl.reportFailure(pg, EventGangTimedOut, msg, append(pods, pod))
		return fwk.NewStatus(fwk.Unschedulable, msg), 0
	case d.AllowWaiting:
		pl.mu.Unlock()
		pl.allow(pods)
		if d.FirstQuorum {
			// Members beyond the quorum that found no node while the attempt gathered it (they were
			// not needed then, so they did not preempt) are retried now: placed like any pod, they
			// may preempt.
			pl.activateSiblings(state, pod)
			timeToQuorum.WithLabelValues(pl.profile).Observe(now.Sub(start).Seconds())
			msg := fmt.Sprintf("%d of minMember %d live members reserved or bound; %d waiting members go on to bind", count, want, len(pods))
			logger.V(3).Info("Gang reached its quorum", "pod", klog.KObj(pod), "podGroup", key, "members", count, "allowed", len(pods))
			pl.podGroupEvent(pg, v1.EventTypeNormal, EventQuorumReached, msg)
			pl.notifyStatus(key)
		}
		return nil, 0
	case d.Verdict == attempt.VerdictRefuse:
		pl.mu.Unlock()
		if d.Refusal == attempt.RefusedFailed {
			return fwk.NewStatus(fwk.Unschedulable, fmt.Sprintf("PodGroup %s was rejected in this attempt", key)), 0
		}
		return fwk.NewStatus(fwk.Unschedulable, fmt.Sprintf("PodGroup %s timed out waiting for its quorum", key)), 0
	}
	remaining := d.WaitFor
	pl.addWaitingLocked(g, pod)
	pl.mu.Unlock()

	msg := fmt.Sprintf("%d of minMember %d members of PodGroup %s are reserved or bound; waiting up to %s for the rest",
		count, want, key, remaining.Round(time.Second))
	logger.V(4).Info("Gang member waits for the quorum", "pod", klog.KObj(pod), "podGroup", key, "members", count, "minMember", want)
	if d.ActivateSiblings {
		// The attempt has begun: bring the group's other unscheduled members forward so they are
		// tried next, together, instead of whenever their own back-off ends.
		pl.activateSiblings(state, pod)
		pl.clock.AfterFunc(gateEventDelay, func() { pl.waitingForQuorumEvent(pod.Namespace, name, start) })
	}
	// The status shows the count; notifications of a burst are coalesced into one patch.
	pl.notifyStatus(key)
	return fwk.NewStatus(fwk.Wait, msg), remaining
}
