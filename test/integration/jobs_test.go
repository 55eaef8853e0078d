package integration

import (
	"context"
	"fmt"
	"sort"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	st "k8s.io/kubernetes/pkg/scheduler/testing"
	"k8s.io/utils/ptr"

	"github.com/custom-scheduler/custom-scheduler/pkg/apis/scheduling/v1alpha1"
	"github.com/custom-scheduler/custom-scheduler/pkg/coscheduling/podgroup"
)

// TestJobGangs runs gangs whose pods belong to indexed Jobs, with the real Job controller creating and
// replacing them, as in a cluster. Throughout each case a watch checks that no bind ever leaves the
// gang with between 1 and minMember-1 live members bound.
func TestJobGangs(t *testing.T) {
	needControllerManager(t)
	startScheduler(t, schedulerConfig(t, adminKubeconfig, coschedulingProfiles))

	t.Run("a failed worker is recreated by the Job controller and the gang is whole again", func(t *testing.T) {
		ns := testNamespace(t)
		cosNodes(t, "jobfail", 3, "2")
		createPodGroup(t, ns, "train", 3, 0)
		watchNotPartial(t, ns, "train", 3)
		createGangJob(t, ns, "train", 3, 3, "1500m")
		first := waitForGroupLiveBound(t, ns, "train", 3)

		// Worker 1 exits with an error: a kubelet would report the pod Failed through the status
		// subresource; play its part.
		failed := first["1"]
		setPhase(t, ns, failed.Name, v1.PodFailed)

		// The Job controller (not this test) creates a new pod for index 1, after its failure backoff;
		// the replacement completes the quorum with the two running workers.
		again := waitForGroupLiveBound(t, ns, "train", 3)
		replacement := again["1"]
		if replacement.Name == failed.Name {
			t.Fatalf("index 1 is still pod %s", failed.Name)
		}
		if owner := metav1.GetControllerOf(&replacement); owner == nil || owner.Kind != "Job" || owner.Name != "train" {
			t.Errorf("replacement %s is controlled by %+v, want Job train", replacement.Name, owner)
		}
		for _, index := range []string{"0", "2"} {
			if again[index].Name != first[index].Name {
				t.Errorf("index %s moved from pod %s to %s; only index 1 failed", index, first[index].Name, again[index].Name)
			}
		}
		waitFor(t, ns, "the Job to count the failure and 3 active pods", func(ctx context.Context) (bool, error) {
			job, err := client.BatchV1().Jobs(ns).Get(ctx, "train", metav1.GetOptions{})
			if err != nil {
				return false, err
			}
			return job.Status.Failed == 1 && job.Status.Active == 3, nil
		})
		consistentlyNotPartial(t, ns, "train", 3)
	})

	t.Run("two failed workers' replacements are placed together or not at all", func(t *testing.T) {
		ns := testNamespace(t)
		cosNodes(t, "jobtwo", 3, "2")
		createPodGroup(t, ns, "train", 3, 0)
		watchNotPartial(t, ns, "train", 3)
		createGangJob(t, ns, "train", 3, 3, "1500m")
		first := waitForGroupLiveBound(t, ns, "train", 3)

		// Workers 0 and 1 fail; another pod takes one of the two nodes they freed before the Job
		// controller's failure backoff ends, so only one replacement would fit.
		setPhase(t, ns, first["0"].Name, v1.PodFailed)
		setPhase(t, ns, first["1"].Name, v1.PodFailed)
		createPod(t, st.MakePod().Namespace(ns).Name("other").SchedulerName(schedulerName).
			Req(map[v1.ResourceName]string{v1.ResourceCPU: "1500m"}).Container("pause").Obj())
		waitForPodBound(t, ns, "other")
		waitFor(t, ns, "the Job controller to replace both workers", func(ctx context.Context) (bool, error) {
			pods, err := groupPods(ctx, ns, "train")
			return len(pods) == 5, err
		})
		consistently(t, 3*time.Second, "one replacement is not bound alone", func(ctx context.Context) (bool, error) {
			n, err := groupLiveBound(ctx, ns, "train")
			return n == 1, err
		})

		// The other pod goes: both replacements fit and complete the gang.
		forceDelete(t, ns, "other")
		waitForGroupLiveBound(t, ns, "train", 3)
		consistentlyNotPartial(t, ns, "train", 3)
	})

	t.Run("a Job with parallelism above minMember binds at least minMember at once", func(t *testing.T) {
		ns := testNamespace(t)
		// Room for two of the four workers: under the quorum of 3, so none binds.
		cosNodes(t, "jobquorum", 2, "2")
		createPodGroup(t, ns, "train", 3, 0)
		watchNotPartial(t, ns, "train", 3)
		createGangJob(t, ns, "train", 4, 4, "1500m")
		waitFor(t, ns, "the Job controller to create 4 workers", func(ctx context.Context) (bool, error) {
			pods, err := groupPods(ctx, ns, "train")
			return len(pods) == 4, err
		})
		waitForPodGroupCondition(t, ns, "train", podgroup.ReasonGangInfeasible)
		consistentlyNoGroupLiveBound(t, 3*time.Second, ns, "train")

		// A third node: the quorum fits and binds together; the fourth worker has no room yet.
		createNode(t, "jobquorum-2", "2", "8Gi", nil)
		waitForGroupLiveBound(t, ns, "train", 3)
		consistently(t, 2*time.Second, "the fourth worker stays pending", func(ctx context.Context) (bool, error) {
			n, err := groupLiveBound(ctx, ns, "train")
			return n == 3, err
		})

		// A fourth node: the last worker joins the running gang alone, as a member above the quorum.
		createNode(t, "jobquorum-3", "2", "8Gi", nil)
		waitForGroupLiveBound(t, ns, "train", 4)
		consistentlyNotPartial(t, ns, "train", 3)
	})

	t.Run("an indexed Job's next wave is placed whole once the first has finished", func(t *testing.T) {
		ns := testNamespace(t)
		cosNodes(t, "jobwave", 4, "2")
		createPodGroup(t, ns, "train", 4, 0)
		watchNotPartial(t, ns, "train", 4)
		// Completions 8, parallelism 4: two waves of 4 workers, one gang run each.
		createGangJob(t, ns, "train", 4, 8, "1500m")
		first := waitForGroupLiveBound(t, ns, "train", 4)

		// Other work takes half of two nodes: once the first wave is done, two of the four
		// next workers fit, under the quorum.
		for i, node := range []string{"jobwave-0", "jobwave-1"} {
			createPod(t, st.MakePod().Namespace(ns).Name(fmt.Sprintf("other-%d", i)).Node(node).
				Req(map[v1.ResourceName]string{v1.ResourceCPU: "1"}).Container("pause").Obj())
		}
		// The first wave succeeds at once (within the Job controller's one-second batch of pod
		// updates): the run ends, and the Job controller creates the next wave.
		for _, p := range first {
			setPhase(t, ns, p.Name, v1.PodSucceeded)
		}
		waitFor(t, ns, "the Job controller to create the next wave", func(ctx context.Context) (bool, error) {
			pods, err := groupPods(ctx, ns, "train")
			return len(pods) == 8, err
		})
		// The first wave's four succeeded workers count for nothing: the run they were in ended.
		consistentlyNoGroupLiveBound(t, 3*time.Second, ns, "train")

		// The other work ends: the wave fits and binds whole.
		forceDelete(t, ns, "other-0", "other-1")
		waitForGroupLiveBound(t, ns, "train", 4)
		consistentlyNotPartial(t, ns, "train", 4)
	})
}

