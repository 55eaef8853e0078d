package integration

// Gang preemption with devices, issue #47:
//   - (a) of several lower-priority pods holding one node's devices, a gang evicts only as many as
//     it needs (before: putting one of them back took all of the node's freed devices off, so
//     every holder of the node was evicted);
//   - (b) the devices a gang's preemption freed are held for its nominated members until they bind:
//     a lone device pod of lower priority is kept off them, and a second gang's whole-gang check
//     counts them taken (before: the DynamicResources plugin never sees a nominated pod, so the
//     first device pod to come took them);
//   - (c) two device kinds competing for the same devices (two DeviceClasses over one driver's
//     devices) are counted together (before: each kind was counted as if it had the devices to
//     itself, the gang was admitted, its attempt failed over and over, and it never preempted).

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/custom-scheduler/custom-scheduler/pkg/coscheduling/podgroup"
)

// gpusPod is extPod asking n of the DRA-backed extended resource.
func (e draEnv) gpusPod(name, group, cpu, role string, n int) *v1.Pod {
	p := e.extPod(name, group, cpu, role)
	q := resource.MustParse(fmt.Sprint(n))
	p.Spec.Containers[0].Resources.Requests[e.extended] = q
	p.Spec.Containers[0].Resources.Limits[e.extended] = q
	return p
}

// classTemplate creates a ResourceClaimTemplate asking one device of class.
func (e draEnv) classTemplate(t *testing.T, name, class string) {
	t.Helper()
	tmpl := &resourcev1.ResourceClaimTemplate{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: e.ns},
		Spec: resourcev1.ResourceClaimTemplateSpec{Spec: resourcev1.ResourceClaimSpec{
			Devices: resourcev1.DeviceClaim{Requests: []resourcev1.DeviceRequest{{
				Name:    "gpu",
				Exactly: &resourcev1.ExactDeviceRequest{DeviceClassName: class, AllocationMode: resourcev1.DeviceAllocationModeExactCount, Count: 1},
			}}},
		}},
	}
	if _, err := client.ResourceV1().ResourceClaimTemplates(e.ns).Create(context.Background(), tmpl, metav1.CreateOptions{}); err != nil {
		t.Fatalf("creating ResourceClaimTemplate %s/%s: %v", e.ns, name, err)
	}
}

// podScheduledMessage is the pod's PodScheduled condition message ("" when none).
func podScheduledMessage(ctx context.Context, ns, name string) (string, string, error) {
	p, err := client.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return "", "", err
	}
	for _, c := range p.Status.Conditions {
		if c.Type == v1.PodScheduled {
			return p.Spec.NodeName, c.Message, nil
		}
	}
	return p.Spec.NodeName, "", nil
}

// TestDRAGangPreemptionFewestHolders is issue #47 (a): one node of 4 GPUs, two low-priority pods of
// no gang holding 2 each, a high-priority gang of 1 asking 2: one holder is evicted, the other stays.
func TestDRAGangPreemptionFewestHolders(t *testing.T) {
	needControllerManager(t)
	ensurePriorityClasses(t)
	startScheduler(t, schedulerConfig(t, adminKubeconfig, shippedProfiles(t)))
	ns := testNamespace(t)
	e := newDRAEnv(t, ns, true)
	node := ns + "-0"
	e.node(t, node, "8", "gang", 4, nil)
	holders := []string{"hold-a", "hold-b"}
	for _, name := range holders {
		createPod(t, prio(e.gpusPod(name, "", "1", "gang", 2), lowPriority, node))
		waitForDRAPodBound(t, ns, name, "a low-priority pod holding 2 GPUs")
	}
	watchNotPartial(t, ns, "hi", 1)
	createPodGroup(t, ns, "hi", 1, 0)
	start := time.Now()
	createPod(t, prio(e.gpusPod("hi-0", "hi", "1", "gang", 2), highPriority, ""))
	var got []string
	waitFor(t, ns, "a holder preempted", func(ctx context.Context) (bool, error) {
		var err error
		got, err = preempted(ctx, ns)
		return len(got) > 0, err
	})
	t.Logf("preempted %v %v after hi came", got, time.Since(start).Round(time.Millisecond))
	consistently(t, 3*time.Second, "exactly one holder preempted", func(ctx context.Context) (bool, error) {
		var err error
		got, err = preempted(ctx, ns)
		return len(got) == 1, err
	})
	victim := got[0]
	stays := holders[0]
	if stays == victim {
		stays = holders[1]
	}
	forceDelete(t, ns, victim)
	freedAt := time.Now()
	waitForDRAGangBound(t, ns, "hi", 1)
	t.Logf("hi bound %v after %s was deleted; %s stays", time.Since(freedAt).Round(time.Millisecond), victim, stays)
	if p, err := client.CoreV1().Pods(ns).Get(context.Background(), stays, metav1.GetOptions{}); err != nil || p.DeletionTimestamp != nil || p.Spec.NodeName != node {
		t.Errorf("the holder not needed was evicted or moved (err %v)", err)
	}
}

