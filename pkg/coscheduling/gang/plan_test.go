package gang

import (
	"testing"

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
