package gangfit

import (
	"testing"

	v1 "k8s.io/api/core/v1"
	st "k8s.io/kubernetes/pkg/scheduler/testing"
)

func TestNodeGainedRoom(t *testing.T) {
	base := func() *st.NodeWrapper {
		return st.MakeNode().Name("n").Label("zone", "a").Capacity(map[v1.ResourceName]string{v1.ResourceCPU: "4", v1.ResourceMemory: "8Gi"})
	}
	taint := v1.Taint{Key: "k", Effect: v1.TaintEffectNoSchedule}
	for _, tc := range []struct {
		name     string
		old, new *v1.Node
		want     bool
	}{
		{"nothing changed", base().Obj(), base().Obj(), false},
		{"more CPU", base().Obj(), base().Capacity(map[v1.ResourceName]string{v1.ResourceCPU: "8", v1.ResourceMemory: "8Gi"}).Obj(), true},
		{"less CPU", base().Obj(), base().Capacity(map[v1.ResourceName]string{v1.ResourceCPU: "2", v1.ResourceMemory: "8Gi"}).Obj(), false},
		{"a new resource", base().Obj(), base().Capacity(map[v1.ResourceName]string{v1.ResourceCPU: "4", v1.ResourceMemory: "8Gi", "example.com/gpu": "1"}).Obj(), true},
		{"schedulable again", base().Unschedulable(true).Obj(), base().Obj(), true},
		{"cordoned", base().Obj(), base().Unschedulable(true).Obj(), false},
		{"a taint removed", base().Taints([]v1.Taint{taint}).Obj(), base().Obj(), true},
		{"a label changed", base().Obj(), base().Label("zone", "b").Obj(), true},
	} {
		if got := NodeGainedRoom(tc.old, tc.new); got != tc.want {
			t.Errorf("%s: NodeGainedRoom = %v, want %v", tc.name, got, tc.want)
		}
	}
}