// TestDRANominatedGangHoldsDevices is issue #47 (b). Node 0 has 8 CPUs and 2 GPUs, held by a
// low-priority pod; node 1 has 4 CPUs and no GPU, taken by another. A high-priority gang of 2 (one
// member asking the 2 GPUs, one pinned to node 1 asking 3 CPUs) evicts both and is nominated. The
// GPU holder ends first: its GPUs are free while the gang still waits for node 1's CPUs. A lone
// low-priority pod and a low-priority gang of 1, each asking GPUs, come then: neither takes the
// gang's GPUs; the gang binds whole once node 1's victim ends.
func TestDRANominatedGangHoldsDevices(t *testing.T) {
	needControllerManager(t)
	ensurePriorityClasses(t)
	startScheduler(t, schedulerConfig(t, adminKubeconfig, shippedProfiles(t)))
	ns := testNamespace(t)
	e := newDRAEnv(t, ns, true)
	n0, n1 := ns+"-0", ns+"-1"
	e.node(t, n0, "8", "gang", 2, nil)
	e.node(t, n1, "4", "gang", 0, nil)
	createPod(t, prio(e.gpusPod("lo-gpu", "", "1", "gang", 2), lowPriority, n0))
	createPod(t, prio(e.pod("lo-cpu", "", "4", "gang"), lowPriority, n1))
	waitForDRAPodBound(t, ns, "lo-gpu", "a low-priority pod holding node 0's GPUs")
	waitForDRAPodBound(t, ns, "lo-cpu", "a low-priority pod taking node 1's CPUs")

	watchNotPartial(t, ns, "hi", 2)
	createPodGroup(t, ns, "hi", 2, 0)
	createPod(t, prio(e.gpusPod("hi-0", "hi", "1", "gang", 2), highPriority, ""))
	createPod(t, prio(e.pod("hi-1", "hi", "3", "gang"), highPriority, n1))
	waitForPreempted(t, ns, []string{"lo-cpu", "lo-gpu"})
	waitForEvent(t, ns, "hi", podgroup.ReasonPreempting, schedulerName)

	// Node 0's victim ends; its GPUs are free, and the gang still waits for node 1's.
	forceDelete(t, ns, "lo-gpu")
	waitFor(t, ns, "lo-gpu's claims deallocated", func(ctx context.Context) (bool, error) {
		held, err := allocatedFor(ctx, ns, []string{"lo-gpu"})
		return len(held) == 0, err
	})
	if nom := nominated(t, ns, []string{"hi-0"}); nom["hi-0"] != n0 {
		t.Fatalf("hi-0 nominated to %q, want %s", nom["hi-0"], n0)
	}
	createPod(t, prio(e.gpusPod("lone", "", "1", "gang", 1), lowPriority, ""))
	watchNotPartial(t, ns, "two", 1)
	createPodGroup(t, ns, "two", 1, 0)
	createPod(t, prio(e.gpusPod("two-0", "two", "1", "gang", 1), lowPriority, ""))
	consistently(t, 5*time.Second, "the nominated gang's GPUs not taken", func(ctx context.Context) (bool, error) {
		for _, name := range []string{"lone", "two-0", "hi-0", "hi-1"} {
			if node, _, err := podScheduledMessage(ctx, ns, name); err != nil || node != "" {
				return false, err
			}
		}
		return true, nil
	})
	want := "devices on the node are held for PodGroup " + ns + "/hi"
	waitFor(t, ns, "the lone pod to say the devices are held", func(ctx context.Context) (bool, error) {
		_, msg, err := podScheduledMessage(ctx, ns, "lone")
		if strings.Contains(msg, want) {
			t.Logf("lone: %s", msg)
			return true, nil
		}
		return false, err
	})
	_, msg, _ := podScheduledMessage(context.Background(), ns, "two-0")
	t.Logf("two-0: %s", msg)

	forceDelete(t, ns, "lo-cpu")
	freedAt := time.Now()
	got := waitForDRAGangBound(t, ns, "hi", 2)
	t.Logf("hi bound whole on %v, %v after node 1's victim was deleted", got, time.Since(freedAt).Round(time.Millisecond))
	if got["hi-0"] != n0 {
		t.Errorf("hi-0 bound to %s, want %s", got["hi-0"], n0)
	}
	consistently(t, 2*time.Second, "nothing else preempted, the late pods unbound", func(ctx context.Context) (bool, error) {
		for _, name := range []string{"lone", "two-0"} {
			if node, _, err := podScheduledMessage(ctx, ns, name); err != nil || node != "" {
				return false, err
			}
		}
		got, err := preempted(ctx, ns)
		return len(got) == 0, err
	})
}

