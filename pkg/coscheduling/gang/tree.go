package gang

import (
	"cmp"
	"slices"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/custom-scheduler/custom-scheduler/pkg/apis/config"
	"github.com/custom-scheduler/custom-scheduler/pkg/apis/scheduling/v1alpha1"
	"github.com/custom-scheduler/custom-scheduler/pkg/coscheduling/gangfit"
	"github.com/custom-scheduler/custom-scheduler/pkg/coscheduling/podgroup"
	"github.com/custom-scheduler/custom-scheduler/pkg/coscheduling/tree"
)

// Jobs of several roles in the step's check (see Gang.check): the groups a group's check places with
// it, and the domain its job holds its groups in.

// together lists the ways of the other groups of the member's job that its check places with its
// own, the first tried first (see PreFilterIn.neededWays); none when the tree has too few children.
// Of K of N groups, those with pods among claimed (nominated, by the job's preemption or
// reservation) are chosen first.
func (g *Gang) together(in PreFilterIn, root *tree.Branch, claimed []*v1.Pod) [][]gangfit.Group {
	var nominated map[string]bool
	for _, p := range claimed {
		if name, ok := podgroup.Of(p); ok {
			if nominated == nil {
				nominated = map[string]bool{}
			}
			nominated[podgroup.Key(p.Namespace, name)] = true
		}
	}
	return in.neededWays(root, g.Key(), func(key string) bool { return nominated[key] })
}

// maxWays bounds the choices among K of N groups not alike that a check tries (see
// tree.Branch.NeededEach and Job.Alternatives).
const maxWays = 8

// neededWays lists the ways to place the other groups of the job of the group keyed key with it
// (see needed): one, needed's, when the tree's choices are among alike groups, whose members stand
// for each other; else every way the tree offers (up to maxWays), none standing for another, in the
// order a choice takes them (prefer, then those closest to ready, then by name), those the check
// cannot judge last (see judged). None when the tree has too few children. O(NeededEach + ways × the
// job's pods).
func (in PreFilterIn) neededWays(root *tree.Branch, key string, prefer func(key string) bool) [][]gangfit.Group {
	if groups, ok := in.needed(root, key, prefer); ok {
		return [][]gangfit.Group{groups}
	}
	var ways [][]gangfit.Group
	for _, w := range root.NeededEach(key, in.count, prefer, maxWays) {
		groups := make([]gangfit.Group, 0, len(w))
		for _, n := range w {
			groups = append(groups, in.toPlace(n, in.GroupMembers(n.Key())))
		}
		ways = append(ways, groups)
	}
	slices.SortStableFunc(ways, func(a, b []gangfit.Group) int {
		return cmp.Compare(b2i(!judged(a)), b2i(!judged(b)))
	})
	return ways
}

