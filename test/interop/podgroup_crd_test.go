package interop

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	spv1alpha1 "sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"
	spclient "sigs.k8s.io/scheduler-plugins/pkg/generated/clientset/versioned"
	"sigs.k8s.io/yaml"
)

// schedulerPluginsVersions are the scheduler-plugins releases whose PodGroup CRD ours must be a
// superset of: the ones the operators here pin (Training Operator v0.28.9, MPI Operator v0.29.8,
// KubeRay v0.31.8) and v0.30.6, every minor the Go module proxy serves (v0.32 and later are refused).
var schedulerPluginsVersions = []string{"v0.28.9", "v0.29.8", "v0.30.6", "v0.31.8"}

// ourAdditions are the validation keywords our schema has where scheduler-plugins' has none, each
// documented in docs/coscheduling.md ("ours replaces it safely"): a default of 1 for minMember, the
// refusal of minMember < 1 (v0.31 has it too) and of a negative timeout. Anything else our schema
// adds to one of their fields fails the test.
var ourAdditions = map[string]bool{
	"spec.minMember: default":              true,
	"spec.minMember: minimum":              true,
	"spec.scheduleTimeoutSeconds: minimum": true,
}

// TestPodGroupCRDSupersetOfSchedulerPlugins walks the openAPIV3 schema of scheduler-plugins' PodGroup
// CRD (from its module, each version above) beside ours: every field of theirs exists in ours with the
// same type, format and validation (ours may add fields, and only the validation in ourAdditions), and
// names, scope, versions and the status subresource match.
func TestPodGroupCRDSupersetOfSchedulerPlugins(t *testing.T) {
	ours := readCRD(t, filepath.Join(repoRoot, "manifests", "crds", "scheduling.x-k8s.io_podgroups.yaml"))
	for _, version := range schedulerPluginsVersions {
		t.Run(version, func(t *testing.T) {
			theirs := readCRD(t, filepath.Join(downloadModule(t, filepath.Join(repoRoot, "test", "interop"), "sigs.k8s.io/scheduler-plugins@"+version), "config", "crd", "bases", "scheduling.x-k8s.io_podgroups.yaml"))
			for _, problem := range crdSuperset(theirs, ours) {
				t.Error(problem)
			}
		})
	}
}

// TestCRDSupersetCheckCatchesDifferences shows the schema walk can fail: a copy of our CRD with a
// field removed, a type changed and a validation added is reported for each.
func TestCRDSupersetCheckCatchesDifferences(t *testing.T) {
	theirs := readCRD(t, filepath.Join(downloadModule(t, filepath.Join(repoRoot, "test", "interop"), "sigs.k8s.io/scheduler-plugins@v0.31.8"), "config", "crd", "bases", "scheduling.x-k8s.io_podgroups.yaml"))
	broken := readCRD(t, filepath.Join(repoRoot, "manifests", "crds", "scheduling.x-k8s.io_podgroups.yaml"))
	schema := broken.Spec.Versions[0].Schema.OpenAPIV3Schema
	status := schema.Properties["status"]
	delete(status.Properties, "occupiedBy")
	running := status.Properties["running"]
	running.Format = "int64"
	status.Properties["running"] = running
	schema.Properties["status"] = status
	spec := schema.Properties["spec"]
	timeout := spec.Properties["scheduleTimeoutSeconds"]
	timeout.Maximum = ptr.To(900.0)
	spec.Properties["scheduleTimeoutSeconds"] = timeout
	schema.Properties["spec"] = spec
	got := crdSuperset(theirs, broken)
	want := []string{
		"v1alpha1 spec.scheduleTimeoutSeconds: ours adds maximum 900",
		"v1alpha1 status.occupiedBy: missing from our schema",
		`v1alpha1 status.running: format is "int64" in ours, "int32" in theirs`,
	}
	if !slices.Equal(got, want) {
		t.Errorf("the superset check of a broken CRD reported\n%q\nwant\n%q", got, want)
	}
}

func readCRD(t *testing.T, path string) *apiextensionsv1.CustomResourceDefinition {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	crd := &apiextensionsv1.CustomResourceDefinition{}
	if err := yaml.UnmarshalStrict(data, crd); err != nil {
		t.Fatalf("parsing %s: %v", path, err)
	}
	return crd
}

