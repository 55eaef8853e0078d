package devices

// What a member claims: its own ResourceClaims (named, or made from a template), its PodGroup's, and
// the extended resources a DeviceClass backs, read from the scheduler's DRA state; members that claim
// alike are one kind of the check (see signature).

import (
	"encoding/json"
	"fmt"
	"hash/fnv"
	"slices"
	"strings"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	schedulingv1beta1 "k8s.io/api/scheduling/v1beta1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	resourcehelper "k8s.io/component-helpers/resource"
	"k8s.io/dynamic-resource-allocation/resourceclaim"
	fwk "k8s.io/kube-scheduler/framework"
)

// member is what one member claims: the unallocated claims of its own (deduplicated by UID among the
// members of the check; a claim several members share is left to the real filters), the claims of
// its PodGroup it uses (group: allocated or not, counted once for the gang, see workload.go), and the
// extended resources DRA backs, with their classes.
type member struct {
	claims   []*resourceapi.ResourceClaim
	group    []*resourceapi.ResourceClaim
	extended []extendedRequest
	// why says what of the member's claims the model leaves out ("" when nothing); pinned is set
	// when some claim is allocated already (it holds devices on its nodes, which the model does not
	// place).
	why    string
	pinned bool
	// templates names the member's claims made from templates ("claim=template", in spec order;
	// "" when some claim is not from a template), and pending is set when one of them is not
	// made (or not seen) yet: such a member claims what another member with the same templates,
	// whose claims are made, claims (see ForCheck).
	templates string
	pending   bool
}

type extendedRequest struct {
	name  v1.ResourceName
	class string
	count int64
}

// classedRequests are the pod's requests of extended resources a DeviceClass backs (DRA-backed
// extended resources, the DRAExtendedResource feature), sorted by name; none where the source does not
// read them.
func (s *Source) classedRequests(pod *v1.Pod) []extendedRequest {
	resolver := s.dra.DeviceClassResolver()
	if !s.extended || resolver == nil {
		return nil
	}
	var out []extendedRequest
	for name, q := range resourcehelper.PodRequests(pod, resourcehelper.PodResourcesOptions{}) {
		if !strings.Contains(string(name), "/") || q.IsZero() {
			continue
		}
		if class := resolver.GetDeviceClass(name); class != nil {
			out = append(out, extendedRequest{name: name, class: class.Name, count: q.Value()})
		}
	}
	slices.SortFunc(out, func(a, b extendedRequest) int { return strings.Compare(string(a.name), string(b.name)) })
	return out
}

// memberOf reads what a member claims. Allocated claims already hold their devices (they pin the
// member to their nodes, which the real filter enforces); claims not created yet are left to the real
// filters. A claim named by other pods too (shared) is, when joint is set (the pods are one gang's
// members) and it pins its users (see pinsUsers), read as a PodGroup's allocated claim: its users go
// only where its allocation's node selector allows. Otherwise it is left to the real filters (not
// allocated yet, a gang that waits at Permit cannot share it at all: see docs/coscheduling/devices.md).
// The extended resources a DeviceClass backs go into delegated, counted or not (a member whose
// extended-resource claim exists already has it).
func (s *Source) memberOf(pod *v1.Pod, shared sets.Set[string], joint bool, delegated sets.Set[v1.ResourceName]) member {
	var m member
	if !MayClaim(pod) {
		return m
	}
	var why, templates []string
	fromTemplate := true
	pg := s.podGroupOf(pod)
	for i := range pod.Spec.ResourceClaims {
		pc := &pod.Spec.ResourceClaims[i]
		if name, group, err := GroupClaimName(pod, pg, pc); group {
			// The PodGroup's claim: counted once for the gang (see workload.go).
			switch {
			case err != nil:
				why = append(why, err.Error())
			case name != "":
				claim, err := s.dra.ResourceClaims().Get(pod.Namespace, name)
				if err != nil {
					why = append(why, fmt.Sprintf("claim %s of PodGroup %s: %v", name, pg.Name, err))
					continue
				}
				m.group = append(m.group, inFlight(s.dra.ResourceClaims(), claim))
			}
			continue
		}
		if pc.ResourceClaimTemplateName != nil {
			templates = append(templates, pc.Name+"="+*pc.ResourceClaimTemplateName)
		} else {
			fromTemplate = false
		}
		name, _, err := resourceclaim.Name(pod, pc)
		if err != nil {
			if pc.ResourceClaimTemplateName != nil {
				m.pending = true
			} else {
				why = append(why, fmt.Sprintf("claim %s: %v", pc.Name, err))
			}
			continue
		}
		if name == nil {
			continue
		}
		if shared.Has(*name) {
			if joint {
				if claim, err := s.dra.ResourceClaims().Get(pod.Namespace, *name); err == nil && pinsUsers(claim, s.freed) {
					// Allocated: it pins its users to its nodes, as a PodGroup's allocated claim does.
					m.group = append(m.group, claim)
					continue
				}
			}
			why = append(why, fmt.Sprintf("claim %s is shared with other members", *name))
			continue
		}
		claim, err := s.dra.ResourceClaims().Get(pod.Namespace, *name)
		if err != nil {
			if pc.ResourceClaimTemplateName != nil {
				m.pending = true
			} else {
				why = append(why, fmt.Sprintf("claim %s: %v", *name, err))
			}
			continue
		}
		if claim.Status.Allocation != nil {
			m.pinned = true
			continue
		}
		m.claims = append(m.claims, claim)
	}
	claimed := pod.Status.ExtendedResourceClaimStatus != nil && pod.Status.ExtendedResourceClaimStatus.ResourceClaimName != ""
	for _, r := range s.classedRequests(pod) {
		delegated.Insert(r.name)
		if !claimed {
			m.extended = append(m.extended, r)
		}
	}
	m.why = strings.Join(why, "; ")
	if fromTemplate && len(templates) > 0 {
		m.templates = strings.Join(templates, ",")
	}
	return m
}

