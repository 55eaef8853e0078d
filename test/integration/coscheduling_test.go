package integration

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/component-base/metrics/legacyregistry"
	st "k8s.io/kubernetes/pkg/scheduler/testing"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	"github.com/custom-scheduler/custom-scheduler/pkg/apis/scheduling/v1alpha1"
	"github.com/custom-scheduler/custom-scheduler/pkg/coscheduling/podgroup"
)

var podGroupGVR = schema.GroupVersionResource{Group: v1alpha1.GroupName, Version: "v1alpha1", Resource: "podgroups"}

// coschedulingProfiles enables Coscheduling at every extension point it implements, with short
// timeouts so the tests stay quick.
const coschedulingProfiles = `  - schedulerName: custom-scheduler
    plugins:
      queueSort:
        enabled:
          - name: Coscheduling
        disabled:
          - name: PrioritySort
      # Coscheduling listed just before DynamicResources: the queue then runs its PreEnqueue first in
      # 7 calls of 8 (not 1 of 8), and a member it holds back is passed over on claim events
      # (docs/coscheduling/devices.md, "Profile order").
      preEnqueue:
        enabled:
          - name: Coscheduling
          - name: DynamicResources
        disabled:
          - name: DynamicResources
      preFilter:
        enabled:
          - name: Coscheduling
      filter:
        enabled:
          - name: Coscheduling
      postFilter:
        enabled:
          - name: Coscheduling
        disabled:
          - name: DefaultPreemption
      reserve:
        enabled:
          - name: Coscheduling
      permit:
        enabled:
          - name: Coscheduling
    pluginConfig:
      - name: Coscheduling
        args:
          permitWaitingTimeSeconds: 10
          podGroupBackoffSeconds: 1
`

// coschedulingMultiPointProfiles is the shape examples/coscheduling-profile.yaml documents: multiPoint,
// with the default QueueSort turned off.
const coschedulingMultiPointProfiles = `  - schedulerName: custom-scheduler
    plugins:
      multiPoint:
        enabled:
          - name: Coscheduling
        disabled:
          - name: PrioritySort
          - name: DefaultPreemption
    pluginConfig:
      - name: Coscheduling
        args:
          podGroupBackoffSeconds: 1
`

func dynamicClient(t *testing.T) dynamic.Interface {
	t.Helper()
	dc, err := dynamic.NewForConfig(restConfig)
	if err != nil {
		t.Fatal(err)
	}
	return dc
}

// createPodGroup creates a PodGroup; timeout 0 leaves spec.scheduleTimeoutSeconds unset.
func createPodGroup(t *testing.T, ns, name string, minMember, timeoutSeconds int64) {
	t.Helper()
	spec := map[string]any{"minMember": minMember}
	if timeoutSeconds > 0 {
		spec["scheduleTimeoutSeconds"] = timeoutSeconds
	}
	pg := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": v1alpha1.SchemeGroupVersion.String(),
		"kind":       "PodGroup",
		"metadata":   map[string]any{"name": name, "namespace": ns},
		"spec":       spec,
	}}
	if _, err := dynamicClient(t).Resource(podGroupGVR).Namespace(ns).Create(context.Background(), pg, metav1.CreateOptions{}); err != nil {
		t.Fatalf("creating PodGroup %s/%s: %v", ns, name, err)
	}
}

// gangPod is a member of PodGroup group requesting cpu.
func gangPod(ns, name, group, cpu string) *v1.Pod {
	return st.MakePod().Namespace(ns).Name(name).SchedulerName(schedulerName).
		Label(v1alpha1.PodGroupLabel, group).
		Req(map[v1.ResourceName]string{v1.ResourceCPU: cpu, v1.ResourceMemory: "100Mi"}).Container("pause").Obj()
}

// createGang creates n members of group named <group>-<i>.
func createGang(t *testing.T, ns, group string, n int, cpu string) []string {
	t.Helper()
	names := make([]string, n)
	for i := range n {
		names[i] = fmt.Sprintf("%s-%d", group, i)
		createPod(t, gangPod(ns, names[i], group, cpu))
	}
	return names
}

