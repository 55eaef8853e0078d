package main

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/custom-scheduler/custom-scheduler/pkg/apis/scheduling/v1alpha1"
	"github.com/custom-scheduler/custom-scheduler/pkg/coscheduling/podgroup"
)

// TestPlaygroundTrainer runs the playground as `make run PLAYGROUND_FLAGS=--operator=trainer` does:
// JobSet v0.12.0 and Kubeflow Trainer v2.2.0 built from their pins (test/interop/tools/jobset, trainer;
// cached after `make interop-operators`, several minutes otherwise) and started with their webhooks, the
// ClusterTrainingRuntime torch-distributed-gang (coscheduling) and the TrainJob trainjob-gang of 4 nodes
// from examples/operators. Trainer writes PodGroup trainjob-gang (minMember 4, owned by the TrainJob),
// JobSet makes the Jobs, and custom-scheduler binds the 4 node pods whole: the PodGroup says
// QuorumReached with 4 scheduled, and no part of the gang is bound for longer than binding takes.
func TestPlaygroundTrainer(t *testing.T) {
	play := startPlayground(t, options{nodeCount: 4, operatorName: "trainer"}, 15*time.Minute)
	ctx, clientset, pgClient := play.ctx, play.clientset, play.pgClient
	const gang, members = "trainjob-gang", 4
	watcher := watchPartial(ctx, t, clientset, "demo", map[string]int{gang: members})
	play.waitReady()

	var (
		pg   *v1alpha1.PodGroup
		pods []corev1.Pod
	)
	// The playground waited up to 90 s for the gang; give it one more minute here.
	err := wait.PollUntilContextTimeout(ctx, time.Second, time.Minute, true, func(ctx context.Context) (bool, error) {
		got, err := pgClient.SchedulingV1alpha1().PodGroups("demo").Get(ctx, gang, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		pg = got
		list, err := clientset.CoreV1().Pods("demo").List(ctx, metav1.ListOptions{LabelSelector: v1alpha1.PodGroupLabel + "=" + gang})
		if err != nil {
			return false, nil
		}
		pods = list.Items
		bound := 0
		for _, p := range pods {
			if p.Spec.NodeName != "" {
				bound++
			}
		}
		c := meta.FindStatusCondition(pg.Status.Conditions, "Scheduled")
		return bound == members && len(pods) == members && pg.Status.Scheduled == members &&
			c != nil && c.Status == metav1.ConditionTrue && c.Reason == podgroup.ReasonQuorumReached, nil
	})
	if err != nil {
		t.Fatalf("TrainJob %s not placed whole within a minute: PodGroup %+v, pods %s", gang, pgSummary(pg), podsSummary(pods))
	}
	// Trainer wrote the PodGroup (owned by the TrainJob), JobSet made the pods, all for custom-scheduler.
	if ref := metav1.GetControllerOf(pg); ref == nil || ref.Kind != "TrainJob" || ref.Name != gang || pg.Spec.MinMember != members {
		t.Errorf("PodGroup %s: controller %v, minMember %d; want TrainJob %s's, %d", gang, ref, pg.Spec.MinMember, gang, members)
	}
	for _, p := range pods {
		if p.Spec.SchedulerName != schedulerName || p.Labels["jobset.sigs.k8s.io/jobset-name"] != gang {
			t.Errorf("pod %s: scheduler %q, JobSet %q; want %s, %s", p.Name, p.Spec.SchedulerName, p.Labels["jobset.sigs.k8s.io/jobset-name"], schedulerName, gang)
		}
	}
	t.Logf("PodGroup %s: %s; pods %s", gang, pgSummary(pg), podsSummary(pods))

	play.stop()
	if n := watcher.violations(); len(n) > 0 {
		t.Errorf("part of a gang stayed bound: %s", strings.Join(n, "; "))
	}
}

func pgSummary(pg *v1alpha1.PodGroup) string {
	if pg == nil {
		return "none"
	}
	s := "minMember " + strconv.Itoa(int(pg.Spec.MinMember)) + ", scheduled " + strconv.Itoa(int(pg.Status.Scheduled))
	if c := meta.FindStatusCondition(pg.Status.Conditions, "Scheduled"); c != nil {
		s += ", Scheduled " + string(c.Status) + " " + c.Reason + ": " + c.Message
	}
	return s
}

func podsSummary(pods []corev1.Pod) string {
	var parts []string
	for _, p := range pods {
		node := p.Spec.NodeName
		if node == "" {
			node = "<pending: " + unschedulableMessage(&p) + ">"
		}
		parts = append(parts, p.Name+" on "+node)
	}
	return "[" + strings.Join(parts, ", ") + "]"
}
