package status

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/custom-scheduler/custom-scheduler/pkg/apis/scheduling/v1alpha1"
	"github.com/custom-scheduler/custom-scheduler/pkg/coscheduling/podgroup"
)

// TestShortfallStatus: the status carries the attempt's shortfall exactly while the Scheduled
// condition says GangInfeasible, and never a stale one.
func TestShortfallStatus(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	short := &v1alpha1.PodGroupShortfall{Reason: v1alpha1.ShortfallNodeRoom, Needed: 2, Placeable: 1, Unscheduled: 2, LargestFreeNode: "n1",
		Resources: []v1alpha1.ResourceShortfall{{Name: v1.ResourceCPU, Requested: resource.MustParse("12"), Free: resource.MustParse("8"),
			Member: resource.MustParse("6"), LargestFree: resource.MustParse("4")}}}
	pending := func(name string) *v1.Pod { return member(name, "g") }
	bound := func(name string) *v1.Pod { p := member(name, "g"); p.Spec.NodeName = "n1"; return p }
	cases := []struct {
		name    string
		pods    []*v1.Pod
		attempt Attempt
		stored  *v1alpha1.PodGroupShortfall
		want    *v1alpha1.PodGroupShortfall
	}{
		{name: "infeasible: the numbers", pods: []*v1.Pod{pending("a"), pending("b")},
			attempt: Attempt{Reason: podgroup.ReasonGangInfeasible, Message: "m", Shortfall: short}, want: short},
		{name: "infeasible without numbers (an older scheduler's outcome): none", pods: []*v1.Pod{pending("a"), pending("b")},
			attempt: Attempt{Reason: podgroup.ReasonGangInfeasible, Message: "m"}},
		{name: "preempting: the stored one goes", pods: []*v1.Pod{pending("a"), pending("b")},
			attempt: Attempt{Reason: podgroup.ReasonPreempting, Message: "m", Shortfall: short}, stored: short},
		{name: "members missing outrank the attempt", pods: []*v1.Pod{pending("a")},
			attempt: Attempt{Reason: podgroup.ReasonGangInfeasible, Message: "m", Shortfall: short}, stored: short},
		{name: "placed: none", pods: []*v1.Pod{bound("a"), bound("b")},
			attempt: Attempt{Reason: podgroup.ReasonGangInfeasible, Message: "m", Shortfall: short}, stored: short},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			pg := makePG("ns", "g", 2)
			pg.Status.Shortfall = tc.stored
			st := ComputeStatus(pg, tc.pods, tc.attempt, now)
			if diff := cmp.Diff(tc.want, st.Shortfall); diff != "" {
				t.Errorf("shortfall (-want,+got):\n%s", diff)
			}
			if st.Shortfall != nil && st.Shortfall == tc.attempt.Shortfall {
				t.Error("the status shares the scheduler's shortfall; it must be a copy")
			}
			// The writer skips a patch when statusEqual says nothing changed: it must see the shortfall.
			before := st
			before.Shortfall = tc.stored
			if statusEqual(st, before) != cmp.Equal(tc.want, tc.stored) {
				t.Errorf("statusEqual = %v with the shortfall %v stored and %v computed", statusEqual(st, before), tc.stored, tc.want)
			}
		})
	}
}

// TestShortfallPatch: the merge patch replaces a stored shortfall whole, so that none of an older
// one's fields survives, and removes it when there is none.
func TestShortfallPatch(t *testing.T) {
	cases := []struct {
		name string
		in   *v1alpha1.PodGroupShortfall
		want string
	}{
		{name: "none: null", want: `null`},
		{name: "only the counts: the rest null", in: &v1alpha1.PodGroupShortfall{Reason: v1alpha1.ShortfallTooFewMembers, Needed: 3, Unscheduled: 1},
			want: `{"domains":null,"largestFreeNode":null,"needed":3,"placeable":null,"reason":"TooFewMembers","resources":null,"topologyKey":null,"unscheduled":1}`},
		{name: "every field", in: &v1alpha1.PodGroupShortfall{Reason: v1alpha1.ShortfallTopologyDomain, Needed: 5, Placeable: 4, Unscheduled: 5, LargestFreeNode: "r1-0",
			TopologyKey: "rack", Domains: []v1alpha1.DomainShortfall{{Value: "r2", Placeable: 4}},
			Resources: []v1alpha1.ResourceShortfall{{Name: v1.ResourceCPU, Requested: resource.MustParse("15"), Free: resource.MustParse("40"), Member: resource.MustParse("3"), LargestFree: resource.MustParse("4")}}},
			want: `{"domains":[{"value":"r2","placeable":4}],"largestFreeNode":"r1-0","needed":5,"placeable":4,"reason":"TopologyDomain","resources":[{"name":"cpu","requested":"15","free":"40","member":"3","largestFree":"4"}],"topologyKey":"rack","unscheduled":5}`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := json.Marshal(shortfallPatch(tc.in))
			if err != nil {
				t.Fatal(err)
			}
			var gotV, wantV any
			if err := json.Unmarshal(got, &gotV); err != nil {
				t.Fatal(err)
			}
			if err := json.Unmarshal([]byte(tc.want), &wantV); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(wantV, gotV); diff != "" {
				t.Errorf("patch (-want,+got):\n%s", diff)
			}
		})
	}
}

// TestUntilStatus: backoffUntil is written while the gang backs off after a failed attempt, and
// reservedUntil while it holds a reservation; neither otherwise.
func TestUntilStatus(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	until := now.Add(90 * time.Second)
	pods := []*v1.Pod{member("a", "g"), member("b", "g")}
	cases := []struct {
		name                 string
		attempt              Attempt
		wantBackoff, wantRes bool
	}{
		{name: "rejected: the back-off's end", attempt: Attempt{Reason: podgroup.ReasonGangRejected, Message: "m", BackoffUntil: until}, wantBackoff: true},
		{name: "timed out: the back-off's end", attempt: Attempt{Reason: podgroup.ReasonGangTimedOut, Message: "m", BackoffUntil: until}, wantBackoff: true},
		{name: "infeasible: no back-off shown", attempt: Attempt{Reason: podgroup.ReasonGangInfeasible, Message: "m", BackoffUntil: until}},
		{name: "holding a reservation: its end", attempt: Attempt{Reason: podgroup.ReasonGangInfeasible, Message: "m", Reserved: true, ReservedMessage: "holds", ReservedUntil: until}, wantRes: true},
		{name: "a reservation ended: none", attempt: Attempt{Reason: podgroup.ReasonGangInfeasible, Message: "m", ReservationEnded: "NoRoom", ReservedMessage: "gone", ReservedUntil: until}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			st := ComputeStatus(makePG("ns", "g", 2), pods, tc.attempt, now)
			if (st.BackoffUntil != nil) != tc.wantBackoff || (st.BackoffUntil != nil && !st.BackoffUntil.Time.Equal(until)) {
				t.Errorf("backoffUntil = %v, want set %v (%v)", st.BackoffUntil, tc.wantBackoff, until)
			}
			if (st.ReservedUntil != nil) != tc.wantRes || (st.ReservedUntil != nil && !st.ReservedUntil.Time.Equal(until)) {
				t.Errorf("reservedUntil = %v, want set %v (%v)", st.ReservedUntil, tc.wantRes, until)
			}
			before := st
			before.BackoffUntil, before.ReservedUntil = nil, nil
			if statusEqual(st, before) == (tc.wantBackoff || tc.wantRes) {
				t.Error("statusEqual does not see the change")
			}
		})
	}
}
