package integration

// Gang preemption for devices (Dynamic Resource Allocation): a high-priority gang whose members claim
// GPUs evicts the lower-priority pods whose claims hold the GPUs it lacks, gangs whole, and evicts
// nothing when the GPUs cannot be freed, whatever CPU it could free.
//
// What frees a victim's devices here: nothing in the scheduler. Once a victim is gone (the test
// deletes it, as a kubelet confirming its end would), the resourceclaim controller of
// kube-controller-manager drops it from its claims' status.reservedFor, clears the allocation of a
// claim nobody reserves any more and removes its finalizer; a claim made for the pod (from a
// template, or by the scheduler for a DRA-backed extended resource, owned by the pod) is then
// deleted (by that controller, or by the garbage collector once the pod is gone). Without the
// controller the claims stay allocated to deleted pods and the devices never free up, so these tests
// run it (needControllerManager).
//
// Which cases need the change (before it, the victims' devices are not counted as freed):
//   - "evicted whole" (both ways of asking): the gang is refused ("does not fit even if all ...
//     were evicted"), nothing is evicted, and it never binds.
//   - "cannot be freed" passes before and after: it keeps "never evicts for CPU alone".

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/custom-scheduler/custom-scheduler/pkg/coscheduling/podgroup"
)

// prio gives a pod a priority class and, when node is not "", pins it to that node.
func prio(p *v1.Pod, class, node string) *v1.Pod {
	p.Spec.PriorityClassName = class
	if node != "" {
		p.Spec.NodeSelector[v1.LabelHostname] = node
	}
	return p
}

// sharedClaim creates a ResourceClaim asking one device of the class, for pods to share.
func (e draEnv) sharedClaim(t *testing.T, name string) {
	t.Helper()
	claim := &resourcev1.ResourceClaim{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: e.ns},
		Spec: resourcev1.ResourceClaimSpec{Devices: resourcev1.DeviceClaim{Requests: []resourcev1.DeviceRequest{{
			Name:    "gpu",
			Exactly: &resourcev1.ExactDeviceRequest{DeviceClassName: e.class, AllocationMode: resourcev1.DeviceAllocationModeExactCount, Count: 1},
		}}}},
	}
	if _, err := client.ResourceV1().ResourceClaims(e.ns).Create(context.Background(), claim, metav1.CreateOptions{}); err != nil {
		t.Fatalf("creating ResourceClaim %s/%s: %v", e.ns, name, err)
	}
}

// sharedClaimPod is a pod on the test's <role> nodes asking cpu and the ResourceClaim claim.
func (e draEnv) sharedClaimPod(name, cpu, role, claim string) *v1.Pod {
	p := e.pod(name, "", cpu, role)
	p.Spec.ResourceClaims = []v1.PodResourceClaim{{Name: "gpu", ResourceClaimName: ptr.To(claim)}}
	p.Spec.Containers[0].Resources.Claims = []v1.ResourceClaim{{Name: "gpu"}}
	return p
}