// crdSuperset lists how ours fails to be a superset of theirs.
func crdSuperset(theirs, ours *apiextensionsv1.CustomResourceDefinition) []string {
	var problems []string
	if theirs.Name != ours.Name || theirs.Spec.Group != ours.Spec.Group || theirs.Spec.Scope != ours.Spec.Scope {
		problems = append(problems, fmt.Sprintf("name/group/scope %s %s %s, theirs %s %s %s", ours.Name, ours.Spec.Group, ours.Spec.Scope, theirs.Name, theirs.Spec.Group, theirs.Spec.Scope))
	}
	tn, on := theirs.Spec.Names, ours.Spec.Names
	if tn.Kind != on.Kind || tn.ListKind != on.ListKind || tn.Plural != on.Plural || tn.Singular != on.Singular {
		problems = append(problems, fmt.Sprintf("names %+v, theirs %+v", on, tn))
	}
	for _, s := range tn.ShortNames {
		if !slices.Contains(on.ShortNames, s) {
			problems = append(problems, "short name "+s+" missing from ours")
		}
	}
	for _, tv := range theirs.Spec.Versions {
		i := slices.IndexFunc(ours.Spec.Versions, func(v apiextensionsv1.CustomResourceDefinitionVersion) bool { return v.Name == tv.Name })
		if i < 0 {
			problems = append(problems, "version "+tv.Name+" missing from ours")
			continue
		}
		ov := ours.Spec.Versions[i]
		if tv.Served && !ov.Served {
			problems = append(problems, "version "+tv.Name+" is not served by ours")
		}
		if (tv.Subresources != nil && tv.Subresources.Status != nil) && (ov.Subresources == nil || ov.Subresources.Status == nil) {
			problems = append(problems, "version "+tv.Name+": ours has no status subresource")
		}
		compareSchema(tv.Name+" ", "", tv.Schema.OpenAPIV3Schema, ov.Schema.OpenAPIV3Schema, &problems)
	}
	return problems
}

// compareSchema checks that ours accepts what theirs accepts at path, field by field.
func compareSchema(prefix, path string, theirs, ours *apiextensionsv1.JSONSchemaProps, problems *[]string) {
	at := prefix + path
	if path == "" {
		at = prefix + "(root)"
	}
	if ours == nil {
		*problems = append(*problems, at+": missing from our schema")
		return
	}
	// The validation keywords, as JSON (nil when unset).
	keywords := func(s *apiextensionsv1.JSONSchemaProps) map[string]any {
		m := map[string]any{}
		set := func(k string, v any, isSet bool) {
			if isSet {
				m[k] = v
			}
		}
		set("type", s.Type, s.Type != "")
		set("format", s.Format, s.Format != "")
		set("pattern", s.Pattern, s.Pattern != "")
		set("minimum", ptrVal(s.Minimum), s.Minimum != nil)
		set("maximum", ptrVal(s.Maximum), s.Maximum != nil)
		set("exclusiveMinimum", s.ExclusiveMinimum, s.ExclusiveMinimum)
		set("exclusiveMaximum", s.ExclusiveMaximum, s.ExclusiveMaximum)
		set("minLength", ptrVal(s.MinLength), s.MinLength != nil)
		set("maxLength", ptrVal(s.MaxLength), s.MaxLength != nil)
		set("minItems", ptrVal(s.MinItems), s.MinItems != nil)
		set("maxItems", ptrVal(s.MaxItems), s.MaxItems != nil)
		set("minProperties", ptrVal(s.MinProperties), s.MinProperties != nil)
		set("maxProperties", ptrVal(s.MaxProperties), s.MaxProperties != nil)
		set("multipleOf", ptrVal(s.MultipleOf), s.MultipleOf != nil)
		set("enum", string(mustJSON(s.Enum)), len(s.Enum) > 0)
		set("default", string(mustJSON(s.Default)), s.Default != nil)
		set("nullable", s.Nullable, s.Nullable)
		set("x-kubernetes-int-or-string", s.XIntOrString, s.XIntOrString)
		set("x-kubernetes-preserve-unknown-fields", ptrVal(s.XPreserveUnknownFields), s.XPreserveUnknownFields != nil)
		set("x-kubernetes-embedded-resource", s.XEmbeddedResource, s.XEmbeddedResource)
		set("x-kubernetes-list-type", ptrVal(s.XListType), s.XListType != nil)
		set("x-kubernetes-map-type", ptrVal(s.XMapType), s.XMapType != nil)
		set("x-kubernetes-validations", string(mustJSON(s.XValidations)), len(s.XValidations) > 0)
		set("oneOf/allOf/not", string(mustJSON([]any{s.OneOf, s.AllOf, s.Not})), len(s.OneOf)+len(s.AllOf) > 0 || s.Not != nil)
		return m
	}
	tk, ok := keywords(theirs), keywords(ours)
	for _, k := range sortedKeys(tk, ok) {
		tv, inTheirs := tk[k]
		ov, inOurs := ok[k]
		switch {
		case inTheirs && !inOurs:
			*problems = append(*problems, fmt.Sprintf("%s: %s %v is missing from ours", at, k, tv))
		case inTheirs && fmt.Sprint(tv) != fmt.Sprint(ov):
			*problems = append(*problems, fmt.Sprintf("%s: %s is %q in ours, %q in theirs", at, k, fmt.Sprint(ov), fmt.Sprint(tv)))
		case !inTheirs && inOurs && !ourAdditions[path+": "+k]:
			*problems = append(*problems, fmt.Sprintf("%s: ours adds %s %v", at, k, ov))
		}
	}
	for _, r := range ours.Required {
		if !slices.Contains(theirs.Required, r) {
			*problems = append(*problems, fmt.Sprintf("%s: ours requires %s, theirs does not", at, r))
		}
	}
	child := func(name string) string {
		if path == "" {
			return name
		}
		return path + "." + name
	}
	names := make([]string, 0, len(theirs.Properties))
	for name := range theirs.Properties {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		tp := theirs.Properties[name]
		var op *apiextensionsv1.JSONSchemaProps
		if p, found := ours.Properties[name]; found {
			op = &p
		}
		compareSchema(prefix, child(name), &tp, op, problems)
	}
	if theirs.AdditionalProperties != nil && theirs.AdditionalProperties.Schema != nil {
		var op *apiextensionsv1.JSONSchemaProps
		if ours.AdditionalProperties != nil {
			op = ours.AdditionalProperties.Schema
		}
		compareSchema(prefix, child("*"), theirs.AdditionalProperties.Schema, op, problems)
	}
	if theirs.Items != nil && theirs.Items.Schema != nil {
		var op *apiextensionsv1.JSONSchemaProps
		if ours.Items != nil {
			op = ours.Items.Schema
		}
		compareSchema(prefix, child("[]"), theirs.Items.Schema, op, problems)
	}
	if len(theirs.AnyOf) != len(ours.AnyOf) {
		*problems = append(*problems, fmt.Sprintf("%s: anyOf has %d branches in ours, %d in theirs", at, len(ours.AnyOf), len(theirs.AnyOf)))
	} else {
		for i := range theirs.AnyOf {
			compareSchema(prefix, child(fmt.Sprintf("anyOf[%d]", i)), &theirs.AnyOf[i], &ours.AnyOf[i], problems)
		}
	}
}

