package gang

import (
	v1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/util"

	"github.com/custom-scheduler/custom-scheduler/pkg/coscheduling/podgroup"
)

// CapacityFreedHint is the queueing hint of an assigned pod deleted or shrunk (which includes the
// reservations of a rejected gang being released) for a member pod: it requeues the member, calling
// freed first (the plugin's cached checks become stale), unless spared says the freed pod cannot help
// the member's gang (the gang of key; see Registry.SparedByDelete: under churn, each plain
// lower-priority pod's delete anywhere would otherwise rerun the members' checks and preemption for
// nothing). Pods of no group are skipped.
func CapacityFreedHint(spared func(key string, freed *v1.Pod) bool, freed func()) fwk.QueueingHintFn {
	return func(logger klog.Logger, pod *v1.Pod, oldObj, newObj interface{}) (fwk.QueueingHint, error) {
		name, ok := podgroup.Of(pod)
		if !ok {
			return fwk.QueueSkip, nil
		}
		if gone, _, err := util.As[*v1.Pod](oldObj, newObj); err == nil && gone != nil && spared(podgroup.Key(pod.Namespace, name), gone) {
			logger.V(5).Info("Freed room cannot help a gang that does not fit even with every lower-priority pod evicted", "pod", klog.KObj(pod), "freed", klog.KObj(gone))
			return fwk.QueueSkip, nil
		}
		freed()
		return fwk.Queue, nil
	}
}
