package v1

import (
	"k8s.io/apimachinery/pkg/runtime"
	schedconfigv1 "k8s.io/kube-scheduler/config/v1"
)

// SchemeGroupVersion is kubescheduler.config.k8s.io/v1.
var SchemeGroupVersion = schedconfigv1.SchemeGroupVersion

var (
	// localSchemeBuilder is kube-scheduler's own builder for v1: the scheduler decodes, defaults and
	// converts plugin args with schemes built from it.
	localSchemeBuilder = &schedconfigv1.SchemeBuilder
	// AddToScheme registers the v1 args types, their defaults and conversions.
	AddToScheme = localSchemeBuilder.AddToScheme
)

func init() {
	localSchemeBuilder.Register(addKnownTypes, addDefaultingFuncs, addConversionFuncs)
}

func addKnownTypes(scheme *runtime.Scheme) error {
	scheme.AddKnownTypes(SchemeGroupVersion,
		&CoschedulingArgs{},
		&LoadAwareArgs{},
	)
	return nil
}

func addDefaultingFuncs(scheme *runtime.Scheme) error {
	scheme.AddTypeDefaultingFunc(&CoschedulingArgs{}, func(obj interface{}) { SetDefaults_CoschedulingArgs(obj.(*CoschedulingArgs)) })
	scheme.AddTypeDefaultingFunc(&LoadAwareArgs{}, func(obj interface{}) { SetDefaults_LoadAwareArgs(obj.(*LoadAwareArgs)) })
	return nil
}

func addConversionFuncs(scheme *runtime.Scheme) error {
	if err := addCoschedulingConversions(scheme); err != nil {
		return err
	}
	return addLoadAwareConversions(scheme)
}
