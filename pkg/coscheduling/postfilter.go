package coscheduling

import (
	"context"
	"fmt"
	"sort"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	corev1helpers "k8s.io/component-helpers/scheduling/corev1"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework"

	"github.com/custom-scheduler/custom-scheduler/pkg/apis/scheduling/v1alpha1"
	"github.com/custom-scheduler/custom-scheduler/pkg/coscheduling/attempt"
	"github.com/custom-scheduler/custom-scheduler/pkg/coscheduling/gang"
	"github.com/custom-scheduler/custom-scheduler/pkg/coscheduling/gangfit"
	"github.com/custom-scheduler/custom-scheduler/pkg/coscheduling/metrics"
	"github.com/custom-scheduler/custom-scheduler/pkg/coscheduling/podgroup"
	resv "github.com/custom-scheduler/custom-scheduler/pkg/coscheduling/reservation"
	"github.com/custom-scheduler/custom-scheduler/pkg/coscheduling/status"
)

// PostFilter: what a member that found no node does — preempt (preemption.go), reserve room against
// starvation (reserveRoom; the reservation's state machine is reservation.go's), miss its plan
// (plan.go), or fail its gang's attempt.

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
	// Whether the quorum can still be reached is decided on the store, as the quorum itself is (the
	// handler's count may still hold a pod just deleted).
	want, existing, now := podgroup.MinMember(pg), pl.members.StoreCount(pod.Namespace, name), pl.clock.Now()
	pl.mu.Lock()
	g := pl.gangForLocked(pg)
	r := pl.stepLocked(g, func() gang.Result { return g.OnNoNode(pod, now, want, existing, pl.backoff) })
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

// preemptOrReserve is PostFilter for a gang found not to fit: it preempts lower-priority pods when
// that makes room (see preemptForGang), and otherwise reserves the room that frees once the gang has
// waited long enough (see reservation.go). A preemption ends the gang's reservation: its nominations
// are the preemption's now.
func (pl *Coscheduling) preemptOrReserve(ctx context.Context, pod *v1.Pod, pg *v1alpha1.PodGroup) (*fwk.PostFilterResult, *fwk.Status) {
	res, st, result := pl.preemptForGang(ctx, pod, pg)
	switch result {
	case gang.PreemptVictims, gang.PreemptWaiting, gang.PreemptError:
		return res, st
	}
	if rres, rst, held := pl.reserveRoom(ctx, pod, pg); held {
		return rres, rst
	}
	return res, st
}

