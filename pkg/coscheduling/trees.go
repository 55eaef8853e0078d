package coscheduling

import (
	"fmt"
	"strings"

	v1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"

	"github.com/custom-scheduler/custom-scheduler/pkg/apis/scheduling/v1alpha1"
	"github.com/custom-scheduler/custom-scheduler/pkg/coscheduling/attempt"
	"github.com/custom-scheduler/custom-scheduler/pkg/coscheduling/effects"
	"github.com/custom-scheduler/custom-scheduler/pkg/coscheduling/gang"
	"github.com/custom-scheduler/custom-scheduler/pkg/coscheduling/podgroup"
	"github.com/custom-scheduler/custom-scheduler/pkg/coscheduling/tree"
)

// Jobs of several roles (package tree): each PodGroup keeps its own gang and attempt; a group under a
// gang composite is let in only once the job's other groups have their members (treeHoldBack),
// waits at Permit with its own quorum until the composites above it are ready (treeShortLocked), and
// moves with its siblings (followTreeLocked): their quorum declared together, their attempts failed
// together when the job can no longer be ready. Nothing here runs while no PodGroup is in a tree.

// childGroups returns the PodGroups of ours directly under the composite namespace/name (for the status
// writer).
func (pl *Coscheduling) childGroups(namespace, name string) []*v1alpha1.PodGroup {
	var out []*v1alpha1.PodGroup
	for _, n := range pl.trees.Children(namespace, name) {
		if pg := pl.podGroups.Get(n.Namespace, n.Name); pg != nil {
			out = append(out, pg)
		}
	}
	return out
}

// treeNode is a PodGroup's node (both APIs: an in-tree basic group is no gang).
func treeNode(pg *v1alpha1.PodGroup) tree.Node {
	return tree.FromPodGroup(pg, podgroup.MinMember(pg), pg.Annotations[podgroup.AnnotationPolicy] != "Basic")
}

// treeOf resolves the tree of group namespace/name (nil, nil: it is in none).
func (pl *Coscheduling) treeOf(namespace, name string) (*tree.Branch, *tree.Problem) {
	if pl.trees == nil || pl.trees.Empty() {
		return nil, nil
	}
	return pl.trees.Resolve(namespace, name)
}

// treeHoldBack says why PreEnqueue holds a member of group namespace/name back for its tree: the
// tree is malformed or incomplete (a parent missing), or the gang composites above the group lack
// groups with their minMember of live members. O(the tree).
func (pl *Coscheduling) treeHoldBack(namespace, name string) (reason, msg string) {
	root, p := pl.treeOf(namespace, name)
	return tree.HoldBack(root, p, podgroup.Key(namespace, name), func(key string) int {
		ns, n, _ := strings.Cut(key, "/")
		return pl.members.Count(ns, n)
	})
}

// treeCountLocked is a group's count of live members reserved or bound.
func (pl *Coscheduling) treeCountLocked(key string) int {
	if g := pl.gangs.Get(key); g != nil {
		return g.Count()
	}
	return 0
}

// treeShortLocked (Permit): a gang composite above g is not ready with the counts of now.
func (pl *Coscheduling) treeShortLocked(g *gang.Gang) bool {
	root, _ := pl.treeOf(g.Namespace, g.Name)
	return root != nil && !root.Admits(g.Key(), pl.treeCountLocked)
}

// followTreeLocked moves the other groups of g's tree with g's step r (see tree.Branch.Follow): at
// g's quorum, those the tree now admits are let through; at g's failure, those that can no longer
// be ready fail with it and back off. It returns their waiting members, allowed or rejected with
// g's; their events and status are written in the background.
func (pl *Coscheduling) followTreeLocked(g *gang.Gang, r gang.Result) []*v1.Pod {
	if r.Event == attempt.TreeReady || r.Event == attempt.TreeFailed {
		return nil // a follower's step moves nobody else
	}
	root, _ := pl.treeOf(g.Namespace, g.Name)
	if root == nil {
		return nil
	}
	out := func(key string) bool {
		o := pl.gangs.Get(key)
		return key == g.Key() || o != nil && o.Phase == attempt.PhaseFailed && o.BackingOff(r.Now)
	}
	var pods []*v1.Pod
	var moved []gang.Result
	var keys []string
	for _, n := range root.Follow(g.Key(), r.RejectWaiting, pl.treeCountLocked, out) {
		o := pl.gangs.Get(n.Key())
		if o == nil {
			continue
		}
		or := pl.stepLocked(o, func() gang.Result {
			if r.RejectWaiting {
				return o.OnTreeFailed(r.Now, r.Message, pl.backoff)
			}
			return o.OnTreeReady(r.Now, n.Min, func() int { return pl.confirmedCountLocked(o) }, pl.backoff)
		})
		if or.AllowWaiting || or.RejectWaiting {
			pods = append(pods, or.Pods...)
			moved, keys = append(moved, or), append(keys, n.Key())
		}
	}
	if len(moved) > 0 {
		go pl.treeFollowed(g.Namespace, keys, moved)
	}
	return pods
}

// treeFollowed records what followTreeLocked did to each group (keys, results) on its PodGroup.
func (pl *Coscheduling) treeFollowed(namespace string, keys []string, results []gang.Result) {
	for i, r := range results {
		_, name, _ := strings.Cut(keys[i], "/")
		pg := pl.podGroups.Get(namespace, name)
		if pg != nil && r.AllowWaiting && r.FirstQuorum {
			pl.recorder.PodGroup(pg, v1.EventTypeNormal, podgroup.ReasonQuorumReached, r.Message)
		} else if pg != nil && r.RejectWaiting {
			pl.recorder.PodGroup(pg, v1.EventTypeWarning, r.Reason, r.Message)
		}
		pl.notifyStatus(keys[i])
	}
}

// treeLeaves returns the groups of the tree of namespace/name other than it (nil: it is in none).
func (pl *Coscheduling) treeLeaves(namespace, name string) []tree.Node {
	root, _ := pl.treeOf(namespace, name)
	if root == nil {
		return nil
	}
	var out []tree.Node
	for _, n := range root.Leaves() {
		if n.Name != name {
			out = append(out, n)
		}
	}
	return out
}

// treeInfeasible is PostFilter's for a member of pg found not to fit as a whole (PreFilter): pg's
// attempt does not start, but the groups of its job that cannot be ready without it fail now rather
// than hold what they reserved until their deadline.
func (pl *Coscheduling) treeInfeasible(pg *v1alpha1.PodGroup) {
	if pl.trees.Empty() {
		return
	}
	pl.mu.Lock()
	g := pl.gangForLocked(pg)
	msg := g.Outcome.Message
	if msg == "" {
		msg = fmt.Sprintf("PodGroup %s does not fit the nodes now", g.Key())
	}
	pods := pl.followTreeLocked(g, gang.Result{Decision: attempt.Decision{RejectWaiting: true}, Message: msg, Now: pl.clock.Now(), Event: attempt.NoNode})
	pl.mu.Unlock()
	pl.rejectWaiting(pods, msg)
}

// activateGroups activates the members of groups (a composite above them changed).
func (pl *Coscheduling) activateGroups(groups []tree.Node) {
	if !pl.running.Load() {
		return
	}
	for _, n := range groups {
		// Each group once (activateGroup would reach the whole tree from each).
		effects.Activate(klog.FromContext(pl.ctx), pl.handle, pl.unscheduledMembers(n.Namespace, n.Name, "")...)
	}
}
