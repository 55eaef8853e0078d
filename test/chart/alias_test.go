package chart

import (
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/custom-scheduler/custom-scheduler/hack/aliasconfig"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"
	"sigs.k8s.io/yaml"
)

// assertAliasOf checks that cfg has exactly two profiles, the second named scheduler-plugins-scheduler
// and otherwise the first (same plugins, same pluginConfig).
func assertAliasOf(t *testing.T, what string, cfg map[string]any) {
	t.Helper()
	profiles, _ := cfg["profiles"].([]any)
	if len(profiles) != 2 {
		t.Fatalf("%s: %d profiles, want the main one and the alias", what, len(profiles))
	}
	main, _ := profiles[0].(map[string]any)
	alias, _ := profiles[1].(map[string]any)
	if main["schedulerName"] != "custom-scheduler" || alias["schedulerName"] != aliasconfig.AliasName {
		t.Fatalf("%s: profiles are named %v and %v, want custom-scheduler and %s", what, main["schedulerName"], alias["schedulerName"], aliasconfig.AliasName)
	}
	if main["plugins"] == nil || main["pluginConfig"] == nil {
		t.Fatalf("%s: the main profile has no plugins or pluginConfig", what)
	}
	for _, k := range []string{"plugins", "pluginConfig"} {
		if !reflect.DeepEqual(main[k], alias[k]) {
			a, _ := yaml.Marshal(main[k])
			b, _ := yaml.Marshal(alias[k])
			t.Errorf("%s: the alias profile's %s differ from the main profile's:\n--- main\n%s--- alias\n%s", what, k, a, b)
		}
	}
	if len(main) != len(alias) {
		t.Errorf("%s: the profiles have different fields: %v and %v", what, main, alias)
	}
}

// TestAliasOffByDefault: with default values the chart has the one profile.
func TestAliasOffByDefault(t *testing.T) {
	if n := len(field(t, schedulerConfig(t, mustRender(t, nil)), "profiles").([]any)); n != 1 {
		t.Fatalf("default values render %d profiles, want 1 (the alias is opt-in)", n)
	}
}

// TestAliasProfile renders the chart with schedulerPluginsAlias.enabled: the alias is the main profile
// renamed, with the default plugins and with a profile that gained a plugin (a copy follows it).
func TestAliasProfile(t *testing.T) {
	on := map[string]any{"schedulerPluginsAlias": map[string]any{"enabled": true}}
	assertAliasOf(t, "chart, default plugins", schedulerConfig(t, mustRender(t, on)))

	// A main profile that gains a filter entry: the alias has it too, without any other value changed.
	chrtValues := defaultValues(t)
	plugins := chrtValues["plugins"].(map[string]any)
	plugins["filter"] = map[string]any{"enabled": []any{map[string]any{"name": "Coscheduling"}}}
	chrtValues["schedulerPluginsAlias"] = map[string]any{"enabled": true}
	cfg := schedulerConfig(t, mustRender(t, chrtValues))
	assertAliasOf(t, "chart, a filter plugin added", cfg)
	alias := cfg["profiles"].([]any)[1].(map[string]any)
	if _, ok := alias["plugins"].(map[string]any)["filter"]; !ok {
		t.Error("the alias profile did not follow the main profile's added filter plugins")
	}

	// The same name twice would be refused by the scheduler; the chart refuses it first.
	if _, err := renderChart(map[string]any{"schedulerPluginsAlias": map[string]any{"enabled": true, "schedulerName": "custom-scheduler"}}); err == nil {
		t.Error("the chart rendered an alias with the main profile's own name")
	}
}

