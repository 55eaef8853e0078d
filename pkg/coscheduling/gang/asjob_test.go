package gang

import (
	"slices"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/custom-scheduler/custom-scheduler/pkg/apis/scheduling/v1alpha1"
	"github.com/custom-scheduler/custom-scheduler/pkg/coscheduling/gangfit"
	resv "github.com/custom-scheduler/custom-scheduler/pkg/coscheduling/reservation"
)

// TestPreemptAs: a group short only with its job preempts as its job or not at all; a group short
// alone preempts as its job only when the job preempts in parts.
func TestPreemptAs(t *testing.T) {
	whole := &JobPreemption{Job: "ns/job"}
	parts := &JobPreemption{Job: "ns/job", Parts: []JobPart{{}}}
	cases := []struct {
		name    string
		asJob   bool
		j       *JobPreemption
		want    *JobPreemption
		wantNot bool
	}{
		{name: "as job, no job", asJob: true, wantNot: true},
		{name: "as job, whole", asJob: true, j: whole, want: whole},
		{name: "as job, in parts", asJob: true, j: parts, want: parts},
		{name: "alone, no job"},
		{name: "alone in a job preempted whole", j: whole},
		{name: "alone in a job preempted in parts", j: parts, want: parts},
	}
	for _, tc := range cases {
		got, ok := PreemptAs(tc.asJob, tc.j)
		if got != tc.want || ok == tc.wantNot {
			t.Errorf("%s: PreemptAs = %v, %v; want %v, %v", tc.name, got, ok, tc.want, !tc.wantNot)
		}
	}
}

// TestReservesAs: a group reserves alone, or for a job whose room is for it; not for its job alone
// when short only with it, nor as a replica its job's room is not for.
func TestReservesAs(t *testing.T) {
	job := &JobPreemption{Job: "ns/job", Holder: "ns/a", Keys: []string{"ns/a", "ns/b"}}
	cases := []struct {
		name  string
		asJob bool
		job   *JobPreemption
		key   string
		want  bool
	}{
		{name: "alone", key: "ns/a", want: true},
		{name: "short with its job, which cannot reserve", asJob: true, key: "ns/a"},
		{name: "for its job", asJob: true, job: job, key: "ns/b", want: true},
		{name: "short alone, for its job", job: job, key: "ns/a", want: true},
		{name: "a replica the room is not for", asJob: true, job: job, key: "ns/c"},
		{name: "short alone, a replica the room is not for", job: job, key: "ns/c"},
	}
	for _, tc := range cases {
		if got := ReservesAs(tc.asJob, tc.job, tc.key); got != tc.want {
			t.Errorf("%s: ReservesAs = %v, want %v", tc.name, got, tc.want)
		}
	}
}

// TestHeldBy: only the job's holder holds room for the job's other groups.
func TestHeldBy(t *testing.T) {
	job := &JobPreemption{Job: "ns/job", Holder: "ns/a", Keys: []string{"ns/a", "ns/b", "ns/c"}}
	cases := []struct {
		name string
		job  *JobPreemption
		key  string
		want []string
	}{
		{name: "no job", key: "ns/a"},
		{name: "the holder", job: job, key: "ns/a", want: []string{"ns/b", "ns/c"}},
		{name: "another group", job: job, key: "ns/b"},
		{name: "the holder's name in another namespace", job: job, key: "other/a"},
	}
	for _, tc := range cases {
		if got := tc.job.HeldBy(tc.key); !slices.Equal(got, tc.want) {
			t.Errorf("%s: HeldBy = %v, want %v", tc.name, got, tc.want)
		}
	}
}

// TestMayAdopt: only a gang this process has not seen trying, holding no reservation, adopts one.
func TestMayAdopt(t *testing.T) {
	cases := []struct {
		name  string
		seen  bool
		phase resv.Phase
		want  bool
	}{
		{name: "unseen, idle", phase: resv.Idle, want: true},
		{name: "unseen, waiting", phase: resv.Waiting, want: true},
		{name: "unseen, held", phase: resv.Held},
		{name: "seen", seen: true, phase: resv.Idle},
	}
	for _, tc := range cases {
		r := Reservation{State: resv.State{Phase: tc.phase, Seen: tc.seen}}
		if got := r.MayAdopt(); got != tc.want {
			t.Errorf("%s: MayAdopt = %v, want %v", tc.name, got, tc.want)
		}
	}
}

// TestMembersOr: a job's preemption or reservation places the job's members; a group's alone, its
// own.
func TestMembersOr(t *testing.T) {
	own := []*v1.Pod{{ObjectMeta: metav1.ObjectMeta{Name: "own"}}}
	jobs := []*v1.Pod{{ObjectMeta: metav1.ObjectMeta{Name: "a"}}, {ObjectMeta: metav1.ObjectMeta{Name: "b"}}}
	cases := []struct {
		name string
		job  *JobPreemption
		want []*v1.Pod
	}{
		{name: "alone", want: own},
		{name: "for its job", job: &JobPreemption{Job: "ns/job", Members: jobs}, want: jobs},
	}
	for _, tc := range cases {
		if got := tc.job.MembersOr(func() []*v1.Pod { return own })(); !slices.Equal(got, tc.want) {
			t.Errorf("%s: MembersOr = %v, want %v", tc.name, got, tc.want)
		}
	}
}

// TestClaimedByJob: the nominations a job's preemption counts as room taken leave out those of the
// groups it places, not those of its other groups (another replica's, of K of N); a job's
// reservation leaves out those of all its groups; a group alone counts every nomination it is given.
func TestClaimedByJob(t *testing.T) {
	nominated := func(group string) *v1.Pod {
		return &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: group + "-0", Namespace: "ns", Labels: map[string]string{v1alpha1.PodGroupLabel: group}}}
	}
	a, b, c, other := nominated("a"), nominated("b"), nominated("c"), nominated("other")
	all := []*v1.Pod{a, b, c, other}
	job := &JobPreemption{Job: "ns/job", Groups: []gangfit.Group{{Key: "ns/a"}, {Key: "ns/b"}}, Keys: []string{"ns/a", "ns/b", "ns/c"}}
	cases := []struct {
		name             string
		job              *JobPreemption
		preempt, reserve []*v1.Pod
	}{
		{name: "a group alone", preempt: all, reserve: all},
		{name: "a job", job: job, preempt: []*v1.Pod{c, other}, reserve: []*v1.Pod{other}},
	}
	for _, tc := range cases {
		p := PreemptIn{Job: tc.job, Claims: func() []*v1.Pod { return all }}
		if got := p.claimed(); !slices.Equal(got, tc.preempt) {
			t.Errorf("%s: preemption's claimed = %v, want %v", tc.name, got, tc.preempt)
		}
		r := ReserveIn{Job: tc.job, Claims: func(int32) []*v1.Pod { return all }}
		if got := r.claimed(0); !slices.Equal(got, tc.reserve) {
			t.Errorf("%s: reservation's claimed = %v, want %v", tc.name, got, tc.reserve)
		}
	}
}
