package pgcache

import (
	"testing"

	schedulingv1alpha3 "k8s.io/api/scheduling/v1alpha3"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"

	"github.com/custom-scheduler/custom-scheduler/pkg/apis/scheduling/v1alpha1"
	"github.com/custom-scheduler/custom-scheduler/pkg/coscheduling/tree"
)

// The tree handlers update the index before the next handler (or the activation) sees the event.
func TestTreeHandlers(t *testing.T) {
	x := tree.NewIndex()
	var seen []bool // whether the index knew the tree when the next handler ran
	next := cache.ResourceEventHandlerFuncs{AddFunc: func(obj interface{}) {
		b, _ := x.Resolve("ns", obj.(*v1alpha1.PodGroup).Name)
		seen = append(seen, b != nil)
	}}
	node := func(pg *v1alpha1.PodGroup) tree.Node { return tree.FromPodGroup(pg, 2, true) }
	h := TreeHandler(x, node, next)
	h.OnAdd(&v1alpha1.PodGroup{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "job", Annotations: map[string]string{tree.AnnotationMinGroupCount: "1"}}}, false)
	h.OnAdd(&v1alpha1.PodGroup{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "a", Annotations: map[string]string{tree.AnnotationParent: "job"}}}, false)
	if len(seen) != 2 || !seen[0] || !seen[1] {
		t.Fatalf("next handler saw the tree %v, want [true true]", seen)
	}

	var activated []string
	ch := CompositeHandler(x, func(ns []tree.Node) {
		for _, n := range ns {
			activated = append(activated, n.Name)
		}
	})
	x.Set(tree.Node{Namespace: "ns", Name: "podgroups.scheduling.k8s.io/b", Min: 1, Parent: tree.InTreeParent(ptr.To("serve"))})
	c := &schedulingv1alpha3.CompositePodGroup{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "serve"},
		Spec: schedulingv1alpha3.CompositePodGroupSpec{SchedulingPolicy: schedulingv1alpha3.CompositePodGroupSchedulingPolicy{Gang: &schedulingv1alpha3.CompositeGangSchedulingPolicy{MinGroupCount: 1}}}}
	ch.OnAdd(c, false)
	if b, p := x.Resolve("ns", "podgroups.scheduling.k8s.io/b"); p != nil || b == nil || len(activated) != 1 {
		t.Fatalf("after the composite's add: %v, %v, activated %v", b, p, activated)
	}
	ch.OnDelete(cache.DeletedFinalStateUnknown{Obj: c})
	if _, p := x.Resolve("ns", "podgroups.scheduling.k8s.io/b"); p == nil || len(activated) != 2 {
		t.Fatalf("after the composite's delete: %v, activated %v", p, activated)
	}
}
