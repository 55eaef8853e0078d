package coscheduling

import (
	"context"
	"fmt"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/features"
	"k8s.io/utils/clock"

	"github.com/custom-scheduler/custom-scheduler/pkg/apis/config"
	"github.com/custom-scheduler/custom-scheduler/pkg/apis/config/validation"
	"github.com/custom-scheduler/custom-scheduler/pkg/apis/scheduling/v1alpha1"
	"github.com/custom-scheduler/custom-scheduler/pkg/coscheduling/claims"
	"github.com/custom-scheduler/custom-scheduler/pkg/coscheduling/devices"
	"github.com/custom-scheduler/custom-scheduler/pkg/coscheduling/gang"
	"github.com/custom-scheduler/custom-scheduler/pkg/coscheduling/gangfit"
	"github.com/custom-scheduler/custom-scheduler/pkg/coscheduling/gangpreemption"
	"github.com/custom-scheduler/custom-scheduler/pkg/coscheduling/lws"
	"github.com/custom-scheduler/custom-scheduler/pkg/coscheduling/metrics"
	"github.com/custom-scheduler/custom-scheduler/pkg/coscheduling/podgroup"
	"github.com/custom-scheduler/custom-scheduler/pkg/coscheduling/podgroup/pgcache"
	resv "github.com/custom-scheduler/custom-scheduler/pkg/coscheduling/reservation"
	"github.com/custom-scheduler/custom-scheduler/pkg/coscheduling/status"
	"github.com/custom-scheduler/custom-scheduler/pkg/coscheduling/tree"
)

// Setting the plugin up: New (args, informers, handlers, the status writer, preemption) and the
// cluster events that requeue members (EventsToRegister). The top floor of the package: it wires the
// files below and nothing below calls it.

// New builds the plugin: it validates the args, starts the PodGroup informers (ours, and the in-tree
// ones where served) and waits for them to sync, and indexes the scheduler's pods by PodGroup.
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
	sources, err := pgcache.NewSources(logger, cfg, h.ClientSet())
	if err != nil {
		return nil, err
	}
	podInformer := h.SharedInformerFactory().Core().V1().Pods().Informer()
	if err := pgcache.AddIndex(podInformer); err != nil {
		return nil, err
	}

	pl := newPlugin(ctx, h, args, clock.RealClock{}, sources.Lister, podInformer.GetIndexer())
	if pl.preempt, err = gangpreemption.New(ctx, h, Name); err != nil {
		return nil, err
	}
	pl.preempt.Evicted, pl.preempt.Failed = pl.onEvicted, pl.victimEvictionFailed
	pl.preempt.WaitingLock = &pl.waitingMu
	pl.status = status.New(status.Config{Client: h.ClientSet(), PodGroups: sources.Client, Lister: pl.podGroups, Live: podInformer,
		Clock: pl.clock, Attempt: pl.attemptInfo, ScheduleTimeout: func(pg *v1alpha1.PodGroup) time.Duration { return podgroup.ScheduleTimeout(pg, pl.permitTimeout) }, Event: pl.recorder.PodGroup, Profile: pl.profile, InTree: sources.InTree(), Children: pl.childGroups,
		Composites: sources.Composites(), Trees: pl.trees})
	// The updater's run loop starts when this replica leads; a scheduler that never leads must still
	// release the queue's goroutines when it stops.
	context.AfterFunc(ctx, pl.status.ShutDown)
	// The finished-member rule reads the members that succeeded from the status writer's informer of
	// finished pods, started now (not when this replica leads): a replica that starts leading has them.
	if _, err := pl.status.Finished().AddEventHandler(pl.finishedEventHandler()); err != nil {
		return nil, fmt.Errorf("watching finished pods: %w", err)
	}
	pl.status.StartFinished(ctx)
	if src := devices.New(h.SharedDRAManager()).WithCheckBudget(time.Duration(args.DeviceCheckMilliseconds) * time.Millisecond); src != nil {
		// PodGroup-owned claims (KEP-5729) are read where this scheduler's DynamicResources plugin
		// binds them to the PodGroup (its DRAWorkloadResourceClaims gate) and the in-tree PodGroups
		// are read; elsewhere a member's claims are read as before.
		if devices.ReadsGroupClaims(utilfeature.DefaultFeatureGate.Enabled(features.DRAWorkloadResourceClaims), sources.InTree()) {
			src = src.WithGroupClaims(sources.Lister.InTreePodGroup)
			logger.V(2).Info("The gang check counts the ResourceClaims of in-tree PodGroups once per gang", "feature", features.DRAWorkloadResourceClaims)
		}
		pl.fit.Devices, pl.dra = src, src
		pl.members.Counts.Unmade = src.ClaimsUnmade
		pl.freed.Cache = h.SharedDRAManager().ResourceClaims().Get
		if _, err := h.SharedInformerFactory().Resource().V1().ResourceClaims().Informer().AddEventHandler(pl.claimEventHandler()); err != nil {
			return nil, fmt.Errorf("watching ResourceClaims: %w", err)
		}
	}
	// A LeaderWorkerSet replica's PodGroup is made when its leader pod appears (package lws).
	pl.lws = lws.New(sources.Client, cfg, sources.Lister.Get, podInformer.GetStore(), pl.profile, func(pod *v1.Pod, reason, msg string) { pl.recorder.Pod(pod, v1.EventTypeWarning, reason, msg) })
	context.AfterFunc(ctx, pl.lws.ShutDown)
	if _, err := podInformer.AddEventHandler(pl.lws.Handler()); err != nil {
		return nil, fmt.Errorf("watching pods: %w", err)
	}
	reg, err := podInformer.AddEventHandler(pl.podEventHandler())
	if err != nil {
		return nil, fmt.Errorf("watching pods: %w", err)
	}
	pl.podsSynced = reg.HasSynced
	// A nomination dropped frees the devices it held for the pods kept off them (see helddevices.go).
	pl.claims.Dropped = func() { pl.activateKeptOff(logger) }
	if _, err := podInformer.AddEventHandler(claims.Handler(&pl.claims, pl.fit.Forget, pl.stale)); err != nil {
		return nil, fmt.Errorf("watching pods: %w", err)
	}
	if err := sources.Start(ctx, pgcache.TreeHandler(pl.trees, podgroup.TreeNode, pl.podGroupEventHandler()), pgcache.CompositeHandler(pl.trees, pl.activateGroups), podGroupSyncTimeout); err != nil {
		return nil, err
	}
	go pl.awaitLeadership(ctx)
	logger.V(2).Info("Coscheduling ready", "profile", pl.profile, "permitWaitingTime", pl.permitTimeout, "podGroupBackoff", pl.backoff,
		"inTreePodGroups", sources.InTree())
	return pl, nil
}

