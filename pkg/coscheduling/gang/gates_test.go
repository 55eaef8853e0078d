package gang

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/types"

	"github.com/custom-scheduler/custom-scheduler/pkg/coscheduling/podgroup"
)

// TestGates walks the gates through a pod's holds and releases, one step a row: a reason is reported
// once per episode, and a delayed report finds its episode only while it lasts.
func TestGates(t *testing.T) {
	var g Gates
	type step struct {
		name        string
		do          func() (Gate, bool)
		wantStarted bool
		wantEpisode uint64
		wantMessage string
	}
	var first Gate
	steps := []step{
		{name: "a first hold starts an episode", do: func() (Gate, bool) { return g.Hold("a", "WaitingForMembers", "1 of 3") },
			wantStarted: true, wantEpisode: 1, wantMessage: "1 of 3"},
		{name: "the same reason again: the same episode, the latest message", do: func() (Gate, bool) { return g.Hold("a", "WaitingForMembers", "2 of 3") },
			wantEpisode: 1, wantMessage: "2 of 3"},
		{name: "another pod: its own episode", do: func() (Gate, bool) { return g.Hold("b", "WaitingForMembers", "2 of 3") },
			wantStarted: true, wantEpisode: 2, wantMessage: "2 of 3"},
		{name: "another reason: a new episode", do: func() (Gate, bool) { return g.Hold("a", "PodGroupNotFound", "gone") },
			wantStarted: true, wantEpisode: 3, wantMessage: "gone"},
		{name: "released, then held for the same reason: a new episode", do: func() (Gate, bool) {
			g.Release("a")
			return g.Hold("a", "PodGroupNotFound", "gone again")
		}, wantStarted: true, wantEpisode: 4, wantMessage: "gone again"},
	}
	for _, s := range steps {
		gate, started := s.do()
		if started != s.wantStarted || gate.Episode != s.wantEpisode || gate.Message != s.wantMessage {
			t.Errorf("%s: %+v, started %v; want episode %d, %q, started %v", s.name, gate, started, s.wantEpisode, s.wantMessage, s.wantStarted)
		}
		if s.wantEpisode == 1 {
			first = gate
		}
	}
	if _, still := g.Still("a", first.Episode); still {
		t.Errorf("a's first episode is over, but Still finds it")
	}
	if gate, still := g.Still("a", 4); !still || gate.Message != "gone again" {
		t.Errorf("Still(a, 4) = %+v, %v; want the current gate", gate, still)
	}
	if g.Len() != 2 || !g.Held("b") {
		t.Errorf("Len = %d, Held(b) = %v; want 2, true", g.Len(), g.Held("b"))
	}
	for _, uid := range []types.UID{"a", "b"} {
		g.Release(uid)
	}
	if _, still := g.Still("b", 2); still || g.Len() != 0 || g.Held("a") {
		t.Errorf("after the releases: Len %d, Held(a) %v, Still(b) %v; want nothing held", g.Len(), g.Held("a"), still)
	}
}

// TestHoldBack: a member waits for its group's live pods, then for their claims from templates; the
// run's succeeded members count toward both.
func TestHoldBack(t *testing.T) {
	upTo := func(n int) func(int) int { return func(k int) int { return min(n, k) } }
	for _, tc := range []struct {
		name                    string
		want, credit            int
		existing, ready         int
		wantReason, wantMessage string
	}{
		{name: "all there, claims made", want: 3, existing: 3, ready: 3},
		{name: "one missing", want: 3, existing: 2, ready: 2, wantReason: podgroup.ReasonWaitingForMembers, wantMessage: "2 of minMember 3 live pods of PodGroup ns/g exist; the pod waits"},
		{name: "one succeeded counts", want: 3, credit: 1, existing: 2, ready: 2},
		{name: "short even with the succeeded", want: 4, credit: 1, existing: 2, ready: 2, wantReason: podgroup.ReasonWaitingForMembers, wantMessage: "2 of minMember 4 live pods of PodGroup ns/g exist (and 1 of its run succeeded)"},
		{name: "a claim not made", want: 3, existing: 3, ready: 2, wantReason: podgroup.ReasonWaitingForClaims, wantMessage: "2 of minMember 3 live pods of PodGroup ns/g have their ResourceClaims from templates made"},
	} {
		reason, msg := HoldBack("ns/g", tc.want, tc.credit, upTo(tc.existing), upTo(tc.ready))
		if reason != tc.wantReason || !strings.Contains(msg, tc.wantMessage) {
			t.Errorf("%s: %q %q, want %q containing %q", tc.name, reason, msg, tc.wantReason, tc.wantMessage)
		}
	}
}
