package gang

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework"
)

func TestMissedPlan(t *testing.T) {
	other := fwk.NewStatus(fwk.UnschedulableAndUnresolvable, "other's PreFilter").WithPlugin("Other")
	filtered := func() *framework.NodeToStatus {
		m := framework.NewDefaultNodeToStatus()
		m.Set("a", fwk.NewStatus(fwk.Unschedulable, "Insufficient cpu").WithPlugin("NodeResourcesFit"))
		return m
	}
	for _, tc := range []struct {
		name    string
		offered []string
		m       fwk.NodeToStatusReader
		want    bool
	}{
		{"no statuses: taken as a miss", []string{"a"}, nil, true},
		{"an offered node was filtered out", []string{"a"}, filtered(), true},
		{"the offered nodes were never filtered (absent nodes have no plugin)", []string{"b"}, framework.NewDefaultNodeToStatus(), true},
		{"another plugin's PreFilter rejected every node: no miss of the plan", []string{"a", "b"}, framework.NewNodeToStatus(nil, other), false},
		{"another plugin's PreFilter rejected the rest, and a Filter rejected an offered node: a miss",
			[]string{"a", "b"}, framework.NewNodeToStatus(map[string]*fwk.Status{"a": fwk.NewStatus(fwk.Unschedulable, "Insufficient cpu").WithPlugin("NodeResourcesFit")}, other), true},
	} {
		if got := MissedPlan(tc.offered, tc.m); got != tc.want {
			t.Errorf("%s: MissedPlan = %v, want %v", tc.name, got, tc.want)
		}
	}
}

// TestMissedPlanMessage: a member that fitted none of its planned nodes says why each was rejected.
func TestMissedPlanMessage(t *testing.T) {
	m := framework.NewDefaultNodeToStatus()
	m.Set("a", fwk.NewStatus(fwk.Unschedulable, "Insufficient cpu"))
	pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "m1"}}
	for _, tc := range []struct {
		name    string
		offered []string
		m       fwk.NodeToStatusReader
		want    string
	}{
		{name: "with statuses", offered: []string{"a", "b"}, m: m,
			want: "PodGroup ns/g: member ns/m1 fits none of its planned nodes (a: Insufficient cpu; b: rejected); it is retried at once without the plan"},
		{name: "without", offered: []string{"a"},
			want: "PodGroup ns/g: member ns/m1 fits none of its planned nodes (a: rejected); it is retried at once without the plan"},
	} {
		if diff := cmp.Diff(tc.want, MissedPlanMessage("ns/g", pod, tc.offered, tc.m)); diff != "" {
			t.Errorf("%s (-want,+got):\n%s", tc.name, diff)
		}
	}
}

func TestRejectedNodes(t *testing.T) {
	m := framework.NewDefaultNodeToStatus()
	m.Set("a", fwk.NewStatus(fwk.Unschedulable, "Insufficient cpu", "Insufficient memory"))
	if got, want := RejectedNodes([]string{"a", "b"}, m), "a: Insufficient cpu; b: rejected"; got != want {
		t.Errorf("RejectedNodes = %q, want %q", got, want)
	}
	if got, want := RejectedNodes([]string{"n1", "n2", "n3", "n4", "n5", "n6"}, nil), "n1: rejected; n2: rejected; n3: rejected; n4: rejected; and 2 more"; got != want {
		t.Errorf("RejectedNodes of six = %q, want %q", got, want)
	}
}
