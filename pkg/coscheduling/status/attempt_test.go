package status

import (
	"testing"
	"time"

	"github.com/custom-scheduler/custom-scheduler/pkg/apis/scheduling/v1alpha1"
	"github.com/custom-scheduler/custom-scheduler/pkg/coscheduling/gang"
	"github.com/custom-scheduler/custom-scheduler/pkg/coscheduling/gangfit"
	"github.com/custom-scheduler/custom-scheduler/pkg/coscheduling/podgroup"
	resv "github.com/custom-scheduler/custom-scheduler/pkg/coscheduling/reservation"
)

func TestAttemptOf(t *testing.T) {
	held := gang.New("ns", "g", "uid")
	held.CountBound("a")
	held.SetOutcome("Preempting", "preempting 1 pod")
	held.Placement = &gangfit.Placement{Level: gangfit.LevelRequired, Message: "rack r1"}
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	held.Reserve.Phase, held.Reserve.Plan, held.Reserve.Since = resv.Held, gangfit.ReservationPlan{Message: "holds 2 nodes"}, t0
	ended := gang.New("ns", "g", "uid")
	ended.Reserve.Ended, ended.Reserve.EndMessage = resv.EndTimedOut, "held 10m"
	ended.BackoffUntil = t0.Add(time.Second)
	short := &v1alpha1.PodGroupShortfall{Reason: v1alpha1.ShortfallNodeRoom, Needed: 2}
	infeasible := gang.New("ns", "g", "uid")
	infeasible.Feasibility = &gangfit.Result{Message: "no room", Shortfall: short}
	infeasible.SetOutcome(podgroup.ReasonGangInfeasible, "no room")
	preempting := gang.New("ns", "g", "uid")
	preempting.Feasibility = &gangfit.Result{Message: "no room", Shortfall: short}
	preempting.SetOutcome(podgroup.ReasonPreempting, "preempting")
	for _, tc := range []struct {
		name string
		g    *gang.Gang
		want Attempt
	}{
		{"no state, no reservation ended", nil, Attempt{}},
		{"no state, its last reservation ended", nil, Attempt{ReservationEnded: resv.EndNoRoom, ReservedMessage: "gone"}},
		{"a gang holding a reservation", held, Attempt{Counted: 1, Reason: "Preempting", Message: "preempting 1 pod",
			PlacementLevel: gangfit.LevelRequired, PlacementMessage: "rack r1", Reserved: true, ReservedMessage: "holds 2 nodes", ReservedUntil: t0.Add(5 * time.Minute)}},
		{"a gang whose reservation ended, backing off", ended, Attempt{ReservationEnded: resv.EndTimedOut, ReservedMessage: "held 10m", BackoffUntil: t0.Add(time.Second)}},
		{"an infeasible gang: its numbers", infeasible, Attempt{Reason: podgroup.ReasonGangInfeasible, Message: "no room", Shortfall: short}},
		{"a preempting gang: no numbers", preempting, Attempt{Reason: podgroup.ReasonPreempting, Message: "preempting"}},
	} {
		endedReason, endedMessage := "", ""
		if tc.want.ReservationEnded == resv.EndNoRoom {
			endedReason, endedMessage = resv.EndNoRoom, "gone"
		}
		if got := AttemptOf(tc.g, endedReason, endedMessage, 5*time.Minute); got != tc.want {
			t.Errorf("%s: AttemptOf = %+v, want %+v", tc.name, got, tc.want)
		}
	}
}
