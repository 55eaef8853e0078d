package devices

import (
	"testing"

	v1 "k8s.io/api/core/v1"
)

// TestClaimOrderWithoutSource: with no device model (a nil source) or none of the PodGroup's claims
// read, no claim order holds a member back, whatever its claims.
func TestClaimOrderWithoutSource(t *testing.T) {
	for _, tc := range []struct {
		name string
		s    *Source
		pod  *v1.Pod
	}{
		{name: "nil source", pod: inGroup("m0", "pg", podTemplateClaim("gpus", "group-gpus"), podTemplateClaim("gpu", "own-gpu"))},
		{name: "nil source, no group", pod: inGroup("m0", "")},
		{name: "PodGroup claims not read", s: &Source{}, pod: inGroup("m0", "pg", podTemplateClaim("gpus", "group-gpus"), podTemplateClaim("gpu", "own-gpu"))},
	} {
		if got := tc.s.ClaimOrder(tc.pod); got != "" {
			t.Errorf("%s: ClaimOrder = %q, want none", tc.name, got)
		}
	}
}
