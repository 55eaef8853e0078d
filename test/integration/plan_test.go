package integration

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/component-base/metrics/legacyregistry"
	st "k8s.io/kubernetes/pkg/scheduler/testing"

	"github.com/custom-scheduler/custom-scheduler/pkg/apis/scheduling/v1alpha1"
	"github.com/custom-scheduler/custom-scheduler/test/fakemetrics"
)

// planProfile is coschedulingProfiles under another scheduler name, with extra Coscheduling args
// (YAML indented by ten spaces) and extra plugins (indented by six).
func planProfile(name, plugins, args string) string {
	p := strings.Replace(coschedulingProfiles, "schedulerName: custom-scheduler", "schedulerName: "+name, 1)
	p = strings.Replace(p, "    pluginConfig:\n", plugins+"    pluginConfig:\n", 1)
	return p + args
}

// planCounter reads custom_scheduler_coscheduling_placement_plan_members_total for a profile and
// outcome from the in-process registry.
func planCounter(t *testing.T, profile, outcome string) float64 {
	t.Helper()
	families, err := legacyregistry.DefaultGatherer.Gather()
	if err != nil {
		t.Fatalf("gathering metrics: %v", err)
	}
	for _, f := range families {
		if f.GetName() != "custom_scheduler_coscheduling_placement_plan_members_total" {
			continue
		}
		for _, m := range f.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			if labels["profile"] == profile && labels["outcome"] == outcome {
				return m.GetCounter().GetValue()
			}
		}
	}
	return 0
}

// planGang creates a PodGroup of minMember n and its n members of profile, each asking for cpu and
// kept to the nodes labelled plan=<set>.
func planGang(t *testing.T, ns, group, profile, set string, n int, cpu string) {
	t.Helper()
	createPodGroup(t, ns, group, int64(n), 0)
	for i := range n {
		p := gangPod(ns, fmt.Sprintf("%s-%d", group, i), group, cpu)
		p.Spec.SchedulerName = profile
		p.Spec.NodeSelector = map[string]string{"plan": set}
		createPod(t, p)
	}
}

// nodesOf counts the group's bound members per node.
func nodesOf(t *testing.T, ns, group string) map[string]int {
	t.Helper()
	pods, err := client.CoreV1().Pods(ns).List(context.Background(), metav1.ListOptions{LabelSelector: v1alpha1.PodGroupLabel + "=" + group})
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]int{}
	for _, p := range pods.Items {
		if p.Spec.NodeName != "" {
			out[p.Spec.NodeName]++
		}
	}
	return out
}

// fillNode binds a plain pod asking for cpu to node directly (no scheduler involved).
func fillNode(t *testing.T, ns, node, cpu string) {
	t.Helper()
	createPod(t, st.MakePod().Namespace(ns).Name("filler-"+node).Node(node).
		Req(map[v1.ResourceName]string{v1.ResourceCPU: cpu}).Container("pause").Obj())
}

