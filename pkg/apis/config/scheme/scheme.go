// Package scheme registers custom-scheduler's plugin args into kube-scheduler's configuration scheme.
// Importing it (the registry does) is what makes a profile's pluginConfig decode into typed args.
package scheme

import (
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	kubeschedulerscheme "k8s.io/kubernetes/pkg/scheduler/apis/config/scheme"

	"github.com/custom-scheduler/custom-scheduler/pkg/apis/config"
	configv1 "github.com/custom-scheduler/custom-scheduler/pkg/apis/config/v1"
)

// Scheme is kube-scheduler's configuration scheme, extended with our args.
var Scheme = kubeschedulerscheme.Scheme

func init() {
	// kube-scheduler's scheme was built from the scheme builders before our packages registered into
	// them, so add our types to it explicitly. The scheme that converts and defaults plugin args is
	// built lazily from the same builders and picks them up by itself.
	utilruntime.Must(config.AddToScheme(Scheme))
	utilruntime.Must(configv1.AddToScheme(Scheme))
}
