package gang

import (
	"fmt"

	"k8s.io/klog/v2"

	"github.com/custom-scheduler/custom-scheduler/pkg/apis/config"
	"github.com/custom-scheduler/custom-scheduler/pkg/apis/scheduling/v1alpha1"
	"github.com/custom-scheduler/custom-scheduler/pkg/coscheduling/gangfit"
	"github.com/custom-scheduler/custom-scheduler/pkg/coscheduling/podgroup"
)

// NotAdmitted is why a member is refused before its PreFilter step ("" Message: it is not), and the
// reason of the event it gets ("": none).
type NotAdmitted struct{ Reason, Message string }

// Admit fills in what the member's PodGroup pg (nil: missing) of group key says: its minMember, the
// rest of its spec the check reads, and the member's topology policy (see gangfit.PolicyFor; def is
// the profile's default). Or it says why the member is refused before its step: its PodGroup does
// not exist (no event: it appears in a moment, usually), or its policy is malformed.
func (in *PreFilterIn) Admit(key string, pg *v1alpha1.PodGroup, def config.TopologyPolicy) NotAdmitted {
	if pg == nil {
		return NotAdmitted{Message: fmt.Sprintf("PodGroup %s does not exist", key)}
	}
	policy, err := gangfit.PolicyFor(pg, in.Member, def)
	if err != nil {
		return NotAdmitted{podgroup.ReasonInvalidTopologyPolicy, fmt.Sprintf("PodGroup %s member %s: %v", key, klog.KObj(in.Member), err)}
	}
	in.Want, in.UID, in.Generation, in.MinResources, in.Policy = podgroup.MinMember(pg), pg.UID, pg.Generation, pg.Spec.MinResources, policy
	return NotAdmitted{}
}
