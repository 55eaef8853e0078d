package gang

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestPreemptDecides: a preemption that chose victims, waits for them or failed a read decides the
// member's PostFilter; one that is not eligible or not helpful leaves it to reserve.
func TestPreemptDecides(t *testing.T) {
	for result, want := range map[string]bool{
		PreemptVictims: true, PreemptWaiting: true, PreemptError: true,
		PreemptNotEligible: false, PreemptNotHelpful: false,
	} {
		if got := PreemptDecides(result); got != want {
			t.Errorf("PreemptDecides(%q) = %v, want %v", result, got, want)
		}
		out := PreemptOut{Result: result}
		if got := out.Stopped(); got != (result == PreemptNotEligible || result == PreemptNotHelpful) {
			t.Errorf("Stopped(%q) = %v", result, got)
		}
	}
}

// TestUnnominated: whose nominations a preemption that cannot place the gang drops: none unless asked
// and no reservation keeps them; a job's own group's only.
func TestUnnominated(t *testing.T) {
	pod := func(name string) *v1.Pod { return &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name}} }
	members := []*v1.Pod{pod("a"), pod("b")}
	own := []*v1.Pod{pod("a")}
	cases := []struct {
		name     string
		drop     bool
		held     bool
		job      bool
		want     []*v1.Pod
		wantDrop bool
		// wantAsked: whether the reservation was asked about.
		wantAsked bool
	}{
		{name: "not asked"},
		{name: "kept by a reservation", drop: true, held: true, wantAsked: true},
		{name: "the gang's", drop: true, want: members, wantDrop: true, wantAsked: true},
		{name: "a job's own group's", drop: true, job: true, want: own, wantDrop: true, wantAsked: true},
	}
	for _, tc := range cases {
		out := PreemptOut{Result: PreemptNotHelpful, DropNominations: tc.drop}
		in := PreemptIn{Members: members}
		if tc.job {
			in.Job = &JobPreemption{Job: "ns/job"}
		}
		asked := false
		got, drop := out.Unnominated(in, func() bool { asked = true; return tc.held }, func() []*v1.Pod { return own })
		if drop != tc.wantDrop || asked != tc.wantAsked || !cmp.Equal(got, tc.want) {
			t.Errorf("%s: Unnominated = %v, %v (reservation asked %v); want %v, %v (%v)", tc.name, got, drop, asked, tc.want, tc.wantDrop, tc.wantAsked)
		}
	}
}
