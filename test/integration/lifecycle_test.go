package integration

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	st "k8s.io/kubernetes/pkg/scheduler/testing"
	"k8s.io/utils/ptr"

	"github.com/custom-scheduler/custom-scheduler/pkg/apis/scheduling/v1alpha1"
	"github.com/custom-scheduler/custom-scheduler/pkg/coscheduling/podgroup"
)

// TestCoschedulingLifecycle follows gangs past their first run: job restarts (all pods replaced, with
// the previous run still terminating), a finished member replaced, the PodGroup deleted or edited while
// members wait. Every case ends by checking for a while that its gang is not left with between 1 and
// minMember-1 live members bound (the randomized soak checks it throughout).
func TestCoschedulingLifecycle(t *testing.T) {
	startScheduler(t, schedulerConfig(t, adminKubeconfig, coschedulingProfiles))

	t.Run("a restarted gang with fewer nodes binds nothing, then binds whole when a node is added", func(t *testing.T) {
		ns := testNamespace(t)
		cosNodes(t, "restart", 4, "2")
		createPodGroup(t, ns, "job", 4, 0)
		first := createGang(t, ns, "job", 4, "1500m")
		waitForBoundMembers(t, ns, "job", 4)

		// The job restarts (every pod deleted and recreated under the same PodGroup) and a node is
		// lost meanwhile: only 3 of the 4 new members fit.
		forceDelete(t, ns, first...)
		deleteNode(t, "restart-3")
		second := createMembers(t, ns, "job", "run2", 4, "1500m")
		waitForPodGroupCondition(t, ns, "job", podgroup.ReasonGangInfeasible)
		consistentlyNoLiveBound(t, 3*time.Second, ns, "job", second)

		createNode(t, "restart-new", "2", "8Gi", nil)
		waitForLiveBound(t, ns, "job", second, 4)
		consistentlyNotPartial(t, ns, "job", 4)
	})

	t.Run("the previous run's terminating members do not complete a new one", func(t *testing.T) {
		ns := testNamespace(t)
		// Three nodes for the first run, room for two more members.
		cosNodes(t, "term", 5, "2")
		createPodGroup(t, ns, "job", 3, 0)
		first := createGang(t, ns, "job", 3, "1500m")
		waitForBoundMembers(t, ns, "job", 3)

		// A graceful delete: with no kubelet to confirm it, the bound pods stay Terminating and keep
		// their nodes.
		for _, name := range first {
			if err := client.CoreV1().Pods(ns).Delete(context.Background(), name, metav1.DeleteOptions{}); err != nil {
				t.Fatal(err)
			}
		}
		second := createMembers(t, ns, "job", "run2", 3, "1500m")
		waitForPodGroupCondition(t, ns, "job", podgroup.ReasonGangInfeasible)
		consistentlyNoLiveBound(t, 3*time.Second, ns, "job", second)

		// The old pods go (as a kubelet would confirm): the new run binds whole.
		forceDelete(t, ns, first...)
		waitForLiveBound(t, ns, "job", second, 3)
		waitFor(t, ns, "the status to count only the new run", func(context.Context) (bool, error) {
			status := getPodGroup(t, ns, "job").Status
			return status.Scheduled == 3 && status.Phase == v1alpha1.PodGroupScheduled, nil
		})
		consistentlyNotPartial(t, ns, "job", 3)
	})

	t.Run("a finished member's replacement is placed alone", func(t *testing.T) {
		ns := testNamespace(t)
		cosNodes(t, "replace", 3, "2")
		createPodGroup(t, ns, "job", 3, 2)
		gang := createGang(t, ns, "job", 3, "1500m")
		waitForBoundMembers(t, ns, "job", 3)

		// A worker fails: the gang is below its quorum, and once it stays so for longer than its
		// 2s schedule timeout, that is reported on the PodGroup and in the gauge.
		setPhase(t, ns, gang[1], v1.PodFailed)
		waitFor(t, ns, "the status to report the gang below its quorum", func(context.Context) (bool, error) {
			status := getPodGroup(t, ns, "job").Status
			c := findScheduled(status.Conditions)
			return status.Scheduled == 2 && status.Failed == 1 && c != nil && c.Reason == podgroup.ReasonBelowQuorum, nil
		})
		ev := waitForEvent(t, ns, "job", podgroup.ReasonBelowQuorum, schedulerName)
		if !strings.Contains(ev.Message, "2 of minMember 3") {
			t.Errorf("BelowQuorum event %q does not count the members", ev.Message)
		}
		waitForGaugeAtLeast(t, "custom_scheduler_coscheduling_gangs_below_quorum", schedulerName, 1)

		// Its controller replaces it: the replacement completes the quorum alone.
		forceDelete(t, ns, gang[1])
		replacement := createMembers(t, ns, "job", "replacement", 1, "1500m")
		waitForLiveBound(t, ns, "job", append([]string{gang[0], gang[2]}, replacement...), 3)
		waitForPodGroupCondition(t, ns, "job", podgroup.ReasonQuorumReached)
		waitForGauge(t, "custom_scheduler_coscheduling_gangs_below_quorum", schedulerName, 0)
		consistentlyNotPartial(t, ns, "job", 3)
	})

	t.Run("a PodGroup deleted while members wait releases them at once", func(t *testing.T) {
		ns := testNamespace(t)
		cosNodes(t, "pgdel", 3, "2")
		createPodGroup(t, ns, "job", 3, 60)
		createHeldMembers(t, ns, "job", 3, 1, "1500m")
		waitForMembersWaiting(t, ns, "job", 2)

		if err := dynamicClient(t).Resource(podGroupGVR).Namespace(ns).Delete(context.Background(), "job", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		ev := waitForEvent(t, ns, "job-0", podgroup.ReasonGangRejected, schedulerName)
		if !strings.Contains(ev.Message, "deleted") {
			t.Errorf("GangRejected event %q does not say the PodGroup was deleted", ev.Message)
		}
		// Released at once, long before the 60s timeout: the three nodes take three plain pods.
		for i := range 3 {
			createPod(t, st.MakePod().Namespace(ns).Name(fmt.Sprintf("plain-%d", i)).SchedulerName(schedulerName).
				Req(map[v1.ResourceName]string{v1.ResourceCPU: "1500m"}).Container("pause").Obj())
		}
		for i := range 3 {
			waitForPodBound(t, ns, fmt.Sprintf("plain-%d", i))
		}
		waitForEvent(t, ns, "job-0", podgroup.ReasonPodGroupNotFound, schedulerName)
		consistentlyNoneBound(t, time.Second, ns, "job")
		consistentlyNotPartial(t, ns, "job", 3)
	})

	t.Run("minMember lowered to the reserved members releases them", func(t *testing.T) {
		ns := testNamespace(t)
		cosNodes(t, "lower", 3, "2")
		createPodGroup(t, ns, "job", 3, 60)
		createHeldMembers(t, ns, "job", 3, 1, "1")
		waitForMembersWaiting(t, ns, "job", 2)

		patchPodGroupSpec(t, ns, "job", `{"spec":{"minMember":2}}`)
		waitForBoundMembers(t, ns, "job", 2)
		waitForEvent(t, ns, "job", podgroup.ReasonQuorumReached, schedulerName)
		consistentlyNotPartial(t, ns, "job", 2)
	})

	t.Run("minMember raised: the waiting members keep waiting and bind with the new quorum", func(t *testing.T) {
		ns := testNamespace(t)
		cosNodes(t, "raise", 4, "2")
		createPodGroup(t, ns, "job", 2, 60)
		createHeldMembers(t, ns, "job", 3, 2, "1")
		waitForMembersWaiting(t, ns, "job", 1)
		patchPodGroupSpec(t, ns, "job", `{"spec":{"minMember":3}}`)
		release(t, ns, "job-1")
		waitForMembersWaiting(t, ns, "job", 2)
		consistentlyNoneBound(t, time.Second, ns, "job")
		release(t, ns, "job-2")
		waitForBoundMembers(t, ns, "job", 3)
		consistentlyNotPartial(t, ns, "job", 3)
	})
}

// createMembers creates n members of group named <prefix>-<i>.
func createMembers(t *testing.T, ns, group, prefix string, n int, cpu string) []string {
	t.Helper()
	names := make([]string, n)
	for i := range n {
		names[i] = fmt.Sprintf("%s-%d", prefix, i)
		createPod(t, gangPod(ns, names[i], group, cpu))
	}
	return names
}

// forceDelete deletes pods at once, as a kubelet confirming their end would let them go.
func forceDelete(t *testing.T, ns string, names ...string) {
	t.Helper()
	for _, name := range names {
		err := client.CoreV1().Pods(ns).Delete(context.Background(), name, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)})
		if err != nil && !apierrors.IsNotFound(err) {
			t.Fatalf("deleting pod %s/%s: %v", ns, name, err)
		}
	}
}

