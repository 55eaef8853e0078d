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

func TestCompositeConditions(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 10, 0, time.UTC)
	earlier := metav1.NewTime(now.Add(-time.Minute))
	at := metav1.NewTime(now)
	ours := func(status metav1.ConditionStatus, reason, msg string) v1alpha1.PodGroupStatus {
		return v1alpha1.PodGroupStatus{Conditions: []metav1.Condition{{Type: ConditionScheduled, Status: status, Reason: reason, Message: msg}}}
	}
	whole := ours(metav1.ConditionTrue, ReasonGroupsWhole, "2 of minGroupCount 2 groups whole")
	waiting := ours(metav1.ConditionFalse, ReasonWaitingForGroups, "0 of minGroupCount 2 groups whole")
	scheduled := func(status metav1.ConditionStatus, reason, msg string, when metav1.Time) metav1.Condition {
		return metav1.Condition{Type: ConditionCompositeInitiallyScheduled, Status: status, Reason: reason, Message: msg, ObservedGeneration: 1, LastTransitionTime: when}
	}
	unsched := schedulingv1beta1.PodGroupReasonUnschedulable
	disrupted := metav1.Condition{Type: schedulingv1beta1.DisruptionTarget, Status: metav1.ConditionTrue, Reason: schedulingv1beta1.PodGroupReasonPreemptionByScheduler,
		Message: "preempted", ObservedGeneration: 1, LastTransitionTime: at}
	cases := []struct {
		name     string
		existing []metav1.Condition
		s        CompositeState
		want     []metav1.Condition
	}{
		{name: "groups whole: True, Scheduled", s: CompositeState{Status: whole},
			want: []metav1.Condition{scheduled(metav1.ConditionTrue, ReasonScheduled, "2 of minGroupCount 2 groups whole", at)}},
		{name: "waiting for groups: nothing yet", s: CompositeState{Status: waiting}},
		{name: "no status of ours: nothing", s: CompositeState{}},
		{name: "the subtree cannot be placed: False, Unschedulable", s: CompositeState{Status: waiting, Unschedulable: "1 of minGroupCount 2 groups can be whole; prefill: GangInfeasible: x"},
			want: []metav1.Condition{scheduled(metav1.ConditionFalse, unsched, "1 of minGroupCount 2 groups can be whole; prefill: GangInfeasible: x", at)}},
		{name: "an invalid tree: False, Invalid", s: CompositeState{Status: waiting, Invalid: "the parents of a run in a cycle through b"},
			want: []metav1.Condition{scheduled(metav1.ConditionFalse, ReasonInvalid, "the parents of a run in a cycle through b", at)}},
		{name: "an invalid tree comes before a failure", s: CompositeState{Status: waiting, Invalid: "cycle", Unschedulable: "x"},
			want: []metav1.Condition{scheduled(metav1.ConditionFalse, ReasonInvalid, "cycle", at)}},
		{name: "True stays True whatever follows: groups short again",
			existing: []metav1.Condition{scheduled(metav1.ConditionTrue, ReasonScheduled, "placed", earlier)},
			s:        CompositeState{Status: waiting, Unschedulable: "x"}},
		{name: "True stays True: the tree made invalid later",
			existing: []metav1.Condition{scheduled(metav1.ConditionTrue, ReasonScheduled, "placed", earlier)},
			s:        CompositeState{Status: waiting, Invalid: "cycle"}},
		{name: "True again, another message: nothing (terminal)",
			existing: []metav1.Condition{scheduled(metav1.ConditionTrue, ReasonScheduled, "placed", earlier)},
			s:        CompositeState{Status: whole}},
		{name: "an earlier failure stays while the next attempt waits",
			existing: []metav1.Condition{scheduled(metav1.ConditionFalse, unsched, "x", earlier)},
			s:        CompositeState{Status: waiting}},
		{name: "the same failure again: nothing to write",
			existing: []metav1.Condition{scheduled(metav1.ConditionFalse, unsched, "x", earlier)},
			s:        CompositeState{Status: waiting, Unschedulable: "x"}},
		{name: "another failure's message keeps the transition time",
			existing: []metav1.Condition{scheduled(metav1.ConditionFalse, unsched, "x", earlier)},
			s:        CompositeState{Status: waiting, Unschedulable: "y"},
			want:     []metav1.Condition{scheduled(metav1.ConditionFalse, unsched, "y", earlier)}},
		{name: "invalid after unschedulable: a new transition",
			existing: []metav1.Condition{scheduled(metav1.ConditionFalse, unsched, "x", earlier)},
			s:        CompositeState{Status: waiting, Invalid: "cycle"},
			want:     []metav1.Condition{scheduled(metav1.ConditionFalse, ReasonInvalid, "cycle", at)}},
		{name: "a failure then whole: True from now",
			existing: []metav1.Condition{scheduled(metav1.ConditionFalse, unsched, "x", earlier)},
			s:        CompositeState{Status: whole},
			want:     []metav1.Condition{scheduled(metav1.ConditionTrue, ReasonScheduled, "2 of minGroupCount 2 groups whole", at)}},
		{name: "preempted whole: DisruptionTarget", existing: []metav1.Condition{scheduled(metav1.ConditionTrue, ReasonScheduled, "placed", earlier)},
			s: CompositeState{Status: waiting, Disruption: "preempted"}, want: []metav1.Condition{disrupted}},
		{name: "DisruptionTarget written once", existing: []metav1.Condition{disrupted},
			s: CompositeState{Status: waiting, Disruption: "preempted"}},
		{name: "another writer's condition is left alone",
			existing: []metav1.Condition{{Type: "Other", Status: metav1.ConditionTrue, Reason: "R", LastTransitionTime: earlier}},
			s:        CompositeState{Status: whole},
			want:     []metav1.Condition{scheduled(metav1.ConditionTrue, ReasonScheduled, "2 of minGroupCount 2 groups whole", at)}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := CompositeConditions(tc.existing, tc.s, 1, now)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("CompositeConditions (-want,+got): %s", diff)
			}
		})
	}
}

