package gang

import (
	"fmt"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	corev1helpers "k8s.io/component-helpers/scheduling/corev1"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/custom-scheduler/custom-scheduler/pkg/coscheduling/attempt"
	"github.com/custom-scheduler/custom-scheduler/pkg/coscheduling/gangfit"
	"github.com/custom-scheduler/custom-scheduler/pkg/coscheduling/podgroup"
)

// PreFilter's decision for a member, one step (PreFilter) over a snapshot (PreFilterIn): Stage says
// what the member's cycle is, and then the step refuses it (Refuse); narrows it to where its attempt
// goes (Join, see Offer); places it on its own (Extra); or, for the first member of an attempt,
// checks the gang whole, from the cache while it answers (Cached) or afresh, and records the check
// (Checked). The plugin applies what it returns (PreFilterOut): the cycle's result and marks, the
// PodGroup's events, the status.

// Stage is what a member's PreFilter does.
type Stage uint8

const (
	// Refuse: the member holds nothing this cycle; the message says why.
	Refuse Stage = iota
	// Join: an attempt is under way and was checked: the member goes where its attempt goes (its
	// placement, and its planned nodes when the attempt has a plan).
	Join
	// Extra: the quorum is met: the member is a late or replacement member, placed on its own.
	Extra
	// Check: the member is the first of an attempt: the members still missing from the quorum are
	// checked as a whole.
	Check
)

func (s Stage) String() string { return [...]string{"Refuse", "Join", "Extra", "Check"}[s] }

// StageIn is what Stage reads of a member's cycle besides the gang.
type StageIn struct {
	Now    time.Time
	Member types.UID
	// Want is the PodGroup's minMember.
	Want int
	// Confirmed counts the quorum on the pod store's word (see Confirmed); it is called only when
	// the member set reaches Want and no attempt is under way, since it lists the group.
	Confirmed func() int
}

// Stage decides what a member's PreFilter does: refused while the group backs off, while its
// preemption's API calls are under way, or while it must
// wait for the attempt's lead; joined to an attempt under way; placed on its own once the quorum is
// met; otherwise the first member of an attempt.
func (g *Gang) Stage(in StageIn) (Stage, string) {
	switch {
	case g.BackingOff(in.Now):
		return Refuse, BackoffMessage(g.Key(), g.BackoffUntil)
	case g.PreemptionUnderWay:
		return Refuse, fmt.Sprintf("PodGroup %s is preempting: its evictions and nominations are under way", g.Key())
	case g.WaitsForLead(in.Member):
		return Refuse, fmt.Sprintf("PodGroup %s places member %s first: it found no node behind its siblings in the last attempt", g.Key(), g.LeadName)
	case g.InProgress():
		return Join, ""
	case g.Count() >= in.Want && in.Confirmed() >= in.Want:
		return Extra, ""
	}
	return Check, ""
}

// BackoffMessage says until when a group backs off.
func BackoffMessage(key string, until time.Time) string {
	return fmt.Sprintf("PodGroup %s backs off until %s after a failed attempt", key, until.UTC().Format(time.RFC3339))
}

// Offer returns the planned nodes offered to member (at most limit), when the attempt has a plan that
// still places members of its shape (see gangfit.ShapeOf) and the member may be planned; nil otherwise
// (the member gets its placement's nodes, or every node).
func (g *Gang) Offer(member *v1.Pod, plannable bool, limit int) sets.Set[string] {
	if g.Plan == nil || !plannable {
		return nil
	}
	nodes := g.Plan.Offer(g.Plan.ShapeFor(member), limit)
	if nodes.Len() == 0 {
		return nil
	}
	return nodes
}

// Cached returns the gang's last check while it answers for k: made under the same epoch, PodGroup
// spec and members, less than ttl before k.At.
func (g *Gang) Cached(k FeasibilityKey, ttl time.Duration) (gangfit.Result, bool) {
	if g.Feasibility == nil || !g.CacheKey.Matches(k) || k.At.Sub(g.CacheKey.At) >= ttl {
		return gangfit.Result{}, false
	}
	return *g.Feasibility, true
}

// Checked records a fresh whole-gang check made under k: its result, the plan it made (a fresh check
// replaces the plan of the one before; see KeepPlan) and the placement it chose (nil: no topology
// policy, or the gang does not fit). It reports whether the placement is a domain the attempt did not
// have, and whether the outcome changed: a gang that does not fit is GangInfeasible, except one that
// preempted, which stays Preempting while the room it made is nominated to it.
func (g *Gang) Checked(res gangfit.Result, k FeasibilityKey, chosen *gangfit.Placement, plan *gangfit.PlacementPlan) (newDomain, outcomeChanged bool) {
	g.Feasibility, g.CacheKey = &res, k
	g.KeepPlan(plan)
	newDomain = chosen != nil && (g.Placement == nil || g.Placement.Key != chosen.Key || g.Placement.Value != chosen.Value || g.Placement.Level != chosen.Level)
	g.Placement = chosen
	if !res.Feasible && (g.Outcome.Reason != podgroup.ReasonPreempting || len(g.NominatedNodes) == 0) {
		outcomeChanged = g.SetOutcome(podgroup.ReasonGangInfeasible, res.Message)
	}
	return newDomain, outcomeChanged
}

