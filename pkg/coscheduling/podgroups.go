package coscheduling

import "github.com/custom-scheduler/custom-scheduler/pkg/apis/scheduling/v1alpha1"

// podGroupResource is the plural resource name of PodGroup.
const podGroupResource = "podgroups"

// podGroupEventResource names PodGroup events for EventsToRegister: <plural>.<version>.<group>, the form
// the scheduler resolves to a dynamic informer.
const podGroupEventResource = podGroupResource + ".v1alpha1." + v1alpha1.GroupName
