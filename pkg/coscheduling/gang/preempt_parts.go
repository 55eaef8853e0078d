package gang

import (
	"fmt"
	"slices"
	"sort"
	"strings"

	v1 "k8s.io/api/core/v1"
	policy "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/types"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/custom-scheduler/custom-scheduler/pkg/coscheduling/gangfit"
	"github.com/custom-scheduler/custom-scheduler/pkg/coscheduling/tree"
)

// A job whose groups to place are under several composites with a required key of their own (two
// replicas of a set, each needing a rack of its own) preempts in parts: one victim search per
// composite, each in one domain of its key, the later ones counting the earlier ones' victims gone
// and their members placed, all within one domain of the job's own key. All parts fit, or nothing
// is evicted.

// JobPart is a share of a job's preemption placed in one domain of its own (see jobParts): the groups
// to place under one composite with a required key, and the domains of the composites with one from
// the job's domain down to it (Chain, outermost first; the last is the part's own). A part with no
// Chain is placed in the job's domain only.
type JobPart struct {
	Chain  []*TreeDomain
	Groups []gangfit.Group
}

// where is where part p's members go among nodes: the nodes of its chain's pinned domains, in one
// domain of its own composite's (or group's) policy, the one its placed members pin if they do (no
// policy for a part with no chain).
func (p JobPart) where(nodes []fwk.NodeInfo) (on []fwk.NodeInfo, pol gangfit.Policy, pinned map[string]string) {
	on = nodes
	if pin := pinnedIn(p.Chain, nodes); pin != nil {
		on = onNodes(nodes, pin)
	}
	if len(p.Chain) > 0 {
		d := p.Chain[len(p.Chain)-1]
		pol, pinned = d.Policy(), d.Pinned
		if d.Value != "" && pinned == nil {
			pinned = map[string]string{d.Key: d.Value}
		}
	}
	return on, pol, pinned
}

// jobParts splits the job's groups to place (those of groups with Need > 0) by the innermost
// composite with a required key of its own they are under, below the job's domain (the outermost
// composite with a domain above the group keyed key, when it holds the whole job; else the job), or
// by the group itself when it requires a domain of its own (in.OwnDomain): the domain outer and the
// parts. parts are nil when one search places the groups (see JobPlacement): none is under such a
// composite nor requires its own, or (unless single) all are under one composite and none requires
// its own. A composite above a part's own on its chain (a pair of replicas in one block, each in a
// rack) may be on several parts' chains and not pinned yet: each of its domains is tried for them
// all (see pinnings). ok is false, and parts nil, when a composite's placed members are in several
// domains. O(groups × depth + the job's pods).
func jobParts(in PreFilterIn, root, job *tree.Branch, key string, groups []gangfit.Group, single bool) (outer *TreeDomain, parts []JobPart, ok bool) {
	top := job
	if c, found := root.DomainAbove(key); found && len(c.Leaves()) >= len(job.Leaves()) {
		if outer = domainOf(in, c); outer == nil {
			return nil, nil, false
		}
		top = c
	}
	byInner := map[string]*JobPart{}
	var inners []string
	own := false // a group with a required domain of its own: one search would not honour it
	for _, g := range groups {
		if g.Need <= 0 {
			continue
		}
		var chain []*TreeDomain
		inner := ""
		below := root.DomainsBelow(top, g.Key)
		if key := in.OwnDomain[g.Key]; key != "" {
			// The group's own required domain, innermost.
			ns, name, _ := strings.Cut(g.Key, "/")
			below = append(below, &tree.Branch{Node: tree.Node{Namespace: ns, Name: name, Domain: key}})
			own = true
		}
		for _, c := range below {
			d := domainOf(in, c)
			if d == nil {
				return nil, nil, false
			}
			chain, inner = append(chain, d), c.Key()
		}
		p := byInner[inner]
		if p == nil {
			p = &JobPart{Chain: chain}
			byInner[inner] = p
			inners = append(inners, inner)
		}
		p.Groups = append(p.Groups, g)
	}
	if len(inners) == 0 || len(inners) == 1 && !own && (!single || inners[0] == "") {
		return outer, nil, true
	}
	// The parts with a domain of their own first, by composite; the groups under none last.
	sort.Slice(inners, func(a, b int) bool {
		return inners[a] != "" && (inners[b] == "" || inners[a] < inners[b])
	})
	for _, inner := range inners {
		parts = append(parts, *byInner[inner])
	}
	return outer, parts, true
}

