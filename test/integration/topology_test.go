package integration

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/custom-scheduler/custom-scheduler/pkg/apis/scheduling/v1alpha1"
	"github.com/custom-scheduler/custom-scheduler/pkg/coscheduling"
	"github.com/custom-scheduler/custom-scheduler/pkg/coscheduling/podgroup"
)

const (
	rackLabel  = "example.com/rack"
	blockLabel = "example.com/block"
)

// rack creates n 4-CPU nodes named <rack>-<i> labelled with the rack and its block.
func rack(t *testing.T, block, rack string, n int) {
	t.Helper()
	for i := range n {
		createNode(t, fmt.Sprintf("%s-%d", rack, i), "4", "8Gi", map[string]string{rackLabel: rack, blockLabel: block})
	}
}

// createTopologyPodGroup creates a PodGroup with spec.topologyPolicy.
func createTopologyPodGroup(t *testing.T, ns, name string, minMember int64, policy map[string]any) {
	t.Helper()
	pg := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": v1alpha1.SchemeGroupVersion.String(),
		"kind":       "PodGroup",
		"metadata":   map[string]any{"name": name, "namespace": ns},
		"spec":       map[string]any{"minMember": minMember, "topologyPolicy": policy},
	}}
	if _, err := dynamicClient(t).Resource(podGroupGVR).Namespace(ns).Create(context.Background(), pg, metav1.CreateOptions{FieldValidation: "Strict"}); err != nil {
		t.Fatalf("creating PodGroup %s/%s: %v", ns, name, err)
	}
}

