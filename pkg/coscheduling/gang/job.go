package gang

import (
	"fmt"
	"maps"
	"slices"
	"time"

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
	// with the gang's own members (see gangfit.FitTogether).
	Together []gangfit.Group
	Job      string
	// Alternatives are the other ways of Together, tried in turn when the job does not fit with it:
	// K of N groups not alike, where none stands for another (see PreFilterIn.neededWays).
	Alternatives [][]gangfit.Group
	// Aside are the pods nominated to nodes that Claimed leaves out as members of Together (see
	// notOfGroups): a check that places fewer of the job's groups (a composite's below the job's top,
	// see only) counts the room nominated to those it leaves out as taken.
	Aside []*v1.Pod
	// Domain is the domain the job holds its groups in (nil: none).
	Domain *TreeDomain
	// RefusedDevices are, by node, the members whose devices the real filter refused there in an
	// earlier attempt (see DeviceRefusals): the check gives up its out-of-time relaxation there for
	// their kinds.
	RefusedDevices map[string][]types.UID
}

// TreeDomain is the domain of a required topology key that a job of several roles holds its groups in,
// or of its preferred keys where the job fits one (see tree.Branch.DomainAbove).
type TreeDomain struct {
	// Composite is the key of the composite whose domain it is, Key its required label key ("" for
	// none), Value the domain its bound or reserved members pin ("": the check chooses one where the
	// job fits).
	Composite, Key, Value string
	// Preferred are the composite's preferred keys, narrowest first; Pinned the domain of each key
	// (Key's too) that its bound or reserved members share ("" where they are in several; nil: none is
	// placed).
	Preferred []string
	Pinned    map[string]string
	// Refused are the domains the filters refused one of the job's groups in recently (see
	// Gang.RefusedDomains): the job's domain is chosen away from them while another fits.
	Refused map[string]time.Time
	// Nominated are the domains the members of the groups under the composite are nominated in
	// (see gangfit.Avoid.Nominated): chosen first while they fit.
	Nominated map[string]bool
	// Leaves are the keys of the groups under the composite; Inner the domains of the composites below
	// it on the group's path with a required key of their own, outermost first (see treeDomain), and
	// Preferring those of the composites below it with preferred keys only.
	Leaves     []string
	Inner      []*TreeDomain
	Preferring []*TreeDomain
}

// Policy is the job's topology policy, as a flat gang's.
func (d *TreeDomain) Policy() gangfit.Policy {
	return gangfit.Policy{Required: d.Key, Preferred: d.Preferred, Source: "composite " + d.Composite}
}

// pinnedNodes are the nodes of the required domains d and its inner composites' placed members pin
// (nil: none is pinned).
func (d *TreeDomain) pinnedNodes(nodes []fwk.NodeInfo) sets.Set[string] {
	return pinnedIn(append([]*TreeDomain{d}, d.Inner...), nodes)
}

// pinnedIn are the nodes in every domain of tds that is pinned (nil: none is).
func pinnedIn(tds []*TreeDomain, nodes []fwk.NodeInfo) sets.Set[string] {
	var out sets.Set[string]
	for _, td := range tds {
		if td.Value == "" {
			continue
		}
		on := gangfit.PinnedPlacement(gangfit.Policy{Required: td.Key}, map[string]string{td.Key: td.Value}, nodes).Nodes
		if out == nil {
			out = on
		} else {
			out = out.Intersection(on)
		}
	}
	return out
}

// equal reports whether d and o are the same domain.
func (d *TreeDomain) equal(o *TreeDomain) bool {
	return d.Composite == o.Composite && d.Key == o.Key && d.Value == o.Value && slices.Equal(d.Preferred, o.Preferred) && maps.Equal(d.Pinned, o.Pinned) &&
		maps.Equal(d.Refused, o.Refused) && slices.EqualFunc(d.Inner, o.Inner, (*TreeDomain).equal) &&
		slices.EqualFunc(d.Preferring, o.Preferring, (*TreeDomain).equal)
}

// Done is a Job's result: the check's answer, the placement chosen (nil: no topology policy, or the
// gang does not fit), and the plan made.
type Done struct {
	job       *Job
	Result    gangfit.Result
	Placement *gangfit.Placement
	Plan      *gangfit.PlacementPlan
	// Short is the job's domain ("key=value") the group was found short in, when it was: its
	// members' next attempts avoid it while another fits (see Gang.Refuse).
	Short string
}

