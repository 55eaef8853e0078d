package gang

import (
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework"

	"github.com/custom-scheduler/custom-scheduler/pkg/coscheduling/podgroup"
)

// The scheduling queue's order of a gang's members: adjacent, in an order that never changes under the
// heap (the plugin's Less compares priorities first, then calls Less).

// QueueStamp is a member's queue order key, fixed as it enters the queue: its group's time (the
// PodGroup's creation, or the group's last failure when the member entered the queue after it), the
// group's key, and its rank in the group (see Gang.Rank). Entities of no group have only a time.
type QueueStamp struct {
	At   time.Time
	Key  string
	Rank uint8
}

// Stamps are the members' queue order keys by UID, each fixed by the plugin's PreEnqueue as the
// member enters the queue (Stamp), so that Less never reads state that changes while the pod is in
// the heap. Safe for concurrent use.
type Stamps struct{ m sync.Map }

// Store fixes uid's stamp; Delete forgets it (the member left the queue for good).
func (s *Stamps) Store(uid types.UID, stamp QueueStamp) { s.m.Store(uid, stamp) }
func (s *Stamps) Delete(uid types.UID)                  { s.m.Delete(uid) }

// Of is uid's stamp, false when it has none.
func (s *Stamps) Of(uid types.UID) (QueueStamp, bool) {
	v, ok := s.m.Load(uid)
	if !ok {
		return QueueStamp{}, false
	}
	return v.(QueueStamp), true
}

// Len is how many stamps are kept (for tests that check they are freed).
func (s *Stamps) Len() int {
	n := 0
	s.m.Range(func(any, any) bool { n++; return true })
	return n
}

// Less orders the queue as LessQueued does, with these stamps.
func (s *Stamps) Less(a, b fwk.QueuedEntityInfo) bool { return LessQueued(a, b, s.Of) }

// Stamp is the queue order key of a member of g entering the queue, whose PodGroup was created at
// created.
func (g *Gang) Stamp(pod *v1.Pod, created time.Time) QueueStamp {
	s := QueueStamp{At: created, Key: g.Key(), Rank: g.Rank(pod)}
	if g.LastFailure.After(s.At) {
		s.At = g.LastFailure
	}
	return s
}

// QueueEntry is what Less compares of a queued entity: its stamp, the pod's creation and the time it
// entered the queue.
type QueueEntry struct {
	Stamp           QueueStamp
	Created, Queued time.Time
}

// Less orders two entities of one priority: by the group's time, then by group, then, within a group,
// by rank (the attempt's lead, then constrained members), then by creation (a Job's index order), and
// last by the time each entered the queue. A group whose attempt just failed goes behind the others.
func Less(a, b QueueEntry) bool {
	sa, sb := a.Stamp, b.Stamp
	if !sa.At.Equal(sb.At) {
		return sa.At.Before(sb.At)
	}
	if sa.Key != sb.Key {
		return sa.Key < sb.Key
	}
	if sa.Key != "" {
		if sa.Rank != sb.Rank {
			return sa.Rank < sb.Rank
		}
		if !a.Created.Equal(b.Created) {
			return a.Created.Before(b.Created)
		}
	}
	return a.Queued.Before(b.Queued)
}

// LessQueued orders the scheduling queue by priority, then as Less orders entities of one priority:
// by the group's time, then by group, then by the member's rank and creation, then by the time each
// entered the queue, so that members of one group are adjacent and a group whose attempt just failed
// goes behind the others. A member's group time, key and rank are fixed by the plugin's PreEnqueue as
// it enters the queue (stamp looks them up; every way into the active and backoff queues runs
// PreEnqueue first), so the order of pods already in the queue never changes under the heap. Pods
// without a group (or members that did not pass PreEnqueue) are ordered as PrioritySort orders them.
func LessQueued(a, b fwk.QueuedEntityInfo, stamp func(types.UID) (QueueStamp, bool)) bool {
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
	return Less(entryOf(a, podA, stamp), entryOf(b, podB, stamp))
}

// entryOf is what Less compares of an entity: a member's stamp from PreEnqueue (else its queue time),
// its creation and its queue time.
func entryOf(e fwk.QueuedEntityInfo, pod *v1.Pod, stamp func(types.UID) (QueueStamp, bool)) QueueEntry {
	q := QueueEntry{Stamp: QueueStamp{At: e.GetTimestamp()}, Queued: e.GetTimestamp()}
	if pod != nil {
		q.Created = pod.CreationTimestamp.Time
		if s, ok := stamp(pod.UID); ok {
			q.Stamp = s
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
