package gangpreemption

import (
	"testing"

	fwk "k8s.io/kube-scheduler/framework"
)

// TestPodOutcome is a row per answer of upstream's Evaluator for a plain pod: the outcome counted,
// and the status the pod gets, with the note of the reservations that keep it off their room read
// only for a preemption that did not succeed.
func TestPodOutcome(t *testing.T) {
	cases := []struct {
		name       string
		st         *fwk.Status
		note       string
		wantResult string
		wantCode   fwk.Code
		wantMsg    string
		wantSame   bool // the Evaluator's status itself
		wantNote   bool // the note was read
	}{
		{name: "preempted, no message: the Evaluator's status", st: nil, note: "ignored",
			wantResult: "preempted", wantCode: fwk.Success, wantSame: true},
		{name: "preempted with a message: marked as the preemption's, no note", st: fwk.NewStatus(fwk.Success, "victims chosen"), note: "ignored",
			wantResult: "preempted", wantCode: fwk.Success, wantMsg: "preemption: victims chosen"},
		{name: "unschedulable: the message, then the note", st: fwk.NewStatus(fwk.Unschedulable, "0/3 nodes are available"), note: "kept off ns/g's room",
			wantResult: "unschedulable", wantCode: fwk.Unschedulable, wantMsg: "preemption: 0/3 nodes are available; kept off ns/g's room", wantNote: true},
		{name: "unschedulable without a message: the note alone", st: fwk.NewStatus(fwk.Unschedulable), note: "kept off ns/g's room",
			wantResult: "unschedulable", wantCode: fwk.Unschedulable, wantMsg: "kept off ns/g's room", wantNote: true},
		{name: "unschedulable, nothing to tell: the Evaluator's status", st: fwk.NewStatus(fwk.Unschedulable),
			wantResult: "unschedulable", wantCode: fwk.Unschedulable, wantSame: true, wantNote: true},
		{name: "an error: counted as one, noted too", st: fwk.NewStatus(fwk.Error, "boom"), note: "n",
			wantResult: "error", wantCode: fwk.Error, wantMsg: "preemption: boom; n", wantNote: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			read := false
			result, st := PodOutcome(tc.st, func() string { read = true; return tc.note })
			if result != tc.wantResult || st.Code() != tc.wantCode || st.Message() != tc.wantMsg {
				t.Errorf("PodOutcome = %s, %v %q; want %s, %v %q", result, st.Code(), st.Message(), tc.wantResult, tc.wantCode, tc.wantMsg)
			}
			if (st == tc.st) != tc.wantSame {
				t.Errorf("the Evaluator's status returned itself: %v, want %v", st == tc.st, tc.wantSame)
			}
			if read != tc.wantNote {
				t.Errorf("note read: %v, want %v", read, tc.wantNote)
			}
		})
	}
}
