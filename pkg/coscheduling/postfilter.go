package coscheduling

import (
	"context"

	v1 "k8s.io/api/core/v1"
	corev1helpers "k8s.io/component-helpers/scheduling/corev1"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/custom-scheduler/custom-scheduler/pkg/apis/scheduling/v1alpha1"
	"github.com/custom-scheduler/custom-scheduler/pkg/coscheduling/attempt"
	"github.com/custom-scheduler/custom-scheduler/pkg/coscheduling/devices"
	"github.com/custom-scheduler/custom-scheduler/pkg/coscheduling/gang"
	"github.com/custom-scheduler/custom-scheduler/pkg/coscheduling/metrics"
	"github.com/custom-scheduler/custom-scheduler/pkg/coscheduling/podgroup"
	resv "github.com/custom-scheduler/custom-scheduler/pkg/coscheduling/reservation"
)

// PostFilter is what a member that found no node does: it is the profile's preemption (it replaces
// DefaultPreemption, see preemption.go), reserves room against starvation (reserveRoom; the
// reservation's wiring is reservation.go's), falls back from a missed plan (planMissed) and fails gang
// attempts that cannot succeed:
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
	marks := gang.MarksOf(state)
	if marks.Planned && gang.MissedPlan(marks.Offered, m) {
		return pl.planMissed(ctx, pod, marks.Offered, m)
	}
	if marks.Rejected {
		// Rejected as a whole by PreFilter: nothing is held, and hints requeue the gang.
		if marks.Infeasible {
			if pg := pl.podGroups.Get(pod.Namespace, name); pg != nil {
				// Short only with the other groups its job needs (Tree): the job preempts as one.
				res, st, result := pl.preemptOrReserve(ctx, pod, pg, marks.Tree)
				pl.treeInfeasible(pg, result)
				return res, st
			}
		}
		return nil, fwk.NewStatus(fwk.Unschedulable)
	}
	key := podgroup.Key(pod.Namespace, name)
	pg := pl.podGroups.Get(pod.Namespace, name)
	if pg == nil {
		return nil, fwk.NewStatus(fwk.Unschedulable)
	}
	// Whether the quorum can still be reached is decided on the store, as the quorum itself is (the
	// handler's count may still hold a pod just deleted).
	want, existing, now := podgroup.MinMember(pg), pl.members.StoreCount(pod.Namespace, name), pl.clock.Now()
	// The nodes whose devices the real filter refused it: its gang's next checks count them.
	short := gang.DevicesShort(pl.dra != nil && devices.MayClaim(pod), m, func() ([]fwk.NodeInfo, error) { return pl.handle.SnapshotSharedLister().NodeInfos().List() })
	pl.mu.Lock()
	g := pl.gangForLocked(pg)
	r := pl.stepLocked(g, func() gang.Result { return g.OnNoNodeDevices(pod, now, want, existing, pl.backoff, m, short) })
	pl.mu.Unlock()
	switch {
	case r.Verdict == attempt.VerdictPreemptAlone:
		// The gang has its quorum: this member is placed alone, like a plain pod.
		return pl.preemptForPod(ctx, state, pod, m)
	case !r.Failed():
		// Enough other members exist to reach the quorum without those that found no node.
		return nil, fwk.NewStatus(fwk.Unschedulable)
	}
	klog.FromContext(ctx).V(3).Info("Gang attempt failed: a member found no node", "pod", klog.KObj(pod), "podGroup", key, "rejectedWaiting", len(r.Pods), "retryWithItFirst", r.Lead)
	pl.failed(pg, r, metrics.ReasonMemberUnschedulable, pod)
	return nil, fwk.NewStatus(fwk.Unschedulable, r.Message)
}

// preemptOrReserve is PostFilter for a gang found not to fit (asJob: only with the other groups its
// job needs): it preempts lower-priority pods when that makes room (see preemptForGang), and otherwise
// reserves the room that frees once the gang has waited long enough (see reservation.go), for its
// job when it is in one. A preemption ends the gang's reservation: its nominations are the
// preemption's now. result is the preemption's outcome.
func (pl *Coscheduling) preemptOrReserve(ctx context.Context, pod *v1.Pod, pg *v1alpha1.PodGroup, asJob bool) (_ *fwk.PostFilterResult, _ *fwk.Status, result string) {
	res, st, result := pl.preemptForGang(ctx, pod, pg, asJob)
	if gang.PreemptDecides(result) {
		return res, st, result
	}
	if rres, rst, held := pl.reserveRoom(ctx, pod, pg, asJob); held {
		return rres, rst, result
	}
	return res, st, result
}

