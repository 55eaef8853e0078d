// Package v1 holds the kubescheduler.config.k8s.io/v1 types of custom-scheduler's plugin args, with
// their defaults and conversions to the internal types.
//
// +kubebuilder:object:generate=true
package v1
