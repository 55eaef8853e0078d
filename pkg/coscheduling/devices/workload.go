package devices

import (
	"fmt"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	schedulingv1beta1 "k8s.io/api/scheduling/v1beta1"
	"k8s.io/component-helpers/scheduling/corev1/nodeaffinity"
	"k8s.io/dynamic-resource-allocation/resourceclaim"
)

// PodGroup-owned ResourceClaims (KEP-5729, the DRAWorkloadResourceClaims gate: beta and off by default
// in 1.37; it needs GenericWorkload, so a scheduler with it on also runs upstream's pod-group cycle).
// An in-tree PodGroup (scheduling.k8s.io/v1beta1) lists claims in spec.resourceClaims, each naming a
// ResourceClaim (resourceClaimName) or a ResourceClaimTemplate (resourceClaimTemplateName). A member
// (spec.schedulingGroup.podGroupName) uses one by listing, in its own spec.resourceClaims, an entry
// equal to it: the same name and the same claim or template name (k8s.io/dynamic-resource-allocation's
// resourceclaim.BindTo). Then, upstream:
//   - the resourceclaim controller makes one claim from the template for the PodGroup (owned by it,
//     named <podgroup>-<claim>-xxxxx, recorded in the PodGroup's status.resourceClaimStatuses: its
//     syncPodGroup/handlePodGroupClaim), and names that same claim in every member's
//     status.resourceClaimStatuses; a named claim is the user's;
//   - the DynamicResources plugin allocates it once, for the first member (later members of the same
//     pod-group cycle reuse the allocation in flight), and reserves it for the PodGroup, not a pod:
//     status.reservedFor holds one entry {scheduling.k8s.io, podgroups, name, uid}
//     (podResourceClaimBindings); every member then finds it allocated and reserved for it;
//   - the claim stays allocated while the PodGroup exists: members that finish or are evicted do not
//     free it (the controller drops the PodGroup's reservation, and so the allocation, only once the
//     PodGroup is gone; upstream's PodGroupPostFilter, deallocatePodGroupClaims, may drop it for a
//     group none of whose members is scheduled).
//
// The whole-gang check reads such a claim as one claim of the gang, never one per member: not
// allocated yet, its devices are taken once on each node counted for the members that use it (with
// node-local devices only, where its allocation pins every user to one node, a node holds all of the
// gang's users or none); allocated (or in flight), its devices are taken already and the members go
// only where its allocation's node selector allows. Preemption and a reservation's plan never count
// its devices as freed by pods that leave: it is reserved for the PodGroup (see freeable, onlyFor).
//
// Where the scheduler's gate is off, or the in-tree API is not served, the source has no lookup and
// nothing here applies: such claims are read as any claim the members name (a claim shared by
// members is left to the real filters), as before.

// GroupLookup returns the in-tree PodGroup namespace/name, or nil when there is none (or it is not
// read).
type GroupLookup func(namespace, name string) *schedulingv1beta1.PodGroup

// ReadsGroupClaims decides whether the device model reads PodGroup-owned claims: only where the
// scheduler's DRAWorkloadResourceClaims gate is on (so that its DynamicResources plugin binds them to
// the PodGroup too) and the in-tree PodGroups are read (served, and their informer started).
func ReadsGroupClaims(gate, inTreeRead bool) bool { return gate && inTreeRead }

// WithGroupClaims returns a source like s that reads the PodGroup-owned claims of members through
// lookup (s itself when either is nil).
func (s *Source) WithGroupClaims(lookup GroupLookup) *Source {
	if s == nil || lookup == nil {
		return s
	}
	c := *s
	c.group = lookup
	return &c
}

// groupPlacement is where the unallocated and allocated PodGroup claims of a kind's members put them.
type groupPlacement struct {
	// pending are the claims not allocated yet: allocated once, on the node with the members.
	pending []*resourceapi.ResourceClaim
	// on are the node selectors of the allocated ones (allocations in flight included): every member
	// goes where all of them allow.
	on []*nodeaffinity.NodeSelector
}

// placeGroupClaims splits a kind's PodGroup claims into those still to allocate and the node
// selectors of those allocated. Pure.
func placeGroupClaims(claims []*resourceapi.ResourceClaim) (groupPlacement, error) {
	var out groupPlacement
	for _, c := range claims {
		if c.Status.Allocation == nil {
			out.pending = append(out.pending, c)
			continue
		}
		if c.Status.Allocation.NodeSelector == nil {
			continue
		}
		sel, err := nodeaffinity.NewNodeSelector(c.Status.Allocation.NodeSelector)
		if err != nil {
			return groupPlacement{}, fmt.Errorf("the node selector of claim %s/%s's allocation: %w", c.Namespace, c.Name, err)
		}
		out.on = append(out.on, sel)
	}
	return out, nil
}

// allows reports whether the allocated PodGroup claims let members onto node.
func (g groupPlacement) allows(node *v1.Node) bool {
	for _, sel := range g.on {
		if !sel.Match(node) {
			return false
		}
	}
	return true
}

// wholeOnOneNode decides whether a kind's members must all go to one node for its PodGroup claims:
// some is still to allocate, every device that could be allocated is node-local (no slice serves
// more than one node: the allocation's node selector is then that one node), and every member of
// the check is of the kind (a mixed gang is counted as a relaxation: a node holds as many as fit).
// Pure.
func wholeOnOneNode(pendingGroupClaims int, nodeless bool, kindMembers, members int) bool {
	return pendingGroupClaims > 0 && !nodeless && kindMembers == members
}