// maxOrderedParts bounds the parts whose every order is searched (4: 24 orders); more are searched
// in composite order only.
const maxOrderedParts = 4

// preemptParts is Preempt for a job in parts (see JobPart): in each domain of the job's own required
// key (the one its members pin, if they do; every node without one), with each domain of the
// composites above the parts' own not pinned yet (see pinnings), and in each order of the parts (up
// to maxOrderedParts of them; more in composite order), the parts' searches one after the other;
// the plan that violates the fewest PodDisruptionBudgets, then evicts the fewest pods, then comes first
// (domains by name, orders as permuted), is chosen. Not helpful when none holds every part: a search
// one part after another may miss a fit that exists, so that answer is never hopeless (a pod's
// deletion brings the job back). O(domains × pinnings × orders × parts × a victim search).
func (in PreemptIn) preemptParts(who string, prio int32, need int) PreemptOut {
	pdbs, err := in.PDBs()
	if err != nil {
		return PreemptOut{Result: PreemptError, Err: fmt.Errorf("listing PodDisruptionBudgets: %w", err)}
	}
	j := in.Job
	var best *gangfit.Plan
	units := 0
	for _, nodes := range outerDomains(j.Outer, in.Nodes) {
		for _, parts := range pinnedOrders(j.Parts, nodes) {
			plan := in.planParts(parts, nodes, prio, pdbs)
			units = max(units, plan.Units)
			if plan.Fits && (best == nil || plan.Violations < best.Violations || plan.Violations == best.Violations && len(plan.Victims) < len(best.Victims)) {
				best = &plan
			}
		}
	}
	switch {
	case best == nil && units == 0:
		return PreemptOut{Result: PreemptNotHelpful, DropNominations: true, Hopeless: true,
			Message: fmt.Sprintf("preemption: %s does not fit, and no pod of lower priority runs on the nodes its members may use", who)}
	case best == nil:
		return PreemptOut{Result: PreemptNotHelpful, DropNominations: true,
			Message: fmt.Sprintf("preemption: %s does not fit, each of its %d parts in one domain of its own, even if the lower-priority pods and gangs on the nodes its members may use were evicted; nothing was evicted", who, len(j.Parts))}
	case len(best.Victims) == 0:
		return PreemptOut{Result: PreemptNotHelpful}
	}
	return PreemptOut{Result: PreemptVictims, Plan: *best, Need: need}
}

// outerDomains are the node sets a job in parts may be placed in: with no required key, all nodes;
// else the domain its members pin, or each domain of the key, by name.
func outerDomains(d *TreeDomain, nodes []fwk.NodeInfo) [][]fwk.NodeInfo {
	if d == nil || d.Key == "" {
		return [][]fwk.NodeInfo{nodes}
	}
	byValue := map[string][]fwk.NodeInfo{}
	for _, ni := range nodes {
		if n := ni.Node(); n != nil {
			if v, ok := n.Labels[d.Key]; ok && (d.Value == "" || v == d.Value) {
				byValue[v] = append(byValue[v], ni)
			}
		}
	}
	values := make([]string, 0, len(byValue))
	for v := range byValue {
		values = append(values, v)
	}
	slices.Sort(values)
	out := make([][]fwk.NodeInfo, len(values))
	for i, v := range values {
		out[i] = byValue[v]
	}
	return out
}

