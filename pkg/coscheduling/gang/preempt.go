package gang

import (
	"fmt"
	"slices"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	policy "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	corev1helpers "k8s.io/component-helpers/scheduling/corev1"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/custom-scheduler/custom-scheduler/pkg/apis/config"
	"github.com/custom-scheduler/custom-scheduler/pkg/apis/scheduling/v1alpha1"
	"github.com/custom-scheduler/custom-scheduler/pkg/coscheduling/gangfit"
	"github.com/custom-scheduler/custom-scheduler/pkg/coscheduling/podgroup"
)

// A gang's preemption, decided in one step (Preempt) over a snapshot (PreemptIn), for a member of a
// gang found not to fit the free resources: whether the gang may preempt, whether its earlier
// preemption's victims are still leaving, and which lower-priority units to evict so that its missing
// members all fit at once (gangfit.PlanPreemption). The plugin evicts, nominates and records the
// outcome (Preempted) after it.

// Results of a gang's preemption, the bounded values of preemption_attempts_total's result label.
const (
	// PreemptNotEligible: the gang may not preempt (a member's preemptionPolicy is Never, its topology
	// annotations are malformed, nothing is left to place).
	PreemptNotEligible = "not_eligible"
	// PreemptNotHelpful: evicting what the gang may evict would not make it fit, or it fits without.
	PreemptNotHelpful = "not_helpful"
	// PreemptWaiting: the victims of the gang's earlier preemption are still terminating.
	PreemptWaiting = "waiting"
	// PreemptError: a read failed.
	PreemptError = "error"
	// PreemptVictims: victims were chosen; the plugin evicts them ("preempted" once it did).
	PreemptVictims = "preempted"
)

// PreemptIn is what a gang's preemption decides on: the member whose PostFilter runs, its PodGroup,
// the group's live pods, the nodes, the gang's split (read under the plugin's lock, see Gang.Split)
// and the readers of what the step may need, called only when it gets that far.
type PreemptIn struct {
	Pod      *v1.Pod
	PodGroup *v1alpha1.PodGroup
	Members  []*v1.Pod
	Nodes    []fwk.NodeInfo
	// Split reads the gang's part under the plugin's lock (see Gang.SplitForPreemption): the members
	// still to place, how many of them the quorum needs, and the nodes the gang's earlier preemption
	// and its members' statuses name. It is called once, past the checks that need no gang state.
	Split func() (candidates []*v1.Pod, need int, nominated []string)

	DefaultTopology config.TopologyPolicy
	Fit             *gangfit.Shared
	Logger          klog.Logger
	// Terminating counts the pods of priority below prio still terminating on nodes.
	Terminating func(nodes []string, prio int32) int
	// Releasing counts the claims on nodes still allocated to pods an earlier preemption evicted
	// (see devices.Source.Releasing); nil counts none.
	Releasing func(nodes []string) int
	// Claims are the pods nominated to nodes that this gang must count as taken (see claims.Against).
	Claims func() []*v1.Pod
	// PDBs lists the PodDisruptionBudgets; Leaving reports a pod on its way out for an earlier
	// preemption (see gangpreemption.Evicted.Leaving).
	PDBs    func() ([]*policy.PodDisruptionBudget, error)
	Leaving func(*v1.Pod) bool
	// Job, when set, is the job of several roles the member preempts for (see JobForPreemption):
	// its groups' missing members are placed at once instead of the group's own (Split is not
	// called), Members are the job's, and none of its pods is a victim.
	Job *JobPreemption
}

// PreemptOut is a gang preemption's decision.
type PreemptOut struct {
	// Result is one of the Preempt* results.
	Result string
	// Message is the member's status message ("" for none); Err the failed read (PreemptError).
	Message string
	Err     error
	// Hopeless: not helpful even with every lower-priority unit the gang may evict evicted (or none
	// runs): freeing the room of one of them cannot change the answer (see SparedByDelete).
	Hopeless bool
	// DropNominations: the gang's earlier nominations stop keeping room (PreemptNotHelpful: preemption
	// cannot place it), unless they are its reservation's.
	DropNominations bool
	// Plan is the victims and where the members go (PreemptVictims); Need the members the quorum
	// needs placed.
	Plan gangfit.Plan
	Need int
}

