package gang

import (
	"testing"

	"k8s.io/apimachinery/pkg/types"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/custom-scheduler/custom-scheduler/pkg/coscheduling/gangfit"
	"github.com/custom-scheduler/custom-scheduler/pkg/coscheduling/internal/gangtest"
	resv "github.com/custom-scheduler/custom-scheduler/pkg/coscheduling/reservation"
)

// nominatedNode is the node a PostFilter result nominates ("" for none, "<nil>" for no result).
func nominatedNode(res *fwk.PostFilterResult) string {
	if res == nil || res.NominatingInfo == nil {
		return "<nil>"
	}
	return res.NominatedNodeName
}

// TestReservationPostFilter is a row per member of a gang that holds a reservation or not: the
// member's result and status.
func TestReservationPostFilter(t *testing.T) {
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
		{"a member it does not nominate: the status alone", held, "m1", "<nil>", msg, true},
		{"a gang waiting for room holds none", waiting, "m0", "<nil>", "", false},
		{"no reservation", Reservation{}, "m0", "<nil>", "", false},
	} {
		res, st, ok := tc.r.PostFilter(tc.uid, "ns/g")
		if nominatedNode(res) != tc.wantNode || ok != tc.wantHeld || (st == nil) == tc.wantHeld {
			t.Errorf("%s: PostFilter = %v, %v, %v; want node %q, held %v", tc.name, nominatedNode(res), st, ok, tc.wantNode, tc.wantHeld)
		}
		if st != nil && (st.Code() != fwk.Unschedulable || st.Message() != tc.wantMsg) {
			t.Errorf("%s: status %v, want Unschedulable %q", tc.name, st, tc.wantMsg)
		}
	}
}

// TestNominatedResult: a preempting member is nominated where the plan places it, and gets no result
// where it places it nowhere.
func TestNominatedResult(t *testing.T) {
	m0, m1 := gangtest.Member("m0", "g", "1"), gangtest.Member("m1", "g", "1")
	assignment := []gangfit.Nomination{{Pod: m0, Node: "a"}}
	for _, tc := range []struct {
		name string
		uid  types.UID
		want string
	}{
		{"placed", m0.UID, "a"},
		{"placed nowhere", m1.UID, "<nil>"},
	} {
		if got := nominatedNode(NominatedResult(assignment, tc.uid)); got != tc.want {
			t.Errorf("%s: NominatedResult nominates %q, want %q", tc.name, got, tc.want)
		}
	}
}
