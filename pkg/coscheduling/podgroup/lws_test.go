package podgroup

import (
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	st "k8s.io/kubernetes/pkg/scheduler/testing"

	"github.com/custom-scheduler/custom-scheduler/pkg/apis/scheduling/v1alpha1"
	"github.com/custom-scheduler/custom-scheduler/pkg/coscheduling/tree"
)

// lwsPod is a pod as LeaderWorkerSet makes it: replica index of set, worker w, of size.
func lwsPod(set, index, worker, size string, ann map[string]string) *v1.Pod {
	p := st.MakePod().Namespace("ns").Name(set + "-" + index).UID("leader-uid").
		Labels(map[string]string{LWSNameLabel: set, LWSGroupIndexLabel: index, LWSWorkerIndex: worker}).Obj()
	p.Annotations = map[string]string{LWSSizeAnnotation: size}
	for k, v := range ann {
		p.Annotations[k] = v
	}
	yes := true
	p.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "StatefulSet", Name: set, UID: "sts-uid", Controller: &yes}}
	return p
}

func TestLWSGroup(t *testing.T) {
	labelled := lwsPod("serve", "1", "2", "3", nil)
	labelled.Labels[v1alpha1.PodGroupLabel] = "mine"
	for _, tc := range []struct {
		name string
		pod  *v1.Pod
		want string
	}{
		{"a worker is in its replica's group", lwsPod("serve", "1", "2", "3", nil), "serve-1"},
		{"the leader too", lwsPod("serve", "0", "0", "3", nil), "serve-0"},
		{"no size: not LWS's", lwsPod("serve", "0", "0", "", nil), ""},
		{"no group index: not LWS's", lwsPod("serve", "", "0", "3", nil), ""},
		{"opted out", lwsPod("serve", "0", "0", "3", map[string]string{AnnotationLWSGang: "false"}), ""},
		{"a PodGroup label wins", labelled, "mine"},
		{"a plain pod", st.MakePod().Name("p").Obj(), ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got, _ := Of(tc.pod); got != tc.want {
				t.Errorf("Of = %q, want %q", got, tc.want)
			}
		})
	}
}

func TestLWSPodGroups(t *testing.T) {
	for _, tc := range []struct {
		name          string
		pod           *v1.Pod
		wantMin       int32
		wantComposite string
		wantErr       string
	}{
		{name: "a replica of 4", pod: lwsPod("serve", "2", "0", "4", nil), wantMin: 4},
		{name: "K of N: the set's composite", pod: lwsPod("serve", "2", "0", "4", map[string]string{tree.AnnotationMinGroupCount: "3"}), wantMin: 4, wantComposite: "3"},
		{name: "a worker stands for nothing", pod: lwsPod("serve", "2", "1", "4", nil), wantErr: "not the leader"},
		{name: "a malformed size", pod: lwsPod("serve", "2", "0", "four", nil), wantErr: LWSSizeAnnotation},
		{name: "a malformed K", pod: lwsPod("serve", "2", "0", "4", map[string]string{tree.AnnotationMinGroupCount: "0"}), wantErr: tree.AnnotationMinGroupCount},
	} {
		t.Run(tc.name, func(t *testing.T) {
			group, composite, err := LWSPodGroups(tc.pod)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want one naming %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if group.Name != "serve-2" || group.Spec.MinMember != tc.wantMin || group.Labels[LabelManagedBy] != ManagedBy {
				t.Errorf("group %s minMember %d labels %v", group.Name, group.Spec.MinMember, group.Labels)
			}
			if ref := metav1.GetControllerOf(group); ref == nil || ref.Kind != "Pod" || ref.UID != "leader-uid" {
				t.Errorf("group owned by %v, want the leader pod", ref)
			}
			if tc.wantComposite == "" {
				if composite != nil || group.Annotations[tree.AnnotationParent] != "" {
					t.Errorf("a composite %v (parent %q) without K of N", composite, group.Annotations[tree.AnnotationParent])
				}
				return
			}
			if composite == nil || composite.Name != "serve" || composite.Annotations[tree.AnnotationMinGroupCount] != tc.wantComposite || group.Annotations[tree.AnnotationParent] != "serve" {
				t.Fatalf("composite %v, group parent %q", composite, group.Annotations[tree.AnnotationParent])
			}
			if ref := metav1.GetControllerOf(composite); ref == nil || ref.UID != "sts-uid" {
				t.Errorf("composite owned by %v, want the leader StatefulSet", ref)
			}
			// The composite is a composite to the tree, and the group its child.
			if n := tree.FromPodGroup(composite, 1, true); !n.Composite || n.Min != 3 || n.Invalid != "" {
				t.Errorf("the composite reads as %+v", n)
			}
		})
	}
}
