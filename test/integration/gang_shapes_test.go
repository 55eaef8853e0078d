package integration

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/custom-scheduler/custom-scheduler/pkg/apis/scheduling/v1alpha1"
	"github.com/custom-scheduler/custom-scheduler/pkg/coscheduling/podgroup"
)

// kubeletDeletesPreempted stands in for the kubelets of a namespace until the test ends: pods the
// scheduler terminates by preemption are deleted at once, as a kubelet confirms their end. It returns
// the names of the pods deleted so far.
func kubeletDeletesPreempted(t *testing.T, ns string) func() []string {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	var (
		mu   sync.Mutex
		gone []string
		done = make(chan struct{})
	)
	go func() {
		defer close(done)
		tick := time.NewTicker(200 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			names, err := preempted(ctx, ns)
			if err != nil {
				continue
			}
			for _, n := range names {
				if client.CoreV1().Pods(ns).Delete(ctx, n, metav1.DeleteOptions{GracePeriodSeconds: new(int64)}) == nil {
					mu.Lock()
					gone = append(gone, n)
					mu.Unlock()
				}
			}
		}
	}()
	t.Cleanup(func() { cancel(); <-done })
	return func() []string {
		mu.Lock()
		defer mu.Unlock()
		return slices.Clone(gone)
	}
}