// heldAnnotation holds a member back: a malformed topology annotation, which Coscheduling refuses
// (InvalidTopologyPolicy) until it is fixed. The member exists, is live and ungated, so it counts
// toward minMember, and its siblings reserve and wait for it at Permit.
const heldAnnotation = "custom-scheduler.io/topology-required"

// createHeldMembers creates n members of group named <group>-<i>; the last `held` of them carry
// heldAnnotation, so they count toward minMember but are not placed until release.
func createHeldMembers(t *testing.T, ns, group string, n, held int, cpu string) []string {
	t.Helper()
	names := make([]string, n)
	for i := range n {
		names[i] = fmt.Sprintf("%s-%d", group, i)
		p := gangPod(ns, names[i], group, cpu)
		if i >= n-held {
			hold(p)
		}
		createPod(t, p)
	}
	return names
}

// hold gives a member heldAnnotation.
func hold(p *v1.Pod) {
	if p.Annotations == nil {
		p.Annotations = map[string]string{}
	}
	p.Annotations[heldAnnotation] = "not a label key!"
}

// release removes heldAnnotation from a member.
func release(t *testing.T, ns, name string) {
	t.Helper()
	patch := fmt.Sprintf(`{"metadata":{"annotations":{%q:null}}}`, heldAnnotation)
	if _, err := client.CoreV1().Pods(ns).Patch(context.Background(), name, types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
		t.Fatalf("releasing %s/%s: %v", ns, name, err)
	}
}

// ungate removes a pod's scheduling gates.
func ungate(t *testing.T, ns, name string) {
	t.Helper()
	pod, err := client.CoreV1().Pods(ns).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	pod.Spec.SchedulingGates = nil
	if _, err := client.CoreV1().Pods(ns).Update(context.Background(), pod, metav1.UpdateOptions{}); err != nil {
		t.Fatalf("removing the scheduling gate of %s/%s: %v", ns, name, err)
	}
}

// boundMembers counts the group's pods that have a node.
func boundMembers(ctx context.Context, ns, group string) (int, error) {
	pods, err := groupPods(ctx, ns, group)
	if err != nil {
		return 0, err
	}
	n := 0
	for _, p := range pods {
		if p.Spec.NodeName != "" {
			n++
		}
	}
	return n, nil
}

func waitForBoundMembers(t *testing.T, ns, group string, want int) {
	t.Helper()
	waitFor(t, ns, fmt.Sprintf("%d members of %s/%s bound", want, ns, group), func(ctx context.Context) (bool, error) {
		n, err := boundMembers(ctx, ns, group)
		return n == want, err
	})
}

func consistentlyNoneBound(t *testing.T, d time.Duration, ns string, groups ...string) {
	t.Helper()
	consistently(t, d, fmt.Sprintf("no member of %v is bound", groups), func(ctx context.Context) (bool, error) {
		for _, g := range groups {
			if n, err := boundMembers(ctx, ns, g); err != nil || n != 0 {
				return false, err
			}
		}
		return true, nil
	})
}

func getPodGroup(t *testing.T, ns, name string) *v1alpha1.PodGroup {
	t.Helper()
	u, err := dynamicClient(t).Resource(podGroupGVR).Namespace(ns).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("getting PodGroup %s/%s: %v", ns, name, err)
	}
	pg := &v1alpha1.PodGroup{}
	if err := runtimeFromUnstructured(u, pg); err != nil {
		t.Fatal(err)
	}
	return pg
}

func runtimeFromUnstructured(u *unstructured.Unstructured, out any) error {
	b, err := u.MarshalJSON()
	if err != nil {
		return err
	}
	return yaml.Unmarshal(b, out)
}

// cosNodes creates n nodes named <prefix>-<i> with the given CPUs.
func cosNodes(t *testing.T, prefix string, n int, cpu string) {
	t.Helper()
	for i := range n {
		createNode(t, fmt.Sprintf("%s-%d", prefix, i), cpu, "8Gi", nil)
	}
}

