package status

import (
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/custom-scheduler/custom-scheduler/pkg/apis/scheduling/v1alpha1"
	"github.com/custom-scheduler/custom-scheduler/pkg/coscheduling/podgroup"
)

// TestComputeStatusFinishedMembers: the status counts the members that succeeded as the scheduler
// does (the finished-member rule: those of the run in progress), so it says QuorumReached exactly
// when the scheduler places a replacement with them, and not for a new run beside an old one.
func TestComputeStatusFinishedMembers(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	pod := func(name string, run types.UID, node string, phase v1.PodPhase) *v1.Pod {
		p := member(name, "g")
		p.Spec.NodeName, p.Status.Phase = node, phase
		p.OwnerReferences = []metav1.OwnerReference{{Kind: "Job", Name: string(run), UID: run, Controller: ptr.To(true)}}
		return p
	}
	cases := []struct {
		name    string
		pods    []*v1.Pod
		counted int
		phase   v1alpha1.PodGroupPhase
		reason  string
		message string
	}{
		{name: "one running, two succeeded, one failed: below the quorum of 4, the succeeded ones said",
			pods:  []*v1.Pod{pod("a", "job", "n", v1.PodSucceeded), pod("b", "job", "n", v1.PodSucceeded), pod("c", "job", "n", v1.PodFailed), pod("d", "job", "n", v1.PodRunning)},
			phase: v1alpha1.PodGroupFailed, reason: podgroup.ReasonBelowQuorum, message: "1 of minMember 4 live members are bound, and 2 of the run succeeded"},
		{name: "the replacement bound: the quorum is kept",
			pods: []*v1.Pod{pod("a", "job", "n", v1.PodSucceeded), pod("b", "job", "n", v1.PodSucceeded), pod("c", "job", "n", v1.PodFailed),
				pod("d", "job", "n", v1.PodRunning), pod("r", "job", "n", v1.PodPending)}, counted: 2,
			phase: v1alpha1.PodGroupFailed, reason: podgroup.ReasonQuorumReached, message: "2 of minMember 4 live members are bound or binding, 2 succeeded"},
		{name: "replacements pending beside a running member: enough pods exist with the succeeded ones",
			pods: []*v1.Pod{pod("a", "job", "n", v1.PodSucceeded), pod("b", "job", "n", v1.PodSucceeded), pod("d", "job", "n", v1.PodRunning),
				pod("r", "job", "", v1.PodPending)},
			phase: v1alpha1.PodGroupScheduling, reason: podgroup.ReasonBelowQuorum, message: "1 of minMember 4 live members are bound, and 2 of the run succeeded"},
		// No live member bound: the run ended, and the pending pods are a new run (an indexed Job's
		// next wave) that counts nothing of it.
		{name: "pods pending with none bound: a new run, the succeeded ones count for nothing",
			pods:  []*v1.Pod{pod("a", "job", "n", v1.PodSucceeded), pod("b", "job", "n", v1.PodSucceeded), pod("r", "job", "", v1.PodPending), pod("s", "job", "", v1.PodPending)},
			phase: v1alpha1.PodGroupPending, reason: podgroup.ReasonWaitingForMembers, message: "2 of minMember 4 live pods exist;"},
		{name: "a new run beside the old run's succeeded pods counts none of them",
			pods: []*v1.Pod{pod("a", "old", "n", v1.PodSucceeded), pod("b", "old", "n", v1.PodSucceeded), pod("c", "old", "n", v1.PodSucceeded), pod("d", "old", "n", v1.PodSucceeded),
				pod("w", "new", "", v1.PodPending), pod("x", "new", "", v1.PodPending)},
			phase: v1alpha1.PodGroupPending, reason: podgroup.ReasonWaitingForMembers, message: "2 of minMember 4 live pods exist;"},
		{name: "all succeeded: finished",
			pods:  []*v1.Pod{pod("a", "job", "n", v1.PodSucceeded), pod("b", "job", "n", v1.PodSucceeded), pod("c", "job", "n", v1.PodSucceeded), pod("d", "job", "n", v1.PodSucceeded)},
			phase: v1alpha1.PodGroupFinished, reason: podgroup.ReasonQuorumReached},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := ComputeStatus(makePG("ns", "g", 4), tc.pods, Attempt{Counted: tc.counted}, now)
			if got.Phase != tc.phase {
				t.Errorf("phase %s, want %s", got.Phase, tc.phase)
			}
			c := meta.FindStatusCondition(got.Conditions, ConditionScheduled)
			if c == nil || c.Reason != tc.reason || !strings.HasPrefix(c.Message, tc.message) {
				t.Errorf("Scheduled %+v, want %s %q", c, tc.reason, tc.message)
			}
		})
	}
}
