package gang

import (
	"testing"

	v1 "k8s.io/api/core/v1"

	"github.com/custom-scheduler/custom-scheduler/pkg/coscheduling/podgroup"
)

// TestGateEventOf: the reasons that usually pass in a moment wait to see the pod still held back; a
// claim order is a warning at once; any other reason a normal event at once.
func TestGateEventOf(t *testing.T) {
	for _, tc := range []struct {
		reason, wantType string
		wantLater        bool
	}{
		{podgroup.ReasonPodGroupNotFound, v1.EventTypeNormal, true},
		{podgroup.ReasonWaitingForMembers, v1.EventTypeNormal, true},
		{podgroup.ReasonWaitingForClaims, v1.EventTypeNormal, true},
		{podgroup.ReasonPodGroupClaimOrder, v1.EventTypeWarning, false},
		{podgroup.ReasonInvalidTopologyPolicy, v1.EventTypeNormal, false},
	} {
		if typ, later := GateEventOf(tc.reason); typ != tc.wantType || later != tc.wantLater {
			t.Errorf("GateEventOf(%s) = %s, %v; want %s, %v", tc.reason, typ, later, tc.wantType, tc.wantLater)
		}
	}
}

// TestGateEventMessage is a row per delayed event: the gate's own message for a reason not counted
// again; for a wait for members or claims, the count of now, and no event once the pod waits for
// another reason, is about to be let in, or its PodGroup is gone.
func TestGateEventMessage(t *testing.T) {
	type now struct {
		reason, msg string
		ok          bool
	}
	for _, tc := range []struct {
		name    string
		gate    Gate
		now     now
		want    string
		wantOK  bool
		counted bool
	}{
		{name: "PodGroupNotFound: the gate's message, nothing counted",
			gate: Gate{Reason: podgroup.ReasonPodGroupNotFound, Message: "missing"}, want: "missing", wantOK: true},
		{name: "still waiting for members: the count of now",
			gate: Gate{Reason: podgroup.ReasonWaitingForMembers, Message: "1 of 3"}, now: now{podgroup.ReasonWaitingForMembers, "2 of 3", true},
			want: "2 of 3", wantOK: true, counted: true},
		{name: "still waiting for claims: the count of now",
			gate: Gate{Reason: podgroup.ReasonWaitingForClaims, Message: "0 of 2"}, now: now{podgroup.ReasonWaitingForClaims, "1 of 2", true},
			want: "1 of 2", wantOK: true, counted: true},
		{name: "waiting for claims now, not members: no event",
			gate: Gate{Reason: podgroup.ReasonWaitingForMembers, Message: "1 of 3"}, now: now{podgroup.ReasonWaitingForClaims, "0 of 3", true}, counted: true},
		{name: "about to be let in: no event",
			gate: Gate{Reason: podgroup.ReasonWaitingForMembers, Message: "1 of 3"}, now: now{ok: true}, counted: true},
		{name: "the PodGroup is gone: no event",
			gate: Gate{Reason: podgroup.ReasonWaitingForMembers, Message: "1 of 3"}, counted: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			counted := false
			got, ok := tc.gate.EventMessage(func() (string, string, bool) { counted = true; return tc.now.reason, tc.now.msg, tc.now.ok })
			if got != tc.want || ok != tc.wantOK || counted != tc.counted {
				t.Errorf("EventMessage = %q, %v (counted %v); want %q, %v (counted %v)", got, ok, counted, tc.want, tc.wantOK, tc.counted)
			}
		})
	}
}
