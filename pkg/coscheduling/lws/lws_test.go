package lws

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/custom-scheduler/custom-scheduler/pkg/apis/scheduling/v1alpha1"
	"github.com/custom-scheduler/custom-scheduler/pkg/coscheduling/podgroup"
)

func group(managed bool, owner types.UID) *v1alpha1.PodGroup {
	pg := &v1alpha1.PodGroup{ObjectMeta: metav1.ObjectMeta{Name: "serve-0", Labels: map[string]string{}}}
	if managed {
		pg.Labels[podgroup.LabelManagedBy] = podgroup.ManagedBy
	}
	if owner != "" {
		yes := true
		pg.OwnerReferences = []metav1.OwnerReference{{Kind: "Pod", Name: "serve-0", UID: owner, Controller: &yes}}
	}
	return pg
}

func TestStale(t *testing.T) {
	want := group(true, "new")
	for _, tc := range []struct {
		name string
		have *v1alpha1.PodGroup
		want bool
	}{
		{"ours, for this leader", group(true, "new"), false},
		{"ours, for an earlier leader of the name", group(true, "old"), true},
		{"ours, without an owner", group(true, ""), true},
		{"the user's, whatever owns it", group(false, "old"), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := Stale(tc.have, want); got != tc.want {
				t.Errorf("Stale = %v, want %v", got, tc.want)
			}
		})
	}
}
