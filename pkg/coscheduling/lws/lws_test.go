package lws

import (
	"context"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"

	"github.com/custom-scheduler/custom-scheduler/pkg/apis/scheduling/v1alpha1"
	"github.com/custom-scheduler/custom-scheduler/pkg/coscheduling/podgroup"
	pgfake "github.com/custom-scheduler/custom-scheduler/pkg/generated/clientset/versioned/fake"
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

func TestEnsure(t *testing.T) {
	terminating := group(true, "old")
	now := metav1.Now()
	terminating.DeletionTimestamp, terminating.Finalizers = &now, []string{"example.com/hold"}
	for _, tc := range []struct {
		name      string
		have      *v1alpha1.PodGroup
		wantErr   bool
		wantOwner types.UID
	}{
		{name: "none: made", wantOwner: "new"},
		{name: "an earlier leader's: replaced", have: group(true, "old"), wantOwner: "new"},
		{name: "the user's: left alone", have: group(false, "old"), wantOwner: "old"},
		{name: "an earlier leader's, still going: retried later, not in a loop", have: terminating, wantErr: true, wantOwner: "old"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var objs []runtime.Object
			if tc.have != nil {
				tc.have.Namespace = "ns"
				objs = append(objs, tc.have)
			}
			client := pgfake.NewSimpleClientset(objs...)
			want := group(true, "new")
			want.Namespace = "ns"
			m := &Maker{Client: client}
			if err := m.ensure(context.Background(), want); (err != nil) != tc.wantErr {
				t.Fatalf("ensure: %v, want an error: %v", err, tc.wantErr)
			}
			got, err := client.SchedulingV1alpha1().PodGroups("ns").Get(context.Background(), "serve-0", metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if ref := metav1.GetControllerOf(got); ref == nil || ref.UID != tc.wantOwner {
				t.Errorf("PodGroup owned by %v, want %s", ref, tc.wantOwner)
			}
			if n := len(client.Actions()); n > 9 {
				t.Errorf("%d API calls, want a few rounds at most", n)
			}
		})
	}
}
