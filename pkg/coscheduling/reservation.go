package coscheduling

import (
	"context"
	"fmt"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	corev1helpers "k8s.io/component-helpers/scheduling/corev1"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework"
	"k8s.io/utils/clock"

	"github.com/custom-scheduler/custom-scheduler/pkg/apis/scheduling/v1alpha1"
	"github.com/custom-scheduler/custom-scheduler/pkg/coscheduling/gangfit"
	"github.com/custom-scheduler/custom-scheduler/pkg/coscheduling/podgroup"
	"github.com/custom-scheduler/custom-scheduler/pkg/coscheduling/status"
)

// Reservation against starvation (see gangfit/reservation.go for the decisions): a gang that found no
// room for reservation.afterSeconds nominates its missing members to the nodes they will use, so that
// the room freeing there is not taken by pods of its priority or lower; it binds once the room is
// free. The orchestration here runs in the gang's PostFilter (every member found no room): it starts,
// keeps or ends the gang's reservation, and returns the member's own node as its nomination, which
// the scheduler writes to the member's status and its nominator.

// reservationRecheck is how often a reservation's plan is made again: the room it counts on may have
// been taken by pods of higher priority, or a member replaced.
const reservationRecheck = 10 * time.Second

// Reasons of the Reserved condition and of the ends of a reservation (metrics label, lower case).
const (
	reasonRoomHeld            = "RoomHeld"
	reasonReservationBound    = "QuorumReached"
	reasonReservationTimedOut = "ReservationTimedOut"
	reasonReservationNoRoom   = "NoRoom"
	reasonReservationDeleted  = "PodGroupDeleted"
)

// reservation is a gang's reservation state.
type reservation struct {
	// waitingSince is when the gang first found no room in its current wait (zero: not waiting).
	waitingSince time.Time
	// prio is the gang's priority (its members'), for the order among waiting gangs.
	prio int32
	// unfit is set when the gang's last plan did not fit while no other gang held a reservation: its
	// members do not fit even the room that frees, so it reserves nothing and goes before no one. A
	// gang whose plan failed only because another reservation holds the room keeps its place.
	unfit     bool
	plannedAt time.Time
	active    bool
	since     time.Time
	plan      gangfit.ReservationPlan
	node      map[types.UID]string
	// ended and endMessage: how the last reservation ended, for the status.
	ended, endMessage string
	// timer brings the gang back when its wait reaches reservation.afterSeconds, or its reservation
	// times out: the decision is taken in its members' PostFilter, and a quiet cluster may send no
	// event that requeues them.
	timer   clock.Timer
	timerAt time.Time
}

// wakeLocked brings g's members back into the scheduling queue at the given time (one timer per
// gang: an earlier time replaces a later one).
func (pl *Coscheduling) wakeLocked(g *gang, at time.Time, now time.Time) {
	r := &g.reserve
	if r.timer != nil && !r.timerAt.After(at) && r.timerAt.After(now) {
		return
	}
	if r.timer != nil {
		r.timer.Stop()
	}
	namespace, name := g.namespace, g.name
	r.timerAt = at
	r.timer = pl.clock.AfterFunc(max(at.Sub(now), 0), func() { pl.activateGroup(namespace, name) })
}

