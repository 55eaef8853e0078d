package integration

// A gang whose members share one ResourceClaim that is allocated already (issue #60, item 4): the
// claim pins every user to the node its devices are on. Before, the whole-gang check left a claim
// several members name to the real filters: it admitted the gang wherever CPU fitted, the real filters
// refused its members everywhere (the claim's node had no CPU left, the other nodes are not the
// claim's), the attempt failed and backed off, again and again, and nothing was preempted for it while
// lower-priority pods held the claim's node. Now the check counts the members only on the claim's
// node: the gang is found short there, and preempts there as any gang does.
//
// (A claim shared by members and not allocated yet is still left to the real filters: a gang that
// waits at Permit cannot share it at all, see TestDRASharedClaimGang.)

import (
	"context"
	"slices"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/custom-scheduler/custom-scheduler/pkg/coscheduling/podgroup"
)

// sharingMember is a gang member asking cpu and the ResourceClaim claim, which its siblings name too.
func (e draEnv) sharingMember(name, group, cpu, role, claim string) *v1.Pod {
	p := e.pod(name, group, cpu, role)
	p.Spec.ResourceClaims = []v1.PodResourceClaim{{Name: "gpu", ResourceClaimName: ptr.To(claim)}}
	p.Spec.Containers[0].Resources.Claims = []v1.ResourceClaim{{Name: "gpu"}}
	return p
}

// TestDRASharedClaimGangPreempts: two nodes of 8 CPUs and 1 GPU. The claim "team" is allocated on
// node 0 for a high-priority pod of no gang; a low-priority pod takes 6 more CPUs there. A
// high-priority gang of 2 (2 CPUs each) sharing "team" fits node 1's CPU but may only go to node 0:
// it evicts the low-priority pod and binds whole on node 0, the claim reserved for all three.
func TestDRASharedClaimGangPreempts(t *testing.T) {
	needControllerManager(t)
	ensurePriorityClasses(t)
	startScheduler(t, schedulerConfig(t, adminKubeconfig, shippedProfiles(t)))
	ns := testNamespace(t)
	e := newDRAEnv(t, ns, false)
	nodes := []string{ns + "-0", ns + "-1"}
	for _, n := range nodes {
		e.node(t, n, "8", "gang", 1, nil)
	}
	e.sharedClaim(t, "team")
	createPod(t, prio(e.sharingMember("first", "", "1", "gang", "team"), highPriority, nodes[0]))
	waitForDRAPodBound(t, ns, "first", "a pod of no gang that allocates the shared claim")
	createPod(t, prio(e.pod("cpu", "", "6", "gang"), lowPriority, nodes[0]))
	waitForDRAPodBound(t, ns, "cpu", "a low-priority pod without devices beside it")

	hi := gangNames("hi", 2)
	watchNotPartial(t, ns, "hi", 2)
	createPodGroup(t, ns, "hi", 2, 0)
	start := time.Now()
	for _, name := range hi {
		createPod(t, prio(e.sharingMember(name, "hi", "2", "gang", "team"), highPriority, ""))
	}
	waitForPreempted(t, ns, []string{"cpu"})
	t.Logf("the low-priority pod preempted %v after hi came", time.Since(start).Round(time.Millisecond))
	waitForEvent(t, ns, "hi", podgroup.ReasonPreempting, schedulerName)
	consistentlyNoneBound(t, time.Second, ns, "hi")
	forceDelete(t, ns, "cpu")
	freedAt := time.Now()
	bound := waitForDRAGangBound(t, ns, "hi", 2)
	t.Logf("hi bound whole on %v, %v after the victim was deleted", bound, time.Since(freedAt).Round(time.Millisecond))
	consistentlyNotPartial(t, ns, "hi", 2)
	for name, node := range bound {
		if node != nodes[0] {
			t.Errorf("%s bound on %s, want %s (where the shared claim is allocated)", name, node, nodes[0])
		}
	}
	c, err := client.ResourceV1().ResourceClaims(ns).Get(context.Background(), "team", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var users []string
	for _, r := range c.Status.ReservedFor {
		users = append(users, r.Name)
	}
	slices.Sort(users)
	if !slices.Equal(users, []string{"first", "hi-0", "hi-1"}) {
		t.Errorf("the shared claim is reserved for %v, want first and both members", users)
	}
	if p, err := client.CoreV1().Pods(ns).Get(context.Background(), "first", metav1.GetOptions{}); err != nil || p.DeletionTimestamp != nil {
		t.Errorf("the claim's first user was evicted or is gone (err %v)", err)
	}
}
