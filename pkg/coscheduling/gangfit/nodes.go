package gangfit

import (
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/util"

	"github.com/custom-scheduler/custom-scheduler/pkg/coscheduling/podgroup"
)

// NodeGainedRoom reports whether a node update can let more pods onto it.
func NodeGainedRoom(oldNode, newNode *v1.Node) bool {
	for name, q := range newNode.Status.Allocatable {
		if old, ok := oldNode.Status.Allocatable[name]; !ok || q.Cmp(old) > 0 {
			return true
		}
	}
	if oldNode.Spec.Unschedulable && !newNode.Spec.Unschedulable {
		return true
	}
	if !equality.Semantic.DeepEqual(oldNode.Spec.Taints, newNode.Spec.Taints) {
		return true
	}
	return !equality.Semantic.DeepEqual(oldNode.Labels, newNode.Labels)
}

// NodeChangeHint is the queueing hint of a node event for a member pod: a node added, or one that
// gained room (NodeGainedRoom: allocatable, labels, taints or unschedulable lost), requeues it, and
// calls freed first (the plugin's cached checks become stale); other updates and pods of no group
// are skipped.
func NodeChangeHint(freed func()) fwk.QueueingHintFn {
	return func(logger klog.Logger, pod *v1.Pod, oldObj, newObj interface{}) (fwk.QueueingHint, error) {
		if _, ok := podgroup.Of(pod); !ok {
			return fwk.QueueSkip, nil
		}
		oldNode, newNode, err := util.As[*v1.Node](oldObj, newObj)
		if err != nil {
			return fwk.Queue, err
		}
		if oldNode == nil || NodeGainedRoom(oldNode, newNode) {
			freed()
			return fwk.Queue, nil
		}
		logger.V(5).Info("Node update does not make room for a gang", "pod", klog.KObj(pod), "node", klog.KObj(newNode))
		return fwk.QueueSkip, nil
	}
}
