package lws

import (
	"context"
	"errors"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"

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

// TestSyncLeaderReady: a replica of a set whose startup policy is LeaderReady (its workers made only
// once the leader is Ready) gets a PodGroup of minMember 1, its leader placed alone; any other policy,
// or a set that cannot be read, a PodGroup of the replica's size; an error reading it is retried. A
// leader's next update, its PodGroup in the informer, reads nothing (after an error, the set again).
func TestSyncLeaderReady(t *testing.T) {
	for _, tc := range []struct {
		name    string
		policy  string
		err     error
		wantMin int32 // 0: none made
		wantErr bool
	}{
		{name: "LeaderReady: the leader alone", policy: LeaderReady, wantMin: 1},
		{name: "LeaderCreated: the replica whole", policy: "LeaderCreated", wantMin: 3},
		{name: "not read (no such set, API or right): the replica whole", wantMin: 3},
		{name: "an error reading it: retried, nothing made", err: errors.New("connection refused"), wantErr: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			leader := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "serve-0", UID: "leader",
				Labels:      map[string]string{podgroup.LWSNameLabel: "serve", podgroup.LWSGroupIndexLabel: "0", podgroup.LWSWorkerIndex: "0"},
				Annotations: map[string]string{podgroup.LWSSizeAnnotation: "3"}},
				Spec: v1.PodSpec{SchedulerName: "custom-scheduler"}}
			pods := cache.NewStore(cache.MetaNamespaceKeyFunc)
			if err := pods.Add(leader); err != nil {
				t.Fatal(err)
			}
			client := pgfake.NewSimpleClientset()
			var asked string
			reads := 0
			m := &Maker{Client: client, Pods: pods, Scheduler: "custom-scheduler", Warn: func(*v1.Pod, string, string) {},
				StartupPolicy: func(_ context.Context, ns, name string) (string, error) {
					asked = ns + "/" + name
					reads++
					return tc.policy, tc.err
				},
				// The informer, standing in: what the API holds.
				Groups: func(ns, name string) *v1alpha1.PodGroup {
					pg, err := client.SchedulingV1alpha1().PodGroups(ns).Get(context.Background(), name, metav1.GetOptions{})
					if err != nil {
						return nil
					}
					return pg
				}}
			if err := m.sync(context.Background(), types.NamespacedName{Namespace: "ns", Name: "serve-0"}); (err != nil) != tc.wantErr {
				t.Fatalf("sync: %v, want an error: %v", err, tc.wantErr)
			}
			if asked != "ns/serve" {
				t.Errorf("read the set %q, want ns/serve", asked)
			}
			pg, err := client.SchedulingV1alpha1().PodGroups("ns").Get(context.Background(), "serve-0", metav1.GetOptions{})
			switch {
			case tc.wantMin == 0 && err == nil:
				t.Errorf("a PodGroup of minMember %d was made; want none yet", pg.Spec.MinMember)
			case tc.wantMin > 0 && err != nil:
				t.Fatalf("no PodGroup made: %v", err)
			case tc.wantMin > 0 && pg.Spec.MinMember != tc.wantMin:
				t.Errorf("minMember %d, want %d", pg.Spec.MinMember, tc.wantMin)
			}
			// The leader's next update (it becomes Ready, say) reads the set again only after an error,
			// and writes nothing once its PodGroup is there.
			writes := len(client.Actions())
			_ = m.sync(context.Background(), types.NamespacedName{Namespace: "ns", Name: "serve-0"})
			if want := map[bool]int{false: 1, true: 2}[tc.wantErr]; reads != want {
				t.Errorf("the set read %d times over two syncs of one leader, want %d", reads, want)
			}
			if !tc.wantErr && len(client.Actions()) != writes+1 { // the stand-in informer's own Get
				t.Errorf("the second sync made %d API calls, want none: %v", len(client.Actions())-writes-1, client.Actions()[writes:])
			}
		})
	}
}
