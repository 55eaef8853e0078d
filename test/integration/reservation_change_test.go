package integration

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/custom-scheduler/custom-scheduler/pkg/coscheduling/podgroup"
)

// reservedGang makes a gang of n members of 1 CPU hold a reservation on n/2 nodes of 2 CPU (the
// case's own): a plain pod of the gang's priority runs on the first node until the test deletes it,
// so the gang never fits, and reserves the room that frees after reservation.afterSeconds. It
// returns the members' names once the gang holds its reservation.
func reservedGang(t *testing.T, ns, prefix, group string, n int, class string) []string {
	t.Helper()
	smallNodes(t, prefix, n/2, nil)
	createPod(t, prioPod(ns, prefix+"-slow", "", "1", class, prefix, prefix+"-0"))
	waitForPodBound(t, ns, prefix+"-slow")
	names := runGang(t, ns, group, n, "1", class, prefix, nil)
	waitForEvent(t, ns, group, podgroup.ReasonReserved, schedulerName)
	waitFor(t, ns, "the reserving gang's members nominated", func(context.Context) (bool, error) {
		for _, node := range nominated(t, ns, names) {
			if node == "" {
				return false, nil
			}
		}
		return true, nil
	})
	return names
}

// eventCount counts a PodGroup's events of a reason, repetitions included (the events API folds
// repeated events into a series).
func eventCount(t *testing.T, ns, name, reason string) int {
	t.Helper()
	evs, err := client.CoreV1().Events(ns).List(context.Background(), metav1.ListOptions{FieldSelector: "involvedObject.name=" + name + ",reason=" + reason})
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, e := range evs.Items {
		switch {
		case e.Series != nil:
			n += int(e.Series.Count)
		case e.Count > 0:
			n += int(e.Count)
		default:
			n++
		}
	}
	return n
}

// noneNominated waits until no member of a gang is nominated to a node.
func noneNominated(t *testing.T, ns string, names []string) {
	t.Helper()
	waitFor(t, ns, "no member nominated", func(context.Context) (bool, error) {
		for _, node := range nominated(t, ns, names) {
			if node != "" {
				return false, nil
			}
		}
		return true, nil
	})
}

