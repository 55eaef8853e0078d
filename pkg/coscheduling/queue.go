package coscheduling

import (
	"context"

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
	if why := pl.dra.ClaimOrder(pod); why != "" {
		return pl.heldBack.Hold(ctx, pod, podgroup.ReasonPodGroupClaimOrder, why)
	}
	pg := pl.podGroups.Get(pod.Namespace, name)
	if pg == nil {
		return pl.heldBack.Hold(ctx, pod, podgroup.ReasonPodGroupNotFound, podgroup.NotFoundMessage(key))
	}
	if reason, msg := pl.holdBack(pod, pg); reason != "" {
		return pl.heldBack.Hold(ctx, pod, reason, msg)
	}
	if reason, msg := pl.treeHoldBack(pod, pg); reason != "" {
		return pl.heldBack.Hold(ctx, pod, reason, msg)
	}
	now := pl.clock.Now()
	pl.mu.Lock()
	g := pl.gangForLocked(pg)
	if g.BackingOff(now) {
		until := g.BackoffUntil
		pl.mu.Unlock()
		return pl.heldBack.Hold(ctx, pod, "", gang.BackoffMessage(key, until))
	}
	pl.heldBack.Release(pod.UID)
	stamp := g.Stamp(pod, pg.CreationTimestamp.Time)
	pl.mu.Unlock()
	pl.stamps.Store(pod.UID, stamp)
	return nil
}

// Less orders the queue as gang.LessQueued does, with the stamps PreEnqueue fixed (see there).
func (pl *Coscheduling) Less(a, b fwk.QueuedEntityInfo) bool { return pl.stamps.Less(a, b) }