func TestUnschedulable(t *testing.T) {
	failed := func(name string, min int, reason, msg string) Child {
		c := child(name, min, v1alpha1.PodGroupScheduling, 0)
		c.Status.Conditions = []metav1.Condition{{Type: ConditionScheduled, Status: metav1.ConditionFalse, Reason: reason, Message: msg}}
		return c
	}
	waiting := func(name string, min int, reason string) Child {
		return failed(name, min, reason, "waiting")
	}
	for _, tc := range []struct {
		name     string
		min      int
		children []Child
		want     string
	}{
		{name: "no attempt ended", min: 2, children: []Child{waiting("decode", 4, podgroup.ReasonWaitingForQuorum), waiting("prefill", 2, podgroup.ReasonWaitingForMembers)}},
		{name: "one of two needed failed", min: 2,
			children: []Child{waiting("decode", 4, podgroup.ReasonWaitingForQuorum), failed("prefill", 2, podgroup.ReasonGangInfeasible, "2 members need 10 cpu")},
			want:     "1 of minGroupCount 2 groups can be whole; prefill: GangInfeasible: 2 members need 10 cpu"},
		{name: "both failed, in name order", min: 2,
			children: []Child{failed("prefill", 2, podgroup.ReasonGangInfeasible, "x"), failed("decode", 4, podgroup.ReasonGangRejected, "with prefill")},
			want:     "0 of minGroupCount 2 groups can be whole; decode: GangRejected: with prefill; prefill: GangInfeasible: x"},
		{name: "a whole child is never failed", min: 2,
			children: []Child{{Name: "decode", Min: 4, Status: v1alpha1.PodGroupStatus{Phase: v1alpha1.PodGroupRunning, Scheduled: 4,
				Conditions: []metav1.Condition{{Type: ConditionScheduled, Status: metav1.ConditionFalse, Reason: podgroup.ReasonGangTimedOut}}}},
				waiting("prefill", 2, podgroup.ReasonWaitingForQuorum)}},
		{name: "K of N: one failed, K still possible", min: 2,
			children: []Child{failed("r0", 2, podgroup.ReasonGangTimedOut, "t"), waiting("r1", 2, podgroup.ReasonWaitingForQuorum), waiting("r2", 2, podgroup.ReasonWaitingForQuorum)}},
		{name: "a basic composite: failed only when every child failed", min: 1,
			children: []Child{failed("a", 1, podgroup.ReasonGangInfeasible, "x"), waiting("b", 1, podgroup.ReasonWaitingForQuorum)}},
		{name: "a composite child that cannot be whole", min: 1,
			children: []Child{{Name: "inner", Min: 2, Unschedulable: "0 of minGroupCount 2 groups can be whole; a: GangInfeasible: x"}},
			want:     "0 of minGroupCount 1 groups can be whole; inner: 0 of minGroupCount 2 groups can be whole; a: GangInfeasible: x"},
		{name: "fewer children than the minimum, none failed: waiting", min: 3, children: []Child{waiting("a", 1, podgroup.ReasonWaitingForQuorum)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := Unschedulable(tc.min, tc.children); got != tc.want {
				t.Errorf("Unschedulable = %q, want %q", got, tc.want)
			}
		})
	}
}
