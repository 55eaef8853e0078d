package pgcache

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	st "k8s.io/kubernetes/pkg/scheduler/testing"
	"k8s.io/utils/ptr"

	"github.com/custom-scheduler/custom-scheduler/pkg/apis/scheduling/v1alpha1"
)

func finishedPod(name, prof, group string, owner types.UID, phase v1.PodPhase) *v1.Pod {
	p := st.MakePod().Namespace("ns").Name(name).UID(name).SchedulerName(prof).Label(v1alpha1.PodGroupLabel, group).Node("n").Phase(phase).Obj()
	if owner != "" {
		p.OwnerReferences = []metav1.OwnerReference{{Kind: "Job", Name: string(owner), UID: owner, Controller: ptr.To(true)}}
	}
	return p
}

func TestFinished(t *testing.T) {
	f := NewFinished("prof")
	steps := []struct {
		name   string
		do     func()
		counts map[types.UID]int // per run of group g
		len    int
	}{
		{name: "a succeeded member counts in its run", do: func() {
			if _, _, grew := f.Track(finishedPod("a", "prof", "g", "job", v1.PodSucceeded)); !grew {
				t.Error("Track of a new succeeded member did not grow the count")
			}
		}, counts: map[types.UID]int{"job": 1}, len: 1},
		{name: "tracked again: idempotent", do: func() {
			if _, _, grew := f.Track(finishedPod("a", "prof", "g", "job", v1.PodSucceeded)); grew {
				t.Error("Track of a counted member grew the count")
			}
		}, counts: map[types.UID]int{"job": 1}, len: 1},
		{name: "failed, another scheduler's, another group's: not in g's runs", do: func() {
			f.Track(finishedPod("b", "prof", "g", "job", v1.PodFailed))
			f.Track(finishedPod("c", "default-scheduler", "g", "job", v1.PodSucceeded))
			f.Track(finishedPod("d", "prof", "other", "job", v1.PodSucceeded))
		}, counts: map[types.UID]int{"job": 1}, len: 2},
		{name: "another run", do: func() { f.Track(finishedPod("e", "prof", "g", "job2", v1.PodSucceeded)) },
			counts: map[types.UID]int{"job": 1, "job2": 1}, len: 3},
		{name: "being deleted: uncounted", do: func() {
			p := finishedPod("a", "prof", "g", "job", v1.PodSucceeded)
			p.DeletionTimestamp = &metav1.Time{}
			f.Track(p)
		}, counts: map[types.UID]int{"job2": 1}, len: 2},
		{name: "deleted", do: func() {
			f.Forget(finishedPod("e", "prof", "g", "job2", v1.PodSucceeded))
			f.Forget(finishedPod("d", "prof", "other", "job", v1.PodSucceeded))
		}, len: 0},
	}
	for _, s := range steps {
		s.do()
		for _, run := range []types.UID{"job", "job2"} {
			if got := f.Count("ns", "g", run); got != s.counts[run] {
				t.Errorf("%s: Count(g, %s) = %d, want %d", s.name, run, got, s.counts[run])
			}
		}
		if f.Len() != s.len {
			t.Errorf("%s: Len = %d, want %d", s.name, f.Len(), s.len)
		}
	}
	if NewFinished("prof").Has("x") || (*Finished)(nil).Count("ns", "g", "") != 0 || (*Finished)(nil).Has("x") {
		t.Error("an empty or nil Finished counts something")
	}
}

// TestFinishedCredit: a group's succeeded members count toward its quorum while their run is in
// progress (a live member of the run is bound); none once it has ended, nor for another run.
func TestFinishedCredit(t *testing.T) {
	f := NewFinished("prof")
	f.Track(finishedPod("a", "prof", "g", "job", v1.PodSucceeded))
	f.Track(finishedPod("b", "prof", "g", "job", v1.PodSucceeded))
	f.Track(finishedPod("c", "prof", "g", "old", v1.PodSucceeded))
	live := NewMembers("prof")
	live.Track(finishedPod("d", "prof", "g", "job", v1.PodRunning)) // bound, live
	type credit struct {
		Group string
		Run   types.UID
		N     int
	}
	var got []credit
	for _, c := range []credit{{"g", "job", 0}, {"g", "old", 0}, {"g", "new", 0}, {"h", "job", 0}} {
		c.N = f.Credit(live, "ns", c.Group, c.Run)
		got = append(got, c)
	}
	want := []credit{{"g", "job", 2}, {"g", "old", 0}, {"g", "new", 0}, {"h", "job", 0}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Credit (-want,+got):\n%s", diff)
	}
}
