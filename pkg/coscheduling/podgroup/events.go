package podgroup

import (
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/custom-scheduler/custom-scheduler/pkg/apis/scheduling/v1alpha1"
)

// EventResource names PodGroup events for EventsToRegister: <plural>.<version>.<group>, the form the
// scheduler resolves to a dynamic informer.
const EventResource = "podgroups.v1alpha1." + v1alpha1.GroupName

// Hints are a gang plugin's queueing hints, one per kind of cluster event that can make a member
// schedulable (see Events).
type Hints struct {
	CapacityFreed, NodeChange, PodGroupChange, OwnUpdate, DeviceChange fwk.QueueingHintFn
}

// Events are the cluster events that can make a gang member schedulable, each with the hint that
// requeues only the members it concerns; devices: the scheduler models devices; inTree: the in-tree
// PodGroup API is served (the scheduler would watch an unserved API in vain).
func Events(h Hints, devices, inTree bool) []fwk.ClusterEventWithHint {
	events := []fwk.ClusterEventWithHint{
		// A new member that completes its group, or the last of minMember members to get its claims
		// made, lets the group in through the plugin's own pod handler (onPodAdd, onPodUpdate), not
		// through a pod-added event: every member PreEnqueue holds back waits in the queue's pool as
		// gated by this plugin, and the queue runs the hints of a gated pod on every event its gating
		// plugin registered. An AssignedPod/Add here would walk them all on every binding.
		//
		// Freed capacity may make an infeasible gang fit (this includes reservations released by a
		// rejected gang: the scheduler reports those as assigned pods deleted).
		{Event: fwk.ClusterEvent{Resource: fwk.AssignedPod, ActionType: fwk.Delete | fwk.UpdatePodScaleDown}, QueueingHintFn: h.CapacityFreed},
		{Event: fwk.ClusterEvent{Resource: fwk.Node, ActionType: fwk.Add | fwk.UpdateNodeAllocatable | fwk.UpdateNodeLabel | fwk.UpdateNodeTaint}, QueueingHintFn: h.NodeChange},
		// A PodGroup created, or its spec changed (e.g. minMember lowered), may let its members in.
		// Status-only updates (the plugin's own status patches) requeue nobody.
		{Event: fwk.ClusterEvent{Resource: EventResource, ActionType: fwk.Add | fwk.Update}, QueueingHintFn: h.PodGroupChange},
		// A member refused for malformed topology annotations is retried once they are fixed.
		{Event: fwk.ClusterEvent{Resource: fwk.TargetPod, ActionType: fwk.Update}, QueueingHintFn: h.OwnUpdate},
	}
	if devices {
		// Devices published or newly classed may make a gang whose members claim devices fit.
		for _, e := range []fwk.ClusterEvent{
			{Resource: fwk.ResourceSlice, ActionType: fwk.Add | fwk.Update},
			{Resource: fwk.DeviceClass, ActionType: fwk.Add | fwk.Update},
		} {
			events = append(events, fwk.ClusterEventWithHint{Event: e, QueueingHintFn: h.DeviceChange})
		}
		// Devices freed by a claim (deallocated, or deleted while allocated), or a PodGroup's claim
		// allocated, let the members in through the plugin's own claim handler (claimEventHandler),
		// for the same reason: a ResourceClaim/Update here would walk the held members on every claim
		// allocated at binding.
	}
	if inTree {
		events = append(events, fwk.ClusterEventWithHint{Event: fwk.ClusterEvent{Resource: InTreeEventResource, ActionType: fwk.Add | fwk.Update}, QueueingHintFn: h.PodGroupChange})
	}
	return events
}