// planParts places the job's parts on nodes one after the other (see JobPart): each part's missing
// members in one domain of its own composite's key (on the nodes its chain's pinned domains hold),
// with the victims the earlier parts chose counted gone and their members counted on their nodes. The
// plan is the parts' together; Fits is false when one part does not fit.
func (in PreemptIn) planParts(parts []JobPart, nodes []fwk.NodeInfo, prio int32, pdbs []*policy.PodDisruptionBudget) gangfit.Plan {
	j := in.Job
	gone := map[types.UID]bool{}
	leaving := func(p *v1.Pod) bool { return gone[p.UID] || in.Leaving != nil && in.Leaving(p) }
	claimed := slices.Clone(in.claimed())
	out := gangfit.Plan{Fits: true, Gangs: []string{}}
	for _, p := range parts {
		members, need, ok := gangfit.Joint(p.Groups)
		if !ok || need <= 0 {
			continue
		}
		on, pol, pinned := p.where(nodes)
		f := gangfit.New(in.Logger, j.Job, members, need, on, nil, claimed, in.Fit.Private(), true)
		if f == nil {
			return gangfit.Plan{Units: out.Units}
		}
		// Victims are read on every node: a gang with members beyond the part's nodes goes whole.
		plan := gangfit.PlanPreemption(f, in.Nodes, pol, pinned, prio, j.Unit, leaving, pdbs)
		out.Units += plan.Units
		if !plan.Fits {
			f.Done()
			return gangfit.Plan{Units: out.Units}
		}
		if len(plan.Victims) == 0 {
			plan.Assignment = gangfit.Assign(f, pol, pinned)
		}
		f.Done()
		for _, v := range plan.Victims {
			gone[v.UID] = true
		}
		claimed = append(claimed, nominated(plan.Assignment)...)
		out.Victims = append(out.Victims, plan.Victims...)
		out.Gangs = append(out.Gangs, plan.Gangs...)
		out.Singles += plan.Singles
		out.Assignment = append(out.Assignment, plan.Assignment...)
	}
	slices.Sort(out.Gangs)
	// Each search counted the budgets' allowances afresh: the victims are counted again together.
	out.Gangs, out.Parts, out.Violations = slices.Compact(out.Gangs), len(parts), gangfit.Violations(out.Victims, pdbs)
	return out
}

// ordersOf are the orders of parts searched: every order up to maxOrderedParts parts, else the
// given one.
func ordersOf(parts []JobPart) [][]JobPart {
	if len(parts) <= maxOrderedParts {
		return permutations(parts)
	}
	return [][]JobPart{parts}
}

// pinnedOrders are the orders of each of parts' pinnings on nodes (see pinnings and ordersOf).
func pinnedOrders(parts []JobPart, nodes []fwk.NodeInfo) [][]JobPart {
	var out [][]JobPart
	for _, pinned := range pinnings(parts, nodes) {
		out = append(out, ordersOf(pinned)...)
	}
	return out
}

// maxPinnings bounds the ways pinnings tries (the first ones, by domain name).
const maxPinnings = 16

// pinnings are the ways to place parts on nodes when composites above the parts' own on their chains
// are not pinned yet (a pair of replicas in one block, each in a rack): each such composite pinned to
// one of its domains among nodes, the same for every part it is above (every combination, domains
// by name, up to maxPinnings). parts as they are when every such composite is pinned.
func pinnings(parts []JobPart, nodes []fwk.NodeInfo) [][]JobPart {
	var free []*TreeDomain
	for _, p := range parts {
		for _, d := range p.Chain[:max(len(p.Chain)-1, 0)] {
			if d.Value == "" && d.Key != "" && !slices.ContainsFunc(free, func(f *TreeDomain) bool { return f.Composite == d.Composite }) {
				free = append(free, d)
			}
		}
	}
	out := [][]JobPart{parts}
	for _, f := range free {
		var next [][]JobPart
		for _, value := range domainValues(f.Key, nodes) {
			for _, ps := range out {
				if len(next) < maxPinnings {
					next = append(next, pinnedTo(ps, f.Composite, value))
				}
			}
		}
		out = next
	}
	return out
}

