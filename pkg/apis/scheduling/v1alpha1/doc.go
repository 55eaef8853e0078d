// Package v1alpha1 is the scheduling.x-k8s.io/v1alpha1 API of custom-scheduler: the PodGroup that the
// Coscheduling plugin schedules as a gang. Its schema is a compatible superset of the PodGroup that
// kubernetes-sigs/scheduler-plugins publishes and that Kubeflow, KubeRay, the MPI and Spark operators
// create, so their manifests apply unchanged.
//
// +kubebuilder:object:generate=true
// +groupName=scheduling.x-k8s.io
package v1alpha1