// TestReservationWhileTheGangChanges: a reservation keeps its promise while the gang holding it
// changes (with the shipped profile, reservation after 2 s): it ends at once when the gang falls
// below minMember (a pending member deleted, minMember raised) or preempts instead, each end with its
// event and condition and the nominations cleared, so the room goes to other pods at once; a gang
// that fell below minMember loses its place in the order, and the gang behind it reserves; a
// reservation held across rechecks is one decision.
func TestReservationWhileTheGangChanges(t *testing.T) {
	ensurePriorityClasses(t)
	startScheduler(t, schedulerConfig(t, adminKubeconfig, fastReservation(t, "60")))

	for _, tc := range []struct {
		name, prefix string
		change       func(t *testing.T, ns string, names []string)
	}{
		{name: "a pending member deleted", prefix: "rd", change: func(t *testing.T, ns string, names []string) {
			forceDelete(t, ns, names[3])
		}},
		{name: "minMember raised", prefix: "rm", change: func(t *testing.T, ns string, names []string) {
			patchPodGroupSpec(t, ns, "shrinks", `{"spec":{"minMember":5}}`)
		}},
	} {
		t.Run("the reservation ends at once when the gang falls below minMember: "+tc.name, func(t *testing.T) {
			ns := testNamespace(t)
			names := reservedGang(t, ns, tc.prefix, "shrinks", 4, "")
			s := startStream(t, ns, tc.prefix, "1", "", 500*time.Millisecond, 2*time.Second)
			smallPodHeldOff(t, ns, "shrinks")
			changed := time.Now()
			tc.change(t, ns, names)
			ended := waitForEvent(t, ns, "shrinks", podgroup.ReasonReservationEnded, schedulerName)
			if !strings.Contains(ended.Message, "(BelowMinMember)") {
				t.Errorf("ReservationEnded %q, want the reason BelowMinMember", ended.Message)
			}
			if took := time.Since(changed); took > 10*time.Second {
				t.Errorf("the reservation ended %v after the gang fell below minMember, want at once", took)
			}
			c := waitForPodGroupConditionOf(t, ns, "shrinks", "Reserved", "BelowMinMember")
			if c.Status != metav1.ConditionFalse {
				t.Errorf("Reserved condition %s %q, want False", c.Status, c.Message)
			}
			noneNominated(t, ns, names[:3])
			from := time.Now()
			waitFor(t, ns, "small pods placed on the room the reservation held", func(context.Context) (bool, error) {
				return s.boundBetween(from, time.Now()) >= 2, nil
			})
			consistentlyNoneBound(t, 2*time.Second, ns, "shrinks")
		})
	}

	t.Run("a reservation ends with its event when the gang preempts instead", func(t *testing.T) {
		ns := testNamespace(t)
		kubeletDeletesPreempted(t, ns)
		names := reservedGang(t, ns, "rq", "preempts", 4, highPriority)
		// A low-priority pod of another scheduler (bound directly) takes held room: the gang can
		// preempt it, once the pod of its own priority that kept it waiting is gone.
		low := prioPod(ns, "rq-other", "", "1", lowPriority, "rq", "")
		low.Spec.NodeName = "rq-1"
		createPod(t, low)
		forceDelete(t, ns, "rq-slow")
		ended := waitForEvent(t, ns, "preempts", podgroup.ReasonReservationEnded, schedulerName)
		if !strings.Contains(ended.Message, "(Preempting)") {
			t.Errorf("ReservationEnded %q, want the reason Preempting", ended.Message)
		}
		// The condition shows Preempting until the gang's next step: when the victim is slow to go,
		// the gang waits again (and the status writer, which coalesces, may never have written the
		// Preempting reason); either way the condition ends False once the gang is placed.
		waitForBoundMembers(t, ns, "preempts", len(names))
		waitFor(t, ns, "the Reserved condition of preempts False (Preempting, or QuorumReached once placed)", func(context.Context) (bool, error) {
			c := meta.FindStatusCondition(getPodGroup(t, ns, "preempts").Status.Conditions, "Reserved")
			return c != nil && c.Status == metav1.ConditionFalse && (c.Reason == "Preempting" || c.Reason == podgroup.ReasonQuorumReached), nil
		})
		consistentlyNotPartial(t, ns, "preempts", len(names))
	})

	t.Run("a gang that fell below minMember loses its place, and the gang behind it reserves", func(t *testing.T) {
		// A blocker holds the one reservation; "first" waits behind it, then loses a member;
		// "second" comes later. When the blocker is placed, second reserves: first, below
		// minMember, must not keep the turn.
		ns := testNamespace(t)
		smallNodes(t, "rl", 4, nil)
		createPod(t, prioPod(ns, "slow", "", "1", "", "rl", "rl-0"))
		waitForPodBound(t, ns, "slow")
		blocker := runGang(t, ns, "blocker", 8, "1", "", "rl", nil)
		waitForEvent(t, ns, "blocker", podgroup.ReasonReserved, schedulerName)
		first := runGang(t, ns, "first", 6, "1", "", "rl", nil)
		time.Sleep(4 * time.Second) // past afterSeconds: first is next in the order
		forceDelete(t, ns, first[5])
		c := waitForPodGroupConditionOf(t, ns, "first", "Reserved", "BelowMinMember")
		if !strings.Contains(c.Message, "lost its place in the reservation order") {
			t.Errorf("first's Reserved condition %q, want it to say it lost its place", c.Message)
		}
		second := runGang(t, ns, "second", 6, "1", "", "rl", nil)
		time.Sleep(3 * time.Second)
		forceDelete(t, ns, "slow")
		waitForBoundMembers(t, ns, "blocker", 8)
		forceDelete(t, ns, blocker...) // the blocker's job ends
		waitForEvent(t, ns, "second", podgroup.ReasonReserved, schedulerName)
		waitForBoundMembers(t, ns, "second", len(second))
		if n, _ := boundMembers(context.Background(), ns, "first"); n != 0 {
			t.Errorf("%d members of the gang below minMember bound", n)
		}
	})

	t.Run("a reservation held across rechecks is one decision", func(t *testing.T) {
		ns := testNamespace(t)
		names := reservedGang(t, ns, "ro", "holds", 4, "")
		held := nominated(t, ns, names)
		cond := waitForPodGroupConditionOf(t, ns, "holds", "Reserved", "RoomHeld")
		// Three rechecks (every 10 s) with the room unchanged.
		time.Sleep(32 * time.Second)
		if n := eventCount(t, ns, "holds", podgroup.ReasonReserved); n != 1 {
			t.Errorf("%d Reserved events for one reservation, want 1", n)
		}
		if n := eventCount(t, ns, "holds", podgroup.ReasonReservationEnded); n != 0 {
			t.Errorf("%d ReservationEnded events while the reservation held", n)
		}
		if now := nominated(t, ns, names); fmt.Sprint(now) != fmt.Sprint(held) {
			t.Errorf("the nominations moved while the room was unchanged: %v, then %v", held, now)
		}
		if c := reservedCondition(t, ns, "holds"); c == nil || !c.LastTransitionTime.Equal(&cond.LastTransitionTime) || c.Reason != "RoomHeld" {
			t.Errorf("Reserved condition after the rechecks %+v, want the one since %v", c, cond.LastTransitionTime)
		}
		forceDelete(t, ns, "ro-slow")
		waitForBoundMembers(t, ns, "holds", len(names))
	})
}

