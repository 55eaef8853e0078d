package metrics

import "testing"

// TestLeftReason: an attempt a member left is counted as timed out only when it timed out.
func TestLeftReason(t *testing.T) {
	for _, tc := range []struct {
		timedOut bool
		want     string
	}{{true, ReasonTimeout}, {false, ReasonMemberRejected}} {
		if got := LeftReason(tc.timedOut); got != tc.want {
			t.Errorf("LeftReason(%v) = %s, want %s", tc.timedOut, got, tc.want)
		}
	}
}