// racksOf returns the rack label of the nodes the group's bound members are on.
func racksOf(t *testing.T, ns, group string) map[string]int {
	t.Helper()
	racks := map[string]int{}
	for name, n := range nodesOf(t, ns, group) {
		node, err := client.CoreV1().Nodes().Get(context.Background(), name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		racks[node.Labels[rackLabel]] += n
	}
	return racks
}

// TestCoschedulingTopology places gangs in one rack or block of labelled nodes: racks r1 (2 nodes)
// and r2 (4 nodes) in block b1, r3 (3 nodes) in block b2, 4 CPUs each; members ask for 3 CPUs, so a
// node holds one member.
func TestCoschedulingTopology(t *testing.T) {
	startScheduler(t, schedulerConfig(t, adminKubeconfig, coschedulingProfiles))
	required := map[string]any{"required": rackLabel}

	t.Run("a gang with a required rack lands in one rack", func(t *testing.T) {
		ns := testNamespace(t)
		rack(t, "b1", "r1", 2)
		rack(t, "b1", "r2", 4)
		createTopologyPodGroup(t, ns, "job", 4, required)
		createGang(t, ns, "job", 4, "3")
		waitForBoundMembers(t, ns, "job", 4)
		if racks := racksOf(t, ns, "job"); len(racks) != 1 || racks["r2"] != 4 {
			t.Errorf("members landed in racks %v, want all 4 in r2", racks)
		}
		c := waitForPodGroupConditionOf(t, ns, "job", "Topology", "RequiredDomain")
		if !strings.Contains(c.Message, "example.com/rack=r2") {
			t.Errorf("Topology condition %q does not name the rack", c.Message)
		}
		waitForEvent(t, ns, "job", podgroup.ReasonDomainChosen, schedulerName)
	})

	t.Run("the tightest rack is chosen, so a later bigger gang still fits", func(t *testing.T) {
		ns := testNamespace(t)
		rack(t, "b1", "r1", 2)
		rack(t, "b1", "r2", 4)
		createTopologyPodGroup(t, ns, "small", 2, required)
		createGang(t, ns, "small", 2, "3")
		waitForBoundMembers(t, ns, "small", 2)
		createTopologyPodGroup(t, ns, "big", 4, required)
		createGang(t, ns, "big", 4, "3")
		waitForBoundMembers(t, ns, "big", 4)
		if racks := racksOf(t, ns, "small"); racks["r1"] != 2 {
			t.Errorf("the small gang landed in %v, want r1 (the tightest fit)", racks)
		}
		if racks := racksOf(t, ns, "big"); racks["r2"] != 4 {
			t.Errorf("the big gang landed in %v, want r2", racks)
		}
	})

	t.Run("a required rack that no rack has room for holds nothing, though the cluster has room", func(t *testing.T) {
		ns := testNamespace(t)
		rack(t, "b1", "r1", 2)
		rack(t, "b1", "r2", 4)
		createTopologyPodGroup(t, ns, "job", 5, required)
		createGang(t, ns, "job", 5, "3")
		c := waitForPodGroupCondition(t, ns, "job", podgroup.ReasonGangInfeasible)
		if !strings.Contains(c.Message, "no example.com/rack domain has room for 5 members; the best fits 4") {
			t.Errorf("GangInfeasible condition %q does not give the rack numbers", c.Message)
		}
		msg := waitForPodUnschedulable(t, ns, "job-0")
		if !strings.Contains(msg, "example.com/rack") {
			t.Errorf("PodScheduled message %q does not name the rack key", msg)
		}
		consistentlyNoneBound(t, 2*time.Second, ns, "job")
	})

	t.Run("preferred falls back from rack to block and says so", func(t *testing.T) {
		ns := testNamespace(t)
		rack(t, "b1", "r1", 2)
		rack(t, "b1", "r2", 4)
		rack(t, "b2", "r3", 3)
		createTopologyPodGroup(t, ns, "job", 5, map[string]any{"preferred": []any{rackLabel, blockLabel}})
		createGang(t, ns, "job", 5, "3")
		waitForBoundMembers(t, ns, "job", 5)
		if racks := racksOf(t, ns, "job"); racks["r3"] != 0 {
			t.Errorf("members landed in racks %v, want block b1 only (r1 and r2)", racks)
		}
		c := waitForPodGroupConditionOf(t, ns, "job", "Topology", "PreferredDomain")
		if !strings.Contains(c.Message, "example.com/block=b1") || !strings.Contains(c.Message, "preferred level 2 of 2") {
			t.Errorf("Topology condition %q does not say the block level was used", c.Message)
		}
	})

	t.Run("a replacement member joins its gang's rack when another rack is emptier", func(t *testing.T) {
		ns := testNamespace(t)
		rack(t, "b1", "r1", 2)
		rack(t, "b1", "r2", 4)
		createTopologyPodGroup(t, ns, "job", 2, required)
		gang := createGang(t, ns, "job", 2, "3")
		waitForBoundMembers(t, ns, "job", 2)
		if racks := racksOf(t, ns, "job"); racks["r1"] != 2 {
			t.Fatalf("the gang landed in %v, want r1", racks)
		}
		setPhase(t, ns, gang[0], v1.PodFailed)
		forceDelete(t, ns, gang[0])
		createMembers(t, ns, "job", "replacement", 1, "3")
		waitForPodBound(t, ns, "replacement-0")
		if racks := racksOf(t, ns, "job"); racks["r1"] != 2 {
			t.Errorf("after the replacement the gang is in %v, want r1 only", racks)
		}
	})

	t.Run("the policy can come from the members' annotations", func(t *testing.T) {
		ns := testNamespace(t)
		rack(t, "b1", "r1", 2)
		rack(t, "b1", "r2", 4)
		createPodGroup(t, ns, "job", 3, 0)
		for i := range 3 {
			p := gangPod(ns, fmt.Sprintf("job-%d", i), "job", "3")
			p.Annotations = map[string]string{coscheduling.AnnotationTopologyRequired: rackLabel}
			createPod(t, p)
		}
		waitForBoundMembers(t, ns, "job", 3)
		if racks := racksOf(t, ns, "job"); racks["r2"] != 3 {
			t.Errorf("members landed in racks %v, want all 3 in r2", racks)
		}
	})

	t.Run("a malformed annotation holds the member with an event", func(t *testing.T) {
		ns := testNamespace(t)
		rack(t, "b1", "r1", 2)
		createPodGroup(t, ns, "job", 1, 0)
		p := gangPod(ns, "job-0", "job", "1")
		p.Annotations = map[string]string{coscheduling.AnnotationTopologyRequired: "not a label key"}
		createPod(t, p)
		ev := waitForEvent(t, ns, "job-0", podgroup.ReasonInvalidTopologyPolicy, schedulerName)
		if !strings.Contains(ev.Message, coscheduling.AnnotationTopologyRequired) {
			t.Errorf("event %q does not name the annotation", ev.Message)
		}
		consistentlyNoneBound(t, time.Second, ns, "job")
	})
}

// TestCoschedulingTopologyAPI checks that the apiserver refuses malformed topology policies.
func TestCoschedulingTopologyAPI(t *testing.T) {
	ns := testNamespace(t)
	cases := map[string]map[string]any{
		"a required key that is not a label key":  {"required": "not a key"},
		"a preferred key that is not a label key": {"preferred": []any{"example.com/rack", "-bad-"}},
		"an unknown field":                        {"required": rackLabel, "strict": true},
	}
	i := 0
	for name, policy := range cases {
		i++
		pg := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": v1alpha1.SchemeGroupVersion.String(), "kind": "PodGroup",
			"metadata": map[string]any{"name": fmt.Sprintf("bad-%d", i), "namespace": ns},
			"spec":     map[string]any{"minMember": int64(2), "topologyPolicy": policy},
		}}
		_, err := dynamicClient(t).Resource(podGroupGVR).Namespace(ns).Create(context.Background(), pg, metav1.CreateOptions{FieldValidation: "Strict"})
		if err == nil {
			t.Errorf("%s: the PodGroup was accepted", name)
			continue
		}
		if !apierrors.IsInvalid(err) && !apierrors.IsBadRequest(err) {
			t.Errorf("%s: error %v, want Invalid or BadRequest", name, err)
		}
		if !strings.Contains(err.Error(), "topologyPolicy") {
			t.Errorf("%s: error %q does not name the field", name, err)
		}
	}
}