// TestPlacementPlan runs gangs through the shipped plugin path with the plan on (the default) and off:
// with it, a gang fills the fullest nodes that hold it, in the plan's order, and each member's cycle is
// narrowed to planned nodes; off, the profile's scores spread it. A planned node that a Filter the plan
// does not model rejects (LoadAware, on measured load) sends the member back to every node at once,
// and the gang is still placed whole.
func TestPlacementPlan(t *testing.T) {
	// Coscheduling is the queue sort plugin, so its args are the same in every profile of a
	// scheduler: the plan is on or off per scheduler. The two runs use two schedulers in turn.
	const profile = "custom-scheduler"

	// Four 4-CPU nodes per set; the first has 3 CPUs taken by a plain pod.
	nodeSet := func(ns, set string) {
		for _, n := range []string{"a", "b", "c", "d"} {
			createNode(t, set+"-"+n, "4", "8Gi", map[string]string{"plan": set})
		}
		fillNode(t, ns, set+"-a", "3")
	}

	t.Run("the gang fills the fullest nodes that hold it", func(t *testing.T) {
		startScheduler(t, schedulerConfig(t, adminKubeconfig, coschedulingProfiles))
		ns := testNamespace(t)
		nodeSet(ns, "plan1")
		before := planCounter(t, profile, "placed")
		watchWhole(t, ns, "job", 5, nil)
		planGang(t, ns, "job", profile, "plan1", 5, "1")
		waitForBoundMembers(t, ns, "job", 5)
		got := nodesOf(t, ns, "job")
		if fmt.Sprint(got) != "map[plan1-a:1 plan1-b:4]" {
			t.Errorf("members per node %v, want plan1-a:1 (its last CPU) and plan1-b:4", got)
		}
		if n := planCounter(t, profile, "placed") - before; n != 5 {
			t.Errorf("members placed through the plan: %v, want 5", n)
		}
		t.Logf("plan on: %d nodes for 5 members %v", len(got), got)
	})

	t.Run("with the plan off the profile's scores spread the gang", func(t *testing.T) {
		startScheduler(t, schedulerConfig(t, adminKubeconfig, planProfile(profile, "", "          placementPlan: {enabled: false}\n")))
		ns := testNamespace(t)
		nodeSet(ns, "plan2")
		watchWhole(t, ns, "job", 5, nil)
		before := planCounter(t, profile, "placed") + planCounter(t, profile, "fallback")
		planGang(t, ns, "job", profile, "plan2", 5, "1")
		waitForBoundMembers(t, ns, "job", 5)
		got := nodesOf(t, ns, "job")
		if len(got) < 3 {
			t.Errorf("members per node %v: the default scores (least allocated) should have spread them over at least 3 nodes", got)
		}
		if n := planCounter(t, profile, "placed") + planCounter(t, profile, "fallback") - before; n != 0 {
			t.Errorf("the plan was used %v times in a profile with it off", n)
		}
		t.Logf("plan off: %d nodes for 5 members %v", len(got), got)
	})
}

// TestPlacementPlanFallsBack: the plan knows requests, not load. With one candidate node, the first
// member is offered the tightest node, which LoadAware rejects as hot; the member is retried at once on
// every node, the plan is dropped for the attempt, and the gang lands whole on the cool nodes.
func TestPlacementPlanFallsBack(t *testing.T) {
	ms := useMetricsServer(t)
	ns := testNamespace(t)
	for _, n := range []string{"a", "b", "c"} {
		createNode(t, "planla-"+n, "4", "8Gi", map[string]string{"plan": "planla"})
	}
	fillNode(t, ns, "planla-a", "2")
	ms.SetNode("planla-a", fakemetrics.NodeUsage{CPU: "3900m", Memory: "1Gi"})
	ms.SetNode("planla-b", fakemetrics.NodeUsage{CPU: "400m", Memory: "1Gi"})
	ms.SetNode("planla-c", fakemetrics.NodeUsage{CPU: "400m", Memory: "1Gi"})
	const profile = "custom-scheduler"
	loadAware := `      multiPoint:
        enabled:
          - name: LoadAware
`
	p := planProfile(profile, loadAware, "          placementPlan: {candidateNodes: 1}\n") + `      - name: LoadAware
        args:
          metricsRefreshIntervalSeconds: 1
`
	startScheduler(t, schedulerConfig(t, adminKubeconfig, p))
	waitForFetches(t, profile)

	before := planCounter(t, profile, "fallback")
	watchWhole(t, ns, "job", 3, nil)
	start := time.Now()
	planGang(t, ns, "job", profile, "planla", 3, "1")
	waitForBoundMembers(t, ns, "job", 3)
	got := nodesOf(t, ns, "job")
	if got["planla-a"] != 0 {
		t.Errorf("members per node %v: none may be on the hot planla-a", got)
	}
	// One: the first member was offered planla-a alone; after its miss the attempt makes no new plan.
	if n := planCounter(t, profile, "fallback") - before; n != 1 {
		t.Errorf("fallbacks counted: %v, want 1", n)
	}
	events, err := client.CoreV1().Events(ns).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var said []string
	for _, e := range events.Items {
		if e.Reason == "FailedScheduling" {
			said = append(said, e.InvolvedObject.Name+": "+e.Message)
		}
	}
	if s := strings.Join(said, "\n"); !strings.Contains(s, "fits none of its planned nodes (planla-a: ") || !strings.Contains(s, "retried at once without the plan") {
		t.Errorf("no FailedScheduling event says the plan missed and why; the events:\n%s", s)
	}
	t.Logf("gang bound %v after its members were created, on %v", time.Since(start).Round(100*time.Millisecond), got)
}