// fromTemplates gives each member whose claims from templates are not all made yet the claims of a
// member with the same templates whose claims are all made and unallocated (the claims a template
// makes have its spec, so the model counts them before they exist); a member with no such peer is
// left to the real filters. The resourceclaim controller makes the claims of a gang's members one by
// one: the attempt of the first member whose claims exist counts its peers' too.
func fromTemplates(members []member) {
	made := map[string]int{}
	for i, m := range members {
		if m.templates != "" && !m.pending && !m.pinned && m.why == "" && len(m.claims) > 0 {
			if _, ok := made[m.templates]; !ok {
				made[m.templates] = i
			}
		}
	}
	for i := range members {
		m := &members[i]
		if !m.pending {
			continue
		}
		if j, ok := made[m.templates]; ok && m.templates != "" && !m.pinned && m.why == "" {
			m.claims, m.pending = members[j].claims, false
			continue
		}
		m.why = strings.TrimPrefix(m.why+"; a claim from a template is not created yet", "; ")
	}
}

// sharedClaims are the claims named by more than one of the pods, less those of their PodGroups
// (counted once for the gang: see workload.go).
func (s *Source) sharedClaims(pods []*v1.Pod) sets.Set[string] {
	seen, shared := sets.New[string](), sets.New[string]()
	for _, p := range pods {
		for i := range p.Spec.ResourceClaims {
			if s.isGroupClaim(p, &p.Spec.ResourceClaims[i]) {
				continue
			}
			name, _, err := resourceclaim.Name(p, &p.Spec.ResourceClaims[i])
			if err != nil || name == nil {
				continue
			}
			if seen.Has(*name) {
				shared.Insert(*name)
			}
			seen.Insert(*name)
		}
	}
	return shared
}

// signature hashes the shape of what a member claims: its claims' specs and its extended requests.
func signature(m member) uint64 {
	h := fnv.New64a()
	for _, c := range m.claims {
		b, _ := json.Marshal(c.Spec)
		h.Write(b)
		h.Write([]byte{0})
	}
	for _, c := range m.group {
		// The very claim, not its shape: members of one PodGroup share it.
		fmt.Fprintf(h, "group:%s;", c.UID)
	}
	for _, e := range m.extended {
		fmt.Fprintf(h, "%s=%s:%d;", e.name, e.class, e.count)
	}
	return h.Sum64()
}

// classesOf are the device classes a member's claims and extended resources name, sorted.
func classesOf(m member) []string {
	set := sets.New[string]()
	for _, c := range slices.Concat(m.claims, m.group) {
		for _, r := range c.Spec.Devices.Requests {
			switch {
			case r.Exactly != nil:
				set.Insert(r.Exactly.DeviceClassName)
			case len(r.FirstAvailable) > 0:
				for _, sr := range r.FirstAvailable {
					set.Insert(sr.DeviceClassName)
				}
			}
		}
	}
	for _, e := range m.extended {
		set.Insert(e.class)
	}
	return sets.List(set)
}

// Claimers are the pods that may claim devices (see MayClaim), in order.
func Claimers(pods []*v1.Pod) []*v1.Pod {
	var out []*v1.Pod
	for _, p := range pods {
		if MayClaim(p) {
			out = append(out, p)
		}
	}
	return out
}