// Run makes the check, over fit's shared tables and device model: with Together, then, while the
// job does not fit with the groups it places (Tree), with each of its Alternatives in turn, but those
// the check cannot judge (see judged); the first that fits is the result, else Together's. At most
// 1 + len(Alternatives) checks.
func (j *Job) Run(fit *gangfit.Shared) *Done {
	fit = fit.WithRefused(j.RefusedDevices)
	d := j.run(fit)
	for _, way := range j.Alternatives {
		if d.Result.Feasible || !d.Result.Tree {
			break
		}
		if !judged(way) {
			continue
		}
		c := j.choosing(way)
		if a := c.run(fit); a.Result.Feasible {
			a.job = j
			return a
		}
	}
	return d
}

// choosing is j placing groups instead of Together (one of its Alternatives): only (see there) over
// every pod j claims or sets aside, so the room nominated to the members of the groups it leaves out
// is taken against it, and that of the groups it places is theirs.
func (j *Job) choosing(groups []gangfit.Group) Job {
	c := *j
	c.Claimed, c.Aside, c.Alternatives = nil, append(slices.Clone(j.Claimed), j.Aside...), nil
	return c.only(groups)
}

// run is Run's check with Together.
func (j *Job) run(fit *gangfit.Shared) *Done {
	d := &Done{job: j}
	if j.Extra {
		f := gangfit.New(j.Logger, j.Gang, j.Candidates, 1, j.Nodes, nil, j.Claimed, fit, false)
		p := gangfit.ExtraMemberPlacement(f, j.Policy, j.Pinned, j.Nodes)
		f.Done()
		d.Placement = &p
		return d
	}
	if td := j.Domain; td != nil {
		on, anywhere := j, (*Done)(nil)
		if under := togetherUnder(j.Together, td.Leaves); len(under) < len(j.Together) {
			// Groups of the job outside the composite whose domain it is (a composite below the
			// job's top): the whole job is checked anywhere first, then the composite's groups in
			// its domain.
			if anywhere = j.check(fit.Private(), nil); !anywhere.Result.Feasible {
				return anywhere
			}
			c := j.only(under)
			on = &c
		}
		if d := on.inDomain(td, fit); d != nil {
			d.job = j
			return d
		}
		if anywhere != nil {
			return anywhere
		}
	}
	return j.check(fit, nil)
}

// inDomain is Run's check of a job with a domain (td): the job's domain, then the domains of the
// composites below it (see within); nil where the job is checked anywhere instead (no domain of its
// preferred keys holds it, and it has no required key).
func (j *Job) inDomain(td *TreeDomain, fit *gangfit.Shared) *Done {
	p, ok, tried := j.jobDomain(td, fit, nil)
	// An outer domain none of whose inner domains holds their groups is avoided, and the next
	// tried, at most once each.
	for ok && p.Level != gangfit.LevelAnywhere && len(td.Inner) > 0 {
		in, short := j.within(td, onNodes(j.Nodes, p.Nodes), fit)
		if short == nil {
			return in
		}
		if td.Value != "" || tried.Has(p.Key+"="+p.Value) {
			return short
		}
		tried.Insert(p.Key + "=" + p.Value)
		p, ok, tried = j.jobDomain(td, fit, tried)
	}
	switch {
	case !ok && td.Key != "":
		return &Done{Result: gangfit.Result{Tree: true, Message: fmt.Sprintf("PodGroup %s: no domain of %s fits the groups its job %s needs placed in one (its required topology)", j.Gang, td.Key, td.Composite)}}
	case ok && p.Level != gangfit.LevelAnywhere:
		// The checks within the job's domain read its nodes only: the shared capacity table is
		// kept for the whole snapshot's.
		in := *j
		in.Nodes = onNodes(j.Nodes, p.Nodes)
		if d := in.checkPreferring(p, td.Preferring, fit); d.Result.Feasible || p.Level != gangfit.LevelPreferred {
			return d
		}
		// A preferred domain never refuses a job: where the groups' own policies do not hold
		// there, the job is checked anywhere (within its required domain, if it has one, the
		// placement is never preferred).
	}
	if len(td.Inner) > 0 {
		in, short := j.within(td, j.Nodes, fit)
		if short != nil {
			return short
		}
		return in
	}
	return nil
}

