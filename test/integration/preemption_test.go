package integration

import (
	"context"
	"fmt"
	"os"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/yaml"

	"github.com/custom-scheduler/custom-scheduler/pkg/apis/scheduling/v1alpha1"
	"github.com/custom-scheduler/custom-scheduler/pkg/coscheduling/podgroup"
)

// shippedProfiles is the profile list of manifests/base/scheduler-config.yaml, the configuration the
// deployment runs, indented for configTemplate.
func shippedProfiles(t testing.TB) string {
	t.Helper()
	data, err := os.ReadFile("../../manifests/base/scheduler-config.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var cfg map[string]any
	if err := yaml.Unmarshal(data, &cfg); err != nil {
		t.Fatalf("parsing the shipped configuration: %v", err)
	}
	out, err := yaml.Marshal(cfg["profiles"])
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimRight(string(out), "\n"), "\n")
	for i := range lines {
		lines[i] = "  " + lines[i]
	}
	return strings.Join(lines, "\n") + "\n"
}

// Priority classes of the preemption tests.
const (
	lowPriority       = "custom-scheduler-test-low"
	highPriority      = "custom-scheduler-test-high"
	highNeverPriority = "custom-scheduler-test-high-never"
)

func ensurePriorityClasses(t *testing.T) {
	t.Helper()
	never := v1.PreemptNever
	for _, pc := range []*schedulingv1.PriorityClass{
		{ObjectMeta: metav1.ObjectMeta{Name: lowPriority}, Value: 10},
		{ObjectMeta: metav1.ObjectMeta{Name: highPriority}, Value: 1000},
		{ObjectMeta: metav1.ObjectMeta{Name: highNeverPriority}, Value: 1000, PreemptionPolicy: &never},
	} {
		if _, err := client.SchedulingV1().PriorityClasses().Create(context.Background(), pc, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatalf("creating PriorityClass %s: %v", pc.Name, err)
		}
	}
}

// caseLabel confines a test case's pods to its own nodes (nodes of other tests stay in the cluster).
const caseLabel = "custom-scheduler.test/preemption-case"

// caseNodes creates n nodes <prefix>-<i> of 4 CPUs for a case.
func caseNodes(t *testing.T, prefix string, n int) []string {
	t.Helper()
	names := make([]string, n)
	for i := range n {
		names[i] = fmt.Sprintf("%s-%d", prefix, i)
		createNode(t, names[i], "4", "8Gi", map[string]string{caseLabel: prefix, v1.LabelHostname: names[i]})
	}
	return names
}

// prioPod is a pod of the case's nodes (node "" lets the scheduler choose among them; otherwise it is
// pinned there), with a priority class and a CPU request; group "" for a plain pod.
func prioPod(ns, name, group, cpu, class, caseName, node string) *v1.Pod {
	p := gangPod(ns, name, group, cpu)
	if group == "" {
		delete(p.Labels, v1alpha1.PodGroupLabel)
	}
	p.Spec.PriorityClassName = class
	p.Spec.NodeSelector = map[string]string{caseLabel: caseName}
	if node != "" {
		p.Spec.NodeSelector[v1.LabelHostname] = node
	}
	return p
}

// runGang creates a PodGroup of minMember n and its n members, pinned to nodes[i % len(nodes)] when
// nodes is not empty, and returns the member names. A watch fails the test if a bind ever leaves the
// gang partially bound (see watchNotPartial); which pods were evicted, each case checks itself.
func runGang(t *testing.T, ns, group string, n int, cpu, class, caseName string, nodes []string) []string {
	t.Helper()
	watchNotPartial(t, ns, group, n)
	createPodGroup(t, ns, group, int64(n), 0)
	names := make([]string, n)
	for i := range n {
		names[i] = fmt.Sprintf("%s-%d", group, i)
		node := ""
		if len(nodes) > 0 {
			node = nodes[i%len(nodes)]
		}
		createPod(t, prioPod(ns, names[i], group, cpu, class, caseName, node))
	}
	return names
}

// preempted lists the namespace's pods that the scheduler is terminating by preemption (a
// DisruptionTarget condition with reason PreemptionByScheduler, and a deletionTimestamp).
func preempted(ctx context.Context, ns string) ([]string, error) {
	pods, err := client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	var out []string
	for _, p := range pods.Items {
		if p.DeletionTimestamp == nil {
			continue
		}
		for _, c := range p.Status.Conditions {
			if c.Type == v1.DisruptionTarget && c.Status == v1.ConditionTrue && c.Reason == v1.PodReasonPreemptionByScheduler {
				out = append(out, p.Name)
			}
		}
	}
	sort.Strings(out)
	return out, nil
}

