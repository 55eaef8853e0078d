package pgcache

import (
	"context"
	"fmt"
	"testing"
	"time"

	schedulingv1beta1 "k8s.io/api/scheduling/v1beta1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	fakediscovery "k8s.io/client-go/discovery/fake"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2/ktesting"

	"github.com/custom-scheduler/custom-scheduler/pkg/apis/scheduling/v1alpha1"
	"github.com/custom-scheduler/custom-scheduler/pkg/coscheduling/podgroup"
)

func TestListerBothSources(t *testing.T) {
	ours, inTree := cache.NewStore(cache.MetaNamespaceKeyFunc), cache.NewStore(cache.MetaNamespaceKeyFunc)
	pg := &v1alpha1.PodGroup{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "g"}}
	now := metav1.Now()
	// The in-tree store holds the API's objects under their own keys.
	it := &schedulingv1beta1.PodGroup{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "g", UID: "u1", ResourceVersion: "1"}}
	deleting := &schedulingv1beta1.PodGroup{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "d", UID: "u2", DeletionTimestamp: &now}}
	for _, add := range []func() error{func() error { return ours.Add(pg) }, func() error { return inTree.Add(it) }, func() error { return inTree.Add(deleting) }} {
		if err := add(); err != nil {
			t.Fatal(err)
		}
	}
	l := Lister{Store: ours, InTree: inTree, conv: newInTreeCache()}
	if got := l.Get("ns", "g"); got != pg {
		t.Errorf("Get(g) = %v, want ours", got)
	}
	got := l.Get("ns", podgroup.InTreePrefix+"g")
	if got == nil || got.Name != podgroup.InTreePrefix+"g" || !podgroup.IsInTree(got) {
		t.Fatalf("Get(in-tree g) = %v, want the in-tree one as our type", got)
	}
	if again := l.Get("ns", podgroup.InTreePrefix+"g"); again != got {
		t.Errorf("a second read of an unchanged PodGroup converted it again")
	}
	changed := it.DeepCopy()
	changed.ResourceVersion = "2"
	changed.Spec.SchedulingPolicy.Gang = &schedulingv1beta1.GangSchedulingPolicy{MinCount: 3}
	if err := inTree.Update(changed); err != nil {
		t.Fatal(err)
	}
	if again := l.Get("ns", podgroup.InTreePrefix+"g"); again == got || again.Spec.MinMember != 3 {
		t.Errorf("Get after an update = %+v, want the new version", again)
	}
	if got := l.Get("ns", podgroup.InTreePrefix+"d"); got != nil {
		t.Errorf("Get(in-tree d, being deleted) = %v, want nil", got)
	}
	if got := l.Get("ns", "d"); got != nil {
		t.Errorf("Get(d) = %v: the in-tree d is not ours", got)
	}
	if n := len(l.List()); n != 3 {
		t.Errorf("List has %d PodGroups, want 3", n)
	}
	// Not served: the in-tree names find nothing.
	l.InTree = nil
	if got := l.Get("ns", podgroup.InTreePrefix+"g"); got != nil {
		t.Errorf("Get(in-tree g) with no in-tree store = %v, want nil", got)
	}
	if n := len(l.List()); n != 1 {
		t.Errorf("List has %d PodGroups with no in-tree store, want 1", n)
	}
}

func TestInTreeServed(t *testing.T) {
	served := &metav1.APIResourceList{GroupVersion: "scheduling.k8s.io/v1beta1", APIResources: []metav1.APIResource{{Name: "podgroups"}, {Name: "podgroups/status"}, {Name: "workloads"}}}
	workloadsOnly := &metav1.APIResourceList{GroupVersion: "scheduling.k8s.io/v1beta1", APIResources: []metav1.APIResource{{Name: "workloads"}}}
	priorityOnly := &metav1.APIResourceList{GroupVersion: "scheduling.k8s.io/v1", APIResources: []metav1.APIResource{{Name: "priorityclasses"}}}
	cases := []struct {
		name      string
		resources []*metav1.APIResourceList
		want      bool
	}{
		{name: "served", resources: []*metav1.APIResourceList{priorityOnly, served}, want: true},
		{name: "the group version is not served (the default 1.37 cluster)", resources: []*metav1.APIResourceList{priorityOnly}},
		{name: "the group version without podgroups", resources: []*metav1.APIResourceList{workloadsOnly}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cs := fake.NewClientset()
			cs.Discovery().(*fakediscovery.FakeDiscovery).Resources = tc.resources
			got, err := InTreeServed(cs.Discovery())
			if err != nil || got != tc.want {
				t.Errorf("InTreeServed = %v, %v; want %v", got, err, tc.want)
			}
			informer, err := NewInTreeInformer(ktesting.NewLogger(t, ktesting.NewConfig()), cs)
			if err != nil || (informer != nil) != tc.want {
				t.Errorf("NewInTreeInformer = %v, %v; want an informer: %v", informer, err, tc.want)
			}
		})
	}
}

