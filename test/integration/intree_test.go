package integration

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	v1 "k8s.io/api/core/v1"
	schedulingv1alpha3 "k8s.io/api/scheduling/v1alpha3"
	schedulingv1beta1 "k8s.io/api/scheduling/v1beta1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/custom-scheduler/custom-scheduler/pkg/apis/scheduling/v1alpha1"
	"github.com/custom-scheduler/custom-scheduler/pkg/coscheduling/podgroup"
	"github.com/custom-scheduler/custom-scheduler/pkg/coscheduling/podgroup/pgcache"
)

// The in-tree gang source: Workloads and PodGroups of scheduling.k8s.io/v1beta1, which pods join with
// spec.schedulingGroup.podGroupName, placed by the shipped profile (GenericWorkload off in the
// scheduler, on in the apiserver: see main_test.go). Every gang here is watched by the same invariant
// checks as ours: never partially bound, a required domain never split.

// inTree is the group name the scheduler (and the watchers) know an in-tree PodGroup by.
func inTree(name string) string { return podgroup.InTreePrefix + name }

// inTreeSpec is an in-tree PodGroup's spec: a gang of minCount (0: the basic policy).
func inTreeSpec(minCount int32) schedulingv1beta1.PodGroupSpec {
	spec := schedulingv1beta1.PodGroupSpec{}
	if minCount > 0 {
		spec.SchedulingPolicy.Gang = &schedulingv1beta1.GangSchedulingPolicy{MinCount: minCount}
	} else {
		spec.SchedulingPolicy.Basic = &schedulingv1beta1.BasicSchedulingPolicy{}
	}
	return spec
}

// createWorkload writes what upstream's documentation shows a workload author writes: a Workload
// with one PodGroupTemplate, and the PodGroup made from it, referring to it.
func createWorkload(t *testing.T, ns, name string, spec schedulingv1beta1.PodGroupSpec) {
	t.Helper()
	ctx := context.Background()
	wl := &schedulingv1beta1.Workload{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: schedulingv1beta1.WorkloadSpec{PodGroupTemplates: []schedulingv1beta1.PodGroupTemplate{{
			Name: "workers", SchedulingPolicy: spec.SchedulingPolicy, SchedulingConstraints: spec.SchedulingConstraints,
			DisruptionMode: spec.DisruptionMode,
		}}},
	}
	if _, err := client.SchedulingV1beta1().Workloads(ns).Create(ctx, wl, metav1.CreateOptions{}); err != nil {
		t.Fatalf("creating Workload %s/%s: %v", ns, name, err)
	}
	spec.WorkloadRef = &schedulingv1beta1.WorkloadReference{WorkloadName: name, TemplateName: "workers"}
	createInTreePodGroup(t, ns, name, spec)
}

func createInTreePodGroup(t *testing.T, ns, name string, spec schedulingv1beta1.PodGroupSpec) {
	t.Helper()
	pg := &schedulingv1beta1.PodGroup{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Spec: spec}
	if _, err := client.SchedulingV1beta1().PodGroups(ns).Create(context.Background(), pg, metav1.CreateOptions{}); err != nil {
		t.Fatalf("creating PodGroup %s/%s (%s): %v", ns, name, podgroup.InTreeGroupVersion, err)
	}
}

// inTreePod is a member of the in-tree PodGroup group requesting cpu.
func inTreePod(ns, name, group, cpu string) *v1.Pod {
	p := gangPod(ns, name, "", cpu)
	delete(p.Labels, v1alpha1.PodGroupLabel)
	p.Spec.SchedulingGroup = &v1.PodSchedulingGroup{PodGroupName: ptr.To(group)}
	return p
}

// createInTreeGang creates n members of the in-tree group named <group>-<i>.
func createInTreeGang(t *testing.T, ns, group string, n int, cpu string) []string {
	t.Helper()
	names := make([]string, n)
	for i := range n {
		names[i] = fmt.Sprintf("%s-%d", group, i)
		createPod(t, inTreePod(ns, names[i], group, cpu))
	}
	return names
}

