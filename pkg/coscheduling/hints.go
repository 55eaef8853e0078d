package coscheduling

import (
	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/util"

	"github.com/custom-scheduler/custom-scheduler/pkg/coscheduling/devices"
	"github.com/custom-scheduler/custom-scheduler/pkg/coscheduling/gangfit"
	"github.com/custom-scheduler/custom-scheduler/pkg/coscheduling/podgroup"
)

// Queueing hints. The scheduler calls them only for pods this plugin rejected or gated, so they are
// all gang members; each returns Queue only when the event can change this plugin's answer.

// isSchedulableAfterPodAdded requeues a member when a pod of its own group is added and the group now
// has minMember pods (an O(1) count, see pgcache.Pods.Count).
func (pl *Coscheduling) isSchedulableAfterPodAdded(logger klog.Logger, pod *v1.Pod, oldObj, newObj interface{}) (fwk.QueueingHint, error) {
	_, added, err := util.As[*v1.Pod](oldObj, newObj)
	if err != nil {
		return fwk.Queue, err
	}
	name, ok := podgroup.Of(pod)
	if !ok || added.Namespace != pod.Namespace {
		return fwk.QueueSkip, nil
	}
	if addedName, ok := podgroup.Of(added); !ok || addedName != name {
		return fwk.QueueSkip, nil
	}
	pg := pl.podGroups.Get(pod.Namespace, name)
	if pg == nil {
		return fwk.QueueSkip, nil
	}
	if count := pl.members.Count(pod.Namespace, name) + pl.credit(pod); count < podgroup.MinMember(pg) {
		logger.V(5).Info("Pod group still incomplete after a member was added", "pod", klog.KObj(pod), "podGroup", podgroup.Key(pod.Namespace, name), "members", count)
		return fwk.QueueSkip, nil
	}
	return fwk.Queue, nil
}

// isSchedulableAfterCapacityFreed requeues a member when an assigned pod is deleted or shrinks (which
// includes the reservations of a rejected gang being released).
// A gang that does not fit even with every lower-priority pod evicted is not requeued for a plain
// lower-priority pod's delete (see gang.Gang.SparedByDelete): under churn, each such delete anywhere
// would otherwise rerun its members' checks and preemption for nothing.
func (pl *Coscheduling) isSchedulableAfterCapacityFreed(logger klog.Logger, pod *v1.Pod, oldObj, newObj interface{}) (fwk.QueueingHint, error) {
	name, ok := podgroup.Of(pod)
	if !ok {
		return fwk.QueueSkip, nil
	}
	if freed, _, err := util.As[*v1.Pod](oldObj, newObj); err == nil && freed != nil {
		version := pl.claims.Version()
		pl.mu.RLock()
		g := pl.gangs[podgroup.Key(pod.Namespace, name)]
		spared := g != nil && g.SparedByDelete(freed, version)
		pl.mu.RUnlock()
		if spared {
			logger.V(5).Info("Freed room cannot help a gang that does not fit even with every lower-priority pod evicted", "pod", klog.KObj(pod), "freed", klog.KObj(freed))
			return fwk.QueueSkip, nil
		}
	}
	pl.epoch.Add(1)
	return fwk.Queue, nil
}

// isSchedulableAfterNodeChange requeues a member when a node is added, or gains allocatable, labels,
// or loses taints or unschedulable.
func (pl *Coscheduling) isSchedulableAfterNodeChange(logger klog.Logger, pod *v1.Pod, oldObj, newObj interface{}) (fwk.QueueingHint, error) {
	if _, ok := podgroup.Of(pod); !ok {
		return fwk.QueueSkip, nil
	}
	oldNode, newNode, err := util.As[*v1.Node](oldObj, newObj)
	if err != nil {
		return fwk.Queue, err
	}
	if oldNode == nil || gangfit.NodeGainedRoom(oldNode, newNode) {
		pl.epoch.Add(1)
		return fwk.Queue, nil
	}
	logger.V(5).Info("Node update does not make room for a gang", "pod", klog.KObj(pod), "node", klog.KObj(newNode))
	return fwk.QueueSkip, nil
}

