package podgroup

import (
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	st "k8s.io/kubernetes/pkg/scheduler/testing"
	"k8s.io/utils/ptr"

	"github.com/custom-scheduler/custom-scheduler/pkg/apis/scheduling/v1alpha1"
)

// member is a pod of group g for scheduler prof, controlled by owner (none when empty), on node (none
// when empty), in phase.
func member(name, prof string, owner types.UID, node string, phase v1.PodPhase) *v1.Pod {
	p := st.MakePod().Namespace("ns").Name(name).UID(name).SchedulerName(prof).Label(v1alpha1.PodGroupLabel, "g").Node(node).Phase(phase).Obj()
	if owner != "" {
		p.OwnerReferences = []metav1.OwnerReference{{APIVersion: "batch/v1", Kind: "Job", Name: string(owner), UID: owner, Controller: ptr.To(true)}}
	}
	return p
}

func TestRunAndSucceededMember(t *testing.T) {
	deleting := member("d", "prof", "job", "n", v1.PodSucceeded)
	deleting.DeletionTimestamp = &metav1.Time{}
	notController := member("nc", "prof", "", "n", v1.PodSucceeded)
	notController.OwnerReferences = []metav1.OwnerReference{{Kind: "Job", Name: "j", UID: "j"}}
	cases := []struct {
		name    string
		pod     *v1.Pod
		run     types.UID
		counted bool
	}{
		{name: "succeeded, of a Job", pod: member("a", "prof", "job", "n", v1.PodSucceeded), run: "job", counted: true},
		{name: "succeeded, no controller: the run of every pod without one", pod: member("a", "prof", "", "n", v1.PodSucceeded), counted: true},
		{name: "an owner that is not the controller is no run", pod: notController, counted: true},
		{name: "failed", pod: member("a", "prof", "job", "n", v1.PodFailed), run: "job"},
		{name: "running", pod: member("a", "prof", "job", "n", v1.PodRunning), run: "job"},
		{name: "succeeded but being deleted", pod: deleting, run: "job"},
		{name: "succeeded without a node (never ran here)", pod: member("a", "prof", "job", "", v1.PodSucceeded), run: "job"},
		{name: "another scheduler's", pod: member("a", "default-scheduler", "job", "n", v1.PodSucceeded), run: "job"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := Run(tc.pod); got != tc.run {
				t.Errorf("Run = %q, want %q", got, tc.run)
			}
			run, ok := SucceededMember(tc.pod, "prof")
			if ok != tc.counted || (ok && run != tc.run) {
				t.Errorf("SucceededMember = %q, %v; want %q, %v", run, ok, tc.run, tc.counted)
			}
		})
	}
}

func TestRunCredit(t *testing.T) {
	ok, failed, running, pending := v1.PodSucceeded, v1.PodFailed, v1.PodRunning, v1.PodPending
	cases := []struct {
		name string
		pods []*v1.Pod
		want int
	}{
		{name: "no pods"},
		{name: "running only", pods: []*v1.Pod{member("a", "prof", "job", "n", running)}},
		{name: "two of the running run succeeded, one failed",
			pods: []*v1.Pod{member("a", "prof", "job", "n", ok), member("b", "prof", "job", "n", ok), member("c", "prof", "job", "n", failed), member("d", "prof", "job", "n", running)},
			want: 2},
		{name: "a pending replacement beside a bound member keeps the run",
			pods: []*v1.Pod{member("a", "prof", "job", "n", ok), member("b", "prof", "job", "n", ok), member("c", "prof", "job", "n", running), member("r", "prof", "job", "", pending)},
			want: 2},
		{name: "no member bound: the run ended, the pending pods are a new run (an indexed Job's next wave)",
			pods: []*v1.Pod{member("a", "prof", "job", "n", ok), member("b", "prof", "job", "n", ok), member("r", "prof", "job", "", pending)}},
		{name: "a new run (another controller) counts nothing of the old one",
			pods: []*v1.Pod{member("a", "prof", "old", "n", ok), member("b", "prof", "old", "n", ok), member("x", "prof", "new", "", pending)}},
		{name: "another scheduler's succeeded pods never count",
			pods: []*v1.Pod{member("a", "default-scheduler", "job", "n", ok), member("d", "prof", "job", "n", running)}},
		{name: "another scheduler's live pod keeps no run",
			pods: []*v1.Pod{member("a", "prof", "old", "n", ok), member("x", "default-scheduler", "old", "n", running), member("y", "prof", "new", "", pending)}},
		{name: "no live pod: the run with the most succeeded (all finished)",
			pods: []*v1.Pod{member("a", "prof", "j1", "n", ok), member("b", "prof", "j2", "n", ok), member("c", "prof", "j2", "n", ok)},
			want: 2},
		{name: "live pods of two runs: the larger run's credit",
			pods: []*v1.Pod{member("a", "prof", "j1", "n", ok), member("b", "prof", "j2", "n", ok), member("c", "prof", "j2", "n", ok),
				member("d", "prof", "j1", "n", running), member("e", "prof", "j2", "n", running)},
			want: 2},
		{name: "pods without a controller are one run",
			pods: []*v1.Pod{member("a", "prof", "", "n", ok), member("b", "prof", "", "n", running), member("c", "prof", "", "", pending)},
			want: 1},
		{name: "bare pods run again with none bound: a new run",
			pods: []*v1.Pod{member("a", "prof", "", "n", ok), member("b", "prof", "", "", pending)}},
		{name: "another run's bound member does not keep this run",
			pods: []*v1.Pod{member("a", "prof", "old", "n", ok), member("b", "prof", "new", "n", running), member("c", "prof", "old", "", pending)}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := RunCredit(tc.pods, "prof", time.Time{}); got != tc.want {
				t.Errorf("RunCredit = %d, want %d", got, tc.want)
			}
		})
	}
}

// TestRunCreditSince: with no live pod left, a finished run counts for the PodGroup only if its pods
// were created at or after the PodGroup (one recreated after the run ended starts from nothing).
func TestRunCreditSince(t *testing.T) {
	at := func(p *v1.Pod, ts time.Time) *v1.Pod { p.CreationTimestamp = metav1.NewTime(ts); return p }
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	pods := []*v1.Pod{at(member("a", "prof", "", "n", v1.PodSucceeded), t0), at(member("b", "prof", "", "n", v1.PodSucceeded), t0.Add(time.Second))}
	for _, tc := range []struct {
		name  string
		since time.Time
		want  int
	}{
		{"the PodGroup older than the pods", t0.Add(-time.Minute), 2},
		{"created with the first pod", t0, 2},
		{"created between them", t0.Add(500 * time.Millisecond), 1},
		{"recreated after the run", t0.Add(time.Minute), 0},
	} {
		if got := RunCredit(pods, "prof", tc.since); got != tc.want {
			t.Errorf("%s: RunCredit = %d, want %d", tc.name, got, tc.want)
		}
	}
}
