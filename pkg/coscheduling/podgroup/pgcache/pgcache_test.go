package pgcache

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"
	st "k8s.io/kubernetes/pkg/scheduler/testing"

	"github.com/custom-scheduler/custom-scheduler/pkg/apis/scheduling/v1alpha1"
	"github.com/custom-scheduler/custom-scheduler/pkg/coscheduling/tree"
)

func TestIsGangPod(t *testing.T) {
	cases := []struct {
		name string
		obj  interface{}
		want bool
	}{
		{name: "a member", obj: st.MakePod().Name("p").Label(v1alpha1.PodGroupLabel, "g").Obj(), want: true},
		{name: "a finished member", obj: st.MakePod().Name("p").Label(v1alpha1.PodGroupLabel, "g").Phase(v1.PodSucceeded).Obj(), want: true},
		{name: "a member's tombstone", obj: cache.DeletedFinalStateUnknown{Obj: st.MakePod().Name("p").Label(v1alpha1.PodGroupLabel, "g").Obj()}, want: true},
		{name: "a plain pod", obj: st.MakePod().Name("p").Obj()},
		{name: "an empty label", obj: st.MakePod().Name("p").Label(v1alpha1.PodGroupLabel, "").Obj()},
		{name: "a plain pod's tombstone", obj: cache.DeletedFinalStateUnknown{Obj: st.MakePod().Name("p").Obj()}},
		{name: "not a pod", obj: &v1alpha1.PodGroup{}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := IsGangPod(tc.obj); got != tc.want {
				t.Errorf("IsGangPod = %v, want %v", got, tc.want)
			}
		})
	}
}

// TestUnwrap: a delete's tombstone is unwrapped to the last state it holds; any other object is
// itself.
func TestUnwrap(t *testing.T) {
	pod := st.MakePod().Name("p").Obj()
	for _, tc := range []struct {
		name string
		obj  interface{}
		want interface{}
	}{
		{name: "a pod", obj: pod, want: pod},
		{name: "a pod's tombstone", obj: cache.DeletedFinalStateUnknown{Key: "ns/p", Obj: pod}, want: pod},
		{name: "an empty tombstone", obj: cache.DeletedFinalStateUnknown{Key: "ns/p"}},
		{name: "nil"},
	} {
		if diff := cmp.Diff(tc.want, Unwrap(tc.obj)); diff != "" {
			t.Errorf("%s: Unwrap (-want,+got):\n%s", tc.name, diff)
		}
	}
}

func TestLister(t *testing.T) {
	store := cache.NewStore(cache.MetaNamespaceKeyFunc)
	pg := &v1alpha1.PodGroup{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "g"}}
	if err := store.Add(pg); err != nil {
		t.Fatal(err)
	}
	l := Lister{Store: store}
	if got := l.Get("ns", "g"); got != pg {
		t.Errorf("Get(ns, g) = %v, want the stored PodGroup", got)
	}
	if got := l.Get("ns", "other"); got != nil {
		t.Errorf("Get(ns, other) = %v, want nil", got)
	}
}

// TestListerOf: the PodGroups of groups the store holds, in order; missing and deleting ones are left
// out.
func TestListerOf(t *testing.T) {
	store := cache.NewStore(cache.MetaNamespaceKeyFunc)
	deleting := metav1.Now()
	for _, pg := range []*v1alpha1.PodGroup{
		{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "a"}},
		{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "b"}},
		{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "gone", DeletionTimestamp: &deleting}},
	} {
		if err := store.Add(pg); err != nil {
			t.Fatal(err)
		}
	}
	l := Lister{Store: store}
	for _, tc := range []struct {
		name   string
		groups []tree.Node
		want   []string
	}{
		{name: "none"},
		{name: "in order", groups: []tree.Node{{Namespace: "ns", Name: "b"}, {Namespace: "ns", Name: "a"}}, want: []string{"b", "a"}},
		{name: "missing and deleting left out", groups: []tree.Node{{Namespace: "ns", Name: "missing"}, {Namespace: "ns", Name: "gone"}, {Namespace: "ns", Name: "a"}, {Namespace: "other", Name: "b"}}, want: []string{"a"}},
	} {
		var got []string
		for _, pg := range l.Of(tc.groups) {
			got = append(got, pg.Name)
		}
		if diff := cmp.Diff(tc.want, got); diff != "" {
			t.Errorf("%s: Of (-want,+got):\n%s", tc.name, diff)
		}
	}
}
