package gang

import (
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	st "k8s.io/kubernetes/pkg/scheduler/testing"
)

// TestPriority: a gang has one priority as a preemptor, the lowest of its members', whichever member's
// PostFilter runs (#48).
func TestPriority(t *testing.T) {
	p := func(name string, prio int32) *v1.Pod { return st.MakePod().Name(name).UID(name).Priority(prio).Obj() }
	hi, lo, mid := p("hi", 1000), p("lo", 10), p("mid", 500)
	cases := []struct {
		name      string
		pod       *v1.Pod
		members   []*v1.Pod
		want      int32
		wantMixed bool
	}{
		{"one priority", hi, []*v1.Pod{hi, p("hi2", 1000)}, 1000, false},
		{"the high member runs PostFilter: the low one's", hi, []*v1.Pod{hi, lo}, 10, true},
		{"the low member runs PostFilter: the same", lo, []*v1.Pod{hi, lo}, 10, true},
		{"three priorities: the lowest", mid, []*v1.Pod{hi, mid, lo}, 10, true},
		{"the member alone (not listed yet)", mid, nil, 500, false},
	}
	for _, tc := range cases {
		got, mixed := Priority(tc.pod, tc.members)
		if got != tc.want || mixed != tc.wantMixed {
			t.Errorf("%s: Priority = %d, %v, want %d, %v", tc.name, got, mixed, tc.want, tc.wantMixed)
		}
	}
	if msg := MixedPrioritiesMessage("ns/g", []*v1.Pod{hi, lo}, 10); !strings.Contains(msg, "priorities 10 to 1000") || !strings.Contains(msg, "preempts only pods below 10") {
		t.Errorf("MixedPrioritiesMessage = %q", msg)
	}
}
