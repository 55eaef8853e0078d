package integration

// Jobs of several roles (gang groups): PodGroups of ours under a composite PodGroup, by annotation
// (see pkg/coscheduling/tree), placed by the real scheduler with the shipped profile.

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	schedulingv1alpha3 "k8s.io/api/scheduling/v1alpha3"
	schedulingv1beta1 "k8s.io/api/scheduling/v1beta1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"

	"github.com/custom-scheduler/custom-scheduler/pkg/apis/scheduling/v1alpha1"
	"github.com/custom-scheduler/custom-scheduler/pkg/coscheduling/podgroup"
	"github.com/custom-scheduler/custom-scheduler/pkg/coscheduling/status"
	"github.com/custom-scheduler/custom-scheduler/pkg/coscheduling/tree"
)

// createGroupIn creates a PodGroup with annotations (a composite, or a child naming its parent).
func createGroupIn(t *testing.T, ns, name string, minMember int64, annotations map[string]string) {
	t.Helper()
	createGroupWithPolicy(t, ns, name, minMember, annotations, "")
}

// createGroupWithPolicy is createGroupIn with spec.topologyPolicy.required (none when "").
func createGroupWithPolicy(t *testing.T, ns, name string, minMember int64, annotations map[string]string, required string) {
	t.Helper()
	var policy map[string]any
	if required != "" {
		policy = map[string]any{"required": required}
	}
	createGroupWithTopology(t, ns, name, minMember, annotations, policy)
}

// createGroupWithTopology is createGroupIn with spec.topologyPolicy (none when nil).
func createGroupWithTopology(t *testing.T, ns, name string, minMember int64, annotations map[string]string, policy map[string]any) {
	t.Helper()
	ann := map[string]any{}
	for k, v := range annotations {
		ann[k] = v
	}
	spec := map[string]any{"minMember": minMember, "scheduleTimeoutSeconds": int64(10)}
	if policy != nil {
		spec["topologyPolicy"] = policy
	}
	pg := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": v1alpha1.SchemeGroupVersion.String(),
		"kind":       "PodGroup",
		"metadata":   map[string]any{"name": name, "namespace": ns, "annotations": ann},
		"spec":       spec,
	}}
	if _, err := dynamicClient(t).Resource(podGroupGVR).Namespace(ns).Create(context.Background(), pg, metav1.CreateOptions{}); err != nil {
		t.Fatalf("creating PodGroup %s/%s: %v", ns, name, err)
	}
}

func child(parent string) map[string]string { return map[string]string{tree.AnnotationParent: parent} }

func gangComposite(minGroupCount int) map[string]string {
	return map[string]string{tree.AnnotationMinGroupCount: fmt.Sprint(minGroupCount)}
}

// TestGangGroupsDisaggregated is the disaggregated-inference job: 2 prefill members (5 CPU) and 4
// decode members (2 CPU) under a gang composite needing both. Written as two flat PodGroups, decode
// binds on the 4-CPU nodes while prefill, which fits none, waits for ever beside it. As one job,
// nothing binds until a node fits prefill; then both bind whole. Decode's members, complete before
// prefill's exist, are held back without holding anything (WaitingForGroups).
func TestGangGroupsDisaggregated(t *testing.T) {
	startScheduler(t, schedulerConfig(t, adminKubeconfig, shippedProfiles(t)))
	ns := testNamespace(t)
	cosNodes(t, ns+"-small", 3, "4")
	watchWhole(t, ns, "prefill", 2, nil)
	watchWhole(t, ns, "decode", 4, nil)

	createGroupIn(t, ns, "serve", 1, gangComposite(2))
	createGroupIn(t, ns, "prefill", 2, child("serve"))
	createGroupIn(t, ns, "decode", 4, child("serve"))
	createGang(t, ns, "decode", 4, "2")
	ev := waitForEvent(t, ns, "decode-0", "WaitingForGroups", schedulerName)
	if !strings.Contains(ev.Message, "prefill: 0 of minMember 2") {
		t.Errorf("WaitingForGroups event %q does not name the short group", ev.Message)
	}
	createGang(t, ns, "prefill", 2, "5")
	// Decode fits the small nodes and prefill fits none: nothing of the job binds.
	consistentlyNoneBound(t, 8*time.Second, ns, "decode", "prefill")
	// The composite's status counts groups and names the short ones.
	waitCompositeStatus(t, ns, "serve", status.ReasonWaitingForGroups, "0 of minGroupCount 2 groups whole; short: decode (PreScheduling, 0 of 4), prefill")

	// A node prefill fits (two members of 5 CPU): the job binds whole.
	createNode(t, ns+"-big", "10", "8Gi", nil)
	waitForBoundMembers(t, ns, "prefill", 2)
	waitForBoundMembers(t, ns, "decode", 4)
	pg := waitCompositeStatus(t, ns, "serve", status.ReasonGroupsWhole, "2 of minGroupCount 2 groups whole")
	if pg.Status.Scheduled != 2 || pg.Status.Phase == v1alpha1.PodGroupPending {
		t.Errorf("composite serve: phase %s, scheduled %d; want 2 groups whole", pg.Status.Phase, pg.Status.Scheduled)
	}
}

