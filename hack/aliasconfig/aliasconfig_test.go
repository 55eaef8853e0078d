package aliasconfig

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

// TestGenerateCopiesTheProfile: the alias is the main profile with only its name changed, also when the
// main profile gains a plugin the copy did not know of (a filter entry).
func TestGenerateCopiesTheProfile(t *testing.T) {
	base, err := os.ReadFile(filepath.Join("..", "..", Source))
	if err != nil {
		t.Fatal(err)
	}
	extended := strings.Replace(string(base), "      preFilter:\n", "      filter:\n        enabled:\n          - name: Coscheduling\n      preFilter:\n", 1)
	if extended == string(base) {
		t.Fatal("could not add a filter entry to the base profile")
	}
	for name, in := range map[string]string{"shipped": string(base), "with a filter entry": extended} {
		out, err := Generate([]byte(in))
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		var src, cfg map[string]any
		if err := yaml.Unmarshal([]byte(in), &src); err != nil {
			t.Fatal(err)
		}
		if err := yaml.Unmarshal(out, &cfg); err != nil {
			t.Fatalf("%s: the output does not parse: %v", name, err)
		}
		profiles := cfg["profiles"].([]any)
		if len(profiles) != 2 {
			t.Fatalf("%s: %d profiles", name, len(profiles))
		}
		main, alias := profiles[0].(map[string]any), profiles[1].(map[string]any)
		if !reflect.DeepEqual(main, src["profiles"].([]any)[0]) {
			t.Errorf("%s: the main profile changed", name)
		}
		if alias["schedulerName"] != AliasName {
			t.Errorf("%s: alias named %v", name, alias["schedulerName"])
		}
		alias["schedulerName"] = main["schedulerName"]
		if !reflect.DeepEqual(main, alias) {
			t.Errorf("%s: the alias is not a copy of the main profile:\n%v\n%v", name, main, alias)
		}
		delete(cfg, "profiles")
		delete(src, "profiles")
		if !reflect.DeepEqual(cfg, src) {
			t.Errorf("%s: fields outside the profiles changed", name)
		}
	}
	if _, err := Generate([]byte("profiles: []\n")); err == nil {
		t.Error("a configuration without a profile was accepted")
	}
}