// StoppedPreempting forgets the gang's last preemption once preemption cannot place it: the nodes it
// nominated (kept only while its victims terminate), and a Preempting outcome, which becomes
// GangInfeasible with the whole-gang check's reason. It returns that reason's message when the
// outcome changed.
func (g *Gang) StoppedPreempting() (string, bool) {
	g.NominatedNodes = nil
	if g.Outcome.Reason != podgroup.ReasonPreempting || g.Feasibility == nil || g.Feasibility.Feasible {
		return "", false
	}
	msg := g.Feasibility.Message
	return msg, g.SetOutcome(podgroup.ReasonGangInfeasible, msg)
}

// Preempted records a preemption the gang made: its members are nominated to nodes, and the victims'
// room is the gang's now, so the next member checks again rather than reuse the infeasible answer.
func (g *Gang) Preempted(nodes []string, message string) {
	g.NominatedNodes = nodes
	g.SetOutcome(podgroup.ReasonPreempting, message)
	g.Feasibility = nil
}

// BusyDomains are the domains ("key=value") chosen by the gangs other than self whose attempt has
// members waiting for the quorum: a gang choosing its domain avoids them while another fits. O(gangs);
// called once per attempt of a gang with a topology policy.
func BusyDomains(gangs map[string]*Gang, self *Gang) map[string]bool {
	var busy map[string]bool
	for _, g := range gangs {
		if g == self || g.Phase == attempt.PhaseQuorum || !g.InProgress() || g.Placement == nil || g.Placement.Value == "" {
			continue
		}
		if busy == nil {
			busy = map[string]bool{}
		}
		busy[g.Placement.Key+"="+g.Placement.Value] = true
	}
	return busy
}

// avoid are the domains a gang's check steers away from while others fit: those other gangs gather
// in (BusyDomains) and those the filters refused this gang in recently (RefusedDomains).
func (g *Gang) avoid(in PreFilterIn) gangfit.Avoid {
	return gangfit.Avoid{Busy: BusyDomains(in.Gangs, g), Refused: g.RefusedDomains(in.Now)}
}

// PreFilterIn is the snapshot a member's PreFilter decides on: the member, its PodGroup's rules, the
// cycle's nodes, and the reads the decision may need. Members and Claimed are called at most once
// each (they list the group, the claims), and only by the first member of an attempt or an extra
// member; Gangs is the plugin's map of gangs (read for the domains others gather in).
type PreFilterIn struct {
	Now    time.Time
	Logger klog.Logger
	Member *v1.Pod
	// Want is the PodGroup's minMember; UID, Generation and MinResources the rest of its spec the
	// check reads.
	Want         int
	UID          types.UID
	Generation   int64
	MinResources v1.ResourceList
	Policy       gangfit.Policy
	Nodes        []fwk.NodeInfo
	// Epoch counts the cluster events that freed capacity (a cached check from an older one is stale).
	Epoch uint64
	// Plannable: the member may be narrowed by a plan (see the plugin's plannable); CandidateNodes is
	// how many planned nodes it is offered at most.
	Plannable      bool
	CandidateNodes int
	// CacheTTL bounds how long a check answers for the members of one burst.
	CacheTTL time.Duration
	// Credit is the finished-member rule's part of the member's quorum count (see Gang.Credit).
	Credit int
	// Members lists the group's live pods; Claimed the pods nominated to nodes that a member of this
	// priority must leave room for (the gang's own aside).
	Members func() []*v1.Pod
	Claimed func(prio int32) []*v1.Pod
	Gangs   map[string]*Gang
	Fit     *gangfit.Shared
}

// PreFilterOut is what a member's PreFilter does, for the plugin to apply outside its lock.
type PreFilterOut struct {
	Stage Stage
	// Reject: the member holds nothing this cycle, for Message; Infeasible: because its gang does not
	// fit (PostFilter preempts for it).
	Reject, Infeasible bool
	Message            string
	// Nodes the member may use (nil: every node); Offered: they are its plan's offer.
	Nodes   sets.Set[string]
	Offered bool
	// Checked: the gang was checked afresh this cycle (not answered from the cache).
	Checked bool
	// InfeasibleChanged: the gang's outcome became GangInfeasible (an event and the status);
	// DomainChosen: the check chose a domain the attempt did not have (Placement says which).
	InfeasibleChanged, DomainChosen bool
	Placement                       *gangfit.Placement
	// Plan is the plan the check made, when the gang kept it.
	Plan *gangfit.PlacementPlan
}

