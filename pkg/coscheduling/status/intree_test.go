package status

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	schedulingv1beta1 "k8s.io/api/scheduling/v1beta1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/custom-scheduler/custom-scheduler/pkg/apis/scheduling/v1alpha1"
	"github.com/custom-scheduler/custom-scheduler/pkg/coscheduling/podgroup"
)

func TestInTreeConditions(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 10, 0, time.UTC)
	earlier := metav1.NewTime(now.Add(-time.Minute))
	at := metav1.NewTime(now)
	ours := func(status metav1.ConditionStatus, reason, msg string) v1alpha1.PodGroupStatus {
		return v1alpha1.PodGroupStatus{Conditions: []metav1.Condition{{Type: ConditionScheduled, Status: status, Reason: reason, Message: msg}}}
	}
	scheduled := func(status metav1.ConditionStatus, reason, msg string, when metav1.Time) metav1.Condition {
		return metav1.Condition{Type: schedulingv1beta1.PodGroupInitiallyScheduled, Status: status, Reason: reason, Message: msg, ObservedGeneration: 1, LastTransitionTime: when}
	}
	disrupted := metav1.Condition{Type: schedulingv1beta1.DisruptionTarget, Status: metav1.ConditionTrue, Reason: schedulingv1beta1.PodGroupReasonPreemptionByScheduler,
		Message: "preempted", ObservedGeneration: 1, LastTransitionTime: at}
	cases := []struct {
		name       string
		existing   []metav1.Condition
		st         v1alpha1.PodGroupStatus
		disruption string
		want       []metav1.Condition
	}{
		{name: "placed: True, Scheduled", st: ours(metav1.ConditionTrue, podgroup.ReasonQuorumReached, "3 of minMember 3"),
			want: []metav1.Condition{scheduled(metav1.ConditionTrue, ReasonScheduled, "3 of minMember 3", at)}},
		{name: "infeasible: False, Unschedulable, our reason and numbers", st: ours(metav1.ConditionFalse, podgroup.ReasonGangInfeasible, "3 members need 4500m cpu"),
			want: []metav1.Condition{scheduled(metav1.ConditionFalse, schedulingv1beta1.PodGroupReasonUnschedulable, "GangInfeasible: 3 members need 4500m cpu", at)}},
		{name: "timed out", st: ours(metav1.ConditionFalse, podgroup.ReasonGangTimedOut, "timed out"),
			want: []metav1.Condition{scheduled(metav1.ConditionFalse, schedulingv1beta1.PodGroupReasonUnschedulable, "GangTimedOut: timed out", at)}},
		{name: "rejected", st: ours(metav1.ConditionFalse, podgroup.ReasonGangRejected, "a member left"),
			want: []metav1.Condition{scheduled(metav1.ConditionFalse, schedulingv1beta1.PodGroupReasonUnschedulable, "GangRejected: a member left", at)}},
		{name: "waiting for members: nothing yet", st: ours(metav1.ConditionFalse, podgroup.ReasonWaitingForMembers, "1 of 3")},
		{name: "waiting for the quorum: nothing yet", st: ours(metav1.ConditionFalse, podgroup.ReasonWaitingForQuorum, "2 of 3")},
		{name: "preempting: nothing yet", st: ours(metav1.ConditionFalse, podgroup.ReasonPreempting, "victims")},
		{name: "no status of ours", st: v1alpha1.PodGroupStatus{}},
		{name: "True stays True whatever follows",
			existing: []metav1.Condition{scheduled(metav1.ConditionTrue, ReasonScheduled, "placed", earlier)},
			st:       ours(metav1.ConditionFalse, podgroup.ReasonBelowQuorum, "1 of 3 bound")},
		{name: "True stays True after a failed attempt (members lost, the gang retried)",
			existing: []metav1.Condition{scheduled(metav1.ConditionTrue, ReasonScheduled, "placed", earlier)},
			st:       ours(metav1.ConditionFalse, podgroup.ReasonGangRejected, "a member left")},
		{name: "an earlier failure stays while the next attempt waits",
			existing: []metav1.Condition{scheduled(metav1.ConditionFalse, schedulingv1beta1.PodGroupReasonUnschedulable, "GangInfeasible: x", earlier)},
			st:       ours(metav1.ConditionFalse, podgroup.ReasonWaitingForQuorum, "2 of 3")},
		{name: "the same failure again: nothing to write",
			existing: []metav1.Condition{scheduled(metav1.ConditionFalse, schedulingv1beta1.PodGroupReasonUnschedulable, "GangInfeasible: x", earlier)},
			st:       ours(metav1.ConditionFalse, podgroup.ReasonGangInfeasible, "x")},
		{name: "another failure's message keeps the transition time",
			existing: []metav1.Condition{scheduled(metav1.ConditionFalse, schedulingv1beta1.PodGroupReasonUnschedulable, "GangInfeasible: x", earlier)},
			st:       ours(metav1.ConditionFalse, podgroup.ReasonGangTimedOut, "y"),
			want:     []metav1.Condition{scheduled(metav1.ConditionFalse, schedulingv1beta1.PodGroupReasonUnschedulable, "GangTimedOut: y", earlier)}},
		{name: "a failure then placed: True from now",
			existing: []metav1.Condition{scheduled(metav1.ConditionFalse, schedulingv1beta1.PodGroupReasonUnschedulable, "GangInfeasible: x", earlier)},
			st:       ours(metav1.ConditionTrue, podgroup.ReasonQuorumReached, "placed"),
			want:     []metav1.Condition{scheduled(metav1.ConditionTrue, ReasonScheduled, "placed", at)}},
		{name: "preempted whole: DisruptionTarget", existing: []metav1.Condition{scheduled(metav1.ConditionTrue, ReasonScheduled, "placed", earlier)},
			st: ours(metav1.ConditionFalse, podgroup.ReasonBelowQuorum, "1 of 3 bound"), disruption: "preempted", want: []metav1.Condition{disrupted}},
		{name: "DisruptionTarget written once", existing: []metav1.Condition{disrupted},
			st: ours(metav1.ConditionFalse, podgroup.ReasonWaitingForMembers, "0 of 3"), disruption: "preempted"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := InTreeConditions(tc.existing, tc.st, tc.disruption, 1, now)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("InTreeConditions (-want,+got): %s", diff)
			}
		})
	}
}