// TestDRACompetingDeviceKinds is issue #47 (c): one node of 2 GPUs, one held by a low-priority pod;
// a high-priority gang of 2 whose members ask one GPU each through two DeviceClasses over the same
// devices (one by the extended resource of the first class, one by a claim of the second). Counted
// kind by kind the free GPU holds each member; counted together it holds one: the gang preempts the
// holder and binds whole.
func TestDRACompetingDeviceKinds(t *testing.T) {
	needControllerManager(t)
	ensurePriorityClasses(t)
	startScheduler(t, schedulerConfig(t, adminKubeconfig, shippedProfiles(t)))
	ns := testNamespace(t)
	e := newDRAEnv(t, ns, true)
	other := "gpu-too-" + ns + ".example.com"
	createDeviceClass(t, other, e.driver, "")
	e.classTemplate(t, "gpu-too", other)
	node := ns + "-0"
	e.node(t, node, "8", "gang", 2, nil)
	createPod(t, prio(e.gpusPod("lo", "", "1", "gang", 1), lowPriority, node))
	waitForDRAPodBound(t, ns, "lo", "a low-priority pod holding 1 of 2 GPUs")

	watchNotPartial(t, ns, "hi", 2)
	createPodGroup(t, ns, "hi", 2, 0)
	start := time.Now()
	createPod(t, prio(e.gpusPod("hi-0", "hi", "1", "gang", 1), highPriority, ""))
	p := e.pod("hi-1", "hi", "1", "gang")
	p.Spec.ResourceClaims = []v1.PodResourceClaim{{Name: "gpu", ResourceClaimTemplateName: ptr.To("gpu-too")}}
	p.Spec.Containers[0].Resources.Claims = []v1.ResourceClaim{{Name: "gpu"}}
	createPod(t, prio(p, highPriority, ""))
	waitForPreempted(t, ns, []string{"lo"})
	t.Logf("lo preempted %v after hi came", time.Since(start).Round(time.Millisecond))
	forceDelete(t, ns, "lo")
	freedAt := time.Now()
	got := waitForDRAGangBound(t, ns, "hi", 2)
	t.Logf("hi bound whole on %v, %v after lo was deleted", got, time.Since(freedAt).Round(time.Millisecond))
	consistentlyNotPartial(t, ns, "hi", 2)
}