// PreFilter is a member's whole PreFilter decision (see Stage): it moves the gang's state (a fresh
// check, an adopted attempt's pinned placement) and returns what the plugin does with the cycle.
func (g *Gang) PreFilter(in PreFilterIn) PreFilterOut {
	members := memo(in.Members)
	g.Credit = in.Credit
	stage, msg := g.Stage(StageIn{Now: in.Now, Member: in.Member.UID, Want: in.Want, Confirmed: func() int { return g.Confirmed(members()) }})
	out := PreFilterOut{Stage: stage}
	switch stage {
	case Refuse:
		out.Reject, out.Message = true, msg
		return out
	case Join:
		// A plan is made only with a chosen placement; an attempt adopted without one (this process
		// did not check it) pins it where its members already are.
		if g.Placement == nil && !in.Policy.Empty() {
			p := gangfit.PinnedPlacement(in.Policy, gangfit.PinnedDomains(in.Policy, gangfit.BoundNodes(members(), in.Nodes, g.ReservedNodes()...)), in.Nodes)
			g.Placement = &p
		}
		return g.narrow(in, out, g.Placement)
	case Extra:
		if !in.Policy.Empty() {
			out.Nodes = placementNodes(g.extraPlacement(in, members()))
		}
		return out
	}
	return g.check(in, out, members())
}

// check is the first member's PreFilter: the members still missing from the quorum are checked as a
// whole (or the cache answers), a gang with a topology policy is given its domain, and a plan is made.
func (g *Gang) check(in PreFilterIn, out PreFilterOut, members []*v1.Pod) PreFilterOut {
	candidates, counted, countedN := g.Split(members)
	ck := FeasibilityKey{Epoch: in.Epoch, UID: in.UID, Generation: in.Generation, Want: in.Want, Existing: len(members), Counted: countedN + g.Credit, At: in.Now}
	if res, ok := g.Cached(ck, in.CacheTTL); ok {
		if !res.Feasible {
			out.Reject, out.Infeasible, out.Message = true, true, res.Message
			return out
		}
		return g.narrow(in, out, g.Placement)
	}
	key := g.Key()
	res, fit := gangfit.Check(in.Logger, key, candidates, in.Want-countedN-g.Credit, in.Nodes, in.MinResources, counted, in.Claimed(corev1helpers.PodPriority(in.Member)), in.Fit)
	var chosen *gangfit.Placement
	if res.Feasible && !in.Policy.Empty() {
		pinned := gangfit.PinnedDomains(in.Policy, gangfit.BoundNodes(members, in.Nodes, g.ReservedNodes()...))
		if fit == nil {
			p := gangfit.PinnedPlacement(in.Policy, pinned, in.Nodes)
			chosen = &p
		} else if p, ok := gangfit.ChoosePlacementAvoiding(fit, in.Policy, pinned, g.avoid(in)); ok {
			chosen = &p
		} else {
			res = gangfit.Result{Message: fmt.Sprintf("PodGroup %s (topology policy from %s): %s", key, in.Policy.Source, p.Message), Shortfall: p.Shortfall}
		}
	}
	var plan *gangfit.PlacementPlan
	if res.Feasible && in.Plannable {
		plan = gangfit.PlanPlacement(fit, chosen)
	}
	fit.Done()
	out.Checked = true
	out.DomainChosen, out.InfeasibleChanged = g.Checked(res, ck, chosen, plan)
	out.Placement = chosen
	if !res.Feasible {
		out.Reject, out.Infeasible, out.Message = true, true, res.Message
		return out
	}
	if plan != nil && g.Plan == plan {
		out.Plan = plan
	}
	return g.narrow(in, out, chosen)
}

// narrow gives a member of an attempt its nodes: its plan's offer, when the attempt has a plan that
// still places members; else its placement's domain (nil: every node).
func (g *Gang) narrow(in PreFilterIn, out PreFilterOut, p *gangfit.Placement) PreFilterOut {
	if nodes := g.Offer(in.Member, in.Plannable, in.CandidateNodes); nodes != nil {
		out.Nodes, out.Offered = nodes, true
		return out
	}
	out.Nodes = placementNodes(p)
	return out
}

// extraPlacement is where a member of a gang whose quorum is met goes (see
// gangfit.ExtraMemberPlacement), checked against the room nominated to pods of its priority or more.
func (g *Gang) extraPlacement(in PreFilterIn, members []*v1.Pod) *gangfit.Placement {
	pinned := gangfit.PinnedDomains(in.Policy, gangfit.BoundNodes(members, in.Nodes, g.ReservedNodes()...))
	f := gangfit.New(in.Logger, g.Key(), []*v1.Pod{in.Member}, 1, in.Nodes, nil, in.Claimed(corev1helpers.PodPriority(in.Member)), in.Fit, false)
	p := gangfit.ExtraMemberPlacement(f, in.Policy, pinned, in.Nodes)
	f.Done()
	return &p
}

// placementNodes are a placement's nodes (nil: every node, for no placement or anywhere).
func placementNodes(p *gangfit.Placement) sets.Set[string] {
	if r := p.PreFilterResult(); r != nil {
		return r.NodeNames
	}
	return nil
}

// memo calls f once, when first asked.
func memo[T any](f func() T) func() T {
	var v T
	done := false
	return func() T {
		if !done {
			v, done = f(), true
		}
		return v
	}
}
