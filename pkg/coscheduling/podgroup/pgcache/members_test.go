package pgcache

import (
	"fmt"
	"math/rand/v2"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"
	st "k8s.io/kubernetes/pkg/scheduler/testing"
	"k8s.io/utils/ptr"

	"github.com/custom-scheduler/custom-scheduler/pkg/apis/scheduling/v1alpha1"
	"github.com/custom-scheduler/custom-scheduler/pkg/coscheduling/internal/gangtest"
	"github.com/custom-scheduler/custom-scheduler/pkg/coscheduling/podgroup"
)

func gangPod(name, group string) *st.PodWrapper {
	return st.MakePod().Namespace("ns").Name(name).UID(name).SchedulerName("test").Label(v1alpha1.PodGroupLabel, group)
}

func TestMembers(t *testing.T) {
	type step struct {
		pod    *v1.Pod
		forget bool
	}
	cases := []struct {
		name  string
		steps []step
		want  map[string]int // group → count
		len   int
	}{
		{name: "members of two groups", steps: []step{{pod: gangPod("a", "g").Obj()}, {pod: gangPod("b", "g").Obj()}, {pod: gangPod("c", "h").Obj()}},
			want: map[string]int{"g": 2, "h": 1}, len: 3},
		{name: "tracked twice counts once", steps: []step{{pod: gangPod("a", "g").Obj()}, {pod: gangPod("a", "g").Node("n").Obj()}},
			want: map[string]int{"g": 1}, len: 1},
		{name: "a finished member stops counting", steps: []step{{pod: gangPod("a", "g").Obj()}, {pod: gangPod("a", "g").Phase(v1.PodSucceeded).Obj()}},
			want: map[string]int{"g": 0}},
		{name: "a terminating member stops counting", steps: []step{{pod: gangPod("a", "g").Obj()}, {pod: gangPod("a", "g").Terminating().Obj()}},
			want: map[string]int{"g": 0}},
		{name: "a gated pod counts once ungated", steps: []step{{pod: gangPod("a", "g").SchedulingGates([]string{"kueue.x-k8s.io/admission"}).Obj()}},
			want: map[string]int{"g": 0}},
		{name: "ungated", steps: []step{{pod: gangPod("a", "g").SchedulingGates([]string{"x"}).Obj()}, {pod: gangPod("a", "g").Obj()}},
			want: map[string]int{"g": 1}, len: 1},
		{name: "another profile's pod does not count", steps: []step{{pod: gangPod("a", "g").SchedulerName("other").Obj()}},
			want: map[string]int{"g": 0}},
		{name: "a pod that moves group", steps: []step{{pod: gangPod("a", "g").Obj()}, {pod: gangPod("a", "h").Obj()}},
			want: map[string]int{"g": 0, "h": 1}, len: 1},
		{name: "a pod whose label is removed", steps: []step{{pod: gangPod("a", "g").Obj()}, {pod: st.MakePod().Namespace("ns").Name("a").UID("a").SchedulerName("test").Obj()}},
			want: map[string]int{"g": 0}},
		{name: "deleted", steps: []step{{pod: gangPod("a", "g").Obj()}, {pod: gangPod("b", "g").Obj()}, {pod: gangPod("a", "g").Obj(), forget: true}},
			want: map[string]int{"g": 1}, len: 1},
		{name: "deleted twice", steps: []step{{pod: gangPod("a", "g").Obj()}, {pod: gangPod("a", "g").Obj(), forget: true}, {pod: gangPod("a", "g").Obj(), forget: true}},
			want: map[string]int{"g": 0}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			m := NewMembers("test")
			for _, s := range tc.steps {
				if s.forget {
					m.Forget(s.pod)
				} else {
					m.Track(s.pod)
				}
			}
			for group, want := range tc.want {
				if got := m.Count("ns", group); got != want {
					t.Errorf("Count(%s) = %d, want %d", group, got, want)
				}
			}
			if got := m.Len(); got != tc.len {
				t.Errorf("Len = %d, want %d: state left behind", got, tc.len)
			}
		})
	}
}

// TestMembersMatchTheIndex feeds random pod histories to Members and to an indexer with
// podgroup.LiveIndexFunc (the store the count replaces) and checks that both count alike after every
// event, that Ready counts the indexed members whose claims are made, and that Track reports exactly
// the events that grow the Ready count of the pod's group. SEED=<n> replays a run.
func TestMembersMatchTheIndex(t *testing.T) {
	gangtest.RunSeeded(t, 50, func(t *testing.T, rng *rand.Rand, round int) bool {
		return membersRound(t, rng, round)
	})
}

