package integration

import (
	"context"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/custom-scheduler/custom-scheduler/pkg/coscheduling/podgroup"
)

// TestNextRun checks the finished-member rule per run in progress: a run's succeeded members count
// toward its quorum only while one of its live members is bound. A group whose run ended (no live
// member bound) places the pods that come next whole or not at all, under the same PodGroup or a
// recreated one, while a running gang's replacement is still placed beside the members that
// succeeded. Every case is watched throughout for a partial gang (the watch retires the succeeded
// members of a run once it ends, so it fails on a new run bound in part).
func TestNextRun(t *testing.T) {
	startScheduler(t, schedulerConfig(t, adminKubeconfig, coschedulingProfiles))

	// finishRun binds a gang of 4 bare pods of 1 CPU on the two 4-CPU nodes and lets them succeed.
	finishRun := func(t *testing.T, ns string) {
		t.Helper()
		first := createMembers(t, ns, "job", "run1", 4, "1")
		waitForLiveBound(t, ns, "job", first, 4)
		for _, name := range first {
			setPhase(t, ns, name, v1.PodSucceeded)
		}
		waitFor(t, ns, "the status to count the run's 4 succeeded members", func(context.Context) (bool, error) {
			return getPodGroup(t, ns, "job").Status.Succeeded == 4, nil
		})
	}

	for _, recreate := range []bool{false, true} {
		name := "a new run of bare pods under the same PodGroup binds whole or not at all"
		if recreate {
			name = "a recreated PodGroup's new run binds whole or not at all"
		}
		t.Run(name, func(t *testing.T) {
			ns := testNamespace(t)
			cosNodes(t, "nextrun", 2, "4")
			createPodGroup(t, ns, "job", 4, 0)
			watchWhole(t, ns, "job", 4, nil)
			finishRun(t, ns)
			if recreate {
				if err := dynamicClient(t).Resource(podGroupGVR).Namespace(ns).Delete(context.Background(), "job", metav1.DeleteOptions{}); err != nil {
					t.Fatal(err)
				}
				waitFor(t, ns, "the PodGroup to be gone", func(ctx context.Context) (bool, error) {
					_, err := dynamicClient(t).Resource(podGroupGVR).Namespace(ns).Get(ctx, "job", metav1.GetOptions{})
					return err != nil, nil
				})
				createPodGroup(t, ns, "job", 4, 0)
			}

			// Four new members of 3 CPU: one fits on each node, two in all, under the quorum of 4.
			// The old run's four succeeded pods count for nothing: its run ended.
			second := createMembers(t, ns, "job", "run2", 4, "3")
			waitForPodGroupCondition(t, ns, "job", podgroup.ReasonGangInfeasible)
			consistentlyNoLiveBound(t, 3*time.Second, ns, "job", second)

			// Room for all four: the new run binds whole.
			cosNodes(t, "nextrun-more", 2, "4")
			waitForLiveBound(t, ns, "job", second, 4)
			consistentlyNotPartial(t, ns, "job", 4)
		})
	}

	t.Run("a running gang's replacement is placed beside the members that succeeded", func(t *testing.T) {
		ns := testNamespace(t)
		cosNodes(t, "nextrep", 2, "4")
		createPodGroup(t, ns, "job", 4, 0)
		watchNotPartial(t, ns, "job", 4)
		gang := createMembers(t, ns, "job", "run1", 4, "1")
		waitForLiveBound(t, ns, "job", gang, 4)

		// Two members succeed, one fails; the fourth still runs: the run is in progress.
		setPhase(t, ns, gang[0], v1.PodSucceeded)
		setPhase(t, ns, gang[1], v1.PodSucceeded)
		setPhase(t, ns, gang[2], v1.PodFailed)
		forceDelete(t, ns, gang[2])
		// Its replacement completes the quorum alone: 1 running + 2 succeeded + itself.
		replacement := createMembers(t, ns, "job", "replacement", 1, "1")
		waitForLiveBound(t, ns, "job", append([]string{gang[3]}, replacement...), 2)
		waitForPodGroupCondition(t, ns, "job", podgroup.ReasonQuorumReached)
	})
}