// TestInTreeInformer runs the informer over a fake clientset: its store keeps the API's objects under
// their own keys, the Lister reads them as our type under the prefixed names, and the handler gets
// every event (a tombstone's object too) as our type.
func TestInTreeInformer(t *testing.T) {
	cs := fake.NewClientset(&schedulingv1beta1.PodGroup{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "g", UID: "u"},
		Spec: schedulingv1beta1.PodGroupSpec{SchedulingPolicy: schedulingv1beta1.PodGroupSchedulingPolicy{Gang: &schedulingv1beta1.GangSchedulingPolicy{MinCount: 3}}}})
	cs.Discovery().(*fakediscovery.FakeDiscovery).Resources = []*metav1.APIResourceList{{GroupVersion: "scheduling.k8s.io/v1beta1", APIResources: []metav1.APIResource{{Name: "podgroups"}}}}
	informer, err := NewInTreeInformer(ktesting.NewLogger(t, ktesting.NewConfig()), cs)
	if err != nil || informer == nil {
		t.Fatalf("NewInTreeInformer = %v, %v", informer, err)
	}
	l := Lister{InTree: informer.GetStore(), conv: newInTreeCache()}
	events := make(chan string, 10)
	name := func(obj interface{}) string {
		if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
			obj = tomb.Obj
		}
		if pg, ok := obj.(*v1alpha1.PodGroup); ok {
			return fmt.Sprintf("%s minMember %d", pg.Name, pg.Spec.MinMember)
		}
		return fmt.Sprintf("not ours: %T", obj)
	}
	h := l.inTreeHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj interface{}) { events <- "add " + name(obj) },
		UpdateFunc: func(o, n interface{}) { events <- "update " + name(o) + " -> " + name(n) },
		DeleteFunc: func(obj interface{}) { events <- "delete " + name(obj) },
	})
	if _, err := informer.AddEventHandler(h); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go informer.RunWithContext(ctx)
	if !cache.WaitForCacheSync(ctx.Done(), informer.HasSynced) {
		t.Fatal("not synced")
	}
	next := func(want string) {
		t.Helper()
		select {
		case got := <-events:
			if got != want {
				t.Errorf("event %q, want %q", got, want)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("no event, want %q", want)
		}
	}
	next("add podgroups.scheduling.k8s.io/g minMember 3")
	if _, ok, _ := informer.GetStore().GetByKey("ns/g"); !ok {
		t.Error("the store does not hold ns/g under its own key")
	}
	if pg := l.Get("ns", podgroup.InTreePrefix+"g"); pg == nil || pg.Spec.MinMember != 3 {
		t.Fatalf("Get = %+v, want minMember 3", pg)
	}
	pg, err := cs.SchedulingV1beta1().PodGroups("ns").Get(ctx, "g", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	pg.Spec.SchedulingPolicy.Gang.MinCount = 2
	if _, err := cs.SchedulingV1beta1().PodGroups("ns").Update(ctx, pg, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	next("update podgroups.scheduling.k8s.io/g minMember 3 -> podgroups.scheduling.k8s.io/g minMember 2")
	if err := cs.SchedulingV1beta1().PodGroups("ns").Delete(ctx, "g", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	next("delete podgroups.scheduling.k8s.io/g minMember 2")
	if n := len(l.conv.m); n != 0 {
		t.Errorf("%d conversions kept after the delete, want 0", n)
	}
	// A tombstone (a delete missed while the watch was down) is handed on with our type inside.
	h.OnDelete(cache.DeletedFinalStateUnknown{Key: "ns/x", Obj: &schedulingv1beta1.PodGroup{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "x"}}})
	next("delete podgroups.scheduling.k8s.io/x minMember 1")
}
