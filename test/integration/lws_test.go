package integration

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	st "k8s.io/kubernetes/pkg/scheduler/testing"
	"k8s.io/utils/ptr"

	"github.com/custom-scheduler/custom-scheduler/pkg/apis/scheduling/v1alpha1"
	"github.com/custom-scheduler/custom-scheduler/pkg/coscheduling/podgroup"
	"github.com/custom-scheduler/custom-scheduler/pkg/coscheduling/tree"
)

// LeaderWorkerSet replica groups without a PodGroup written: pods shaped as LWS v0.8.0 makes them
// (the labels and annotations its controller and pod webhook write, owned by its StatefulSets), the
// scheduler as shipped. test/interop runs the LWS controller itself.

// lwsGroups are the groups ("namespace/group") of LWS-shaped pods, which no PodGroup label selects
// (see groupListOptions).
var lwsGroups sync.Map

// createLWS creates the pods of a LeaderWorkerSet named set: replicas groups of size pods (a leader
// and size-1 workers) requesting cpu each, those of worker index w where made(w) (nil: all);
// minGroupCount > 0 asks for that many replicas whole (K of N).
func createLWS(t *testing.T, ns, set string, replicas, size int, cpu string, minGroupCount int, made func(w int) bool) {
	t.Helper()
	ann := map[string]string{podgroup.LWSSizeAnnotation: fmt.Sprint(size)}
	if minGroupCount > 0 {
		ann[tree.AnnotationMinGroupCount] = fmt.Sprint(minGroupCount)
	}
	// The owners are real StatefulSets (of no replicas, selecting nothing): a garbage collector, where
	// a test of the same process runs one, deletes pods whose owner does not exist.
	owner := func(name string) metav1.OwnerReference {
		sts := &appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Spec: appsv1.StatefulSetSpec{
			Replicas: ptr.To(int32(0)), Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"owner-of": "nothing"}},
			Template: v1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"owner-of": "nothing"}},
				Spec: v1.PodSpec{Containers: []v1.Container{{Name: "pause", Image: "pause"}}}}}}
		made, err := client.AppsV1().StatefulSets(ns).Create(context.Background(), sts, metav1.CreateOptions{})
		if apierrors.IsAlreadyExists(err) {
			made, err = client.AppsV1().StatefulSets(ns).Get(context.Background(), name, metav1.GetOptions{})
		}
		if err != nil {
			t.Fatalf("creating StatefulSet %s/%s: %v", ns, name, err)
		}
		yes := true
		return metav1.OwnerReference{APIVersion: "apps/v1", Kind: "StatefulSet", Name: name, UID: made.UID, Controller: &yes}
	}
	for r := range replicas {
		leader := fmt.Sprintf("%s-%d", set, r)
		lwsGroups.Store(ns+"/"+leader, true)
		for w := range size {
			if made != nil && !made(w) {
				continue
			}
			name, ctrl := leader, owner(set)
			if w > 0 {
				name, ctrl = fmt.Sprintf("%s-%d", leader, w), owner(leader)
			}
			pod := st.MakePod().Namespace(ns).Name(name).SchedulerName(schedulerName).
				Labels(map[string]string{podgroup.LWSNameLabel: set, podgroup.LWSGroupIndexLabel: fmt.Sprint(r), podgroup.LWSWorkerIndex: fmt.Sprint(w)}).
				Req(map[v1.ResourceName]string{v1.ResourceCPU: cpu, v1.ResourceMemory: "100Mi"}).Container("pause").Obj()
			pod.Annotations = ann
			pod.OwnerReferences = []metav1.OwnerReference{ctrl}
			createPod(t, pod)
		}
	}
}

// readPodGroup reads one of our PodGroups.
func readPodGroup(ctx context.Context, t *testing.T, ns, name string) (*v1alpha1.PodGroup, error) {
	u, err := dynamicClient(t).Resource(podGroupGVR).Namespace(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return nil, err
	}
	pg := &v1alpha1.PodGroup{}
	return pg, runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, pg)
}

// TestLeaderWorkerSetReplicaGangs: two replicas of a leader and two workers (2 CPU each) on two
// nodes of 4 CPU: room for one replica and a pod. The scheduler makes each replica's PodGroup
// (minMember 3, owned by its leader pod); one replica binds whole and the other binds none, where
// one by one four pods of both would bind.
func TestLeaderWorkerSetReplicaGangs(t *testing.T) {
	startScheduler(t, schedulerConfig(t, adminKubeconfig, shippedProfiles(t)))
	ns := testNamespace(t)
	cosNodes(t, ns+"-n", 2, "4")
	for _, g := range []string{"serve-0", "serve-1"} {
		watchWhole(t, ns, g, 3, nil)
	}
	createLWS(t, ns, "serve", 2, 3, "2", 0, nil)
	waitFor(t, ns, "one replica bound whole", func(ctx context.Context) (bool, error) {
		a, err := boundMembers(ctx, ns, "serve-0")
		if err != nil {
			return false, err
		}
		b, err := boundMembers(ctx, ns, "serve-1")
		return a+b == 3 && (a == 0 || b == 0), err
	})
	pg, err := readPodGroup(context.Background(), t, ns, "serve-0")
	if err != nil {
		t.Fatalf("the scheduler made no PodGroup for replica serve-0: %v", err)
	}
	if pg.Spec.MinMember != 3 || pg.Labels[podgroup.LabelManagedBy] != podgroup.ManagedBy {
		t.Errorf("PodGroup serve-0: minMember %d, labels %v; want 3 and %s=%s", pg.Spec.MinMember, pg.Labels, podgroup.LabelManagedBy, podgroup.ManagedBy)
	}
	if ref := metav1.GetControllerOf(pg); ref == nil || ref.Kind != "Pod" || ref.Name != "serve-0" {
		t.Errorf("PodGroup serve-0 is owned by %v, want its leader pod serve-0", ref)
	}
	consistently(t, 4*time.Second, "one replica whole, the other unbound", func(ctx context.Context) (bool, error) {
		a, err := boundMembers(ctx, ns, "serve-0")
		if err != nil {
			return false, err
		}
		b, err := boundMembers(ctx, ns, "serve-1")
		return a+b == 3 && (a == 0 || b == 0), err
	})
}

