package coscheduling

import (
	"context"
	"github.com/custom-scheduler/custom-scheduler/pkg/coscheduling/effects"

	fwk "k8s.io/kube-scheduler/framework"

	"github.com/custom-scheduler/custom-scheduler/pkg/coscheduling/gang"
	"github.com/custom-scheduler/custom-scheduler/pkg/coscheduling/gangfit"
	"github.com/custom-scheduler/custom-scheduler/pkg/coscheduling/podgroup"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
	"k8s.io/kubernetes/pkg/scheduler/framework"
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
	if effects.ClearNominations(ctx, pl.handle, &pl.claims, Name, members, except) {
		pl.epoch.Add(1)
	}
}

// activateSiblings asks the framework to move the group's other unscheduled members to the active
// queue at the end of this scheduling cycle.
func (pl *Coscheduling) activateSiblings(state fwk.CycleState, pod *v1.Pod) {
	name, _ := podgroup.Of(pod)
	data, err := state.Read(framework.PodsToActivateKey)
	if err != nil {
		return
	}
	toActivate, ok := data.(*framework.PodsToActivate)
	if !ok {
		return
	}
	pods := pl.unscheduledMembers(pod.Namespace, name, pod.UID)
	if len(pods) == 0 {
		return
	}
	toActivate.Lock()
	defer toActivate.Unlock()
	for _, p := range pods {
		toActivate.Map[p.Namespace+"/"+p.Name] = p
	}
}

// activateGroup moves the group's unscheduled members to the active queue (after a back-off, or when
// the PodGroup appears or changes). PreEnqueue runs again on the way.
func (pl *Coscheduling) activateGroup(namespace, name string) {
	if !pl.running.Load() {
		return
	}
	pods := pl.unscheduledMembers(namespace, name, "")
	if len(pods) == 0 {
		return
	}
	m := make(map[string]*v1.Pod, len(pods))
	for _, p := range pods {
		m[p.Namespace+"/"+p.Name] = p
	}
	pl.handle.Activate(klog.FromContext(pl.ctx), m)
}

// unscheduledMembers are the group's live pods without a node and not reserved here, except one.
func (pl *Coscheduling) unscheduledMembers(namespace, name string, except types.UID) []*v1.Pod {
	members := pl.membersOf(namespace, name)
	pl.mu.RLock()
	g := pl.gangs[podgroup.Key(namespace, name)]
	var out []*v1.Pod
	for _, p := range members {
		if p.UID == except || p.Spec.NodeName != "" {
			continue
		}
		if g != nil {
			if _, isMember := g.Members[p.UID]; isMember {
				continue
			}
		}
		out = append(out, p)
	}
	pl.mu.RUnlock()
	return out
}

// membersOf lists the group's members (live, ungated pods of this profile) from the scheduler's pod
// cache.
func (pl *Coscheduling) membersOf(namespace, name string) []*v1.Pod {
	objs, err := pl.pods.ByIndex(podgroup.IndexName, podgroup.MemberKey(pl.profile, namespace, name))
	if err != nil {
		return nil
	}
	out := make([]*v1.Pod, 0, len(objs))
	for _, o := range objs {
		if p, ok := o.(*v1.Pod); ok {
			out = append(out, p)
		}
	}
	return out
}

// countMembers counts the group's live pods, O(1) (see pgcache.Members): what the hints and the
// handlers count. It trails the pod store by the handler's delay.
func (pl *Coscheduling) countMembers(namespace, name string) int {
	return pl.counts.Count(namespace, name)
}

// countMembersUpTo is PreEnqueue's count: O(1) while it reaches want (the common case, and the whole
// of a complete group's activation, which runs under the scheduling queue's lock: listing the group
// there made a 1000-member activation quadratic); below want, the store's index answers, so that a
// member held back is held back on the store's word and its message counts every member that exists
// (the queue's own handler runs PreEnqueue for a new pod before this plugin's handler may have
// counted it). A member let in on a count that still holds a pod just gone is no risk: the quorum is
// decided on the store (Confirmed).
func (pl *Coscheduling) countMembersUpTo(namespace, name string, want int) int {
	if n := pl.countMembers(namespace, name); n >= want {
		return n
	}
	return pl.storeCount(namespace, name)
}

// storeCount counts the group's live pods on the pod store's word (O(members)), for the decisions
// that must not trail it: a member held back, and whether an attempt can still reach its quorum.
func (pl *Coscheduling) storeCount(namespace, name string) int {
	objs, err := pl.pods.ByIndex(podgroup.IndexName, podgroup.MemberKey(pl.profile, namespace, name))
	if err != nil {
		return 0
	}
	return len(objs)
}

// confirmedCountLocked counts the group's members on the pod store's word (see gang.Gang.Confirmed).
// O(pods of the group), so it is used only where the member count says the quorum is reached.
func (pl *Coscheduling) confirmedCountLocked(g *gang.Gang) int {
	return g.Confirmed(pl.membersOf(g.Namespace, g.Name))
}
