package gang

import (
	"testing"
	"time"

	"github.com/custom-scheduler/custom-scheduler/pkg/coscheduling/internal/gangtest"
)

func TestStamp(t *testing.T) {
	g := New("ns", "g", "uid")
	m := gangtest.Member("m0", "g", "1")
	if s := g.Stamp(m, t0); s != (QueueStamp{At: t0, Key: "ns/g", Rank: 2}) {
		t.Errorf("Stamp = %+v, want the PodGroup's creation, the group's key and rank 2", s)
	}
	g.LastFailure = t0.Add(time.Minute)
	g.Lead = m.UID
	if s := g.Stamp(m, t0); s != (QueueStamp{At: t0.Add(time.Minute), Key: "ns/g", Rank: 0}) {
		t.Errorf("Stamp after a failure = %+v, want the failure's time and the lead's rank 0", s)
	}
}

// TestLess: a row per key Less orders by, each with both orders checked.
func TestLess(t *testing.T) {
	at := func(min int) time.Time { return t0.Add(time.Duration(min) * time.Minute) }
	member := func(group string, groupAt int, rank uint8, created, queued int) QueueEntry {
		return QueueEntry{Stamp: QueueStamp{At: at(groupAt), Key: group, Rank: rank}, Created: at(created), Queued: at(queued)}
	}
	plain := func(queued, created int) QueueEntry {
		return QueueEntry{Stamp: QueueStamp{At: at(queued)}, Created: at(created), Queued: at(queued)}
	}
	for _, tc := range []struct {
		name          string
		first, second QueueEntry
	}{
		{"the older group first", member("ns/b", 1, 2, 0, 5), member("ns/a", 2, 0, 0, 0)},
		{"a group failed since goes behind (its time is the failure's)", member("ns/a", 1, 2, 0, 0), member("ns/b", 3, 2, 0, 0)},
		{"groups of one time: by key", member("ns/a", 1, 2, 5, 5), member("ns/b", 1, 0, 0, 0)},
		{"within a group: the lead first", member("ns/a", 1, 0, 5, 5), member("ns/a", 1, 1, 0, 0)},
		{"within a group: constrained before the rest", member("ns/a", 1, 1, 5, 5), member("ns/a", 1, 2, 0, 0)},
		{"within a group and rank: by creation", member("ns/a", 1, 2, 1, 5), member("ns/a", 1, 2, 2, 0)},
		{"then by the time each entered the queue", member("ns/a", 1, 2, 1, 1), member("ns/a", 1, 2, 1, 2)},
		{"plain pods: by queue time, never by creation", plain(1, 5), plain(2, 0)},
		{"entities of no group at one time: by queue time, never by rank or creation",
			QueueEntry{Stamp: QueueStamp{At: at(1), Rank: 2}, Created: at(5), Queued: at(1)}, QueueEntry{Stamp: QueueStamp{At: at(1), Rank: 0}, Created: at(0), Queued: at(2)}},
		{"a plain pod queued before a group's time goes first", plain(0, 0), member("ns/a", 1, 0, 0, 0)},
	} {
		if !Less(tc.first, tc.second) || Less(tc.second, tc.first) {
			t.Errorf("%s: Less(first, second) = %v, Less(second, first) = %v; want true, false", tc.name, Less(tc.first, tc.second), Less(tc.second, tc.first))
		}
	}
}