// TestLeaderWorkerSetKOfN: three replicas of a leader and a worker (3 CPU each) whose templates ask
// for all three whole (min-group-count 3), on four nodes of 4 CPU: room for two replicas, so none
// binds; a fifth and sixth node make room and all three bind whole. The set's composite is made by
// the scheduler too.
func TestLeaderWorkerSetKOfN(t *testing.T) {
	startScheduler(t, schedulerConfig(t, adminKubeconfig, shippedProfiles(t)))
	ns := testNamespace(t)
	cosNodes(t, ns+"-n", 4, "4")
	groups := []string{"lws-0", "lws-1", "lws-2"}
	for _, g := range groups {
		watchWhole(t, ns, g, 2, nil)
	}
	createLWS(t, ns, "lws", 3, 2, "3", 3, nil)
	waitFor(t, ns, "the set's composite made", func(ctx context.Context) (bool, error) {
		pg, err := readPodGroup(ctx, t, ns, "lws")
		if err != nil {
			return false, nil
		}
		return pg.Annotations[tree.AnnotationMinGroupCount] == "3", nil
	})
	consistentlyNoneBound(t, 6*time.Second, ns, groups...)
	cosNodes(t, ns+"-more", 2, "4")
	for _, g := range groups {
		waitForBoundMembers(t, ns, g, 2)
	}
}

// lwsGVR is LeaderWorkerSet's resource, served in these tests by a CRD of its name and no schema
// (ensureLWSCRD): the scheduler reads only spec.startupPolicy.
var lwsGVR = schema.GroupVersionResource{Group: "leaderworkerset.x-k8s.io", Version: "v1", Resource: "leaderworkersets"}

// ensureLWSCRD serves LeaderWorkerSets (no controller runs them).
func ensureLWSCRD(t *testing.T) {
	t.Helper()
	crd := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
		"metadata": map[string]any{"name": "leaderworkersets.leaderworkerset.x-k8s.io"},
		"spec": map[string]any{"group": "leaderworkerset.x-k8s.io", "scope": "Namespaced",
			"names": map[string]any{"kind": "LeaderWorkerSet", "listKind": "LeaderWorkerSetList", "plural": "leaderworkersets", "singular": "leaderworkerset"},
			"versions": []any{map[string]any{"name": "v1", "served": true, "storage": true,
				"schema": map[string]any{"openAPIV3Schema": map[string]any{"type": "object", "x-kubernetes-preserve-unknown-fields": true}}}}}}}
	crds := schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}
	if _, err := dynamicClient(t).Resource(crds).Create(context.Background(), crd, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatalf("creating the LeaderWorkerSet CRD: %v", err)
	}
	waitFor(t, "", "LeaderWorkerSets served", func(ctx context.Context) (bool, error) {
		_, err := dynamicClient(t).Resource(lwsGVR).Namespace("default").List(ctx, metav1.ListOptions{})
		return err == nil, nil
	})
}

// TestLeaderWorkerSetLeaderReady: a set whose startupPolicy is LeaderReady makes its workers only
// once the leader is Ready. The scheduler reads the policy from the LeaderWorkerSet and makes the
// replica's PodGroup of minMember 1: the leader binds alone (as a gang of its size it would wait for
// workers that never come); the workers, made after, bind too.
func TestLeaderWorkerSetLeaderReady(t *testing.T) {
	ensureLWSCRD(t)
	startScheduler(t, schedulerConfig(t, adminKubeconfig, shippedProfiles(t)))
	ns := testNamespace(t)
	cosNodes(t, ns+"-n", 1, "4")
	set := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "leaderworkerset.x-k8s.io/v1", "kind": "LeaderWorkerSet",
		"metadata": map[string]any{"name": "ready", "namespace": ns}, "spec": map[string]any{"startupPolicy": "LeaderReady"}}}
	if _, err := dynamicClient(t).Resource(lwsGVR).Namespace(ns).Create(context.Background(), set, metav1.CreateOptions{}); err != nil {
		t.Fatalf("creating the LeaderWorkerSet: %v", err)
	}
	createLWS(t, ns, "ready", 1, 3, "1", 0, func(w int) bool { return w == 0 })
	waitFor(t, ns, "the leader bound alone", func(ctx context.Context) (bool, error) {
		n, err := boundMembers(ctx, ns, "ready-0")
		return n == 1, err
	})
	pg, err := readPodGroup(context.Background(), t, ns, "ready-0")
	if err != nil {
		t.Fatalf("the scheduler made no PodGroup for replica ready-0: %v", err)
	}
	if pg.Spec.MinMember != 1 {
		t.Errorf("PodGroup ready-0: minMember %d, want 1 (LeaderReady)", pg.Spec.MinMember)
	}
	createLWS(t, ns, "ready", 1, 3, "1", 0, func(w int) bool { return w > 0 })
	waitFor(t, ns, "the workers bound after the leader", func(ctx context.Context) (bool, error) {
		n, err := boundMembers(ctx, ns, "ready-0")
		return n == 3, err
	})
}
