package devices

import (
	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/dynamic-resource-allocation/resourceclaim"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/custom-scheduler/custom-scheduler/pkg/coscheduling/podgroup"
)

// Which pending members a ResourceSlice or DeviceClass event concerns: those whose devices it may
// change. A slice published or changed concerns a member when one of its devices is selected by a
// class the member's claims (or its extended resources) name; a class added or changed, when the
// member names it. What cannot be told (a claim not made yet, a selector that does not evaluate)
// concerns the member. The selectors' answers are kept per slice version (see matches), so a
// member's hint costs one claim-cache read per claim and a map lookup per class after the first.

// ChangeHint is the queueing hint of a ResourceSlice or DeviceClass event for a member pod: it
// requeues a member that may claim devices through DRA (MayClaim) when devices it may use are
// published or changed, or one of its classes is added or changed (Touches over s), and calls freed
// first (the plugin's cached checks become stale); other members, and pods of no group, stay put.
func (s *Source) ChangeHint(freed func()) fwk.QueueingHintFn {
	return func(logger klog.Logger, pod *v1.Pod, _, newObj interface{}) (fwk.QueueingHint, error) {
		if _, ok := podgroup.Of(pod); !ok || !MayClaim(pod) {
			return fwk.QueueSkip, nil
		}
		slice, _ := newObj.(*resourceapi.ResourceSlice)
		class, _ := newObj.(*resourceapi.DeviceClass)
		if (slice != nil || class != nil) && !s.Touches(pod, slice, class) {
			logger.V(5).Info("Device change does not touch the member's classes", "pod", klog.KObj(pod))
			return fwk.QueueSkip, nil
		}
		freed()
		return fwk.Queue, nil
	}
}

// Touches reports whether the event on slice (or, when slice is nil, on class) may change what
// pod's devices count.
func (s *Source) Touches(pod *v1.Pod, slice *resourceapi.ResourceSlice, class *resourceapi.DeviceClass) bool {
	if s == nil || s.dra == nil {
		return true
	}
	classes, known := s.classesOf(pod)
	if !known {
		return true
	}
	if slice == nil {
		return class == nil || classes.Has(class.Name)
	}
	for name := range classes {
		pr, ok := s.resolve(&resourceapi.ExactDeviceRequest{DeviceClassName: name})
		if !ok {
			return true
		}
		selected, ok := s.matches(nil, slice, pr)
		if !ok {
			return true
		}
		for _, yes := range selected {
			if yes {
				return true
			}
		}
	}
	return false
}

// classesOf are the device classes the pod's own claims and its extended resources name; known is
// false when a claim cannot be read (not made yet, or not found).
func (s *Source) classesOf(pod *v1.Pod) (classes sets.Set[string], known bool) {
	classes = sets.New[string]()
	for i := range pod.Spec.ResourceClaims {
		name, _, err := resourceclaim.Name(pod, &pod.Spec.ResourceClaims[i])
		if err != nil {
			return nil, false
		}
		if name == nil {
			continue
		}
		claim, err := s.dra.ResourceClaims().Get(pod.Namespace, *name)
		if err != nil {
			return nil, false
		}
		classes.Insert(classesOf(member{claims: []*resourceapi.ResourceClaim{claim}})...)
	}
	for _, e := range s.classedRequests(pod) {
		classes.Insert(e.class)
	}
	return classes, true
}
