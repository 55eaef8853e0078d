package integration

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	st "k8s.io/kubernetes/pkg/scheduler/testing"
	"k8s.io/utils/ptr"

	"github.com/custom-scheduler/custom-scheduler/pkg/apis/scheduling/v1alpha1"
	"github.com/custom-scheduler/custom-scheduler/pkg/coscheduling/podgroup"
)

// What counts toward a gang's quorum (docs/coscheduling/quorum.md, "What counts toward the quorum"), against
// the real apiserver with the shipped profile: only the pods of our scheduler, and, of those that
// finished, only the members of the run that succeeded.

// foreignPod is a pod of group for the default scheduler, created bound to node (as a pod the default
// scheduler placed, or one created with its node set).
func foreignPod(ns, name, group, cpu, node string) *v1.Pod {
	p := gangPod(ns, name, group, cpu)
	p.Spec.SchedulerName = v1.DefaultSchedulerName
	p.Spec.NodeName = node
	return p
}

// TestOursOtherSchedulersPodNotCounted: a PodGroup of minMember 3 with one pod the default scheduler
// placed and three of ours of which only two fit. The default scheduler's pod is no member of ours:
// our two must not be reserved on its count (held at Permit for the whole timeout), the status must
// not say the quorum is reached, and once a node is added our three bind together.
func TestOursOtherSchedulersPodNotCounted(t *testing.T) {
	startScheduler(t, schedulerConfig(t, adminKubeconfig, shippedProfiles(t)))
	ns := testNamespace(t)
	cosNodes(t, "mixed", 3, "2")
	// The default scheduler's pod takes one of the three nodes: room for two of ours.
	createPod(t, foreignPod(ns, "theirs", "mixed", "1500m", "mixed-0"))
	// (The scheduler's cache sees the bound pod before our members are checked.)
	time.Sleep(time.Second)
	watchWhole(t, ns, "mixed", 3, nil)
	createPodGroup(t, ns, "mixed", 3, 0)
	ourPods := createMembers(t, ns, "mixed", "ours", 3, "1500m")

	consistently(t, 4*time.Second, "none of ours is held at Permit and the status does not count the default scheduler's pod", func(ctx context.Context) (bool, error) {
		status := getPodGroup(t, ns, "mixed").Status
		if c := findScheduled(status.Conditions); c != nil && (c.Reason == podgroup.ReasonQuorumReached || c.Reason == podgroup.ReasonWaitingForQuorum) {
			return false, fmt.Errorf("the PodGroup says %s: %q (waiting %d) while only two of our three members fit", c.Reason, c.Message, status.Waiting)
		}
		if status.Waiting != 0 {
			return false, fmt.Errorf("%d of our members wait at Permit", status.Waiting)
		}
		return true, nil
	})
	c := waitForPodGroupCondition(t, ns, "mixed", podgroup.ReasonGangInfeasible)
	t.Logf("Scheduled: %s: %s", c.Reason, c.Message)
	consistentlyNoLiveBound(t, time.Second, ns, "mixed", ourPods)
	if st := getPodGroup(t, ns, "mixed").Status; st.Scheduled != 0 {
		t.Errorf("status.scheduled = %d, want 0: the default scheduler's pod is not ours", st.Scheduled)
	}

	// Room for the third: our three bind together, and the status counts them (not the fourth pod).
	createNode(t, "mixed-3", "2", "8Gi", nil)
	waitForLiveBound(t, ns, "mixed", ourPods, 3)
	c = waitForPodGroupCondition(t, ns, "mixed", podgroup.ReasonQuorumReached)
	if !strings.HasPrefix(c.Message, "3 of minMember 3") {
		t.Errorf("QuorumReached says %q, want our 3 counted", c.Message)
	}
}

