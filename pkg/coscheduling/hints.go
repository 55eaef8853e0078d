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
		pl.mu.RLock()
		spared := pl.gangs.SparedByDelete(podgroup.Key(pod.Namespace, name), freed, pl.claims.VersionAgainst)
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
// ResourceClaims or asks for an extended resource) when devices it may use are published or changed
// (a ResourceSlice with a device one of its classes selects) or one of its classes is added or
// changed: the whole-gang check counts them (see package devices). Others stay put (devices.Source.Touches).
func (pl *Coscheduling) isSchedulableAfterDeviceChange(logger klog.Logger, pod *v1.Pod, _, newObj interface{}) (fwk.QueueingHint, error) {
	if _, ok := podgroup.Of(pod); !ok || !devices.MayClaim(pod) {
		return fwk.QueueSkip, nil
	}
	slice, _ := newObj.(*resourceapi.ResourceSlice)
	class, _ := newObj.(*resourceapi.DeviceClass)
	if (slice != nil || class != nil) && !pl.dra.Touches(pod, slice, class) {
		logger.V(5).Info("Device change does not touch the member's classes", "pod", klog.KObj(pod))
		return fwk.QueueSkip, nil
	}
	pl.epoch.Add(1)
	return fwk.Queue, nil
}
