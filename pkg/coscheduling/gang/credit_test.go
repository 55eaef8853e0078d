package gang

import (
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/custom-scheduler/custom-scheduler/pkg/coscheduling/attempt"
)

// TestFinishedMemberCredit: the members of the run that succeeded (Credit) count toward the quorum in
// every step that decides it, and a pod the store still holds live after it succeeded counts once.
func TestFinishedMemberCredit(t *testing.T) {
	t.Run("Count and Confirmed add the credit; a pod counted both ways counts once", func(t *testing.T) {
		g := New("ns", "g", "")
		running := pod("running")
		running.Spec.NodeName = "n1"
		justSucceeded := pod("just-succeeded")
		justSucceeded.Spec.NodeName = "n2" // the store has not seen it finish yet
		g.CountBound(running.UID)
		g.CountBound(justSucceeded.UID)
		g.Credit = 2
		g.Succeeded = func(uid types.UID) bool { return uid == justSucceeded.UID }
		if got := g.Count(); got != 4 {
			t.Errorf("Count = %d, want 4 (the member set and the credit: an upper bound)", got)
		}
		if got := g.Confirmed([]*v1.Pod{running, justSucceeded}); got != 3 {
			t.Errorf("Confirmed = %d, want 3 (running, and 2 succeeded, one of them still live in the store)", got)
		}
	})

	cases := []struct {
		name    string
		credit  int
		store   int // Confirmed before the credit
		quorum  bool
		waiting int
	}{
		{name: "one running, two succeeded, the replacement reserved: the quorum of 4", credit: 2, store: 2, quorum: true},
		{name: "without the credit the replacement waits", credit: 0, store: 2, waiting: 1},
		{name: "one succeeded is not enough", credit: 1, store: 2, waiting: 1},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := New("ns", "g", "")
			g.CountBound("running")
			g.Credit = tc.credit
			r, _ := g.OnReserve("replacement", "", "n", t0, 4, time.Minute, counting(tc.store+tc.credit), backoff)
			if r.Verdict == attempt.VerdictRefuse {
				t.Fatalf("Reserve refused: %s", r.Message)
			}
			r = g.OnPermit(pod("replacement"), t0, 4, counting(tc.store+tc.credit), backoff)
			if got := g.Phase == attempt.PhaseQuorum; got != tc.quorum {
				t.Errorf("Permit: quorum %v (%s), want %v", got, r.Message, tc.quorum)
			}
			if len(g.Waiting) != tc.waiting {
				t.Errorf("%d waiting, want %d", len(g.Waiting), tc.waiting)
			}
		})
	}

	t.Run("a member that found no node: the credit makes the quorum reachable", func(t *testing.T) {
		g := withWaiting([]string{"a"})
		g.Attempt = gathering
		g.Credit = 2
		// minMember 4: a reserved, b and x exist and have no node yet; with 2 succeeded, a and b reach it.
		r := g.OnNoNode(pod("x"), t0.Add(time.Second), 4, 3, backoff, nil)
		if r.Failed() {
			t.Errorf("the attempt failed (%s), though a, b and the 2 succeeded reach the quorum", r.Message)
		}
		g = withWaiting([]string{"a"})
		g.Attempt = gathering
		if r := g.OnNoNode(pod("x"), t0.Add(time.Second), 4, 3, backoff, nil); !r.Failed() {
			t.Errorf("without the credit the attempt did not fail")
		}
	})
}
