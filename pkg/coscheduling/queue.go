package coscheduling

import (
	"context"
	"fmt"

	v1 "k8s.io/api/core/v1"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework"

	"github.com/custom-scheduler/custom-scheduler/pkg/apis/scheduling/v1alpha1"
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
	if src := pl.dra; src != nil {
		if why := src.ClaimOrder(pod); why != "" {
			return pl.gate(ctx, pod, podgroup.ReasonPodGroupClaimOrder, why)
		}
	}
	pg := pl.podGroups.Get(pod.Namespace, name)
	if pg == nil {
		return pl.gate(ctx, pod, podgroup.ReasonPodGroupNotFound,
			fmt.Sprintf("PodGroup %s does not exist; the pod waits for it without holding resources", key))
	}
	if reason, msg := pl.holdBack(pod, pg); reason != "" {
		return pl.gate(ctx, pod, reason, msg)
	}
	now := pl.clock.Now()
	pl.mu.Lock()
	g := pl.gangForLocked(pg)
	if g.BackingOff(now) {
		until := g.BackoffUntil
		pl.mu.Unlock()
		return pl.gate(ctx, pod, "", gang.BackoffMessage(key, until))
	}
	pl.gates.Release(pod.UID)
	stamp := g.Stamp(pod, pg.CreationTimestamp.Time)
	pl.mu.Unlock()
	pl.stamps.Store(pod.UID, stamp)
	return nil
}

// holdBack says whether a member of pg waits for its group to have minMember live pods
// (ReasonWaitingForMembers) or for minMember of them to have their claims from templates made
// (ReasonWaitingForClaims: members enter together once their claims exist; one let in earlier is
// placed while its peers' devices are still unknown to the check, and in-tree PodGroup claims are
// shared only with members placed in the same pod-group cycle), and why in the current counts ("" when
// neither). O(1) when the counts reach minMember, else O(members) on the store's word.
func (pl *Coscheduling) holdBack(pod *v1.Pod, pg *v1alpha1.PodGroup) (reason, msg string) {
	key := podgroup.Key(pod.Namespace, pg.Name)
	want, credit := podgroup.MinMember(pg), pl.credit(pod)
	if existing := pl.members.CountUpTo(pod.Namespace, pg.Name, want-credit); existing+credit < want {
		succeeded := ""
		if credit > 0 {
			succeeded = fmt.Sprintf(" (and %d of its run succeeded)", credit)
		}
		return podgroup.ReasonWaitingForMembers,
			fmt.Sprintf("%d of minMember %d live pods of PodGroup %s exist%s; the pod waits for the rest without holding resources", existing, want, key, succeeded)
	}
	if ready := pl.members.ReadyUpTo(pod.Namespace, pg.Name, want-credit); ready+credit < want {
		return podgroup.ReasonWaitingForClaims,
			fmt.Sprintf("%d of minMember %d live pods of PodGroup %s have their ResourceClaims from templates made; the pod waits for the rest without holding resources", ready, want, key)
	}
	return "", ""
}

// Less orders the queue by priority, then as gang.Less orders entities of one priority: by the group's
// time, then by group, then by the member's rank and creation, then by the time each entered the
// queue, so that members of one group are adjacent and a group whose attempt just failed goes behind
// the others. A member's group time, key and rank are fixed by PreEnqueue as it enters the queue
// (every way into the active and backoff queues runs PreEnqueue first), so the order of pods already
// in the queue never changes under the heap. Pods without a group (or members that did not pass this
// PreEnqueue) are ordered as PrioritySort orders them.
func (pl *Coscheduling) Less(a, b fwk.QueuedEntityInfo) bool {
	pa, pb := a.GetPriority(), b.GetPriority()
	if pa != pb {
		return pa > pb
	}
	podA, podB := podOf(a), podOf(b)
	if !podgroup.InGang(podA) && !podgroup.InGang(podB) {
		// Neither has a stamp: what follows would compare their queue times (PrioritySort's order),
		// so do it without looking the stamps up.
		return a.GetTimestamp().Before(b.GetTimestamp())
	}
	return gang.Less(pl.queueEntry(a, podA), pl.queueEntry(b, podB))
}

// queueEntry is what gang.Less compares of an entity: a member's stamp from PreEnqueue (else its queue
// time), its creation and its queue time.
func (pl *Coscheduling) queueEntry(e fwk.QueuedEntityInfo, pod *v1.Pod) gang.QueueEntry {
	q := gang.QueueEntry{Stamp: gang.QueueStamp{At: e.GetTimestamp()}, Queued: e.GetTimestamp()}
	if pod != nil {
		q.Created = pod.CreationTimestamp.Time
		if v, ok := pl.stamps.Load(pod.UID); ok {
			q.Stamp = v.(gang.QueueStamp)
		}
	}
	return q
}

// podOf returns the pod of a queued pod entity, or nil for other entities (in-tree pod groups).
func podOf(e fwk.QueuedEntityInfo) *v1.Pod {
	if q, ok := e.(*framework.QueuedPodInfo); ok {
		// The scheduling queue's own type: no interface lookup.
		return q.Pod
	}
	if withPod, ok := e.(interface{ GetPodInfo() fwk.PodInfo }); ok {
		return withPod.GetPodInfo().GetPod()
	}
	return nil
}