// isSchedulableAfterDeviceChange requeues a member that may claim devices through DRA (it has
// ResourceClaims or asks for an extended resource) when devices are published, freed or classed: the
// whole-gang check counts them (see package devices).
func (pl *Coscheduling) isSchedulableAfterDeviceChange(_ klog.Logger, pod *v1.Pod, _, _ interface{}) (fwk.QueueingHint, error) {
	if _, ok := podgroup.Of(pod); !ok || !devices.MayClaim(pod) {
		return fwk.QueueSkip, nil
	}
	pl.epoch.Add(1)
	return fwk.Queue, nil
}

// isSchedulableAfterClaimChange requeues a member that may claim devices through DRA when a
// ResourceClaim's devices are freed (its allocation dropped, or the claim deleted while allocated), or
// when a PodGroup's own claim is allocated or freed (it pins or releases the members that use it: see
// package devices). Other claim updates (an allocation written at binding, reservations, device
// status) free nothing: a member they requeued, and the cached checks they made stale, were a
// scheduling attempt and a whole-gang check for nothing, for every member waiting, on every claim
// written.
func (pl *Coscheduling) isSchedulableAfterClaimChange(_ klog.Logger, pod *v1.Pod, oldObj, newObj interface{}) (fwk.QueueingHint, error) {
	if _, ok := podgroup.Of(pod); !ok || !devices.MayClaim(pod) {
		return fwk.QueueSkip, nil
	}
	oldClaim, newClaim, err := util.As[*resourceapi.ResourceClaim](oldObj, newObj)
	if err != nil {
		return fwk.Queue, err
	}
	if !devices.ClaimFreesOrPins(oldClaim, newClaim) {
		return fwk.QueueSkip, nil
	}
	pl.epoch.Add(1)
	return fwk.Queue, nil
}

// isSchedulableAfterPodGroupChange requeues the members of a PodGroup that was created or whose spec
// changed (its generation). Status-only updates, such as the plugin's own status patches, requeue
// nobody. The objects come from the scheduler's dynamic informer (unstructured) or a typed one.
func (pl *Coscheduling) isSchedulableAfterPodGroupChange(_ klog.Logger, pod *v1.Pod, oldObj, newObj interface{}) (fwk.QueueingHint, error) {
	name, ok := podgroup.Of(pod)
	if !ok {
		return fwk.QueueSkip, nil
	}
	if changed, err := podgroup.SpecChanged(pod.Namespace, name, oldObj, newObj); err != nil || changed {
		return fwk.Queue, err
	}
	return fwk.QueueSkip, nil
}

// isSchedulableAfterOwnUpdate requeues a member refused for malformed topology annotations once an
// update of its own makes them valid (the queue requeues a pod for an annotation change only on a
// hint).
func (pl *Coscheduling) isSchedulableAfterOwnUpdate(_ klog.Logger, pod *v1.Pod, oldObj, newObj interface{}) (fwk.QueueingHint, error) {
	oldPod, newPod, err := util.As[*v1.Pod](oldObj, newObj)
	if err != nil {
		return fwk.Queue, err
	}
	name, ok := podgroup.Of(newPod)
	if !ok {
		return fwk.QueueSkip, nil
	}
	pg := pl.podGroups.Get(pod.Namespace, name)
	if pg == nil || oldPod == nil {
		return fwk.QueueSkip, nil
	}
	if _, err := gangfit.PolicyFor(pg, oldPod, pl.defaultTopology); err == nil {
		return fwk.QueueSkip, nil
	}
	if _, err := gangfit.PolicyFor(pg, newPod, pl.defaultTopology); err != nil {
		return fwk.QueueSkip, nil
	}
	return fwk.Queue, nil
}
