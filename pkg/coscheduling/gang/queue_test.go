package gang

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework"

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

// TestLessQueued: the queue's order over queued pods: priority first; pods of no group by their queue
// time; a member by the stamp PreEnqueue fixed (its group's time), not its own queue time; a member
// without a stamp by its queue time.
func TestLessQueued(t *testing.T) {
	queued := func(pod *v1.Pod, prio int32, at int) fwk.QueuedEntityInfo {
		pod.Spec.Priority = &prio
		pi, err := framework.NewPodInfo(pod)
		if err != nil {
			t.Fatal(err)
		}
		return &framework.QueuedPodInfo{PodInfo: pi, QueueingParams: framework.QueueingParams{Timestamp: t0.Add(time.Duration(at) * time.Minute)}}
	}
	stamps := map[types.UID]QueueStamp{"m1": {At: t0, Key: "ns/g", Rank: 2}, "m2": {At: t0, Key: "ns/g", Rank: 2}}
	stamp := func(uid types.UID) (QueueStamp, bool) { s, ok := stamps[uid]; return s, ok }
	plain := func(name string) *v1.Pod { return gangtest.Member(name, "", "1") }
	created := func(pod *v1.Pod, min int) *v1.Pod {
		pod.CreationTimestamp = metav1.NewTime(t0.Add(time.Duration(min) * time.Minute))
		return pod
	}
	for _, tc := range []struct {
		name string
		a, b fwk.QueuedEntityInfo
	}{
		{name: "a higher priority first, whenever it came", a: queued(plain("hi"), 10, 9), b: queued(plain("lo"), 0, 1)},
		{name: "pods of no group: by queue time", a: queued(plain("p1"), 0, 1), b: queued(plain("p2"), 0, 2)},
		{name: "a member by its group's time, before a plain pod queued earlier than it", a: queued(gangtest.Member("m1", "g", "1"), 0, 5), b: queued(plain("p"), 0, 3)},
		{name: "members of one group by creation, not queue time", a: queued(created(gangtest.Member("m1", "g", "1"), 1), 0, 5), b: queued(created(gangtest.Member("m2", "g", "1"), 2), 0, 4)},
		{name: "a member without a stamp: by its queue time", a: queued(plain("p"), 0, 3), b: queued(gangtest.Member("m3", "g", "1"), 0, 4)},
	} {
		if !LessQueued(tc.a, tc.b, stamp) || LessQueued(tc.b, tc.a, stamp) {
			t.Errorf("%s: the order is not a before b", tc.name)
		}
	}
}

// TestStamps: a stamp is kept from Store until Delete, a member without one has none, and Less
// orders by the stamps kept (a member by its group's time, ahead of a plain pod queued earlier).
func TestStamps(t *testing.T) {
	queued := func(pod *v1.Pod, at int) fwk.QueuedEntityInfo {
		pi, err := framework.NewPodInfo(pod)
		if err != nil {
			t.Fatal(err)
		}
		return &framework.QueuedPodInfo{PodInfo: pi, QueueingParams: framework.QueueingParams{Timestamp: t0.Add(time.Duration(at) * time.Minute)}}
	}
	member, plain := queued(gangtest.Member("m", "g", "1"), 5), queued(gangtest.Member("p", "", "1"), 3)
	stamp := QueueStamp{At: t0, Key: "ns/g", Rank: 2}
	type got struct {
		Stamp       QueueStamp
		Kept        bool
		Len         int
		MemberFirst bool
	}
	var s Stamps
	for _, tc := range []struct {
		name string
		do   func()
		want got
	}{
		{name: "none", do: func() {}, want: got{}},
		{name: "stored", do: func() { s.Store("m", stamp) }, want: got{Stamp: stamp, Kept: true, Len: 1, MemberFirst: true}},
		{name: "another stored", do: func() { s.Store("x", QueueStamp{At: t0}) }, want: got{Stamp: stamp, Kept: true, Len: 2, MemberFirst: true}},
		{name: "deleted", do: func() { s.Delete("m"); s.Delete("x") }, want: got{}},
	} {
		tc.do()
		st, kept := s.Of("m")
		g := got{Stamp: st, Kept: kept, Len: s.Len(), MemberFirst: s.Less(member, plain)}
		if diff := cmp.Diff(tc.want, g); diff != "" {
			t.Errorf("%s (-want,+got):\n%s", tc.name, diff)
		}
	}
}
