package gangfit

import (
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
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
