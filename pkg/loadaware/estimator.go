package loadaware

import (
	v1 "k8s.io/api/core/v1"

	"github.com/custom-scheduler/custom-scheduler/pkg/apis/config"
)

// usage is an amount of cpu (millicores) and memory (bytes): a node's measured or estimated use,
// or a pod's estimate. Its fields are exported so it can be a pod-signature fragment.
type usage struct {
	MilliCPU int64 `json:"milliCPU"`
	Memory   int64 `json:"memory"`
}

func (u usage) add(o usage) usage {
	return usage{MilliCPU: u.MilliCPU + o.MilliCPU, Memory: u.Memory + o.Memory}
}

// estimator guesses the usage of a pod that metrics do not cover yet: a percentage of each
// container's limit, or of its request when it has none, and a fixed default for a container
// that sets neither (BestEffort for that resource).
type estimator struct {
	cpuPercent, memoryPercent int64
	defaultMilliCPU           int64
	defaultMemory             int64
}

func newEstimator(e config.LoadAwareEstimation) estimator {
	return estimator{
		cpuPercent:      e.ScalingFactors.CPU,
		memoryPercent:   e.ScalingFactors.Memory,
		defaultMilliCPU: e.DefaultMilliCPU,
		defaultMemory:   e.DefaultMemoryBytes,
	}
}

// estimate returns the usage assumed for pod once it runs. Regular containers and sidecars
// (restartable init containers) count; plain init containers finish before the pod runs. Pod-level
// resources, when set, replace the containers' sum for their resource; pod overhead is added.
func (e estimator) estimate(pod *v1.Pod) usage {
	var u usage
	for i := range pod.Spec.Containers {
		u = u.add(e.container(&pod.Spec.Containers[i].Resources))
	}
	for i := range pod.Spec.InitContainers {
		c := &pod.Spec.InitContainers[i]
		if c.RestartPolicy != nil && *c.RestartPolicy == v1.ContainerRestartPolicyAlways {
			u = u.add(e.container(&c.Resources))
		}
	}
	if pr := pod.Spec.Resources; pr != nil {
		if base := baseQuantity(pr, v1.ResourceCPU, true); base > 0 {
			u.MilliCPU = base * e.cpuPercent / 100
		}
		if base := baseQuantity(pr, v1.ResourceMemory, false); base > 0 {
			u.Memory = base * e.memoryPercent / 100
		}
	}
	if q, ok := pod.Spec.Overhead[v1.ResourceCPU]; ok {
		u.MilliCPU += q.MilliValue()
	}
	if q, ok := pod.Spec.Overhead[v1.ResourceMemory]; ok {
		u.Memory += q.Value()
	}
	return u
}

func (e estimator) container(r *v1.ResourceRequirements) usage {
	var u usage
	if base := baseQuantity(r, v1.ResourceCPU, true); base > 0 {
		u.MilliCPU = base * e.cpuPercent / 100
	} else {
		u.MilliCPU = e.defaultMilliCPU
	}
	if base := baseQuantity(r, v1.ResourceMemory, false); base > 0 {
		u.Memory = base * e.memoryPercent / 100
	} else {
		u.Memory = e.defaultMemory
	}
	return u
}

// baseQuantity is the limit of a resource, or its request when there is no limit; 0 when neither is set.
func baseQuantity(r *v1.ResourceRequirements, name v1.ResourceName, milli bool) int64 {
	q, ok := r.Limits[name]
	if !ok || q.IsZero() {
		q, ok = r.Requests[name]
	}
	if !ok {
		return 0
	}
	if milli {
		return q.MilliValue()
	}
	return q.Value()
}
