package podgroup

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	schedulingv1beta1 "k8s.io/api/scheduling/v1beta1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	st "k8s.io/kubernetes/pkg/scheduler/testing"
	"k8s.io/utils/ptr"

	"github.com/custom-scheduler/custom-scheduler/pkg/apis/scheduling/v1alpha1"
	"github.com/custom-scheduler/custom-scheduler/pkg/coscheduling/tree"
)

func inTreePod(group string) *st.PodWrapper {
	w := st.MakePod().Namespace("ns").Name("p").SchedulerName("prof")
	w.Spec.SchedulingGroup = &v1.PodSchedulingGroup{PodGroupName: ptr.To(group)}
	return w
}

// readInTree reads the in-tree PodGroups for one test (as the plugin does once discovery found them).
func readInTree(t *testing.T) {
	SetInTreeRead(true)
	t.Cleanup(func() { SetInTreeRead(false) })
}

func TestOfBothSources(t *testing.T) {
	readInTree(t)
	cases := []struct {
		name        string
		pod         *v1.Pod
		group       string
		ok          bool
		conflicting bool
		inGang      bool
		liveKeys    []string
	}{
		{name: "our label", pod: st.MakePod().Namespace("ns").Name("p").SchedulerName("prof").Label(v1alpha1.PodGroupLabel, "g").Obj(),
			group: "g", ok: true, inGang: true, liveKeys: []string{"prof|ns/g"}},
		{name: "spec.schedulingGroup", pod: inTreePod("g").Obj(),
			group: InTreePrefix + "g", ok: true, inGang: true, liveKeys: []string{"prof|ns/" + InTreePrefix + "g"}},
		{name: "both: the label wins", pod: inTreePod("theirs").Label(v1alpha1.PodGroupLabel, "ours").Obj(),
			group: "ours", ok: true, conflicting: true, inGang: true, liveKeys: []string{"prof|ns/ours"}},
		{name: "an empty label and spec.schedulingGroup: the in-tree group, no conflict", pod: inTreePod("g").Label(v1alpha1.PodGroupLabel, "").Obj(),
			group: InTreePrefix + "g", ok: true, inGang: true, liveKeys: []string{"prof|ns/" + InTreePrefix + "g"}},
		{name: "an empty schedulingGroup name", pod: inTreePod("").Obj(), inGang: false},
		{name: "neither", pod: st.MakePod().Namespace("ns").Name("p").Obj()},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			group, ok := Of(tc.pod)
			if group != tc.group || ok != tc.ok {
				t.Errorf("Of = %q, %v; want %q, %v", group, ok, tc.group, tc.ok)
			}
			if got := Conflicting(tc.pod); got != tc.conflicting {
				t.Errorf("Conflicting = %v, want %v", got, tc.conflicting)
			}
			if got := InGang(tc.pod); got != tc.inGang {
				t.Errorf("InGang = %v, want %v", got, tc.inGang)
			}
			keys, _ := LiveIndexFunc(tc.pod)
			if diff := cmp.Diff(tc.liveKeys, keys); diff != "" {
				t.Errorf("LiveIndexFunc (-want,+got): %s", diff)
			}
		})
	}
	if InGang(nil) {
		t.Error("InGang(nil) = true")
	}
	// Where the in-tree PodGroups are not read, spec.schedulingGroup names no gang.
	SetInTreeRead(false)
	if group, ok := Of(inTreePod("g").Obj()); ok || Conflicting(inTreePod("g").Label(v1alpha1.PodGroupLabel, "ours").Obj()) {
		t.Errorf("Of = %q, %v with the in-tree PodGroups not read; want no group, and no conflict", group, ok)
	}
}

