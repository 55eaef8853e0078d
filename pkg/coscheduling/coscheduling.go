// Package coscheduling is the Coscheduling plugin: all-or-nothing (gang) scheduling of the pods of a
// PodGroup (scheduling.x-k8s.io/v1alpha1). Members are kept adjacent in the queue, held back while
// their group is incomplete, checked as a whole against the snapshot before the first member holds
// anything, and wait at Permit until minMember live members are reserved or bound; any failure before
// that rejects every waiting member so that what they held is released at once.
package coscheduling

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"k8s.io/client-go/tools/cache"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/utils/clock"

	"github.com/custom-scheduler/custom-scheduler/pkg/apis/config"
	"github.com/custom-scheduler/custom-scheduler/pkg/coscheduling/claims"
	"github.com/custom-scheduler/custom-scheduler/pkg/coscheduling/devices"
	"github.com/custom-scheduler/custom-scheduler/pkg/coscheduling/effects"
	"github.com/custom-scheduler/custom-scheduler/pkg/coscheduling/gang"
	"github.com/custom-scheduler/custom-scheduler/pkg/coscheduling/gangfit"
	"github.com/custom-scheduler/custom-scheduler/pkg/coscheduling/gangpreemption"
	"github.com/custom-scheduler/custom-scheduler/pkg/coscheduling/lws"
	"github.com/custom-scheduler/custom-scheduler/pkg/coscheduling/podgroup/pgcache"
	resv "github.com/custom-scheduler/custom-scheduler/pkg/coscheduling/reservation"
	"github.com/custom-scheduler/custom-scheduler/pkg/coscheduling/status"
	"github.com/custom-scheduler/custom-scheduler/pkg/coscheduling/tree"
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

// Pod annotations that give a gang a topology policy when its PodGroup cannot (for PodGroups created
// by operators that do not know the field). The PodGroup's spec.topologyPolicy wins.
const (
	// AnnotationTopologyRequired names a node label key: all members in one domain of it, or none placed.
	AnnotationTopologyRequired = gangfit.AnnotationTopologyRequired
	// AnnotationTopologyPreferred lists node label keys, narrowest first, separated by commas.
	AnnotationTopologyPreferred = gangfit.AnnotationTopologyPreferred
)

const (
	// feasibilityCacheTTL bounds how long a feasibility result is reused for the members of one burst.
	feasibilityCacheTTL = 2 * time.Second
	// podGroupSyncTimeout bounds the wait for the PodGroup cache in New.
	podGroupSyncTimeout = time.Minute
)

// Coscheduling is the gang scheduling plugin.
type Coscheduling struct {
	handle   fwk.Handle
	recorder effects.Recorder
	clock    clock.WithDelayedExecution
	profile  string

	permitTimeout   time.Duration
	backoff         time.Duration
	defaultTopology config.TopologyPolicy
	reservation     resv.Args
	planArgs        config.PlacementPlanArgs

	podGroups pgcache.Lister
	// members are the groups' members, listed from the scheduler's pod informer store (where a quorum
	// is decided) and counted in O(1) by podEventHandler (what PreEnqueue, the hints and the pod
	// handlers count); see pgcache.Pods.
	members pgcache.Pods
	// finished counts the members that left by succeeding, per group and run: the finished-member
	// rule's part of a quorum (see podgroup.SucceededMember), fed by finishedEventHandler.
	finished *pgcache.Finished
	// podsSynced reports whether podEventHandler has been handed the pod informer's initial list (nil:
	// no informer, in unit tests).
	podsSynced cache.InformerSynced

	mu sync.RWMutex
	// gangs are the state of the groups the plugin tracks (see gang.Registry).
	gangs *gang.Registry
	// trees are the jobs of several roles: which groups are under which composites (package tree).
	trees *tree.Index
	// lws makes the PodGroups of LeaderWorkerSet replicas (nil in tests that drive the plugin directly).
	lws *lws.Maker
	// heldBack reports the members held back, once per pod and reason (see effects.HeldBack).
	heldBack effects.HeldBack
	// retiring wakes endRetired when a recreated PodGroup retired a reservation (see gangForLocked).
	retiring chan struct{}

	// stamps are the members' queue order keys, fixed by PreEnqueue (see gang.Stamps).
	stamps gang.Stamps

	// epoch increases on cluster events that free capacity; cached feasibility results from an older
	// epoch are recomputed.
	epoch atomic.Uint64
	// freed waits, for a burst of claim events, until the scheduler's own claim cache (the one the
	// whole-gang check's devices come from; none in unit tests) shows them (see claimEventHandler).
	freed devices.Freed
	// running is set once the scheduling queue calls the plugin; only then may handle.Activate be used.
	running atomic.Bool
	// reserved counts the gangs that hold a reservation (see reservation.go).
	reserved atomic.Int64
	// keptOff are the pods kept off the devices a reservation holds, brought back when one ends; held
	// keeps who waits for devices where, per change of the reservations (heldVersion, moved when one
	// starts, moves or ends) or the nominations (see helddevices.go).
	keptOff     effects.Later
	held        gang.HeldCache
	heldVersion atomic.Uint64
	// waitingMu serializes the plugin's and the preemption's stops of pods waiting at Permit.
	waitingMu sync.Mutex

	// ctx lives as long as the scheduler; background work (status updater, retries) uses it.
	ctx    context.Context
	status *status.Updater
	// claims are the pods nominated to nodes (room kept for preemptors).
	claims claims.Claims
	// fit is what the whole-gang checks share: free capacity per node and members' requests; dra is
	// its device model (nil: Dynamic Resource Allocation is off).
	fit gangfit.Shared
	dra *devices.Source
	// evicted are the pods this plugin preempted, remembered for a while (see gangpreemption.Evicted).
	evicted gangpreemption.Evicted
	// preempt is the preemption machinery (nil: PostFilter does not preempt).
	preempt     *gangpreemption.Preemption
	startStatus sync.Once
}

// notifyStatus asks the status writer to write the PodGroup's status (coalesced, in the background).
func (pl *Coscheduling) notifyStatus(key string) {
	if pl.status != nil {
		pl.status.Enqueue(key)
	}
}

// stale makes the cached whole-gang checks stale (their epoch moves on): room may have been freed.
func (pl *Coscheduling) stale() { pl.epoch.Add(1) }

// treeOf resolves the tree of group namespace/name (nil, nil: it is in none).
func (pl *Coscheduling) treeOf(namespace, name string) (*tree.Branch, *tree.Problem) {
	if pl.trees == nil || pl.trees.Empty() {
		return nil, nil
	}
	return pl.trees.Resolve(namespace, name)
}