// judged reports whether the check can judge a way (see gangfit.FitTogether): no group of it has
// fewer live members to place than it needs (its pods not all created yet: it cannot be ready now)
// nor spare members that differ. A way it cannot judge is never taken as fitting.
func judged(groups []gangfit.Group) bool {
	_, _, ok := gangfit.Joint(groups)
	return ok
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

// notOfGroups are the pods of claimed that are not members of groups: the room nominated to a job's
// other groups is taken against a group's check unless the check places them with it. The other
// replicas of K of N are not placed with it: what a replica's preemption nominated is not another's.
func notOfGroups(claimed []*v1.Pod, groups []gangfit.Group) []*v1.Pod {
	return notOfKeys(claimed, keysOf(groups))
}

// notOfKeys are the pods of claimed that are not members of the groups keyed keys.
func notOfKeys(claimed []*v1.Pod, keys []string) []*v1.Pod {
	if len(keys) == 0 {
		return claimed
	}
	return slices.DeleteFunc(slices.Clone(claimed), func(p *v1.Pod) bool { return ofAny(p, keys) })
}

// ofGroups are the pods of claimed that are members of groups (those notOfGroups leaves out).
func ofGroups(claimed []*v1.Pod, groups []gangfit.Group) []*v1.Pod {
	if len(groups) == 0 {
		return nil
	}
	keys := keysOf(groups)
	return slices.DeleteFunc(slices.Clone(claimed), func(p *v1.Pod) bool { return !ofAny(p, keys) })
}

// ofAny reports whether pod p is a member of one of the groups keyed keys.
func ofAny(p *v1.Pod, keys []string) bool {
	name, ok := podgroup.Of(p)
	return ok && slices.Contains(keys, podgroup.Key(p.Namespace, name))
}

// keysOf are the groups' keys.
func keysOf(groups []gangfit.Group) []string {
	keys := make([]string, len(groups))
	for i, g := range groups {
		keys[i] = g.Key
	}
	return keys
}

// claimed are the nominations a preemption counts as room taken: Claims (of other groups than its
// own), less those of the groups a job's preemption places (j.Groups). The nominations of the job's
// other groups (another replica's, of K of N) are room taken: both replicas would go there.
func (in PreemptIn) claimed() []*v1.Pod {
	if in.Job == nil {
		return in.Claims()
	}
	return notOfGroups(in.Claims(), in.Job.Groups)
}

// claimed are the nominations of priority prio and above a reservation counts as room taken: Claims
// (of other groups than the holder's), less those of its job's groups (j.Keys), whose room it holds.
func (in ReserveIn) claimed(prio int32) []*v1.Pod {
	if in.Job == nil {
		return in.Claims(prio)
	}
	return notOfKeys(in.Claims(prio), in.Job.Keys)
}

// needed lists the other groups of the job of the group keyed key that are placed with it for every
// gang composite above it to be ready (see tree.Branch.Needed), each with its candidates and need
// from its gang's state. ok is false when the tree leaves a choice among groups that are not alike
// (gangfit.AlikeGroups), or has too few children. O(the job's pods).
func (in PreFilterIn) needed(root *tree.Branch, key string, prefer func(key string) bool) (_ []gangfit.Group, ok bool) {
	needed, ok := root.NeededPreferring(key, in.count, prefer)
	if !ok {
		return nil, false
	}
	for _, among := range needed.Choices {
		pods := make([][]*v1.Pod, len(among))
		for i, n := range among {
			pods[i] = in.GroupMembers(n.Key())
		}
		if !gangfit.AlikeGroups(pods) {
			return nil, false
		}
	}
	out := make([]gangfit.Group, 0, len(needed.Groups))
	for _, n := range needed.Groups {
		out = append(out, in.toPlace(n, in.GroupMembers(n.Key())))
	}
	return out, true
}

// count is the group keyed key's members reserved or bound (by its gang's state; 0 untracked).
func (in PreFilterIn) count(key string) int {
	if o := in.Gangs[key]; o != nil {
		return o.Count()
	}
	return 0
}

// toPlace is group n's part of its job's check: its members (its live pods) still to place and how
// many of them its minimum needs, by its gang's state (the members counted toward its quorum, and
// its run's succeeded ones), or, for a group with no state yet, by which are bound.
func (in PreFilterIn) toPlace(n tree.Node, members []*v1.Pod) gangfit.Group {
	var candidates []*v1.Pod
	counted := 0
	if o := in.Gangs[n.Key()]; o != nil {
		candidates, _, counted = o.Split(members)
		counted += o.Credit
	} else {
		for _, p := range members {
			if p.Spec.NodeName != "" {
				counted++
			} else {
				candidates = append(candidates, p)
			}
		}
	}
	return gangfit.Group{Key: n.Key(), Candidates: candidates, Need: n.Min - counted}
}

// tree is the member's job (nil: its group is in none).
func (in PreFilterIn) tree() *tree.Branch {
	if in.Tree == nil {
		return nil
	}
	return in.Tree()
}

// treeDomain is the domain the member's job holds its groups in (the outermost composite above the
// group with a required or preferred topology, see tree.Branch.DomainAbove): the one the bound or
// reserved members of its groups pin, else one the check chooses (Value ""), away from the domains the
// filters refused any of its groups in recently (a group records the job's domain as refused when it
// has no policy of its own, see OnNoNode); and, in Inner, the same for each composite below it on the
// group's path with a required key of its own (tree.Branch.DomainsBelow), narrower each. nil: the job
// has none, or its members are already in several (placed anywhere, as a flat gang whose bound members
// share no domain); an inner composite whose members are in several is left out. In Preferring, the
// composites below it with preferred keys only (tree.Branch.PreferringBelow). O(the job's pods).
func (g *Gang) treeDomain(in PreFilterIn, root *tree.Branch) *TreeDomain {
	c, ok := root.DomainAbove(g.Key())
	if !ok {
		return nil
	}
	d := domainOf(in, c)
	if d == nil {
		return nil
	}
	for _, ic := range root.DomainsBelow(c, g.Key()) {
		if id := domainOf(in, ic); id != nil {
			d.Inner = append(d.Inner, id)
		}
	}
	for _, ic := range root.PreferringBelow(c, g.Key()) {
		d.Preferring = append(d.Preferring, domainOf(in, ic))
	}
	return d
}

// domainOf is the domain of composite c's policy that its groups' placed members pin (see treeDomain);
// nil when they are in several domains of its required key.
func domainOf(in PreFilterIn, c *tree.Branch) *TreeDomain {
	var pods []*v1.Pod
	var reserved, leaves []string
	var refused map[string]time.Time
	for _, n := range c.Leaves() {
		leaves = append(leaves, n.Key())
		pods = append(pods, in.GroupMembers(n.Key())...)
		if o := in.Gangs[n.Key()]; o != nil {
			reserved = append(reserved, o.ReservedNodes()...)
			for domain, until := range o.RefusedDomains(in.Now) {
				if refused == nil {
					refused = map[string]time.Time{}
				}
				if until.After(refused[domain]) {
					refused[domain] = until
				}
			}
		}
	}
	d := &TreeDomain{Composite: c.Key(), Key: c.Domain, Preferred: c.Preferred, Refused: refused, Leaves: leaves}
	d.Pinned = gangfit.PinnedDomains(d.Policy(), gangfit.BoundNodes(pods, in.Nodes, reserved...))
	d.Nominated = gangfit.Nominated(d.Policy(), gangfit.BoundNodes(nil, in.Nodes, nominatedNodes(pods)...))
	if d.Key != "" && d.Pinned != nil && d.Pinned[d.Key] == "" {
		return nil
	}
	d.Value = d.Pinned[d.Key]
	return d
}

// JobPreemption is a job of several roles preempting as one (see Preempt): the missing members of the
// groups its whole-tree check places together (the member's own group first), in the job's domain.
type JobPreemption struct {
	// Job names the job (its root's key); Unit is its unit of eviction (see podgroup.UnitOf): no pod
	// of it is a victim.
	Job, Unit string
	Groups    []gangfit.Group
	Domain    *TreeDomain
	// Members are the live pods of the job's groups; Nominated the nodes its groups' earlier
	// preemptions and its members' statuses name.
	Members   []*v1.Pod
	Nominated []string
	// Holder is the group whose gang holds the job's reservation (see JobToReserve); Keys are all its
	// groups'.
	Holder string
	Keys   []string
	// Parts, when set, split the groups to place under several composites with a domain of their
	// own, within Outer (nil: anywhere): the job preempts in parts (see JobPart).
	Outer *TreeDomain
	Parts []JobPart
	// RefusedDevices are, by node, the members of its groups whose devices the real filter refused
	// there (see JobRefusals), for its reservation's plan (a preemption search guesses nowhere).
	RefusedDevices map[string][]types.UID
	// Ways are the job with its check's other ways to place (K of N groups not alike, see
	// Job.Alternatives), searched in turn while none helps (see Preempt); of a preemption only.
	Ways []JobPreemption
}

// RequireOwnDomain are the groups among leaves with a required topology of their own or whose policy
// cannot be read (see OwnDomains), by key.
func RequireOwnDomain(leaves []tree.Node, get func(ns, name string) *v1alpha1.PodGroup, members func(ns, name string) []*v1.Pod, def config.TopologyPolicy) map[string]bool {
	out := map[string]bool{}
	for k := range OwnDomains(leaves, get, members, def) {
		out[k] = true
	}
	return out
}

// OwnDomains are the required topology keys of the groups among leaves that have one of their own
// (see gangfit.PolicyFor, read on the group's first member), by key; a group whose policy cannot be
// read (the PodGroup gone, an annotation malformed) maps to "".
func OwnDomains(leaves []tree.Node, get func(ns, name string) *v1alpha1.PodGroup, members func(ns, name string) []*v1.Pod, def config.TopologyPolicy) map[string]string {
	out := map[string]string{}
	for _, n := range leaves {
		pg, first := get(n.Namespace, n.Name), &v1.Pod{}
		if pods := members(n.Namespace, n.Name); len(pods) > 0 {
			first = pods[0]
		}
		if pg == nil {
			out[n.Key()] = ""
		} else if p, err := gangfit.PolicyFor(pg, first, def); err != nil {
			out[n.Key()] = ""
		} else if p.Required != "" {
			out[n.Key()] = p.Required
		}
	}
	return out
}

// JobForPreemption is the job g's member preempts for when its group fits alone but not with the other
// groups its job needs (see Gang.check): the groups of the check's first way (and, in Ways, of its
// others; the groups whose members are nominated first, as the check takes them) in the domain the
// check placed them, each group's
// members still to place by its gang's state. ok is false when there is no job to preempt for (the
// group is in none, or its groups cannot be judged together). The job is the tree of
// the topmost gang composite above the group (tree.Branch.JobOf), not every group under the root: a
// basic composite above holds other jobs, each placed on its own. Under the plugin's lock (it reads
// the gangs' state). O(the job's pods).
func (g *Gang) JobForPreemption(in PreFilterIn, root *tree.Branch) (JobPreemption, bool) {
	if root == nil {
		return JobPreemption{}, false
	}
	// Under no gang composite (a basic one with a domain), the group is its own unit.
	unit, leaves := g.Key(), []tree.Node{{Namespace: g.Namespace, Name: g.Name}}
	if job := root.JobOf(g.Key()); job != nil {
		unit, leaves = job.Key(), job.Leaves()
	}
	candidates, _, counted := g.Split(in.Members())
	own := gangfit.Group{Key: g.Key(), Candidates: candidates, Need: in.Want - counted - g.Credit}
	var members, nominated []*v1.Pod
	for _, n := range leaves {
		for _, m := range in.GroupMembers(n.Key()) {
			members = append(members, m)
			if m.Status.NominatedNodeName != "" {
				nominated = append(nominated, m)
			}
		}
	}
	// As the check: of K of N groups, those its members are nominated in (a preemption's) first, so
	// that a later search does not evict for other replicas while the room made for these holds.
	ways := g.together(in, root, nominated)
	if len(ways) == 0 {
		ways = [][]gangfit.Group{nil}
	}
	domain := g.treeDomain(in, root)
	var j JobPreemption
	for i, way := range ways {
		w := JobPreemption{Job: root.Key(), Unit: unit, Groups: append([]gangfit.Group{own}, way...), Domain: domain}
		if _, _, ok := gangfit.Joint(w.Groups); !ok {
			if i == 0 {
				return JobPreemption{}, false
			}
			continue
		}
		if job := root.JobOf(g.Key()); job != nil {
			w.Outer, w.Parts, _ = jobParts(in, root, job, g.Key(), w.Groups, false)
		}
		if i == 0 {
			j = w
		} else {
			j.Ways = append(j.Ways, w)
		}
	}
	if len(j.Groups) < 2 && j.Domain == nil {
		return JobPreemption{}, false
	}
	j.Members = members
	for _, n := range leaves {
		if o := in.Gangs[n.Key()]; o != nil {
			j.Nominated = append(j.Nominated, o.NominatedNodes...)
		}
	}
	for _, m := range nominated {
		j.Nominated = append(j.Nominated, m.Status.NominatedNodeName)
	}
	for i := range j.Ways {
		j.Ways[i].Members, j.Ways[i].Nominated = j.Members, j.Nominated
	}
	return j, true
}
