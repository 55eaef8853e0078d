package gang

import (
	"fmt"
	"hash/fnv"
	"slices"
	"strconv"
	"sync"
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
	"github.com/custom-scheduler/custom-scheduler/pkg/coscheduling/tree"
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
	case g.PreemptionsUnderWay > 0:
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
	// Epoch counts the cluster events that freed capacity (a cached check from an older one is stale);
	// Claims is the version of the nominations that hold room against the member's gang.
	Epoch, Claims uint64
	// Plannable: the member may be narrowed by a plan (see the plugin's plannable); CandidateNodes is
	// how many planned nodes it is offered at most.
	Plannable      bool
	CandidateNodes int
	// CacheTTL bounds how long a check answers for the members of one burst.
	CacheTTL time.Duration
	// Credit is the finished-member rule's part of the member's quorum count (see Gang.Credit).
	Credit int
	// Members lists the group's live pods; Claimed the pods nominated to nodes that a member of this
	// priority must leave room for (the gang's own aside; of its job's other groups, the check sets
	// aside those of the groups it places with it, see Gang.together).
	Members func() []*v1.Pod
	Claimed func(prio int32) []*v1.Pod
	Gangs   map[string]*Gang
	Fit     *gangfit.Shared
	// Done is the result of the job the step asked for (see Decide), run over the same snapshot.
	Done *Done
	// KeptOff are the nodes whose devices a reservation or a nomination holds against the member,
	// each with why (see HeldDevices): the step keeps it off them unless it refuses the member.
	KeptOff map[string]string
	// Tree resolves the member's job when its group is in one (nil, or nil returned: it is not), so
	// that the gang's check places the groups the job needs with it (see Gang.together); GroupMembers
	// lists a group's live pods by key.
	Tree         func() *tree.Branch
	GroupMembers func(key string) []*v1.Pod
	// OwnDomain are the required topology keys of the job's groups that have one of their own, by
	// key (see OwnDomains); read by a job's preemption (jobParts), nil elsewhere.
	OwnDomain map[string]string
}

// PreFilterOut is what a member's PreFilter does, for the plugin to apply outside its lock.
type PreFilterOut struct {
	Stage Stage
	// Reject: the member holds nothing this cycle, for Message; Infeasible: because its gang does not
	// fit (PostFilter preempts for it, unless Tree: it fits alone, but not with the other groups its
	// job needs, and nothing is preempted or reserved for it alone).
	Reject, Infeasible, Tree bool
	Message                  string
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
	// KeptOff are the nodes the member is kept off for the devices held there, each with why.
	KeptOff map[string]string
	// Job is the check the step needs before it can decide (see Decide); nothing else is set.
	Job *Job
}

// PreFilter is a member's whole PreFilter decision (see Stage): it moves the gang's state (a fresh
// check, an adopted attempt's pinned placement) and returns what the plugin does with the cycle,
// running the checks the step asks for itself (a caller with no lock to keep short).
func (g *Gang) PreFilter(in PreFilterIn) PreFilterOut {
	return DecideUnder(noLock{}, func() *Gang { return g }, in)
}

// maxJobs bounds the checks one member's PreFilter runs: a check whose gang changed while it ran is
// run again, at most this many times in all.
const maxJobs = 3

// DecideUnder runs a member's step (Decide) under mu on the gang gangFor returns, and each check the
// step asks for between two holds of mu, so that nothing waits on a check for the plugin's lock. The
// step's reads (the group's members, the nominated pods) are made once for all its calls.
func DecideUnder(mu sync.Locker, gangFor func() *Gang, in PreFilterIn) PreFilterOut {
	in.Members, in.Claimed = memo(in.Members), memoBy(in.Claimed)
	for range maxJobs {
		mu.Lock()
		out := gangFor().Decide(in)
		mu.Unlock()
		if out.Job == nil {
			return out
		}
		in.Done = out.Job.Run(in.Fit)
	}
	name, _ := podgroup.Of(in.Member)
	return PreFilterOut{Stage: Refuse, Reject: true,
		Message: fmt.Sprintf("PodGroup %s changed %d times while its check ran; its members are tried again", podgroup.Key(in.Member.Namespace, name), maxJobs)}
}

