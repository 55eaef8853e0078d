package coscheduling

import (
	"context"
	"sort"
	"time"

	schedutil "k8s.io/kubernetes/pkg/scheduler/util"

	fwk "k8s.io/kube-scheduler/framework"

	"github.com/custom-scheduler/custom-scheduler/pkg/coscheduling/gang"
	"github.com/custom-scheduler/custom-scheduler/pkg/coscheduling/gangfit"
	"github.com/custom-scheduler/custom-scheduler/pkg/coscheduling/podgroup"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	corev1helpers "k8s.io/component-helpers/scheduling/corev1"
	"k8s.io/klog/v2"
	"k8s.io/kubernetes/pkg/scheduler/framework"
)

// A group's members and what is done to them, with no gang state changed here: listing and counting
// them (the O(1) count, and the pod store's word where a decision must not trail it), moving them to
// the active queue, letting them through or rejecting them at Permit, and nominating them to nodes or
// clearing their nominations. The files above decide; these are the hands.

// nominate records each member's node in the scheduler's nominator (so that pods of lower priority
// do not take the room) and in the member's status (the framework writes the preemptor's own), and
// clears the nominations of lower-priority pods to those nodes. It returns the nodes, sorted.
func (pl *Coscheduling) nominate(ctx context.Context, preemptor *v1.Pod, assignment []gangfit.Nomination, prio int32) []string {
	logger := klog.FromContext(ctx)
	nodes := map[string]bool{}
	var patch []*v1.Pod
	var to []string
	for _, a := range assignment {
		m, node := a.Pod, a.Node
		nodes[node] = true
		pi, err := framework.NewPodInfo(m)
		if err != nil {
			continue
		}
		pl.handle.AddNominatedPod(logger, pi, &fwk.NominatingInfo{NominatingMode: fwk.ModeOverride, NominatedNodeName: node})
		// Claimed at once, not when the status patch comes back through the informer: a gang that
		// preempts next must not count this room as free.
		claimed := m.DeepCopy()
		claimed.Status.NominatedNodeName = node
		pl.claims.Set(claimed)
		if m.UID != preemptor.UID && m.Status.NominatedNodeName != node {
			patch, to = append(patch, m), append(to, node)
		}
	}
	var others []*v1.Pod
	for node := range nodes {
		for _, np := range pl.handle.NominatedPodsForNode(node) {
			if p := np.GetPod(); corev1helpers.PodPriority(p) < prio {
				others = append(others, p)
			}
		}
	}
	all := append(patch, others...)
	pl.handle.Parallelizer().Until(ctx, len(all), func(i int) {
		p, node := all[i], ""
		if i < len(patch) {
			node = to[i]
		}
		st := p.Status.DeepCopy()
		st.NominatedNodeName = node
		if err := schedutil.PatchPodStatus(ctx, pl.handle.ClientSet(), p.Name, p.Namespace, &p.Status, st); err != nil {
			logger.V(2).Info("Could not set a pod's nominated node", "pod", klog.KObj(p), "node", node, "err", err)
		}
	}, Name)
	out := make([]string, 0, len(nodes))
	for n := range nodes {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// clearNominations drops the nominations of a gang's members (in the nominator and in their
// status), when the gang no longer preempts: preemption cannot place it, or its PodGroup is gone.
// The preemptor's own status is left to the framework (except is its UID, or empty).
func (pl *Coscheduling) clearNominations(ctx context.Context, members []*v1.Pod, except types.UID) {
	logger := klog.FromContext(ctx)
	var clear []*v1.Pod
	for _, m := range members {
		// A nomination recorded here whose status patch failed is cleared too: the informer's copy
		// does not show it, but the claim and the nominator's entry hold its room.
		inStatus := m.Status.NominatedNodeName != ""
		if m.Spec.NodeName != "" || (!inStatus && !pl.claims.Has(m.UID)) {
			continue
		}
		if pi, err := framework.NewPodInfo(m); err == nil {
			pl.handle.AddNominatedPod(logger, pi, &fwk.NominatingInfo{NominatingMode: fwk.ModeOverride})
		}
		if pl.claims.Forget(m) {
			pl.epoch.Add(1)
		}
		if inStatus && m.UID != except {
			clear = append(clear, m)
		}
	}
	pl.handle.Parallelizer().Until(ctx, len(clear), func(i int) {
		p := clear[i]
		st := p.Status.DeepCopy()
		st.NominatedNodeName = ""
		if err := schedutil.PatchPodStatus(ctx, pl.handle.ClientSet(), p.Name, p.Namespace, &p.Status, st); err != nil {
			logger.V(2).Info("Could not clear a pod's nominated node", "pod", klog.KObj(p), "err", err)
		}
	}, Name)
}

// allow lets waiting members through Permit (see onWaiting).
func (pl *Coscheduling) allow(pods []*v1.Pod) {
	pl.onWaiting(pods, func(wp fwk.WaitingPod) { wp.Allow(Name) })
}

// rejectWaiting rejects waiting members (see onWaiting).
func (pl *Coscheduling) rejectWaiting(pods []*v1.Pod, msg string) {
	pl.onWaiting(pods, func(wp fwk.WaitingPod) { wp.Reject(Name, msg) })
}

// onWaiting applies fn to each member waiting at Permit. A member whose Permit returned Wait but that
// the framework has not registered as waiting yet is retried briefly, so that no straggler is left
// waiting (allowed: holding its quorum's last member back until its timeout; rejected: holding
// resources until then).
func (pl *Coscheduling) onWaiting(pods []*v1.Pod, f func(fwk.WaitingPod)) {
	// One stop of a waiting pod at a time (see gangpreemption.Preemption.WaitingLock).
	fn := func(wp fwk.WaitingPod) {
		pl.waitingMu.Lock()
		defer pl.waitingMu.Unlock()
		f(wp)
	}
	for _, p := range pods {
		if wp := pl.handle.GetWaitingPod(p.UID); wp != nil {
			fn(wp)
			continue
		}
		uid := p.UID
		go func() {
			_ = wait.PollUntilContextTimeout(pl.ctx, 20*time.Millisecond, 2*time.Second, false, func(context.Context) (bool, error) {
				if wp := pl.handle.GetWaitingPod(uid); wp != nil {
					fn(wp)
					return true, nil
				}
				return false, nil
			})
		}()
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