// Priority is a gang's one priority as a preemptor: the lowest of its live members' (the member whose
// PostFilter runs included). A gang preempts only what every member may preempt, and each member's
// nomination holds the room against every pod of that priority or lower, whichever member the
// scheduler tries first. mixed reports members of different priorities (a MixedPriorities event says
// so). Upstream's PodGroup has one priority; a gang of ours whose operator set several gets the lowest.
func Priority(pod *v1.Pod, members []*v1.Pod) (prio int32, mixed bool) {
	prio = corev1helpers.PodPriority(pod)
	for _, m := range members {
		if p := corev1helpers.PodPriority(m); p != prio {
			mixed = true
			prio = min(prio, p)
		}
	}
	return prio, mixed
}

// MixedPrioritiesMessage says how a gang of members of different priorities preempts.
func MixedPrioritiesMessage(key string, members []*v1.Pod, prio int32) string {
	hi := prio
	for _, m := range members {
		hi = max(hi, corev1helpers.PodPriority(m))
	}
	return fmt.Sprintf("PodGroup %s has members of priorities %d to %d: a gang has one priority, the lowest of its members' (%d); it preempts only pods below %d, and its nominations hold against pods of up to %d", key, prio, hi, prio, prio, prio)
}

// Status is the status of the member whose PostFilter the decision answers (prio is the gang's
// priority, for the victims' message): the failed read's error, the preemption under way, or the
// decision's message.
func (out *PreemptOut) Status(prio int32) *fwk.Status {
	switch {
	case out.Result == PreemptError:
		return fwk.AsStatus(out.Err)
	case out.Result == PreemptVictims:
		return fwk.NewStatus(fwk.Unschedulable, "preemption: "+PreemptingMessage(out.Plan, prio, out.Need, AssignedNodes(out.Plan.Assignment)))
	case out.Message != "":
		return fwk.NewStatus(fwk.Unschedulable, out.Message)
	}
	return fwk.NewStatus(fwk.Unschedulable)
}

// MixedPriorities is the message of the MixedPriorities event for a gang (of key) whose members (the
// member pod's gang's, or its job's) have different priorities ("" for none): it is recorded for a
// decision made now (not an earlier member's, cached) to evict or that preemption does not help.
func (out *PreemptOut) MixedPriorities(key string, pod *v1.Pod, members []*v1.Pod, cached bool) string {
	prio, mixed := Priority(pod, members)
	if !mixed || cached || out.Result != PreemptVictims && out.Result != PreemptNotHelpful {
		return ""
	}
	return MixedPrioritiesMessage(key, members, prio)
}

// PreemptKey is what a gang's preemption answer depends on besides the pods' priorities: the
// whole-gang check's key (the epoch, which every freed capacity, node change and moved claim bumps;
// the PodGroup's spec; the members) and the gang's priority.
type PreemptKey struct {
	FeasibilityKey
	Priority int32
	// Claims is the claims' version (see claims.Claims.Version).
	Claims uint64
}

// Key is what the preemption of in's gang, at priority prio, depends on (see PreemptKey): the claims'
// version against prio, the epoch, the PodGroup's spec and its live pods, at now. Counted is the
// gang's, read under the lock (see PreemptUnder).
func (in PreemptIn) Key(prio int32, claims, epoch uint64, now time.Time) PreemptKey {
	return PreemptKey{Priority: prio, Claims: claims, FeasibilityKey: FeasibilityKey{Epoch: epoch, UID: in.PodGroup.UID,
		Generation: in.PodGroup.Generation, Want: podgroup.MinMember(in.PodGroup), Existing: len(in.Members), At: now}}
}

// PreemptMemo is a gang's last preemption that found preemption no help, under the key it was made.
type PreemptMemo struct {
	Key PreemptKey
	Out PreemptOut
}