func getInTreePodGroup(ctx context.Context, ns, name string) (*schedulingv1beta1.PodGroup, error) {
	return client.SchedulingV1beta1().PodGroups(ns).Get(ctx, name, metav1.GetOptions{})
}

// waitForInTreeCondition waits until the in-tree PodGroup's condition of the type has the status and
// reason, and returns it.
func waitForInTreeCondition(t *testing.T, ns, name, condType string, status metav1.ConditionStatus, reason string) metav1.Condition {
	t.Helper()
	var found metav1.Condition
	waitFor(t, ns, fmt.Sprintf("in-tree PodGroup %s/%s to report %s=%s reason %s", ns, name, condType, status, reason), func(ctx context.Context) (bool, error) {
		pg, err := getInTreePodGroup(ctx, ns, name)
		if err != nil {
			return false, err
		}
		c := meta.FindStatusCondition(pg.Status.Conditions, condType)
		if c != nil && c.Status == status && c.Reason == reason {
			found = *c
			return true, nil
		}
		return false, nil
	})
	return found
}

// setMinCount edits the in-tree PodGroup's gang.minCount (mutable in v1beta1).
func setMinCount(t *testing.T, ns, name string, minCount int32) {
	t.Helper()
	patch := fmt.Sprintf(`{"spec":{"schedulingPolicy":{"gang":{"minCount":%d}}}}`, minCount)
	if _, err := client.SchedulingV1beta1().PodGroups(ns).Patch(context.Background(), name, types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
		t.Fatalf("setting minCount of %s/%s to %d: %v", ns, name, minCount, err)
	}
}

// podGroupEvent waits for an event with the reason on the in-tree PodGroup, and checks that it names
// the in-tree object (its API version), not one of ours.
func podGroupEvent(t *testing.T, ns, name, reason string) *v1.Event {
	t.Helper()
	e := waitForEvent(t, ns, name, reason, schedulerName)
	if e.InvolvedObject.APIVersion != podgroup.InTreeGroupVersion.String() || e.InvolvedObject.Kind != "PodGroup" {
		t.Errorf("the %s event is about %s %s, want PodGroup of %s", reason, e.InvolvedObject.APIVersion, e.InvolvedObject.Kind, podgroup.InTreeGroupVersion)
	}
	return e
}