// pinnedTo is parts with the composite keyed composite pinned to value on every chain.
func pinnedTo(parts []JobPart, composite, value string) []JobPart {
	out := make([]JobPart, len(parts))
	for i, p := range parts {
		out[i] = JobPart{Chain: slices.Clone(p.Chain), Groups: p.Groups}
		for k, d := range out[i].Chain {
			if d.Composite == composite {
				c := *d
				c.Value = value
				out[i].Chain[k] = &c
			}
		}
	}
	return out
}

// domainValues are the values of label key on nodes, by name.
func domainValues(key string, nodes []fwk.NodeInfo) []string {
	var values []string
	for _, ni := range nodes {
		if n := ni.Node(); n != nil {
			if v, ok := n.Labels[key]; ok && !slices.Contains(values, v) {
				values = append(values, v)
			}
		}
	}
	slices.Sort(values)
	return values
}

// permutations are every order of parts, the given order first.
func permutations(parts []JobPart) [][]JobPart {
	if len(parts) <= 1 {
		return [][]JobPart{parts}
	}
	var out [][]JobPart
	for i := range parts {
		rest := append(slices.Clone(parts[:i]), parts[i+1:]...)
		for _, p := range permutations(rest) {
			out = append(out, append([]JobPart{parts[i]}, p...))
		}
	}
	return out
}

// planRoomParts plans a job's reservation in parts (see JobPart): in each domain of the job's own
// required key (the one its members pin; every node without one), with each domain of the composites
// above the parts' own not pinned yet (see pinnings), and each order of the parts (up to
// maxOrderedParts; more in composite order), each part's missing members in one domain of its own
// key on the room that frees, the later parts counting the earlier ones' members placed; the first
// plan where every part fits (domains by name, orders as permuted). Each group's members are taken in
// name order, so that the same room gives the same plan. O(domains × orders × parts × a plan).
func planRoomParts(in ReserveIn, j *JobPreemption, nodes []fwk.NodeInfo, prio int32) gangfit.ReservationPlan {
	why := "no domain of its key"
	for _, on := range outerDomains(j.Outer, nodes) {
		for _, parts := range pinnedOrders(j.Parts, on) {
			var plans []gangfit.ReservationPlan
			claimed := slices.Clone(in.claimed(prio))
			for _, p := range parts {
				members, need, ok := gangfit.Joint(byName(p.Groups))
				if !ok || need <= 0 {
					continue
				}
				partNodes, pol, pinned := p.where(on)
				f := gangfit.NewReservable(in.Logger, j.Job, members, need, partNodes, claimed, prio, in.Devices)
				plan := gangfit.PlanReservation(f, pol, pinned)
				f.Done()
				if !plan.OK {
					plans, why = nil, plan.Message
					break
				}
				plans = append(plans, plan)
				claimed = append(claimed, nominated(plan.Assignment)...)
			}
			if plans != nil {
				pl := gangfit.Placement{Level: gangfit.LevelAnywhere}
				if d := j.Outer; d != nil && d.Key != "" && len(on) > 0 {
					pl = gangfit.Placement{Key: d.Key, Value: on[0].Node().Labels[d.Key], Level: gangfit.LevelRequired}
				}
				p := gangfit.JoinReservations(plans, pl)
				p.Message = "for its job " + j.Job + " " + p.Message
				return p
			}
		}
	}
	return gangfit.ReservationPlan{Message: "for its job " + j.Job + ", in " + fmt.Sprint(len(j.Parts)) + " parts each in one domain of its own: " + why}
}

// nominated are the members of assignment as pods nominated to their nodes (copies), for a later
// part to count their room taken.
func nominated(assignment []gangfit.Nomination) []*v1.Pod {
	out := make([]*v1.Pod, len(assignment))
	for i, a := range assignment {
		placed := *a.Pod
		placed.Status.NominatedNodeName = a.Node
		out[i] = &placed
	}
	return out
}
