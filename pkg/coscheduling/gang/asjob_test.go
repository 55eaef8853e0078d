package gang

import "testing"

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
