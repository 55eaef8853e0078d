package integration

// Jobs of several roles (gang groups) with devices.

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/custom-scheduler/custom-scheduler/pkg/coscheduling/podgroup"
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
