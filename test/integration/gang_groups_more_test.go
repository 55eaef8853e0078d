package integration

// Jobs of several roles (gang groups) with devices, and across a scheduler failover.

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/custom-scheduler/custom-scheduler/pkg/apis/scheduling/v1alpha1"
	"github.com/custom-scheduler/custom-scheduler/pkg/coscheduling/podgroup"
	"github.com/custom-scheduler/custom-scheduler/pkg/coscheduling/tree"
)

// twoRoles is the tree of a job named name of two roles a and b, each needing min members, under a
// gang composite needing both (for watchTrees).
func twoRoles(name, a, b string, min int) *tnode {
	return &tnode{name: name, composite: true, min: 2, children: []*tnode{{name: a, min: min}, {name: b, min: min}}}
}

// infeasibleTogether waits for a GangInfeasible event on a PodGroup of ns saying it fits alone but not
// with the groups its job needs, and returns it.
func infeasibleTogether(t *testing.T, ns, job string) v1.Event {
	t.Helper()
	var found v1.Event
	waitFor(t, ns, "a GangInfeasible event naming the groups that do not fit together", func(ctx context.Context) (bool, error) {
		evs, err := client.CoreV1().Events(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		i := slices.IndexFunc(evs.Items, func(e v1.Event) bool {
			return e.InvolvedObject.Kind == "PodGroup" && e.Reason == podgroup.ReasonGangInfeasible &&
				strings.Contains(e.Message, "not together with the groups its job "+ns+"/"+job+" needs")
		})
		if i >= 0 {
			found = evs.Items[i]
		}
		return i >= 0, nil
	})
	return found
}

// allocatedClaims counts the namespace's ResourceClaims with an allocation.
func allocatedClaims(ctx context.Context, ns string) (int, error) {
	claims, err := client.ResourceV1().ResourceClaims(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return 0, err
	}
	n := 0
	for _, c := range claims.Items {
		if c.Status.Allocation != nil {
			n++
		}
	}
	return n, nil
}

// TestGangGroupsWithDevices: a job of two roles under a gang composite needing both: gpu (2 members
// of 3 CPU, each a device from a ResourceClaimTemplate) and cpu (2 members of 3 CPU, no device). Two
// device nodes of 4 CPU and one device each fit either role alone, not both. Nothing of the job binds
// and no claim is allocated; the PodGroup says the roles do not fit together. A CPU node of 8 CPU
// makes room: both roles bind whole, gpu on the device nodes. The tree invariant is watched throughout.
func TestGangGroupsWithDevices(t *testing.T) {
	needControllerManager(t)
	ns := testNamespace(t)
	e := newDRAEnv(t, ns, false)
	e.claimTemplate(t, "gpu")
	for i := range 2 {
		e.node(t, fmt.Sprintf("%s-gpu-%d", ns, i), "4", "job", 1, nil)
	}
	startScheduler(t, schedulerConfig(t, adminKubeconfig, shippedProfiles(t)))

	watchWhole(t, ns, "gpu", 2, nil)
	watchWhole(t, ns, "cpu", 2, nil)
	watchTrees(t, ns, []*tnode{twoRoles("serve", "gpu", "cpu", 2)})
	createGroupIn(t, ns, "serve", 1, gangComposite(2))
	createGroupIn(t, ns, "gpu", 2, child("serve"))
	createGroupIn(t, ns, "cpu", 2, child("serve"))
	for i := range 2 {
		createPod(t, e.claimPod(fmt.Sprintf("gpu-%d", i), "gpu", "3", "job", "gpu"))
		createPod(t, e.pod(fmt.Sprintf("cpu-%d", i), "cpu", "3", "job"))
	}

	ev := infeasibleTogether(t, ns, "serve")
	t.Logf("%s on PodGroup %s: %s", ev.Reason, ev.InvolvedObject.Name, ev.Message)
	consistently(t, 8*time.Second, "no member of the job is bound and no claim is allocated", func(ctx context.Context) (bool, error) {
		for _, g := range []string{"gpu", "cpu"} {
			if n, err := boundMembers(ctx, ns, g); err != nil || n != 0 {
				return false, err
			}
		}
		n, err := allocatedClaims(ctx, ns)
		return n == 0, err
	})

	cpuNode := ns + "-cpu"
	e.node(t, cpuNode, "8", "job", 0, nil)
	for name, node := range waitForDRAGangBound(t, ns, "gpu", 2) {
		if node == cpuNode {
			t.Errorf("gpu member %s is on the CPU node %s", name, node)
		}
	}
	waitForBoundMembers(t, ns, "cpu", 2)
	if pods, err := client.CoreV1().Pods(ns).List(context.Background(), metav1.ListOptions{}); err == nil {
		for _, p := range pods.Items {
			t.Logf("%s on %s", p.Name, p.Spec.NodeName)
		}
	}
	if n, err := allocatedClaims(context.Background(), ns); err != nil || n != 2 {
		t.Errorf("%d claims allocated (%v), want 2 (one per gpu member)", n, err)
	}
	consistently(t, 2*time.Second, "both roles stay bound whole", func(ctx context.Context) (bool, error) {
		for _, g := range []string{"gpu", "cpu"} {
			if n, err := groupLiveBound(ctx, ns, g); err != nil || n != 2 {
				return false, err
			}
		}
		return true, nil
	})
}

// TestGangGroupsPlannedTogether: a job's roles are planned together. Role any (2 members of 3 CPU,
// any node) goes first (its PodGroup is older); role onx (2 members of 3 CPU) may use only the two
// 4-CPU nodes of pool x, and one 8-CPU node holds any. Planned alone, any took the tightest nodes,
// x's, onx found no room, and the job was rejected and backed off (1 to 3 rounds, 10 to 30 s): the
// job must bind whole at its first attempt.
func TestGangGroupsPlannedTogether(t *testing.T) {
	startScheduler(t, schedulerConfig(t, adminKubeconfig, shippedProfiles(t)))
	ns := testNamespace(t)
	x := map[string]string{"custom-scheduler.test/role": ns + "-x"}
	createNode(t, ns+"-x-0", "4", "8Gi", x)
	createNode(t, ns+"-x-1", "4", "8Gi", x)
	createNode(t, ns+"-big", "8", "8Gi", nil)
	watchWhole(t, ns, "any", 2, nil)
	watchWhole(t, ns, "onx", 2, nil)
	watchTrees(t, ns, []*tnode{twoRoles("job", "any", "onx", 2)})
	createGroupIn(t, ns, "job", 1, gangComposite(2))
	createGroupIn(t, ns, "any", 2, child("job"))
	time.Sleep(1100 * time.Millisecond) // any's PodGroup is older: its members go first
	createGroupIn(t, ns, "onx", 2, child("job"))
	start := time.Now()
	for i := range 2 {
		p := gangPod(ns, fmt.Sprintf("onx-%d", i), "onx", "3")
		p.Spec.NodeSelector = x
		createPod(t, p)
	}
	createGang(t, ns, "any", 2, "3")
	waitForBoundMembers(t, ns, "any", 2)
	waitForBoundMembers(t, ns, "onx", 2)
	t.Logf("the job bound whole %v after its pods were created", time.Since(start).Round(time.Millisecond))
	evs, err := client.CoreV1().Events(ns).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range evs.Items {
		if e.InvolvedObject.Kind == "PodGroup" && (e.Reason == podgroup.ReasonGangRejected || e.Reason == podgroup.ReasonGangInfeasible) {
			t.Errorf("PodGroup %s: %s: %s", e.InvolvedObject.Name, e.Reason, e.Message)
		}
	}
}

// failoverConfig writes a configuration for a replica of the failover test: the shipped profiles,
// kubeconfig, and a lease of its own in ns with short timings (a killed leader is replaced within
// about 5 s).
func failoverConfig(t *testing.T, ns, kubeconfig string) string {
	t.Helper()
	cfg := fmt.Sprintf(`apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
clientConnection:
  kubeconfig: %s
leaderElection:
  leaderElect: true
  resourceName: custom-scheduler
  resourceNamespace: %s
  leaseDuration: 4s
  renewDeadline: 3s
  retryPeriod: 1s
profiles:
%s`, kubeconfig, ns, shippedProfiles(t))
	path := filepath.Join(t.TempDir(), "failover-"+filepath.Base(kubeconfig)+".yaml")
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// waitLeading waits until p's log says it acquired the lease.
func waitLeading(t *testing.T, ns string, p *binaryProcess) {
	t.Helper()
	waitFor(t, ns, p.name+" to lead", func(context.Context) (bool, error) {
		if p.exited() {
			return false, fmt.Errorf("%s exited:\n%s", p.name, tail(p.logText(), 30))
		}
		return strings.Contains(p.logText(), "Successfully acquired lease"), nil
	})
}

// bindingOf matches a POST of the binding of a pod whose name has prefix.
func bindingOf(prefix string) func(*http.Request) bool {
	binding := podPath("binding")
	return func(r *http.Request) bool {
		parts := strings.Split(strings.Trim(r.URL.Path, "/"), "/")
		return binding(r) && strings.HasPrefix(parts[5], prefix)
	}
}

// TestGangGroupsFailover: the leader is killed (SIGKILL) in the middle of two jobs of two roles each
// (gang composites needing both, 2 members of 1 CPU per role), and the standby takes over.
//   - mb (mid-bind): the leader let both roles through; mb-a's binds reached the apiserver, mb-b's are
//     held in a proxy in front of the leader until it dies, so they never do: the kill lands between
//     the two roles' binds, every run. The new leader must bind mb-b whole. The composite is short
//     from mb-a's binds until then: it is watched with the failover in its window.
//   - hj (held): hj-a's members are reserved and wait at Permit for hj-b, whose members exist but are
//     held back (heldAnnotation). Once the standby leads, hj-b's held pods are deleted and new ones
//     created: the job must bind whole, and nothing of it before (the composite watched strictly).
func TestGangGroupsFailover(t *testing.T) {
	ns := testNamespace(t)
	cosNodes(t, ns+"-n", 2, "4")
	var blocked atomic.Int32
	cut := make(chan struct{})
	t.Cleanup(func() { close(cut) })
	proxy := startFaultProxy(t, 0, []faultRule{{name: "mb-b-binding", method: http.MethodPost, rate: 1,
		match: func(r *http.Request) bool {
			if !bindingOf("mb-b-")(r) {
				return false
			}
			// Held until the leader that sent it is gone; then failed, never forwarded.
			blocked.Add(1)
			select {
			case <-r.Context().Done():
			case <-cut:
			}
			return true
		}}})
	leader := startBinary(t, "leader", "--config="+failoverConfig(t, ns, proxy.kubeconfig), "--secure-port=0", "--v=2")
	waitLeading(t, ns, leader)
	standby := startBinary(t, "standby", "--config="+failoverConfig(t, ns, adminKubeconfig), "--secure-port=0", "--v=2")

	for _, g := range []string{"mb-a", "mb-b", "hj-a", "hj-b"} {
		watchWhole(t, ns, g, 2, nil)
	}
	watchTrees(t, ns, []*tnode{twoRoles("hj", "hj-a", "hj-b", 2)})
	// mb's composite: short from mb-a's binds until the new leader binds mb-b (the lease, 4 s, and
	// the new leader's first cycles).
	watchTreesWithin(t, ns, []*tnode{twoRoles("mb", "mb-a", "mb-b", 2)}, 20*time.Second)

	// mb: both roles let through at once; mb-b's binds are held by the proxy.
	createGroupIn(t, ns, "mb", 1, gangComposite(2))
	createGroupIn(t, ns, "mb-a", 2, child("mb"))
	createGroupIn(t, ns, "mb-b", 2, child("mb"))
	createGang(t, ns, "mb-a", 2, "1")
	createGang(t, ns, "mb-b", 2, "1")
	waitForBoundMembers(t, ns, "mb-a", 2)
	waitFor(t, ns, "mb-b's two binds held by the proxy", func(context.Context) (bool, error) { return blocked.Load() == 2, nil })

	// hj: hj-a reserved and waiting for hj-b, whose members are held back.
	createGroupIn(t, ns, "hj", 1, gangComposite(2))
	createGroupIn(t, ns, "hj-a", 2, child("hj"))
	createGroupIn(t, ns, "hj-b", 2, child("hj"))
	createHeldMembers(t, ns, "hj-b", 2, 2, "1")
	createGang(t, ns, "hj-a", 2, "1")
	waitFor(t, ns, "hj-a's members reserved", func(ctx context.Context) (bool, error) {
		c := findScheduled(getPodGroup(t, ns, "hj-a").Status.Conditions)
		return c != nil && c.Reason == podgroup.ReasonQuorumReached, nil
	})
	consistentlyNoneBound(t, time.Second, ns, "mb-b", "hj-a", "hj-b")

	leader.kill(t, syscall.SIGKILL)
	killed := time.Now()
	waitLeading(t, ns, standby)
	t.Logf("the standby leads %v after the kill", time.Since(killed).Round(time.Millisecond))

	// hj-b's pods are made anew under the new leader.
	forceDelete(t, ns, "hj-b-0", "hj-b-1")
	waitFor(t, ns, "hj-b's held pods gone", func(ctx context.Context) (bool, error) {
		pods, err := groupPods(ctx, ns, "hj-b")
		return err == nil && len(pods) == 0, err
	})
	createMembers(t, ns, "hj-b", "hj-b-new", 2, "1")

	for _, g := range []string{"mb-a", "mb-b", "hj-a", "hj-b"} {
		waitForBoundMembers(t, ns, g, 2)
	}
	t.Logf("every group whole %v after the kill", time.Since(killed).Round(time.Millisecond))
	if _, err := client.CoreV1().Pods(ns).Get(context.Background(), "hj-b-0", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("hj-b-0 (deleted) is still there: %v", err)
	}
	if n := blocked.Load(); n != 2 {
		t.Errorf("the proxy held %d binds of mb-b, want 2 (the dead leader's only)", n)
	}
	assertScheduledOnce(t, ns)
}

// TestGangGroupsPreemptForJob: a high-priority job of two roles (prefill: 2 members of 3 CPU; decode:
// 4 of 2 CPU; under a gang composite needing both) on five 4-CPU nodes, two free and three each full
// of a low-priority pod. Each role fits the two free nodes alone, the job does not: it needs two nodes
// more. The job preempts as one: exactly two low pods are evicted (not the third, nor one role's room
// at a time), and the job binds whole, no role ever bound without the other.
func TestGangGroupsPreemptForJob(t *testing.T) {
	ensurePriorityClasses(t)
	startScheduler(t, schedulerConfig(t, adminKubeconfig, shippedProfiles(t)))
	ns := testNamespace(t)
	nodes := caseNodes(t, "gtj", 5)
	var low []string
	for _, node := range nodes[2:] {
		name := "low-" + node
		createPod(t, prioPod(ns, name, "", "4", lowPriority, "gtj", node))
		low = append(low, name)
	}
	for _, name := range low {
		waitForPodBound(t, ns, name)
	}
	watchWhole(t, ns, "prefill", 2, nil)
	watchWhole(t, ns, "decode", 4, nil)
	watchTrees(t, ns, []*tnode{{name: "serve", composite: true, min: 2, children: []*tnode{{name: "prefill", min: 2}, {name: "decode", min: 4}}}})
	createGroupIn(t, ns, "serve", 1, gangComposite(2))
	createGroupIn(t, ns, "prefill", 2, child("serve"))
	createGroupIn(t, ns, "decode", 4, child("serve"))
	for i := range 4 {
		createPod(t, prioPod(ns, fmt.Sprintf("decode-%d", i), "decode", "2", highPriority, "gtj", ""))
	}
	for i := range 2 {
		createPod(t, prioPod(ns, fmt.Sprintf("prefill-%d", i), "prefill", "3", highPriority, "gtj", ""))
	}

	var victims []string
	waitFor(t, ns, "two low-priority pods preempted for the job", func(ctx context.Context) (bool, error) {
		var err error
		victims, err = preempted(ctx, ns)
		return len(victims) >= 2, err
	})
	consistently(t, 2*time.Second, "exactly two low-priority pods preempted", func(ctx context.Context) (bool, error) {
		got, err := preempted(ctx, ns)
		return len(got) == 2 && !slices.ContainsFunc(got, func(n string) bool { return !strings.HasPrefix(n, "low-") }), err
	})
	victims, _ = preempted(context.Background(), ns)
	forceDelete(t, ns, victims...)
	waitForBoundMembers(t, ns, "prefill", 2)
	waitForBoundMembers(t, ns, "decode", 4)
	// One preemption for the job's six missing members, by whichever group's member came first.
	waitFor(t, ns, "a Preempting event for the job's six members", func(ctx context.Context) (bool, error) {
		evs, err := client.CoreV1().Events(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		return slices.ContainsFunc(evs.Items, func(e v1.Event) bool {
			return e.Reason == podgroup.ReasonPreempting && strings.Contains(e.Message, "so that 6 members fit")
		}), nil
	})
}

// TestGangGroupsPreemptNested: a job preempts within its nested domains. The job requires one block,
// its replica (a leader group of one 4-CPU member and a worker group of two) one rack of it. Block
// gp-b1 has two racks of three 4-CPU nodes, each with one free node and two running a low-priority pod.
// The replica needs three nodes of one rack: two victims in one rack. Before the preemption read the
// replica's rack, it searched the block only: one victim, the replica's members nominated to two
// racks, and its check (one rack) then found no room, nor its preemption anything to evict.
func TestGangGroupsPreemptNested(t *testing.T) {
	ensurePriorityClasses(t)
	startScheduler(t, schedulerConfig(t, adminKubeconfig, shippedProfiles(t)))
	ns := testNamespace(t)
	rack(t, "gp-b1", "gp-r1", 3)
	rack(t, "gp-b1", "gp-r2", 3)
	for _, node := range []string{"gp-r1-1", "gp-r1-2", "gp-r2-1", "gp-r2-2"} {
		low := gangPod(ns, "low-"+node, "", "4")
		delete(low.Labels, v1alpha1.PodGroupLabel)
		low.Spec.PriorityClassName, low.Spec.NodeName = lowPriority, node
		createPod(t, low)
	}
	watchWhole(t, ns, "lead", 1, nil)
	watchWhole(t, ns, "work", 2, nil)
	replica := gangComposite(2)
	replica[tree.AnnotationParent] = "serve"
	createGroupWithPolicy(t, ns, "serve", 1, gangComposite(1), blockLabel)
	createGroupWithPolicy(t, ns, "rep", 1, replica, rackLabel)
	createGroupIn(t, ns, "lead", 1, child("rep"))
	createGroupIn(t, ns, "work", 2, child("rep"))
	for i := range 2 {
		w := gangPod(ns, fmt.Sprintf("work-%d", i), "work", "4")
		w.Spec.PriorityClassName = highPriority
		createPod(t, w)
	}
	l := gangPod(ns, "lead-0", "lead", "4")
	l.Spec.PriorityClassName = highPriority
	createPod(t, l)

	rackOf := func(name string) string { return name[:strings.LastIndex(name, "-")] }
	waitFor(t, ns, "two low-priority pods of one rack preempted for the replica", func(ctx context.Context) (bool, error) {
		got, err := preempted(ctx, ns)
		return len(got) == 2 && rackOf(got[0]) == rackOf(got[1]), err
	})
	consistently(t, 2*time.Second, "exactly two low-priority pods preempted", func(ctx context.Context) (bool, error) {
		got, err := preempted(ctx, ns)
		return len(got) == 2, err
	})
	victims, _ := preempted(context.Background(), ns)
	forceDelete(t, ns, victims...)
	waitForBoundMembers(t, ns, "work", 2)
	waitForBoundMembers(t, ns, "lead", 1)
	lead, work := racksOf(t, ns, "lead"), racksOf(t, ns, "work")
	all := map[string]int{}
	for _, m := range []map[string]int{lead, work} {
		for r, n := range m {
			all[r] += n
		}
	}
	if len(all) != 1 {
		t.Errorf("racks: lead %v, work %v; want the replica in one rack", lead, work)
	}
}

// TestGangGroupsPreemptReplicas: a job of two replicas, each requiring a rack of its own, preempts in
// parts. The job (both replicas) requires one block; each replica (a leader group of one 2-CPU member
// and a worker group of two: 6 CPU) one rack of it. Block gq-b1 has two racks of two 4-CPU nodes: in
// gq-r1 one node is free and one runs a low-priority 4-CPU pod; in gq-r2 each runs a low-priority
// 2-CPU pod. In parts, the first replica frees gq-r1 (its 4-CPU pod), the second room in gq-r2 (one
// 2-CPU pod), and each is placed in a rack of its own. (Before, one search could not keep each replica
// in a rack of its own: the job evicted nothing and stayed pending, 2 runs of 2.)
func TestGangGroupsPreemptReplicas(t *testing.T) {
	preemptTwoReplicas(t, "gq", func(ns, block string) [][]sizedGroup {
		createGroupWithPolicy(t, ns, "serve", 1, gangComposite(2), blockLabel)
		var replicas [][]sizedGroup
		for _, r := range []string{"0", "1"} {
			replica := gangComposite(2)
			replica[tree.AnnotationParent] = "serve"
			createGroupWithPolicy(t, ns, "rep-"+r, 1, replica, rackLabel)
			groups := []sizedGroup{{"lead-" + r, 1}, {"work-" + r, 2}}
			for _, g := range groups {
				createGroupIn(t, ns, g.name, int64(g.size), child("rep-"+r))
			}
			replicas = append(replicas, groups)
		}
		return replicas
	})
}

// TestGangGroupsPreemptOwnRacks: the same racks and low pods as TestGangGroupsPreemptReplicas, for a
// set of two replica groups (3 members of 2 CPU each, as LeaderWorkerSet makes) that each require a
// rack of their own (the PodGroup's topologyPolicy) under a gang composite with no domain (the pods
// select the test's block). Each group is short alone (no rack has room for it): the set preempts as
// one, in parts, one rack per replica. (Before, each group preempted for itself: both could choose
// the rack of the cheap 2-CPU pods, and three pods or the wrong one were evicted, 2 runs of 2.)
func TestGangGroupsPreemptOwnRacks(t *testing.T) {
	preemptTwoReplicas(t, "go", func(ns, block string) [][]sizedGroup {
		createGroupIn(t, ns, "set", 1, gangComposite(2))
		var replicas [][]sizedGroup
		for _, r := range []string{"set-0", "set-1"} {
			createGroupWithPolicy(t, ns, r, 3, child("set"), rackLabel)
			replicas = append(replicas, []sizedGroup{{r, 3}})
		}
		return replicas
	})
}

// sizedGroup is a PodGroup of a test and its number of members.
type sizedGroup struct {
	name string
	size int
}

// preemptTwoReplicas is the scene of the tests of a job preempting in parts: block prefix-b1 of two
// racks of two 4-CPU nodes, a low-priority 4-CPU pod on prefix-r1-1 and 2-CPU ones on both nodes of
// prefix-r2; create makes the job's PodGroups in ns and returns each of its two replicas' groups
// (6 CPU a replica, in members of 2 CPU, created here at high priority, selecting the block). The
// 4-CPU pod and one 2-CPU pod are preempted, saying the job preempts in 2 parts, and nothing more;
// once they are gone, each replica is bound whole in a rack of its own.
func preemptTwoReplicas(t *testing.T, prefix string, create func(ns, block string) [][]sizedGroup) {
	ensurePriorityClasses(t)
	startScheduler(t, schedulerConfig(t, adminKubeconfig, shippedProfiles(t)))
	ns := testNamespace(t)
	block := prefix + "-b1"
	rack(t, block, prefix+"-r1", 2)
	rack(t, block, prefix+"-r2", 2)
	for node, cpu := range map[string]string{prefix + "-r1-1": "4", prefix + "-r2-0": "2", prefix + "-r2-1": "2"} {
		low := gangPod(ns, "low-"+node, "", cpu)
		delete(low.Labels, v1alpha1.PodGroupLabel)
		low.Spec.PriorityClassName, low.Spec.NodeName = lowPriority, node
		createPod(t, low)
	}
	replicas := create(ns, block)
	for _, groups := range replicas {
		for _, g := range groups {
			watchWhole(t, ns, g.name, g.size, nil)
			for i := range g.size {
				p := gangPod(ns, fmt.Sprintf("%s-%d", g.name, i), g.name, "2")
				p.Spec.PriorityClassName, p.Spec.NodeSelector = highPriority, map[string]string{blockLabel: block}
				createPod(t, p)
			}
		}
	}

	waitFor(t, ns, "a low-priority pod of each rack preempted for the two replicas", func(ctx context.Context) (bool, error) {
		got, err := preempted(ctx, ns)
		return len(got) == 2 && slices.Contains(got, "low-"+prefix+"-r1-1"), err
	})
	waitFor(t, ns, "a Preempting event saying each replica has a rack of its own", func(ctx context.Context) (bool, error) {
		evs, err := client.CoreV1().Events(ns).List(ctx, metav1.ListOptions{})
		return err == nil && slices.ContainsFunc(evs.Items, func(e v1.Event) bool {
			return e.Reason == podgroup.ReasonPreempting && strings.Contains(e.Message, "so that 6 members fit, each of its 2 parts in one domain of its own")
		}), err
	})
	consistently(t, 2*time.Second, "exactly two low-priority pods preempted", func(ctx context.Context) (bool, error) {
		got, err := preempted(ctx, ns)
		return len(got) == 2, err
	})
	victims, _ := preempted(context.Background(), ns)
	forceDelete(t, ns, victims...)
	used := boundInRacks(t, ns, replicas)
	if len(used) != 2 {
		t.Errorf("the replicas are in racks %v; each needs a rack of its own", used)
	}
}

// TestGangGroupsFinishedMember: the finished-member rule in a job. Both roles of a job (2 members of
// 1 CPU each) run; one of role b's members succeeds, another fails and is replaced (an indexed Job's
// workers finishing at different times). Role b counts its running member, the one that succeeded and
// the replacement: its minMember, so the job's tree lets the replacement in, and it binds beside the
// others. (The soak found it held back for ever, WaitingForGroups "b: 2 of minMember 3", its
// succeeded member not counted.)
func TestGangGroupsFinishedMember(t *testing.T) {
	startScheduler(t, schedulerConfig(t, adminKubeconfig, shippedProfiles(t)))
	ns := testNamespace(t)
	cosNodes(t, ns+"-n", 2, "4")
	// Only a bind may start a partial episode: the test's own failure and deletion leave b short.
	watchNotPartial(t, ns, "a", 2)
	watchNotPartial(t, ns, "b", 3)
	createGroupIn(t, ns, "job", 1, gangComposite(2))
	createGroupIn(t, ns, "a", 2, child("job"))
	createGroupIn(t, ns, "b", 3, child("job"))
	createGang(t, ns, "a", 2, "1")
	b := createGang(t, ns, "b", 3, "1")
	waitForBoundMembers(t, ns, "a", 2)
	waitForBoundMembers(t, ns, "b", 3)

	setPhase(t, ns, b[0], v1.PodSucceeded)
	setPhase(t, ns, b[1], v1.PodFailed)
	forceDelete(t, ns, b[1])
	createPod(t, gangPod(ns, "b-3", "b", "1"))
	waitForPodBound(t, ns, "b-3")
}

// TestGangGroupsDomainMemory: a job's domain the real filters refused is not chosen again while
// another fits, as a flat gang's (TestDomainMemory). Block gm-b1 (two 4-CPU nodes) is the tighter fit
// for the job (decode: 2 members of 2 CPU, prefill: 2 of 1 CPU, the whole job in one block), block
// gm-b2 (six such nodes) the looser; every gm-b1 node runs a pod holding the host port the members ask
// for, which the whole-gang check does not model. The first attempts are placed in gm-b1 and fail there;
// a later one must avoid gm-b1 and place the job whole in gm-b2. Before the job's groups' refusals were
// read when its domain was chosen, every attempt chose gm-b1 again and nothing bound.
func TestGangGroupsDomainMemory(t *testing.T) {
	startScheduler(t, schedulerConfig(t, adminKubeconfig, shippedProfiles(t)))
	ns := testNamespace(t)
	rack(t, "gm-b1", "gm-r1", 2)
	for _, r := range []string{"gm-r2a", "gm-r2b", "gm-r2c"} {
		rack(t, "gm-b2", r, 2)
	}
	for i := range 2 {
		blocker := withHostPort(gangPod(ns, fmt.Sprintf("port-holder-%d", i), "", "100m"), domainMemoryPort)
		delete(blocker.Labels, v1alpha1.PodGroupLabel)
		blocker.Spec.NodeName = fmt.Sprintf("gm-r1-%d", i)
		createPod(t, blocker)
	}
	watchWhole(t, ns, "decode", 2, nil)
	watchWhole(t, ns, "prefill", 2, nil)
	createGroupWithPolicy(t, ns, "serve", 1, gangComposite(2), blockLabel)
	createGroupIn(t, ns, "decode", 2, child("serve"))
	createGroupIn(t, ns, "prefill", 2, child("serve"))
	start := time.Now()
	for i := range 2 {
		createPod(t, withHostPort(gangPod(ns, fmt.Sprintf("decode-%d", i), "decode", "2"), domainMemoryPort))
		createPod(t, withHostPort(gangPod(ns, fmt.Sprintf("prefill-%d", i), "prefill", "1"), domainMemoryPort))
	}
	waitForBoundMembers(t, ns, "decode", 2)
	waitForBoundMembers(t, ns, "prefill", 2)
	t.Logf("the job bound whole after %v", time.Since(start).Round(100*time.Millisecond))
	decode, prefill := racksOf(t, ns, "decode"), racksOf(t, ns, "prefill")
	if decode["gm-r1"] > 0 || prefill["gm-r1"] > 0 {
		t.Errorf("racks: decode %v, prefill %v; want the whole job in block gm-b2", decode, prefill)
	}
	ev := waitForEvent(t, ns, "decode", podgroup.ReasonGangRejected, schedulerName)
	t.Logf("GangRejected: %s", ev.Message)
}

// TestGangGroupsNestedDomains: a composite with a required key below one with another: the whole job
// in one block, its replica (a composite of a leader group and a worker group) in one rack of it.
// Block gn-b1 is the tighter fit for the job's 8 CPU (12 free: rack gn-r1a's two 4-CPU nodes half
// taken, rack gn-r1b's free), block gn-b2 the looser (two racks of three 4-CPU nodes, 24 free), but no
// rack of gn-b1 holds the replica: its workers (2 of 3 CPU) fit only gn-r1b, and then its leader (2 CPU)
// only gn-r1a. The job binds in gn-b2, the replica in one rack. Before the replica's own key was read, the job went to gn-b1, the
// leader to gn-r1a and the workers to gn-r1b: the replica's required rack split.
func TestGangGroupsNestedDomains(t *testing.T) {
	startScheduler(t, schedulerConfig(t, adminKubeconfig, shippedProfiles(t)))
	ns := testNamespace(t)
	rack(t, "gn-b1", "gn-r1a", 2)
	rack(t, "gn-b1", "gn-r1b", 2)
	rack(t, "gn-b2", "gn-r2a", 3)
	rack(t, "gn-b2", "gn-r2b", 3)
	for i := range 2 {
		filler := gangPod(ns, fmt.Sprintf("filler-%d", i), "", "2")
		delete(filler.Labels, v1alpha1.PodGroupLabel)
		filler.Spec.NodeName = fmt.Sprintf("gn-r1a-%d", i)
		createPod(t, filler)
	}
	watchWhole(t, ns, "lead", 1, nil)
	watchWhole(t, ns, "work", 2, nil)
	replica := gangComposite(2)
	replica[tree.AnnotationParent] = "serve"
	createGroupWithPolicy(t, ns, "serve", 1, gangComposite(1), blockLabel)
	createGroupWithPolicy(t, ns, "rep", 1, replica, rackLabel)
	createGroupIn(t, ns, "lead", 1, child("rep"))
	createGroupIn(t, ns, "work", 2, child("rep"))
	createGang(t, ns, "work", 2, "3")
	createGang(t, ns, "lead", 1, "2")
	waitForBoundMembers(t, ns, "work", 2)
	waitForBoundMembers(t, ns, "lead", 1)
	lead, work := racksOf(t, ns, "lead"), racksOf(t, ns, "work")
	all := map[string]int{}
	for _, m := range []map[string]int{lead, work} {
		for r, n := range m {
			all[r] += n
		}
	}
	if len(all) != 1 || all["gn-r1a"] > 0 || all["gn-r1b"] > 0 {
		t.Errorf("racks: lead %v, work %v; want the replica in one rack of block gn-b2", lead, work)
	}
}

// TestGangGroupsNestedPreferred: a job in one block (its root's required key) of two replicas, each
// a composite of a leader group and a worker group that prefers one rack (spec.topologyPolicy.preferred
// on the replica). The block has two racks of three 4-CPU nodes, two of each with 1 CPU free and
// the third free; each replica's three pods of 1 CPU fit in either rack: each replica is placed in
// one rack. Before the replicas' preferred keys were read, the profile packed the pods on the
// fullest nodes first, in both racks, and a replica's pods went to both.
func TestGangGroupsNestedPreferred(t *testing.T) {
	startScheduler(t, schedulerConfig(t, adminKubeconfig, shippedProfiles(t)))
	ns := testNamespace(t)
	rack(t, ns+"-b", ns+"-r1", 3)
	rack(t, ns+"-b", ns+"-r2", 3)
	// The fullest nodes, where the profile packs pods first, are in both racks.
	for _, node := range []string{"r1-0", "r1-1", "r2-0", "r2-1"} {
		filler := gangPod(ns, "filler-"+node, "", "3")
		delete(filler.Labels, v1alpha1.PodGroupLabel)
		filler.Spec.NodeName = ns + "-" + node
		createPod(t, filler)
	}
	createGroupWithPolicy(t, ns, "serve", 1, gangComposite(2), blockLabel)
	for i := range 2 {
		rep, lead, work := fmt.Sprintf("rep-%d", i), fmt.Sprintf("lead-%d", i), fmt.Sprintf("work-%d", i)
		watchWhole(t, ns, lead, 1, nil)
		watchWhole(t, ns, work, 2, nil)
		replica := gangComposite(2)
		replica[tree.AnnotationParent] = "serve"
		createGroupWithTopology(t, ns, rep, 1, replica, map[string]any{"preferred": []any{rackLabel}})
		createGroupIn(t, ns, lead, 1, child(rep))
		createGroupIn(t, ns, work, 2, child(rep))
	}
	for i := range 2 {
		createGang(t, ns, fmt.Sprintf("work-%d", i), 2, "1")
		createGang(t, ns, fmt.Sprintf("lead-%d", i), 1, "1")
	}
	for i := range 2 {
		lead, work := fmt.Sprintf("lead-%d", i), fmt.Sprintf("work-%d", i)
		waitForBoundMembers(t, ns, work, 2)
		waitForBoundMembers(t, ns, lead, 1)
		racks := racksOf(t, ns, lead)
		for r, n := range racksOf(t, ns, work) {
			racks[r] += n
		}
		t.Logf("replica rep-%d: leader on %v, workers on %v", i, nodesOf(t, ns, lead), nodesOf(t, ns, work))
		if len(racks) != 1 {
			t.Errorf("replica rep-%d's pods by rack: %v; want them in one rack", i, racks)
		}
	}
}

// boundInRacks waits until every group of replicas is bound and returns the racks the replicas are
// in, failing t for a replica in several.
func boundInRacks(t *testing.T, ns string, replicas [][]sizedGroup) map[string]bool {
	t.Helper()
	used := map[string]bool{}
	for i, groups := range replicas {
		racks := map[string]int{}
		for _, g := range groups {
			waitForBoundMembers(t, ns, g.name, g.size)
			for rk, n := range racksOf(t, ns, g.name) {
				racks[rk] += n
			}
		}
		if len(racks) != 1 {
			t.Errorf("replica %d in racks %v; want one", i, racks)
		}
		for rk := range racks {
			used[rk] = true
		}
	}
	return used
}
