// Package chart tests the Helm chart in manifests/helm/custom-scheduler, its Grafana dashboard and its
// Prometheus alerts: rendered with Helm's own library, compared with the kustomization, installed into
// a real kube-apiserver (envtest) and run with the real scheduler binary.
package chart

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"testing"

	"helm.sh/helm/v4/pkg/action"
	"helm.sh/helm/v4/pkg/chart/common"
	"helm.sh/helm/v4/pkg/chart/v2/loader"
	release "helm.sh/helm/v4/pkg/release/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"
	"sigs.k8s.io/yaml"
)

const (
	releaseName      = "custom-scheduler"
	releaseNamespace = "custom-scheduler"
)

// monitoringAPIs are the API versions a cluster with prometheus-operator serves, for rendering the
// optional ServiceMonitor and PrometheusRule ("auto").
var monitoringAPIs = []string{"monitoring.coreos.com/v1", "monitoring.coreos.com/v1/ServiceMonitor", "monitoring.coreos.com/v1/PrometheusRule"}

// chartDir is the chart under test.
func chartDir() string { return filepath.Join(repoRoot(), "manifests", "helm", "custom-scheduler") }

// repoRoot is the main module's root, two folders up from this module.
func repoRoot() string {
	wd, err := os.Getwd()
	if err != nil {
		panic(err)
	}
	return filepath.Clean(filepath.Join(wd, "..", ".."))
}

// rendered is a chart rendered as `helm template` does: the CRDs from crds/ and the templates' objects.
type rendered struct {
	crds    []*unstructured.Unstructured
	objects []*unstructured.Unstructured
	notes   string
}

// renderChart renders the chart with values as `helm template --include-crds` does, with a cluster
// that serves apiVersions beyond the defaults.
func renderChart(values map[string]any, apiVersions ...string) (*rendered, error) {
	chrt, err := loader.Load(chartDir())
	if err != nil {
		return nil, fmt.Errorf("loading the chart: %w", err)
	}
	install := action.NewInstall(action.NewConfiguration())
	install.DryRunStrategy = action.DryRunClient
	install.ReleaseName = releaseName
	install.Namespace = releaseNamespace
	install.Replace = true
	install.APIVersions = common.VersionSet(apiVersions)
	kubeVersion, err := common.ParseKubeVersion("v1.37.2")
	if err != nil {
		return nil, err
	}
	install.KubeVersion = kubeVersion
	if values == nil {
		values = map[string]any{}
	}
	r, err := install.Run(chrt, values)
	if err != nil {
		return nil, fmt.Errorf("rendering the chart: %w", err)
	}
	rel, ok := r.(*release.Release)
	if !ok {
		return nil, fmt.Errorf("unexpected release type %T", r)
	}
	out := &rendered{notes: rel.Info.Notes}
	if out.objects, err = decodeObjects([]byte(rel.Manifest)); err != nil {
		return nil, fmt.Errorf("decoding the rendered templates: %w", err)
	}
	for _, crd := range chrt.CRDObjects() {
		objs, err := decodeObjects(crd.File.Data)
		if err != nil {
			return nil, fmt.Errorf("decoding %s: %w", crd.Filename, err)
		}
		out.crds = append(out.crds, objs...)
	}
	return out, nil
}

func mustRender(t *testing.T, values map[string]any, apiVersions ...string) *rendered {
	t.Helper()
	r, err := renderChart(values, apiVersions...)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// all is the CRDs then the templates' objects, in apply order.
func (r *rendered) all() []*unstructured.Unstructured {
	return sortForApply(append(append([]*unstructured.Unstructured{}, r.crds...), r.objects...))
}

// find returns the object of kind and name, or nil.
func (r *rendered) find(kind, name string) *unstructured.Unstructured {
	for _, o := range r.all() {
		if o.GetKind() == kind && o.GetName() == name {
			return o
		}
	}
	return nil
}

// decodeObjects reads a multi-document YAML stream into objects, skipping empty documents. Each goes
// through JSON into unstructured, as the apiserver's clients decode it (integers as int64).
func decodeObjects(data []byte) ([]*unstructured.Unstructured, error) {
	var objs []*unstructured.Unstructured
	reader := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
	for {
		doc, err := reader.Read()
		if errors.Is(err, io.EOF) {
			return objs, nil
		}
		if err != nil {
			return nil, err
		}
		js, err := yaml.YAMLToJSON(doc)
		if err != nil {
			return nil, err
		}
		if s := string(bytes.TrimSpace(js)); s == "null" || s == "{}" {
			continue
		}
		obj := &unstructured.Unstructured{}
		if err := obj.UnmarshalJSON(js); err != nil {
			return nil, err
		}
		objs = append(objs, obj)
	}
}

// renderKustomization renders manifests/ as `kubectl apply -k manifests/` does.
func renderKustomization() ([]*unstructured.Unstructured, error) {
	resMap, err := krusty.MakeKustomizer(krusty.MakeDefaultOptions()).Run(filesys.MakeFsOnDisk(), filepath.Join(repoRoot(), "manifests"))
	if err != nil {
		return nil, fmt.Errorf("kustomize build manifests/: %w", err)
	}
	var objs []*unstructured.Unstructured
	for _, r := range resMap.Resources() {
		data, err := r.MarshalJSON()
		if err != nil {
			return nil, err
		}
		obj := &unstructured.Unstructured{}
		if err := obj.UnmarshalJSON(data); err != nil {
			return nil, fmt.Errorf("rendered manifest is not an object: %w", err)
		}
		objs = append(objs, obj)
	}
	return sortForApply(objs), nil
}

// applyOrder is the order kinds are applied in, so that what an object needs exists before it.
var applyOrder = map[string]int{"Namespace": 0, "CustomResourceDefinition": 1, "ServiceAccount": 2, "ClusterRole": 3, "Role": 3, "ClusterRoleBinding": 4, "RoleBinding": 4, "ConfigMap": 5}

func sortForApply(objs []*unstructured.Unstructured) []*unstructured.Unstructured {
	order := func(o *unstructured.Unstructured) int {
		if n, ok := applyOrder[o.GetKind()]; ok {
			return n
		}
		return 10
	}
	sort.SliceStable(objs, func(i, j int) bool { return order(objs[i]) < order(objs[j]) })
	return objs
}

// kustomizeHash is the content-hash suffix kustomize gives generated ConfigMaps.
var kustomizeHash = regexp.MustCompile(`-[a-z0-9]{10}$`)