// CachedPreemption returns the gang's last preemption answer while it answers for k (the same key,
// less than ttl before k.At): every member of a gang that does not fit comes to PostFilter in each
// attempt, and the search (every pod of the cluster read, a fit per unit of eviction) is made once
// per attempt, not once per member. Only "not helpful" is kept: a preemption that evicts changes the
// room (and the epoch), and the other results are cheap.
func (g *Gang) CachedPreemption(k PreemptKey, ttl time.Duration) (PreemptOut, bool) {
	m := g.LastPreemption
	if m == nil || m.Key.Priority != k.Priority || m.Key.Claims != k.Claims || !m.Key.Matches(k.FeasibilityKey) || k.At.Sub(m.Key.At) >= ttl {
		return PreemptOut{}, false
	}
	return m.Out, true
}

// RememberPreemption keeps a preemption's answer made under k for the gang's next members (see
// CachedPreemption), or forgets the last one when this answer is not kept.
func (g *Gang) RememberPreemption(k PreemptKey, out PreemptOut) {
	if out.Result != PreemptNotHelpful {
		g.LastPreemption = nil
		return
	}
	g.LastPreemption = &PreemptMemo{Key: k, Out: out}
}

// SparedByDelete reports whether a pod deleted (or shrunk) may leave the gang's members where they
// are, instead of requeueing every one of them for a search that cannot succeed: the gang's last
// preemption found that it does not fit even with every lower-priority unit evicted (Hopeless), no
// claim moved and no member was counted since, no whole-gang check found room since, it holds no
// reservation (whose rechecks count freed room), and the pod is a plain
// pod (not a gang member, whose gang may outrank the preemptor) of lower priority than the gang's.
// Such a pod's room was already counted free by that search, so freeing it changes neither the
// whole-gang check (a subset of that search) nor the preemption. Any other event still requeues.
func (g *Gang) SparedByDelete(deleted *v1.Pod, claimsVersion uint64) bool {
	m := g.LastPreemption
	if m == nil || !m.Out.Hopeless || m.Key.Claims != claimsVersion || g.Reserve.Held() {
		return false
	}
	// A member reserved or bound since, or a whole-gang check that found room since: the answer is
	// not the gang's any more.
	if len(g.Members) != m.Key.Counted || (g.Feasibility != nil && g.Feasibility.Feasible) {
		return false
	}
	if _, member := podgroup.UnitOf(deleted); member {
		return false
	}
	return corev1helpers.PodPriority(deleted) < m.Key.Priority
}

// SparedByDelete is Gang.SparedByDelete for the gang of key (false when it is not tracked or never
// preempted), at the claims' version against its last preemption's priority (claimsVersion).
func (r *Registry) SparedByDelete(key string, deleted *v1.Pod, claimsVersion func(prio int32) uint64) bool {
	g := r.gangs[key]
	return g != nil && g.LastPreemption != nil && g.SparedByDelete(deleted, claimsVersion(g.LastPreemption.Key.Priority))
}

// SplitForPreemption is the gang's part of a preemption's snapshot: the members to place, how many the
// quorum needs of them, and the nodes its earlier preemption and its members' statuses name.
func (g *Gang) SplitForPreemption(members []*v1.Pod, minMember int) (candidates []*v1.Pod, need int, nominated []string) {
	nominated = slices.Clone(g.NominatedNodes)
	for _, m := range members {
		if m.Status.NominatedNodeName != "" {
			nominated = append(nominated, m.Status.NominatedNodeName)
		}
	}
	candidates, _, counted := g.Split(members)
	return candidates, minMember - counted, nominated
}