// reserveRoom runs a reservation step (gang.ReserveUnder, each lock hold's I/O after it) for a member
// of a gang found not to fit, whose preemption does not help, then nominates the members to a
// reservation that started or moved and records the event. It reports handled when the gang holds a
// reservation: the member's result and status are then the reservation's. A group of a job reserves
// for its job (see gang.ReserveIn.Job): the reservation is its holder group's.
func (pl *Coscheduling) reserveRoom(ctx context.Context, pod *v1.Pod, pg *v1alpha1.PodGroup, asJob bool) (*fwk.PostFilterResult, *fwk.Status, bool) {
	if pl.reservation.MaxGangs <= 0 && !pl.holdsReservation(podgroup.Key(pg.Namespace, pg.Name)) {
		return nil, nil, false
	}
	holder, job := pl.jobToReserve(pod, pg)
	if own := podgroup.Key(pg.Namespace, pg.Name); !gang.ReservesAs(asJob, job, own) {
		gang.LeftOut(&pl.mu, func() *gang.Gang { return pl.gangForLocked(pg) }, job, own, pl.clock.Now(), pl.stepReservationAsyncLocked)
		return nil, nil, false
	}
	key := podgroup.Key(holder.Namespace, holder.Name)
	logger := klog.FromContext(ctx)
	now := pl.clock.Now()
	in := gang.ReserveIn{Args: pl.reservation, Now: now, Pod: pod, PodGroup: holder, Adopt: podgroup.HeldReservation(holder), DefaultTopology: pl.defaultTopology, Logger: logger, Devices: pl.fit.Devices,
		Job: job, Members: job.MembersOr(func() []*v1.Pod { return pl.members.InGroup(holder.Namespace, holder.Name) }),
		Nodes:  func() ([]fwk.NodeInfo, error) { return pl.handle.SnapshotSharedLister().NodeInfos().List() },
		Claims: func(prio int32) []*v1.Pod { return pl.claims.Against(prio, key) }}
	g, out := gang.ReserveUnder(&pl.mu, func() *gang.Gang { return pl.gangForLocked(holder) }, in, gang.ReserveHooks{
		Queue:   func(g *gang.Gang) func(int32) (int, bool) { return pl.gangs.QueueFor(g, pl.reservation, now) },
		Applied: func(g *gang.Gang, e resv.Effects) gang.ReservationDone { return pl.appliedReservationLocked(g, e, now) },
		Adopted: pl.reservationMetricsLocked,
		Planned: func(started bool) {
			pl.heldVersion.Add(1) // the reservation may hold other nodes now
			if started {
				pl.reservationMetricsLocked()
			}
		},
		Finish: func(done []gang.ReservationDone) {
			for _, d := range done {
				pl.finishReservation(ctx, holder.Namespace, holder.Name, holder, d, nil)
			}
		},
	})
	e := out.Last()
	p, prio := out.Plan, corev1helpers.PodPriority(pod)
	switch {
	case !out.Planned:
	case e.Start:
		pl.nominate(ctx, pod, p.Assignment, prio)
		logger.V(2).Info("Gang reserves room", "podGroup", key, "nodes", p.Nodes, "milliCPU", p.MilliCPU, "memory", p.Memory)
		pl.recorder.PodGroup(holder, v1.EventTypeNormal, podgroup.ReasonReserved, gang.ReservedMessage(key, p, prio))
		pl.notifyStatus(key)
	case e.Moved:
		pl.nominate(ctx, pod, p.Assignment, prio)
		logger.V(3).Info("Gang's reservation moved: the room it counts on changed", "podGroup", key, "nodes", p.Nodes)
	case !p.OK && !e.Hold:
		logger.V(3).Info("Gang reserves nothing: its members do not fit the room that frees", "podGroup", key, "reason", p.Message)
	}
	pl.mu.RLock()
	res, st, held := g.Reserve.PostFilter(pod.UID, key)
	pl.mu.RUnlock()
	if !held && e.Why != "" {
		logger.V(4).Info("Gang holds no reservation", "podGroup", key, "why", e.Why)
	}
	return res, st, held
}