// TestGangShapes runs the member shapes real workloads have through the shipped profile: members
// beyond minMember, late members of a gang with a preferred domain, members still gated by an
// admission controller, members that constrain each other. (A member preempted while waiting at
// Permit ends its attempt at once: that race lasts milliseconds, so it is a unit test,
// TestPreemptedWaitingMemberEndsItsAttempt.)
func TestGangShapes(t *testing.T) {
	ensurePriorityClasses(t)
	startScheduler(t, schedulerConfig(t, adminKubeconfig, shippedProfiles(t)))

	t.Run("members beyond minMember preempt like any pod once the quorum is bound", func(t *testing.T) {
		ns := testNamespace(t)
		nodes := caseNodes(t, "sx", 1)
		kubeletDeletesPreempted(t, ns)
		var low []string
		for i := range 4 {
			low = append(low, fmt.Sprintf("low-%d", i))
			createPod(t, prioPod(ns, low[i], "", "1", lowPriority, "sx", nodes[0]))
		}
		for _, n := range low {
			waitForPodBound(t, ns, n)
		}
		watchWhole(t, ns, "hi", 3, nil)
		createPodGroup(t, ns, "hi", 3, 0)
		for i := range 4 {
			createPod(t, prioPod(ns, fmt.Sprintf("hi-%d", i), "hi", "1", highPriority, "sx", ""))
		}
		// All four members bind: the fourth preempts the last low pod after the quorum, long before
		// the queue's periodic flush (5 minutes) would retry it.
		waitForBoundMembers(t, ns, "hi", 4)
		for _, n := range low {
			if _, err := client.CoreV1().Pods(ns).Get(context.Background(), n, metav1.GetOptions{}); err == nil {
				t.Errorf("low-priority pod %s still exists; every low pod's room was needed", n)
			}
		}
	})

	t.Run("a late member leaves a full preferred rack for one with room", func(t *testing.T) {
		ns := testNamespace(t)
		// Rack la (one 2-CPU node) is the tightest fit for the gang of two 1-CPU members; rack lb has room.
		createNode(t, "la-0", "2", "8Gi", map[string]string{rackLabel: "la", blockLabel: "lab"})
		createNode(t, "lb-0", "4", "8Gi", map[string]string{rackLabel: "lb", blockLabel: "lab"})
		createTopologyPodGroup(t, ns, "job", 2, map[string]any{"preferred": []any{rackLabel}})
		for i := range 2 {
			p := gangPod(ns, fmt.Sprintf("job-%d", i), "job", "1")
			p.Spec.NodeSelector = map[string]string{blockLabel: "lab"}
			createPod(t, p)
		}
		waitForBoundMembers(t, ns, "job", 2)
		if racks := racksOf(t, ns, "job"); racks["la"] != 2 {
			t.Fatalf("the gang landed in %v, want both members in the tightest rack la", racks)
		}
		late := gangPod(ns, "job-late", "job", "1")
		late.Spec.NodeSelector = map[string]string{blockLabel: "lab"}
		createPod(t, late)
		if node := waitForPodBound(t, ns, "job-late"); node != "lb-0" {
			t.Errorf("the late member went to %s, want lb-0 (rack la is full)", node)
		}
	})

	t.Run("a gated member is not a member yet: its siblings hold nothing", func(t *testing.T) {
		ns := testNamespace(t)
		nodes := caseNodes(t, "sg", 1)
		watchWhole(t, ns, "job", 3, nil)
		createPodGroup(t, ns, "job", 3, 0)
		for i := range 3 {
			p := prioPod(ns, fmt.Sprintf("job-%d", i), "job", "1", "", "sg", "")
			if i == 2 {
				p.Spec.SchedulingGates = []v1.PodSchedulingGate{{Name: "kueue.x-k8s.io/admission"}}
			}
			createPod(t, p)
		}
		// The two ungated members reserve nothing: a plain pod needing all the node's room binds.
		createPod(t, prioPod(ns, "plain", "", "4", "", "sg", nodes[0]))
		waitForPodBound(t, ns, "plain")
		consistentlyNoneBound(t, 2*time.Second, ns, "job")
		if ev := waitForEvent(t, ns, "job-1", podgroup.ReasonWaitingForMembers, schedulerName); !strings.Contains(ev.Message, "2 of minMember 3") {
			t.Errorf("WaitingForMembers event %q does not count 2 members", ev.Message)
		}
		assertNoPodEvents(t, ns, []string{"job-2"}, podgroup.ReasonWaitingForMembers)
		// The status counts the two members, not the gated pod: the group waits for members, not for a
		// quorum being reserved.
		waitForPodGroupCondition(t, ns, "job", podgroup.ReasonWaitingForMembers)
		// Admitted: the gate goes, the group is complete, and it binds whole once there is room.
		forceDelete(t, ns, "plain")
		ungate(t, ns, "job-2")
		waitForBoundMembers(t, ns, "job", 3)
	})

	t.Run("members that constrain each other bind without a back-off", func(t *testing.T) {
		// a needs node sc-0 and must not share a node with app=foo; b is app=foo. A member that finds
		// no node behind its reserved siblings leads an immediate retry.
		createNode(t, "sc-0", "8", "8Gi", map[string]string{caseLabel: "sc", v1.LabelHostname: "sc-0"})
		createNode(t, "sc-1", "4", "8Gi", map[string]string{caseLabel: "sc", v1.LabelHostname: "sc-1"})
		for rep := range 3 {
			ns := testNamespace(t)
			watchWhole(t, ns, "pair", 2, nil)
			createPodGroup(t, ns, "pair", 2, 0)
			// b is created first, and both are constrained: b goes first and takes sc-0 (the
			// emptier node) unless the attempt is retried at once with a first.
			b := gangPod(ns, "pair-b", "pair", "1")
			b.Labels["app"] = "foo"
			b.Spec.NodeSelector = map[string]string{caseLabel: "sc"}
			a := gangPod(ns, "pair-a", "pair", "1")
			a.Spec.NodeSelector = map[string]string{v1.LabelHostname: "sc-0"}
			a.Spec.Affinity = &v1.Affinity{PodAntiAffinity: &v1.PodAntiAffinity{
				RequiredDuringSchedulingIgnoredDuringExecution: []v1.PodAffinityTerm{{
					TopologyKey:   v1.LabelHostname,
					LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "foo"}},
				}},
			}}
			start := time.Now()
			createPod(t, b)
			time.Sleep(10 * time.Millisecond)
			createPod(t, a)
			waitForBoundMembers(t, ns, "pair", 2)
			// The shipped back-off is 10 s: binding sooner means no attempt backed off.
			if d := time.Since(start); d > 8*time.Second {
				t.Errorf("repetition %d: the pair bound after %v, as if an attempt had backed off", rep, d.Round(time.Millisecond))
			}
			forceDelete(t, ns, "pair-a", "pair-b")
			waitFor(t, ns, "the pair gone", func(ctx context.Context) (bool, error) {
				pods, err := client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: v1alpha1.PodGroupLabel + "=pair"})
				return err == nil && len(pods.Items) == 0, err
			})
		}
	})
}