// Preempt decides a gang's preemption, at the gang's one priority (see Priority): refused when a member may not preempt; not helpful when no pod
// of lower priority runs anywhere (a cluster of one priority, checked before any simulation is built:
// every member of an infeasible gang comes here on every attempt); waiting while the victims of its
// earlier preemption terminate; otherwise the cheapest victims whose eviction lets the missing members
// fit at once (per node, in the gang's required domain), or not helpful when none do. A job's other
// ways (K of N groups not alike, see JobPreemption.Ways) are searched in turn while none fits.
func Preempt(in PreemptIn) PreemptOut {
	// The search counts a node the allocator did not reach in time as holding no member.
	in.Fit = in.Fit.ForSearch()
	key := podgroup.Key(in.PodGroup.Namespace, in.PodGroup.Name)
	who := "PodGroup " + key
	if in.Job != nil {
		who += " with the groups its job " + in.Job.Job + " needs"
	}
	prio, _ := Priority(in.Pod, in.Members)
	for _, m := range in.Members {
		if m.Spec.PreemptionPolicy != nil && *m.Spec.PreemptionPolicy == v1.PreemptNever {
			return PreemptOut{Result: PreemptNotEligible, Message: fmt.Sprintf("preemption: %s: member %s has preemptionPolicy Never", who, klog.KObj(m))}
		}
	}
	if !gangfit.AnyPodBelow(in.Nodes, prio) {
		return PreemptOut{Result: PreemptNotHelpful, DropNominations: true, Hopeless: true,
			Message: fmt.Sprintf("preemption: %s does not fit, and no pod of lower priority runs on any node", who)}
	}
	candidates, need, nominated := in.toPlace()
	if n := in.Terminating(nominated, prio); n > 0 {
		return PreemptOut{Result: PreemptWaiting, Message: fmt.Sprintf("preemption: %s waits for %d pods it preempted to terminate", who, n)}
	}
	if in.Releasing != nil {
		if n := in.Releasing(nominated); n > 0 {
			return PreemptOut{Result: PreemptWaiting, Message: fmt.Sprintf("preemption: %s waits for the devices of %d ResourceClaims of preempted pods to be freed", who, n)}
		}
	}
	out := in.search(who, prio, candidates, need)
	if in.Job != nil && out.Result == PreemptNotHelpful && out.DropNominations {
		// K of N groups not alike: the job's other ways, in turn, while none fits even with victims
		// (see Ways); hopeless only when every way is.
		hopeless := out.Hopeless
		for _, w := range in.Job.Ways {
			c := in
			c.Job = &w
			wc, wneed, _ := c.toPlace()
			o := c.search(who, prio, wc, wneed)
			if o.Result == PreemptVictims || o.Result == PreemptError || o.Result == PreemptNotHelpful && !o.DropNominations {
				return o
			}
			hopeless = hopeless && o.Hopeless
		}
		out.Hopeless = hopeless
	}
	return out
}

// search is Preempt's victim search for candidates (need of them, as toPlace lists them), once the
// preemption is eligible and its earlier victims gone.
func (in PreemptIn) search(who string, prio int32, candidates []*v1.Pod, need int) PreemptOut {
	key := podgroup.Key(in.PodGroup.Namespace, in.PodGroup.Name)
	if in.Job != nil && len(in.Job.Parts) > 0 {
		return in.preemptParts(who, prio, need)
	}
	pol, pinned, own, within, err := in.policy()
	if err != nil {
		if in.Job != nil {
			return PreemptOut{Result: PreemptNotEligible, Message: fmt.Sprintf("preemption: %s: %v", who, err)}
		}
		return PreemptOut{Result: PreemptNotEligible, Message: err.Error()}
	}
	minResources := in.PodGroup.Spec.MinResources
	if in.Job != nil {
		minResources = nil
	}
	nodes, fit := in.Nodes, in.Fit
	if within != nil {
		// The search reads the pinned outer domains' nodes only: the shared capacity table is kept
		// for the whole snapshot's.
		nodes, fit = onNodes(in.Nodes, within), in.Fit.Private()
	}
	// Room nominated to other preemptors of at least this priority is not free (as in PreFilter).
	f := gangfit.New(in.Logger, key, candidates, need, nodes, minResources, in.claimed(), fit, true)
	if f == nil {
		return PreemptOut{Result: PreemptNotEligible}
	}
	pdbs, err := in.PDBs()
	if err != nil {
		return PreemptOut{Result: PreemptError, Err: fmt.Errorf("listing PodDisruptionBudgets: %w", err)}
	}
	// Victims are read on every node: a gang with members beyond the search's nodes goes whole.
	plan := gangfit.PlanPreemption(f, in.Nodes, pol, pinned, prio, own, in.Leaving, pdbs)
	switch {
	case !plan.Fits && plan.Units == 0:
		return PreemptOut{Result: PreemptNotHelpful, DropNominations: true, Hopeless: true,
			Message: fmt.Sprintf("preemption: %s does not fit, and no pod of lower priority runs on the nodes its members may use", who)}
	case !plan.Fits:
		return PreemptOut{Result: PreemptNotHelpful, DropNominations: true, Hopeless: true,
			Message: fmt.Sprintf("preemption: %s does not fit even if all %d lower-priority pods and gangs on the nodes its members may use were evicted; nothing was evicted", who, plan.Units)}
	case len(plan.Victims) == 0:
		// It fits without evicting anything: PreFilter rejected it for another reason (e.g. minResources).
		return PreemptOut{Result: PreemptNotHelpful}
	}
	return PreemptOut{Result: PreemptVictims, Plan: plan, Need: need}
}