func deleteNode(t *testing.T, name string) {
	t.Helper()
	if err := client.CoreV1().Nodes().Delete(context.Background(), name, metav1.DeleteOptions{}); err != nil {
		t.Fatalf("deleting node %s: %v", name, err)
	}
}

func setPhase(t *testing.T, ns, name string, phase v1.PodPhase) {
	t.Helper()
	pod, err := client.CoreV1().Pods(ns).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	pod.Status.Phase = phase
	if _, err := client.CoreV1().Pods(ns).UpdateStatus(context.Background(), pod, metav1.UpdateOptions{}); err != nil {
		t.Fatalf("setting pod %s/%s %s: %v", ns, name, phase, err)
	}
}

func patchPodGroupSpec(t *testing.T, ns, name, patch string) {
	t.Helper()
	if _, err := dynamicClient(t).Resource(podGroupGVR).Namespace(ns).Patch(context.Background(), name, types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
		t.Fatalf("patching PodGroup %s/%s: %v", ns, name, err)
	}
}

func findScheduled(conds []metav1.Condition) *metav1.Condition {
	for i := range conds {
		if conds[i].Type == "Scheduled" {
			return &conds[i]
		}
	}
	return nil
}

// liveBound counts the named pods that are live (no deletionTimestamp, not finished) and bound.
func liveBound(ctx context.Context, ns, group string, names []string) (int, error) {
	pods, err := client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: v1alpha1.PodGroupLabel + "=" + group})
	if err != nil {
		return 0, err
	}
	want := map[string]bool{}
	for _, n := range names {
		want[n] = true
	}
	n := 0
	for _, p := range pods.Items {
		live := p.DeletionTimestamp == nil && p.Status.Phase != v1.PodSucceeded && p.Status.Phase != v1.PodFailed
		if live && p.Spec.NodeName != "" && want[p.Name] {
			n++
		}
	}
	return n, nil
}

