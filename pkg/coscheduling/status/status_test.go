package status

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	st "k8s.io/kubernetes/pkg/scheduler/testing"
	"k8s.io/utils/ptr"

	"github.com/custom-scheduler/custom-scheduler/pkg/apis/scheduling/v1alpha1"
	"github.com/custom-scheduler/custom-scheduler/pkg/coscheduling/podgroup"
	resv "github.com/custom-scheduler/custom-scheduler/pkg/coscheduling/reservation"
)

func makePG(ns, name string, minMember int32) *v1alpha1.PodGroup {
	return &v1alpha1.PodGroup{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Spec: v1alpha1.PodGroupSpec{MinMember: minMember}}
}

func member(name, group string) *v1.Pod {
	return st.MakePod().Namespace("ns").Name(name).UID(name).SchedulerName("test").Label(v1alpha1.PodGroupLabel, group).Obj()
}

func terminating(p *v1.Pod) *v1.Pod {
	p.DeletionTimestamp = &metav1.Time{Time: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	return p
}

func TestComputeStatus(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	pg := makePG("ns", "g", 2)
	withPhase := func(name, nodeName string, phase v1.PodPhase) *v1.Pod {
		p := member(name, "g")
		p.Spec.NodeName = nodeName
		p.Status.Phase = phase
		return p
	}
	cases := []struct {
		name       string
		pods       []*v1.Pod
		attempting bool
		counted    int
		waiting    int32
		want       v1alpha1.PodGroupPhase
		scheduled  int32
		reason     string
		minMember  int32 // 2 unless set
	}{
		{name: "no pods", want: v1alpha1.PodGroupPending, reason: podgroup.ReasonWaitingForMembers},
		{name: "one of two", pods: []*v1.Pod{withPhase("a", "", v1.PodPending)}, want: v1alpha1.PodGroupPending, reason: podgroup.ReasonWaitingForMembers},
		{name: "all exist, none placed", pods: []*v1.Pod{withPhase("a", "", v1.PodPending), withPhase("b", "", v1.PodPending)}, want: v1alpha1.PodGroupPreScheduling, reason: ReasonPending},
		{name: "members waiting at Permit", pods: []*v1.Pod{withPhase("a", "", v1.PodPending), withPhase("b", "", v1.PodPending)}, attempting: true, counted: 1, waiting: 1, want: v1alpha1.PodGroupScheduling, reason: podgroup.ReasonWaitingForQuorum},
		{name: "one bound, one waiting at Permit for a third", pods: []*v1.Pod{withPhase("a", "n", v1.PodPending), withPhase("b", "", v1.PodPending), withPhase("c", "", v1.PodPending)}, attempting: true, counted: 2, waiting: 1,
			want: v1alpha1.PodGroupScheduling, scheduled: 1, reason: podgroup.ReasonWaitingForQuorum, minMember: 3},
		{name: "bound", pods: []*v1.Pod{withPhase("a", "n", v1.PodPending), withPhase("b", "n", v1.PodPending)}, want: v1alpha1.PodGroupScheduled, scheduled: 2, reason: podgroup.ReasonQuorumReached},
		{name: "running and one finished", pods: []*v1.Pod{withPhase("a", "n", v1.PodRunning), withPhase("b", "n", v1.PodSucceeded)}, want: v1alpha1.PodGroupRunning, scheduled: 1, reason: podgroup.ReasonQuorumReached},
		{name: "finished", pods: []*v1.Pod{withPhase("a", "n", v1.PodSucceeded), withPhase("b", "n", v1.PodSucceeded)}, want: v1alpha1.PodGroupFinished, reason: podgroup.ReasonQuorumReached},
		{name: "failed", pods: []*v1.Pod{withPhase("a", "n", v1.PodFailed), withPhase("b", "n", v1.PodRunning)}, want: v1alpha1.PodGroupFailed, scheduled: 1, reason: podgroup.ReasonBelowQuorum},
		{name: "terminating members are not scheduled", pods: []*v1.Pod{withPhase("a", "n", v1.PodRunning), terminating(withPhase("b", "n", v1.PodRunning))},
			want: v1alpha1.PodGroupScheduling, scheduled: 1, reason: podgroup.ReasonBelowQuorum},
		{name: "a restarted job's new pods beside the old run's terminating ones", pods: []*v1.Pod{terminating(withPhase("a", "n", v1.PodRunning)), terminating(withPhase("b", "n", v1.PodRunning)),
			withPhase("c", "", v1.PodPending), withPhase("d", "", v1.PodPending)}, want: v1alpha1.PodGroupPreScheduling, reason: ReasonPending},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			pg := pg
			if tc.minMember != 0 {
				pg = makePG("ns", "g", tc.minMember)
			}
			got := ComputeStatus(pg, tc.pods, Attempt{Waiting: tc.attempting, Counted: tc.counted, AtPermit: int(tc.waiting)}, now)
			if got.Waiting != tc.waiting {
				t.Errorf("waiting = %d, want %d", got.Waiting, tc.waiting)
			}
			if diff := cmp.Diff(tc.want, got.Phase); diff != "" {
				t.Errorf("phase (-want,+got): %s", diff)
			}
			if got.Scheduled != tc.scheduled {
				t.Errorf("scheduled = %d, want %d", got.Scheduled, tc.scheduled)
			}
			if c := meta.FindStatusCondition(got.Conditions, ConditionScheduled); c == nil || c.Reason != tc.reason || c.Message == "" {
				t.Errorf("Scheduled condition = %+v, want reason %s with a message", c, tc.reason)
			}
			started := tc.want != v1alpha1.PodGroupPending && tc.want != v1alpha1.PodGroupPreScheduling
			if got.ScheduleStartTime.IsZero() == started {
				t.Errorf("scheduleStartTime = %v, want set=%v", got.ScheduleStartTime, started)
			}
		})
	}
}

