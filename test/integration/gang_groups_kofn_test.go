package integration

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/custom-scheduler/custom-scheduler/pkg/apis/scheduling/v1alpha1"
	"github.com/custom-scheduler/custom-scheduler/pkg/coscheduling/tree"
)

// TestGangGroupsKOfNComposites: a set needing 2 of 3 replicas, each a gang composite of a leader
// group (1 pod) and a worker group (2 pods), all of 2 CPU at high priority, on three 4-CPU nodes that
// low-priority pods fill: room for two replicas, not three, once the low pods are evicted (the test
// deletes them as a kubelet would). A group's check places with it its replica's other group and one
// other replica's two groups (the replicas alike: tree.Needed's choice among composites), so the job
// preempts for two replicas and two replicas bind whole, the third nothing. Throughout, no group is
// bound in part and no gang composite stays short (watchWhole, watchTrees); only low pods are
// evicted; the job is whole within 8 s (before a back-off of 10 s).
func TestGangGroupsKOfNComposites(t *testing.T) {
	kOfNComposites(t, []int{2, 2, 2}, []int{2, 2, 2})
}

// kOfNComposites is TestGangGroupsKOfNComposites with replica i of workers[i] workers and lows[n]
// low pods on node n.
func kOfNComposites(t *testing.T, workers, lows []int) {
	ensurePriorityClasses(t)
	startScheduler(t, schedulerConfig(t, adminKubeconfig, shippedProfiles(t)))
	ns := testNamespace(t)
	cosNodes(t, ns+"-n", 3, "4")
	for n := range 3 {
		for i := range lows[n] {
			low := gangPod(ns, fmt.Sprintf("low-%d-%d", n, i), "", "2")
			delete(low.Labels, v1alpha1.PodGroupLabel)
			low.Spec.PriorityClassName, low.Spec.NodeName = lowPriority, fmt.Sprintf("%s-n-%d", ns, n)
			createPod(t, low)
		}
	}
	evicted := kubeletDeletesPreempted(t, ns)
	job := &tnode{name: "set", composite: true, min: 2}
	for i := range 3 {
		job.children = append(job.children, &tnode{name: fmt.Sprintf("rep-%d", i), composite: true, min: 2, children: []*tnode{
			{name: fmt.Sprintf("lead-%d", i), min: 1, members: 1, cpu: 2},
			{name: fmt.Sprintf("work-%d", i), min: workers[i], members: workers[i], cpu: 2},
		}})
	}
	jobs := []*tnode{job}
	watchTrees(t, ns, jobs)
	createGroupIn(t, ns, "set", 1, gangComposite(2))
	for _, rep := range job.children {
		ann := gangComposite(2)
		ann[tree.AnnotationParent] = "set"
		createGroupIn(t, ns, rep.name, 1, ann)
		for _, g := range rep.children {
			watchWhole(t, ns, g.name, g.min, nil)
			createGroupIn(t, ns, g.name, int64(g.min), child(rep.name))
		}
	}
	start := time.Now()
	for _, rep := range job.children {
		for _, g := range rep.children {
			for m := range g.members {
				p := gangPod(ns, fmt.Sprintf("%s-%d", g.name, m), g.name, fmt.Sprint(g.cpu))
				p.Spec.PriorityClassName = highPriority
				createPod(t, p)
			}
		}
	}
	count := func(ctx context.Context) (whole, empty int, err error) {
		for _, rep := range job.children {
			bound := 0
			for _, g := range rep.children {
				n, err := boundMembers(ctx, ns, g.name)
				if err != nil {
					return 0, 0, err
				}
				bound += n
			}
			switch bound {
			case 1 + rep.children[1].members:
				whole++
			case 0:
				empty++
			}
		}
		return whole, empty, nil
	}
	waitFor(t, ns, "two replicas bound whole, the third not at all", func(ctx context.Context) (bool, error) {
		whole, empty, err := count(ctx)
		return whole == 2 && empty == 1, err
	})
	took := time.Since(start)
	t.Logf("the job is whole after %v; evicted: %v", took.Round(100*time.Millisecond), evicted())
	// Replica by replica, the groups preempt each for its own and back off (10 s) before the job is
	// whole (10 to 21 s before the choice among composites); with it, within a second.
	if took > 8*time.Second {
		t.Errorf("the job was whole only after %v, want it within 8s (no back-off)", took.Round(100*time.Millisecond))
	}
	consistently(t, 5*time.Second, "two replicas stay whole, the third unbound", func(ctx context.Context) (bool, error) {
		whole, empty, err := count(ctx)
		return whole == 2 && empty == 1, err
	})
	lowPods := 0
	for _, n := range lows {
		lowPods += n
	}
	// Every low pod is needed: the two replicas fill all six places.
	if n := len(evicted()); n != lowPods {
		t.Errorf("%d pods were evicted, want the %d low pods", n, lowPods)
	}
	for _, name := range evicted() {
		if !isLow(name) {
			t.Errorf("pod %s was evicted; only low-priority pods may be", name)
		}
	}
}

// TestGangGroupsKOfNUnlike: TestGangGroupsKOfNComposites with replicas not alike, of 2, 2 and 3
// workers (3, 3 and 4 pods): the six places hold replicas 0 and 1 only. A leader's check tries each
// other replica in turn (tree.NeededEach), so the job preempts for two replicas that fit together,
// and the third, which fits beside no other, holds nothing. Before the check tried them (each group
// checked and preempting alone), the third replica's nominations and failures kept the job from
// being whole: 0 of 3 runs within 60 s.
func TestGangGroupsKOfNUnlike(t *testing.T) {
	kOfNComposites(t, []int{2, 2, 3}, []int{2, 2, 2})
}

// TestGangGroupsKOfNUnlikePreempt: replicas of 4, 2 and 2 workers (5, 3 and 3 pods) on six places,
// two of them (one node's) taken by low pods: each group fits alone, and only replicas 1 and 2 fit
// together, once the low pods are evicted. Every group's first way takes replica 0 (the first by name
// where none is closer to ready), which fits beside no other; the preemption searches the check's
// other ways in turn (gang.JobPreemption.Ways), so replicas 1 and 2 preempt for each other and
// evict the two low pods. Searching the first way only, nothing was ever evicted.
func TestGangGroupsKOfNUnlikePreempt(t *testing.T) {
	kOfNComposites(t, []int{4, 2, 2}, []int{2, 0, 0})
}

// TestGangGroupsKOfNUnlikeFree: the replicas of TestGangGroupsKOfNUnlikePreempt (4, 2 and 2
// workers) on six free places: only replicas 1 and 2 fit together, and replica 0, which fits beside
// no other, fails its check at every try. Its failures must not reject the other two replicas while
// they gather: a group of the job that backs off only because it was rejected with another is not
// out of the job (gang.Registry.Follow).
func TestGangGroupsKOfNUnlikeFree(t *testing.T) {
	kOfNComposites(t, []int{4, 2, 2}, []int{0, 0, 0})
}