func TestFromInTree(t *testing.T) {
	deleting := metav1.Now()
	conds := []metav1.Condition{{Type: schedulingv1beta1.PodGroupInitiallyScheduled, Status: metav1.ConditionTrue, Reason: "Scheduled"}}
	base := func(spec schedulingv1beta1.PodGroupSpec) *schedulingv1beta1.PodGroup {
		return &schedulingv1beta1.PodGroup{
			ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "train", UID: "u1", Generation: 1, ResourceVersion: "7",
				Annotations: map[string]string{"a": "b"}, DeletionTimestamp: &deleting},
			Spec: spec, Status: schedulingv1beta1.PodGroupStatus{Conditions: conds},
		}
	}
	meta := func(policy, disruption string) metav1.ObjectMeta {
		return metav1.ObjectMeta{Namespace: "ns", Name: InTreePrefix + "train", UID: "u1", Generation: 1, ResourceVersion: "7", DeletionTimestamp: &deleting,
			Annotations: map[string]string{"a": "b", AnnotationPolicy: policy, AnnotationDisruptionMode: disruption}}
	}
	typeMeta := metav1.TypeMeta{APIVersion: "scheduling.k8s.io/v1beta1", Kind: "PodGroup"}
	cases := []struct {
		name string
		spec schedulingv1beta1.PodGroupSpec
		want *v1alpha1.PodGroup
	}{
		{
			name: "a gang of 4",
			spec: schedulingv1beta1.PodGroupSpec{SchedulingPolicy: schedulingv1beta1.PodGroupSchedulingPolicy{Gang: &schedulingv1beta1.GangSchedulingPolicy{MinCount: 4}}},
			want: &v1alpha1.PodGroup{TypeMeta: typeMeta, ObjectMeta: meta("Gang", "Single"), Spec: v1alpha1.PodGroupSpec{MinMember: 4},
				Status: v1alpha1.PodGroupStatus{Conditions: conds}},
		},
		{
			name: "basic: minMember 1",
			spec: schedulingv1beta1.PodGroupSpec{SchedulingPolicy: schedulingv1beta1.PodGroupSchedulingPolicy{Basic: &schedulingv1beta1.BasicSchedulingPolicy{}}},
			want: &v1alpha1.PodGroup{TypeMeta: typeMeta, ObjectMeta: meta("Basic", "Single"), Spec: v1alpha1.PodGroupSpec{MinMember: 1},
				Status: v1alpha1.PodGroupStatus{Conditions: conds}},
		},
		{
			name: "a topology constraint is the required domain; disruptionMode all",
			spec: schedulingv1beta1.PodGroupSpec{
				SchedulingPolicy:      schedulingv1beta1.PodGroupSchedulingPolicy{Gang: &schedulingv1beta1.GangSchedulingPolicy{MinCount: 2}},
				SchedulingConstraints: &schedulingv1beta1.PodGroupSchedulingConstraints{Topology: []schedulingv1beta1.TopologyConstraint{{Key: "zone"}}},
				DisruptionMode:        &schedulingv1beta1.DisruptionMode{All: &schedulingv1beta1.AllDisruptionMode{}},
			},
			want: &v1alpha1.PodGroup{TypeMeta: typeMeta, ObjectMeta: meta("Gang", "All"),
				Spec:   v1alpha1.PodGroupSpec{MinMember: 2, TopologyPolicy: &v1alpha1.TopologyPolicy{Required: "zone"}},
				Status: v1alpha1.PodGroupStatus{Conditions: conds}},
		},
		{
			name: "a minCount below 1 is 1",
			spec: schedulingv1beta1.PodGroupSpec{SchedulingPolicy: schedulingv1beta1.PodGroupSchedulingPolicy{Gang: &schedulingv1beta1.GangSchedulingPolicy{}}},
			want: &v1alpha1.PodGroup{TypeMeta: typeMeta, ObjectMeta: meta("Gang", "Single"), Spec: v1alpha1.PodGroupSpec{MinMember: 1},
				Status: v1alpha1.PodGroupStatus{Conditions: conds}},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			in := base(tc.spec)
			got := FromInTree(in)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("FromInTree (-want,+got): %s", diff)
			}
			if !IsInTree(got) {
				t.Error("IsInTree = false")
			}
			if in.Annotations[AnnotationPolicy] != "" {
				t.Error("FromInTree wrote into the informer's object")
			}
			if ref := Ref(got); ref.APIVersion != "scheduling.k8s.io/v1beta1" || ref.Name != "train" || ref.UID != "u1" {
				t.Errorf("Ref = %+v, want the in-tree object", ref)
			}
		})
	}
	ours := &v1alpha1.PodGroup{ObjectMeta: metav1.ObjectMeta{Name: "train"}}
	if IsInTree(ours) || Ref(ours).APIVersion != v1alpha1.SchemeGroupVersion.String() {
		t.Error("a PodGroup of ours is taken for an in-tree one")
	}
}

