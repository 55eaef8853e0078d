package devices

import (
	"slices"
	"strings"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/custom-scheduler/custom-scheduler/pkg/coscheduling/gangfit"
)

// Devices of nominated pods. Upstream's nominator makes the Filter plugins count a pod nominated to a
// node (by a preemption or a reservation) as if it ran there, for pods of its priority or lower; the
// DynamicResources plugin has no PreFilterExtensions and never sees it, so the devices a nominated
// pod waits for look free to everyone until it binds. The whole-gang check counts them taken: a check
// made with the pods nominated against the gang (gangfit.New's claimed, see Claiming) allocates their
// claims on their nodes together with the members' (one Allocate call per count, the nominated pods'
// claims first), so a second gang neither plans nor preempts for the devices a first gang's
// preemption freed for itself. (A lone pod is kept off them in PreFilter: see KeptOff.)

var _ gangfit.ClaimingDevices = &Source{}

// Claiming implements gangfit.ClaimingDevices: a source like s whose checks count as taken, on the
// node each is nominated to, the devices of the claimed pods (those of the model: their own claims
// not allocated yet and shared with no member, and the extended resources DRA backs there).
func (s *Source) Claiming(claimed []*v1.Pod) gangfit.DeviceSource {
	if s == nil {
		return nil
	}
	var keep []*v1.Pod
	for _, p := range claimed {
		if p.Status.NominatedNodeName != "" && p.Spec.NodeName == "" && MayClaim(p) {
			keep = append(keep, p)
		}
	}
	if len(keep) == 0 {
		return s
	}
	c := *s
	c.claimed = keep
	return &c
}

// nominatedMembers reads what the claimed pods claim, by the node each is nominated to (none when
// there are no claimed pods); a claim shared with a member is left to the real filters.
func (s *Source) nominatedMembers(members []*v1.Pod) map[string][]member {
	if len(s.claimed) == 0 {
		return nil
	}
	uids := sets.New[types.UID]()
	for _, m := range members {
		uids.Insert(m.UID)
	}
	shared := s.sharedClaims(append(slices.Clone(members), s.claimed...))
	out := map[string][]member{}
	ignored := sets.New[v1.ResourceName]()
	claimed := slices.Clone(s.claimed)
	slices.SortFunc(claimed, func(a, b *v1.Pod) int {
		return strings.Compare(a.Namespace+"/"+a.Name, b.Namespace+"/"+b.Name)
	})
	for _, p := range claimed {
		if uids.Has(p.UID) {
			continue
		}
		m := s.memberOf(p, shared, false, ignored)
		if len(m.claims) == 0 && len(m.extended) == 0 {
			continue
		}
		out[p.Status.NominatedNodeName] = append(out[p.Status.NominatedNodeName], m)
	}
	return out
}

// heldOn are the claims the pods nominated to the node wait for there (cached per node).
func (c *Check) heldOn(ni fwk.NodeInfo) []*resourceapi.ResourceClaim {
	ms := c.nominated[ni.Node().Name]
	if len(ms) == 0 {
		return nil
	}
	if claims, ok := c.held[ni.Node().Name]; ok {
		return claims
	}
	serial := 0
	var claims []*resourceapi.ResourceClaim
	for _, m := range ms {
		claims = append(claims, claimsOn(m, ni, &serial)...)
	}
	if c.held == nil {
		c.held = map[string][]*resourceapi.ResourceClaim{}
	}
	c.held[ni.Node().Name] = claims
	return claims
}