// waitForPreempted waits until exactly want (sorted) are terminating by preemption, checks that it
// stays so, and lets them go as a kubelet would.
func waitForPreempted(t *testing.T, ns string, want []string) {
	t.Helper()
	sort.Strings(want)
	var got []string
	waitFor(t, ns, fmt.Sprintf("pods %v to be preempted", want), func(ctx context.Context) (bool, error) {
		var err error
		got, err = preempted(ctx, ns)
		return len(got) >= len(want), err
	})
	consistently(t, 2*time.Second, fmt.Sprintf("exactly %v preempted", want), func(ctx context.Context) (bool, error) {
		var err error
		got, err = preempted(ctx, ns)
		return slices.Equal(got, want), err
	})
}

// consistentlyNonePreempted checks that nothing is preempted in the namespace for a while.
func consistentlyNonePreempted(t *testing.T, ns string) {
	t.Helper()
	consistently(t, 3*time.Second, "no pod preempted", func(ctx context.Context) (bool, error) {
		got, err := preempted(ctx, ns)
		return len(got) == 0, err
	})
}

// nominated returns the pods' status.nominatedNodeName.
func nominated(t *testing.T, ns string, names []string) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, n := range names {
		p, err := client.CoreV1().Pods(ns).Get(context.Background(), n, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		out[n] = p.Status.NominatedNodeName
	}
	return out
}

func gangNames(group string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("%s-%d", group, i)
	}
	return out
}