// createGangJob creates an indexed Job whose pods join PodGroup group (the Job is named after it), as
// examples/gang-job.yaml does, and deletes it with its pods when the test ends.
func createGangJob(t *testing.T, ns, group string, parallelism, completions int32, cpu string) {
	t.Helper()
	job := &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Name: group, Namespace: ns},
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
					Containers: []v1.Container{{
						Name:  "worker",
						Image: "registry.k8s.io/pause:3.10",
						Resources: v1.ResourceRequirements{Requests: v1.ResourceList{
							v1.ResourceCPU:    resource.MustParse(cpu),
							v1.ResourceMemory: resource.MustParse("100Mi"),
						}},
					}},
				},
			},
		},
	}
	if _, err := client.BatchV1().Jobs(ns).Create(context.Background(), job, metav1.CreateOptions{}); err != nil {
		t.Fatalf("creating Job %s/%s: %v", ns, group, err)
	}
	// Runs before testNamespace's cleanup force-deletes the pods, so the Job does not replace them.
	t.Cleanup(func() {
		err := client.BatchV1().Jobs(ns).Delete(context.Background(), group, metav1.DeleteOptions{PropagationPolicy: ptr.To(metav1.DeletePropagationBackground)})
		if err != nil && !apierrors.IsNotFound(err) {
			t.Errorf("deleting Job %s/%s: %v", ns, group, err)
		}
	})
}

