package integration

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestDRADevicesInFlightCountedOnce: a pod of no gang binding with a claim (the scheduler nominates it
// to its node as its binding starts, after DynamicResources' Reserve put its allocation in flight)
// holds its devices once. Node X has 3 devices and pod q (1 device) binding on it, its claim's
// allocation held back 15 s by a slow apiserver; node Y's 2 devices are held by low-priority pods.
// A gang of 2 members of 1 device each, of q's priority, arrives meanwhile: it is placed on X, and
// nothing is evicted on Y.
//
// Before: the binding pod was recorded as nominated, the whole-gang check allocated its claim again
// on top of the allocated state that already held it, saw X with 1 free device, called the gang
// infeasible and preempted Y's pods.
func TestDRADevicesInFlightCountedOnce(t *testing.T) {
	needControllerManager(t)
	ensurePriorityClasses(t)
	ns := testNamespace(t)
	// q's claim (made from the template as q-gpu-<suffix>) has its allocation written late.
	slowClaim := func(r *http.Request) bool {
		return strings.Contains(r.URL.Path, "/namespaces/"+ns+"/resourceclaims/q-gpu-") && strings.HasSuffix(r.URL.Path, "/status")
	}
	proxy := startFaultProxy(t, faultSeed(t), []faultRule{
		{name: "q-claim-status-put", method: http.MethodPut, match: slowClaim, delay: 15 * time.Second},
		{name: "q-claim-status-patch", method: http.MethodPatch, match: slowClaim, delay: 15 * time.Second},
	})
	e := newDRAEnv(t, ns, false)
	e.claimTemplate(t, "gpu")
	x, y := ns+"-x", ns+"-y"
	e.node(t, x, "8", "inflight", 3, nil)
	e.node(t, y, "8", "inflight", 2, nil)
	startScheduler(t, schedulerConfig(t, proxy.kubeconfig, shippedProfiles(t)))

	for i := range 2 {
		name := fmt.Sprintf("low-%d", i)
		createPod(t, prio(e.claimPod(name, "", "1", "inflight", "gpu"), lowPriority, y))
		waitForDRAPodBound(t, ns, name, "a low-priority pod holding a device of Y")
	}

	createPod(t, prio(e.claimPod("q", "", "1", "inflight", "gpu"), highPriority, x))
	waitFor(t, ns, "q to be nominated to X while it binds", func(ctx context.Context) (bool, error) {
		p, err := client.CoreV1().Pods(ns).Get(ctx, "q", metav1.GetOptions{})
		return err == nil && p.Status.NominatedNodeName == x && p.Spec.NodeName == "", err
	})

	watchWhole(t, ns, "g", 2, nil)
	createPodGroup(t, ns, "g", 2, 0)
	for i := range 2 {
		createPod(t, prio(e.claimPod(fmt.Sprintf("g-%d", i), "g", "1", "inflight", "gpu"), highPriority, ""))
	}
	nodes := waitForDRAGangBound(t, ns, "g", 2)
	// The gang was placed while q was still binding, not after: the case this test is about.
	if q, err := client.CoreV1().Pods(ns).Get(context.Background(), "q", metav1.GetOptions{}); err != nil || q.Spec.NodeName != "" {
		t.Errorf("q was bound (node %q, err %v) before the gang was: the gang did not meet q's binding", q.Spec.NodeName, err)
	}
	for pod, n := range nodes {
		if n != x {
			t.Errorf("member %s is on %s, want X (%s), where 2 devices are free beside q's", pod, n, x)
		}
	}
	waitForDRAPodBound(t, ns, "q", "q, once its claim's allocation is written")
	// A victim would stay terminating (no kubelet here): it shows as preempted.
	if got, err := preempted(context.Background(), ns); err != nil || len(got) > 0 {
		t.Errorf("pods %v were preempted (err %v): the gang fits beside the binding pod", got, err)
	}
	if proxy.injectedOf("q-claim-status-put")+proxy.injectedOf("q-claim-status-patch") == 0 {
		t.Errorf("q's claim status was never written through the slow rule (%s): the test proves nothing", proxy.counts(proxy.injected))
	}
}