func TestSpecChangedBothSources(t *testing.T) {
	readInTree(t)
	u := func(apiVersion, name string, gen int64, minCount int64) *unstructured.Unstructured {
		return &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": apiVersion, "kind": "PodGroup",
			"metadata": map[string]any{"namespace": "ns", "name": name, "uid": "u", "generation": gen},
			"spec":     map[string]any{"minCount": minCount},
		}}
	}
	const ours, theirs = "scheduling.x-k8s.io/v1alpha1", "scheduling.k8s.io/v1beta1"
	cases := []struct {
		name     string
		group    string
		old, obj interface{}
		want     bool
	}{
		{name: "in-tree created", group: InTreePrefix + "g", obj: u(theirs, "g", 1, 2), want: true},
		{name: "in-tree minCount edited, generation kept", group: InTreePrefix + "g", old: u(theirs, "g", 1, 2), obj: u(theirs, "g", 1, 3), want: true},
		{name: "in-tree status only", group: InTreePrefix + "g", old: u(theirs, "g", 1, 2), obj: u(theirs, "g", 1, 2)},
		{name: "our PodGroup of the same name is not the in-tree group", group: InTreePrefix + "g", obj: u(ours, "g", 1, 2)},
		{name: "the in-tree PodGroup of the same name is not ours", group: "g", obj: u(theirs, "g", 1, 2)},
		{name: "ours edited", group: "g", old: u(ours, "g", 1, 2), obj: u(ours, "g", 2, 3), want: true},
		{name: "a converted in-tree object (typed)", group: InTreePrefix + "g",
			obj: FromInTree(&schedulingv1beta1.PodGroup{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "g"}}), want: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := SpecChanged("ns", tc.group, tc.old, tc.obj)
			if err != nil || got != tc.want {
				t.Errorf("SpecChanged = %v, %v; want %v", got, err, tc.want)
			}
		})
	}
}

func TestTwoPodGroupsMessage(t *testing.T) {
	readInTree(t)
	msg := TwoPodGroupsMessage(inTreePod("theirs").Label(v1alpha1.PodGroupLabel, "ours").Obj())
	want := `the pod names two gangs: PodGroup "ours" (scheduling.x-k8s.io/v1alpha1) by its label scheduling.x-k8s.io/pod-group, and PodGroup "theirs" (scheduling.k8s.io/v1beta1) in spec.schedulingGroup; it is scheduled as a member of the first, and the second's policy does not apply`
	if msg != want {
		t.Errorf("message\n%s\nwant\n%s", msg, want)
	}
}

func TestUnitOf(t *testing.T) {
	readInTree(t)
	in := func(name string, spec schedulingv1beta1.PodGroupSpec) *v1alpha1.PodGroup {
		return FromInTree(&schedulingv1beta1.PodGroup{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name}, Spec: spec})
	}
	gang := schedulingv1beta1.PodGroupSchedulingPolicy{Gang: &schedulingv1beta1.GangSchedulingPolicy{MinCount: 2}}
	basic := schedulingv1beta1.PodGroupSchedulingPolicy{Basic: &schedulingv1beta1.BasicSchedulingPolicy{}}
	all := &schedulingv1beta1.DisruptionMode{All: &schedulingv1beta1.AllDisruptionMode{}}
	for _, pg := range []*v1alpha1.PodGroup{
		in("gang", schedulingv1beta1.PodGroupSpec{SchedulingPolicy: gang}),
		in("basic", schedulingv1beta1.PodGroupSpec{SchedulingPolicy: basic}),
		in("basic-all", schedulingv1beta1.PodGroupSpec{SchedulingPolicy: basic, DisruptionMode: all}),
		in("gone", schedulingv1beta1.PodGroupSpec{SchedulingPolicy: gang}),
	} {
		TrackInTreeUnit(pg, false)
		t.Cleanup(func() { TrackInTreeUnit(pg, true) })
	}
	TrackInTreeUnit(in("gone", schedulingv1beta1.PodGroupSpec{SchedulingPolicy: gang}), true)
	cases := []struct {
		name string
		pod  *v1.Pod
		unit bool
	}{
		{name: "a member of ours", pod: st.MakePod().Namespace("ns").Name("p").Label(v1alpha1.PodGroupLabel, "g").Obj(), unit: true},
		{name: "an in-tree gang's member (disruptionMode single or all: a gang goes whole)", pod: inTreePod("gang").Obj(), unit: true},
		{name: "a basic group's member, disruptionMode single: on its own", pod: inTreePod("basic").Obj()},
		{name: "a basic group's member, disruptionMode all", pod: inTreePod("basic-all").Obj(), unit: true},
		{name: "a PodGroup not seen (or gone): on its own", pod: inTreePod("gone").Obj()},
		{name: "a plain pod", pod: st.MakePod().Namespace("ns").Name("p").Obj()},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if _, ok := UnitOf(tc.pod); ok != tc.unit {
				t.Errorf("UnitOf = %v, want %v", ok, tc.unit)
			}
		})
	}
}

