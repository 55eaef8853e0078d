package chart

import (
	"bytes"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"testing"

	"helm.sh/helm/v4/pkg/action"
	"helm.sh/helm/v4/pkg/chart/v2/lint/support"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"
)

// TestLint runs Helm's lint action (what `helm lint` runs) with the default values and with every
// optional part on: no errors, no warnings.
func TestLint(t *testing.T) {
	cases := map[string]map[string]any{
		"defaults": nil,
		"everything on": {
			"metrics": map[string]any{
				"serviceMonitor":           map[string]any{"enabled": true},
				"prometheusServiceAccount": map[string]any{"name": "prometheus", "namespace": "monitoring"},
			},
			"prometheusRule": map[string]any{"enabled": true},
		},
	}
	for name, values := range cases {
		t.Run(name, func(t *testing.T) {
			lint := action.NewLint()
			lint.Namespace = releaseNamespace
			result := lint.Run([]string{chartDir()}, values)
			for _, err := range result.Errors {
				t.Errorf("lint error: %v", err)
			}
			for _, msg := range result.Messages {
				if msg.Severity > support.InfoSev {
					t.Errorf("lint: %s", msg)
				}
			}
		})
	}
}

// TestCRDsInSync: the chart's crds/ holds exactly the generated CRDs of manifests/crds, byte for byte
// (hack/update-codegen.sh copies them).
func TestCRDsInSync(t *testing.T) {
	want, err := filepath.Glob(filepath.Join(repoRoot(), "manifests", "crds", "*_*.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	got, err := filepath.Glob(filepath.Join(chartDir(), "crds", "*.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if len(want) == 0 || len(got) != len(want) {
		t.Fatalf("manifests/crds has %d CRD files, the chart's crds/ %d: run `make generate`", len(want), len(got))
	}
	for _, w := range want {
		a, err := os.ReadFile(w)
		if err != nil {
			t.Fatal(err)
		}
		b, err := os.ReadFile(filepath.Join(chartDir(), "crds", filepath.Base(w)))
		if err != nil {
			t.Fatalf("%v: run `make generate`", err)
		}
		if !bytes.Equal(a, b) {
			t.Errorf("the chart's crds/%s differs from manifests/crds: run `make generate`", filepath.Base(w))
		}
	}
}

// chartOnly are the objects the chart adds to the kustomization's with default values: the Grafana
// dashboard's ConfigMap. (The Namespace is the other way round: Helm creates it with
// --create-namespace.)
var chartOnly = map[string]bool{"ConfigMap/custom-scheduler/custom-scheduler-dashboard": true}

func objectKey(o *unstructured.Unstructured) string {
	name := o.GetName()
	if o.GetKind() == "ConfigMap" {
		name = kustomizeHash.ReplaceAllString(name, "")
	}
	return o.GetKind() + "/" + o.GetNamespace() + "/" + name
}

// TestChartMatchesKustomization renders the chart with default values into namespace custom-scheduler
// and the kustomization, and compares them: the same kinds and names, the same RBAC rules, role
// references and subjects, the same scheduler configuration, the same container.
func TestChartMatchesKustomization(t *testing.T) {
	kust, err := renderKustomization()
	if err != nil {
		t.Fatal(err)
	}
	chart := mustRender(t, nil)
	byKey := func(objs []*unstructured.Unstructured, skip map[string]bool) map[string]*unstructured.Unstructured {
		m := map[string]*unstructured.Unstructured{}
		for _, o := range objs {
			if k := objectKey(o); !skip[k] && o.GetKind() != "Namespace" {
				m[k] = o
			}
		}
		return m
	}
	k, c := byKey(kust, nil), byKey(chart.all(), chartOnly)
	if !reflect.DeepEqual(sortedKeys(k), sortedKeys(c)) {
		t.Fatalf("objects differ:\nkustomization: %v\nchart:         %v", sortedKeys(k), sortedKeys(c))
	}
	for key, ko := range k {
		co := c[key]
		switch ko.GetKind() {
		case "ClusterRole", "Role":
			assertSameField(t, key, ko, co, "rules")
		case "ClusterRoleBinding", "RoleBinding":
			assertSameField(t, key, ko, co, "roleRef")
			assertSameField(t, key, ko, co, "subjects")
		case "ConfigMap":
			assertSameConfig(t, key, ko, co)
		case "Deployment":
			assertSameField(t, key, ko, co, "spec", "replicas")
			for _, f := range []string{"serviceAccountName", "priorityClassName", "securityContext"} {
				assertSameField(t, key, ko, co, "spec", "template", "spec", f)
			}
			// The chart adds imagePullPolicy (a value); everything else in the container is the same.
			containers, _, _ := unstructured.NestedSlice(co.Object, "spec", "template", "spec", "containers")
			for _, ctr := range containers {
				delete(ctr.(map[string]any), "imagePullPolicy")
			}
			kc, _, _ := unstructured.NestedSlice(ko.Object, "spec", "template", "spec", "containers")
			if !reflect.DeepEqual(kc, containers) {
				t.Errorf("%s: containers differ:\nkustomization: %v\nchart:         %v", key, kc, containers)
			}
		case "Service":
			assertSameField(t, key, ko, co, "spec", "ports")
		case "PodDisruptionBudget":
			assertSameField(t, key, ko, co, "spec", "minAvailable")
		case "CustomResourceDefinition":
			assertSameField(t, key, ko, co, "spec")
		}
	}
}

func assertSameField(t *testing.T, key string, a, b *unstructured.Unstructured, path ...string) {
	t.Helper()
	va, _, _ := unstructured.NestedFieldNoCopy(a.Object, path...)
	vb, _, _ := unstructured.NestedFieldNoCopy(b.Object, path...)
	if !reflect.DeepEqual(va, vb) {
		t.Errorf("%s: %s differs:\nkustomization: %v\nchart:         %v", key, strings.Join(path, "."), va, vb)
	}
}

func assertSameConfig(t *testing.T, key string, a, b *unstructured.Unstructured) {
	t.Helper()
	parse := func(o *unstructured.Unstructured) map[string]any {
		data, _, _ := unstructured.NestedString(o.Object, "data", "scheduler-config.yaml")
		var cfg map[string]any
		if err := yaml.Unmarshal([]byte(data), &cfg); err != nil {
			t.Fatalf("%s: parsing scheduler-config.yaml: %v", key, err)
		}
		return cfg
	}
	if ca, cb := parse(a), parse(b); !reflect.DeepEqual(ca, cb) {
		ya, _ := yaml.Marshal(ca)
		yb, _ := yaml.Marshal(cb)
		t.Errorf("%s: scheduler configurations differ:\n--- kustomization\n%s--- chart\n%s", key, ya, yb)
	}
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// schedulerConfig is the KubeSchedulerConfiguration in the rendered ConfigMap.
func schedulerConfig(t *testing.T, r *rendered) map[string]any {
	t.Helper()
	cm := r.find("ConfigMap", releaseName+"-config")
	if cm == nil {
		t.Fatal("no custom-scheduler-config ConfigMap")
	}
	data, _, _ := unstructured.NestedString(cm.Object, "data", "scheduler-config.yaml")
	var cfg map[string]any
	if err := yaml.Unmarshal([]byte(data), &cfg); err != nil {
		t.Fatalf("parsing scheduler-config.yaml: %v", err)
	}
	return cfg
}

func field(t *testing.T, obj map[string]any, path ...string) any {
	t.Helper()
	v, _, err := unstructured.NestedFieldNoCopy(obj, path...)
	if err != nil {
		t.Fatalf("%s: %v", strings.Join(path, "."), err)
	}
	return v
}

// TestValues renders the chart with the values users change and checks where each lands.
func TestValues(t *testing.T) {
	cases := map[string]struct {
		values      map[string]any
		apiVersions []string
		wantErr     string
		check       func(t *testing.T, r *rendered)
	}{
		"image, replicas, placement, verbosity, extra args": {
			values: map[string]any{
				"image":             map[string]any{"repository": "registry.example.com/custom-scheduler", "tag": "v9.9.9"},
				"replicas":          3,
				"nodeSelector":      map[string]any{"node-role.kubernetes.io/control-plane": ""},
				"tolerations":       []any{map[string]any{"key": "node-role.kubernetes.io/control-plane", "effect": "NoSchedule"}},
				"priorityClassName": "system-node-critical",
				"logVerbosity":      4,
				"extraArgs":         []any{"--kube-api-qps=100"},
				"resources":         map[string]any{"requests": map[string]any{"cpu": "1"}},
			},
			check: func(t *testing.T, r *rendered) {
				d := r.find("Deployment", releaseName).Object
				ctr := field(t, d, "spec", "template", "spec", "containers").([]any)[0].(map[string]any)
				for _, c := range []struct {
					got, want any
				}{
					{ctr["image"], "registry.example.com/custom-scheduler:v9.9.9"},
					{field(t, d, "spec", "replicas"), int64(3)},
					{field(t, d, "spec", "template", "spec", "nodeSelector"), map[string]any{"node-role.kubernetes.io/control-plane": ""}},
					{field(t, d, "spec", "template", "spec", "tolerations"), []any{map[string]any{"key": "node-role.kubernetes.io/control-plane", "effect": "NoSchedule"}}},
					{field(t, d, "spec", "template", "spec", "priorityClassName"), "system-node-critical"},
					{ctr["args"], []any{"--config=/etc/custom-scheduler/scheduler-config.yaml", "--v=4", "--kube-api-qps=100"}},
					// Maps merge with the defaults (Helm's rule).
					{ctr["resources"], map[string]any{"requests": map[string]any{"cpu": "1", "memory": "256Mi"}, "limits": map[string]any{"memory": "2Gi"}}},
				} {
					if !reflect.DeepEqual(c.got, c.want) {
						t.Errorf("got %v, want %v", c.got, c.want)
					}
				}
			},
		},
		"plugins and pluginConfig pass through": {
			values: map[string]any{
				// Maps merge with the defaults (Helm's rule): null removes a default key.
				"plugins": map[string]any{"multiPoint": map[string]any{"enabled": []any{map[string]any{"name": "LoadAware"}}},
					"queueSort": nil, "preEnqueue": nil, "preFilter": nil, "filter": nil, "postFilter": nil, "reserve": nil, "permit": nil},
				"pluginConfig": []any{map[string]any{"name": "LoadAware", "args": map[string]any{"usageThresholds": map[string]any{"cpu": 70}}}},
				"extraConfig":  map[string]any{"percentageOfNodesToScore": 50},
			},
			check: func(t *testing.T, r *rendered) {
				cfg := schedulerConfig(t, r)
				profile := field(t, cfg, "profiles").([]any)[0].(map[string]any)
				// multiPoint.disabled stays from the defaults (maps merge): upstream's workload plugins stay off.
				want := map[string]any{"multiPoint": map[string]any{"enabled": []any{map[string]any{"name": "LoadAware"}},
					"disabled": []any{map[string]any{"name": "GangScheduling"}, map[string]any{"name": "TopologyPlacementGenerator"}, map[string]any{"name": "PodGroupPodsCount"}}}}
				if got := profile["plugins"]; !reflect.DeepEqual(got, want) {
					t.Errorf("plugins: %v", got)
				}
				if got := field(t, profile["pluginConfig"].([]any)[0].(map[string]any), "args", "usageThresholds", "cpu"); got != float64(70) {
					t.Errorf("pluginConfig: %v", got)
				}
				if got := cfg["percentageOfNodesToScore"]; got != float64(50) {
					t.Errorf("extraConfig: %v", got)
				}
			},
		},
		"leader election: lease name and timings, in the release namespace": {
			values: map[string]any{"leaderElection": map[string]any{"resourceName": "my-lease", "leaseDuration": "30s"}},
			check: func(t *testing.T, r *rendered) {
				le := field(t, schedulerConfig(t, r), "leaderElection")
				want := map[string]any{"leaderElect": true, "resourceName": "my-lease", "resourceNamespace": releaseNamespace, "leaseDuration": "30s"}
				if !reflect.DeepEqual(le, want) {
					t.Errorf("leaderElection %v, want %v", le, want)
				}
				role := r.find("Role", releaseName+"-leader-election")
				if got := field(t, role.Object, "rules").([]any)[1].(map[string]any)["resourceNames"]; !reflect.DeepEqual(got, []any{"my-lease"}) {
					t.Errorf("the Role covers leases %v", got)
				}
			},
		},
		"one replica without leader election: no lease Role, no PDB": {
			values: map[string]any{"replicas": 1, "leaderElection": map[string]any{"enabled": false}},
			check: func(t *testing.T, r *rendered) {
				if le := field(t, schedulerConfig(t, r), "leaderElection"); !reflect.DeepEqual(le, map[string]any{"leaderElect": false}) {
					t.Errorf("leaderElection %v", le)
				}
				for _, kind := range []string{"Role", "PodDisruptionBudget"} {
					for _, o := range r.all() {
						if o.GetKind() == kind {
							t.Errorf("rendered a %s %s", kind, o.GetName())
						}
					}
				}
			},
		},
		"two replicas without leader election are refused": {
			values:  map[string]any{"leaderElection": map[string]any{"enabled": false}},
			wantErr: "replicas > 1 needs leaderElection.enabled",
		},
		"no monitoring APIs: no ServiceMonitor, no PrometheusRule": {
			check: func(t *testing.T, r *rendered) {
				for _, o := range r.all() {
					if o.GetAPIVersion() == "monitoring.coreos.com/v1" {
						t.Errorf("rendered %s %s without the monitoring API", o.GetKind(), o.GetName())
					}
				}
				if !strings.Contains(r.notes, "No ServiceMonitor") {
					t.Errorf("NOTES do not say there is no ServiceMonitor:\n%s", r.notes)
				}
			},
		},
		"monitoring APIs served: ServiceMonitor and PrometheusRule (auto)": {
			apiVersions: monitoringAPIs,
			check: func(t *testing.T, r *rendered) {
				if r.find("ServiceMonitor", releaseName) == nil || r.find("PrometheusRule", releaseName) == nil {
					t.Error("no ServiceMonitor or PrometheusRule")
				}
			},
		},
		"monitoring off even when served": {
			values:      map[string]any{"metrics": map[string]any{"serviceMonitor": map[string]any{"enabled": false}}, "prometheusRule": map[string]any{"enabled": false}},
			apiVersions: monitoringAPIs,
			check: func(t *testing.T, r *rendered) {
				if r.find("ServiceMonitor", releaseName) != nil || r.find("PrometheusRule", releaseName) != nil {
					t.Error("rendered a ServiceMonitor or PrometheusRule that was turned off")
				}
			},
		},
		"an invalid enabled value is refused": {
			values:  map[string]any{"prometheusRule": map[string]any{"enabled": "yes"}},
			wantErr: "enabled must be auto, true or false",
		},
		"Prometheus' ServiceAccount bound to the metrics reader": {
			values: map[string]any{"metrics": map[string]any{"prometheusServiceAccount": map[string]any{"name": "prometheus-k8s", "namespace": "monitoring"}}},
			check: func(t *testing.T, r *rendered) {
				b := r.find("ClusterRoleBinding", releaseName+"-metrics-reader")
				if b == nil {
					t.Fatal("no metrics-reader ClusterRoleBinding")
				}
				want := []any{map[string]any{"kind": "ServiceAccount", "name": "prometheus-k8s", "namespace": "monitoring"}}
				if got := field(t, b.Object, "subjects"); !reflect.DeepEqual(got, want) {
					t.Errorf("subjects %v", got)
				}
			},
		},
		"dashboard ConfigMap in Grafana's namespace with the sidecar label": {
			values: map[string]any{"dashboard": map[string]any{"namespace": "grafana"}},
			check: func(t *testing.T, r *rendered) {
				cm := r.find("ConfigMap", releaseName+"-dashboard")
				if cm == nil || cm.GetNamespace() != "grafana" || cm.GetLabels()["grafana_dashboard"] != "1" {
					t.Fatalf("dashboard ConfigMap: %v", cm)
				}
				want, err := os.ReadFile(filepath.Join(chartDir(), "dashboards", "custom-scheduler.json"))
				if err != nil {
					t.Fatal(err)
				}
				if got, _, _ := unstructured.NestedString(cm.Object, "data", "custom-scheduler.json"); got != strings.TrimRight(string(want), "\n") {
					t.Error("the ConfigMap does not hold dashboards/custom-scheduler.json")
				}
			},
		},
		"another release name prefixes cluster-scoped names": {
			values: map[string]any{"fullnameOverride": "team-a-scheduler"},
			check: func(t *testing.T, r *rendered) {
				for _, o := range r.objects {
					if !strings.HasPrefix(o.GetName(), "team-a-scheduler") {
						t.Errorf("%s %s is not prefixed", o.GetKind(), o.GetName())
					}
				}
			},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			r, err := renderChart(tc.values, tc.apiVersions...)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("got error %v, want one containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			tc.check(t, r)
		})
	}
}
