package integration

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	schedulingv1beta1 "k8s.io/api/scheduling/v1beta1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/custom-scheduler/custom-scheduler/pkg/coscheduling/status"
	"github.com/custom-scheduler/custom-scheduler/pkg/gangctl"
)

// TestKubectlGangInTree: kubectl gang shows a job on the in-tree API (a CompositePodGroup, gang of
// minGroupCount 2, over two in-tree PodGroups), placed by the real scheduler with the shipped
// profile: the tree with each group's bound and minimum, the child that blocks it (prefill fits no
// node), then the whole job once a node it fits on is added.
func TestKubectlGangInTree(t *testing.T) {
	startScheduler(t, schedulerConfig(t, adminKubeconfig, shippedProfiles(t)))
	ns := testNamespace(t)
	cosNodes(t, ns+"-small", 3, "4")
	createComposite(t, ns, "serve", "", 2)
	for _, g := range []struct {
		name string
		min  int32
	}{{"prefill", 2}, {"decode", 4}} {
		spec := inTreeSpec(g.min)
		spec.ParentCompositePodGroupName = ptr.To("serve")
		spec.WorkloadRef = &schedulingv1beta1.WorkloadReference{WorkloadName: "serve", TemplateName: g.name}
		createInTreePodGroup(t, ns, g.name, spec)
	}
	createInTreeGang(t, ns, "decode", 4, "2")
	createInTreeGang(t, ns, "prefill", 2, "5")
	// The scheduler has tried: the composite says its subtree could not be placed.
	waitForCompositeCondition(t, ns, "serve", status.ConditionCompositeInitiallyScheduled, metav1.ConditionFalse, schedulingv1beta1.PodGroupReasonUnschedulable)

	get := func(args ...string) string {
		t.Helper()
		out, err := kubectlGang(t, adminKubeconfig, append(args, "-n", ns)...)
		if err != nil {
			t.Fatalf("kubectl gang %s: %v", strings.Join(args, " "), err)
		}
		return cells.ReplaceAllString(normalize(out, ns), " | ")
	}
	// seen logs each output a wait sees once, for a wait that times out.
	seen := map[string]bool{}
	logOnce := func(out string) {
		if !seen[out] {
			seen[out] = true
			t.Logf("kubectl gang says:\n%s", out)
		}
	}
	// The list and any group of the job: the job's tree under its composite, bound/minimum per
	// group, prefill waiting for room (its PodGroupInitiallyScheduled says GangInfeasible).
	blocked := `NAME | PHASE | LIVE | BOUND | WAITING | GATED | MIN | AGE | WAITING FOR
compositepodgroups.scheduling.k8s.io/serve | Pending | 2 | 0 | - | - | 2 | AGE | 0 of minGroupCount 2 groups whole; short: podgroups.scheduling.k8s.io/decode 0/4, podgroups.scheduling.k8s.io/prefill 0/2
├─ podgroups.scheduling.k8s.io/decode | PreScheduling | 4 | 0 | 0 | 0 | 4 | AGE | `
	var out string
	waitFor(t, ns, "kubectl gang get shows the in-tree job, prefill waiting for room", func(context.Context) (bool, error) {
		out = get("get")
		logOnce(out)
		return strings.Contains(out, "└─ podgroups.scheduling.k8s.io/prefill | PreScheduling | 2 | 0 | 0 | 0 | 2 | AGE | room\n"), nil
	})
	if !strings.HasPrefix(out, blocked) {
		t.Errorf("get:\n%s\nwant it to start:\n%s", out, blocked)
	}
	for _, name := range []string{"decode", "podgroups.scheduling.k8s.io/prefill", "serve"} {
		if got := get("get", name); got != out {
			t.Errorf("get %s:\n%s\nwant the job's tree:\n%s", name, got, out)
		}
	}
	wide := get("get", "serve", "-o", "wide")
	for _, kind := range []string{" | CompositePodGroup.scheduling.k8s.io\n", " | PodGroup.scheduling.k8s.io\n"} {
		if !strings.Contains(wide, kind) {
			t.Errorf("get -o wide names no %s:\n%s", strings.TrimSpace(strings.Trim(kind, " |")), wide)
		}
	}

	// explain of the child that is complete of its own names the child that blocks the job.
	explain := get("explain", "decode")
	for _, want := range []string{
		"Job: | compositepodgroups.scheduling.k8s.io/serve, not whole",
		"Blocked: | compositepodgroups.scheduling.k8s.io/serve: 0 of minGroupCount 2 groups whole; it needs 2 more\n",
		"podgroups.scheduling.k8s.io/prefill: 0 of minMember 2 members bound, waiting for Room (room)\n" +
			" | why: PodGroup NS/podgroups.scheduling.k8s.io/prefill needs 2 more members placed at once, but the nodes' free resources fit only 0 of them",
	} {
		if !strings.Contains(explain, want) {
			t.Errorf("explain decode:\n%s\nwant it to say:\n%s", explain, want)
		}
	}
	js, err := kubectlGang(t, adminKubeconfig, "explain", "prefill", "-n", ns, "-o", "json")
	if err != nil {
		t.Fatal(err)
	}
	var s gangctl.Summary
	if err := json.Unmarshal([]byte(js), &s); err != nil {
		t.Fatal(err)
	}
	if s.Name != "podgroups.scheduling.k8s.io/prefill" || s.WaitingFor != gangctl.WaitsForRoom || s.Tree == nil || len(s.Tree.Children) != 2 ||
		s.Tree.Min != 2 || s.Tree.Children[1].Min != 2 || s.Tree.Children[1].Bound != 0 || len(s.Members) != 2 {
		t.Errorf("explain prefill -o json: %s", js)
	}

	// Room for prefill: the job binds whole, and kubectl gang says so.
	createNode(t, ns+"-big", "10", "8Gi", nil)
	waitForBoundMembers(t, ns, inTree("prefill"), 2)
	waitForBoundMembers(t, ns, inTree("decode"), 4)
	whole := `NAME | PHASE | LIVE | BOUND | WAITING | GATED | MIN | AGE | WAITING FOR
compositepodgroups.scheduling.k8s.io/serve | Scheduled | 2 | 2 | - | - | 2 | AGE | 2 of minGroupCount 2 groups whole
├─ podgroups.scheduling.k8s.io/decode | Scheduled | 4 | 4 | 0 | 0 | 4 | AGE | placed
└─ podgroups.scheduling.k8s.io/prefill | Scheduled | 2 | 2 | 0 | 0 | 2 | AGE | placed
`
	var got string
	waitFor(t, ns, "kubectl gang get shows the job whole", func(context.Context) (bool, error) {
		got = get("get", "serve")
		logOnce(got)
		return got == whole, nil
	})
}
