package status

import (
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/custom-scheduler/custom-scheduler/pkg/apis/scheduling/v1alpha1"
)

func child(name string, min int, phase v1alpha1.PodGroupPhase, scheduled int32) Child {
	return Child{Name: name, Min: min, Status: v1alpha1.PodGroupStatus{Phase: phase, Scheduled: scheduled}}
}

func TestComputeComposite(t *testing.T) {
	now := time.Date(2026, 12, 5, 12, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		name       string
		min        int
		children   []Child
		phase      v1alpha1.PodGroupPhase
		scheduled  int32
		reason     string
		msgHas     string
		startsTime bool
	}{
		{name: "no child placed", min: 2, children: []Child{child("decode", 4, v1alpha1.PodGroupPreScheduling, 0), child("prefill", 2, v1alpha1.PodGroupPending, 0)},
			phase: v1alpha1.PodGroupPreScheduling, reason: ReasonWaitingForGroups, msgHas: "0 of minGroupCount 2 groups whole; short: decode (PreScheduling, 0 of 4), prefill (Pending, 0 of 2)"},
		{name: "one whole of two needed", min: 2, children: []Child{child("decode", 4, v1alpha1.PodGroupScheduled, 4), child("prefill", 2, v1alpha1.PodGroupScheduling, 1)},
			phase: v1alpha1.PodGroupScheduling, scheduled: 1, reason: ReasonWaitingForGroups, msgHas: "short: prefill (Scheduling, 1 of 2)", startsTime: true},
		{name: "both whole", min: 2, children: []Child{child("decode", 4, v1alpha1.PodGroupScheduled, 4), child("prefill", 2, v1alpha1.PodGroupRunning, 2)},
			phase: v1alpha1.PodGroupScheduled, scheduled: 2, reason: ReasonGroupsWhole, msgHas: "2 of minGroupCount 2 groups whole", startsTime: true},
		{name: "K of N running", min: 2, children: []Child{child("r0", 2, v1alpha1.PodGroupRunning, 2), child("r1", 2, v1alpha1.PodGroupRunning, 2), child("r2", 2, v1alpha1.PodGroupPending, 0)},
			phase: v1alpha1.PodGroupRunning, scheduled: 2, reason: ReasonGroupsWhole, startsTime: true},
		{name: "finished", min: 1, children: []Child{child("a", 1, v1alpha1.PodGroupFinished, 0)},
			phase: v1alpha1.PodGroupFinished, scheduled: 1, reason: ReasonGroupsWhole, startsTime: true},
		{name: "too many failed to reach K", min: 2, children: []Child{child("a", 1, v1alpha1.PodGroupFailed, 0), child("b", 1, v1alpha1.PodGroupRunning, 1)},
			phase: v1alpha1.PodGroupFailed, scheduled: 1, reason: ReasonWaitingForGroups, startsTime: true},
		{name: "fewer children than K", min: 3, children: []Child{child("a", 1, v1alpha1.PodGroupPending, 0)},
			phase: v1alpha1.PodGroupPending, reason: ReasonWaitingForGroups, msgHas: "only 1 groups name it as their parent"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pg := &v1alpha1.PodGroup{ObjectMeta: metav1.ObjectMeta{Name: "serve", Generation: 3}}
			st := ComputeComposite(pg, tc.min, tc.children, now)
			if st.Phase != tc.phase || st.Scheduled != tc.scheduled {
				t.Errorf("phase %s, scheduled %d; want %s, %d", st.Phase, st.Scheduled, tc.phase, tc.scheduled)
			}
			c := meta.FindStatusCondition(st.Conditions, ConditionScheduled)
			if c == nil || c.Reason != tc.reason || !strings.Contains(c.Message, tc.msgHas) || c.ObservedGeneration != 3 {
				t.Errorf("Scheduled condition %+v; want reason %s, message with %q", c, tc.reason, tc.msgHas)
			}
			if started := !st.ScheduleStartTime.IsZero(); started != tc.startsTime {
				t.Errorf("scheduleStartTime set %v, want %v", started, tc.startsTime)
			}
		})
	}
}
