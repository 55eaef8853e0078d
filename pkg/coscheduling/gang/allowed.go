package gang

import (
	"fmt"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/custom-scheduler/custom-scheduler/pkg/apis/config"
	"github.com/custom-scheduler/custom-scheduler/pkg/apis/scheduling/v1alpha1"
	"github.com/custom-scheduler/custom-scheduler/pkg/coscheduling/gangfit"
	"github.com/custom-scheduler/custom-scheduler/pkg/coscheduling/podgroup"
)

// AllowedNodes are the nodes PreFilter let a pod use (nil: every node), why says, for a node outside
// them, why not; keptOff are the nodes it keeps the pod off for the devices held there, each with
// why. Never changed once made, so a clone may share it (it is the cycle state Filter reads).
type AllowedNodes struct {
	nodes   sets.Set[string]
	why     string
	keptOff map[string]string
}

// Clone returns a itself: it is never changed.
func (a *AllowedNodes) Clone() fwk.StateData { return a }

// Filter is Filter's answer for node. Evicting pods on a node whose held devices the pod would take
// gives it no held device, nor does it bring a node into a domain: unresolvable.
func (a *AllowedNodes) Filter(node string) *fwk.Status {
	if why, ok := a.keptOff[node]; ok {
		return fwk.NewStatus(fwk.UnschedulableAndUnresolvable, why)
	}
	if a.nodes == nil || a.nodes.Has(node) {
		return nil
	}
	return fwk.NewStatus(fwk.UnschedulableAndUnresolvable, fmt.Sprintf("node %s %s", node, a.why))
}

// Allowed are the nodes a member of the group of key (a pod of no gang: "") that the step let on
// may use, and those it is kept off, for Filter; nil when its nodes are not narrowed (its Filter has
// nothing to check).
func (o PreFilterOut) Allowed(key string) *AllowedNodes {
	if o.Nodes == nil && len(o.KeptOff) == 0 {
		return nil
	}
	a := &AllowedNodes{nodes: o.Nodes, keptOff: o.KeptOff, why: "is outside the topology domain chosen for PodGroup " + key}
	if o.Offered {
		a.why = "is not among the planned nodes PodGroup " + key + " offers this member"
	}
	return a
}

// SignFragments are the batching fragments of pod, a member of the group of key whose PodGroup is pg:
// its group when its PreFilter narrows its nodes (a topology policy in force, def the profile's
// default, or a malformed one; or plannable: a placement plan may place it), so that only members of
// one gang may share a batched scheduling result; none otherwise.
func SignFragments(key string, pg *v1alpha1.PodGroup, pod *v1.Pod, def config.TopologyPolicy, plannable func(*v1.Pod) bool) []fwk.SignFragment {
	if policy, err := gangfit.PolicyFor(pg, pod, def); err == nil && policy.Empty() && !plannable(pod) {
		return nil
	}
	return []fwk.SignFragment{{Key: signFragmentGroup, Value: key}}
}

// signFragmentGroup names the fragment that ties a member with a topology policy to its gang.
const signFragmentGroup = "v1.Pod.Labels[" + v1alpha1.PodGroupLabel + "].TopologyPlacement()"

// Event is the PodGroup event of a fresh check (empty reason: none): GangInfeasible when the gang
// became infeasible, DomainChosen when the check chose a domain (never both).
func (o PreFilterOut) Event() (eventType, reason, message string) {
	if o.DomainChosen {
		return v1.EventTypeNormal, podgroup.ReasonDomainChosen, o.Placement.Message
	}
	if o.Checked && o.Infeasible && o.InfeasibleChanged {
		return v1.EventTypeWarning, podgroup.ReasonGangInfeasible, o.Message
	}
	return "", "", ""
}