// toPlace is what the preemption places: the gang's missing members and the nodes its earlier
// preemption names (see Gang.SplitForPreemption), or, for a job (in.Job), its groups' missing members
// and the nodes theirs name.
func (in PreemptIn) toPlace() (candidates []*v1.Pod, need int, nominated []string) {
	if j := in.Job; j != nil {
		candidates, need, _ = gangfit.Joint(j.Groups)
		return candidates, need, j.Nominated
	}
	return in.Split()
}

// policy is where the preemption places them: within the gang's topology policy and the domains its
// bound members pin, or, for a job, within the job's domain, or the domain of the inner composite its
// groups to place are under (see JobPlacement); within, when not nil, are the only nodes the search
// may use. own is the unit of eviction that is never a victim (the gang, or the job).
func (in PreemptIn) policy() (pol gangfit.Policy, pinned map[string]string, own string, within sets.Set[string], err error) {
	if j := in.Job; j != nil {
		pol, pinned, within, err = JobPlacement(j.Domain, j.Groups, in.Nodes)
		return pol, pinned, j.Unit, within, err
	}
	if pol, err = gangfit.PolicyFor(in.PodGroup, in.Pod, in.DefaultTopology); err != nil {
		return pol, nil, "", nil, err
	}
	return pol, gangfit.PinnedDomains(pol, gangfit.BoundNodes(in.Members, in.Nodes)), podgroup.Key(in.PodGroup.Namespace, in.PodGroup.Name), nil, nil
}

// JobPlacement is where a job's preemption places its groups' missing members (the groups of groups
// with Need > 0), in its domain d (nil: anywhere): the policy and pinned domains the victim search
// honours, and within, the nodes it is restricted to (nil: all). With no inner composite (d.Inner
// empty), d's policy and pinned domains. With inner composites (see TreeDomain.Inner), the groups to
// place must all be under the innermost of them that holds any (its Leaves), which the job's check
// places in one domain of its required key: the search then places them in one domain of that key
// (the one their placed members pin, if they do), on the nodes of the domains of the composites
// above it that are pinned (d's, and the inner ones' between), whether or not its domains nest in
// theirs. err, when the groups are not all under it (e.g. two replicas each needing a rack of its
// own), or under none of the member's inner composites: one search cannot keep each composite's
// groups in one domain of its own, and its evictions might not let the job's check fit; the job
// does not preempt as one. O(groups × leaves × inner composites + nodes).
func JobPlacement(d *TreeDomain, groups []gangfit.Group, nodes []fwk.NodeInfo) (pol gangfit.Policy, pinned map[string]string, within sets.Set[string], err error) {
	if d == nil {
		return pol, nil, nil, nil
	}
	at := d
	if len(d.Inner) > 0 {
		i, err := d.innerOf(groups)
		if err != nil {
			return pol, nil, nil, err
		}
		if i >= 0 {
			at = d.Inner[i]
			within = pinnedIn(append([]*TreeDomain{d}, d.Inner[:i]...), nodes)
		}
	}
	pol, pinned = at.Policy(), at.Pinned
	if at.Value != "" && pinned == nil {
		pinned = map[string]string{at.Key: at.Value}
	}
	return pol, pinned, within, nil
}

