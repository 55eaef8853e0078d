package effects

import (
	v1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/events"

	"github.com/custom-scheduler/custom-scheduler/pkg/apis/scheduling/v1alpha1"
	"github.com/custom-scheduler/custom-scheduler/pkg/coscheduling/podgroup"
)

// Recorder records the gang plugin's events (reasons: see podgroup's Reason* constants), on members
// and on PodGroups. The PodGroup gets one event per attempt transition (attempt started, quorum
// reached, infeasible, rejected, timed out, below quorum); a member gets only what its owner needs:
// why it is held back (once per reason) and why its attempt failed (once per attempt). A Recorder
// without Events records nothing (unit tests).
type Recorder struct {
	Events events.EventRecorderLogger
}

// Pod records an event on a pod.
func (r Recorder) Pod(pod *v1.Pod, eventType, reason, msg string) {
	if r.Events == nil {
		return
	}
	r.Events.Eventf(pod, nil, eventType, reason, "Scheduling", "%s", msg)
}

// PodGroup records an event on a PodGroup (nil: none).
func (r Recorder) PodGroup(pg *v1alpha1.PodGroup, eventType, reason, msg string) {
	if r.Events == nil || pg == nil {
		return
	}
	r.Events.Eventf(podgroup.Ref(pg), nil, eventType, reason, "Scheduling", "%s", msg)
}

// Failure records a failed attempt: once on the PodGroup, once on each member it concerns.
func (r Recorder) Failure(pg *v1alpha1.PodGroup, reason, msg string, pods []*v1.Pod) {
	r.PodGroup(pg, v1.EventTypeWarning, reason, msg)
	for _, p := range pods {
		r.Pod(p, v1.EventTypeWarning, reason, msg)
	}
}
