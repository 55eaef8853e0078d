package gang

import (
	"fmt"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	fwk "k8s.io/kube-scheduler/framework"

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
