package pgcache

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/custom-scheduler/custom-scheduler/pkg/coscheduling/podgroup"
	"github.com/custom-scheduler/custom-scheduler/pkg/coscheduling/tree"
)

// TestPods: members are listed and counted on the store's word (live, ungated pods of the profile's
// group); Count is the O(1) count, which trails the store; CountUpTo reads the store only below want.
func TestPods(t *testing.T) {
	store := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{podgroup.IndexName: podgroup.LiveIndexFunc})
	pods := Pods{Store: store, Counts: NewMembers("test"), Profile: "test"}
	add := func(p *v1.Pod, track bool) {
		if err := store.Add(p); err != nil {
			t.Fatal(err)
		}
		if track {
			pods.Counts.Track(p)
		}
	}
	add(gangPod("a", "g").Obj(), true)
	add(gangPod("b", "g").Obj(), false) // the handler has not counted it yet
	add(gangPod("c", "g").Terminating().Obj(), true)
	add(gangPod("d", "h").Obj(), true)
	add(gangPod("e", "g").SchedulerName("other").Obj(), true)
	add(gangPod("f", "g").SchedulingGates([]string{"example.com/admission"}).Obj(), true)

	var names []string
	for _, p := range pods.InGroup("ns", "g") {
		names = append(names, p.Name)
	}
	if len(names) != 2 || !(names[0] == "a" && names[1] == "b" || names[0] == "b" && names[1] == "a") {
		t.Errorf("InGroup(g) = %v, want a and b (live members of this profile)", names)
	}
	for _, tc := range []struct {
		name string
		got  int
		want int
	}{
		{"StoreCount(g)", pods.StoreCount("ns", "g"), 2},
		{"Count(g), trailing the store", pods.Count("ns", "g"), 1},
		{"CountUpTo(g, 1): the O(1) count reaches want", pods.CountUpTo("ns", "g", 1), 1},
		{"CountUpTo(g, 2): below want, the store answers", pods.CountUpTo("ns", "g", 2), 2},
		{"StoreCount(missing)", pods.StoreCount("ns", "missing"), 0},
	} {
		if tc.got != tc.want {
			t.Errorf("%s = %d, want %d", tc.name, tc.got, tc.want)
		}
	}
}

// TestGone: a pod is gone once the store holds it no more, holds it terminating, or holds another pod
// under its name.
func TestGone(t *testing.T) {
	store := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{podgroup.IndexName: podgroup.LiveIndexFunc})
	pods := Pods{Store: store, Counts: NewMembers("test"), Profile: "test"}
	live := gangPod("a", "g").UID("a1").Obj()
	if err := store.Add(live); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		pod  *v1.Pod
		want bool
	}{
		{"held live", live, false},
		{"not held", gangPod("b", "g").UID("b1").Obj(), true},
		{"another pod under its name", gangPod("a", "g").UID("a0").Obj(), true},
	} {
		if got := pods.Gone(tc.pod); got != tc.want {
			t.Errorf("Gone(%s) = %v, want %v", tc.name, got, tc.want)
		}
	}
	if err := store.Update(gangPod("a", "g").UID("a1").Terminating().Obj()); err != nil {
		t.Fatal(err)
	}
	if !pods.Gone(live) {
		t.Error("Gone(terminating) = false, want true")
	}
}

// TestInGroupKey: a group's members by its key are those InGroup lists by its namespace and name, and
// InGroups lists each group's in order.
func TestInGroupKey(t *testing.T) {
	store := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{podgroup.IndexName: podgroup.LiveIndexFunc})
	pods := Pods{Store: store, Counts: NewMembers("test"), Profile: "test"}
	for _, p := range []*v1.Pod{gangPod("a", "g").Obj(), gangPod("b", "h").Obj(), gangPod("c", "g").Namespace("other").Obj()} {
		if err := store.Add(p); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct {
		key  string
		want []string
	}{
		{key: "ns/g", want: []string{"a"}},
		{key: "ns/h", want: []string{"b"}},
		{key: "other/g", want: []string{"c"}},
		{key: "ns/missing"},
		{key: "no-slash"},
	} {
		var got []string
		for _, p := range pods.InGroupKey(tc.key) {
			got = append(got, p.Name)
		}
		if diff := cmp.Diff(tc.want, got); diff != "" {
			t.Errorf("InGroupKey(%q) (-want,+got):\n%s", tc.key, diff)
		}
	}
	var got [][]string
	for _, pods := range pods.InGroups([]tree.Node{{Namespace: "other", Name: "g"}, {Namespace: "ns", Name: "missing"}, {Namespace: "ns", Name: "g"}}) {
		var names []string
		for _, p := range pods {
			names = append(names, p.Name)
		}
		got = append(got, names)
	}
	if diff := cmp.Diff([][]string{{"c"}, nil, {"a"}}, got); diff != "" {
		t.Errorf("InGroups (-want,+got):\n%s", diff)
	}
}

// TestInGroupAnd: a group's members and then those of the groups keyed others, in order; a group
// with no members, or a malformed key, adds none.
func TestInGroupAnd(t *testing.T) {
	store := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{podgroup.IndexName: podgroup.LiveIndexFunc})
	pods := Pods{Store: store, Counts: NewMembers("test"), Profile: "test"}
	for _, p := range []*v1.Pod{gangPod("a", "g").Obj(), gangPod("b", "h").Obj(), gangPod("c", "g").Namespace("other").Obj()} {
		if err := store.Add(p); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct {
		name   string
		group  string
		others []string
		want   []string
	}{
		{name: "alone", group: "g", want: []string{"a"}},
		{name: "with its job's", group: "g", others: []string{"ns/h", "other/g"}, want: []string{"a", "b", "c"}},
		{name: "others first listed after", group: "h", others: []string{"ns/g"}, want: []string{"b", "a"}},
		{name: "missing and malformed", group: "missing", others: []string{"ns/none", "no-slash"}},
	} {
		var got []string
		for _, p := range pods.InGroupAnd("ns", tc.group, tc.others) {
			got = append(got, p.Name)
		}
		if diff := cmp.Diff(tc.want, got); diff != "" {
			t.Errorf("%s: InGroupAnd (-want,+got):\n%s", tc.name, diff)
		}
	}
}
