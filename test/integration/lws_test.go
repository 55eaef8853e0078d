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
	"k8s.io/apimachinery/pkg/runtime"
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
// and size-1 workers) requesting cpu each; minGroupCount > 0 asks for that many replicas whole (K of N).
func createLWS(t *testing.T, ns, set string, replicas, size int, cpu string, minGroupCount int) {
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
	createLWS(t, ns, "serve", 2, 3, "2", 0)
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
	createLWS(t, ns, "lws", 3, 2, "3", 3)
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