// TestCoscheduling runs gangs through the real scheduler: all-or-nothing placement, nothing held by
// an infeasible gang, competing gangs, and the Permit timeout.
func TestCoscheduling(t *testing.T) {
	startScheduler(t, schedulerConfig(t, adminKubeconfig, coschedulingProfiles))

	t.Run("a gang of 4 on 4 fitting nodes is bound entirely", func(t *testing.T) {
		ns := testNamespace(t)
		cosNodes(t, "fit", 4, "2")
		createPodGroup(t, ns, "train", 4, 0)
		names := createGang(t, ns, "train", 4, "1500m")
		nodes := map[string]bool{}
		for _, n := range names {
			nodes[waitForPodBound(t, ns, n)] = true
		}
		if len(nodes) != 4 {
			t.Errorf("members landed on %d nodes, want 4 (one per node)", len(nodes))
		}
		// The PodGroup gets QuorumReached; a gang placed at once gets no WaitingForQuorum (it is recorded
		// only for an attempt still waiting 5 s after it started; see TestCoschedulingReleasesOnMemberFailure),
		// and the waiting members get no event.
		waitForEvent(t, ns, "train", podgroup.ReasonQuorumReached, schedulerName)
		// The delayed WaitingForQuorum would come 5 s after the attempt started; it must not come.
		quietUntil := time.Now().Add(6 * time.Second)
		if c := waitForPodGroupCondition(t, ns, "train", podgroup.ReasonQuorumReached); c.Status != metav1.ConditionTrue {
			t.Errorf("Scheduled condition %+v, want True", c)
		}
		assertNoPodEvents(t, ns, names, podgroup.ReasonWaitingForQuorum)
		waitFor(t, ns, "the PodGroup status to say Scheduled with 4 scheduled", func(context.Context) (bool, error) {
			pg := getPodGroup(t, ns, "train")
			return pg.Status.Phase == v1alpha1.PodGroupScheduled && pg.Status.Scheduled == 4 && !pg.Status.ScheduleStartTime.IsZero(), nil
		})
		// No kubelet runs here: play its part and report the members running.
		for _, n := range names {
			setPhase(t, ns, n, v1.PodRunning)
		}
		waitFor(t, ns, "the PodGroup status to say Running with 4 running", func(context.Context) (bool, error) {
			pg := getPodGroup(t, ns, "train")
			return pg.Status.Phase == v1alpha1.PodGroupRunning && pg.Status.Running == 4, nil
		})
		time.Sleep(time.Until(quietUntil))
		assertNoEvents(t, ns, "PodGroup", []string{"train"}, podgroup.ReasonWaitingForQuorum)
		// Members finish one by one. A finished pod leaves the scheduler's informer; the status still
		// counts it, and the Scheduled condition stays QuorumReached: succeeded members count as placed, so
		// a gang finishing member by member is neither BelowQuorum nor Failed.
		setPhase(t, ns, names[0], v1.PodSucceeded)
		setPhase(t, ns, names[1], v1.PodSucceeded)
		waitFor(t, ns, "the PodGroup status to count 2 succeeded and 2 running", func(context.Context) (bool, error) {
			pg := getPodGroup(t, ns, "train")
			return pg.Status.Phase == v1alpha1.PodGroupRunning && pg.Status.Running == 2 && pg.Status.Succeeded == 2 &&
				pg.Status.Scheduled == 2, nil
		})
		if c := waitForPodGroupCondition(t, ns, "train", podgroup.ReasonQuorumReached); c.Status != metav1.ConditionTrue {
			t.Errorf("Scheduled condition %+v while members finish, want QuorumReached True", c)
		}
		setPhase(t, ns, names[2], v1.PodSucceeded)
		setPhase(t, ns, names[3], v1.PodSucceeded)
		waitFor(t, ns, "the PodGroup status to say Finished with 4 succeeded", func(context.Context) (bool, error) {
			pg := getPodGroup(t, ns, "train")
			return pg.Status.Phase == v1alpha1.PodGroupFinished && pg.Status.Succeeded == 4 && pg.Status.Running == 0, nil
		})
	})

	t.Run("members wait for their PodGroup and for each other, holding nothing", func(t *testing.T) {
		ns := testNamespace(t)
		cosNodes(t, "late", 3, "2")
		createPod(t, gangPod(ns, "late-0", "late", "1"))
		ev := waitForEvent(t, ns, "late-0", podgroup.ReasonPodGroupNotFound, schedulerName)
		if !strings.Contains(ev.Message, "does not exist") {
			t.Errorf("PodGroupNotFound event %q does not say why", ev.Message)
		}
		createPodGroup(t, ns, "late", 3, 0)
		createPod(t, gangPod(ns, "late-1", "late", "1"))
		ev = waitForEvent(t, ns, "late-1", podgroup.ReasonWaitingForMembers, schedulerName)
		if !strings.Contains(ev.Message, "of minMember 3") {
			t.Errorf("WaitingForMembers event %q does not count the members", ev.Message)
		}
		consistentlyNoneBound(t, time.Second, ns, "late")
		createPod(t, gangPod(ns, "late-2", "late", "1"))
		waitForBoundMembers(t, ns, "late", 3)
	})

	t.Run("a gang of 5 where 4 fit holds nothing and binds when a node is added", func(t *testing.T) {
		ns := testNamespace(t)
		cosNodes(t, "four", 4, "4")
		createPodGroup(t, ns, "big", 5, 0)
		names := createGang(t, ns, "big", 5, "3")
		for _, n := range names {
			msg := waitForPodUnschedulable(t, ns, n)
			if !strings.Contains(msg, "fit only 4") {
				t.Errorf("member %s: PodScheduled message %q does not say that only 4 fit", n, msg)
			}
		}
		// The check runs once per attempt; the PodGroup reports it.
		waitForEvent(t, ns, "big", podgroup.ReasonGangInfeasible, schedulerName)
		if c := waitForPodGroupCondition(t, ns, "big", podgroup.ReasonGangInfeasible); !strings.Contains(c.Message, "fit only 4") {
			t.Errorf("GangInfeasible condition message %q does not say that only 4 fit", c.Message)
		}
		// A member holding 3 of a node's 4 CPUs would leave no room for this 2-CPU pod anywhere.
		plain := createPod(t, st.MakePod().Namespace(ns).Name("plain").SchedulerName(schedulerName).
			Req(map[v1.ResourceName]string{v1.ResourceCPU: "2"}).Container("pause").Obj())
		waitForPodBound(t, ns, plain.Name)
		consistentlyNoneBound(t, 2*time.Second, ns, "big")

		if err := client.CoreV1().Pods(ns).Delete(context.Background(), plain.Name, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)}); err != nil {
			t.Fatal(err)
		}
		createNode(t, "four-extra", "4", "8Gi", nil)
		waitForBoundMembers(t, ns, "big", 5)
	})

	t.Run("the Permit timeout rejects every waiting member and binds none", func(t *testing.T) {
		ns := testNamespace(t)
		cosNodes(t, "slow", 3, "2")
		createPodGroup(t, ns, "slow", 3, 2)
		// The third member exists but is held (see heldAnnotation): the others reserve and wait.
		createHeldMembers(t, ns, "slow", 3, 1, "1")
		waitForMembersWaiting(t, ns, "slow", 2)
		ev := waitForEvent(t, ns, "slow-0", podgroup.ReasonGangTimedOut, schedulerName)
		if !strings.Contains(ev.Message, "timed out") {
			t.Errorf("GangTimedOut event %q does not say it timed out", ev.Message)
		}
		waitForEvent(t, ns, "slow-1", podgroup.ReasonGangTimedOut, schedulerName)
		consistentlyNoneBound(t, 4*time.Second, ns, "slow")
	})
}

