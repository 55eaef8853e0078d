package integration

import (
	"context"
	"fmt"
	"slices"
	"testing"

	"github.com/custom-scheduler/custom-scheduler/pkg/apis/scheduling/v1alpha1"
	"github.com/custom-scheduler/custom-scheduler/pkg/coscheduling/tree"
)

// TestGangGroupsPreemptPairInBlock: a job preempting in parts below a composite not placed yet. The
// job (requiring one zone) holds a pair of replicas that requires one block, each replica (a leader
// group of one 2-CPU member and a worker group of two) one rack of it. Block b1's rack r1 runs
// low-priority pods, its rack r2 pods of the job's own priority (not evictable): b1 holds one
// replica only. Block b2's racks r3 and r4 run low-priority pods. The replicas are placed in one
// block: the four pods of b2 are evicted, none of b1, and each replica is bound in a rack of b2.
// (Before, a pair not pinned above the replicas' racks made the job preempt nothing: its parts could
// have split the block.)
func TestGangGroupsPreemptPairInBlock(t *testing.T) {
	const zoneLabel = "topology.kubernetes.io/zone"
	ensurePriorityClasses(t)
	startScheduler(t, schedulerConfig(t, adminKubeconfig, shippedProfiles(t)))
	ns := testNamespace(t)
	zone := ns + "-z"
	for _, r := range []struct{ block, rack, class string }{
		{"b1", "r1", lowPriority}, {"b1", "r2", highPriority}, {"b2", "r3", lowPriority}, {"b2", "r4", lowPriority},
	} {
		for i := range 2 {
			node := fmt.Sprintf("%s-%s-%d", ns, r.rack, i)
			createNode(t, node, "4", "8Gi", map[string]string{zoneLabel: zone, blockLabel: ns + "-" + r.block, rackLabel: ns + "-" + r.rack})
			filler := gangPod(ns, "filler-"+node, "", "4")
			delete(filler.Labels, v1alpha1.PodGroupLabel)
			filler.Spec.PriorityClassName, filler.Spec.NodeName = r.class, node
			createPod(t, filler)
		}
	}
	set := gangComposite(1)
	createGroupWithPolicy(t, ns, "set", 1, set, zoneLabel)
	pair := gangComposite(2)
	pair[tree.AnnotationParent] = "set"
	createGroupWithPolicy(t, ns, "pair", 1, pair, blockLabel)
	var replicas [][]sizedGroup
	for _, r := range []string{"0", "1"} {
		replica := gangComposite(2)
		replica[tree.AnnotationParent] = "pair"
		createGroupWithPolicy(t, ns, "rep-"+r, 1, replica, rackLabel)
		groups := []sizedGroup{{"lead-" + r, 1}, {"work-" + r, 2}}
		replicas = append(replicas, groups)
		for _, g := range groups {
			createGroupIn(t, ns, g.name, int64(g.size), child("rep-"+r))
			watchWhole(t, ns, g.name, g.size, nil)
			for i := range g.size {
				p := gangPod(ns, fmt.Sprintf("%s-%d", g.name, i), g.name, "2")
				p.Spec.PriorityClassName, p.Spec.NodeSelector = highPriority, map[string]string{zoneLabel: zone}
				createPod(t, p)
			}
		}
	}
	want := []string{"filler-" + ns + "-r3-0", "filler-" + ns + "-r3-1", "filler-" + ns + "-r4-0", "filler-" + ns + "-r4-1"}
	waitFor(t, ns, "the four low-priority pods of b2 preempted", func(ctx context.Context) (bool, error) {
		got, err := preempted(ctx, ns)
		return slices.Equal(got, want), err
	})
	victims, _ := preempted(context.Background(), ns)
	forceDelete(t, ns, victims...)
	used := boundInRacks(t, ns, replicas)
	if len(used) != 2 || !used[ns+"-r3"] || !used[ns+"-r4"] {
		t.Errorf("the replicas are in racks %v; want r3 and r4 (block b2), one each", used)
	}
	if got, _ := preempted(context.Background(), ns); len(got) > 0 {
		t.Errorf("preempted after the job was bound: %v", got)
	}
}
