package gang

import (
	"sync"

	"github.com/custom-scheduler/custom-scheduler/pkg/coscheduling/gangfit"
	resv "github.com/custom-scheduler/custom-scheduler/pkg/coscheduling/reservation"
	"k8s.io/apimachinery/pkg/types"
)

// ReserveHooks are what the owner of the gangs does around a member's reservation steps (see
// ReserveUnder). Under its lock: Queue is the reservation order for the gang (see Registry.QueueFor);
// Applied applies a step's effects to the owner's state (the timer; the gauges at an end) and returns
// what is left; Adopted keeps the gauges of a previous leader's reservation held here now; Planned
// marks the held room changed once a plan was applied (started: a reservation started). With the lock
// released: Finish does what steps left, in order.
type ReserveHooks struct {
	Queue   func(g *Gang) func(prio int32) (others int, ahead bool)
	Applied func(g *Gang, e resv.Effects) ReservationDone
	Adopted func()
	Planned func(started bool)
	Finish  func(done []ReservationDone)
}

// ReserveUnder runs a member's reservation steps as DecideUnder runs PreFilter's, on the gang gangFor
// returns: ReserveRoom under mu (adopt, no room, and what to plan), each step applied there; what they
// left is finished with mu released, before any plan (an end clears nominations a plan would count).
// Then, when the machine asks for a plan, PlanRoom runs with mu released (it reads every pod of every
// node) and Planned under mu again, its step applied there and finished after. It returns the gang
// and the steps' outcome.
func ReserveUnder(mu sync.Locker, gangFor func() *Gang, in ReserveIn, h ReserveHooks) (*Gang, ReserveOut) {
	mu.Lock()
	g := gangFor()
	refusals := g.DeviceRefusals(in.Now)
	in.Queue = h.Queue(g)
	out := g.ReserveRoom(in)
	done := make([]ReservationDone, 0, len(out.Steps))
	for _, e := range out.Steps {
		done = append(done, h.Applied(g, e))
	}
	if out.Adopted {
		h.Adopted()
	}
	mu.Unlock()
	h.Finish(done)
	if out.Room == nil {
		return g, out
	}
	in.Devices = in.refusing(refusals)
	p := PlanRoom(in, *out.Room)
	mu.Lock()
	g.Planned(in, p, &out)
	d := h.Applied(g, out.Last())
	h.Planned(out.Last().Start)
	mu.Unlock()
	h.Finish([]ReservationDone{d})
	return g, out
}

// refusing is the reservation's device model giving up the out-of-time relaxation on the nodes whose
// devices the real filter refused the gang's members (refusals, as the gang holds them) or its job's
// (see DeviceRefusals), as its checks do.
func (in ReserveIn) refusing(refusals map[string]DeviceRefusal) gangfit.DeviceSource {
	r, ok := in.Devices.(gangfit.RefusingDevices)
	if !ok || len(refusals) == 0 && (in.Job == nil || len(in.Job.RefusedDevices) == 0) {
		return in.Devices
	}
	var valid map[string][]types.UID
	if in.Job != nil {
		valid = in.Job.RefusedDevices
	} else if nodes, err := in.Nodes(); err == nil {
		valid = ValidRefusals(refusals, Generations(nodes))
	}
	return r.Refusing(valid, false)
}
