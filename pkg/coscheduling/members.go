package coscheduling

import (
	"context"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/custom-scheduler/custom-scheduler/pkg/apis/scheduling/v1alpha1"
	"github.com/custom-scheduler/custom-scheduler/pkg/coscheduling/effects"
	"github.com/custom-scheduler/custom-scheduler/pkg/coscheduling/gang"
	"github.com/custom-scheduler/custom-scheduler/pkg/coscheduling/gangfit"
	"github.com/custom-scheduler/custom-scheduler/pkg/coscheduling/podgroup"
	"github.com/custom-scheduler/custom-scheduler/pkg/coscheduling/tree"
)

// A group's members and what is done to them, with no gang state changed here: listing and counting
// them (the O(1) count, and the pod store's word where a decision must not trail it), moving them to
// the active queue, letting them through or rejecting them at Permit, and nominating them to nodes or
// clearing their nominations. The files above decide; these are the hands.

// allow lets waiting members through Permit (see effects.OnWaiting).
func (pl *Coscheduling) allow(pods []*v1.Pod) {
	effects.OnWaiting(pl.ctx, pl.handle, &pl.waitingMu, pods, func(wp fwk.WaitingPod) { wp.Allow(Name) })
}

// rejectWaiting rejects waiting members (see effects.OnWaiting).
func (pl *Coscheduling) rejectWaiting(pods []*v1.Pod, msg string) {
	effects.OnWaiting(pl.ctx, pl.handle, &pl.waitingMu, pods, func(wp fwk.WaitingPod) { wp.Reject(Name, msg) })
}

// nominate nominates members to nodes (see effects.Nominate) and returns the nodes, sorted.
func (pl *Coscheduling) nominate(ctx context.Context, preemptor *v1.Pod, assignment []gangfit.Nomination, prio int32) []string {
	return effects.Nominate(ctx, pl.handle, &pl.claims, Name, preemptor, assignment, prio)
}

// clearNominations drops members' nominations (see effects.ClearNominations).
func (pl *Coscheduling) clearNominations(ctx context.Context, members []*v1.Pod, except types.UID) {
	effects.ClearNominations(ctx, pl.handle, &pl.claims, Name, members, except, pl.stale)
}

// activateSiblings asks the framework to move the group's other unscheduled members, and its tree's
// other groups', to the active queue at the end of this scheduling cycle.
func (pl *Coscheduling) activateSiblings(state fwk.CycleState, pod *v1.Pod) {
	name, _ := podgroup.Of(pod)
	effects.ActivateInCycle(state, pl.unscheduledMembers(pl.withTree(pod.Namespace, name), pod.UID))
}

// activateGroup moves the unscheduled members of the group and of its tree's other groups to the
// active queue (after a back-off, or when the PodGroup appears or changes). PreEnqueue runs again on
// the way.
func (pl *Coscheduling) activateGroup(namespace, name string) {
	pl.activateGroups(pl.withTree(namespace, name))
}

// activateGroups activates the unscheduled members of groups (a composite above them changed, or see
// activateGroup).
func (pl *Coscheduling) activateGroups(groups []tree.Node) {
	if !pl.running.Load() {
		return
	}
	// Each group once (activateGroup would reach the whole tree from each).
	effects.Activate(klog.FromContext(pl.ctx), pl.handle, pl.unscheduledMembers(groups, "")...)
}

// unscheduledMembers are the live pods of groups without a node and not reserved here, except one
// (see gang.Registry.UnscheduledIn). The groups' pods are listed outside the lock.
func (pl *Coscheduling) unscheduledMembers(groups []tree.Node, except types.UID) []*v1.Pod {
	members := pl.members.InGroups(groups)
	pl.mu.RLock()
	defer pl.mu.RUnlock()
	return pl.gangs.UnscheduledIn(tree.Keys(groups), members, except)
}

// confirmedCountLocked counts the group's members on the pod store's word (see gang.Gang.Confirmed).
// O(pods of the group), so it is used only where the member count says the quorum is reached.
func (pl *Coscheduling) confirmedCountLocked(g *gang.Gang) int {
	return g.Confirmed(pl.members.InGroup(g.Namespace, g.Name))
}

// credit is the finished-member rule's part of a member's quorum count: the members of its group and
// run that left by succeeding, while that run is in progress (see pgcache.Finished.Credit). O(1).
func (pl *Coscheduling) credit(pod *v1.Pod) int {
	name, _ := podgroup.Of(pod)
	return pl.finished.Credit(pl.members.Counts, pod.Namespace, name, podgroup.Run(pod))
}

// jobLeaves returns the other groups of namespace/name's job (see tree.Branch.JobLeavesBut); nil: it
// is in no job.
func (pl *Coscheduling) jobLeaves(namespace, name string) []tree.Node {
	root, _ := pl.treeOf(namespace, name)
	return root.JobLeavesBut(podgroup.Key(namespace, name), name)
}

// withTree is the group namespace/name and the other groups of its tree.
func (pl *Coscheduling) withTree(namespace, name string) []tree.Node {
	root, _ := pl.treeOf(namespace, name)
	return append([]tree.Node{{Namespace: namespace, Name: name}}, root.LeavesBut(name)...)
}

// jobOf is the job pod's group pg preempts or reserves for as one, as choose (gang.Gang.JobForPreemption
// or gang.JobToReserve, called under the lock) makes it of what is read here, outside the lock: the time (which of its
// domains' refusals still hold), the snapshot's nodes (listed by nodes), the groups' members and, in
// a job, its groups with a required topology of their own (placed in parts). nil: pg is in no tree,
// the snapshot cannot be read, or choose finds no job.
func (pl *Coscheduling) jobOf(pod *v1.Pod, pg *v1alpha1.PodGroup, nodes func() ([]fwk.NodeInfo, error), choose func(gang.PreFilterIn, *tree.Branch) (gang.JobPreemption, bool)) *gang.JobPreemption {
	root, _ := pl.treeOf(pg.Namespace, pg.Name)
	if root == nil {
		return nil
	}
	listed, err := nodes()
	if err != nil {
		return nil
	}
	in := gang.PreFilterIn{Now: pl.clock.Now(), Member: pod, Want: podgroup.MinMember(pg), Nodes: listed, GroupMembers: pl.members.InGroupKey,
		Members: func() []*v1.Pod { return pl.members.InGroup(pg.Namespace, pg.Name) }}
	if job := root.JobOf(podgroup.Key(pg.Namespace, pg.Name)); job != nil {
		in.OwnDomain = gang.OwnDomains(job.Leaves(), pl.podGroups.Get, pl.members.InGroup, pl.defaultTopology)
	}
	pl.mu.Lock()
	defer pl.mu.Unlock()
	in.Gangs = pl.gangs.All()
	job, ok := choose(in, root)
	if !ok {
		return nil
	}
	return &job
}