// newPlugin builds the plugin from its parts without starting anything; tests drive it directly.
func newPlugin(ctx context.Context, h fwk.Handle, args *config.CoschedulingArgs, clk clock.WithDelayedExecution, podGroups pgcache.Lister, pods cache.Indexer) *Coscheduling {
	metrics.Register()
	pl := &Coscheduling{
		handle:          h,
		clock:           clk,
		permitTimeout:   time.Duration(args.PermitWaitingTimeSeconds) * time.Second,
		backoff:         time.Duration(args.PodGroupBackoffSeconds) * time.Second,
		defaultTopology: args.DefaultTopologyPolicy,
		reservation:     resv.ArgsOf(args.Reservation),
		planArgs:        args.PlacementPlan,
		podGroups:       podGroups,
		members:         pgcache.Pods{Store: pods, Counts: pgcache.NewMembers("")},
		finished:        pgcache.NewFinished(""),
		trees:           tree.NewIndex(),
		retiring:        make(chan struct{}, 1),
		ctx:             ctx,
	}
	pl.freed = devices.Freed{Poll: claimCachePoll, Wait: claimCacheWait, Then: pl.devicesFreed}
	// Preemption evicts a job of several roles whole (the profiles of one binary index the same objects).
	podgroup.SetTreeUnits(pl.trees.Unit)
	pl.heldBack.Clock, pl.heldBack.Recorder, pl.heldBack.Recount = clk, &pl.recorder, pl.recount
	if h != nil {
		pl.recorder.Events = h.EventRecorder()
		pl.profile = h.ProfileName()
		pl.members.Profile, pl.members.Counts = pl.profile, pgcache.NewMembers(pl.profile)
		pl.finished = pgcache.NewFinished(pl.profile)
	}
	pl.gangs = gang.NewRegistry(pl.finished.Has)
	go pl.endRetired(ctx)
	metrics.InitReservations(pl.profile, resv.Reasons)
	return pl
}

// Name returns the plugin's name.
func (pl *Coscheduling) Name() string { return Name }

// EventsToRegister returns the events that can make a gang member schedulable, with hints that only
// requeue the members they concern (see podgroup.Events). The scheduler calls them only for pods this
// plugin rejected or gated; a hint that requeues for room freed makes the cached checks stale.
func (pl *Coscheduling) EventsToRegister(_ context.Context) ([]fwk.ClusterEventWithHint, error) {
	return podgroup.Events(podgroup.Hints{CapacityFreed: gang.CapacityFreedHint(pl.sparedByDelete, pl.stale), NodeChange: gangfit.NodeChangeHint(pl.stale),
		PodGroupChange: podgroup.SpecChangeHint, OwnUpdate: gangfit.PolicyFixedHint(func(ns, name string) *v1alpha1.PodGroup { return pl.podGroups.Get(ns, name) }, pl.defaultTopology), DeviceChange: pl.dra.ChangeHint(pl.stale)},
		pl.fit.Devices != nil, pl.podGroups.InTree != nil), nil
}

// sparedByDelete is gang.Registry.SparedByDelete under the lock, for the capacity hint.
func (pl *Coscheduling) sparedByDelete(key string, freed *v1.Pod) bool {
	pl.mu.RLock()
	defer pl.mu.RUnlock()
	return pl.gangs.SparedByDelete(key, freed, pl.claims.VersionAgainst)
}
