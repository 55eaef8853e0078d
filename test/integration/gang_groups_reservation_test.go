package integration

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/custom-scheduler/custom-scheduler/pkg/coscheduling/podgroup"
)

// TestGangGroupsReservation: a job of two roles is not starved by a stream of small pods. 4 nodes of
// 2 CPU are kept busy by 1-CPU pods (one every 500 ms, each running 4 s); the job needs role a's 3
// members and role b's 5, 1 CPU each: all 8 CPUs free at once. It reserves as one: one reservation,
// held by its first group (a), nominates the members of both roles to the room that frees, and the
// job is placed whole. (Before, each role reserved for itself, one at a time: the role holding the
// one reservation waited at Permit for the other, which found no room, and the job was not placed.)
func TestGangGroupsReservation(t *testing.T) {
	startScheduler(t, schedulerConfig(t, adminKubeconfig, fastReservation(t, "120")))
	ns := testNamespace(t)
	smallNodes(t, "grr", 4, nil)
	s := startStream(t, ns, "grr", "1", "", 500*time.Millisecond, 4*time.Second)
	time.Sleep(6 * time.Second)
	arrival := time.Now()
	if n := s.boundBetween(time.Time{}, arrival); n < 4 {
		t.Fatalf("only %d small pods were placed before the job came", n)
	}
	watchWhole(t, ns, "a", 3, nil)
	watchWhole(t, ns, "b", 5, nil)
	watchTrees(t, ns, []*tnode{{name: "job", composite: true, min: 2, children: []*tnode{{name: "a", min: 3}, {name: "b", min: 5}}}})
	createGroupIn(t, ns, "job", 1, gangComposite(2))
	createGroupIn(t, ns, "a", 3, child("job"))
	createGroupIn(t, ns, "b", 5, child("job"))
	for role, n := range map[string]int{"a": 3, "b": 5} {
		for i := range n {
			p := gangPod(ns, fmt.Sprintf("%s-%d", role, i), role, "1")
			p.Spec.NodeSelector = map[string]string{caseLabel: "grr"}
			createPod(t, p)
		}
	}

	ev := waitForEvent(t, ns, "a", podgroup.ReasonReserved, schedulerName)
	if want := "for its job " + ns + "/job holds room for 8 members on 4 nodes"; !strings.Contains(ev.Message, want) {
		t.Errorf("Reserved event %q, want it to say %q", ev.Message, want)
	}
	reservedAt := time.Now()
	if err := wait.PollUntilContextTimeout(context.Background(), 200*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		na, err := boundMembers(ctx, ns, "a")
		if err != nil {
			return false, err
		}
		nb, err := boundMembers(ctx, ns, "b")
		return na == 3 && nb == 5, err
	}); err != nil {
		t.Fatalf("the job was not placed within two minutes of its reservation (%v after its arrival)\n%s", reservedAt.Sub(arrival), dumpNamespace(ns))
	}
	t.Logf("job arrived, reserved after %v, placed after %v", reservedAt.Sub(arrival).Round(time.Second), time.Since(arrival).Round(time.Second))
	waitForPodGroupConditionOf(t, ns, "a", "Reserved", "QuorumReached")
	if got, err := preempted(context.Background(), ns); err != nil || len(got) > 0 {
		t.Errorf("a reservation evicted %v (err %v): it must never evict", got, err)
	}
	if c := reservedCondition(t, ns, "b"); c != nil && c.Status == "True" {
		t.Errorf("role b reports a reservation of its own: %s %q", c.Reason, c.Message)
	}
}
