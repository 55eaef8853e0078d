package gang

import (
	"time"

	v1 "k8s.io/api/core/v1"
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
