package integration

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/custom-scheduler/custom-scheduler/pkg/coscheduling/podgroup"
)

// Round 5 of gang preemption (issue #48): what was found by reading, each shown against the real
// apiserver through the shipped profile.

// midPriority sits between lowPriority and highPriority.
const midPriority = "custom-scheduler-test-mid"

func ensureMidPriority(t *testing.T) {
	t.Helper()
	ensurePriorityClasses(t)
	pc := &schedulingv1.PriorityClass{ObjectMeta: metav1.ObjectMeta{Name: midPriority}, Value: 500}
	if _, err := client.SchedulingV1().PriorityClasses().Create(context.Background(), pc, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatalf("creating PriorityClass %s: %v", midPriority, err)
	}
}

// everyone excuses every pod of a group (the test disrupts them itself: deletes, injected faults).
func everyone(string) bool { return true }

// TestPreemptRound5MemberDeletedBeforeNomination (#48, 1a): a member deleted between the preemption's
// listing of its gang and the nominations leaves no claim on the room. The apiserver is made slow to
// delete (the evictions, which run between the two), and the test deletes a member meanwhile; then
// the whole preempting gang goes, and a gang of the same priority must get the room.
func TestPreemptRound5MemberDeletedBeforeNomination(t *testing.T) {
	ensurePriorityClasses(t)
	proxy := startFaultProxy(t, faultSeed(t), []faultRule{
		{name: "slow-pod-delete", method: http.MethodDelete, match: podPath(""), delay: 3 * time.Second},
	})
	startScheduler(t, schedulerConfig(t, proxy.kubeconfig, shippedProfiles(t)))
	ns := testNamespace(t)
	caseNodes(t, "ra", 2)
	for i := range 2 {
		createPod(t, prioPod(ns, fmt.Sprintf("low-%d", i), "", "3", lowPriority, "ra", ""))
	}
	for i := range 2 {
		waitForPodBound(t, ns, fmt.Sprintf("low-%d", i))
	}
	watchWhole(t, ns, "h", 2, everyone)
	createPodGroup(t, ns, "h", 2, 0)
	for i := range 2 {
		createPod(t, prioPod(ns, fmt.Sprintf("h-%d", i), "h", "3", highPriority, "ra", ""))
	}
	// The evictions began (the DisruptionTarget condition is written before the slow delete): the
	// members were listed. Delete one before the nominations.
	waitFor(t, ns, "a victim marked for preemption", func(ctx context.Context) (bool, error) {
		for i := range 2 {
			p, err := client.CoreV1().Pods(ns).Get(ctx, fmt.Sprintf("low-%d", i), metav1.GetOptions{})
			if err != nil {
				return false, err
			}
			for _, c := range p.Status.Conditions {
				if c.Type == v1.DisruptionTarget && c.Status == v1.ConditionTrue {
					return true, nil
				}
			}
		}
		return false, nil
	})
	forceDelete(t, ns, "h-1")
	waitForEvent(t, ns, "h", podgroup.ReasonPreempting, schedulerName)
	// The gang goes whole, its victims too.
	forceDelete(t, ns, "h-0", "low-0", "low-1")
	if err := dynamicClient(t).Resource(podGroupGVR).Namespace(ns).Delete(context.Background(), "h", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	// A gang of the same priority fits the two free nodes, unless a claim of h's is left behind.
	watchWhole(t, ns, "e", 2, nil)
	runGang(t, ns, "e", 2, "3", highPriority, "ra", nil)
	waitForBoundMembers(t, ns, "e", 2)
	if proxy.injectedOf("slow-pod-delete") == 0 {
		t.Errorf("no delete was slowed: the test proves nothing")
	}
}

// TestPreemptRound5BindFailures (#48, 1b): a member whose bind fails three times after its gang's
// quorum is retried each time while the rest stay bound; the gang is never rejected (no GangRejected,
// no back-off) and ends whole.
func TestPreemptRound5BindFailures(t *testing.T) {
	ensurePriorityClasses(t)
	proxy := startFaultProxy(t, faultSeed(t), []faultRule{
		{name: "bind-b-2", method: http.MethodPost, failFirst: 3, match: func(r *http.Request) bool {
			return podPath("binding")(r) && strings.Contains(r.URL.Path, "/pods/b-2/")
		}},
	})
	startScheduler(t, schedulerConfig(t, proxy.kubeconfig, shippedProfiles(t)))
	ns := testNamespace(t)
	caseNodes(t, "rb", 3)
	// The failed binds are the test's doing: the episode they open is excused, the end is checked.
	watchWhole(t, ns, "b", 3, everyone)
	createPodGroup(t, ns, "b", 3, 0)
	for i := range 3 {
		createPod(t, prioPod(ns, fmt.Sprintf("b-%d", i), "b", "1", lowPriority, "rb", ""))
	}
	waitForBoundMembers(t, ns, "b", 3)
	if n := proxy.injectedOf("bind-b-2"); n != 3 {
		t.Errorf("%d binds of b-2 failed, want 3", n)
	}
	assertNoEvents(t, ns, "PodGroup", []string{"b"}, podgroup.ReasonGangRejected)
}

// TestPreemptRound5OneGangPriority: a gang whose members have different priorities is one gang of the
// lowest of them (#48, 1d), and its preemption keeps the nominations of its own lower-priority
// members (#48, 1c).
func TestPreemptRound5OneGangPriority(t *testing.T) {
	ensureMidPriority(t)
	startScheduler(t, schedulerConfig(t, adminKubeconfig, shippedProfiles(t)))

	t.Run("a high and a low member preempt nothing above the low one's priority", func(t *testing.T) {
		ns := testNamespace(t)
		caseNodes(t, "rd", 2)
		for i := range 2 {
			createPod(t, prioPod(ns, fmt.Sprintf("mid-%d", i), "", "3", midPriority, "rd", ""))
		}
		for i := range 2 {
			waitForPodBound(t, ns, fmt.Sprintf("mid-%d", i))
		}
		watchWhole(t, ns, "mx", 2, nil)
		createPodGroup(t, ns, "mx", 2, 0)
		createPod(t, prioPod(ns, "mx-0", "mx", "3", highPriority, "rd", ""))
		createPod(t, prioPod(ns, "mx-1", "mx", "3", lowPriority, "rd", ""))
		// Both members reach PostFilter (the high one first): neither may evict the mid pods.
		consistentlyNonePreempted(t, ns)
		consistentlyNoneBound(t, time.Second, ns, "mx")
		e := waitForEvent(t, ns, "mx", podgroup.ReasonMixedPriorities, schedulerName)
		if !strings.Contains(e.Message, "priorities 10 to 1000") {
			t.Errorf("MixedPriorities says %q, want the priorities named", e.Message)
		}
	})

	t.Run("a gang's preemption keeps its lower-priority member's nomination", func(t *testing.T) {
		ns := testNamespace(t)
		nodes := caseNodes(t, "rc", 2)
		for i := range 2 {
			createPod(t, prioPod(ns, fmt.Sprintf("low-%d", i), "", "3", lowPriority, "rc", nodes[i]))
		}
		for i := range 2 {
			waitForPodBound(t, ns, fmt.Sprintf("low-%d", i))
		}
		watchWhole(t, ns, "nc", 2, nil)
		createPodGroup(t, ns, "nc", 2, 0)
		// nc-1 carries the nomination an earlier preemption gave it (the room on rc-1).
		m1 := createPod(t, prioPod(ns, "nc-1", "nc", "3", midPriority, "rc", nodes[1]))
		m1.Status.NominatedNodeName = nodes[1]
		if _, err := client.CoreV1().Pods(ns).UpdateStatus(context.Background(), m1, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		createPod(t, prioPod(ns, "nc-0", "nc", "3", highPriority, "rc", nodes[0]))
		waitForPreempted(t, ns, []string{"low-0", "low-1"})
		waitForEvent(t, ns, "nc", podgroup.ReasonPreempting, schedulerName)
		consistently(t, 2*time.Second, "nc-1 keeps its nomination to "+nodes[1], func(ctx context.Context) (bool, error) {
			return nominated(t, ns, []string{"nc-1"})["nc-1"] == nodes[1], nil
		})
		// A lower-priority latecomer does not take nc-1's room once the victims are gone.
		createPod(t, prioPod(ns, "latecomer", "", "3", lowPriority, "rc", nodes[1]))
		forceDelete(t, ns, "low-0", "low-1")
		waitForBoundMembers(t, ns, "nc", 2)
		if p, err := client.CoreV1().Pods(ns).Get(context.Background(), "latecomer", metav1.GetOptions{}); err != nil || p.Spec.NodeName != "" {
			t.Errorf("the lower-priority latecomer took the gang's room (node %q, err %v)", p.Spec.NodeName, err)
		}
	})
}

// TestPreemptRound5EvictionsOutsideTheCycle (#48): a gang's evictions and nominations are made outside
// the scheduling cycle, as upstream's preemption does: while the apiserver is slow to delete the
// victims, other pods are scheduled; the gang's members are held back until the calls are done, and
// the gang binds whole once its victims are gone.
func TestPreemptRound5EvictionsOutsideTheCycle(t *testing.T) {
	ensurePriorityClasses(t)
	proxy := startFaultProxy(t, faultSeed(t), []faultRule{
		{name: "slow-pod-delete", method: http.MethodDelete, match: podPath(""), delay: 6 * time.Second},
	})
	startScheduler(t, schedulerConfig(t, proxy.kubeconfig, shippedProfiles(t)))
	ns := testNamespace(t)
	caseNodes(t, "re", 2)
	caseNodes(t, "rf", 1)
	kubeletDeletesPreempted(t, ns)
	for i := range 2 {
		createPod(t, prioPod(ns, fmt.Sprintf("low-%d", i), "", "3", lowPriority, "re", ""))
	}
	for i := range 2 {
		waitForPodBound(t, ns, fmt.Sprintf("low-%d", i))
	}
	watchWhole(t, ns, "h", 2, nil)
	runGang(t, ns, "h", 2, "3", highPriority, "re", nil)
	waitFor(t, ns, "a victim marked for preemption", func(ctx context.Context) (bool, error) {
		got, err := client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		for _, p := range got.Items {
			for _, c := range p.Status.Conditions {
				if c.Type == v1.DisruptionTarget && c.Status == v1.ConditionTrue {
					return true, nil
				}
			}
		}
		return false, nil
	})
	// The victims' deletes take 6 s: a pod created now is scheduled meanwhile.
	start := time.Now()
	createPod(t, prioPod(ns, "bystander", "", "1", lowPriority, "rf", ""))
	waitForPodBound(t, ns, "bystander")
	if d := time.Since(start); d > 3*time.Second {
		t.Errorf("a plain pod waited %v for a gang's evictions to be made (they take 6 s): the scheduling cycle made them", d.Round(100*time.Millisecond))
	}
	waitForBoundMembers(t, ns, "h", 2)
	waitForEvent(t, ns, "h", podgroup.ReasonPreempting, schedulerName)
}

// TestPreemptRound5HopelessGangUnderChurn (#48): a high-priority gang that does not fit even with every
// lower-priority pod evicted is not tried again for each plain lower-priority pod deleted around it
// (its members' PreFilter and PostFilter would run for nothing on every delete of the cluster); a
// node that could hold it still brings it back.
func TestPreemptRound5HopelessGangUnderChurn(t *testing.T) {
	ensurePriorityClasses(t)
	startScheduler(t, schedulerConfig(t, adminKubeconfig, shippedProfiles(t)))
	ns := testNamespace(t)
	caseNodes(t, "rg", 2)
	const churn = 10
	for i := range churn {
		createPod(t, prioPod(ns, fmt.Sprintf("low-%d", i), "", "100m", lowPriority, "rg", ""))
	}
	for i := range churn {
		waitForPodBound(t, ns, fmt.Sprintf("low-%d", i))
	}
	watchWhole(t, ns, "hope", 2, nil)
	createPodGroup(t, ns, "hope", 2, 0)
	for i := range 2 {
		createPod(t, prioPod(ns, fmt.Sprintf("hope-%d", i), "hope", "6", highPriority, "rg", ""))
	}
	const metric = "custom_scheduler_coscheduling_preemption_attempts_total"
	const key = "preemptor=gang,result=not_helpful"
	waitFor(t, ns, "the gang's preemption found no help", func(context.Context) (bool, error) {
		return coschedulingCounters(t, metric)[key] > 0, nil
	})
	time.Sleep(2 * time.Second)
	before := coschedulingCounters(t, metric)[key]
	for i := range churn {
		forceDelete(t, ns, fmt.Sprintf("low-%d", i))
		time.Sleep(100 * time.Millisecond)
	}
	time.Sleep(3 * time.Second)
	if n := coschedulingCounters(t, metric)[key] - before; n > 0 {
		t.Errorf("the gang's members were tried %v times more for %d lower-priority pods deleted around it, want none", n, churn)
	}
	// Room that can hold it brings it back.
	createNode(t, "rg-big-0", "8", "16Gi", map[string]string{caseLabel: "rg", v1.LabelHostname: "rg-big-0"})
	createNode(t, "rg-big-1", "8", "16Gi", map[string]string{caseLabel: "rg", v1.LabelHostname: "rg-big-1"})
	waitForBoundMembers(t, ns, "hope", 2)
}
