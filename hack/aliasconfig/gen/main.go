// Command gen writes the kustomize component's configuration with the alias profile
// (manifests/components/scheduler-plugins-alias/scheduler-config.yaml) from the shipped one
// (manifests/base/scheduler-config.yaml). Run from the repository root: go run ./hack/aliasconfig/gen.
package main

import (
	"fmt"
	"os"

	"github.com/custom-scheduler/custom-scheduler/hack/aliasconfig"
)

func main() {
	base, err := os.ReadFile(aliasconfig.Source)
	if err == nil {
		var out []byte
		if out, err = aliasconfig.Generate(base); err == nil {
			err = os.WriteFile(aliasconfig.Output, out, 0o644)
		}
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "aliasconfig:", err)
		os.Exit(1)
	}
}