// TestOursFinishedMembersKeepTheQuorum: an indexed Job of four workers in a gang of four, bound whole;
// two workers succeed, one fails, one runs. The Job controller's replacement of the failed worker is
// placed with the running worker and the two that succeeded (the finished-member rule), the status
// agrees, and the Job completes. Then a new Job in the same PodGroup (a new run) counts nothing of the
// first one's succeeded workers: it is placed whole or not at all.
func TestOursFinishedMembersKeepTheQuorum(t *testing.T) {
	needControllerManager(t)
	startScheduler(t, schedulerConfig(t, adminKubeconfig, shippedProfiles(t)))
	ns := testNamespace(t)
	cosNodes(t, "early", 4, "2")
	createPodGroup(t, ns, "train", 4, 0)
	// The failed worker is the test's doing: it leaves 1 live member bound and 2 succeeded (3 of 4)
	// until its replacement binds.
	var failed string
	watchWhole(t, ns, "train", 4, func(name string) bool { return name == failed })
	createGangJob(t, ns, "train", 4, 4, "1500m")
	first := waitForGroupLiveBound(t, ns, "train", 4)

	// Indices 0 and 1 finish first; index 2 fails; index 3 runs on.
	setPhase(t, ns, first["0"].Name, v1.PodSucceeded)
	setPhase(t, ns, first["1"].Name, v1.PodSucceeded)
	failed = first["2"].Name
	setPhase(t, ns, failed, v1.PodFailed)
	setPhase(t, ns, first["3"].Name, v1.PodRunning)

	// The Job controller (after its failure back-off) replaces index 2; the replacement is placed.
	var replacement v1.Pod
	waitFor(t, ns, "the replacement of index 2 bound", func(ctx context.Context) (bool, error) {
		pods, err := groupPods(ctx, ns, "train")
		if err != nil {
			return false, err
		}
		for _, p := range pods {
			if p.Annotations[batchv1.JobCompletionIndexAnnotation] == "2" && p.Name != failed && liveAndBound(&p) {
				replacement = p
				return true, nil
			}
		}
		return false, nil
	})
	c := waitForPodGroupCondition(t, ns, "train", podgroup.ReasonQuorumReached)
	if !strings.HasPrefix(c.Message, "2 of minMember 4") || !strings.Contains(c.Message, "2 succeeded") {
		t.Errorf("QuorumReached says %q, want 2 live members and 2 succeeded counted", c.Message)
	}

	// The last two finish: the Job completes, the PodGroup is Finished.
	setPhase(t, ns, replacement.Name, v1.PodSucceeded)
	setPhase(t, ns, first["3"].Name, v1.PodSucceeded)
	waitFor(t, ns, "the Job to complete", func(ctx context.Context) (bool, error) {
		job, err := client.BatchV1().Jobs(ns).Get(ctx, "train", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		for _, c := range job.Status.Conditions {
			if c.Type == batchv1.JobComplete && c.Status == v1.ConditionTrue {
				return true, nil
			}
		}
		return false, nil
	})
	waitFor(t, ns, "the PodGroup Finished", func(context.Context) (bool, error) {
		return getPodGroup(t, ns, "train").Status.Phase == v1alpha1.PodGroupFinished, nil
	})

	// A new run: another Job in the same PodGroup, while the first one's four succeeded workers
	// remain. A plain pod takes one node: three of the four new workers fit, and none binds (the
	// first run's succeeded workers are not this run's).
	createPod(t, st.MakePod().Namespace(ns).Name("other").SchedulerName(schedulerName).
		Req(map[v1.ResourceName]string{v1.ResourceCPU: "1500m"}).Container("pause").Obj())
	waitForPodBound(t, ns, "other")
	createGangJobNamed(t, ns, "train2", "train", 4, 4, "1500m")
	waitFor(t, ns, "the second Job's 4 workers", func(ctx context.Context) (bool, error) {
		pods, err := groupPods(ctx, ns, "train")
		if err != nil {
			return false, err
		}
		n := 0
		for _, p := range pods {
			if podgroup.IsLive(&p) {
				n++
			}
		}
		return n == 4, nil
	})
	waitForPodGroupCondition(t, ns, "train", podgroup.ReasonGangInfeasible)
	consistentlyNoGroupLiveBound(t, 3*time.Second, ns, "train")
	forceDelete(t, ns, "other")
	waitForGroupLiveBound(t, ns, "train", 4)
}

// createGangJobNamed is createGangJob for a Job whose name is not its PodGroup's.
func createGangJobNamed(t *testing.T, ns, name, group string, parallelism, completions int32, cpu string) {
	t.Helper()
	job := &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: batchv1.JobSpec{
			CompletionMode: ptr.To(batchv1.IndexedCompletion),
			Parallelism:    ptr.To(parallelism),
			Completions:    ptr.To(completions),
			BackoffLimit:   ptr.To[int32](6),
			Template: v1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{v1alpha1.PodGroupLabel: group}},
				Spec: v1.PodSpec{
					SchedulerName: schedulerName,
					RestartPolicy: v1.RestartPolicyNever,
					Containers:    []v1.Container{{Name: "worker", Image: "registry.k8s.io/pause:3.10", Resources: gangPod(ns, "x", group, cpu).Spec.Containers[0].Resources}},
				},
			},
		},
	}
	if _, err := client.BatchV1().Jobs(ns).Create(context.Background(), job, metav1.CreateOptions{}); err != nil {
		t.Fatalf("creating Job %s/%s: %v", ns, name, err)
	}
	t.Cleanup(func() {
		_ = client.BatchV1().Jobs(ns).Delete(context.Background(), name, metav1.DeleteOptions{PropagationPolicy: ptr.To(metav1.DeletePropagationBackground)})
	})
}

