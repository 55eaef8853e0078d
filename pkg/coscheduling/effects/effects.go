// Package effects applies what the gang plugin decided, through the scheduler's framework handle
// and the API: members nominated to nodes (in the nominator, in their status, as claims) or their
// nominations cleared, and members waiting at Permit let through or rejected. It decides nothing and
// holds no state: the plugin calls it after releasing its lock.
package effects

import (
	"context"
	"sort"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	corev1helpers "k8s.io/component-helpers/scheduling/corev1"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework"
	schedutil "k8s.io/kubernetes/pkg/scheduler/util"

	"github.com/custom-scheduler/custom-scheduler/pkg/coscheduling/claims"
	"github.com/custom-scheduler/custom-scheduler/pkg/coscheduling/gangfit"
)

// Nominate records each member's node in the scheduler's nominator (so that pods of lower priority
// do not take the room) and in the member's status (the framework writes the preemptor's own), and
// clears the nominations of lower-priority pods to those nodes, except the gang's own members. A
// member the pod store no longer holds live (deleted or bound since the gang's members were listed) is
// not nominated: upstream's nominator checks its lister the same way, and a claim set for a pod
// already deleted would keep its room for ever (see claims.Claims.SetIfPresent). It returns the
// nodes, sorted.
func Nominate(ctx context.Context, h fwk.Handle, c *claims.Claims, plugin string, preemptor *v1.Pod, assignment []gangfit.Nomination, prio int32) []string {
	logger := klog.FromContext(ctx)
	current := storeLookup(h)
	nodes := map[string]bool{}
	own := make(map[types.UID]bool, len(assignment))
	var patch []*v1.Pod
	var to []string
	for _, a := range assignment {
		m, node := a.Pod, a.Node
		own[m.UID] = true
		nodes[node] = true
		// Claimed at once, not when the status patch comes back through the informer: a gang that
		// preempts next must not count this room as free.
		claimed := m.DeepCopy()
		claimed.Status.NominatedNodeName = node
		if !c.SetIfPresent(claimed, current) {
			logger.V(4).Info("Member is gone or bound since it was listed: not nominated", "pod", klog.KObj(m), "node", node)
			continue
		}
		pi, err := framework.NewPodInfo(m)
		if err != nil {
			continue
		}
		h.AddNominatedPod(logger, pi, &fwk.NominatingInfo{NominatingMode: fwk.ModeOverride, NominatedNodeName: node})
		if m.UID != preemptor.UID && m.Status.NominatedNodeName != node {
			patch, to = append(patch, m), append(to, node)
		}
	}
	var others []*v1.Pod
	for node := range nodes {
		for _, np := range h.NominatedPodsForNode(node) {
			if p := np.GetPod(); ClearsNomination(p, prio, own) {
				others = append(others, p)
			}
		}
	}
	all := append(patch, others...)
	h.Parallelizer().Until(ctx, len(all), func(i int) {
		p, node := all[i], ""
		if i < len(patch) {
			node = to[i]
		}
		st := p.Status.DeepCopy()
		st.NominatedNodeName = node
		if err := schedutil.PatchPodStatus(ctx, h.ClientSet(), p.Name, p.Namespace, &p.Status, st); err != nil {
			logger.V(2).Info("Could not set a pod's nominated node", "pod", klog.KObj(p), "node", node, "err", err)
		}
	}, plugin)
	out := make([]string, 0, len(nodes))
	for n := range nodes {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// ClearsNomination reports whether a gang's preemption at priority prio clears the nomination of
// pod, nominated to one of the nodes it nominates its members to: a pod of lower priority, unless it
// is one of the members it nominates (own), whose priority may be below the gang's when its members
// differ.
func ClearsNomination(pod *v1.Pod, prio int32, own map[types.UID]bool) bool {
	return !own[pod.UID] && corev1helpers.PodPriority(pod) < prio
}

// storeLookup reads a pod's copy from the scheduler's pod store (the informer whose handlers keep the
// claims); nil when the handle has no informer factory (unit tests), in which case every pod counts
// as present.
func storeLookup(h fwk.Handle) func(*v1.Pod) (*v1.Pod, bool) {
	f := h.SharedInformerFactory()
	if f == nil {
		return func(p *v1.Pod) (*v1.Pod, bool) { return p, true }
	}
	lister := f.Core().V1().Pods().Lister()
	return func(p *v1.Pod) (*v1.Pod, bool) {
		cur, err := lister.Pods(p.Namespace).Get(p.Name)
		return cur, err == nil
	}
}

// ClearNominations drops the nominations of a gang's members (in the nominator and in their
// status), when the gang no longer preempts: preemption cannot place it, or its PodGroup is gone.
// The preemptor's own status is left to the framework (except is its UID, or empty). forgot is
// called for each claim forgotten (room moved, so cached checks are stale), before any status patch.
func ClearNominations(ctx context.Context, h fwk.Handle, c *claims.Claims, plugin string, members []*v1.Pod, except types.UID, forgot func()) {
	logger := klog.FromContext(ctx)
	var clear []*v1.Pod
	for _, m := range members {
		// A nomination recorded here whose status patch failed is cleared too: the informer's copy
		// does not show it, but the claim and the nominator's entry hold its room.
		inStatus := m.Status.NominatedNodeName != ""
		if m.Spec.NodeName != "" || (!inStatus && !c.Has(m.UID)) {
			continue
		}
		if pi, err := framework.NewPodInfo(m); err == nil {
			h.AddNominatedPod(logger, pi, &fwk.NominatingInfo{NominatingMode: fwk.ModeOverride})
		}
		if c.Forget(m) {
			forgot()
		}
		if inStatus && m.UID != except {
			clear = append(clear, m)
		}
	}
	h.Parallelizer().Until(ctx, len(clear), func(i int) {
		p := clear[i]
		st := p.Status.DeepCopy()
		st.NominatedNodeName = ""
		if err := schedutil.PatchPodStatus(ctx, h.ClientSet(), p.Name, p.Namespace, &p.Status, st); err != nil {
			logger.V(2).Info("Could not clear a pod's nominated node", "pod", klog.KObj(p), "err", err)
		}
	}, plugin)
}

// OnWaiting applies f to each member waiting at Permit. A member whose Permit returned Wait but that
// the framework has not registered as waiting yet is retried briefly, so that no straggler is left
// waiting (allowed: holding its quorum's last member back until its timeout; rejected: holding
// resources until then).
func OnWaiting(ctx context.Context, h fwk.Handle, mu *sync.Mutex, pods []*v1.Pod, f func(fwk.WaitingPod)) {
	// One stop of a waiting pod at a time (see gangpreemption.Preemption.WaitingLock).
	fn := func(wp fwk.WaitingPod) {
		mu.Lock()
		defer mu.Unlock()
		f(wp)
	}
	for _, p := range pods {
		if wp := h.GetWaitingPod(p.UID); wp != nil {
			fn(wp)
			continue
		}
		uid := p.UID
		go func() {
			_ = wait.PollUntilContextTimeout(ctx, 20*time.Millisecond, 2*time.Second, false, func(context.Context) (bool, error) {
				if wp := h.GetWaitingPod(uid); wp != nil {
					fn(wp)
					return true, nil
				}
				return false, nil
			})
		}()
	}
}
