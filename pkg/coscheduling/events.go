package coscheduling

import (
	v1 "k8s.io/api/core/v1"

	"github.com/custom-scheduler/custom-scheduler/pkg/apis/scheduling/v1alpha1"
	"github.com/custom-scheduler/custom-scheduler/pkg/coscheduling/podgroup"
)

// Events. The PodGroup gets one event per attempt transition (attempt started, quorum reached,
// infeasible, rejected, timed out, below quorum); a member gets only what its owner needs: why it is
// held back (once per reason; for a missing PodGroup or members, only if it still waits gateEventDelay
// later) and why its attempt failed (once per attempt). Per-member detail goes
// to the log at V(4).

func (pl *Coscheduling) event(pod *v1.Pod, eventType, reason, msg string) {
	if pl.recorder == nil {
		return
	}
	pl.recorder.Eventf(pod, nil, eventType, reason, "Scheduling", "%s", msg)
}

// podGroupEvent records an event on a PodGroup. The reference is built here: the event recorder's
// scheme does not know the PodGroup type.
func (pl *Coscheduling) podGroupEvent(pg *v1alpha1.PodGroup, eventType, reason, msg string) {
	if pl.recorder == nil || pg == nil {
		return
	}
	pl.recorder.Eventf(podGroupRef(pg), nil, eventType, reason, "Scheduling", "%s", msg)
}

// podGroupRef refers to a PodGroup in events.
func podGroupRef(pg *v1alpha1.PodGroup) *v1.ObjectReference {
	return &v1.ObjectReference{
		APIVersion: v1alpha1.SchemeGroupVersion.String(), Kind: "PodGroup",
		Namespace: pg.Namespace, Name: pg.Name, UID: pg.UID, ResourceVersion: pg.ResourceVersion,
	}
}

// reportFailure reports a failed attempt: once on the PodGroup, once on each member it concerns, and
// in the PodGroup's status.
func (pl *Coscheduling) reportFailure(pg *v1alpha1.PodGroup, reason, msg string, pods []*v1.Pod) {
	pl.podGroupEvent(pg, v1.EventTypeWarning, reason, msg)
	for _, p := range pods {
		pl.event(p, v1.EventTypeWarning, reason, msg)
	}
	if pg != nil {
		pl.notifyStatus(podgroup.Key(pg.Namespace, pg.Name))
	}
}

func (pl *Coscheduling) notifyStatus(key string) {
	if pl.status != nil {
		pl.status.Enqueue(key)
	}
}