func TestInTreePodGroups(t *testing.T) {
	startScheduler(t, schedulerConfig(t, adminKubeconfig, shippedProfiles(t)))

	t.Run("a Workload's gang is placed whole and reported PodGroupInitiallyScheduled", func(t *testing.T) {
		ns := testNamespace(t)
		cosNodes(t, "itw", 3, "2")
		watchWhole(t, ns, inTree("train"), 3, nil)
		createWorkload(t, ns, "train", inTreeSpec(3))
		names := createInTreeGang(t, ns, "train", 3, "1500m")
		nodes := map[string]bool{}
		for _, n := range names {
			nodes[waitForPodBound(t, ns, n)] = true
		}
		if len(nodes) != 3 {
			t.Errorf("members landed on %d nodes, want 3 (one per node)", len(nodes))
		}
		c := waitForInTreeCondition(t, ns, "train", schedulingv1beta1.PodGroupInitiallyScheduled, metav1.ConditionTrue, "Scheduled")
		if !strings.Contains(c.Message, "3 of minMember 3") {
			t.Errorf("PodGroupInitiallyScheduled message %q, want our count of the quorum", c.Message)
		}
		podGroupEvent(t, ns, "train", podgroup.ReasonQuorumReached)
		// Our own condition types are not written on the in-tree object.
		pg, err := getInTreePodGroup(context.Background(), ns, "train")
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range pg.Status.Conditions {
			if c.Type != schedulingv1beta1.PodGroupInitiallyScheduled && c.Type != schedulingv1beta1.DisruptionTarget {
				t.Errorf("in-tree PodGroup has condition %s, not one of v1beta1's", c.Type)
			}
		}
		// A member lost later leaves the gang below its quorum; the condition stays True (that it
		// stays True after a failed attempt too is a row of status.TestInTreeConditions).
		forceDelete(t, ns, names[0])
		consistently(t, 2*time.Second, "PodGroupInitiallyScheduled to stay True", func(ctx context.Context) (bool, error) {
			pg, err := getInTreePodGroup(ctx, ns, "train")
			return err == nil && meta.IsStatusConditionTrue(pg.Status.Conditions, schedulingv1beta1.PodGroupInitiallyScheduled), err
		})
	})

	t.Run("too big: nothing held, Unschedulable with the numbers", func(t *testing.T) {
		ns := testNamespace(t)
		cosNodes(t, "itb", 2, "2")
		watchWhole(t, ns, inTree("big"), 3, nil)
		createInTreePodGroup(t, ns, "big", inTreeSpec(3))
		createInTreeGang(t, ns, "big", 3, "1500m")
		c := waitForInTreeCondition(t, ns, "big", schedulingv1beta1.PodGroupInitiallyScheduled, metav1.ConditionFalse, schedulingv1beta1.PodGroupReasonUnschedulable)
		if !strings.HasPrefix(c.Message, podgroup.ReasonGangInfeasible+": ") || !strings.Contains(c.Message, "fit only 2 of them") {
			t.Errorf("Unschedulable message %q, want our GangInfeasible message with the numbers", c.Message)
		}
		podGroupEvent(t, ns, "big", podgroup.ReasonGangInfeasible)
		consistentlyNoneBound(t, 2*time.Second, ns, inTree("big"))
	})

	t.Run("minCount lowered lets the gang in; raised, it waits for the new quorum", func(t *testing.T) {
		ns := testNamespace(t)
		cosNodes(t, "itm", 4, "2")
		watchWhole(t, ns, inTree("low"), 3, nil)
		createInTreePodGroup(t, ns, "low", inTreeSpec(4))
		createInTreeGang(t, ns, "low", 3, "1")
		consistentlyNoneBound(t, 2*time.Second, ns, inTree("low"))
		setMinCount(t, ns, "low", 3)
		waitForBoundMembers(t, ns, inTree("low"), 3)

		watchWhole(t, ns, inTree("high"), 3, nil)
		createInTreePodGroup(t, ns, "high", inTreeSpec(2))
		setMinCount(t, ns, "high", 3)
		// Two members and minCount 3: none is placed, though two would fit.
		createPod(t, inTreePod(ns, "high-0", "high", "500m"))
		createPod(t, inTreePod(ns, "high-1", "high", "500m"))
		consistentlyNoneBound(t, 2*time.Second, ns, inTree("high"))
		createPod(t, inTreePod(ns, "high-2", "high", "500m"))
		waitForBoundMembers(t, ns, inTree("high"), 3)
	})

	t.Run("PodGroup deleted: the waiting members let go; recreated with new pods, placed whole", func(t *testing.T) {
		needControllerManager(t)
		ns := testNamespace(t)
		cosNodes(t, "itd", 3, "2")
		watchWhole(t, ns, inTree("gone"), 3, nil)
		createInTreePodGroup(t, ns, "gone", inTreeSpec(3))
		names := createInTreeGang(t, ns, "gone", 2, "1500m")
		held := inTreePod(ns, "gone-2", "gone", "1500m")
		hold(held)
		createPod(t, held)
		// Two members wait at Permit for the held one: the attempt's WaitingForQuorum comes once it
		// has waited 5 s (the in-tree object has no count of waiting members to poll).
		podGroupEvent(t, ns, "gone", podgroup.ReasonWaitingForQuorum)
		if err := client.SchedulingV1beta1().PodGroups(ns).Delete(context.Background(), "gone", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		// Its pods still use it: the protection finalizer holds it, being deleted.
		if pg, err := getInTreePodGroup(context.Background(), ns, "gone"); err != nil || pg.DeletionTimestamp == nil {
			t.Fatalf("the deleted PodGroup: %v, %v; want it held, being deleted", pg, err)
		}
		waitForEvent(t, ns, names[0], podgroup.ReasonGangRejected, schedulerName)
		consistentlyNoneBound(t, 2*time.Second, ns, inTree("gone"))

		// The pods are recreated (spec.schedulingGroup cannot change) and the PodGroup too, once
		// the protection controller let the old one go with its last pod.
		forceDelete(t, ns, append(names, "gone-2")...)
		waitFor(t, ns, "the old PodGroup gone", func(ctx context.Context) (bool, error) {
			_, err := getInTreePodGroup(ctx, ns, "gone")
			return apierrors.IsNotFound(err), nil
		})
		createInTreePodGroup(t, ns, "gone", inTreeSpec(3))
		createInTreeGang(t, ns, "gone", 3, "1500m")
		waitForBoundMembers(t, ns, inTree("gone"), 3)
	})

	t.Run("a topology constraint is a required domain: all in the zone that holds them", func(t *testing.T) {
		ns := testNamespace(t)
		const zoneKey = "custom-scheduler.test/intree-zone"
		for i := range 2 {
			createNode(t, fmt.Sprintf("itz-a-%d", i), "2", "8Gi", map[string]string{zoneKey: "a"})
		}
		for i := range 3 {
			createNode(t, fmt.Sprintf("itz-b-%d", i), "2", "8Gi", map[string]string{zoneKey: "b"})
		}
		watchWhole(t, ns, inTree("zoned"), 3, nil)
		watchOneDomain(t, ns, inTree("zoned"), zoneKey)
		spec := inTreeSpec(3)
		spec.SchedulingConstraints = &schedulingv1beta1.PodGroupSchedulingConstraints{Topology: []schedulingv1beta1.TopologyConstraint{{Key: zoneKey}}}
		createWorkload(t, ns, "zoned", spec)
		for _, n := range createInTreeGang(t, ns, "zoned", 3, "1500m") {
			node := waitForPodBound(t, ns, n)
			if !strings.HasPrefix(node, "itz-b-") {
				t.Errorf("%s bound to %s, want zone b (the only zone with room for all three)", n, node)
			}
		}
		podGroupEvent(t, ns, "zoned", podgroup.ReasonDomainChosen)
	})

	t.Run("basic policy: members placed one by one, as far as they fit", func(t *testing.T) {
		ns := testNamespace(t)
		cosNodes(t, "itp", 2, "2")
		createInTreePodGroup(t, ns, "solo", inTreeSpec(0))
		createInTreeGang(t, ns, "solo", 3, "1500m")
		waitForBoundMembers(t, ns, inTree("solo"), 2)
		waitForPodUnschedulable(t, ns, "solo-2")
	})

	t.Run("a pod with our label and spec.schedulingGroup is our gang's, with a warning", func(t *testing.T) {
		ns := testNamespace(t)
		cosNodes(t, "itl", 2, "2")
		createPodGroup(t, ns, "ours", 2, 0)
		createInTreePodGroup(t, ns, "theirs", inTreeSpec(5))
		var names []string
		for i := range 2 {
			p := gangPod(ns, fmt.Sprintf("both-%d", i), "ours", "1")
			p.Spec.SchedulingGroup = &v1.PodSchedulingGroup{PodGroupName: ptr.To("theirs")}
			names = append(names, createPod(t, p).Name)
		}
		waitForBoundMembers(t, ns, "ours", 2)
		e := waitForEvent(t, ns, names[0], podgroup.ReasonTwoPodGroups, schedulerName)
		if e.Type != v1.EventTypeWarning || !strings.Contains(e.Message, `"ours"`) || !strings.Contains(e.Message, `"theirs"`) {
			t.Errorf("TwoPodGroups event %s %q, want a warning naming both groups", e.Type, e.Message)
		}
	})
}

// TestInTreeGangPreemption: a gang with disruptionMode All is preempted whole for a higher-priority
// in-tree gang, and its PodGroup says so (DisruptionTarget); a basic group (disruptionMode Single, the
// defaults) loses only the member in the way.
func TestInTreeGangPreemption(t *testing.T) {
	ensurePriorityClasses(t)
	startScheduler(t, schedulerConfig(t, adminKubeconfig, shippedProfiles(t)))
	run := func(t *testing.T, ns, caseName, group, class string, spec schedulingv1beta1.PodGroupSpec, n int) []string {
		if spec.SchedulingPolicy.Gang != nil {
			watchNotPartial(t, ns, inTree(group), n)
		}
		createInTreePodGroup(t, ns, group, spec)
		names := make([]string, n)
		for i := range names {
			names[i] = fmt.Sprintf("%s-%d", group, i)
			p := prioPod(ns, names[i], "", "3", class, caseName, "")
			p.Spec.SchedulingGroup = &v1.PodSchedulingGroup{PodGroupName: ptr.To(group)}
			createPod(t, p)
		}
		return names
	}

	t.Run("disruptionMode all: preempted whole, DisruptionTarget", func(t *testing.T) {
		ns := testNamespace(t)
		caseNodes(t, "itx", 3)
		spec := inTreeSpec(3)
		spec.DisruptionMode = &schedulingv1beta1.DisruptionMode{All: &schedulingv1beta1.AllDisruptionMode{}}
		lo := run(t, ns, "itx", "lo", lowPriority, spec, 3)
		waitForBoundMembers(t, ns, inTree("lo"), 3)
		run(t, ns, "itx", "hi", highPriority, inTreeSpec(3), 3)
		waitForPreempted(t, ns, lo)
		c := waitForInTreeCondition(t, ns, "lo", schedulingv1beta1.DisruptionTarget, metav1.ConditionTrue, schedulingv1beta1.PodGroupReasonPreemptionByScheduler)
		if !strings.Contains(c.Message, "whole") {
			t.Errorf("DisruptionTarget message %q", c.Message)
		}
		forceDelete(t, ns, lo...)
		waitForBoundMembers(t, ns, inTree("hi"), 3)
	})

	t.Run("a basic group loses only the member in the way, and gets no DisruptionTarget", func(t *testing.T) {
		ns := testNamespace(t)
		caseNodes(t, "ity", 3)
		run(t, ns, "ity", "solo", lowPriority, inTreeSpec(0), 3)
		waitForBoundMembers(t, ns, inTree("solo"), 3)
		createPod(t, prioPod(ns, "urgent", "", "3", highPriority, "ity", ""))
		var got []string
		waitFor(t, ns, "one member preempted", func(ctx context.Context) (bool, error) {
			var err error
			got, err = preempted(ctx, ns)
			return len(got) >= 1, err
		})
		consistently(t, 2*time.Second, "exactly one member preempted", func(ctx context.Context) (bool, error) {
			var err error
			got, err = preempted(ctx, ns)
			return len(got) == 1, err
		})
		forceDelete(t, ns, got...)
		waitForPodBound(t, ns, "urgent")
		pg, err := getInTreePodGroup(context.Background(), ns, "solo")
		if err != nil {
			t.Fatal(err)
		}
		if c := meta.FindStatusCondition(pg.Status.Conditions, schedulingv1beta1.DisruptionTarget); c != nil {
			t.Errorf("a basic group that lost one member got %+v", c)
		}
	})
}

// TestInTreeGangFinishing: an in-tree gang whose members finish one by one is not below its quorum
// (its finished members, which carry no label, count as placed), with a schedule timeout short enough
// for a BelowQuorum report to come within the test.
func TestInTreeGangFinishing(t *testing.T) {
	// A schedule timeout of 3 s: a gang seen below its quorum would be reported after it.
	startScheduler(t, schedulerConfig(t, adminKubeconfig, strings.Replace(coschedulingProfiles, "permitWaitingTimeSeconds: 10", "permitWaitingTimeSeconds: 3", 1)))
	ns := testNamespace(t)
	cosNodes(t, "itf", 2, "2")
	createInTreePodGroup(t, ns, "done", inTreeSpec(2))
	names := createInTreeGang(t, ns, "done", 2, "1")
	waitForBoundMembers(t, ns, inTree("done"), 2)
	setPhase(t, ns, names[0], v1.PodSucceeded)
	setPhase(t, ns, names[1], v1.PodRunning)
	time.Sleep(5 * time.Second)
	assertNoEvents(t, ns, "PodGroup", []string{"done"}, podgroup.ReasonBelowQuorum)
}

// TestInTreeJob: the Job controller (WorkloadWithJob) writes the Workload and the PodGroup of an
// indexed Job that asks for a gang, and names it in its pods; the scheduler places it whole.
func TestInTreeJob(t *testing.T) {
	needControllerManager(t)
	startScheduler(t, schedulerConfig(t, adminKubeconfig, shippedProfiles(t)))
	ns := testNamespace(t)
	cosNodes(t, "itj", 3, "2")
	job := &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "trainer"},
		Spec: batchv1.JobSpec{
			Parallelism: ptr.To[int32](3), Completions: ptr.To[int32](3), CompletionMode: ptr.To(batchv1.IndexedCompletion),
			Scheduling: &batchv1.JobSchedulingConfiguration{SchedulingPolicy: &schedulingv1alpha3.WorkloadPodGroupSchedulingPolicy{
				Gang: &schedulingv1alpha3.WorkloadPodGroupGangSchedulingPolicy{MinCount: ptr.To[int32](3)},
			}},
			Template: v1.PodTemplateSpec{Spec: v1.PodSpec{
				SchedulerName: schedulerName, RestartPolicy: v1.RestartPolicyNever,
				Containers: []v1.Container{{Name: "pause", Image: "pause", Resources: v1.ResourceRequirements{
					Requests: gangPod(ns, "x", "", "1500m").Spec.Containers[0].Resources.Requests}}},
			}},
		},
	}
	if _, err := client.BatchV1().Jobs(ns).Create(context.Background(), job, metav1.CreateOptions{}); err != nil {
		t.Fatalf("creating the Job: %v", err)
	}
	var group string
	waitFor(t, ns, "the Job controller's PodGroup, named in the Job's pods", func(ctx context.Context) (bool, error) {
		pods, err := client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
		if err != nil || len(pods.Items) == 0 {
			return false, err
		}
		name, ok := podgroup.Of(&pods.Items[0])
		group = name
		return ok, nil
	})
	pgName, ok := podgroup.InTreeName(group)
	if !ok {
		t.Fatalf("the Job's pods belong to %q, want an in-tree PodGroup", group)
	}
	pg, err := getInTreePodGroup(context.Background(), ns, pgName)
	if err != nil {
		t.Fatal(err)
	}
	if g := pg.Spec.SchedulingPolicy.Gang; g == nil || g.MinCount != 3 {
		t.Fatalf("the Job controller's PodGroup has policy %+v, want a gang of 3", pg.Spec.SchedulingPolicy)
	}
	watchWhole(t, ns, group, 3, nil)
	waitForBoundMembers(t, ns, group, 3)
	waitForInTreeCondition(t, ns, pgName, schedulingv1beta1.PodGroupInitiallyScheduled, metav1.ConditionTrue, "Scheduled")
}