// ClaimFreesOrPins reports whether a claim's change (oldClaim nil: added; newClaim nil: deleted) may
// change a whole-gang check: devices freed (an allocation dropped, or an allocated claim deleted), or
// a PodGroup's own claim allocated or freed (it pins its users to its nodes). Pure.
func ClaimFreesOrPins(oldClaim, newClaim *resourceapi.ResourceClaim) bool {
	allocated := func(c *resourceapi.ResourceClaim) bool { return c != nil && c.Status.Allocation != nil }
	if allocated(oldClaim) && !allocated(newClaim) {
		return true
	}
	if allocated(oldClaim) == allocated(newClaim) {
		return false
	}
	for _, c := range []*resourceapi.ResourceClaim{oldClaim, newClaim} {
		if c == nil {
			continue
		}
		for _, ref := range c.OwnerReferences {
			if ref.Kind == "PodGroup" {
				return true
			}
		}
	}
	return false
}

// ClaimFreed is a claim's change (oldClaim nil: added; newClaim nil: deleted) as the members waiting
// for devices take it: ok when it may change a whole-gang check (see ClaimFreesOrPins), with the claim
// (the old one, else the new) and whether it is allocated now. Pure.
func ClaimFreed(oldClaim, newClaim *resourceapi.ResourceClaim) (claim *resourceapi.ResourceClaim, allocated, ok bool) {
	if !ClaimFreesOrPins(oldClaim, newClaim) {
		return nil, false, false
	}
	claim = oldClaim
	if claim == nil {
		claim = newClaim
	}
	return claim, newClaim != nil && newClaim.Status.Allocation != nil, true
}

// ClaimOrder says why a member may not be placed because of the order of its claims ("" when it may).
// Upstream's DynamicResources plugin (1.37, pod-group cycle with DRAWorkloadResourceClaims) keeps, in
// Filter, the results of the claims it allocates on the node followed by the allocations in flight of
// claims shared with members placed earlier (the PodGroup's claim), and Reserve hands them out in the
// order of the pod's spec.resourceClaims: a PodGroup claim listed before a claim of the member's own
// gets that claim's devices and the other way round, so a member binds with the wrong devices or, in
// PreBind, not at all (a gang bound in part). The claim the plugin makes for a DRA-backed extended
// resource always comes last, after any PodGroup claim. Only where the source reads PodGroup claims
// ("" for a nil source: the scheduler models no devices).
func (s *Source) ClaimOrder(pod *v1.Pod) string {
	pg := s.podGroupOf(pod)
	if pg == nil {
		return ""
	}
	extended := ""
	if reqs := s.classedRequests(pod); len(reqs) > 0 {
		extended = string(reqs[0].name)
	}
	return claimOrder(pod, pg, extended)
}

// claimOrder is ClaimOrder's decision: extended names a DRA-backed extended resource the pod asks for
// ("" when none). Pure.
func claimOrder(pod *v1.Pod, pg *schedulingv1beta1.PodGroup, extended string) string {
	group := ""
	for i := range pod.Spec.ResourceClaims {
		pc := &pod.Spec.ResourceClaims[i]
		if _, isGroup, _ := GroupClaimName(pod, pg, pc); isGroup {
			if group == "" {
				group = pc.Name
			}
			continue
		}
		if group != "" {
			return fmt.Sprintf("the pod lists PodGroup %s's claim %q before its own claim %q in spec.resourceClaims: in this order "+
				"the DynamicResources plugin of Kubernetes 1.37 can give one claim the other's devices (its Filter keeps the allocations "+
				"in flight for claims shared with other members after the new ones, its Reserve hands them out in the pod's order); "+
				"list the PodGroup's claims after the pod's own (spec.resourceClaims cannot change: make the pod again)", pg.Name, group, pc.Name)
		}
	}
	if group != "" && extended != "" {
		return fmt.Sprintf("the pod uses PodGroup %s's claim %q and the DRA-backed extended resource %s: the DynamicResources plugin of "+
			"Kubernetes 1.37 places the claim it makes for the extended resource after the PodGroup's and can give one the other's devices; "+
			"ask for the devices through a claim of the pod's own, listed before the PodGroup's", pg.Name, group, extended)
	}
	return ""
}

// ClaimsUnmade reports whether the pod has a claim from a template whose ResourceClaim the
// resourceclaim controller has not made yet (no entry in status.resourceClaimStatuses), not counting
// its in-tree PodGroup's claims, which are made for the PodGroup. A pod in an in-tree PodGroup the
// source does not know yet is not held (whether its claims are the PodGroup's cannot be told). The
// members that wait for their peers' claims (see the plugin's PreEnqueue) are held on this word.
func (s *Source) ClaimsUnmade(pod *v1.Pod) bool {
	if s == nil || len(pod.Spec.ResourceClaims) == 0 {
		return false
	}
	pg := s.podGroupOf(pod)
	if pg == nil && s.group != nil && pod.Spec.SchedulingGroup != nil && pod.Spec.SchedulingGroup.PodGroupName != nil {
		return false
	}
	return ClaimsUnmade(pod, pg)
}

// ClaimsUnmade is Source.ClaimsUnmade with the pod's in-tree PodGroup given (nil: none, or PodGroup-owned
// claims are not read). Pure.
func ClaimsUnmade(pod *v1.Pod, pg *schedulingv1beta1.PodGroup) bool {
	for i := range pod.Spec.ResourceClaims {
		pc := &pod.Spec.ResourceClaims[i]
		if pc.ResourceClaimTemplateName == nil {
			continue
		}
		if _, group, _ := GroupClaimName(pod, pg, pc); group {
			continue
		}
		if _, _, err := resourceclaim.Name(pod, pc); err != nil {
			return true
		}
	}
	return false
}