// TestCoschedulingAPI checks the PodGroup CRD: invalid groups are refused by the apiserver, and the
// manifests that scheduler-plugins and Kubeflow publish apply unchanged.
func TestCoschedulingAPI(t *testing.T) {
	ns := testNamespace(t)
	pgs := dynamicClient(t).Resource(podGroupGVR).Namespace(ns)
	ctx := context.Background()

	t.Run("invalid PodGroups are rejected", func(t *testing.T) {
		cases := map[string]struct {
			spec map[string]any
			want string
		}{
			"minMember 0":                 {spec: map[string]any{"minMember": int64(0)}, want: "spec.minMember"},
			"negative minMember":          {spec: map[string]any{"minMember": int64(-2)}, want: "spec.minMember"},
			"negative timeout":            {spec: map[string]any{"minMember": int64(2), "scheduleTimeoutSeconds": int64(-1)}, want: "spec.scheduleTimeoutSeconds"},
			"minMember of the wrong type": {spec: map[string]any{"minMember": "three"}, want: "spec.minMember"},
		}
		i := 0
		for name, tc := range cases {
			i++
			pg := &unstructured.Unstructured{Object: map[string]any{
				"apiVersion": v1alpha1.SchemeGroupVersion.String(), "kind": "PodGroup",
				"metadata": map[string]any{"name": fmt.Sprintf("invalid-%d", i)},
				"spec":     tc.spec,
			}}
			_, err := pgs.Create(ctx, pg, metav1.CreateOptions{})
			if !apierrors.IsInvalid(err) {
				t.Errorf("%s: create returned %v, want an Invalid error", name, err)
				continue
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("%s: error %q does not name %s", name, err, tc.want)
			}
		}
	})

	t.Run("minMember defaults to 1", func(t *testing.T) {
		pg := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": v1alpha1.SchemeGroupVersion.String(), "kind": "PodGroup",
			"metadata": map[string]any{"name": "defaulted"},
			"spec":     map[string]any{},
		}}
		created, err := pgs.Create(ctx, pg, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if v, _, _ := unstructured.NestedInt64(created.Object, "spec", "minMember"); v != 1 {
			t.Errorf("spec.minMember = %d, want the default 1", v)
		}
	})

	t.Run("examples/gang-job.yaml applies", func(t *testing.T) {
		data, err := os.ReadFile(filepath.Join(repoRoot, "examples", "gang-job.yaml"))
		if err != nil {
			t.Fatal(err)
		}
		gvrs := map[string]schema.GroupVersionResource{
			"PodGroup": podGroupGVR,
			"Job":      {Group: "batch", Version: "v1", Resource: "jobs"},
		}
		for _, doc := range strings.Split(string(data), "\n---\n") {
			obj := &unstructured.Unstructured{}
			if err := yaml.Unmarshal([]byte(doc), &obj.Object); err != nil {
				t.Fatal(err)
			}
			gvr, ok := gvrs[obj.GetKind()]
			if !ok {
				t.Fatalf("unexpected kind %q in the example", obj.GetKind())
			}
			if _, err := dynamicClient(t).Resource(gvr).Namespace(ns).Create(ctx, obj, metav1.CreateOptions{}); err != nil {
				t.Errorf("applying the example's %s: %v", obj.GetKind(), err)
			}
		}
	})

	// Shapes from scheduler-plugins' Coscheduling README and Kubeflow's training operator docs.
	published := map[string]string{
		"scheduler-plugins": `apiVersion: scheduling.x-k8s.io/v1alpha1
kind: PodGroup
metadata:
  name: nginx
spec:
  scheduleTimeoutSeconds: 10
  minMember: 3
`,
		"kubeflow": `apiVersion: scheduling.x-k8s.io/v1alpha1
kind: PodGroup
metadata:
  name: pytorch-dist-mnist
  labels:
    training.kubeflow.org/job-name: pytorch-dist-mnist
spec:
  minMember: 3
  minResources:
    cpu: "3"
    memory: 6Gi
    nvidia.com/gpu: "2"
  scheduleTimeoutSeconds: 60
`,
	}
	for name, manifest := range published {
		t.Run("the "+name+" manifest applies unchanged", func(t *testing.T) {
			obj := &unstructured.Unstructured{}
			if err := yaml.Unmarshal([]byte(manifest), &obj.Object); err != nil {
				t.Fatal(err)
			}
			created, err := pgs.Create(ctx, obj, metav1.CreateOptions{})
			if err != nil {
				t.Fatalf("applying the %s manifest: %v", name, err)
			}
			wantSpec, _, _ := unstructured.NestedMap(obj.Object, "spec")
			gotSpec, _, _ := unstructured.NestedMap(created.Object, "spec")
			if fmt.Sprint(wantSpec) != fmt.Sprint(gotSpec) {
				t.Errorf("spec changed on the way in:\nwant %v\ngot  %v", wantSpec, gotSpec)
			}
			// The status that scheduler-plugins' controller writes is accepted as well.
			status := map[string]any{"phase": "Running", "occupiedBy": "0b9f1c1e-0000-4000-8000-000000000001",
				"running": int64(3), "succeeded": int64(0), "failed": int64(0), "scheduleStartTime": "2024-01-02T03:04:05Z"}
			if err := unstructured.SetNestedMap(created.Object, status, "status"); err != nil {
				t.Fatal(err)
			}
			updated, err := pgs.UpdateStatus(ctx, created, metav1.UpdateOptions{})
			if err != nil {
				t.Fatalf("writing a scheduler-plugins status: %v", err)
			}
			gotStatus, _, _ := unstructured.NestedMap(updated.Object, "status")
			if fmt.Sprint(status) != fmt.Sprint(gotStatus) {
				t.Errorf("status changed on the way in:\nwant %v\ngot  %v", status, gotStatus)
			}
		})
	}
}

