package gang

import (
	"slices"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/custom-scheduler/custom-scheduler/pkg/coscheduling/gangfit"
)

// The checks a member's step asks for (see Gang.Decide). A check counts the snapshot's nodes, and,
// for members that claim devices, asks the DRA allocator: it may take a while (the device model's
// budget is 2 s), so the plugin runs it outside its lock, where no queueing hint or event handler
// waits on it, and hands the result back to the step. A Job holds everything the check reads; Run
// is a pure function of it (and of the shared capacity table, which has a lock of its own).

// Job is a check the step asks for: the gang whole (the members still missing from the quorum), or,
// with Extra, where one member of a gang whose quorum is met goes.
type Job struct {
	Extra bool
	// Key is the feasibility cache's key the check is made under (a gang check's).
	Key  FeasibilityKey
	Gang string
	// Candidates are the members to place, Need of them; Counted the members already counted toward
	// the quorum (their nodes are taken); Claimed the pods nominated to nodes the gang leaves room for.
	Candidates, Counted, Claimed []*v1.Pod
	Need                         int
	Nodes                        []fwk.NodeInfo
	MinResources                 v1.ResourceList
	// Policy is the gang's topology policy; Pinned the domains its bound or reserved members pin;
	// Avoid the domains others gather in or that refused it recently.
	Policy    gangfit.Policy
	Pinned    map[string]string
	Avoid     gangfit.Avoid
	Plannable bool
	Logger    klog.Logger
	// Together are the other groups of the gang's job (Job is its root's key) that the check places
	// with the gang's own members (see gangfit.CheckTogether).
	Together []gangfit.Group
	Job      string
}

// Done is a Job's result: the check's answer, the placement chosen (nil: no topology policy, or the
// gang does not fit), and the plan made.
type Done struct {
	job       *Job
	Result    gangfit.Result
	Placement *gangfit.Placement
	Plan      *gangfit.PlacementPlan
}

// Run makes the check, over fit's shared tables and device model.
func (j *Job) Run(fit *gangfit.Shared) *Done {
	d := &Done{job: j}
	if j.Extra {
		f := gangfit.New(j.Logger, j.Gang, j.Candidates, 1, j.Nodes, nil, j.Claimed, fit, false)
		p := gangfit.ExtraMemberPlacement(f, j.Policy, j.Pinned, j.Nodes)
		f.Done()
		d.Placement = &p
		return d
	}
	res, f := gangfit.Check(j.Logger, j.Gang, j.Candidates, j.Need, j.Nodes, j.MinResources, j.Counted, j.Claimed, fit)
	d.Result = j.place(d, res, f)
	f.Done()
	if d.Result.Feasible && len(j.Together) > 0 {
		// The job's other groups with it, once its own check has released the shared table.
		groups := append([]gangfit.Group{{Key: j.Gang, Candidates: j.Candidates, Need: j.Need}}, j.Together...)
		if t := gangfit.CheckTogether(j.Logger, j.Job, groups, j.Nodes, j.Claimed, fit); !t.Feasible {
			d.Result, d.Placement, d.Plan = t, nil, nil
		}
	}
	return d
}

// place gives a gang that fits its domain (its topology policy's) and its plan, over the check f.
func (j *Job) place(d *Done, res gangfit.Result, f *gangfit.Fit) gangfit.Result {
	if res.Feasible && !j.Policy.Empty() {
		if f == nil {
			p := gangfit.PinnedPlacement(j.Policy, j.Pinned, j.Nodes)
			d.Placement = &p
		} else if p, ok := gangfit.ChoosePlacementAvoiding(f, j.Policy, j.Pinned, j.Avoid); ok {
			d.Placement = &p
		} else {
			res = gangfit.Result{Message: "PodGroup " + j.Gang + " (topology policy from " + j.Policy.Source + "): " + p.Message, Shortfall: p.Shortfall}
		}
	}
	if res.Feasible && j.Plannable {
		d.Plan = gangfit.PlanPlacement(f, d.Placement)
	}
	return res
}

// For reports whether d is the result of a job like j: the same kind, gang, cache key (the epoch
// aside: an event during the check makes the next member check again, as the key records), need,
// and candidates.
func (d *Done) For(j *Job) bool {
	if d == nil || d.job == nil {
		return false
	}
	o := d.job
	k := o.Key
	k.Epoch = j.Key.Epoch
	return o.Extra == j.Extra && o.Gang == j.Gang && o.Need == j.Need && k.Matches(j.Key) && sameUIDs(o.Candidates, j.Candidates) &&
		slices.EqualFunc(o.Together, j.Together, func(a, b gangfit.Group) bool { return a.Key == b.Key && a.Need == b.Need })
}

// sameUIDs reports whether a and b are the same pods, in any order.
func sameUIDs(a, b []*v1.Pod) bool {
	if len(a) != len(b) {
		return false
	}
	uids := sets.New[types.UID]()
	for _, p := range a {
		uids.Insert(p.UID)
	}
	return !slices.ContainsFunc(b, func(p *v1.Pod) bool { return !uids.Has(p.UID) })
}