// noLock is the lock of a caller that holds none.
type noLock struct{}

func (noLock) Lock()   {}
func (noLock) Unlock() {}

// Decide is the step of a member's PreFilter (see Stage). Where the member's stage needs the
// snapshot's nodes counted (the first member of an attempt, whose gang is checked whole unless the
// cache answers; an extra member placed within its gang's domain), it answers with the Job to run
// and changes nothing, unless in.Done is that job's result: then it records it (Checked) and
// narrows the member. A Done for another job (the gang changed while it ran) is not used: the step
// asks again.
func (g *Gang) Decide(in PreFilterIn) PreFilterOut {
	members := memo(in.Members)
	g.Credit = in.Credit
	stage, msg := g.Stage(StageIn{Now: in.Now, Member: in.Member.UID, Want: in.Want, Confirmed: func() int { return g.Confirmed(members()) }})
	out := PreFilterOut{Stage: stage, KeptOff: in.KeptOff}
	switch stage {
	case Refuse:
		out.Reject, out.Message, out.KeptOff = true, msg, nil
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
		// A member past the quorum stays in its job's domain, as its group's own.
		var domain sets.Set[string]
		if root := in.tree(); root != nil {
			if td := g.treeDomain(in, root); td != nil {
				domain = td.pinnedNodes(in.Nodes)
			}
		}
		if in.Policy.Empty() {
			out.Nodes = domain
			return out
		}
		job := g.extraJob(in, members())
		if !in.Done.For(job) {
			out.Job = job
			return out
		}
		out.Nodes = placementNodes(in.Done.Placement)
		if domain != nil {
			if out.Nodes == nil {
				out.Nodes = domain
			} else {
				out.Nodes = out.Nodes.Intersection(domain)
			}
		}
		return out
	}
	return g.check(in, out, members())
}

// check is the first member's PreFilter: the members still missing from the quorum are checked as a
// whole (or the cache answers), a gang with a topology policy is given its domain, and a plan is made.
func (g *Gang) check(in PreFilterIn, out PreFilterOut, members []*v1.Pod) PreFilterOut {
	candidates, counted, countedN := g.Split(members)
	root := in.tree()
	ck := FeasibilityKey{Epoch: in.Epoch, Claims: in.Claims, UID: in.UID, Generation: in.Generation, Want: in.Want, Existing: len(members), Counted: countedN + g.Credit,
		Job: in.jobMembers(root, g.Key()), At: in.Now}
	if res, ok := g.Cached(ck, in.CacheTTL); ok {
		if !res.Feasible {
			out.Reject, out.Infeasible, out.Tree, out.Message, out.KeptOff = true, true, res.Tree, res.Message, nil
			return out
		}
		return g.narrow(in, out, g.Placement)
	}
	claimed := in.Claimed(corev1helpers.PodPriority(in.Member))
	job := &Job{Key: ck, Gang: g.Key(), Candidates: candidates, Counted: counted, Need: in.Want - countedN - g.Credit,
		Nodes: in.Nodes, MinResources: in.MinResources, Claimed: claimed,
		Policy: in.Policy, Plannable: in.Plannable, Logger: in.Logger}
	if !in.Policy.Empty() {
		job.Pinned = gangfit.PinnedDomains(in.Policy, gangfit.BoundNodes(members, in.Nodes, g.ReservedNodes()...))
		job.Avoid = g.avoid(in)
		// The domain the members are nominated in (a preemption's or a reservation's plan) is chosen
		// first while it fits: a group of a job that preempted in parts goes to its part's domain.
		job.Avoid.Nominated = gangfit.Nominated(in.Policy, gangfit.BoundNodes(nil, in.Nodes, nominatedNodes(members)...))
	}
	if root != nil {
		job.Job, job.Domain = root.Key(), g.treeDomain(in, root)
		if ways := g.together(in, root, claimed); len(ways) > 0 {
			job.Together, job.Alternatives = ways[0], ways[1:]
		}
		job.Claimed, job.Aside = notOfGroups(claimed, job.Together), ofGroups(claimed, job.Together)
	}
	// The nodes whose devices the real filter refused members of the groups checked (see DeviceRefusals).
	var keys []string
	for _, way := range append([][]gangfit.Group{job.Together}, job.Alternatives...) {
		keys = append(keys, keysOf(way)...)
	}
	slices.Sort(keys)
	keys = slices.Compact(keys)
	job.RefusedDevices = JobRefusals(g, in.Gangs, keys, in.Now, in.Nodes)
	if !in.Done.For(job) {
		out.Job = job
		return out
	}
	done := in.Done
	out.Checked = true
	out.DomainChosen, out.InfeasibleChanged = g.Checked(done.Result, in.Done.job.Key, done.Placement, done.Plan)
	out.Placement = done.Placement
	if done.Short != "" {
		// The job's domain (pinned by its members reserved there, or chosen) does not hold this
		// group: the job's next choices avoid it while another domain fits (see TreeDomain.Refused).
		g.Refuse(done.Short, in.Now, "the groups of its job do not fit there")
	}
	if !done.Result.Feasible {
		out.Reject, out.Infeasible, out.Tree, out.Message, out.KeptOff = true, true, done.Result.Tree, done.Result.Message, nil
		return out
	}
	if done.Plan != nil && g.Plan == done.Plan {
		out.Plan = done.Plan
	}
	return g.narrow(in, out, done.Placement)
}

