package gangpreemption

import (
	"strings"

	fwk "k8s.io/kube-scheduler/framework"
)

// PodOutcome is how a plain pod's preemption (upstream's Evaluator answered st) is reported: result,
// the preemption_attempts_total outcome (preempted, unschedulable, error), and the pod's status, whose
// message is marked as the preemption's and, when the preemption did not succeed, followed by note
// (the reservations that keep the pod off their room; called only then, "" for none). A status with
// no message to tell is st itself.
func PodOutcome(st *fwk.Status, note func() string) (result string, out *fwk.Status) {
	result = "preempted"
	switch {
	case st.Code() == fwk.Error:
		result = "error"
	case !st.IsSuccess():
		result = "unschedulable"
	}
	msg := st.Message()
	if msg != "" {
		msg = "preemption: " + msg
	}
	if !st.IsSuccess() {
		if n := note(); n != "" {
			msg = strings.TrimPrefix(msg+"; "+n, "; ")
		}
	}
	if msg != "" {
		return result, fwk.NewStatus(st.Code(), msg)
	}
	return result, st
}