// TestOursNoStateForOtherSchedulersJobs: where the Job controller writes in-tree PodGroups
// (WorkloadWithJob), every pod of every Job carries spec.schedulingGroup, the default scheduler's
// too. Their groups are none of ours: the plugin keeps no state for them (its tracked_pod_groups gauge
// counts only our gang), however many such Jobs are bound.
func TestOursNoStateForOtherSchedulersJobs(t *testing.T) {
	needControllerManager(t)
	startScheduler(t, schedulerConfig(t, adminKubeconfig, shippedProfiles(t)))
	ns := testNamespace(t)
	cosNodes(t, "foreignjobs", 2, "4")
	// One gang of ours, bound: the gauge is this scheduler's, at least 1. Groups of earlier tests in
	// this apiserver may be tracked too (no namespace controller runs here, so their namespaces stay,
	// and a Job recreates its pods until it is gone): what counts is that the Jobs below add nothing.
	createPodGroup(t, ns, "ours", 2, 0)
	createGang(t, ns, "ours", 2, "500m")
	waitForBoundMembers(t, ns, "ours", 2)
	const gauge = "custom_scheduler_coscheduling_tracked_pod_groups"
	var base float64
	waitFor(t, ns, gauge+" to settle at 1 or more", func(context.Context) (bool, error) {
		before, ok := gaugeValue(t, gauge, schedulerName)
		time.Sleep(2 * time.Second)
		after, _ := gaugeValue(t, gauge, schedulerName)
		base = after
		return ok && before >= 1 && after == before, nil
	})
	if base != 1 {
		t.Logf("%s{profile=%q} = %v with our one gang: groups of earlier tests are tracked too", gauge, schedulerName, base)
	}

	// Five Jobs of the default scheduler (none runs here: the test binds their pods as it would).
	const jobs = 5
	for i := range jobs {
		job := &batchv1.Job{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("theirs-%d", i)},
			Spec: batchv1.JobSpec{
				Parallelism: ptr.To[int32](1), Completions: ptr.To[int32](1),
				Template: v1.PodTemplateSpec{Spec: v1.PodSpec{
					SchedulerName: v1.DefaultSchedulerName, RestartPolicy: v1.RestartPolicyNever,
					Containers: []v1.Container{{Name: "pause", Image: "pause", Resources: gangPod(ns, "x", "", "100m").Spec.Containers[0].Resources}},
				}},
			},
		}
		if _, err := client.BatchV1().Jobs(ns).Create(context.Background(), job, metav1.CreateOptions{}); err != nil {
			t.Fatalf("creating Job %s: %v", job.Name, err)
		}
	}
	bound := map[string]bool{}
	waitFor(t, ns, fmt.Sprintf("the %d default-scheduler Jobs' pods, each in an in-tree PodGroup, bound", jobs), func(ctx context.Context) (bool, error) {
		pods, err := client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		for _, p := range pods.Items {
			if p.Spec.SchedulerName != v1.DefaultSchedulerName {
				continue
			}
			if _, inGroup := podgroup.Of(&p); !inGroup {
				return false, fmt.Errorf("pod %s of a Job names no group: the Job controller does not write in-tree PodGroups here", p.Name)
			}
			if p.Spec.NodeName == "" {
				err := client.CoreV1().Pods(ns).Bind(ctx, &v1.Binding{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: p.Name, UID: p.UID},
					Target: v1.ObjectReference{Kind: "Node", Name: "foreignjobs-0"}}, metav1.CreateOptions{})
				if err != nil {
					return false, nil
				}
			}
			bound[p.Name] = true
		}
		return len(bound) == jobs, nil
	})
	consistently(t, 3*time.Second, "the plugin tracks only our gang", func(context.Context) (bool, error) {
		got, _ := gaugeValue(t, gauge, schedulerName)
		if got > base {
			return false, fmt.Errorf("%s{profile=%q} = %v, want at most %v, its value before (the default scheduler's Jobs are no gangs of ours)", gauge, schedulerName, got, base)
		}
		return true, nil
	})
}
