package effects

import (
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	st "k8s.io/kubernetes/pkg/scheduler/testing"
)

// TestClearsNomination: a gang's preemption clears the nominations of lower-priority pods on its
// nodes, never those of the members it nominates, whatever their own priority (#48).
func TestClearsNomination(t *testing.T) {
	p := func(uid string, prio int32) *v1.Pod { return st.MakePod().Name(uid).UID(uid).Priority(prio).Obj() }
	own := map[types.UID]bool{"m1": true}
	cases := []struct {
		name string
		pod  *v1.Pod
		want bool
	}{
		{"a lower-priority stranger", p("x", 10), true},
		{"a stranger of the gang's priority", p("x", 100), false},
		{"a higher-priority stranger", p("x", 1000), false},
		{"the gang's own lower-priority member", p("m1", 10), false},
	}
	for _, tc := range cases {
		if got := ClearsNomination(tc.pod, 100, own); got != tc.want {
			t.Errorf("%s: ClearsNomination = %v, want %v", tc.name, got, tc.want)
		}
	}
}