// TestInTreeAPINotServed runs the scheduler binary against a control plane of its own that serves no
// in-tree workload API (the default 1.37 cluster): it starts, places a gang of ours whole, says at
// -v=2 that in-tree PodGroups are not served, and logs no error or warning about that API.
func TestInTreeAPINotServed(t *testing.T) {
	env := &envtest.Environment{BinaryAssetsDirectory: assets, CRDDirectoryPaths: []string{filepath.Join(repoRoot, "manifests", "crds")}}
	cfg, err := env.Start()
	if err != nil {
		t.Fatalf("starting a control plane without the workload API: %v", err)
	}
	t.Cleanup(func() { _ = env.Stop() })
	plain, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if served, err := pgcache.InTreeServed(plain.Discovery()); err != nil || served {
		t.Fatalf("the plain control plane serves %s: %v, %v", podgroup.InTreeGroupVersion, served, err)
	}
	user, err := env.AddUser(envtest.User{Name: "admin", Groups: []string{"system:masters"}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	kubeconfig, err := user.KubeConfig()
	if err != nil {
		t.Fatal(err)
	}
	kubeconfigPath := filepath.Join(t.TempDir(), "plain.kubeconfig")
	if err := os.WriteFile(kubeconfigPath, kubeconfig, 0o600); err != nil {
		t.Fatal(err)
	}
	bin, err := binaryPath()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	out := &lockedBuffer{}
	cmd := exec.CommandContext(ctx, bin, "--config="+schedulerConfig(t, kubeconfigPath, shippedProfiles(t)), "--secure-port=0", "--leader-elect=false", "-v=2")
	cmd.Stdout, cmd.Stderr = out, out
	cmd.Cancel = func() error { return cmd.Process.Signal(syscall.SIGTERM) }
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	t.Cleanup(func() { cancel(); <-exited })

	for i := range 2 {
		createNodeIn(t, plain, fmt.Sprintf("plain-%d", i), "2", "8Gi", nil)
	}
	ns := &v1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "plain"}}
	if _, err := plain.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	pg := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": v1alpha1.SchemeGroupVersion.String(), "kind": "PodGroup",
		"metadata": map[string]any{"name": "ours", "namespace": "plain"}, "spec": map[string]any{"minMember": int64(2)},
	}}
	if _, err := dyn.Resource(podGroupGVR).Namespace("plain").Create(ctx, pg, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	for i := range 2 {
		if _, err := plain.CoreV1().Pods("plain").Create(ctx, gangPod("plain", fmt.Sprintf("ours-%d", i), "ours", "1500m"), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	if err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, waitTimeout, true, func(ctx context.Context) (bool, error) {
		pods, err := plain.CoreV1().Pods("plain").List(ctx, metav1.ListOptions{})
		bound := 0
		for _, p := range pods.Items {
			if p.Spec.NodeName != "" {
				bound++
			}
		}
		return err == nil && bound == 2, nil
	}); err != nil {
		t.Fatalf("the gang was not bound on the plain control plane: %v\n%s", err, tail(out.String(), 60))
	}
	cancel()
	<-exited
	log := out.String()
	if !strings.Contains(log, "In-tree PodGroups are not served") {
		t.Errorf("the scheduler did not say that in-tree PodGroups are not served:\n%s", tail(log, 60))
	}
	for _, line := range strings.Split(log, "\n") {
		if (strings.HasPrefix(line, "E") || strings.HasPrefix(line, "W")) && strings.Contains(line, "scheduling.k8s.io") {
			t.Errorf("the scheduler logged about the unserved API: %s", line)
		}
	}
}

// TestInTreeUpstreamScenarios translates upstream's v1.37.2 pod-group scenarios
// (test/integration/scheduler/podgroup, TestPodGroupScheduling) to our scheduler: a 4-CPU node,
// 1-CPU members, the case's names. (Their other cases need what we do not read: CompositePodGroups,
// the in-tree preemption's PodGroupPostFilter, DRA and volumes; "any available members get
// scheduled" and the minCount cases are in TestInTreePodGroups.)
func TestInTreeUpstreamScenarios(t *testing.T) {
	startScheduler(t, schedulerConfig(t, adminKubeconfig, shippedProfiles(t)))
	setup := func(t *testing.T, prefix string) string {
		ns := testNamespace(t)
		createNode(t, prefix+"-0", "4", "8Gi", nil)
		return ns
	}
	blocker := func(t *testing.T, ns, cpu string) {
		p := gangPod(ns, "blocker", "", cpu)
		delete(p.Labels, v1alpha1.PodGroupLabel)
		createPod(t, p)
		waitForPodBound(t, ns, "blocker")
	}
	unschedulable := func(t *testing.T, ns, name string) {
		waitForInTreeCondition(t, ns, name, schedulingv1beta1.PodGroupInitiallyScheduled, metav1.ConditionFalse, schedulingv1beta1.PodGroupReasonUnschedulable)
	}

	t.Run("gang waits for pod group, then for resources, then schedules", func(t *testing.T) {
		ns := setup(t, "up1")
		watchWhole(t, ns, inTree("pg"), 3, nil)
		createInTreeGang(t, ns, "pg", 3, "1")
		waitForEvent(t, ns, "pg-0", podgroup.ReasonPodGroupNotFound, schedulerName)
		blocker(t, ns, "2")
		createInTreePodGroup(t, ns, "pg", inTreeSpec(3))
		unschedulable(t, ns, "pg")
		consistentlyNoneBound(t, time.Second, ns, inTree("pg"))
		forceDelete(t, ns, "blocker")
		waitForBoundMembers(t, ns, inTree("pg"), 3)
		waitForInTreeCondition(t, ns, "pg", schedulingv1beta1.PodGroupInitiallyScheduled, metav1.ConditionTrue, "Scheduled")
	})

	t.Run("minCount is scheduled, but one pod from a gang remains unschedulable until the blocked resources are released", func(t *testing.T) {
		ns := setup(t, "up2")
		watchWhole(t, ns, inTree("pg"), 3, nil)
		blocker(t, ns, "1")
		createInTreePodGroup(t, ns, "pg", inTreeSpec(3))
		createInTreeGang(t, ns, "pg", 4, "1")
		waitForBoundMembers(t, ns, inTree("pg"), 3)
		consistently(t, time.Second, "the fourth member pending", func(ctx context.Context) (bool, error) {
			n, err := boundMembers(ctx, ns, inTree("pg"))
			return n == 3, err
		})
		forceDelete(t, ns, "blocker")
		waitForBoundMembers(t, ns, inTree("pg"), 4)
	})

	t.Run("two gangs competing for the same resources shouldn't deadlock", func(t *testing.T) {
		ns := setup(t, "up3")
		for _, g := range []string{"a", "b"} {
			watchWhole(t, ns, inTree(g), 3, nil)
			createInTreePodGroup(t, ns, g, inTreeSpec(3))
		}
		createInTreeGang(t, ns, "a", 3, "1")
		createInTreeGang(t, ns, "b", 3, "1")
		var placed, other string
		waitFor(t, ns, "one gang bound whole", func(ctx context.Context) (bool, error) {
			for _, pair := range [][2]string{{"a", "b"}, {"b", "a"}} {
				if n, err := boundMembers(ctx, ns, inTree(pair[0])); err != nil || n == 3 {
					placed, other = pair[0], pair[1]
					return err == nil, err
				}
			}
			return false, nil
		})
		consistentlyNoneBound(t, 2*time.Second, ns, inTree(other))
		unschedulable(t, ns, other)
		t.Logf("%s placed, %s waits", placed, other)
	})

	t.Run("pod group interleaving with an individual pod shouldn't deadlock nor livelock", func(t *testing.T) {
		ns := setup(t, "up4")
		watchWhole(t, ns, inTree("pg"), 3, nil)
		blocker(t, ns, "2")
		createInTreePodGroup(t, ns, "pg", inTreeSpec(3))
		createInTreeGang(t, ns, "pg", 3, "1")
		unschedulable(t, ns, "pg")
		consistentlyNoneBound(t, 2*time.Second, ns, inTree("pg"))
	})

	t.Run("basic group waits for pod group, part of it waits for resources, then schedules", func(t *testing.T) {
		ns := setup(t, "up5")
		createInTreeGang(t, ns, "pg", 3, "1500m")
		waitForEvent(t, ns, "pg-0", podgroup.ReasonPodGroupNotFound, schedulerName)
		createInTreePodGroup(t, ns, "pg", inTreeSpec(0))
		waitForBoundMembers(t, ns, inTree("pg"), 2)
		createNode(t, "up5-1", "4", "8Gi", nil)
		waitForBoundMembers(t, ns, inTree("pg"), 3)
	})

	t.Run("gang unschedulable due to lack of space, then scheduled when minCount is decreased", func(t *testing.T) {
		ns := setup(t, "up6")
		watchWhole(t, ns, inTree("pg"), 4, nil)
		createInTreePodGroup(t, ns, "pg", inTreeSpec(5))
		createInTreeGang(t, ns, "pg", 5, "1")
		unschedulable(t, ns, "pg")
		consistentlyNoneBound(t, time.Second, ns, inTree("pg"))
		setMinCount(t, ns, "pg", 4)
		waitForBoundMembers(t, ns, inTree("pg"), 4)
		consistently(t, time.Second, "the fifth member pending", func(ctx context.Context) (bool, error) {
			n, err := boundMembers(ctx, ns, inTree("pg"))
			return n == 4, err
		})
	})
}