// MayClaim reports, cheaply, whether a pod may claim devices through DRA: it has ResourceClaims, or
// asks for an extended resource (which a DeviceClass may back).
func MayClaim(pod *v1.Pod) bool {
	if len(pod.Spec.ResourceClaims) > 0 {
		return true
	}
	for _, cs := range [][]v1.Container{pod.Spec.InitContainers, pod.Spec.Containers} {
		for i := range cs {
			for name := range cs[i].Resources.Requests {
				if strings.Contains(string(name), "/") {
					return true
				}
			}
			for name := range cs[i].Resources.Limits {
				if strings.Contains(string(name), "/") {
					return true
				}
			}
		}
	}
	return false
}

// GroupClaimName reports whether the pod's claim pc is one of pg's claims, as upstream binds it
// (resourceclaim.BindTo: the pod is in pg by spec.schedulingGroup, and pg.spec.resourceClaims has an
// entry of the same name and the same claim or template name), and then that claim's ResourceClaim:
// the one it names, or the one the resourceclaim controller made from its template (the PodGroup's
// status.resourceClaimStatuses; an error while that is not made yet; "" when the controller recorded
// that none is needed). A nil pg has no claims. Pure.
func GroupClaimName(pod *v1.Pod, pg *schedulingv1beta1.PodGroup, pc *v1.PodResourceClaim) (name string, group bool, err error) {
	if pg == nil {
		return "", false, nil
	}
	ref, err := resourceclaim.BindTo(pod, pg, pc)
	if err != nil || ref.Resource != "podgroups" {
		// Not in pg, or an entry of neither kind: the pod's own (the real plugin says what is wrong).
		return "", false, nil
	}
	for i := range pg.Spec.ResourceClaims {
		pgc := &pg.Spec.ResourceClaims[i]
		if pgc.Name != pc.Name {
			continue
		}
		n, _, err := resourceclaim.NameFromPodGroup(pg, pgc)
		if err != nil {
			return "", true, fmt.Errorf("claim %s of PodGroup %s/%s: %w", pc.Name, pg.Namespace, pg.Name, err)
		}
		if n == nil {
			return "", true, nil
		}
		return *n, true, nil
	}
	return "", false, nil
}

// podGroupOf is the in-tree PodGroup the pod names, when the source reads PodGroup-owned claims.
func (s *Source) podGroupOf(pod *v1.Pod) *schedulingv1beta1.PodGroup {
	if s == nil || s.group == nil || pod.Spec.SchedulingGroup == nil || pod.Spec.SchedulingGroup.PodGroupName == nil {
		return nil
	}
	return s.group(pod.Namespace, *pod.Spec.SchedulingGroup.PodGroupName)
}

// isGroupClaim reports whether the pod's claim pc is its PodGroup's (see GroupClaimName).
func (s *Source) isGroupClaim(pod *v1.Pod, pc *v1.PodResourceClaim) bool {
	_, group, _ := GroupClaimName(pod, s.podGroupOf(pod), pc)
	return group
}

// pinsUsers reports whether a claim the members share pins them to its nodes: it is allocated (in the
// API object: an allocation in flight may be a waiting member's own, and DynamicResources refuses the
// other users until it is written), and not only for pods a reservation's plan counts as leaving
// (freed: its allocation goes with them). Pure.
func pinsUsers(claim *resourceapi.ResourceClaim, freed sets.Set[types.UID]) bool {
	return claim.Status.Allocation != nil && (freed == nil || !onlyFor(claim, freed))
}

// inFlight is the claim with the allocation in flight for it, if any: the tracker's Get does not show
// one (GatherAllocatedState does count its devices), and a PodGroup's claim is in flight while the
// member whose cycle allocated it waits at Permit or binds, with other members still to place.
func inFlight(tracker fwk.ResourceClaimTracker, claim *resourceapi.ResourceClaim) *resourceapi.ResourceClaim {
	if claim.Status.Allocation != nil {
		return claim
	}
	pending := tracker.GetPendingAllocation(claim.UID)
	if pending == nil {
		return claim
	}
	c := claim.DeepCopy()
	c.Status.Allocation = pending
	return c
}

// heldMembers reads what pod claims, and what the pods held on each node (see KeptOff) claim there; a
// claim several of them name is left to the real filters.
func (s *Source) heldMembers(pod *v1.Pod, held map[string][]*v1.Pod) (own member, byNode map[string][]member) {
	all := []*v1.Pod{pod}
	for _, ms := range held {
		all = append(all, ms...)
	}
	shared := s.sharedClaims(all)
	delegated := sets.New[v1.ResourceName]()
	own = s.memberOf(pod, shared, false, delegated)
	byNode = make(map[string][]member, len(held))
	for node, ms := range held {
		for _, m := range ms {
			byNode[node] = append(byNode[node], s.memberOf(m, shared, false, delegated))
		}
	}
	return own, byNode
}
