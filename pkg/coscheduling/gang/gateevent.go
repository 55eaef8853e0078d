package gang

import (
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/custom-scheduler/custom-scheduler/pkg/coscheduling/podgroup"
)

// GateEventDelay is how long a member must stay held back for a reason GateEventOf reports later
// before it gets the event: the pods of a Job created in a burst, or created just before their
// PodGroup, wait for each other for milliseconds, and an event per pod would only be noise (and load
// on the apiserver). The PodGroup's Scheduled condition says WaitingForMembers meanwhile. An attempt's
// WaitingForQuorum event on the PodGroup waits as long, for the same reason.
const GateEventDelay = 5 * time.Second

// GateEventOf is the event a member held back for reason gets, once per episode (see Gates.Hold):
// its type, and later for the reasons that usually pass in a moment (PodGroupNotFound,
// WaitingForMembers, WaitingForClaims: the pods of a Job created in a burst, or created just before
// their PodGroup, wait for each other for milliseconds), whose event waits to see the pod still held
// back (see Gate.EventMessage). A claim order the user must fix is a warning.
func GateEventOf(reason string) (eventType string, later bool) {
	switch reason {
	case podgroup.ReasonPodGroupNotFound, podgroup.ReasonWaitingForMembers, podgroup.ReasonWaitingForClaims:
		return v1.EventTypeNormal, true
	case podgroup.ReasonPodGroupClaimOrder:
		return v1.EventTypeWarning, false
	}
	return v1.EventTypeNormal, false
}

// EventMessage is the message of a gate's delayed event, for a pod still held back in the gate's
// episode (ok false: no event). A wait for members or their claims is counted again (holdBack: the
// reason and message of now, ok false when the PodGroup is gone): the pod's PreEnqueue ran when it was
// held, and a peer that arrived or got its claims since does not run it again unless the group is
// complete. A pod held back for another reason now, or about to be let in, gets no event.
func (g Gate) EventMessage(holdBack func() (reason, msg string, ok bool)) (string, bool) {
	if g.Reason != podgroup.ReasonWaitingForMembers && g.Reason != podgroup.ReasonWaitingForClaims {
		return g.Message, true
	}
	reason, msg, ok := holdBack()
	if !ok || reason != g.Reason {
		return "", false
	}
	return msg, true
}