// TestCoschedulingCompetingGangs runs two gangs that each fit alone but not together, several rounds:
// every round must end with one gang fully bound and the other fully pending, never both partially
// placed nor both timing out in a loop.
func TestCoschedulingCompetingGangs(t *testing.T) {
	startScheduler(t, schedulerConfig(t, adminKubeconfig, coschedulingProfiles))
	// Six nodes with room for one 3-CPU member each; each gang needs four.
	cosNodes(t, "race", 6, "4")
	const rounds = 5
	for round := range rounds {
		t.Run(fmt.Sprintf("round %d", round), func(t *testing.T) {
			ns := testNamespace(t)
			a, b := fmt.Sprintf("a%d", round), fmt.Sprintf("b%d", round)
			if round%2 == 0 {
				// Groups first, members interleaved: each group completes while the other arrives.
				createPodGroup(t, ns, a, 4, 5)
				createPodGroup(t, ns, b, 4, 5)
				for i := range 4 {
					createPod(t, gangPod(ns, fmt.Sprintf("%s-%d", a, i), a, "3"))
					createPod(t, gangPod(ns, fmt.Sprintf("%s-%d", b, i), b, "3"))
				}
			} else {
				// Members first (held back until their group exists), then both groups at once.
				for i := range 4 {
					createPod(t, gangPod(ns, fmt.Sprintf("%s-%d", b, i), b, "3"))
					createPod(t, gangPod(ns, fmt.Sprintf("%s-%d", a, i), a, "3"))
				}
				createPodGroup(t, ns, b, 4, 5)
				createPodGroup(t, ns, a, 4, 5)
			}
			var winner, loser string
			waitFor(t, ns, "one gang fully bound", func(ctx context.Context) (bool, error) {
				na, err := boundMembers(ctx, ns, a)
				if err != nil {
					return false, err
				}
				nb, err := boundMembers(ctx, ns, b)
				if err != nil {
					return false, err
				}
				switch {
				case na == 4:
					winner, loser = a, b
				case nb == 4:
					winner, loser = b, a
				}
				return winner != "", nil
			})
			consistently(t, 3*time.Second, fmt.Sprintf("%s stays fully bound and %s fully pending", winner, loser), func(ctx context.Context) (bool, error) {
				nw, err := boundMembers(ctx, ns, winner)
				if err != nil {
					return false, err
				}
				nl, err := boundMembers(ctx, ns, loser)
				return nw == 4 && nl == 0, err
			})
			for i := range 4 {
				msg := waitForPodUnschedulable(t, ns, fmt.Sprintf("%s-%d", loser, i))
				if !strings.Contains(msg, "PodGroup") {
					t.Errorf("loser member %s-%d: PodScheduled message %q does not explain the gang", loser, i, msg)
				}
			}
			t.Logf("round %d: %s won, %s pending; gang rejections so far: %v", round, winner, loser, coschedulingCounters(t, "custom_scheduler_coscheduling_gang_rejections_total"))
			// Free the nodes for the next round.
			if err := client.CoreV1().Pods(ns).DeleteCollection(context.Background(), metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)}, metav1.ListOptions{}); err != nil {
				t.Fatal(err)
			}
			waitFor(t, ns, "the round's pods to be gone", func(ctx context.Context) (bool, error) {
				pods, err := client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
				return err == nil && len(pods.Items) == 0, err
			})
		})
	}
}

