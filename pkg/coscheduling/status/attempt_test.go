package status

import (
	"testing"

	"github.com/custom-scheduler/custom-scheduler/pkg/coscheduling/gang"
	"github.com/custom-scheduler/custom-scheduler/pkg/coscheduling/gangfit"
	resv "github.com/custom-scheduler/custom-scheduler/pkg/coscheduling/reservation"
)

func TestAttemptOf(t *testing.T) {
	held := gang.New("ns", "g", "uid")
	held.CountBound("a")
	held.SetOutcome("Preempting", "preempting 1 pod")
	held.Placement = &gangfit.Placement{Level: gangfit.LevelRequired, Message: "rack r1"}
	held.Reserve.Phase, held.Reserve.Plan = resv.Held, gangfit.ReservationPlan{Message: "holds 2 nodes"}
	ended := gang.New("ns", "g", "uid")
	ended.Reserve.Ended, ended.Reserve.EndMessage = resv.EndTimedOut, "held 10m"
	for _, tc := range []struct {
		name string
		g    *gang.Gang
		want Attempt
	}{
		{"no state, no reservation ended", nil, Attempt{}},
		{"no state, its last reservation ended", nil, Attempt{ReservationEnded: resv.EndNoRoom, ReservedMessage: "gone"}},
		{"a gang holding a reservation", held, Attempt{Counted: 1, Reason: "Preempting", Message: "preempting 1 pod",
			PlacementLevel: gangfit.LevelRequired, PlacementMessage: "rack r1", Reserved: true, ReservedMessage: "holds 2 nodes"}},
		{"a gang whose reservation ended", ended, Attempt{ReservationEnded: resv.EndTimedOut, ReservedMessage: "held 10m"}},
	} {
		endedReason, endedMessage := "", ""
		if tc.want.ReservationEnded == resv.EndNoRoom {
			endedReason, endedMessage = resv.EndNoRoom, "gone"
		}
		if got := AttemptOf(tc.g, endedReason, endedMessage); got != tc.want {
			t.Errorf("%s: AttemptOf = %+v, want %+v", tc.name, got, tc.want)
		}
	}
}
