package gang

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
	st "k8s.io/kubernetes/pkg/scheduler/testing"

	"github.com/custom-scheduler/custom-scheduler/pkg/coscheduling/internal/gangtest"
)

// TestCapacityFreedHint: a pod deleted requeues a member and makes the cached checks stale, unless it
// spares the member's gang; a pod of no group is skipped.
func TestCapacityFreedHint(t *testing.T) {
	member := gangtest.Member("m", "g", "1")
	plain := st.MakePod().Namespace("ns").Name("p").Obj()
	gone := st.MakePod().Namespace("ns").Name("gone").Node("n").Obj()
	type got struct {
		Hint  fwk.QueueingHint
		Asked []string // the gang keys spared was asked about
		Freed bool
	}
	for _, tc := range []struct {
		name     string
		pod      *v1.Pod
		old, new interface{}
		spared   bool
		want     got
	}{
		{name: "a pod deleted", pod: member, old: gone, want: got{Hint: fwk.Queue, Asked: []string{"ns/g"}, Freed: true}},
		{name: "a pod shrunk", pod: member, old: gone, new: gone, want: got{Hint: fwk.Queue, Asked: []string{"ns/g"}, Freed: true}},
		{name: "a pod whose room cannot help the gang", pod: member, old: gone, spared: true, want: got{Hint: fwk.QueueSkip, Asked: []string{"ns/g"}}},
		{name: "not a pod: requeued", pod: member, old: "not a pod", spared: true, want: got{Hint: fwk.Queue, Freed: true}},
		{name: "a pod of no group", pod: plain, old: gone, want: got{Hint: fwk.QueueSkip}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var g got
			spared := func(key string, freed *v1.Pod) bool { g.Asked = append(g.Asked, key); return tc.spared }
			hint, err := CapacityFreedHint(spared, func() { g.Freed = true })(klog.Background(), tc.pod, tc.old, tc.new)
			if err != nil {
				t.Fatal(err)
			}
			g.Hint = hint
			if diff := cmp.Diff(tc.want, g); diff != "" {
				t.Errorf("CapacityFreedHint (-want,+got):\n%s", diff)
			}
		})
	}
}