// TestCoschedulingRestart stops the scheduler while members wait at Permit: nothing is bound, and the
// next scheduler places the whole gang once it is complete.
func TestCoschedulingRestart(t *testing.T) {
	ns := testNamespace(t)
	cosNodes(t, "restart", 3, "2")
	config := schedulerConfig(t, adminKubeconfig, coschedulingMultiPointProfiles)
	s := startScheduler(t, config)

	createPodGroup(t, ns, "resume", 3, 30)
	createHeldMembers(t, ns, "resume", 3, 1, "1")
	waitForMembersWaiting(t, ns, "resume", 2)
	consistentlyNoneBound(t, time.Second, ns, "resume")

	s.stop()
	// The last member becomes schedulable while no scheduler runs.
	release(t, ns, "resume-2")
	consistentlyNoneBound(t, time.Second, ns, "resume")

	startScheduler(t, config)
	waitForBoundMembers(t, ns, "resume", 3)
}

// coschedulingCounters reads a counter of the in-process scheduler by its labels other than profile.
func coschedulingCounters(t *testing.T, name string) map[string]float64 {
	t.Helper()
	families, err := legacyregistry.DefaultGatherer.Gather()
	if err != nil {
		t.Fatalf("gathering metrics: %v", err)
	}
	out := map[string]float64{}
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
		for _, m := range f.GetMetric() {
			var key []string
			for _, l := range m.GetLabel() {
				if l.GetName() != "profile" {
					key = append(key, l.GetName()+"="+l.GetValue())
				}
			}
			out[strings.Join(key, ",")] += m.GetCounter().GetValue()
		}
	}
	return out
}

