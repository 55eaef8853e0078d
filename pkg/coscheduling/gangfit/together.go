package gangfit

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
)

// The whole-tree check: a job of several roles (package tree) is checked as one gang before a group
// of it holds anything, so that a role that fits alone does not reserve room the other roles need.

// Group is one PodGroup of a job in the whole-tree check: Need of its Candidates still to place.
type Group struct {
	Key        string
	Candidates []*v1.Pod
	Need       int
}

// FitTogether checks the groups of one job as one gang: Need members of each placed at once on the
// nodes' free resources (see Check), beside the claimed pods' room; and, when they fit and plan is
// set, plans them within in (nil: anywhere) over the same prepared check (see PlanPlacement), so that
// the first group's members are offered only the places planned for them, not those another group
// needs. A group with more candidates than it needs is counted by its first Need, which stands for
// any other choice only when its candidates are alike (see Alike); otherwise, or when a group has too
// few candidates (the pods are held back before they are queued), or only one group is left to place
// (its own check said), the job is not judged here: feasible, no plan. job names the job in the
// message. An infeasible Result has Tree set and no Shortfall (its numbers would be the job's, not the
// group's).
func FitTogether(logger klog.Logger, job string, groups []Group, nodes []fwk.NodeInfo, claimed []*v1.Pod, shared *Shared, plan bool, in *Placement) (Result, *PlacementPlan) {
	members, names, need, ok := together(groups)
	if !ok || len(names) < 2 {
		return Result{Feasible: true}, nil
	}
	res, f := Check(logger, job, members, need, nodes, nil, nil, claimed, shared)
	defer f.Done()
	if !res.Feasible {
		return Result{Tree: true, Message: fmt.Sprintf("PodGroup %s fits, but not together with the groups its job %s needs with it (members to place: %s): %s",
			groups[0].Key, job, strings.Join(names, ", "), res.Message)}, nil
	}
	if !plan {
		return res, nil
	}
	return res, PlanPlacement(f, in)
}

// JobDomain is the domain of the job's topology policy (a composite's: a required key, preferred keys,
// or both) that holds the missing members of a job's groups together (see FitTogether for which):
// the one its placed members pin (pinned, see PinnedDomains), else the tightest where they fit (see
// ChoosePlacementAvoiding: steered away from the domains in avoid while another fits; with no
// required key, anywhere when no preferred domain fits). Where the groups cannot be counted together,
// the first group's own members choose. composite names the composite whose domain it is, in the
// message.
func JobDomain(logger klog.Logger, composite string, groups []Group, pol Policy, pinned map[string]string, avoid Avoid, nodes []fwk.NodeInfo, claimed []*v1.Pod, shared *Shared) (Placement, bool) {
	var p Placement
	ok := true
	if len(pol.Preferred) == 0 && pinned[pol.Required] != "" {
		p = PinnedPlacement(pol, pinned, nodes)
	} else {
		members, _, need, judged := together(groups)
		if !judged {
			members, need = groups[0].Candidates, groups[0].Need
		}
		f := New(logger, composite, members, need, nodes, nil, claimed, shared, false)
		if f == nil {
			return Placement{}, false
		}
		p, ok = ChoosePlacementAvoiding(f, pol, pinned, avoid)
		f.Done()
	}
	if ok && p.Level != LevelAnywhere {
		p.Message = fmt.Sprintf("placed in %s=%s with the other groups of its job %s", p.Key, p.Value, composite)
	}
	return p, ok
}

// Joint is the members a job's groups place together (each group's first Need, see FitTogether) and
// how many in all: ok false when they cannot stand for the job.
func Joint(groups []Group) (members []*v1.Pod, need int, ok bool) {
	members, _, need, ok = together(groups)
	return members, need, ok
}

// together is the members FitTogether places, each group's first Need: ok is false when they cannot
// stand for the job (see FitTogether); names say each group's part.
func together(groups []Group) (members []*v1.Pod, names []string, need int, ok bool) {
	for _, g := range groups {
		switch {
		case g.Need <= 0:
			continue
		case len(g.Candidates) < g.Need, len(g.Candidates) > g.Need && !Alike(g.Candidates):
			return nil, nil, 0, false
		}
		members = append(members, g.Candidates[:g.Need]...)
		names = append(names, fmt.Sprintf("%s: %d", g.Key, g.Need))
		need += g.Need
	}
	return members, names, need, true
}

// Alike reports whether pods are interchangeable for the check: the same requests, node constraints
// and claims (the members of one template).
func Alike(pods []*v1.Pod) bool {
	if len(pods) < 2 {
		return true
	}
	first, req := pods[0], podRequestList(pods[0])
	for _, p := range pods[1:] {
		if !sameConstraints(first, p) || !equality.Semantic.DeepEqual(first.Spec.ResourceClaims, p.Spec.ResourceClaims) ||
			!equality.Semantic.DeepEqual(req, podRequestList(p)) {
			return false
		}
	}
	return true
}

// AlikeGroups reports whether groups of pods are interchangeable for the check: as many pods in each,
// pod for pod alike once ordered by their requests and constraints (the replicas of one template,
// a leader and its workers each).
func AlikeGroups(groups [][]*v1.Pod) bool {
	if len(groups) < 2 {
		return true
	}
	order := func(pods []*v1.Pod) []*v1.Pod {
		sigs := make(map[*v1.Pod]string, len(pods))
		for _, p := range pods {
			var sig strings.Builder
			req := podRequestList(p)
			for _, name := range slices.Sorted(maps.Keys(req)) {
				q := req[name]
				fmt.Fprintf(&sig, "%s=%d,", name, q.MilliValue())
			}
			sigs[p] = fmt.Sprintf("%s/%d", sig.String(), constraintsHash(p))
		}
		out := slices.Clone(pods)
		slices.SortStableFunc(out, func(a, b *v1.Pod) int { return strings.Compare(sigs[a], sigs[b]) })
		return out
	}
	first := order(groups[0])
	for _, g := range groups[1:] {
		if len(g) != len(first) {
			return false
		}
		for i, p := range order(g) {
			if !Alike([]*v1.Pod{first[i], p}) {
				return false
			}
		}
	}
	return true
}
