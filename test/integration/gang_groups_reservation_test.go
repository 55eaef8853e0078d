package integration

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
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

// TestGangGroupsReservationKOfN: a set of three replica groups that needs two of them whole (as a
// LeaderWorkerSet with K of N) is not starved either. 4 nodes of 2 CPU are kept busy by 1-CPU pods;
// each replica is 3 members of 1 CPU, so the set needs 6 CPUs free at once. It reserves as one for
// the two replicas its first group's check takes (replica-0 and replica-1), and two replicas are
// bound whole, none in part.
func TestGangGroupsReservationKOfN(t *testing.T) {
	replicaSetReservation(t, "grk", []int{3, 3, 3}, false, "replica-0", "replica-2", "for its job NS/set holds room for 6 members on")
}

// TestGangGroupsReservationKOfNUnlike: TestGangGroupsReservationKOfN with replicas not alike, of 4, 2
// and 2 members: the set reserves as one for the two replicas that place the fewest members
// (replica-1, holding the room, and replica-2: 4 CPUs free at once, not 6), and both are bound whole,
// none in part. (Before, the set reserved for replica-0 and replica-1, 6 members: the first replica's
// own choice among the two others is alike.)
func TestGangGroupsReservationKOfNUnlike(t *testing.T) {
	replicaSetReservation(t, "gru", []int{4, 2, 2}, false, "replica-1", "replica-0", "for its job NS/set holds room for 4 members on")
}

// TestGangGroupsReservationOwnRacks: a set of three replica groups that needs two of them whole, each
// replica requiring a rack of its own (the PodGroup's topologyPolicy, as a LeaderWorkerSet replica in
// an NVLink domain), is not starved by a stream of small pods either. 4 nodes of 2 CPU in two racks
// are kept busy by 1-CPU pods; each replica is 2 members of 1 CPU. The set reserves as one, in parts:
// each of the two replicas its first group's check takes holds room in a rack of its own, and both
// are bound whole, each in one rack. (Before, a group with a domain of its own kept its job from
// reserving as one: each replica reserved alone.)
func TestGangGroupsReservationOwnRacks(t *testing.T) {
	replicaSetReservation(t, "gro", []int{2, 2, 2}, true, "replica-0", "replica-2", "for its job NS/set holds room for 4 members on 2 nodes (cpu 4000m", "), each of its 2 parts in one domain of its own")
}

// replicaSetReservation runs a set of three replica groups of sizes[i] members of 1 CPU, needing two
// of them whole, against a stream of 1-CPU pods on 4 nodes of 2 CPU (prefix names them; with racks,
// two racks of two nodes, each replica requiring one): the replica holder holds its job's
// reservation (its Reserved event says each of want, NS standing for the namespace), two replicas are
// bound whole within two minutes, each in one rack with racks, none in part, nothing is evicted, and
// the replica left out of the room (left) neither moves it nor reports it.
func replicaSetReservation(t *testing.T, prefix string, sizes []int, racks bool, holder, left string, want ...string) {
	startScheduler(t, schedulerConfig(t, adminKubeconfig, fastReservation(t, "120")))
	ns := testNamespace(t)
	var labels func(i int) map[string]string
	if racks {
		labels = func(i int) map[string]string {
			return map[string]string{rackLabel: fmt.Sprintf("%s-r%d", prefix, i/2), blockLabel: prefix + "-b1"}
		}
	}
	smallNodes(t, prefix, 4, labels)
	s := startStream(t, ns, prefix, "1", "", 500*time.Millisecond, 4*time.Second)
	time.Sleep(6 * time.Second)
	arrival := time.Now()
	if n := s.boundBetween(time.Time{}, arrival); n < 4 {
		t.Fatalf("only %d small pods were placed before the set came", n)
	}
	replicas := []string{"replica-0", "replica-1", "replica-2"}
	set := &tnode{name: "set", composite: true, min: 2}
	for i, r := range replicas {
		watchWhole(t, ns, r, sizes[i], nil)
		set.children = append(set.children, &tnode{name: r, min: sizes[i]})
	}
	watchTrees(t, ns, []*tnode{set})
	createGroupIn(t, ns, "set", 1, gangComposite(2))
	for ri, r := range replicas {
		if racks {
			createGroupWithPolicy(t, ns, r, int64(sizes[ri]), child("set"), rackLabel)
		} else {
			createGroupIn(t, ns, r, int64(sizes[ri]), child("set"))
		}
		for i := range sizes[ri] {
			p := gangPod(ns, fmt.Sprintf("%s-%d", r, i), r, "1")
			p.Spec.NodeSelector = map[string]string{caseLabel: prefix}
			createPod(t, p)
		}
	}

	ev := waitForEvent(t, ns, holder, podgroup.ReasonReserved, schedulerName)
	for _, w := range want {
		if w = strings.ReplaceAll(w, "NS", ns); !strings.Contains(ev.Message, w) {
			t.Errorf("Reserved event %q, want it to say %q", ev.Message, w)
		}
	}
	reservedAt := time.Now()
	// afterSeconds is 2: a gang waiting in the order that stopped trying blocks the others until it
	// stalls (30 s), which a replica the room is not for must not do.
	if took := reservedAt.Sub(arrival); took > 20*time.Second {
		t.Errorf("the set reserved only %v after it arrived, want within 20s: a gang ahead of its holder in the order kept it waiting", took.Round(time.Second))
	}
	whole := func(ctx context.Context) ([]string, error) {
		var out []string
		for i, r := range replicas {
			n, err := boundMembers(ctx, ns, r)
			if err != nil {
				return nil, err
			}
			if n == sizes[i] {
				out = append(out, r)
			}
		}
		return out, nil
	}
	var first []string
	if err := wait.PollUntilContextTimeout(context.Background(), 200*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		w, err := whole(ctx)
		first = w
		return len(w) >= 2, err
	}); err != nil {
		t.Fatalf("two replicas were not placed within two minutes of the set's reservation (%v after its arrival)\n%s", reservedAt.Sub(arrival), dumpNamespace(ns))
	}
	// The two the room was for are the ones placed.
	if slices.Contains(first, left) {
		t.Errorf("replicas %v placed whole first; %s, left out of the room, is among them", first, left)
	}
	t.Logf("set arrived, reserved after %v, two replicas placed after %v", reservedAt.Sub(arrival).Round(time.Second), time.Since(arrival).Round(time.Second))
	if racks {
		w, _ := whole(context.Background())
		for _, r := range w {
			if got := racksOf(t, ns, r); len(got) != 1 {
				t.Errorf("replica %s in racks %v; it requires one", r, got)
			}
		}
	}
	if got, err := preempted(context.Background(), ns); err != nil || len(got) > 0 {
		t.Errorf("a reservation evicted %v (err %v): it must never evict", got, err)
	}
	for _, r := range replicas {
		if c := reservedCondition(t, ns, r); r != holder && c != nil && c.Status == "True" {
			t.Errorf("%s reports a reservation of its own: %s %q", r, c.Reason, c.Message)
		}
	}
	// The replica the room is not for (left) neither moves it nor reports it as its own.
	evs, err := client.CoreV1().Events(ns).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range evs.Items {
		if strings.HasPrefix(e.InvolvedObject.Name, left+"-") && strings.Contains(e.Message, "holds room") {
			t.Errorf("%s, left out of the room, reports it: %q", e.InvolvedObject.Name, e.Message)
		}
	}
}