// TestCoschedulingBadArgs runs the binary with invalid Coscheduling args: it must stop at startup and
// name the field.
func TestCoschedulingBadArgs(t *testing.T) {
	cases := map[string]struct {
		args string
		want string
	}{
		"zero Permit wait":  {args: "permitWaitingTimeSeconds: 0", want: "permitWaitingTimeSeconds"},
		"negative back-off": {args: "podGroupBackoffSeconds: -1", want: "podGroupBackoffSeconds"},
		"misspelled field":  {args: "permitWaitingTimeSecond: 5", want: "unknown field"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			profiles := strings.Replace(coschedulingMultiPointProfiles, "podGroupBackoffSeconds: 1", tc.args, 1)
			err, out := runBinary(t, time.Minute, "--config="+schedulerConfig(t, adminKubeconfig, profiles), "--secure-port=0")
			if code := exitCode(err); code == 0 || code == -1 {
				t.Fatalf("exit code %d (%v), want a non-zero exit; output:\n%s", code, err, tail(out, 20))
			}
			if !strings.Contains(out, tc.want) || !strings.Contains(out, "Coscheduling") {
				t.Errorf("output does not name the plugin and the problem (want %q):\n%s", tc.want, tail(out, 20))
			}
		})
	}
}

// TestCoschedulingReleasesOnMemberFailure gets a gang partially reserved, lets another gang take the
// rest of the cluster, then releases the first gang's last members: they find no node, and the whole
// first gang is rejected and releases what it held, instead of holding it until its timeout.
func TestCoschedulingReleasesOnMemberFailure(t *testing.T) {
	startScheduler(t, schedulerConfig(t, adminKubeconfig, coschedulingProfiles))
	ns := testNamespace(t)
	cosNodes(t, "release", 6, "4")
	before := coschedulingCounters(t, "custom_scheduler_coscheduling_gang_rejections_total")["reason=member_unschedulable"]

	createPodGroup(t, ns, "first", 4, 60)
	createHeldMembers(t, ns, "first", 4, 2, "3")
	waitForMembersWaiting(t, ns, "first", 2)
	// An attempt still waiting for its quorum 5 s after it started is reported on the PodGroup.
	if ev := waitForEvent(t, ns, "first", podgroup.ReasonWaitingForQuorum, schedulerName); !strings.Contains(ev.Message, "2 of minMember 4") {
		t.Errorf("WaitingForQuorum event %q does not count the 2 waiting members", ev.Message)
	}

	// Four of six nodes are free: the second gang fits and takes them.
	createPodGroup(t, ns, "second", 4, 60)
	createGang(t, ns, "second", 4, "3")
	waitForBoundMembers(t, ns, "second", 4)

	release(t, ns, "first-2")
	release(t, ns, "first-3")
	ev := waitForEvent(t, ns, "first-0", podgroup.ReasonGangRejected, schedulerName)
	if !strings.Contains(ev.Message, "cannot be placed") {
		t.Errorf("GangRejected event %q does not say a member could not be placed", ev.Message)
	}
	waitForEvent(t, ns, "first-1", podgroup.ReasonGangRejected, schedulerName)
	if got := coschedulingCounters(t, "custom_scheduler_coscheduling_gang_rejections_total")["reason=member_unschedulable"]; got <= before {
		t.Errorf("member_unschedulable rejections = %v, want more than %v", got, before)
	}
	// Released: the two nodes the first gang held take two plain 3-CPU pods.
	for i := range 2 {
		createPod(t, st.MakePod().Namespace(ns).Name(fmt.Sprintf("plain-%d", i)).SchedulerName(schedulerName).
			Req(map[v1.ResourceName]string{v1.ResourceCPU: "3"}).Container("pause").Obj())
	}
	waitForPodBound(t, ns, "plain-0")
	waitForPodBound(t, ns, "plain-1")
	consistently(t, 2*time.Second, "the first gang stays fully pending and the second fully bound", func(ctx context.Context) (bool, error) {
		nf, err := boundMembers(ctx, ns, "first")
		if err != nil {
			return false, err
		}
		ns2, err := boundMembers(ctx, ns, "second")
		return nf == 0 && ns2 == 4, err
	})
}