// reserveRoom runs a reservation step for a member of a gang found not to fit, whose preemption
// does not help (see PostFilter). It reports handled when the gang holds a reservation: the member's
// result and status are then the reservation's.
func (pl *Coscheduling) reserveRoom(ctx context.Context, pod *v1.Pod, pg *v1alpha1.PodGroup) (*fwk.PostFilterResult, *fwk.Status, bool) {
	key := podgroup.Key(pg.Namespace, pg.Name)
	if pl.reservation.MaxGangs <= 0 && !pl.holdsReservation(key) {
		return nil, nil, false
	}
	logger := klog.FromContext(ctx)
	prio := corev1helpers.PodPriority(pod)
	now := pl.clock.Now()
	// The members are listed (O(members)) only when a step needs them: to adopt a reservation a
	// previous leader left, or to plan one.
	var members []*v1.Pod
	cond := meta.FindStatusCondition(pg.Status.Conditions, status.ConditionReserved)
	if cond != nil && cond.Status == metav1.ConditionTrue {
		members = pl.members.InGroup(pg.Namespace, pg.Name)
	}

	pl.mu.Lock()
	g := pl.gangForLocked(pg)
	r := &g.Reserve
	var adopted reservationDone
	if members != nil && !r.Seen && !r.Held() {
		adopted = pl.adoptReservationLocked(g, cond, members, now)
	}
	in := resv.Input{Event: resv.NoRoom, Now: now, Prio: prio}
	in.Others, in.Ahead = pl.reservationQueueLocked(g, prio, now)
	e, d := pl.stepReservationLocked(g, in)
	pl.mu.Unlock()
	for _, done := range []reservationDone{adopted, d} {
		if !done.empty() {
			pl.finishReservation(ctx, pg.Namespace, pg.Name, pg, done, nil)
		}
	}

	if e.Plan {
		if members == nil {
			members = pl.members.InGroup(pg.Namespace, pg.Name)
		}
		p := pl.planReservation(ctx, pod, pg, members, prio)
		pl.mu.Lock()
		in := resv.Input{Event: resv.Planned, Now: now}
		in.Others, in.Ahead = pl.reservationQueueLocked(g, prio, now)
		in.Plan = resv.Plan{OK: p.OK, Message: p.Message, Same: r.Plan.Same(p)}
		e, d = pl.stepReservationLocked(g, in)
		if e.Start || e.Moved {
			r.Hold(p)
		}
		if e.Start {
			pl.reservationMetricsLocked()
		}
		pl.mu.Unlock()
		if !d.empty() {
			pl.finishReservation(ctx, pg.Namespace, pg.Name, pg, d, nil)
		}
		if e.Start || e.Moved {
			pl.nominate(ctx, pod, p.Assignment, prio)
		}
		switch {
		case e.Start:
			logger.V(2).Info("Gang reserves room", "podGroup", key, "nodes", p.Nodes, "milliCPU", p.MilliCPU, "memory", p.Memory)
			pl.podGroupEvent(pg, v1.EventTypeNormal, EventReserved, fmt.Sprintf("PodGroup %s %s; pods of priority %d or lower are kept off it, and go where they fit beside it", key, p.Message, prio))
			pl.notifyStatus(key)
		case e.Moved:
			logger.V(3).Info("Gang's reservation moved: the room it counts on changed", "podGroup", key, "nodes", p.Nodes)
		case !p.OK && !e.Hold:
			logger.V(3).Info("Gang reserves nothing: its members do not fit the room that frees", "podGroup", key, "reason", p.Message)
		}
	}

	pl.mu.RLock()
	held, node, since, msg := r.Held(), r.Node[pod.UID], r.Since, r.Plan.Message
	pl.mu.RUnlock()
	if !held {
		if e.Why != "" {
			logger.V(4).Info("Gang holds no reservation", "podGroup", key, "why", e.Why)
		}
		return nil, nil, false
	}
	st := fwk.NewStatus(fwk.Unschedulable, fmt.Sprintf("reservation: PodGroup %s %s since %s, until that room is free", key, msg, since.UTC().Format(time.RFC3339)))
	if node == "" {
		return nil, st, true
	}
	return framework.NewPostFilterResultWithNominatedNode(node), st, true
}

// planReservation plans where the gang's missing members hold room (see gangfit.PlanReservation).
func (pl *Coscheduling) planReservation(ctx context.Context, pod *v1.Pod, pg *v1alpha1.PodGroup, members []*v1.Pod, prio int32) gangfit.ReservationPlan {
	key := podgroup.Key(pg.Namespace, pg.Name)
	nodes, err := pl.handle.SnapshotSharedLister().NodeInfos().List()
	if err != nil {
		return gangfit.ReservationPlan{Message: err.Error()}
	}
	policy, err := gangfit.PolicyFor(pg, pod, pl.defaultTopology)
	if err != nil {
		return gangfit.ReservationPlan{Message: err.Error()}
	}
	pl.mu.RLock()
	candidates, _, countedN := pl.gangs[key].Split(members)
	pl.mu.RUnlock()
	// In a fixed order, so that the same room gives the same plan (the members come from a map).
	sort.Slice(candidates, func(i, j int) bool { return candidates[i].Name < candidates[j].Name })
	f := gangfit.NewReservable(klog.FromContext(ctx), key, candidates, podgroup.MinMember(pg)-countedN, nodes, pl.claims.Against(prio, key), prio)
	return gangfit.PlanReservation(f, policy, gangfit.PinnedDomains(policy, gangfit.BoundNodes(members, nodes)))
}
