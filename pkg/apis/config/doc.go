// Package config holds the internal types of custom-scheduler's plugin args. They are registered into
// kube-scheduler's own kubescheduler.config.k8s.io scheme, so a KubeSchedulerConfiguration profile decodes
// them strictly and hands each plugin its typed, defaulted args.
//
// +kubebuilder:object:generate=true
package config