// jobDomain is the job's domain of td's policy (see gangfit.JobDomain), away from the domains
// ("key=value") tried already (tried, kept as refused until far on) as well as those refused recently.
func (j *Job) jobDomain(td *TreeDomain, fit *gangfit.Shared, tried sets.Set[string]) (gangfit.Placement, bool, sets.Set[string]) {
	avoid := gangfit.Avoid{Refused: td.Refused, Nominated: td.Nominated}
	if tried.Len() > 0 {
		avoid.Refused = maps.Clone(td.Refused)
		if avoid.Refused == nil {
			avoid.Refused = map[string]time.Time{}
		}
		for domain := range tried {
			// Later than any refusal: tried only when nothing else fits.
			avoid.Refused[domain] = time.Unix(1<<40, 0)
		}
	}
	p, ok := gangfit.JobDomain(j.Logger, td.Composite, j.groups(), td.Policy(), td.Pinned, avoid, j.Nodes, j.Claimed, fit)
	if tried == nil {
		tried = sets.New[string]()
	}
	return p, ok, tried
}

// within checks the job on nodes (its outer domain's, or every node) narrowed to one domain of each
// of td's inner composites' required key, outermost first (each chosen where the groups under it fit
// together, see gangfit.JobDomain), and the group's own check there with the groups under the
// innermost (see checkPreferring): ok (short nil) with the check's result, or short, the job's
// refusal when some inner composite has no domain that holds its groups.
func (j *Job) within(td *TreeDomain, nodes []fwk.NodeInfo, fit *gangfit.Shared) (ok, short *Done) {
	in := *j
	in.Nodes = nodes
	var p gangfit.Placement
	for _, id := range td.Inner {
		var found bool
		if in, p, found = in.under(id, fit); !found {
			return nil, &Done{Result: gangfit.Result{Tree: true, Message: fmt.Sprintf("PodGroup %s: no domain of %s fits the groups %s needs placed in one (its required topology) within its job's", j.Gang, id.Key, id.Composite)}}
		}
		in.Nodes = onNodes(in.Nodes, p.Nodes)
	}
	return in.checkPreferring(p, td.Preferring, fit), nil
}

// checkPreferring is the group's own check of j (on its nodes, within placement p), made first
// within one domain of each composite below with preferred keys only (preferring, outermost first,
// see tree.Branch.PreferringBelow), the first of its keys where the groups under it fit together (see
// gangfit.JobDomain; the one its placed members share while they fit there). A preferred domain never
// refuses: where none of a composite's keys holds its groups it narrows nothing, and where the
// group's check fails within the preferred domains it is made without them.
func (j *Job) checkPreferring(p gangfit.Placement, preferring []*TreeDomain, fit *gangfit.Shared) *Done {
	in, at := *j, p
	for _, id := range preferring {
		var q gangfit.Placement
		var found bool
		if in, q, found = in.under(id, fit); found && q.Level != gangfit.LevelAnywhere {
			in.Nodes, at = onNodes(in.Nodes, q.Nodes), q
		}
	}
	if at.Key != p.Key || at.Value != p.Value {
		if d := in.check(fit.Private(), &at); d.Result.Feasible {
			return d
		}
	}
	return j.check(fit.Private(), &p)
}

// only is j placing groups (some of j.Together) with the gang's own: the room nominated to the
// members of the groups it leaves out is taken against it, as against any check that does not place
// them (see notOfGroups). Of a job that preempted in parts, a replica's domain is chosen away from the
// room the plan nominated to the other replicas, which the job's whole check set aside.
func (j *Job) only(groups []gangfit.Group) Job {
	c := *j
	c.Together = groups
	if len(j.Aside) > 0 { // a flat gang's check sets nothing aside: nothing to copy
		c.Aside = ofGroups(j.Aside, groups)
		c.Claimed = append(slices.Clone(j.Claimed), notOfGroups(j.Aside, groups)...)
	}
	return c
}

