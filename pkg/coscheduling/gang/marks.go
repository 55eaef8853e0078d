package gang

import (
	"k8s.io/apimachinery/pkg/util/sets"
	fwk "k8s.io/kube-scheduler/framework"
)

// The marks a member's PreFilter leaves in its cycle state: for Filter, the nodes it allows
// (AllowedNodes); for PostFilter, whether it rejected the member whole (nothing is held), whether
// because its gang does not fit the free resources (PostFilter preempts for it), and the plan's offer
// (a PostFilter that missed it falls back). The keys are the plugin's (named "Coscheduling/...").
const (
	rejectedKey   fwk.StateKey = "Coscheduling/rejected-by-prefilter"
	infeasibleKey fwk.StateKey = "Coscheduling/infeasible"
	plannedKey    fwk.StateKey = "Coscheduling/planned"
	allowedKey    fwk.StateKey = "Coscheduling/allowed-nodes"
)

// Marks are what PreFilter left in a cycle for PostFilter.
type Marks struct {
	// Rejected: PreFilter rejected the member whole; Infeasible: its gang does not fit the free
	// resources, Tree: only with the other groups its job needs (it fits alone).
	Rejected, Infeasible, Tree bool
	// Planned: the plan narrowed the cycle to Offered (sorted).
	Planned bool
	Offered []string
}

// mark is a Marks kept in the cycle state; it is never changed once written.
type mark Marks

func (m mark) Clone() fwk.StateData { return m }

// MarksOf reads the marks PreFilter left in state.
func MarksOf(state fwk.CycleState) Marks {
	var m Marks
	if _, err := state.Read(rejectedKey); err == nil {
		m.Rejected = true
	}
	if d, err := state.Read(infeasibleKey); err == nil {
		m.Infeasible, m.Tree = true, d.(mark).Tree
	}
	if d, err := state.Read(plannedKey); err == nil {
		m.Planned, m.Offered = true, d.(mark).Offered
	}
	return m
}

// Reject refuses a member in PreFilter for msg, marking the cycle for PostFilter: rejected whole and,
// for a gang that does not fit the free resources, infeasible (tree: only with its job's other
// groups).
func Reject(state fwk.CycleState, msg string, infeasible, tree bool) (*fwk.PreFilterResult, *fwk.Status) {
	if infeasible {
		state.Write(infeasibleKey, mark{Tree: tree})
	}
	state.Write(rejectedKey, mark{})
	return nil, fwk.NewStatus(fwk.UnschedulableAndUnresolvable, msg)
}

// Apply is PreFilter's answer for a member of the group of key (a pod of no gang: "") once its step
// returned o, with the cycle's marks written: a rejection (Reject); else the nodes Filter allows and
// those it keeps the pod off (Allowed), the plan's offer marked for PostFilter, and the nodes as the
// result (nil: every node); Skip when nothing narrows the pod's nodes (Filter has nothing to check).
func (o PreFilterOut) Apply(state fwk.CycleState, key string) (*fwk.PreFilterResult, *fwk.Status) {
	if o.Reject {
		return Reject(state, o.Message, o.Infeasible, o.Tree)
	}
	a := o.Allowed(key)
	if a == nil {
		return nil, fwk.NewStatus(fwk.Skip)
	}
	if o.Offered {
		state.Write(plannedKey, mark{Offered: sets.List(o.Nodes)})
	}
	state.Write(allowedKey, a)
	if o.Nodes == nil {
		return nil, nil
	}
	return &fwk.PreFilterResult{NodeNames: o.Nodes}, nil
}

// Filter is Filter's answer for node in the cycle (see AllowedNodes.Filter); nil when PreFilter did
// not narrow the pod's nodes.
func Filter(state fwk.CycleState, node string) *fwk.Status {
	data, err := state.Read(allowedKey)
	if err != nil {
		return nil
	}
	return data.(*AllowedNodes).Filter(node)
}