// defaultValues is the chart's values.yaml.
func defaultValues(t *testing.T) map[string]any {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(chartDir(), "values.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var v map[string]any
	if err := yaml.Unmarshal(data, &v); err != nil {
		t.Fatal(err)
	}
	return v
}

// TestAliasComponentGenerated: the kustomize component's configuration is hack/aliasconfig's output
// for the shipped configuration, as it is now (a changed main profile fails this until regenerated).
func TestAliasComponentGenerated(t *testing.T) {
	base, err := os.ReadFile(filepath.Join(repoRoot(), aliasconfig.Source))
	if err != nil {
		t.Fatal(err)
	}
	want, err := aliasconfig.Generate(base)
	if err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(filepath.Join(repoRoot(), aliasconfig.Output))
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != string(want) {
		t.Fatalf("%s is stale: run `go run ./hack/aliasconfig/gen` (make generate) and commit it", aliasconfig.Output)
	}
	var cfg map[string]any
	if err := yaml.Unmarshal(got, &cfg); err != nil {
		t.Fatal(err)
	}
	assertAliasOf(t, aliasconfig.Output, cfg)
}

// TestAliasComponentMatchesChart builds manifests/ with the component (as a user's kustomization
// would) and compares it with the chart rendered with schedulerPluginsAlias.enabled: the same objects,
// and the same scheduler configuration, the alias included.
func TestAliasComponentMatchesChart(t *testing.T) {
	dir := t.TempDir()
	// kustomize takes only relative paths to other kustomizations.
	rel := func(path ...string) string {
		r, err := filepath.Rel(dir, filepath.Join(append([]string{repoRoot()}, path...)...))
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	kustomization := "resources:\n  - " + rel("manifests") + "\ncomponents:\n  - " + rel("manifests", "components", "scheduler-plugins-alias") + "\n"
	if err := os.WriteFile(filepath.Join(dir, "kustomization.yaml"), []byte(kustomization), 0o644); err != nil {
		t.Fatal(err)
	}
	resMap, err := krusty.MakeKustomizer(krusty.MakeDefaultOptions()).Run(filesys.MakeFsOnDisk(), dir)
	if err != nil {
		t.Fatalf("kustomize build with the component: %v", err)
	}
	plain, err := renderKustomization()
	if err != nil {
		t.Fatal(err)
	}
	var withAlias *unstructured.Unstructured
	var keys, plainKeys []string
	for _, r := range resMap.Resources() {
		data, err := r.MarshalJSON()
		if err != nil {
			t.Fatal(err)
		}
		o := &unstructured.Unstructured{}
		if err := o.UnmarshalJSON(data); err != nil {
			t.Fatal(err)
		}
		keys = append(keys, objectKey(o))
		if o.GetKind() == "ConfigMap" && objectKey(o) == "ConfigMap/custom-scheduler/custom-scheduler-config" {
			withAlias = o
		}
	}
	for _, o := range plain {
		plainKeys = append(plainKeys, objectKey(o))
	}
	if !reflect.DeepEqual(sortedKeys(setOf(keys)), sortedKeys(setOf(plainKeys))) || len(keys) != len(plainKeys) {
		t.Fatalf("the component changed the set of objects:\nwithout: %v\nwith:    %v", plainKeys, keys)
	}
	if withAlias == nil {
		t.Fatal("no custom-scheduler-config ConfigMap with the component")
	}
	data, _, _ := unstructured.NestedString(withAlias.Object, "data", "scheduler-config.yaml")
	var cfg map[string]any
	if err := yaml.Unmarshal([]byte(data), &cfg); err != nil {
		t.Fatal(err)
	}
	assertAliasOf(t, "kustomize with the component", cfg)
	// The Deployment mounts the replaced ConfigMap (kustomize renames the reference to its new hash).
	for _, r := range resMap.Resources() {
		if r.GetKind() != "Deployment" {
			continue
		}
		data, _ := r.MarshalJSON()
		d := &unstructured.Unstructured{}
		_ = d.UnmarshalJSON(data)
		vols, _, _ := unstructured.NestedSlice(d.Object, "spec", "template", "spec", "volumes")
		found := false
		for _, v := range vols {
			if cm, _, _ := unstructured.NestedString(v.(map[string]any), "configMap", "name"); cm == withAlias.GetName() {
				found = true
			}
		}
		if !found {
			t.Errorf("the Deployment does not mount %s: %v", withAlias.GetName(), vols)
		}
	}
	chart := mustRender(t, map[string]any{"schedulerPluginsAlias": map[string]any{"enabled": true}})
	assertSameConfig(t, "ConfigMap custom-scheduler-config (component vs chart with the alias)", withAlias, chart.find("ConfigMap", releaseName+"-config"))
}

func setOf(keys []string) map[string]bool {
	m := map[string]bool{}
	for _, k := range keys {
		m[k] = true
	}
	return m
}
