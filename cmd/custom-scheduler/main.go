// Command custom-scheduler is kube-scheduler with custom-scheduler's plugins registered.
// It accepts every kube-scheduler flag and serves the same endpoints and metrics.
package main

import (
	"os"

	"k8s.io/component-base/cli"
	_ "k8s.io/component-base/logs/json/register" // for JSON log format registration
	_ "k8s.io/component-base/metrics/prometheus/clientgo"
	_ "k8s.io/component-base/metrics/prometheus/version" // for version metric registration
	"k8s.io/kubernetes/cmd/kube-scheduler/app"

	"github.com/custom-scheduler/custom-scheduler/pkg/registry"
)

func main() {
	command := app.NewSchedulerCommand(registry.Options()...)
	os.Exit(cli.Run(command))
}
