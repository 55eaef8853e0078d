package status

import (
	"slices"
	"testing"

	schedulingv1alpha3 "k8s.io/api/scheduling/v1alpha3"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"

	"github.com/custom-scheduler/custom-scheduler/pkg/coscheduling/podgroup"
	"github.com/custom-scheduler/custom-scheduler/pkg/coscheduling/tree"
)

// A job of several roles on the in-tree API preempted whole: its composites and its in-tree
// PodGroups are each marked for their DisruptionTarget condition, and nothing of another job is.
func TestDisruptComposites(t *testing.T) {
	x := tree.NewIndex()
	job, mid := tree.InTreeCompositePrefix+"job", tree.InTreeCompositePrefix+"mid"
	x.Set(tree.Node{Namespace: "ns", Name: job, Composite: true, Gang: true, Min: 2})
	x.Set(tree.Node{Namespace: "ns", Name: mid, Composite: true, Gang: true, Min: 1, Parent: job})
	x.Set(tree.Node{Namespace: "ns", Name: podgroup.InTreePrefix + "a", Gang: true, Min: 2, Parent: job})
	x.Set(tree.Node{Namespace: "ns", Name: podgroup.InTreePrefix + "b", Gang: true, Min: 2, Parent: mid})
	x.Set(tree.Node{Namespace: "ns", Name: podgroup.InTreePrefix + "other", Gang: true, Min: 2})
	u := &Updater{trees: x, disrupted: map[string]string{},
		composites: cache.NewSharedIndexInformer(&cache.ListWatch{}, &schedulingv1alpha3.CompositePodGroup{}, 0, cache.Indexers{}),
		queue:      workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[string]())}
	defer u.queue.ShutDown()
	u.disruptComposites("ns", job, "preempted for ns/hi")
	var got []string
	for key, msg := range u.disrupted {
		if msg != "preempted for ns/hi" {
			t.Errorf("%s: message %q", key, msg)
		}
		got = append(got, key)
	}
	slices.Sort(got)
	want := []string{"ns/" + job, "ns/" + mid, "ns/" + podgroup.InTreePrefix + "a", "ns/" + podgroup.InTreePrefix + "b"}
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Errorf("marked %v, want %v", got, want)
	}
}