// A group under a gang composite is evicted with the composite's tree (tree.Index.Unit), an in-tree
// basic group's member too.
func TestUnitOfTree(t *testing.T) {
	readInTree(t)
	TrackInTreeUnit(FromInTree(&schedulingv1beta1.PodGroup{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "basic"},
		Spec: schedulingv1beta1.PodGroupSpec{SchedulingPolicy: schedulingv1beta1.PodGroupSchedulingPolicy{Basic: &schedulingv1beta1.BasicSchedulingPolicy{}}}}), false)
	x := tree.NewIndex()
	x.Set(tree.Node{Namespace: "ns", Name: "job", Composite: true, Gang: true, Min: 2})
	x.Set(tree.Node{Namespace: "ns", Name: "g", Gang: true, Min: 2, Parent: "job"})
	x.Set(tree.Node{Namespace: "ns", Name: tree.InTreeCompositePrefix + "serve", Composite: true, Gang: true, Min: 2})
	x.Set(tree.Node{Namespace: "ns", Name: InTreePrefix + "basic", Min: 1, Parent: tree.InTreeCompositePrefix + "serve"})
	SetTreeUnits(x.Unit)
	t.Cleanup(func() { SetTreeUnits(nil) })
	for _, tc := range []struct {
		pod  *v1.Pod
		unit string
	}{
		{pod: st.MakePod().Namespace("ns").Name("p").Label(v1alpha1.PodGroupLabel, "g").Obj(), unit: "job"},
		{pod: inTreePod("basic").Obj(), unit: tree.InTreeCompositePrefix + "serve"},
		{pod: st.MakePod().Namespace("ns").Name("p").Label(v1alpha1.PodGroupLabel, "flat").Obj(), unit: "flat"},
	} {
		if unit, ok := UnitOf(tc.pod); !ok || unit != tc.unit {
			t.Errorf("UnitOf(%s) = %q, %v; want %q", tc.pod.Name, unit, ok, tc.unit)
		}
	}
}

// TestTreeNode: a PodGroup's node has its minMember and is a gang unless it is an in-tree group with
// a basic policy.
func TestTreeNode(t *testing.T) {
	pg := func(policy string) *v1alpha1.PodGroup {
		p := &v1alpha1.PodGroup{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "g", Annotations: map[string]string{tree.AnnotationParent: "job"}},
			Spec: v1alpha1.PodGroupSpec{MinMember: 3}}
		if policy != "" {
			p.Annotations[AnnotationPolicy] = policy
		}
		return p
	}
	for _, tc := range []struct {
		policy string
		gang   bool
	}{{"", true}, {"Gang", true}, {"Basic", false}} {
		n := TreeNode(pg(tc.policy))
		if n.Gang != tc.gang || n.Min != 3 || n.Parent != "job" || n.Key() != "ns/g" {
			t.Errorf("policy %q: TreeNode = %+v, want a gang %v of minimum 3 under job", tc.policy, n, tc.gang)
		}
	}
}