// reserveRoom runs a reservation step for a member of a gang found not to fit (see PostFilter). It
// reports handled when the gang holds a reservation: the member's result and status are then the
// reservation's.
func (pl *Coscheduling) reserveRoom(ctx context.Context, pod *v1.Pod, pg *v1alpha1.PodGroup) (*fwk.PostFilterResult, *fwk.Status, bool) {
	if pl.reservation.MaxGangs <= 0 {
		return nil, nil, false
	}
	logger := klog.FromContext(ctx)
	key := podgroup.Key(pg.Namespace, pg.Name)
	prio := corev1helpers.PodPriority(pod)
	now := pl.clock.Now()
	// The members are listed (O(members)) only when a step needs them: to adopt a reservation a
	// previous leader left, to plan one, or to end one.
	var members []*v1.Pod
	if c := meta.FindStatusCondition(pg.Status.Conditions, status.ConditionReserved); c != nil && c.Status == metav1.ConditionTrue {
		members = pl.membersOf(pg.Namespace, pg.Name)
	}

	pl.mu.Lock()
	g := pl.gangForLocked(pg)
	r := &g.reserve
	r.prio = prio
	if r.waitingSince.IsZero() {
		r.waitingSince = now
	}
	if !r.active && members != nil {
		pl.adoptReservationLocked(g, pg, members)
	}
	waited := now.Sub(r.waitingSince) >= pl.reservation.After
	view := gangfit.ReservationView{Now: now, WaitingSince: r.waitingSince, Active: r.active, Since: r.since}
	if !r.active && waited {
		// O(tracked groups): only for a gang that may reserve now.
		view.Others, view.Ahead = pl.reservationQueueLocked(g, now)
	}
	action, why := gangfit.DecideReservation(pl.reservation, view)
	switch {
	case action == gangfit.ReservationNone && !waited:
		pl.wakeLocked(g, r.waitingSince.Add(pl.reservation.After), now)
	case action == gangfit.ReservationNone && view.Ahead:
		pl.wakeLocked(g, now.Add(reservationRecheck), now)
	case action == gangfit.ReservationKeep:
		pl.wakeLocked(g, r.since.Add(pl.reservation.Timeout), now)
	}
	// A gang that may reserve plans at once; a held reservation, and a gang waiting its turn (for the
	// order among waiting gangs), plan again every reservationRecheck.
	stale := now.Sub(r.plannedAt) >= reservationRecheck
	plan := action == gangfit.ReservationStart || (stale && (action == gangfit.ReservationKeep || (action == gangfit.ReservationNone && waited)))
	pl.mu.Unlock()

	if members == nil && (plan || action == gangfit.ReservationEnd) {
		members = pl.membersOf(pg.Namespace, pg.Name)
	}
	if action == gangfit.ReservationEnd {
		pl.endReservation(ctx, pg, reasonReservationTimedOut, why, members)
		return nil, nil, false
	}
	var p gangfit.ReservationPlan
	if plan {
		p = pl.planReservation(ctx, pod, pg, members, prio)
	}

	pl.mu.Lock()
	started, noRoom := false, false
	if plan {
		r.plannedAt, r.unfit = now, !p.OK && view.Others == 0
		switch {
		case action == gangfit.ReservationStart && p.OK && !r.active:
			r.active, r.since, r.ended, r.endMessage = true, now, "", ""
			started = true
		case r.active && !p.OK:
			noRoom = true
		case r.active:
			started = !r.plan.Same(p)
		}
		if p.OK && (started || r.active) {
			r.plan = p
			r.node = make(map[types.UID]string, len(p.Assignment))
			for _, a := range p.Assignment {
				r.node[a.Pod.UID] = a.Node
			}
		}
	}
	active, node, since, msg := r.active, r.node[pod.UID], r.since, r.plan.Message
	if started {
		pl.reservationMetricsLocked()
	}
	pl.mu.Unlock()

	switch {
	case noRoom:
		pl.endReservation(ctx, pg, reasonReservationNoRoom, p.Message, members)
		return nil, nil, false
	case !active:
		if action == gangfit.ReservationStart && !p.OK {
			logger.V(3).Info("Gang reserves nothing: its members do not fit the room that frees", "podGroup", key, "reason", p.Message)
		}
		return nil, nil, false
	}
	if started {
		pl.nominate(ctx, pod, p.Assignment, prio)
		logger.V(2).Info("Gang reserves room", "podGroup", key, "nodes", p.Nodes, "milliCPU", p.MilliCPU, "memory", p.Memory)
		pl.podGroupEvent(pg, v1.EventTypeNormal, EventReserved, fmt.Sprintf("PodGroup %s %s; pods of priority %d or lower are kept off it, and go where they fit beside it", key, p.Message, prio))
		pl.notifyStatus(key)
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
	candidates, _, countedN := splitMembersLocked(pl.gangs[key], members)
	pl.mu.RUnlock()
	f := gangfit.NewReservable(klog.FromContext(ctx), key, candidates, podgroup.MinMember(pg)-countedN, nodes, pl.claims.Against(prio, key), prio)
	return gangfit.PlanReservation(f, policy, gangfit.PinnedDomains(policy, gangfit.BoundNodes(members, nodes)))
}

// adoptReservationLocked takes over a reservation a previous leader started: the PodGroup says it is
// Reserved, and its members are nominated. Its start is the condition's.
func (pl *Coscheduling) adoptReservationLocked(g *gang, pg *v1alpha1.PodGroup, members []*v1.Pod) {
	c := meta.FindStatusCondition(pg.Status.Conditions, status.ConditionReserved)
	if c == nil || c.Status != metav1.ConditionTrue {
		return
	}
	node := map[types.UID]string{}
	var p gangfit.ReservationPlan
	for _, m := range members {
		if m.Spec.NodeName == "" && m.Status.NominatedNodeName != "" {
			node[m.UID] = m.Status.NominatedNodeName
			p.Assignment = append(p.Assignment, gangfit.Nomination{Pod: m, Node: m.Status.NominatedNodeName})
		}
	}
	if len(node) == 0 {
		return
	}
	r := &g.reserve
	p.OK, p.Message = true, c.Message
	r.active, r.since, r.plan, r.node, r.unfit = true, c.LastTransitionTime.Time, p, node, false
	if r.waitingSince.IsZero() || r.since.Before(r.waitingSince) {
		r.waitingSince = r.since
	}
	pl.reservationMetricsLocked()
}

// reservationQueueLocked counts the other gangs that hold a reservation, and reports whether one that
// may reserve and holds none goes before g: higher priority, or the same and waiting longer.
func (pl *Coscheduling) reservationQueueLocked(g *gang, now time.Time) (others int, ahead bool) {
	r := &g.reserve
	for _, o := range pl.gangs {
		if o == g {
			continue
		}
		or := &o.reserve
		switch {
		case or.active:
			others++
		case !or.unfit && !or.waitingSince.IsZero() && now.Sub(or.waitingSince) >= pl.reservation.After &&
			(or.prio > r.prio || (or.prio == r.prio && or.waitingSince.Before(r.waitingSince))):
			ahead = true
		}
	}
	return others, ahead
}

// endReservation ends the gang's reservation (if it holds one) and drops its members' nominations.
// A reservation that timed out sends the gang behind the others: its wait starts again.
func (pl *Coscheduling) endReservation(ctx context.Context, pg *v1alpha1.PodGroup, reason, msg string, members []*v1.Pod) {
	key := podgroup.Key(pg.Namespace, pg.Name)
	now := pl.clock.Now()
	pl.mu.Lock()
	g := pl.gangs[key]
	if g == nil || !g.reserve.active {
		pl.mu.Unlock()
		return
	}
	pl.endReservationLocked(g, reason, msg, now)
	pl.mu.Unlock()
	pl.clearNominations(ctx, members, "")
	pl.podGroupEvent(pg, v1.EventTypeNormal, EventReservationEnded, fmt.Sprintf("PodGroup %s holds its room no more: %s", key, msg))
	pl.notifyStatus(key)
}

// endReservationLocked records the end of g's reservation. A gang whose quorum is reached stops
// waiting; one whose reservation timed out waits again from now, behind the others.
func (pl *Coscheduling) endReservationLocked(g *gang, reason, msg string, now time.Time) {
	r := &g.reserve
	if reason == reasonReservationBound {
		r.waitingSince, r.unfit = time.Time{}, false
	}
	if r.timer != nil && (r.active || reason == reasonReservationBound) {
		r.timer.Stop()
		r.timer = nil
	}
	if !r.active {
		// Called on every quorum: O(1) unless a reservation ends.
		return
	}
	reservationsEnded.WithLabelValues(pl.profile, strings.ToLower(reason)).Inc()
	r.ended, r.endMessage = reason, msg
	r.active, r.node, r.plan = false, nil, gangfit.ReservationPlan{}
	if reason == reasonReservationTimedOut {
		r.waitingSince, r.plannedAt = now, now
	}
	pl.reservationMetricsLocked()
	// The gangs waiting behind it take their turn now, not at their next event.
	for _, o := range pl.gangs {
		if o != g && !o.reserve.active && !o.reserve.waitingSince.IsZero() {
			namespace, name := o.namespace, o.name
			go pl.activateGroup(namespace, name)
		}
	}
}

// reservationMetricsLocked sets the reservation gauges from the gangs' state. O(tracked groups),
// called when a reservation starts or ends.
func (pl *Coscheduling) reservationMetricsLocked() {
	n, cpu, mem := 0, int64(0), int64(0)
	var oldest time.Time
	for _, g := range pl.gangs {
		if r := &g.reserve; r.active {
			n++
			cpu += r.plan.MilliCPU
			mem += r.plan.Memory
			if oldest.IsZero() || r.since.Before(oldest) {
				oldest = r.since
			}
		}
	}
	pl.reserved.Store(int64(n))
	reservedGangs.WithLabelValues(pl.profile).Set(float64(n))
	reservedCapacity.WithLabelValues(pl.profile, "cpu").Set(float64(cpu) / 1000)
	reservedCapacity.WithLabelValues(pl.profile, "memory").Set(float64(mem))
	start := 0.0
	if !oldest.IsZero() {
		start = float64(oldest.Unix())
	}
	oldestReservationStart.WithLabelValues(pl.profile).Set(start)
}

// reservationNote names the reservations that keep a pod of its priority off their room, for the
// pod's scheduling failure (empty when none does). O(tracked groups) while some gang holds one.
func (pl *Coscheduling) reservationNote(pod *v1.Pod) string {
	if pl.reserved.Load() == 0 {
		return ""
	}
	prio := corev1helpers.PodPriority(pod)
	own, _ := podgroup.Of(pod)
	pl.mu.RLock()
	defer pl.mu.RUnlock()
	var notes []string
	for key, g := range pl.gangs {
		r := &g.reserve
		if !r.active || r.prio < prio || (g.namespace == pod.Namespace && g.name == own) {
			continue
		}
		notes = append(notes, fmt.Sprintf("room on %s is held for PodGroup %s (a reservation since %s)", strings.Join(r.plan.Nodes, ", "), key, r.since.UTC().Format(time.RFC3339)))
	}
	return strings.Join(notes, "; ")
}