func ptrVal[T any](p *T) any {
	if p == nil {
		return nil
	}
	return *p
}

func mustJSON(v any) []byte {
	b, _ := json.Marshal(v)
	return b
}

func sortedKeys(ms ...map[string]any) []string {
	var keys []string
	for _, m := range ms {
		for k := range m {
			if !slices.Contains(keys, k) {
				keys = append(keys, k)
			}
		}
	}
	sort.Strings(keys)
	return keys
}

// TestSchedulerPluginsClient writes a PodGroup with scheduler-plugins' own Go types and typed clientset
// (v0.31.8, compiled against client-go v0.37.2), labels pods with their PodGroupLabel constant, and
// checks custom-scheduler binds the gang whole and writes a status their types read: phase Running
// with 3 running once the pods run, and that an update through their client (minMember) is accepted.
func TestSchedulerPluginsClient(t *testing.T) {
	ns := testNamespace(t, "scheduler-plugins")
	ctx := context.Background()
	sp, err := spclient.NewForConfig(restConfig)
	if err != nil {
		t.Fatal(err)
	}
	pg := &spv1alpha1.PodGroup{
		ObjectMeta: metav1.ObjectMeta{Name: "sp-gang", Namespace: ns},
		Spec: spv1alpha1.PodGroupSpec{
			MinMember:              3,
			MinResources:           v1.ResourceList{v1.ResourceCPU: resource.MustParse("3")},
			ScheduleTimeoutSeconds: ptr.To[int32](30),
		},
	}
	if _, err := sp.SchedulingV1alpha1().PodGroups(ns).Create(ctx, pg, metav1.CreateOptions{}); err != nil {
		t.Fatalf("creating a PodGroup with scheduler-plugins' clientset: %v", err)
	}
	for i := range 3 {
		p := &v1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("sp-gang-%d", i), Labels: map[string]string{spv1alpha1.PodGroupLabel: "sp-gang"}},
			Spec: v1.PodSpec{SchedulerName: schedulerName, Containers: []v1.Container{{Name: "c", Image: "registry.k8s.io/pause:3.10",
				Resources: v1.ResourceRequirements{Requests: v1.ResourceList{v1.ResourceCPU: resource.MustParse("1")}}}}},
		}
		if _, err := client.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	waitGangBound(t, ns, "sp-gang", 3)
	var got *spv1alpha1.PodGroup
	waitFor(t, "the PodGroup's status, read with their types, to say Running 3", 60*time.Second, func(ctx context.Context) (bool, error) {
		got, err = sp.SchedulingV1alpha1().PodGroups(ns).Get(ctx, "sp-gang", metav1.GetOptions{})
		return err == nil && got.Status.Phase == spv1alpha1.PodGroupRunning && got.Status.Running == 3, err
	})
	if got.Spec.MinMember != 3 || got.Spec.ScheduleTimeoutSeconds == nil || *got.Spec.ScheduleTimeoutSeconds != 30 || got.Spec.MinResources.Cpu().Cmp(resource.MustParse("3")) != 0 {
		t.Errorf("the spec read back with their types is %+v", got.Spec)
	}
	got.Spec.MinMember = 2
	if _, err := sp.SchedulingV1alpha1().PodGroups(ns).Update(ctx, got, metav1.UpdateOptions{}); err != nil {
		t.Errorf("updating minMember with scheduler-plugins' clientset: %v", err)
	}
}
