package gang

import (
	"fmt"
	"sort"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	corev1helpers "k8s.io/component-helpers/scheduling/corev1"

	"github.com/custom-scheduler/custom-scheduler/pkg/coscheduling/gangfit"
	"github.com/custom-scheduler/custom-scheduler/pkg/coscheduling/podgroup"
	resv "github.com/custom-scheduler/custom-scheduler/pkg/coscheduling/reservation"
)

// The reservation's part of a gang's state: the machine's step (package reservation) applied to the
// gang, and what the plugin reads across all its gangs (the order, the gauges, the note for a pod kept
// off held room). The plugin arms the timer and does the I/O the effects ask for.

// StepReservation moves the gang's reservation on an event (see reservation.Step): at an end, the
// plan and its nodes are forgotten.
func (g *Gang) StepReservation(args resv.Args, in resv.Input) resv.Effects {
	r := &g.Reserve
	var e resv.Effects
	r.State, e = resv.Step(r.State, args, in)
	if e.End != "" {
		r.Plan, r.Node = gangfit.ReservationPlan{}, nil
	}
	return e
}

// Hold makes p the plan the gang holds: each member's node is where it is nominated.
func (r *Reservation) Hold(p gangfit.ReservationPlan) {
	r.Plan = p
	r.Node = make(map[types.UID]string, len(p.Assignment))
	for _, a := range p.Assignment {
		r.Node[a.Pod.UID] = a.Node
	}
}

// Adoptable is the plan a previous leader left, read from the members' nominations (the nodes they
// are nominated to and not bound), with the Reserved condition's message; ok is false when no member
// is nominated (nothing is left to adopt).
func Adoptable(members []*v1.Pod, message string) (p gangfit.ReservationPlan, ok bool) {
	for _, m := range members {
		if m.Spec.NodeName == "" && m.Status.NominatedNodeName != "" {
			p.Assignment = append(p.Assignment, gangfit.Nomination{Pod: m, Node: m.Status.NominatedNodeName})
		}
	}
	if len(p.Assignment) == 0 {
		return gangfit.ReservationPlan{}, false
	}
	p.OK, p.Message = true, message
	return p, true
}

// Queue counts the gangs other than self that hold a reservation, and reports whether one that may
// reserve and holds none goes before self, of priority prio (see reservation.Eligible and Before).
// Only gangs still trying count: one that fell below minMember or stopped trying blocks no one.
// O(gangs).
func Queue(gangs map[string]*Gang, self *Gang, args resv.Args, prio int32, now time.Time) (others int, ahead bool) {
	me := self.Reserve.State
	me.Prio = prio
	if me.Phase == resv.Idle {
		me.WaitingSince = now
	}
	for _, o := range gangs {
		if o == self {
			continue
		}
		switch {
		case o.Reserve.Held():
			others++
		case !ahead && resv.Eligible(o.Reserve.State, args, now) && resv.Before(o.Reserve.State, me):
			ahead = true
		}
	}
	return others, ahead
}

// WaitingBehind are the gangs other than self that wait for room in the order (namespace, name):
// when a reservation ends they take their turn.
func WaitingBehind(gangs map[string]*Gang, self *Gang) [][2]string {
	var out [][2]string
	for _, o := range gangs {
		if o != self && o.Reserve.Phase == resv.Waiting && o.Reserve.Lost == "" {
			out = append(out, [2]string{o.Namespace, o.Name})
		}
	}
	return out
}

// HeldTotals are the reservations held across gangs: how many, the CPU (milli) and memory (bytes)
// they hold, and the start of the oldest (zero when none).
type HeldTotals struct {
	Gangs       int
	MilliCPU    int64
	Memory      int64
	OldestSince time.Time
}

// Held sums the reservations held across gangs. O(gangs).
func Held(gangs map[string]*Gang) HeldTotals {
	var t HeldTotals
	for _, g := range gangs {
		if r := &g.Reserve; r.Held() {
			t.Gangs++
			t.MilliCPU += r.Plan.MilliCPU
			t.Memory += r.Plan.Memory
			if t.OldestSince.IsZero() || r.Since.Before(t.OldestSince) {
				t.OldestSince = r.Since
			}
		}
	}
	return t
}

// KeptOff names the reservations that keep pod off their room (those of its priority or more, not
// its own gang's), for its scheduling failure; empty when none does. O(gangs).
func KeptOff(gangs map[string]*Gang, pod *v1.Pod) string {
	prio := corev1helpers.PodPriority(pod)
	own, _ := podgroup.Of(pod)
	var notes []string
	for key, g := range gangs {
		r := &g.Reserve
		if !r.Held() || r.Prio < prio || (g.Namespace == pod.Namespace && g.Name == own) {
			continue
		}
		notes = append(notes, fmt.Sprintf("room on %s is held for PodGroup %s (a reservation since %s)", strings.Join(r.Plan.Nodes, ", "), key, r.Since.UTC().Format(time.RFC3339)))
	}
	sort.Strings(notes)
	return strings.Join(notes, "; ")
}
