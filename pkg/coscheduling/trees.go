package coscheduling

import (
	"strings"

	v1 "k8s.io/api/core/v1"

	"github.com/custom-scheduler/custom-scheduler/pkg/apis/scheduling/v1alpha1"
	"github.com/custom-scheduler/custom-scheduler/pkg/coscheduling/gang"
	"github.com/custom-scheduler/custom-scheduler/pkg/coscheduling/podgroup"
	"github.com/custom-scheduler/custom-scheduler/pkg/coscheduling/tree"
)

// Jobs of several roles (package tree): each PodGroup keeps its own gang and attempt; a group under a
// gang composite is let in only once the job's other groups have their members (treeHoldBack),
// waits at Permit with its own quorum until the composites above it are ready (treeShortLocked), and
// moves with its siblings (followTreeLocked, in state.go beside stepLocked, which calls it and which
// it calls): their quorum declared together, their attempts failed together when the job can no
// longer be ready. Nothing here runs while no PodGroup is in a tree.

// childGroups returns the PodGroups of ours directly under the composite namespace/name (for the status
// writer).
func (pl *Coscheduling) childGroups(namespace, name string) []*v1alpha1.PodGroup {
	return pl.podGroups.Of(pl.trees.Children(namespace, name))
}

// treeHoldBack says why PreEnqueue holds pod, a member of group namespace/name, back for its tree:
// the tree is malformed or incomplete (a parent missing), or the gang composites above the group lack
// groups with their minMember of live members, the members of their run in progress that succeeded
// counted (the finished-member rule: the pod's own group's by its run, another group's as its last
// step counted them). O(the tree).
func (pl *Coscheduling) treeHoldBack(pod *v1.Pod, pg *v1alpha1.PodGroup) (reason, msg string) {
	root, p := pl.treeOfGroup(pg)
	if root == nil {
		return tree.HoldBack(root, p, "", nil)
	}
	own := podgroup.Key(pg.Namespace, pg.Name)
	pl.mu.RLock()
	credit := pl.gangs.Credits(root, own, pl.credit(pod))
	pl.mu.RUnlock()
	return tree.HoldBack(root, p, own, func(key string) int {
		ns, n, _ := strings.Cut(key, "/")
		return pl.members.Count(ns, n) + credit[key]
	})
}

// treeShortLocked (Permit): g (of PodGroup pg) may not pass on its own quorum with the counts of now
// (see tree.Short): a group is never let through on its own quorum while its tree is unknown.
func (pl *Coscheduling) treeShortLocked(g *gang.Gang, pg *v1alpha1.PodGroup) bool {
	root, p := pl.treeOfGroup(pg)
	return tree.Short(root, p, g.Key(), pl.gangs.Count)
}

// treeOfGroup is pg's tree as the index resolves it (see treeOf and tree.OfGroup): the informer's
// store shows a PodGroup before the handler that keeps the index has run.
func (pl *Coscheduling) treeOfGroup(pg *v1alpha1.PodGroup) (*tree.Branch, *tree.Problem) {
	root, p := pl.treeOf(pg.Namespace, pg.Name)
	return tree.OfGroup(root, p, podgroup.TreeNode(pg))
}

// treeInfeasible is PostFilter's for a member of pg found not to fit as a whole (PreFilter): pg's
// attempt does not start, but the groups of its job that cannot be ready without it fail now rather
// than hold what they reserved until their deadline, unless its preemption (preempted) waits for
// the victims to leave (see gang.Gang.Infeasible).
func (pl *Coscheduling) treeInfeasible(pg *v1alpha1.PodGroup, preempted string) {
	if pl.trees.Empty() {
		return
	}
	pl.mu.Lock()
	g := pl.gangForLocked(pg)
	r, ok := g.Infeasible(pl.clock.Now(), preempted)
	var pods []*v1.Pod
	if ok {
		pods = pl.followTreeLocked(g, r)
	}
	pl.mu.Unlock()
	pl.rejectWaiting(pods, r.Message)
}