// consistentlyNotPartial checks for a second that the group has 0 or at least minMember live members
// bound, never between 1 and minMember-1.
func consistentlyNotPartial(t *testing.T, ns, group string, minMember int) {
	t.Helper()
	consistently(t, time.Second, fmt.Sprintf("%s/%s is not partially bound", ns, group), func(ctx context.Context) (bool, error) {
		pods, err := groupPods(ctx, ns, group)
		if err != nil {
			return false, err
		}
		var names []string
		for _, p := range pods {
			names = append(names, p.Name)
		}
		n, err := liveBound(ctx, ns, group, names)
		return n == 0 || n >= minMember, err
	})
}

func waitForLiveBound(t *testing.T, ns, group string, names []string, want int) {
	t.Helper()
	waitFor(t, ns, fmt.Sprintf("%d live members of %s/%s bound", want, ns, group), func(ctx context.Context) (bool, error) {
		n, err := liveBound(ctx, ns, group, names)
		return n == want, err
	})
}

func consistentlyNoLiveBound(t *testing.T, d time.Duration, ns, group string, names []string) {
	t.Helper()
	consistently(t, d, fmt.Sprintf("none of %v is bound", names), func(ctx context.Context) (bool, error) {
		n, err := liveBound(ctx, ns, group, names)
		return n == 0, err
	})
}
