package coscheduling

import (
	"context"
	"fmt"
	"time"

	v1 "k8s.io/api/core/v1"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/custom-scheduler/custom-scheduler/pkg/coscheduling/gang"
	"github.com/custom-scheduler/custom-scheduler/pkg/coscheduling/podgroup"
)

// The queue: PreEnqueue holds a member back, holding nothing, until its gang may try; Less keeps a
// gang's members adjacent, in an order that never changes under the heap.

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
	want := podgroup.MinMember(pg)
	if existing := pl.members.CountUpTo(pod.Namespace, name, want); existing < want {
		return pl.gate(ctx, pod, EventWaitingForMembers,
			fmt.Sprintf("%d of minMember %d live pods of PodGroup %s exist; the pod waits for the rest without holding resources", existing, want, key))
	}
	now := pl.clock.Now()
	pl.mu.Lock()
	g := pl.gangForLocked(pg)
	if g.BackingOff(now) {
		until := g.BackoffUntil
		pl.mu.Unlock()
		return pl.gate(ctx, pod, "", gang.BackoffMessage(key, until))
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
	// rank orders the members of one group (see gang.Gang.Rank).
	rank uint8
}

// Less orders the queue by priority, then by the group's time, then by group, then by the member's
// rank (see gang.Gang.Rank), then by pod creation time and by the time each pod entered the queue. Members
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
		// Members of one group: the attempt's lead, then constrained members (see gang.Gang.Rank), then in
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
