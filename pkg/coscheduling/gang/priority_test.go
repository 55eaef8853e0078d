package gang

import (
	"errors"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	fwk "k8s.io/kube-scheduler/framework"
	st "k8s.io/kubernetes/pkg/scheduler/testing"

	"github.com/custom-scheduler/custom-scheduler/pkg/coscheduling/gangfit"
)

// TestPriority: a gang has one priority as a preemptor, the lowest of its members', whichever member's
// PostFilter runs (#48).
func TestPriority(t *testing.T) {
	p := func(name string, prio int32) *v1.Pod { return st.MakePod().Name(name).UID(name).Priority(prio).Obj() }
	hi, lo, mid := p("hi", 1000), p("lo", 10), p("mid", 500)
	cases := []struct {
		name      string
		pod       *v1.Pod
		members   []*v1.Pod
		want      int32
		wantMixed bool
	}{
		{"one priority", hi, []*v1.Pod{hi, p("hi2", 1000)}, 1000, false},
		{"the high member runs PostFilter: the low one's", hi, []*v1.Pod{hi, lo}, 10, true},
		{"the low member runs PostFilter: the same", lo, []*v1.Pod{hi, lo}, 10, true},
		{"three priorities: the lowest", mid, []*v1.Pod{hi, mid, lo}, 10, true},
		{"the member alone (not listed yet)", mid, nil, 500, false},
	}
	for _, tc := range cases {
		got, mixed := Priority(tc.pod, tc.members)
		if got != tc.want || mixed != tc.wantMixed {
			t.Errorf("%s: Priority = %d, %v, want %d, %v", tc.name, got, mixed, tc.want, tc.wantMixed)
		}
	}
	if msg := MixedPrioritiesMessage("ns/g", []*v1.Pod{hi, lo}, 10); !strings.Contains(msg, "priorities 10 to 1000") || !strings.Contains(msg, "preempts only pods below 10") {
		t.Errorf("MixedPrioritiesMessage = %q", msg)
	}
}

// TestPreemptOutMixedPriorities: the MixedPriorities event is recorded for a gang of several
// priorities when a decision made now evicts or finds preemption no help; not for a cached answer,
// another result or a gang of one priority.
func TestPreemptOutMixedPriorities(t *testing.T) {
	p := func(name string, prio int32) *v1.Pod { return st.MakePod().Name(name).UID(name).Priority(prio).Obj() }
	hi, lo := p("hi", 1000), p("lo", 10)
	for _, tc := range []struct {
		name    string
		result  string
		members []*v1.Pod
		cached  bool
		want    bool
	}{
		{"victims, mixed", PreemptVictims, []*v1.Pod{hi, lo}, false, true},
		{"not helpful, mixed", PreemptNotHelpful, []*v1.Pod{hi, lo}, false, true},
		{"an earlier member's answer", PreemptNotHelpful, []*v1.Pod{hi, lo}, true, false},
		{"waiting", PreemptWaiting, []*v1.Pod{hi, lo}, false, false},
		{"not eligible", PreemptNotEligible, []*v1.Pod{hi, lo}, false, false},
		{"one priority", PreemptVictims, []*v1.Pod{hi, p("hi2", 1000)}, false, false},
	} {
		out := PreemptOut{Result: tc.result}
		msg := out.MixedPriorities("ns/g", hi, tc.members, tc.cached)
		if (msg != "") != tc.want || tc.want && msg != MixedPrioritiesMessage("ns/g", tc.members, 10) {
			t.Errorf("%s: MixedPriorities = %q, want an event %v", tc.name, msg, tc.want)
		}
	}
}

// TestPreemptOutStatus: the member's status is the failed read's, the preemption's under way, the
// decision's message, or a bare Unschedulable.
func TestPreemptOutStatus(t *testing.T) {
	plan := gangfit.Plan{Victims: []*v1.Pod{st.MakePod().Name("v").Obj()}, Singles: 1,
		Assignment: []gangfit.Nomination{{Pod: st.MakePod().Name("m").Obj(), Node: "n1"}}}
	for _, tc := range []struct {
		name string
		out  PreemptOut
		code fwk.Code
		msg  string
	}{
		{"a read failed", PreemptOut{Result: PreemptError, Err: errors.New("boom")}, fwk.Error, "boom"},
		{"victims", PreemptOut{Result: PreemptVictims, Plan: plan, Need: 1}, fwk.Unschedulable,
			"preemption: preempting 1 pods of lower priority than 10 (0 gangs, 1 single pods) so that 1 members fit; members nominated to n1"},
		{"waiting, with a message", PreemptOut{Result: PreemptWaiting, Message: "victims still terminating"}, fwk.Unschedulable, "victims still terminating"},
		{"not helpful, no message", PreemptOut{Result: PreemptNotHelpful}, fwk.Unschedulable, ""},
	} {
		s := tc.out.Status(10)
		if s.Code() != tc.code || s.Message() != tc.msg {
			t.Errorf("%s: Status = %v %q, want %v %q", tc.name, s.Code(), s.Message(), tc.code, tc.msg)
		}
	}
}