// waitForPodGroupCondition waits until the PodGroup's Scheduled condition has the reason, and
// returns it.
func waitForPodGroupCondition(t *testing.T, ns, name, reason string) metav1.Condition {
	t.Helper()
	return waitForPodGroupConditionOf(t, ns, name, "Scheduled", reason)
}

// waitForPodGroupConditionOf waits until the PodGroup's condition of the type has the reason, and
// returns it.
func waitForPodGroupConditionOf(t *testing.T, ns, name, condType, reason string) metav1.Condition {
	t.Helper()
	var found metav1.Condition
	waitFor(t, ns, fmt.Sprintf("PodGroup %s/%s to report %s reason %s", ns, name, condType, reason), func(context.Context) (bool, error) {
		for _, c := range getPodGroup(t, ns, name).Status.Conditions {
			if c.Type == condType && c.Reason == reason {
				found = c
				return true, nil
			}
		}
		return false, nil
	})
	return found
}

// waitForMembersWaiting waits until n members of the group are reserved and wait at Permit, as the
// PodGroup's status reports it.
func waitForMembersWaiting(t *testing.T, ns, group string, n int) {
	t.Helper()
	want := fmt.Sprintf("%d of minMember", n)
	waitFor(t, ns, fmt.Sprintf("%d members of %s/%s waiting at Permit", n, ns, group), func(context.Context) (bool, error) {
		for _, c := range getPodGroup(t, ns, group).Status.Conditions {
			if c.Type == "Scheduled" && c.Reason == podgroup.ReasonWaitingForQuorum && strings.HasPrefix(c.Message, want) {
				return true, nil
			}
		}
		return false, nil
	})
}

// assertNoPodEvents checks that none of the pods got an event with the reason.
func assertNoPodEvents(t *testing.T, ns string, pods []string, reason string) {
	t.Helper()
	assertNoEvents(t, ns, "Pod", pods, reason)
}

// assertNoEvents checks that none of the objects of the kind got an event with the reason.
func assertNoEvents(t *testing.T, ns, kind string, names []string, reason string) {
	t.Helper()
	events, err := client.CoreV1().Events(ns).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range events.Items {
		for _, n := range names {
			if e.InvolvedObject.Kind == kind && e.InvolvedObject.Name == n && e.Reason == reason {
				t.Errorf("%s %s got a %s event: %s", kind, n, reason, e.Message)
			}
		}
	}
}