// TestGroupPods: the status counts a group's finished pods (from the finished informer) and live pods
// (from the scheduler's informer), a member caught in both once, as finished, and only this profile's.
func TestGroupPods(t *testing.T) {
	pod := func(name string, phase v1.PodPhase) *v1.Pod {
		p := member(name, "g")
		p.Spec.SchedulerName = "custom"
		p.Status.Phase = phase
		return p
	}
	running := pod("a", v1.PodRunning)
	done := running.DeepCopy()
	done.Status.Phase = v1.PodSucceeded
	other := pod("b", v1.PodRunning)
	failed := pod("c", v1.PodFailed)
	foreign := pod("d", v1.PodRunning)
	foreign.Spec.SchedulerName = "default-scheduler"
	got := GroupPods("custom", []interface{}{done, failed}, []interface{}{running, other, foreign})
	var names []string
	for _, p := range got {
		names = append(names, p.Name+"="+string(p.Status.Phase))
	}
	if diff := cmp.Diff([]string{"a=Succeeded", "c=Failed", "b=Running"}, names); diff != "" {
		t.Errorf("groupPods (-want,+got): %s", diff)
	}
	if got := GroupPods("custom", nil, nil); len(got) != 0 {
		t.Errorf("groupPods of nothing = %v", got)
	}
}

