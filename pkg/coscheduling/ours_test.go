package coscheduling

import (
	"context"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8stypes "k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/custom-scheduler/custom-scheduler/pkg/apis/scheduling/v1alpha1"
)

// TestOtherSchedulersPodsMakeNoState: a bound pod of another scheduler in a group (a default-scheduler
// Job's pod carrying spec.schedulingGroup, or a labelled one) neither counts toward the group's quorum
// nor makes state for it; a bound pod of this profile does.
func TestOtherSchedulersPodsMakeNoState(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	env := newTestEnv(t, defaultArgs(), []*v1alpha1.PodGroup{makePG("ns", "g", 3, t0)}, nil)
	theirs := member("theirs", "g", "1")
	theirs.Spec.SchedulerName, theirs.Spec.NodeName = v1.DefaultSchedulerName, "n1"
	env.pl.onPodAdd(theirs)
	if groups, _, _ := env.pl.stateSize(); groups != 0 {
		t.Fatalf("%d groups tracked after another scheduler's bound pod, want 0", groups)
	}
	env.pl.onPodDelete(theirs)

	ours := member("ours", "g", "1")
	ours.Spec.NodeName = "n1"
	env.pl.onPodAdd(ours)
	env.pl.mu.RLock()
	g := env.pl.gangs.Get("ns/g")
	env.pl.mu.RUnlock()
	if g == nil || g.Count() != 1 {
		t.Fatalf("our bound pod is not counted: %+v", g)
	}
}

// TestFinishedMembersLetTheReplacementIn: a replacement member that, with the running member, is
// below minMember is held back until the members of its run that succeeded are counted; the finished
// pods' handler lets it in, and only a member of the same run.
func TestFinishedMembersLetTheReplacementIn(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	job := func(p *v1.Pod, uid string) *v1.Pod {
		p.OwnerReferences = []metav1.OwnerReference{{Kind: "Job", Name: uid, UID: k8stypes.UID("job-" + uid), Controller: ptr.To(true)}}
		return p
	}
	runningPod := job(member("running", "g", "1"), "a")
	runningPod.Spec.NodeName = "n1"
	replacement := job(member("replacement", "g", "1"), "a")
	stranger := job(member("stranger", "g", "1"), "b")
	env := newTestEnv(t, defaultArgs(), []*v1alpha1.PodGroup{makePG("ns", "g", 4, t0)}, []*v1.Pod{runningPod, replacement, stranger})
	ctx := context.Background()
	if st := env.pl.PreEnqueue(ctx, replacement); st.IsSuccess() {
		t.Fatalf("the replacement was let in with 3 live pods of minMember 4 and nothing succeeded")
	}
	h := env.pl.finishedEventHandler()
	for _, name := range []string{"done-0", "done-1"} {
		p := job(member(name, "g", "1"), "a")
		p.Spec.NodeName, p.Status.Phase = "n2", v1.PodSucceeded
		h.OnAdd(p, false)
	}
	if st := env.pl.PreEnqueue(ctx, replacement); !st.IsSuccess() {
		t.Errorf("the replacement is held back with 1 running, 2 succeeded of its run: %v", st.Message())
	}
	if st := env.pl.PreEnqueue(ctx, stranger); st.IsSuccess() {
		// stranger's run has no succeeded member: 3 live pods < 4.
		t.Errorf("a member of another run was let in on this run's succeeded members")
	}
	// A succeeded member deleted no longer counts.
	gone := job(member("done-0", "g", "1"), "a")
	gone.Spec.NodeName, gone.Status.Phase = "n2", v1.PodSucceeded
	h.OnDelete(gone)
	if got := env.pl.credit(replacement); got != 1 {
		t.Errorf("credit %d after one succeeded member was deleted, want 1", got)
	}
}
