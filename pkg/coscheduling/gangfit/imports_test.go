package gangfit

import (
	"os/exec"
	"strings"
	"testing"
)

const module = "github.com/custom-scheduler/custom-scheduler/"

// forbidden are what a pure placement package must not import: API clients, informers and listers
// (so no decision here can read or write the cluster), the framework's runtime, and the plugin's
// own packages that hold state or make calls (so no decision takes the plugin's lock).
var forbidden = []string{
	"k8s.io/client-go/kubernetes",
	"k8s.io/client-go/informers",
	"k8s.io/client-go/listers",
	"k8s.io/client-go/tools/cache",
	"k8s.io/client-go/rest",
	"k8s.io/client-go/dynamic",
	"k8s.io/kubernetes/pkg/scheduler/framework/runtime",
	module + "pkg/generated",
	module + "pkg/coscheduling/status",
	module + "pkg/coscheduling/gangpreemption",
	module + "pkg/coscheduling/leader",
	module + "pkg/coscheduling/effects",
	module + "pkg/coscheduling/metrics",
}

// TestImportsArePure keeps gangfit (and the plugin's other pure packages) pure: it names none of the forbidden packages itself, and no
// package of this module it depends on does (or is one; the plugin package is one). The framework's
// interface package, which gangfit reads NodeInfos through, does depend on client-go: a test over
// every transitive dependency could not tell a pure package from another, so the rule is on what
// this module's code imports.
func TestImportsArePure(t *testing.T) {
	list := func(args ...string) []string {
		out, err := exec.Command("go", append([]string{"list"}, args...)...).Output()
		if err != nil {
			t.Fatalf("go list %v: %v", args, err)
		}
		return strings.Fields(string(out))
	}
	check := func(pkg string, imports []string) {
		for _, imp := range imports {
			for _, f := range forbidden {
				if imp == f || strings.HasPrefix(imp, f+"/") {
					t.Errorf("%s imports %s: gangfit must stay pure (no clients, informers, listers or plugin state)", pkg, imp)
				}
			}
			if imp == module+"pkg/coscheduling" {
				t.Errorf("%s imports the plugin package", pkg)
			}
		}
	}
	// The gang plugin's other pure packages: a gang's state and its transitions, the attempt's and
	// the reservation's state machines.
	for _, dep := range list("-deps", ".", "../gang", "../attempt", "../reservation") {
		if !strings.HasPrefix(dep, module) {
			continue
		}
		check(dep, list("-f", `{{join .Imports " "}}`, dep))
	}
}