func membersRound(t *testing.T, rng *rand.Rand, round int) bool {
	groups := []string{"g", "h"}
	m := NewMembers("test")
	m.Unmade = unmadeByAnnotation
	idx := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{podgroup.IndexName: podgroup.LiveIndexFunc})
	for ev := range 60 {
		name := fmt.Sprintf("p%d", rng.IntN(8))
		b := gangPod(name, groups[rng.IntN(len(groups))])
		switch rng.IntN(8) {
		case 0:
			b = b.Phase(v1.PodFailed)
		case 1:
			b = b.Terminating()
		case 2:
			b = b.SchedulingGates([]string{"x"})
		case 3:
			b = b.SchedulerName("other")
		case 4:
			b = b.Node("n")
		case 5, 6:
			b = b.Annotation("unmade", "1")
		}
		pod := b.Obj()
		group := pod.Labels[v1alpha1.PodGroupLabel]
		readyBefore := m.Ready("ns", group)
		grew := false
		var what string
		if rng.IntN(5) == 0 {
			what = "delete"
			if err := idx.Delete(pod); err != nil {
				t.Fatal(err)
			}
			m.Forget(pod)
		} else {
			what = "add or update"
			if err := idx.Update(pod); err != nil {
				t.Fatal(err)
			}
			grew = m.Track(pod)
		}
		if after := m.Ready("ns", group); grew != (after > readyBefore) {
			t.Errorf("round %d, event %d (%s %s): Track reported %v, Ready(%s) went from %d to %d", round, ev, what, name, grew, group, readyBefore, after)
			return false
		}
		for _, g := range groups {
			objs, err := idx.ByIndex(podgroup.IndexName, podgroup.MemberKey("test", "ns", g))
			if err != nil {
				t.Fatal(err)
			}
			if got := m.Count("ns", g); got != len(objs) {
				t.Errorf("round %d, event %d (%s %s): Count(%s) = %d, the index holds %d", round, ev, what, name, g, got, len(objs))
				return false
			}
			ready := 0
			for _, o := range objs {
				if !unmadeByAnnotation(o.(*v1.Pod)) {
					ready++
				}
			}
			if got := m.Ready("ns", g); got != ready {
				t.Errorf("round %d, event %d (%s %s): Ready(%s) = %d, the index holds %d members with claims made", round, ev, what, name, g, got, ready)
				return false
			}
		}
	}
	return true
}

func unmadeByAnnotation(p *v1.Pod) bool { return p.Annotations["unmade"] == "1" }

func TestMembersReady(t *testing.T) {
	m := NewMembers("test")
	m.Unmade = unmadeByAnnotation
	steps := []struct {
		pod       *v1.Pod
		wantGrew  bool
		wantReady int
	}{
		{gangPod("a", "g").Annotation("unmade", "1").Obj(), false, 0},
		{gangPod("b", "g").Obj(), true, 1},
		{gangPod("a", "g").Annotation("unmade", "1").Obj(), false, 1}, // no change
		{gangPod("a", "g").Obj(), true, 2},                            // its claims made
		{gangPod("a", "g").Node("n").Obj(), false, 2},                 // bound: no change
		{gangPod("b", "g").Phase(v1.PodFailed).Obj(), false, 1},
	}
	for i, s := range steps {
		if grew := m.Track(s.pod); grew != s.wantGrew {
			t.Errorf("step %d: Track = %v, want %v", i, grew, s.wantGrew)
		}
		if got := m.Ready("ns", "g"); got != s.wantReady {
			t.Errorf("step %d: Ready = %d, want %d", i, got, s.wantReady)
		}
	}
	if got := m.Count("ns", "g"); got != 1 {
		t.Errorf("Count = %d, want 1", got)
	}
}

// TestMembersBoundInRun: a run is counted bound by its live members with a node, per controller; a
// member that finishes, is deleted or is only pending leaves the count.
func TestMembersBoundInRun(t *testing.T) {
	job := func(p *st.PodWrapper, uid string) *st.PodWrapper {
		p.OwnerReferences = []metav1.OwnerReference{{APIVersion: "batch/v1", Kind: "Job", Name: uid, UID: types.UID(uid), Controller: ptr.To(true)}}
		return p
	}
	m := NewMembers("test")
	m.Track(job(gangPod("a", "g"), "j1").Node("n").Obj())
	m.Track(job(gangPod("b", "g"), "j1").Obj())
	m.Track(job(gangPod("c", "g"), "j2").Node("n").Obj())
	m.Track(gangPod("d", "g").Node("n").Obj())
	m.Track(job(gangPod("e", "g"), "j1").Node("n").SchedulerName("other").Obj())
	check := func(when string, want map[types.UID]int) {
		t.Helper()
		for run, n := range want {
			if got := m.BoundInRun("ns", "g", run); got != n {
				t.Errorf("%s: BoundInRun(g, %q) = %d, want %d", when, run, got, n)
			}
		}
	}
	check("tracked", map[types.UID]int{"j1": 1, "j2": 1, "": 1, "j3": 0})
	m.Track(job(gangPod("b", "g"), "j1").Node("n").Obj())
	check("b bound", map[types.UID]int{"j1": 2})
	m.Track(job(gangPod("a", "g"), "j1").Node("n").Phase(v1.PodSucceeded).Obj())
	m.Forget(job(gangPod("c", "g"), "j2").Node("n").Obj())
	m.Track(gangPod("d", "g").Node("n").Terminating().Obj())
	check("a succeeded, c deleted, d terminating", map[types.UID]int{"j1": 1, "j2": 0, "": 0})
	m.Forget(job(gangPod("b", "g"), "j1").Obj())
	check("b deleted", map[types.UID]int{"j1": 0})
	if m.Len() != 0 {
		t.Errorf("Len = %d, want 0: state left behind", m.Len())
	}
}