// groupPods lists the group's pods.
func groupPods(ctx context.Context, ns, group string) ([]v1.Pod, error) {
	pods, err := client.CoreV1().Pods(ns).List(ctx, groupListOptions(ns, group))
	if err != nil {
		return nil, err
	}
	out := pods.Items[:0]
	for _, p := range pods.Items {
		if inGroup(&p, group) {
			out = append(out, p)
		}
	}
	return out, nil
}

// groupListOptions select a group's pods: ours by label; an in-tree group's (group is
// podgroup.InTreePrefix and its name) by nothing, for inGroup to pick them from the namespace's
// (spec.schedulingGroup has no selector).
func groupListOptions(ns, group string) metav1.ListOptions {
	if _, inTree := podgroup.InTreeName(group); inTree {
		return metav1.ListOptions{}
	}
	if _, lws := lwsGroups.Load(ns + "/" + group); lws {
		return metav1.ListOptions{} // a LeaderWorkerSet replica's pods carry no PodGroup label
	}
	return metav1.ListOptions{LabelSelector: v1alpha1.PodGroupLabel + "=" + group}
}

// inGroup reports whether the pod is a member of the group, as the scheduler sees it.
func inGroup(p *v1.Pod, group string) bool {
	if _, lws := lwsGroups.Load(p.Namespace + "/" + group); lws { // read from LWS's own labels, not as the scheduler reads them
		return p.Labels[podgroup.LWSNameLabel]+"-"+p.Labels[podgroup.LWSGroupIndexLabel] == group
	}
	name, ok := podgroup.Of(p)
	return ok && name == group
}

// liveAndBound: the pod holds a node and counts for its gang (not deleted, not finished).
func liveAndBound(p *v1.Pod) bool {
	return p.Spec.NodeName != "" && p.DeletionTimestamp == nil && p.Status.Phase != v1.PodSucceeded && p.Status.Phase != v1.PodFailed
}

// groupLiveBound counts the group's live bound pods.
func groupLiveBound(ctx context.Context, ns, group string) (int, error) {
	pods, err := groupPods(ctx, ns, group)
	n := 0
	for i := range pods {
		if liveAndBound(&pods[i]) {
			n++
		}
	}
	return n, err
}

// waitForGroupLiveBound waits until exactly want of the group's pods are live and bound, and returns
// them by Job completion index.
func waitForGroupLiveBound(t *testing.T, ns, group string, want int) map[string]v1.Pod {
	t.Helper()
	var byIndex map[string]v1.Pod
	waitFor(t, ns, fmt.Sprintf("%d live members of %s/%s bound", want, ns, group), func(ctx context.Context) (bool, error) {
		pods, err := groupPods(ctx, ns, group)
		if err != nil {
			return false, err
		}
		byIndex = map[string]v1.Pod{}
		for _, p := range pods {
			if liveAndBound(&p) {
				byIndex[p.Annotations[batchv1.JobCompletionIndexAnnotation]] = p
			}
		}
		return len(byIndex) == want, nil
	})
	return byIndex
}

func consistentlyNoGroupLiveBound(t *testing.T, d time.Duration, ns, group string) {
	t.Helper()
	consistently(t, d, fmt.Sprintf("no member of %s/%s is bound", ns, group), func(ctx context.Context) (bool, error) {
		n, err := groupLiveBound(ctx, ns, group)
		return n == 0, err
	})
}

// bindGrace is how long a bind may leave a gang partially bound: a gang that reached its quorum binds
// its members one API call at a time, so the others follow within moments (seconds on a busy machine).
const bindGrace = 5 * time.Second

// sortedTrue lists the keys whose value is true.
func sortedTrue(m map[string]bool) []string {
	var out []string
	for k, ok := range m {
		if ok {
			out = append(out, k)
		}
	}
	sort.Strings(out)
	return out
}