// innerOf is the index in d.Inner of the innermost composite that holds the groups to place (those of
// groups with Need > 0), -1 when there are none; err when that composite does not hold them all, or
// none of d.Inner holds any (see JobPlacement).
func (d *TreeDomain) innerOf(groups []gangfit.Group) (int, error) {
	var placed []string
	for _, g := range groups {
		if g.Need > 0 {
			placed = append(placed, g.Key)
		}
	}
	if len(placed) == 0 {
		return -1, nil
	}
	for i := len(d.Inner) - 1; i >= 0; i-- {
		id := d.Inner[i]
		var under, outside []string
		for _, k := range placed {
			if slices.Contains(id.Leaves, k) {
				under = append(under, k)
			} else {
				outside = append(outside, k)
			}
		}
		switch {
		case len(under) == 0:
			continue
		case len(outside) > 0:
			return -1, fmt.Errorf("its groups to place are not all under one composite with a required topology of its own (%s, under %s, requires one %s domain for %s; %s are outside it): one search would not keep each composite's groups in one domain, so the job does not preempt as one; nothing was evicted",
				id.Composite, d.Composite, id.Key, strings.Join(under, ", "), strings.Join(outside, ", "))
		}
		return i, nil
	}
	inner := make([]string, len(d.Inner))
	for i, id := range d.Inner {
		inner[i] = id.Composite
	}
	return -1, fmt.Errorf("its groups to place (%s) are under none of its composites with a required topology of their own (%s), and may be under others: one search would not keep each composite's groups in one domain, so the job does not preempt as one; nothing was evicted",
		strings.Join(placed, ", "), strings.Join(inner, ", "))
}

// AssignedNodes are the nodes a preemption's plan places members on, sorted.
func AssignedNodes(assignment []gangfit.Nomination) []string {
	var nodes []string
	for _, a := range assignment {
		nodes = append(nodes, a.Node)
	}
	slices.Sort(nodes)
	return slices.Compact(nodes)
}

// NodeFor is the node a preemption's plan places member uid on (ok false: the plan places it nowhere).
func NodeFor(assignment []gangfit.Nomination, uid types.UID) (node string, ok bool) {
	for _, a := range assignment {
		if a.Pod.UID == uid {
			node, ok = a.Node, true
		}
	}
	return node, ok
}

// Kept are the members a preemption's plan nominates: a reservation the gang held ends when it
// preempts, and these nominations are the gang's now (see Unkept).
func Kept(assignment []gangfit.Nomination) map[types.UID]bool {
	keep := make(map[types.UID]bool, len(assignment))
	for _, a := range assignment {
		keep[a.Pod.UID] = true
	}
	return keep
}

// PreemptsInsteadMessage is why a reservation ends when its gang preempts victims instead, its
// members nominated to nodes.
func PreemptsInsteadMessage(victims int, nodes []string) string {
	return fmt.Sprintf("the gang preempts %d lower-priority pods instead; its members are nominated to %s", victims, strings.Join(nodes, ", "))
}

// PreemptingMessage says what a gang's preemption does, once its members are nominated to nodes.
func PreemptingMessage(plan gangfit.Plan, prio int32, need int, nodes []string) string {
	gangs := ""
	if len(plan.Gangs) > 0 {
		gangs = " (" + strings.Join(plan.Gangs, ", ") + ")"
	}
	parts := ""
	if plan.Parts > 1 {
		parts = fmt.Sprintf(", each of its %d parts in one domain of its own", plan.Parts)
	}
	return fmt.Sprintf("preempting %d pods of lower priority than %d (%d gangs%s, %d single pods) so that %d members fit%s; members nominated to %s",
		len(plan.Victims), prio, len(plan.Gangs), gangs, plan.Singles, need, parts, strings.Join(nodes, ", "))
}