// allocatedFor lists the namespace's allocated claims reserved by one of the pods (sorted names).
func allocatedFor(ctx context.Context, ns string, pods []string) ([]string, error) {
	claims, err := client.ResourceV1().ResourceClaims(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	var out []string
	for _, c := range claims.Items {
		if c.Status.Allocation == nil {
			continue
		}
		for _, r := range c.Status.ReservedFor {
			if slices.Contains(pods, r.Name) {
				out = append(out, c.Name)
				break
			}
		}
	}
	slices.Sort(out)
	return out, nil
}

// TestDRAGangPreemption: see the file's comment.
func TestDRAGangPreemption(t *testing.T) {
	needControllerManager(t)
	ensurePriorityClasses(t)
	startScheduler(t, schedulerConfig(t, adminKubeconfig, shippedProfiles(t)))

	// Two nodes of 8 CPUs and 2 GPUs; a low-priority gang of 4 holds the 4 GPUs (1 CPU each), a
	// low-priority pod of no gang takes 4 CPUs and no GPU. A high-priority gang of 2, 2 CPUs and a
	// GPU each, lacks only GPUs: the low gang goes whole (though 2 of its members' GPUs would do),
	// the pod without GPUs stays, and the high gang binds whole once the victims are gone.
	for _, how := range []string{"extended resource", "claim template"} {
		t.Run("a low-priority device gang is evicted whole for a high-priority device gang, asking by "+how, func(t *testing.T) {
			ns := testNamespace(t)
			e := newDRAEnv(t, ns, how == "extended resource")
			nodes := []string{ns + "-0", ns + "-1"}
			for _, n := range nodes {
				e.node(t, n, "8", "gang", 2, nil)
			}
			member := func(name, group, cpu string) *v1.Pod {
				if how == "extended resource" {
					return e.extPod(name, group, cpu, "gang")
				}
				return e.claimPod(name, group, cpu, "gang", "gpu")
			}
			if how == "claim template" {
				e.claimTemplate(t, "gpu")
			}
			createPod(t, prio(e.pod("idle", "", "4", "gang"), lowPriority, nodes[0]))
			waitForDRAPodBound(t, ns, "idle", "a low-priority pod of no gang without devices")

			lo := gangNames("lo", 4)
			watchNotPartial(t, ns, "lo", 4)
			createPodGroup(t, ns, "lo", 4, 0)
			for _, name := range lo {
				createPod(t, prio(member(name, "lo", "1"), lowPriority, ""))
			}
			if got := waitForDRAGangBound(t, ns, "lo", 4); distinct(got) != 2 {
				t.Fatalf("lo landed on %v, want both nodes (2 GPUs each)", got)
			}

			hi := gangNames("hi", 2)
			watchNotPartial(t, ns, "hi", 2)
			createPodGroup(t, ns, "hi", 2, 0)
			start := time.Now()
			for _, name := range hi {
				createPod(t, prio(member(name, "hi", "2"), highPriority, ""))
			}
			waitForPreempted(t, ns, lo)
			t.Logf("lo (4 members) preempted whole %v after hi was created; idle stays", time.Since(start).Round(time.Millisecond))
			consistentlyNotPartial(t, ns, "lo", 4)
			waitForEvent(t, ns, "hi", podgroup.ReasonPreempting, schedulerName)
			consistentlyNoneBound(t, time.Second, ns, "hi")

			// The victims end as a kubelet would let them; the resourceclaim controller frees their
			// claims' devices.
			forceDelete(t, ns, lo...)
			freedAt := time.Now()
			waitFor(t, ns, "the victims' claims deallocated", func(ctx context.Context) (bool, error) {
				held, err := allocatedFor(ctx, ns, lo)
				return len(held) == 0, err
			})
			t.Logf("the victims' claims deallocated %v after their pods were deleted", time.Since(freedAt).Round(time.Millisecond))
			got := waitForDRAGangBound(t, ns, "hi", 2)
			t.Logf("hi bound whole on %v, %v after the victims were deleted", got, time.Since(freedAt).Round(time.Millisecond))
			consistentlyNotPartial(t, ns, "hi", 2)
			if held, err := allocatedFor(context.Background(), ns, hi); err != nil || len(held) != 2 {
				t.Errorf("hi's allocated claims %v (err %v), want one per member", held, err)
			}
			if p, err := client.CoreV1().Pods(ns).Get(context.Background(), "idle", metav1.GetOptions{}); err != nil || p.DeletionTimestamp != nil {
				t.Errorf("the pod without GPUs was evicted or is gone (err %v)", err)
			}
		})
	}

	// Two nodes of 4 CPUs and 1 GPU. Each GPU is one ResourceClaim shared by a high-priority pod
	// (1 CPU) and a low-priority pod (3 CPUs): evicting the low-priority pods frees every CPU the
	// high-priority gang needs but no GPU (the claim stays reserved by the pod that stays), so
	// nothing is evicted.
	t.Run("CPU victims exist but the devices cannot be freed: nothing is evicted", func(t *testing.T) {
		ns := testNamespace(t)
		e := newDRAEnv(t, ns, true)
		nodes := []string{ns + "-0", ns + "-1"}
		for i, n := range nodes {
			e.node(t, n, "4", "gang", 1, nil)
			claim := fmt.Sprintf("shared-%d", i)
			e.sharedClaim(t, claim)
			createPod(t, prio(e.sharedClaimPod(fmt.Sprintf("keep-%d", i), "1", "gang", claim), highPriority, n))
			createPod(t, prio(e.sharedClaimPod(fmt.Sprintf("cpu-%d", i), "3", "gang", claim), lowPriority, n))
		}
		for i := range nodes {
			waitForDRAPodBound(t, ns, fmt.Sprintf("keep-%d", i), "a high-priority pod sharing the node's GPU")
			waitForDRAPodBound(t, ns, fmt.Sprintf("cpu-%d", i), "a low-priority pod sharing the node's GPU")
		}
		hi := gangNames("hi", 2)
		watchNotPartial(t, ns, "hi", 2)
		createPodGroup(t, ns, "hi", 2, 0)
		for _, name := range hi {
			createPod(t, prio(e.extPod(name, "hi", "1", "gang"), highPriority, ""))
		}
		var msg string
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
		t.Logf("hi-0: %s", msg)
		consistentlyNonePreempted(t, ns)
		consistentlyNoneBound(t, time.Second, ns, "hi")
	})
}
