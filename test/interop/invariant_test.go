package interop

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// TestGangInvariantCatchesPartialGang shows that the invariant every operator test polls can fail: a
// gang of 3 whose pods name a scheduler that does not run, one member bound by hand (a partial gang,
// as a one-pod-at-a-time scheduler would leave it), is reported once it stays so past bindGrace; the
// same gang bound whole at once is not.
func TestGangInvariantCatchesPartialGang(t *testing.T) {
	// Not testNamespace: its own invariant watch would fail this test for the partial gang it makes.
	ns := createNamespace(t, "invariant")
	ctx := context.Background()
	for _, group := range []string{"partial", "whole"} {
		pg := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "scheduling.x-k8s.io/v1alpha1", "kind": "PodGroup",
			"metadata": map[string]any{"name": group, "namespace": ns},
			"spec":     map[string]any{"minMember": int64(3)},
		}}
		if _, err := dyn.Resource(podGroupGVR).Namespace(ns).Create(ctx, pg, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		for i := range 3 {
			p := &v1.Pod{
				ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("%s-%d", group, i), Labels: map[string]string{podGroupLabel: group}},
				Spec: v1.PodSpec{SchedulerName: "no-such-scheduler", Containers: []v1.Container{{Name: "c", Image: "registry.k8s.io/pause:3.10",
					Resources: v1.ResourceRequirements{Requests: v1.ResourceList{v1.ResourceCPU: resource.MustParse("100m")}}}}},
			}
			if _, err := client.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
		}
	}
	w := startGangWatch(ns)
	bind := func(name string) {
		t.Helper()
		if err := client.CoreV1().Pods(ns).Bind(ctx, &v1.Binding{ObjectMeta: metav1.ObjectMeta{Name: name}, Target: v1.ObjectReference{Kind: "Node", Name: "node-0"}}, metav1.CreateOptions{}); err != nil {
			t.Fatalf("binding %s: %v", name, err)
		}
	}
	time.Sleep(500 * time.Millisecond)
	bind("partial-0")
	for i := range 3 {
		bind(fmt.Sprintf("whole-%d", i))
	}
	time.Sleep(bindGrace + 2*time.Second)
	violations := w.stop()
	if len(violations) != 1 || !strings.Contains(violations[0], "PodGroup "+ns+"/partial ") || !strings.Contains(violations[0], "1 of minMember 3") {
		t.Fatalf("the invariant check reported %q; want exactly one violation, for the gang with 1 of 3 members bound", violations)
	}
	t.Logf("the invariant check caught the partial gang: %s", violations[0])
}