// nominatedNodes are the nodes the unbound members of members are nominated to.
func nominatedNodes(members []*v1.Pod) []string {
	var out []string
	for _, m := range members {
		if m.Spec.NodeName == "" && m.Status.NominatedNodeName != "" {
			out = append(out, m.Status.NominatedNodeName)
		}
	}
	return out
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

// extraJob asks where a member of a gang whose quorum is met goes (see
// gangfit.ExtraMemberPlacement), checked against the room nominated to pods of its priority or more.
func (g *Gang) extraJob(in PreFilterIn, members []*v1.Pod) *Job {
	return &Job{Extra: true, Gang: g.Key(), Candidates: []*v1.Pod{in.Member}, Need: 1, Nodes: in.Nodes,
		Claimed: in.Claimed(corev1helpers.PodPriority(in.Member)), Policy: in.Policy, Logger: in.Logger,
		Pinned: gangfit.PinnedDomains(in.Policy, gangfit.BoundNodes(members, in.Nodes, g.ReservedNodes()...))}
}

// placementNodes are a placement's nodes (nil: every node, for no placement or anywhere).
func placementNodes(p *gangfit.Placement) sets.Set[string] {
	if r := p.PreFilterResult(); r != nil {
		return r.NodeNames
	}
	return nil
}

// memoBy calls f once per argument, when first asked (nil for nil).
func memoBy[K comparable, T any](f func(K) T) func(K) T {
	if f == nil {
		return nil
	}
	seen := map[K]T{}
	return func(k K) T {
		if v, ok := seen[k]; ok {
			return v
		}
		v := f(k)
		seen[k] = v
		return v
	}
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

// jobMembers fingerprints the other groups of the job root (nil: none, 0) of the group keyed own:
// each one's key and number of live pods. O(the job's members).
func (in PreFilterIn) jobMembers(root *tree.Branch, own string) uint64 {
	if root == nil {
		return 0
	}
	h := fnv.New64a()
	var buf []byte
	for _, n := range root.Leaves() {
		if n.Key() != own {
			buf = strconv.AppendInt(append(append(buf[:0], n.Key()...), '='), int64(len(in.GroupMembers(n.Key()))), 10)
			h.Write(append(buf, ';'))
		}
	}
	return h.Sum64()
}
