package gang

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/custom-scheduler/custom-scheduler/pkg/coscheduling/gangfit"
	"github.com/custom-scheduler/custom-scheduler/pkg/coscheduling/internal/gangtest"
	resv "github.com/custom-scheduler/custom-scheduler/pkg/coscheduling/reservation"
)

// TestReservationStatus is a row per member of a gang that holds a reservation or not: nominated by
// it, not nominated, no reservation held (waiting for one, or none).
func TestReservationStatus(t *testing.T) {
	held := Reservation{State: resv.State{Phase: resv.Held, Since: t0}, Plan: gangfit.ReservationPlan{Message: "holds 4 CPU on a"}, Node: map[types.UID]string{"m0": "a"}}
	waiting := Reservation{State: resv.State{Phase: resv.Waiting, WaitingSince: t0}, Node: map[types.UID]string{"m0": "a"}}
	const msg = "reservation: PodGroup ns/g holds 4 CPU on a since 2026-01-01T00:00:00Z, until that room is free"
	for _, tc := range []struct {
		name     string
		r        Reservation
		uid      types.UID
		wantNode string
		wantMsg  string
		wantHeld bool
	}{
		{"a member the reservation nominates", held, "m0", "a", msg, true},
		{"a member it does not nominate: the status alone", held, "m1", "", msg, true},
		{"a gang waiting for room holds none", waiting, "m0", "", "", false},
		{"no reservation", Reservation{}, "m0", "", "", false},
	} {
		node, got, ok := tc.r.Status(tc.uid, "ns/g")
		if node != tc.wantNode || got != tc.wantMsg || ok != tc.wantHeld {
			t.Errorf("%s: Status = %q, %q, %v; want %q, %q, %v", tc.name, node, got, ok, tc.wantNode, tc.wantMsg, tc.wantHeld)
		}
	}
}

func TestReservedMessage(t *testing.T) {
	want := "PodGroup ns/g holds 4 CPU on a; pods of priority 100 or lower are kept off it, and go where they fit beside it"
	if got := ReservedMessage("ns/g", gangfit.ReservationPlan{Message: "holds 4 CPU on a"}, 100); got != want {
		t.Errorf("ReservedMessage = %q, want %q", got, want)
	}
}

// TestReservationEnd: an end clears every member's nomination but those a preemption made (kept),
// and its event names the reason and the machine's message.
func TestReservationEnd(t *testing.T) {
	m0, m1, m2 := gangtest.Member("m0", "g", "1"), gangtest.Member("m1", "g", "1"), gangtest.Member("m2", "g", "1")
	for _, tc := range []struct {
		name string
		keep map[types.UID]bool
		want []string
	}{
		{"nothing kept: all cleared", nil, []string{"m0", "m1", "m2"}},
		{"a preemption's nominations kept", map[types.UID]bool{m0.UID: true, m2.UID: true}, []string{"m1"}},
		{"all kept: none cleared", map[types.UID]bool{m0.UID: true, m1.UID: true, m2.UID: true}, []string{}},
	} {
		got := Unkept([]*v1.Pod{m0, m1, m2}, tc.keep)
		if diff := cmp.Diff(tc.want, names(got)); diff != "" || (len(tc.want) == 0) != (got == nil) {
			t.Errorf("%s: Unkept (-want,+got):\n%s (got %#v)", tc.name, diff, got)
		}
	}
	d := ReservationDone{End: "Timeout", EndMessage: "held 10m0s"}
	if got, want := d.EndedMessage("ns/g"), "PodGroup ns/g holds its room no more (Timeout): held 10m0s"; got != want {
		t.Errorf("EndedMessage = %q, want %q", got, want)
	}
}
