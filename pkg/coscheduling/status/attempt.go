package status

import (
	"time"

	"github.com/custom-scheduler/custom-scheduler/pkg/coscheduling/gang"
	"github.com/custom-scheduler/custom-scheduler/pkg/coscheduling/podgroup"
)

// AttemptOf is what the status says of a gang's state (nil: none is tracked); ended, ended's message
// are how the last reservation of a gang whose state was dropped ended; a held reservation ends
// reservationTimeout after it started at the latest.
func AttemptOf(g *gang.Gang, ended, endMessage string, reservationTimeout time.Duration) Attempt {
	if g == nil {
		return Attempt{ReservationEnded: ended, ReservedMessage: endMessage}
	}
	a := Attempt{Waiting: g.InProgress(), Counted: len(g.Members), AtPermit: len(g.Waiting), Reason: g.Outcome.Reason, Message: g.Outcome.Message, BackoffUntil: g.BackoffUntil}
	if f := g.Feasibility; a.Reason == podgroup.ReasonGangInfeasible && f != nil && !f.Feasible {
		a.Shortfall = f.Shortfall
	}
	if g.Placement != nil {
		a.PlacementLevel, a.PlacementMessage = g.Placement.Level, g.Placement.Message
	}
	if r := &g.Reserve; r.Held() {
		a.Reserved, a.ReservedMessage, a.ReservedUntil = true, r.Plan.Message, r.Since.Add(reservationTimeout)
	} else if r.Ended != "" {
		a.ReservationEnded, a.ReservedMessage = r.Ended, r.EndMessage
	}
	return a
}