// under is j placing, with the gang's own, only its groups under the composite of id (see only), and
// the domain of id's policy where they fit together on j's nodes (see gangfit.JobDomain). The
// composites of a job's domain are on the group's path, each below the last: narrowing j, then the
// result, takes the groups under the innermost.
func (j Job) under(id *TreeDomain, fit *gangfit.Shared) (Job, gangfit.Placement, bool) {
	in := j.only(togetherUnder(j.Together, id.Leaves))
	p, found := gangfit.JobDomain(j.Logger, id.Composite, in.groups(), id.Policy(), id.Pinned, gangfit.Avoid{Refused: id.Refused, Nominated: id.Nominated}, in.Nodes, in.Claimed, fit.Private())
	return in, p, found
}

// togetherUnder are the groups among groups whose keys are in leaves.
func togetherUnder(groups []gangfit.Group, leaves []string) []gangfit.Group {
	var out []gangfit.Group
	for _, g := range groups {
		if slices.Contains(leaves, g.Key) {
			out = append(out, g)
		}
	}
	return out
}

// check is a whole-gang Job's check on its nodes, within the job's domain (nil: none): the gang's own
// check and placement, then the job's other groups with it.
func (j *Job) check(fit *gangfit.Shared, domain *gangfit.Placement) *Done {
	d := &Done{job: j}
	on := j
	// Its own check (and its own domain's choice) places its members only: the room nominated to the
	// groups it places with it is theirs, taken here (see only); the job's check sets it aside.
	res, f := gangfit.Check(on.Logger, on.Gang, on.Candidates, on.Need, on.Nodes, on.MinResources, on.Counted, on.only(nil).Claimed, fit)
	d.Result = on.place(d, res, f)
	f.Done()
	if !d.Result.Feasible && domain != nil {
		// Short in its job's domain: preempting for the group alone would not know the domain.
		d.Result.Tree, d.Result.Message = true, "in "+domain.Key+"="+domain.Value+", its job's domain: "+d.Result.Message
		d.Short = domain.Key + "=" + domain.Value
	}
	if d.Result.Feasible && len(on.Together) > 0 {
		// The job's other groups with it, once its own check has released the shared table, and,
		// when they fit, planned with it: its members take only the places planned for them.
		t, p := gangfit.FitTogether(on.Logger, on.Job, on.groups(), on.Nodes, on.Claimed, fit, on.Plannable, d.Placement)
		switch {
		case !t.Feasible:
			d.Result, d.Placement, d.Plan = t, nil, nil
		case p != nil:
			d.Plan = p
		}
	}
	if d.Result.Feasible && d.Placement == nil && domain != nil {
		d.Placement = domain
	}
	return d
}

// groups are the gang's own and the job's other groups the check places with it.
func (j *Job) groups() []gangfit.Group {
	return append([]gangfit.Group{{Key: j.Gang, Candidates: j.Candidates, Need: j.Need}}, j.Together...)
}

// onNodes are the nodes named in names.
func onNodes(nodes []fwk.NodeInfo, names sets.Set[string]) []fwk.NodeInfo {
	out := make([]fwk.NodeInfo, 0, names.Len())
	for _, ni := range nodes {
		if n := ni.Node(); n != nil && names.Has(n.Name) {
			out = append(out, ni)
		}
	}
	return out
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
// candidates, and groups placed with it (each way).
func (d *Done) For(j *Job) bool {
	if d == nil || d.job == nil {
		return false
	}
	o := d.job
	k := o.Key
	k.Epoch = j.Key.Epoch
	return o.Extra == j.Extra && o.Gang == j.Gang && o.Need == j.Need && k.Matches(j.Key) && sameUIDs(o.Candidates, j.Candidates) &&
		sameGroups(o.Together, j.Together) && slices.EqualFunc(o.Alternatives, j.Alternatives, sameGroups) &&
		(o.Domain == nil) == (j.Domain == nil) && (o.Domain == nil || o.Domain.equal(j.Domain))
}

// sameGroups reports whether a and b place the same groups, each needing as many of the same
// candidates: a group whose pods were not all created when a check ran (a way it could not judge) is
// judged again once they are.
func sameGroups(a, b []gangfit.Group) bool {
	return slices.EqualFunc(a, b, func(x, y gangfit.Group) bool {
		return x.Key == y.Key && x.Need == y.Need && sameUIDs(x.Candidates, y.Candidates)
	})
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
