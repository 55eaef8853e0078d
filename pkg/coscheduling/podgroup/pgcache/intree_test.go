package pgcache

import (
	"context"
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
	it := podgroup.FromInTree(&schedulingv1beta1.PodGroup{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "g"}})
	now := metav1.Now()
	deleting := podgroup.FromInTree(&schedulingv1beta1.PodGroup{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "d", DeletionTimestamp: &now}})
	for _, add := range []func() error{func() error { return ours.Add(pg) }, func() error { return inTree.Add(it) }, func() error { return inTree.Add(deleting) }} {
		if err := add(); err != nil {
			t.Fatal(err)
		}
	}
	l := Lister{Store: ours, InTree: inTree}
	if got := l.Get("ns", "g"); got != pg {
		t.Errorf("Get(g) = %v, want ours", got)
	}
	if got := l.Get("ns", podgroup.InTreePrefix+"g"); got != it {
		t.Errorf("Get(in-tree g) = %v, want the in-tree one", got)
	}
	if got := l.Get("ns", podgroup.InTreePrefix+"d"); got != nil {
		t.Errorf("Get(in-tree d, being deleted) = %v, want nil", got)
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

// TestInTreeInformer runs the informer over a fake clientset: its store holds FromInTree's objects
// under their prefixed names, and an edit reaches a handler as our type.
func TestInTreeInformer(t *testing.T) {
	cs := fake.NewClientset(&schedulingv1beta1.PodGroup{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "g"},
		Spec: schedulingv1beta1.PodGroupSpec{SchedulingPolicy: schedulingv1beta1.PodGroupSchedulingPolicy{Gang: &schedulingv1beta1.GangSchedulingPolicy{MinCount: 3}}}})
	cs.Discovery().(*fakediscovery.FakeDiscovery).Resources = []*metav1.APIResourceList{{GroupVersion: "scheduling.k8s.io/v1beta1", APIResources: []metav1.APIResource{{Name: "podgroups"}}}}
	informer, err := NewInTreeInformer(ktesting.NewLogger(t, ktesting.NewConfig()), cs)
	if err != nil || informer == nil {
		t.Fatalf("NewInTreeInformer = %v, %v", informer, err)
	}
	updated := make(chan *v1alpha1.PodGroup, 1)
	if _, err := informer.AddEventHandler(cache.ResourceEventHandlerFuncs{UpdateFunc: func(_, obj interface{}) {
		pg, _ := obj.(*v1alpha1.PodGroup)
		updated <- pg
	}}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go informer.RunWithContext(ctx)
	if !cache.WaitForCacheSync(ctx.Done(), informer.HasSynced) {
		t.Fatal("not synced")
	}
	l := Lister{InTree: informer.GetStore()}
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
	select {
	case got := <-updated:
		if got == nil || got.Spec.MinMember != 2 || got.Name != podgroup.InTreePrefix+"g" {
			t.Errorf("the update reached the handler as %+v", got)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no update")
	}
}