// TestReservationEndsAtItsTimeout: the reservation ends by its timeout (8 s here) while no member of
// the gang reaches PostFilter (each is refused at PreFilter for a malformed annotation, a reason the
// reservation does not address), with its event and condition, and the nominations cleared.
func TestReservationEndsAtItsTimeout(t *testing.T) {
	startScheduler(t, schedulerConfig(t, adminKubeconfig, fastReservation(t, "8")))
	ns := testNamespace(t)
	names := reservedGang(t, ns, "rx", "expires", 4, "")
	cond := waitForPodGroupConditionOf(t, ns, "expires", "Reserved", "RoomHeld")
	patch := fmt.Sprintf(`{"metadata":{"annotations":{%q:"not a label key!"}}}`, heldAnnotation)
	for _, n := range names {
		if _, err := client.CoreV1().Pods(ns).Patch(context.Background(), n, types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
			t.Fatalf("holding %s back: %v", n, err)
		}
	}
	ended := waitForEvent(t, ns, "expires", podgroup.ReasonReservationEnded, schedulerName)
	if !strings.Contains(ended.Message, "(ReservationTimedOut)") {
		t.Errorf("ReservationEnded %q, want the reason ReservationTimedOut", ended.Message)
	}
	endedAt := waitForPodGroupConditionOf(t, ns, "expires", "Reserved", "ReservationTimedOut").LastTransitionTime
	// Condition times are in seconds; the timer is armed for the timeout exactly.
	if d := endedAt.Sub(cond.LastTransitionTime.Time); d < 7*time.Second || d > 8*time.Second+reservationRecheckBound {
		t.Errorf("the reservation held for %v, want its timeout of 8 s (plus at most a recheck)", d)
	}
	noneNominated(t, ns, names)
}

// reservationRecheckBound is the plugin's recheck period: no reservation outlives its timeout by more.
const reservationRecheckBound = 10 * time.Second

// TestRequiredDomainWithANominatedMember: a member that carries a nomination in a rack other than the
// one its gang is placed in (as a preemption or reservation in the first rack leaves it, when room
// then frees in the second first) is not bound on its nominated node: kube-scheduler tries that node
// before the PreFilterResult, and the plugin's Filter rejects it. The gang lands whole in one rack.
func TestRequiredDomainWithANominatedMember(t *testing.T) {
	startScheduler(t, schedulerConfig(t, adminKubeconfig, shippedProfiles(t)))
	ns := testNamespace(t)
	for i, r := range []string{"ra", "ra", "rb", "rb"} {
		name := fmt.Sprintf("rs-%s-%d", r, i%2)
		createNode(t, name, "2", "8Gi", map[string]string{caseLabel: "rs", rackLabel: r, v1.LabelHostname: name})
	}
	// Rack ra has one CPU free (on rs-ra-1), rack rb four: only rb holds the gang.
	for i, node := range []string{"rs-ra-0", "rs-ra-0", "rs-ra-1"} {
		createPod(t, prioPod(ns, fmt.Sprintf("filler-%d", i), "", "1", "", "rs", node))
	}
	for i := range 3 {
		waitForPodBound(t, ns, fmt.Sprintf("filler-%d", i))
	}
	watchNotPartial(t, ns, "racked", 4)
	watchOneDomain(t, ns, "racked", rackLabel)
	createTopologyPodGroup(t, ns, "racked", 4, map[string]any{"required": rackLabel})
	names := gangNames("racked", 4)
	for _, n := range names {
		p := gangPod(ns, n, "racked", "1")
		p.Spec.NodeSelector = map[string]string{caseLabel: "rs"}
		p.Spec.SchedulingGates = []v1.PodSchedulingGate{{Name: "custom-scheduler.test/held"}}
		createPod(t, p)
	}
	// The first member carries a nomination to the free CPU of rack ra.
	p, err := client.CoreV1().Pods(ns).Get(context.Background(), names[0], metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	p.Status.NominatedNodeName = "rs-ra-1"
	if _, err := client.CoreV1().Pods(ns).UpdateStatus(context.Background(), p, metav1.UpdateOptions{}); err != nil {
		t.Fatalf("nominating %s: %v", names[0], err)
	}
	for _, n := range names {
		ungate(t, ns, n)
	}
	waitForBoundMembers(t, ns, "racked", 4)
	if got := racksOf(t, ns, "racked"); len(got) != 1 || got["rb"] != 4 {
		t.Errorf("the gang was placed in racks %v, want all 4 members in rb", got)
	}
}

// TestReservationLeftByAPreviousLeaderEnds: a new leader takes over a reservation whose gang fell
// below minMember while no scheduler ran (its members never reach PostFilter again), and ends it with
// its event and condition, clearing the nominations the previous leader made.
func TestReservationLeftByAPreviousLeaderEnds(t *testing.T) {
	cfg := schedulerConfig(t, adminKubeconfig, fastReservation(t, "120"))
	first := startScheduler(t, cfg)
	ns := testNamespace(t)
	names := reservedGang(t, ns, "ra", "left", 4, "")
	waitForPodGroupConditionOf(t, ns, "left", "Reserved", "RoomHeld")
	first.stop()
	forceDelete(t, ns, names[3])

	startScheduler(t, cfg)
	ended := waitForEvent(t, ns, "left", podgroup.ReasonReservationEnded, schedulerName)
	if !strings.Contains(ended.Message, "(BelowMinMember)") {
		t.Errorf("ReservationEnded %q, want the reason BelowMinMember", ended.Message)
	}
	waitForPodGroupConditionOf(t, ns, "left", "Reserved", "BelowMinMember")
	noneNominated(t, ns, names[:3])
}
