// Package registry is the one list of custom-scheduler's out-of-tree plugins. The binary and the
// integration tests both build their scheduler from it, so what is tested is what ships.
package registry

import (
	"k8s.io/kubernetes/cmd/kube-scheduler/app"
	frameworkruntime "k8s.io/kubernetes/pkg/scheduler/framework/runtime"

	// Registers our plugin args into kube-scheduler's configuration scheme.
	_ "github.com/custom-scheduler/custom-scheduler/pkg/apis/config/scheme"
	"github.com/custom-scheduler/custom-scheduler/pkg/coscheduling"
	"github.com/custom-scheduler/custom-scheduler/pkg/loadaware"
)

// Plugin is one out-of-tree plugin: its registry name and factory.
type Plugin struct {
	Name    string
	Factory frameworkruntime.PluginFactory
}

// Plugins returns every out-of-tree plugin this scheduler carries.
func Plugins() []Plugin {
	return []Plugin{
		{Name: coscheduling.Name, Factory: coscheduling.New},
		{Name: loadaware.Name, Factory: loadaware.New},
	}
}

// Options returns the scheduler command options that register every plugin from Plugins.
func Options() []app.Option {
	plugins := Plugins()
	opts := make([]app.Option, 0, len(plugins))
	for _, p := range plugins {
		opts = append(opts, app.WithPlugin(p.Name, p.Factory))
	}
	return opts
}