// TestReservedConditionNobodyHolds: a Reserved condition left True that this process does not hold
// (a previous leader's, or one whose gang state went with its last member) turns False once the gang
// is placed or falls below minMember, and is left alone otherwise (a new leader may still adopt it).
func TestReservedConditionNobodyHolds(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	bound := func(name string, phase v1.PodPhase) *v1.Pod {
		p := member(name, "g")
		p.Spec.NodeName, p.Status.Phase = "n", phase
		return p
	}
	pending := func(name string) *v1.Pod { return member(name, "g") }
	cases := []struct {
		name       string
		pods       []*v1.Pod
		attempt    Attempt
		leftTrue   bool
		minMember  int32                  // 0: 2
		wantStatus metav1.ConditionStatus // "" when no condition is shown
		wantReason string
	}{
		{name: "no condition left, no reservation here", pods: []*v1.Pod{pending("a")}},
		{name: "left True, every member gone", leftTrue: true, wantStatus: metav1.ConditionFalse, wantReason: resv.EndBelowMinMember},
		{name: "left True, one of two live", leftTrue: true, pods: []*v1.Pod{pending("a")}, wantStatus: metav1.ConditionFalse, wantReason: resv.EndBelowMinMember},
		// With no live member bound the run has ended: b's success counts for nothing.
		{name: "left True, one live and one succeeded of a run that ended", leftTrue: true, pods: []*v1.Pod{pending("a"), bound("b", v1.PodSucceeded)},
			wantStatus: metav1.ConditionFalse, wantReason: resv.EndBelowMinMember},
		{name: "left True, one live, one bound and one of their run succeeded", leftTrue: true, pods: []*v1.Pod{pending("a"), bound("b", v1.PodSucceeded), bound("c", v1.PodRunning)},
			minMember: 3, wantStatus: metav1.ConditionTrue, wantReason: podgroup.ReasonRoomHeld},
		{name: "left True, two live and unplaced (a new leader may adopt it)", leftTrue: true, pods: []*v1.Pod{pending("a"), pending("b")},
			wantStatus: metav1.ConditionTrue, wantReason: podgroup.ReasonRoomHeld},
		{name: "left True, placed", leftTrue: true, pods: []*v1.Pod{bound("a", v1.PodPending), bound("b", v1.PodPending)},
			wantStatus: metav1.ConditionFalse, wantReason: podgroup.ReasonQuorumReached},
		{name: "held here, below minMember until the step ends it", leftTrue: true, pods: []*v1.Pod{pending("a")},
			attempt: Attempt{Reserved: true, ReservedMessage: "holds room"}, wantStatus: metav1.ConditionTrue, wantReason: podgroup.ReasonRoomHeld},
		{name: "ended here", leftTrue: true, attempt: Attempt{ReservationEnded: resv.EndTimedOut, ReservedMessage: "timed out"},
			wantStatus: metav1.ConditionFalse, wantReason: resv.EndTimedOut},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			pg := makePG("ns", "g", max(tc.minMember, 2))
			if tc.leftTrue {
				pg.Status.Conditions = []metav1.Condition{{Type: ConditionReserved, Status: metav1.ConditionTrue, Reason: podgroup.ReasonRoomHeld,
					Message: "holds room for 2 members on 2 nodes", LastTransitionTime: metav1.NewTime(now.Add(-time.Minute))}}
			}
			got := meta.FindStatusCondition(ComputeStatus(pg, tc.pods, tc.attempt, now).Conditions, ConditionReserved)
			switch {
			case tc.wantStatus == "" && got != nil:
				t.Errorf("Reserved condition = %+v, want none", got)
			case tc.wantStatus != "" && (got == nil || got.Status != tc.wantStatus || got.Reason != tc.wantReason):
				t.Errorf("Reserved condition = %+v, want %s with reason %s", got, tc.wantStatus, tc.wantReason)
			}
		})
	}
}

// TestStaleReservation: a group left without pods while its status shows a reservation (its pods all
// deleted while it held room) gets the condition ended once reservedUntil has passed by the grace,
// and is looked at again then; one this profile holds, or none shown, is left alone.
func TestStaleReservation(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	shown := func(status metav1.ConditionStatus, until *time.Time) *v1alpha1.PodGroup {
		pg := makePG("ns", "g", 2)
		pg.Status.Conditions = []metav1.Condition{{Type: ConditionReserved, Status: status, Reason: podgroup.ReasonRoomHeld}}
		if until != nil {
			pg.Status.ReservedUntil = ptr.To(metav1.NewTime(*until))
		}
		return pg
	}
	at := func(d time.Duration) *time.Time { t := now.Add(d); return &t }
	cases := []struct {
		name        string
		pg          *v1alpha1.PodGroup
		held        bool
		wantStale   bool
		wantRecheck time.Duration
	}{
		{name: "no condition", pg: makePG("ns", "g", 2)},
		{name: "ended already", pg: shown(metav1.ConditionFalse, at(-time.Minute))},
		{name: "held by this profile", pg: shown(metav1.ConditionTrue, at(-time.Minute)), held: true},
		{name: "until not passed: look again at until plus the grace", pg: shown(metav1.ConditionTrue, at(3*time.Second)), wantRecheck: 3*time.Second + staleReservationGrace},
		{name: "within the grace", pg: shown(metav1.ConditionTrue, at(-time.Second)), wantRecheck: staleReservationGrace - time.Second},
		{name: "past until and the grace: ended", pg: shown(metav1.ConditionTrue, at(-time.Minute)), wantStale: true},
		{name: "no until shown: ended", pg: shown(metav1.ConditionTrue, nil), wantStale: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			stale, recheck := staleReservation(tc.pg, tc.held, now)
			if stale != tc.wantStale || recheck != tc.wantRecheck {
				t.Errorf("staleReservation = (%v, %v), want (%v, %v)", stale, recheck, tc.wantStale, tc.wantRecheck)
			}
		})
	}
}
