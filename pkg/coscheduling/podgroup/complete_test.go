package podgroup

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/custom-scheduler/custom-scheduler/pkg/apis/scheduling/v1alpha1"
)

func TestCompleted(t *testing.T) {
	cases := []struct {
		name                             string
		live, ready, credit, want        int
		grew                             bool
		wantAdd, wantReady, wantFinished bool
	}{
		{name: "short", live: 1, ready: 1, want: 3},
		{name: "the last member", live: 3, ready: 1, want: 3, wantAdd: true},
		{name: "beyond minMember", live: 4, ready: 4, want: 3},
		{name: "the last ready member", live: 4, ready: 3, want: 3, grew: true, wantAdd: true, wantReady: true},
		{name: "ready, not grown", live: 4, ready: 3, want: 3, wantReady: true},
		{name: "with the succeeded", live: 2, ready: 2, credit: 1, want: 3, wantAdd: true, wantReady: true, wantFinished: true},
		{name: "the succeeded more than enough", live: 2, ready: 0, credit: 2, want: 3, wantFinished: true},
		{name: "no live member", credit: 3, want: 3, wantAdd: true, wantReady: true},
		{name: "complete without it", live: 3, ready: 3, credit: 1, want: 3},
	}
	for _, tc := range cases {
		if got := CompletedByAdd(tc.live, tc.ready, tc.credit, tc.want, tc.grew); got != tc.wantAdd {
			t.Errorf("%s: CompletedByAdd = %v, want %v", tc.name, got, tc.wantAdd)
		}
		if got := CompletedByReady(tc.ready, tc.credit, tc.want); got != tc.wantReady {
			t.Errorf("%s: CompletedByReady = %v, want %v", tc.name, got, tc.wantReady)
		}
		if got := CompletedByFinished(tc.live, tc.credit, tc.want); got != tc.wantFinished {
			t.Errorf("%s: CompletedByFinished = %v, want %v", tc.name, got, tc.wantFinished)
		}
	}
}

func TestUpdateOf(t *testing.T) {
	old := &v1alpha1.PodGroup{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "g", UID: "a", Generation: 1}, Spec: v1alpha1.PodGroupSpec{MinMember: 2}}
	with := func(f func(pg *v1alpha1.PodGroup)) *v1alpha1.PodGroup { pg := old.DeepCopy(); f(pg); return pg }
	deleting := with(func(pg *v1alpha1.PodGroup) { pg.DeletionTimestamp = &metav1.Time{Time: time.Unix(1, 0)} })
	cases := []struct {
		name     string
		old, new *v1alpha1.PodGroup
		want     Update
	}{
		{name: "status only", old: old, new: with(func(pg *v1alpha1.PodGroup) { pg.Status.Phase = "Running" }), want: UpdateNone},
		{name: "recreated", old: old, new: with(func(pg *v1alpha1.PodGroup) { pg.UID = "b"; pg.DeletionTimestamp = deleting.DeletionTimestamp }), want: UpdateRecreated},
		{name: "being deleted", old: old, new: deleting, want: UpdateDeleting},
		{name: "still being deleted, spec changed", old: deleting, new: with(func(pg *v1alpha1.PodGroup) {
			pg.DeletionTimestamp, pg.Spec.MinMember = deleting.DeletionTimestamp, 1
		}), want: UpdateNone},
		{name: "generation", old: old, new: with(func(pg *v1alpha1.PodGroup) { pg.Generation = 2 }), want: UpdateSpec},
		{name: "spec, same generation", old: old, new: with(func(pg *v1alpha1.PodGroup) { pg.Spec.MinMember = 1 }), want: UpdateSpec},
	}
	for _, tc := range cases {
		if got := UpdateOf(tc.old, tc.new); got != tc.want {
			t.Errorf("%s: UpdateOf = %v, want %v", tc.name, got, tc.want)
		}
	}
}

// TestMessages: the messages built for a group's members and its PodGroup's events.
func TestMessages(t *testing.T) {
	pg := &v1alpha1.PodGroup{Spec: v1alpha1.PodGroupSpec{MinMember: 4}}
	for _, tc := range []struct {
		name      string
		got, want string
	}{
		{name: "WaitingForQuorumMessage", got: WaitingForQuorumMessage(pg, 5*time.Second, 2, time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)),
			want: "attempt under way for 5s: 2 of minMember 4 members reserved or bound; waiting until 2030-01-02T03:04:05Z for the rest"},
		{name: "NotFoundMessage", got: NotFoundMessage("ns/g"),
			want: "PodGroup ns/g does not exist; the pod waits for it without holding resources"},
	} {
		if diff := cmp.Diff(tc.want, tc.got); diff != "" {
			t.Errorf("%s (-want,+got):\n%s", tc.name, diff)
		}
	}
}

// TestChangeOf is a row per pod an informer adds or updates: another profile's is none of ours
// (whatever it is), one no longer live is gone, a live one counts from the informer once bound.
func TestChangeOf(t *testing.T) {
	now := metav1.Now()
	pod := func(scheduler, node string, phase v1.PodPhase, deleting bool) *v1.Pod {
		p := &v1.Pod{Spec: v1.PodSpec{SchedulerName: scheduler, NodeName: node}, Status: v1.PodStatus{Phase: phase}}
		if deleting {
			p.DeletionTimestamp = &now
		}
		return p
	}
	for _, tc := range []struct {
		name string
		pod  *v1.Pod
		want Change
	}{
		{"another profile's pod, bound", pod("other", "n", v1.PodRunning, false), ChangeOther},
		{"another profile's pod, finished", pod("other", "n", v1.PodSucceeded, false), ChangeOther},
		{"being deleted", pod("gang", "n", v1.PodRunning, true), ChangeGone},
		{"succeeded", pod("gang", "n", v1.PodSucceeded, false), ChangeGone},
		{"failed", pod("gang", "", v1.PodFailed, false), ChangeGone},
		{"pending, no node", pod("gang", "", v1.PodPending, false), ChangeUnbound},
		{"bound", pod("gang", "n", v1.PodPending, false), ChangeBound},
		{"running", pod("gang", "n", v1.PodRunning, false), ChangeBound},
	} {
		if got := ChangeOf(tc.pod, "gang"); got != tc.want {
			t.Errorf("%s: ChangeOf = %d, want %d", tc.name, got, tc.want)
		}
	}
}