// TestGangGroupsFitTogether: each role of the job fits the two 4-CPU nodes alone (decode: 4 members
// of 2 CPU; prefill: 2 of 3 CPU), but not together. The whole-tree check refuses the job before any
// group holds anything: no group's attempt starts and fails with the other's (no member is reserved
// and then rejected, over and over), and the PodGroup says which groups do not fit together. A node
// of 8 CPU makes room: the job binds whole.
func TestGangGroupsFitTogether(t *testing.T) {
	startScheduler(t, schedulerConfig(t, adminKubeconfig, shippedProfiles(t)))
	ns := testNamespace(t)
	cosNodes(t, ns+"-small", 2, "4")
	watchWhole(t, ns, "prefill", 2, nil)
	watchWhole(t, ns, "decode", 4, nil)
	createGroupIn(t, ns, "serve", 1, gangComposite(2))
	createGroupIn(t, ns, "prefill", 2, child("serve"))
	createGroupIn(t, ns, "decode", 4, child("serve"))
	createGang(t, ns, "decode", 4, "2")
	createGang(t, ns, "prefill", 2, "3")

	infeasible := func(e *v1.Event) bool {
		return e.Reason == podgroup.ReasonGangInfeasible && strings.Contains(e.Message, "not together with the groups its job "+ns+"/serve needs")
	}
	rejected := func(e *v1.Event) bool {
		return e.Reason == podgroup.ReasonGangRejected || strings.Contains(e.Message, "rejected with the other groups of its job")
	}
	waitFor(t, ns, "a GangInfeasible event naming the groups that do not fit together", func(ctx context.Context) (bool, error) {
		evs, err := client.CoreV1().Events(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		return slices.ContainsFunc(evs.Items, func(e v1.Event) bool { return infeasible(&e) }), nil
	})
	consistently(t, 8*time.Second, "no group's attempt is started and rejected", func(ctx context.Context) (bool, error) {
		evs, err := client.CoreV1().Events(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		for _, e := range evs.Items {
			if rejected(&e) {
				t.Logf("event %s/%s %s: %s", e.InvolvedObject.Kind, e.InvolvedObject.Name, e.Reason, e.Message)
				return false, nil
			}
		}
		return true, nil
	})
	consistentlyNoneBound(t, time.Second, ns, "decode", "prefill")

	createNode(t, ns+"-big", "8", "8Gi", nil)
	waitForBoundMembers(t, ns, "prefill", 2)
	waitForBoundMembers(t, ns, "decode", 4)
}

// TestGangGroupsPreemptedWhole: a low-priority job of two roles (a and b, 2 members of 2 CPU each,
// under a gang composite needing both) fills two 4-CPU nodes; a high-priority pod of 2 CPU needs room
// on one of them. Evicting one role would make the room but leave the job short of a role: the job is
// evicted whole (its tree is one unit of preemption), and the pod binds.
func TestGangGroupsPreemptedWhole(t *testing.T) {
	ensurePriorityClasses(t)
	startScheduler(t, schedulerConfig(t, adminKubeconfig, shippedProfiles(t)))
	ns := testNamespace(t)
	nodes := caseNodes(t, "gtp", 2)
	createGroupIn(t, ns, "job", 1, gangComposite(2))
	var all []string
	for _, g := range []string{"a", "b"} {
		watchNotPartial(t, ns, g, 2)
		createGroupIn(t, ns, g, 2, child("job"))
		for i, node := range nodes {
			name := fmt.Sprintf("%s-%d", g, i)
			createPod(t, prioPod(ns, name, g, "2", lowPriority, "gtp", node))
			all = append(all, name)
		}
	}
	waitForBoundMembers(t, ns, "a", 2)
	waitForBoundMembers(t, ns, "b", 2)

	createPod(t, prioPod(ns, "hi", "", "2", highPriority, "gtp", nodes[0]))
	waitForPreempted(t, ns, all)
	forceDelete(t, ns, all...)
	waitForPodBound(t, ns, "hi")
}

// TestGangGroupsInOneBlock: the whole job in one block (the composite's required topology), each role
// in one rack (its own). Block b1 has one rack of two 4-CPU nodes: decode (4 members of 2 CPU) fits
// it alone, the job does not. Block b2 has two such racks: decode in one, prefill (2 of 3 CPU) in the
// other. The job binds in b2, each role in one rack; no role goes to b1 alone.
func TestGangGroupsInOneBlock(t *testing.T) {
	startScheduler(t, schedulerConfig(t, adminKubeconfig, shippedProfiles(t)))
	ns := testNamespace(t)
	rack(t, "gg-b1", "gg-r1", 2)
	rack(t, "gg-b2", "gg-r2a", 2)
	rack(t, "gg-b2", "gg-r2b", 2)
	watchWhole(t, ns, "prefill", 2, nil)
	watchWhole(t, ns, "decode", 4, nil)
	createGroupWithPolicy(t, ns, "serve", 1, gangComposite(2), blockLabel)
	createGroupWithPolicy(t, ns, "prefill", 2, child("serve"), rackLabel)
	createGroupWithPolicy(t, ns, "decode", 4, child("serve"), rackLabel)
	createGang(t, ns, "decode", 4, "2")
	createGang(t, ns, "prefill", 2, "3")
	waitForBoundMembers(t, ns, "decode", 4)
	waitForBoundMembers(t, ns, "prefill", 2)
	decode, prefill := racksOf(t, ns, "decode"), racksOf(t, ns, "prefill")
	if len(decode) != 1 || len(prefill) != 1 || decode["gg-r1"] > 0 || prefill["gg-r1"] > 0 {
		t.Errorf("racks: decode %v, prefill %v; want each in one rack of block gg-b2", decode, prefill)
	}
	waitForEvent(t, ns, "decode", podgroup.ReasonDomainChosen, schedulerName)
}

// TestGangGroupsPreferredBlock: the whole job preferably in one block (the composite's
// spec.topologyPolicy.preferred), its roles free of any policy. Block b1 has two 4-CPU nodes (decode,
// 4 members of 2 CPU, fits them alone, the job does not), block b2 four. The job binds in b2, no member
// in b1, though spreading over all six nodes fits too.
func TestGangGroupsPreferredBlock(t *testing.T) {
	startScheduler(t, schedulerConfig(t, adminKubeconfig, shippedProfiles(t)))
	ns := testNamespace(t)
	rack(t, "gp-b1", "gp-r1", 2)
	rack(t, "gp-b2", "gp-r2a", 2)
	rack(t, "gp-b2", "gp-r2b", 2)
	watchWhole(t, ns, "prefill", 2, nil)
	watchWhole(t, ns, "decode", 4, nil)
	createGroupWithTopology(t, ns, "serve", 1, gangComposite(2), map[string]any{"preferred": []any{blockLabel}})
	createGroupIn(t, ns, "prefill", 2, child("serve"))
	createGroupIn(t, ns, "decode", 4, child("serve"))
	createGang(t, ns, "decode", 4, "2")
	createGang(t, ns, "prefill", 2, "3")
	waitForBoundMembers(t, ns, "decode", 4)
	waitForBoundMembers(t, ns, "prefill", 2)
	decode, prefill := racksOf(t, ns, "decode"), racksOf(t, ns, "prefill")
	if decode["gp-r1"] > 0 || prefill["gp-r1"] > 0 {
		t.Errorf("racks: decode %v, prefill %v; want the whole job in block gp-b2 (racks gp-r2a, gp-r2b)", decode, prefill)
	}
}

// waitCompositeStatus waits until the composite PodGroup's Scheduled condition has reason and a
// message containing msg, and returns the PodGroup.
func waitCompositeStatus(t *testing.T, ns, name, reason, msg string) *v1alpha1.PodGroup {
	t.Helper()
	var pg *v1alpha1.PodGroup
	waitFor(t, ns, fmt.Sprintf("composite %s's status %s %q", name, reason, msg), func(ctx context.Context) (bool, error) {
		pg = getPodGroup(t, ns, name)
		c := meta.FindStatusCondition(pg.Status.Conditions, status.ConditionScheduled)
		return c != nil && c.Reason == reason && strings.Contains(c.Message, msg), nil
	})
	return pg
}

// TestGangGroupsKOfN: a job of three replica groups (2 members of 3 CPU each) needing 2 of them, on
// four nodes of 4 CPU: room for two groups. Two groups bind whole and the third binds none; the
// job does not wait for the third, and no failure of the third undoes the other two.
func TestGangGroupsKOfN(t *testing.T) {
	startScheduler(t, schedulerConfig(t, adminKubeconfig, shippedProfiles(t)))
	ns := testNamespace(t)
	cosNodes(t, ns+"-n", 4, "4")
	createGroupIn(t, ns, "lws", 1, gangComposite(2))
	groups := []string{"replica-0", "replica-1", "replica-2"}
	for _, g := range groups {
		watchWhole(t, ns, g, 2, nil)
		createGroupIn(t, ns, g, 2, child("lws"))
		createGang(t, ns, g, 2, "3")
	}
	count := func(ctx context.Context) (whole, empty int, err error) {
		for _, g := range groups {
			n, err := boundMembers(ctx, ns, g)
			if err != nil {
				return 0, 0, err
			}
			switch n {
			case 2:
				whole++
			case 0:
				empty++
			}
		}
		return whole, empty, nil
	}
	waitFor(t, ns, "two replica groups bound whole", func(ctx context.Context) (bool, error) {
		whole, empty, err := count(ctx)
		return whole == 2 && empty == 1, err
	})
	consistently(t, 5*time.Second, "two groups stay whole, the third unbound", func(ctx context.Context) (bool, error) {
		whole, empty, err := count(ctx)
		return whole == 2 && empty == 1, err
	})
}

// TestGangGroupsParentMissing: a group naming a composite that does not exist is held back, with an
// event saying so, and placed once the composite is created.
func TestGangGroupsParentMissing(t *testing.T) {
	startScheduler(t, schedulerConfig(t, adminKubeconfig, shippedProfiles(t)))
	ns := testNamespace(t)
	cosNodes(t, ns+"-n", 2, "4")
	watchWhole(t, ns, "a", 2, nil)
	createGroupIn(t, ns, "a", 2, child("job"))
	createGang(t, ns, "a", 2, "1")
	ev := waitForEvent(t, ns, "a-0", tree.ReasonParentNotFound, schedulerName)
	if !strings.Contains(ev.Message, "names parent job, which does not exist") {
		t.Errorf("%s event %q does not name the missing parent", tree.ReasonParentNotFound, ev.Message)
	}
	consistentlyNoneBound(t, 2*time.Second, ns, "a")
	createGroupIn(t, ns, "job", 1, gangComposite(1))
	waitForBoundMembers(t, ns, "a", 2)
}

// createComposite creates an in-tree CompositePodGroup (scheduling.k8s.io/v1alpha3): a gang of
// minGroupCount children (0: basic), under parent ("" for a root).
func createComposite(t *testing.T, ns, name, parent string, minGroupCount int32) {
	t.Helper()
	if _, err := client.SchedulingV1alpha3().CompositePodGroups(ns).Create(context.Background(), inTreeComposite(ns, name, parent, minGroupCount), metav1.CreateOptions{}); err != nil {
		t.Fatalf("creating CompositePodGroup %s/%s: %v", ns, name, err)
	}
}

// inTreeComposite is createComposite's object (its Workload, "serve", need not exist).
func inTreeComposite(ns, name, parent string, minGroupCount int32) *schedulingv1alpha3.CompositePodGroup {
	c := &schedulingv1alpha3.CompositePodGroup{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: schedulingv1alpha3.CompositePodGroupSpec{WorkloadRef: &schedulingv1alpha3.WorkloadReference{WorkloadName: "serve", TemplateName: name}}}
	if parent != "" {
		c.Spec.ParentCompositePodGroupName = ptr.To(parent)
	}
	if minGroupCount > 0 {
		c.Spec.SchedulingPolicy.Gang = &schedulingv1alpha3.CompositeGangSchedulingPolicy{MinGroupCount: minGroupCount}
	} else {
		c.Spec.SchedulingPolicy.Basic = &schedulingv1alpha3.CompositeBasicSchedulingPolicy{}
	}
	return c
}

// inTreeChild is the spec of an in-tree PodGroup of minCount (0: basic) under the composite parent.
func inTreeChild(minCount int32, parent, name string) schedulingv1beta1.PodGroupSpec {
	spec := inTreeSpec(minCount)
	spec.ParentCompositePodGroupName = ptr.To(parent)
	spec.WorkloadRef = &schedulingv1beta1.WorkloadReference{WorkloadName: "serve", TemplateName: name}
	return spec
}

// TestGangGroupsInTree is the disaggregated job on the in-tree API: a CompositePodGroup (gang,
// minGroupCount 2) over two in-tree PodGroups naming it in spec.parentCompositePodGroupName.
func TestGangGroupsInTree(t *testing.T) {
	startScheduler(t, schedulerConfig(t, adminKubeconfig, shippedProfiles(t)))
	ns := testNamespace(t)
	cosNodes(t, ns+"-small", 3, "4")
	watchWhole(t, ns, inTree("prefill"), 2, nil)
	watchWhole(t, ns, inTree("decode"), 4, nil)

	createComposite(t, ns, "serve", "", 2)
	for _, g := range []struct {
		name string
		min  int32
	}{{"prefill", 2}, {"decode", 4}} {
		createInTreePodGroup(t, ns, g.name, inTreeChild(g.min, "serve", g.name))
	}
	createInTreeGang(t, ns, "decode", 4, "2")
	createInTreeGang(t, ns, "prefill", 2, "5")
	consistentlyNoneBound(t, 8*time.Second, ns, inTree("decode"), inTree("prefill"))
	// The composite says its subtree could not be placed (prefill fits no node), naming the group.
	c := waitForCompositeCondition(t, ns, "serve", status.ConditionCompositeInitiallyScheduled, metav1.ConditionFalse, schedulingv1beta1.PodGroupReasonUnschedulable)
	if !strings.Contains(c.Message, "prefill: GangInfeasible") {
		t.Errorf("CompositePodGroupInitiallyScheduled message %q, want prefill's GangInfeasible", c.Message)
	}
	createNode(t, ns+"-big", "10", "8Gi", nil)
	waitForBoundMembers(t, ns, inTree("prefill"), 2)
	waitForBoundMembers(t, ns, inTree("decode"), 4)
	c = waitForCompositeCondition(t, ns, "serve", status.ConditionCompositeInitiallyScheduled, metav1.ConditionTrue, status.ReasonScheduled)
	if c.Message != "2 of minGroupCount 2 groups whole" {
		t.Errorf("CompositePodGroupInitiallyScheduled message %q", c.Message)
	}
}

// waitForCompositeCondition waits until the in-tree CompositePodGroup's condition of the type has the
// status and reason, and returns it.
func waitForCompositeCondition(t *testing.T, ns, name, condType string, want metav1.ConditionStatus, reason string) metav1.Condition {
	t.Helper()
	var found metav1.Condition
	waitFor(t, ns, fmt.Sprintf("CompositePodGroup %s/%s to report %s=%s reason %s", ns, name, condType, want, reason), func(ctx context.Context) (bool, error) {
		cpg, err := client.SchedulingV1alpha3().CompositePodGroups(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		c := meta.FindStatusCondition(cpg.Status.Conditions, condType)
		if c != nil && c.Status == want && c.Reason == reason {
			found = *c
			return true, nil
		}
		return false, nil
	})
	return found
}
