package gangfit

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
	st "k8s.io/kubernetes/pkg/scheduler/testing"

	"github.com/custom-scheduler/custom-scheduler/pkg/apis/scheduling/v1alpha1"
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

// TestNodeChangeHint: a node added, or one that gained room, requeues a member and makes the cached
// checks stale; a node that lost room, a pod of no group and an object that is no node do not (the
// last requeues with its error).
func TestNodeChangeHint(t *testing.T) {
	small := st.MakeNode().Name("n").Capacity(map[v1.ResourceName]string{v1.ResourceCPU: "2"}).Obj()
	bigger := st.MakeNode().Name("n").Capacity(map[v1.ResourceName]string{v1.ResourceCPU: "4"}).Obj()
	member := st.MakePod().Namespace("ns").Name("m").Label(v1alpha1.PodGroupLabel, "g").Obj()
	plain := st.MakePod().Namespace("ns").Name("p").Obj()
	type got struct {
		Hint  fwk.QueueingHint
		Err   bool
		Freed bool
	}
	for _, tc := range []struct {
		name     string
		pod      *v1.Pod
		old, new interface{}
		want     got
	}{
		{name: "node added", pod: member, new: small, want: got{Hint: fwk.Queue, Freed: true}},
		{name: "node grew", pod: member, old: small, new: bigger, want: got{Hint: fwk.Queue, Freed: true}},
		{name: "node shrank", pod: member, old: bigger, new: small, want: got{Hint: fwk.QueueSkip}},
		{name: "nothing changed", pod: member, old: small, new: small, want: got{Hint: fwk.QueueSkip}},
		{name: "a pod of no group", pod: plain, new: small, want: got{Hint: fwk.QueueSkip}},
		{name: "not a node", pod: member, new: member, want: got{Hint: fwk.Queue, Err: true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var g got
			hint, err := NodeChangeHint(func() { g.Freed = true })(klog.Background(), tc.pod, tc.old, tc.new)
			g.Hint, g.Err = hint, err != nil
			if diff := cmp.Diff(tc.want, g); diff != "" {
				t.Errorf("NodeChangeHint (-want,+got):\n%s", diff)
			}
		})
	}
}
