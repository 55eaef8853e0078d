package coscheduling

import (
	"context"

	"github.com/custom-scheduler/custom-scheduler/pkg/coscheduling/attempt"

	v1 "k8s.io/api/core/v1"
	corev1helpers "k8s.io/component-helpers/scheduling/corev1"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/custom-scheduler/custom-scheduler/pkg/coscheduling/gang"
	"github.com/custom-scheduler/custom-scheduler/pkg/coscheduling/gangfit"
	"github.com/custom-scheduler/custom-scheduler/pkg/coscheduling/podgroup"
)

// Topology-aware placement: the domain choice is pure and lives in gangfit (topology.go there). What
// stays here reads the plugin's state: the domains other gangs' attempts are gathering in, and the
// bound members of a gang whose quorum is met.

// Pod annotations that give a gang a topology policy when its PodGroup cannot (for PodGroups created
// by operators that do not know the field). The PodGroup's spec.topologyPolicy wins.
const (
	// AnnotationTopologyRequired names a node label key: all members in one domain of it, or none placed.
	AnnotationTopologyRequired = gangfit.AnnotationTopologyRequired
	// AnnotationTopologyPreferred lists node label keys, narrowest first, separated by commas.
	AnnotationTopologyPreferred = gangfit.AnnotationTopologyPreferred
)

// busyDomainsLocked returns the domains ("key=value") chosen by other gangs whose attempt has members
// waiting for the quorum. O(tracked groups); called once per attempt of a gang with a topology policy.
func (pl *Coscheduling) busyDomainsLocked(self *gang.Gang) map[string]bool {
	var busy map[string]bool
	for _, g := range pl.gangs {
		if g == self || g.Phase == attempt.PhaseQuorum || !g.InProgress() || g.Placement == nil || g.Placement.Value == "" {
			continue
		}
		if busy == nil {
			busy = map[string]bool{}
		}
		busy[g.Placement.Key+"="+g.Placement.Value] = true
	}
	return busy
}

// extraMemberPlacement is where a member of a gang whose quorum is met goes (see
// gangfit.ExtraMemberPlacement), checked against the room nominated to pods of its priority or more.
func (pl *Coscheduling) extraMemberPlacement(ctx context.Context, pod *v1.Pod, key string, policy gangfit.Policy, nodes []fwk.NodeInfo) *gangfit.Placement {
	name, _ := podgroup.Of(pod)
	pl.mu.RLock()
	var reservedOn []string
	if g := pl.gangs[key]; g != nil {
		reservedOn = g.ReservedNodes()
	}
	pl.mu.RUnlock()
	pinned := gangfit.PinnedDomains(policy, gangfit.BoundNodes(pl.membersOf(pod.Namespace, name), nodes, reservedOn...))
	f := gangfit.New(klog.FromContext(ctx), key, []*v1.Pod{pod}, 1, nodes, nil, pl.claims.Against(corev1helpers.PodPriority(pod), key), &pl.fit, false)
	p := gangfit.ExtraMemberPlacement(f, policy, pinned, nodes)
	f.Done()
	return &p
}