// TestGangPreemption runs the shipped profile (Coscheduling's gang-aware preemption in place of
// DefaultPreemption) against the real apiserver. No kubelet runs: preempted pods stay terminating
// until the test deletes them, as a kubelet confirming their end would.
func TestGangPreemption(t *testing.T) {
	ensurePriorityClasses(t)
	startScheduler(t, schedulerConfig(t, adminKubeconfig, shippedProfiles(t)))

	t.Run("a high-priority gang evicts a low-priority gang whole, keeps the room and binds whole", func(t *testing.T) {
		ns := testNamespace(t)
		nodes := caseNodes(t, "pa", 4)
		lo := runGang(t, ns, "lo", 4, "3", lowPriority, "pa", nil)
		waitForBoundMembers(t, ns, "lo", 4)

		hi := runGang(t, ns, "hi", 4, "3", highPriority, "pa", nil)
		waitForPreempted(t, ns, lo)
		consistentlyNotPartial(t, ns, "lo", 4)
		waitFor(t, ns, "every member of hi nominated to a node of its own", func(context.Context) (bool, error) {
			seen := map[string]bool{}
			for _, node := range nominated(t, ns, hi) {
				if node == "" || seen[node] {
					return false, nil
				}
				seen[node] = true
			}
			return len(seen) == len(nodes), nil
		})
		waitForEvent(t, ns, "hi", podgroup.ReasonPreempting, schedulerName)
		waitForEvent(t, ns, "lo-0", "Preempted", schedulerName)
		waitForPodGroupCondition(t, ns, "hi", podgroup.ReasonPreempting)

		// A lower-priority pod arriving while the victims terminate does not take their room.
		createPod(t, prioPod(ns, "latecomer", "", "3", lowPriority, "pa", ""))
		consistentlyNoneBound(t, time.Second, ns, "hi")
		forceDelete(t, ns, lo...)
		waitForBoundMembers(t, ns, "hi", 4)
		consistentlyNotPartial(t, ns, "hi", 4)
		if p, err := client.CoreV1().Pods(ns).Get(context.Background(), "latecomer", metav1.GetOptions{}); err != nil || p.Spec.NodeName != "" {
			t.Errorf("the lower-priority latecomer took the preempted room (node %q, err %v)", p.Spec.NodeName, err)
		}
	})

	t.Run("of ten small low-priority gangs only the three needed are evicted, each whole", func(t *testing.T) {
		ns := testNamespace(t)
		nodes := caseNodes(t, "pb", 5)
		for k := range 10 {
			// Two 2-member gangs of 1-CPU pods fill each node.
			runGang(t, ns, fmt.Sprintf("lo%d", k), 2, "1", lowPriority, "pb", []string{nodes[k/2]})
		}
		for k := range 10 {
			waitForBoundMembers(t, ns, fmt.Sprintf("lo%d", k), 2)
		}
		runGang(t, ns, "hi", 3, "2", highPriority, "pb", nil)
		var got []string
		waitFor(t, ns, "three gangs preempted", func(ctx context.Context) (bool, error) {
			var err error
			got, err = preempted(ctx, ns)
			return len(got) >= 6, err
		})
		consistently(t, 2*time.Second, "exactly three whole gangs preempted", func(ctx context.Context) (bool, error) {
			var err error
			got, err = preempted(ctx, ns)
			return len(got) == 6, err
		})
		gangs := map[string]int{}
		for _, name := range got {
			gangs[name[:strings.LastIndex(name, "-")]]++
		}
		for g, n := range gangs {
			if n != 2 {
				t.Errorf("gang %s lost %d of its 2 members", g, n)
			}
		}
		if len(gangs) != 3 {
			t.Errorf("preempted %v: %d gangs, want 3", got, len(gangs))
		}
		for k := range 10 {
			consistentlyNotPartial(t, ns, fmt.Sprintf("lo%d", k), 2)
		}
		forceDelete(t, ns, got...)
		waitForBoundMembers(t, ns, "hi", 3)
		consistentlyNotPartial(t, ns, "hi", 3)
	})

	t.Run("a plain high-priority pod evicts whole gangs, never a single member", func(t *testing.T) {
		ns := testNamespace(t)
		nodes := caseNodes(t, "pc", 2)
		// Gangs a and b each have one 2-CPU member on each node: any node's room costs both gangs.
		a := runGang(t, ns, "a", 2, "2", lowPriority, "pc", nodes)
		b := runGang(t, ns, "b", 2, "2", lowPriority, "pc", nodes)
		waitForBoundMembers(t, ns, "a", 2)
		waitForBoundMembers(t, ns, "b", 2)
		createPod(t, prioPod(ns, "big", "", "4", highPriority, "pc", ""))
		waitForPreempted(t, ns, append(slices.Clone(a), b...))
		consistentlyNotPartial(t, ns, "a", 2)
		consistentlyNotPartial(t, ns, "b", 2)
		forceDelete(t, ns, append(a, b...)...)
		waitForPodBound(t, ns, "big")
	})

	t.Run("a gang that could not fit even on empty nodes evicts nothing", func(t *testing.T) {
		ns := testNamespace(t)
		caseNodes(t, "pd", 2)
		runGang(t, ns, "lo", 2, "3", lowPriority, "pd", nil)
		waitForBoundMembers(t, ns, "lo", 2)
		hi := runGang(t, ns, "hi", 2, "6", highPriority, "pd", nil)
		msg := waitForPodUnschedulable(t, ns, hi[0])
		consistentlyNonePreempted(t, ns)
		waitFor(t, ns, "the members to say preemption cannot help", func(ctx context.Context) (bool, error) {
			p, err := client.CoreV1().Pods(ns).Get(ctx, hi[0], metav1.GetOptions{})
			if err != nil {
				return false, err
			}
			for _, c := range p.Status.Conditions {
				if c.Type == v1.PodScheduled {
					msg = c.Message
				}
			}
			return strings.Contains(msg, "does not fit even if all"), nil
		})
		consistentlyNotPartial(t, ns, "lo", 2)
	})

	t.Run("preemptionPolicy Never and equal priority evict nothing", func(t *testing.T) {
		ns := testNamespace(t)
		caseNodes(t, "pe", 2)
		runGang(t, ns, "lo", 2, "3", lowPriority, "pe", nil)
		waitForBoundMembers(t, ns, "lo", 2)
		never := runGang(t, ns, "never", 2, "3", highNeverPriority, "pe", nil)
		peer := runGang(t, ns, "peer", 2, "3", lowPriority, "pe", nil)
		waitForPodUnschedulable(t, ns, never[0])
		waitForPodUnschedulable(t, ns, peer[0])
		consistentlyNonePreempted(t, ns)
		consistentlyNoneBound(t, time.Second, ns, "never", "peer")
	})

	t.Run("a PDB-protected victim is avoided when another set works", func(t *testing.T) {
		ns := testNamespace(t)
		nodes := caseNodes(t, "pf", 2)
		guarded := prioPod(ns, "guarded", "", "4", lowPriority, "pf", nodes[0])
		guarded.Labels["app"] = "db"
		createPod(t, guarded)
		createPod(t, prioPod(ns, "unguarded", "", "4", lowPriority, "pf", nodes[1]))
		waitForPodBound(t, ns, "guarded")
		waitForPodBound(t, ns, "unguarded")
		// No disruption controller runs here: the budget's status allows no disruption.
		one := intstr.FromInt32(1)
		if _, err := client.PolicyV1().PodDisruptionBudgets(ns).Create(context.Background(), &policyv1.PodDisruptionBudget{
			ObjectMeta: metav1.ObjectMeta{Name: "db"},
			Spec:       policyv1.PodDisruptionBudgetSpec{MinAvailable: &one, Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "db"}}},
		}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Second) // let the scheduler's PDB informer see it
		runGang(t, ns, "hi", 1, "4", highPriority, "pf", nil)
		waitForPreempted(t, ns, []string{"unguarded"})
		forceDelete(t, ns, "unguarded")
		if node := waitForPodBound(t, ns, "hi-0"); node != nodes[1] {
			t.Errorf("hi-0 bound to %s, want %s", node, nodes[1])
		}
	})

	t.Run("a gang waiting at Permit is preempted in memory: released whole, nothing deleted", func(t *testing.T) {
		ns := testNamespace(t)
		caseNodes(t, "ph", 2)
		createPodGroup(t, ns, "lo", 2, 0)
		for i := range 2 {
			p := prioPod(ns, fmt.Sprintf("lo-%d", i), "lo", "3", lowPriority, "ph", "")
			if i == 1 {
				// It exists (the group is complete) but is held back: lo-0 is reserved and waits.
				hold(p)
			}
			createPod(t, p)
		}
		waitForMembersWaiting(t, ns, "lo", 1)
		runGang(t, ns, "hi", 2, "3", highPriority, "ph", nil)
		waitForBoundMembers(t, ns, "hi", 2)
		consistentlyNotPartial(t, ns, "hi", 2)
		consistentlyNoneBound(t, time.Second, ns, "lo")
		p, err := client.CoreV1().Pods(ns).Get(context.Background(), "lo-0", metav1.GetOptions{})
		if err != nil || p.DeletionTimestamp != nil {
			t.Errorf("lo-0 was deleted (err %v); a waiting victim is preempted in memory", err)
		}
		waitForEvent(t, ns, "lo-0", "Preempted", schedulerName)
	})

	t.Run("deleting a preempting gang's PodGroup drops its members' nominations", func(t *testing.T) {
		ns := testNamespace(t)
		caseNodes(t, "pg", 2)
		lo := runGang(t, ns, "lo", 2, "3", lowPriority, "pg", nil)
		waitForBoundMembers(t, ns, "lo", 2)
		hi := runGang(t, ns, "hi", 2, "3", highPriority, "pg", nil)
		waitForPreempted(t, ns, lo)
		waitFor(t, ns, "hi's members nominated", func(context.Context) (bool, error) {
			for _, node := range nominated(t, ns, hi) {
				if node == "" {
					return false, nil
				}
			}
			return true, nil
		})
		if err := dynamicClient(t).Resource(podGroupGVR).Namespace(ns).Delete(context.Background(), "hi", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		waitFor(t, ns, "hi's nominations dropped", func(context.Context) (bool, error) {
			for _, node := range nominated(t, ns, hi) {
				if node != "" {
					return false, nil
				}
			}
			return true, nil
		})
		// The room is free again for pods of any priority.
		forceDelete(t, ns, lo...)
		createPod(t, prioPod(ns, "after", "", "3", lowPriority, "pg", ""))
		waitForPodBound(t, ns, "after")
	})

	counters := coschedulingCounters(t, "custom_scheduler_coscheduling_preemption_victim_gangs_total")
	t.Logf("victim gangs by preemptor: %v; attempts: %v", counters, coschedulingCounters(t, "custom_scheduler_coscheduling_preemption_attempts_total"))
	if counters["preemptor=gang"] < 6 || counters["preemptor=pod"] < 2 {
		t.Errorf("victim gang counters %v: want at least 6 by gangs and 2 by pods", counters)
	}
}
