package config

import (
	"k8s.io/apimachinery/pkg/runtime"
	schedconfig "k8s.io/kubernetes/pkg/scheduler/apis/config"
)

// SchemeGroupVersion is the internal version of kubescheduler.config.k8s.io.
var SchemeGroupVersion = schedconfig.SchemeGroupVersion

var (
	// localSchemeBuilder is kube-scheduler's own builder for the internal version: registering into it
	// puts our args into every scheme the scheduler builds from it, including the one it converts
	// plugin args with.
	localSchemeBuilder = &schedconfig.SchemeBuilder
	// AddToScheme registers the internal args types.
	AddToScheme = localSchemeBuilder.AddToScheme
)

func init() {
	localSchemeBuilder.Register(addKnownTypes)
}

func addKnownTypes(scheme *runtime.Scheme) error {
	scheme.AddKnownTypes(SchemeGroupVersion,
		&CoschedulingArgs{},
		&LoadAwareArgs{},
	)
	return nil
}
