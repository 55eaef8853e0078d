package integration

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"

	"github.com/custom-scheduler/custom-scheduler/pkg/coscheduling/podgroup"
)

// stream is a stream of short plain pods on a case's nodes: one of cpu every interval, each
// "running" for lifetime after it is bound (then deleted, as a kubelet would once it finished).
type stream struct {
	t        *testing.T
	ns, name string
	cancel   context.CancelFunc
	done     sync.WaitGroup

	mu    sync.Mutex
	bound map[string]time.Time
}

func startStream(t *testing.T, ns, caseName, cpu, class string, interval, lifetime time.Duration) *stream {
	t.Helper()
	return startPodStream(t, ns, caseName, func(i int) *v1.Pod {
		return prioPod(ns, fmt.Sprintf("small-%d", i), "", cpu, class, caseName, "")
	}, interval, lifetime)
}

// startPodStream is startStream with the pods made by pod(i), which must be named small-<i>.
func startPodStream(t *testing.T, ns, caseName string, pod func(i int) *v1.Pod, interval, lifetime time.Duration) *stream {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	s := &stream{t: t, ns: ns, name: caseName, cancel: cancel, bound: map[string]time.Time{}}
	s.done.Add(2)
	go func() { // the stream
		defer s.done.Done()
		for i := 0; ; i++ {
			p := pod(i)
			if _, err := client.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{}); err != nil && ctx.Err() == nil {
				t.Errorf("creating %s: %v", p.Name, err)
			}
			select {
			case <-ctx.Done():
				return
			case <-time.After(interval):
			}
		}
	}()
	go func() { // the kubelet: a bound small pod finishes after lifetime
		defer s.done.Done()
		seen := map[string]time.Time{}
		_ = wait.PollUntilContextCancel(ctx, 100*time.Millisecond, true, func(ctx context.Context) (bool, error) {
			pods, err := client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
			if err != nil {
				return false, nil
			}
			now := time.Now()
			for _, p := range pods.Items {
				if !strings.HasPrefix(p.Name, "small-") || p.Spec.NodeName == "" {
					continue
				}
				if _, ok := seen[p.Name]; !ok {
					seen[p.Name] = now
					s.mu.Lock()
					s.bound[p.Name] = now
					s.mu.Unlock()
				}
				if now.Sub(seen[p.Name]) >= lifetime {
					err := client.CoreV1().Pods(ns).Delete(ctx, p.Name, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)})
					if err != nil && !apierrors.IsNotFound(err) && ctx.Err() == nil {
						t.Errorf("finishing %s: %v", p.Name, err)
					}
				}
			}
			return false, nil
		})
	}()
	t.Cleanup(s.stop)
	return s
}

func (s *stream) stop() {
	s.cancel()
	s.done.Wait()
}

// boundBetween counts the small pods first seen bound in [from, to).
func (s *stream) boundBetween(from, to time.Time) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, at := range s.bound {
		if !at.Before(from) && at.Before(to) {
			n++
		}
	}
	return n
}

// smallNodes creates n nodes <prefix>-<i> of 2 CPUs for a case (label caseLabel=prefix), with the
// labels of more(i) if it is set.
func smallNodes(t *testing.T, prefix string, n int, more func(i int) map[string]string) {
	t.Helper()
	for i := range n {
		name := fmt.Sprintf("%s-%d", prefix, i)
		labels := map[string]string{caseLabel: prefix, v1.LabelHostname: name}
		if more != nil {
			for k, v := range more(i) {
				labels[k] = v
			}
		}
		createNode(t, name, "2", "8Gi", labels)
	}
}

// reservedCondition returns the PodGroup's Reserved condition (nil if none).
func reservedCondition(t *testing.T, ns, name string) *metav1.Condition {
	t.Helper()
	for _, c := range getPodGroup(t, ns, name).Status.Conditions {
		if c.Type == "Reserved" {
			return &c
		}
	}
	return nil
}

// smallPodHeldOff waits for a small pod's scheduling failure to name the reservation that keeps it off.
func smallPodHeldOff(t *testing.T, ns, group string) {
	t.Helper()
	want := "is held for PodGroup " + ns + "/" + group
	waitFor(t, ns, "a small pod's FailedScheduling to name the reservation", func(ctx context.Context) (bool, error) {
		evs, err := client.CoreV1().Events(ns).List(ctx, metav1.ListOptions{FieldSelector: "reason=FailedScheduling"})
		if err != nil {
			return false, err
		}
		for _, e := range evs.Items {
			if strings.HasPrefix(e.InvolvedObject.Name, "small-") && strings.Contains(e.Message, want) {
				return true, nil
			}
		}
		return false, nil
	})
}

// fastReservation is the shipped profile with reservation after 2 s and a 30 s timeout, for the cases
// that are not about the shipped defaults.
func fastReservation(t *testing.T, timeout string) string {
	t.Helper()
	p := shippedProfiles(t)
	for _, r := range [][2]string{{"afterSeconds: 30", "afterSeconds: 2"}, {"timeoutSeconds: 300", "timeoutSeconds: " + timeout}} {
		if !strings.Contains(p, r[0]) {
			t.Fatalf("the shipped profile has no %q", r[0])
		}
		p = strings.Replace(p, r[0], r[1], 1)
	}
	return p
}

// TestReservationAgainstAStreamOfSmallPods is the starvation the reservation is for, with the shipped
// profile and its defaults: 4 nodes of 2 CPU kept busy by 1-CPU pods (one every 500 ms, each running
// about 4 s), then a gang of 8 members of 1 CPU, which needs all 8 CPUs free at once. Without the
// reservation every CPU that frees goes to the next small pod. With it, the gang is placed well within
// two minutes, and small pods are placed before and after.
func TestReservationAgainstAStreamOfSmallPods(t *testing.T) {
	startScheduler(t, schedulerConfig(t, adminKubeconfig, shippedProfiles(t)))
	ns := testNamespace(t)
	smallNodes(t, "rs", 4, nil)
	s := startStream(t, ns, "rs", "1", "", 500*time.Millisecond, 4*time.Second)
	time.Sleep(6 * time.Second)
	arrival := time.Now()
	if n := s.boundBetween(time.Time{}, arrival); n < 4 {
		t.Fatalf("only %d small pods were placed before the gang came", n)
	}
	watchNotPartial(t, ns, "big", 8)
	createPodGroup(t, ns, "big", 8, 0)
	for i := range 8 {
		p := gangPod(ns, fmt.Sprintf("big-%d", i), "big", "1")
		p.Spec.NodeSelector = map[string]string{caseLabel: "rs"}
		createPod(t, p)
	}

	waitForEvent(t, ns, "big", podgroup.ReasonReserved, schedulerName)
	reservedAt := time.Now()
	if c := waitForPodGroupConditionOf(t, ns, "big", "Reserved", "RoomHeld"); c.Status != metav1.ConditionTrue || !strings.Contains(c.Message, "holds room for 8 members on 4 nodes") {
		t.Errorf("Reserved condition %s %q, want True and the room held for 8 members on 4 nodes", c.Status, c.Message)
	}
	if waited := reservedAt.Sub(arrival); waited < 25*time.Second {
		t.Errorf("the gang reserved after %v, before the 30 s of reservation.afterSeconds", waited)
	}
	smallPodHeldOff(t, ns, "big")

	deadline := arrival.Add(2 * time.Minute)
	if err := wait.PollUntilContextTimeout(context.Background(), 200*time.Millisecond, time.Until(deadline), true, func(ctx context.Context) (bool, error) {
		n, err := boundMembers(ctx, ns, "big")
		return n == 8, err
	}); err != nil {
		t.Fatalf("the gang was not placed within two minutes of its arrival (reserved %v after it)\n%s", reservedAt.Sub(arrival), dumpNamespace(ns))
	}
	placed := time.Now()
	t.Logf("gang arrived, reserved after %v, placed after %v", reservedAt.Sub(arrival).Round(time.Second), placed.Sub(arrival).Round(time.Second))
	consistentlyNotPartial(t, ns, "big", 8)
	waitForPodGroupConditionOf(t, ns, "big", "Reserved", "QuorumReached")
	if got, err := preempted(context.Background(), ns); err != nil || len(got) > 0 {
		t.Errorf("a reservation evicted %v (err %v): it must never evict", got, err)
	}

	// Small pods keep being placed once the gang is (its members run on: 4 CPU-seconds free nowhere
	// until they finish, so free the gang as its job would end).
	if n := s.boundBetween(arrival, reservedAt); n == 0 {
		t.Errorf("no small pod was placed while the gang waited for its reservation")
	}
	forceDelete(t, ns, gangNames("big", 8)...)
	waitFor(t, ns, "small pods placed again after the gang", func(context.Context) (bool, error) {
		return s.boundBetween(placed, time.Now()) >= 2, nil
	})
}

// TestReservation covers the bounds of a reservation, with reservation.afterSeconds 2.
func TestReservation(t *testing.T) {
	ensurePriorityClasses(t)
	sched := startScheduler(t, schedulerConfig(t, adminKubeconfig, fastReservation(t, "30")))
	_ = sched

	t.Run("a gang that can never fit holds nothing back", func(t *testing.T) {
		ns := testNamespace(t)
		smallNodes(t, "rn", 2, nil)
		s := startStream(t, ns, "rn", "1", "", 500*time.Millisecond, 2*time.Second)
		createPodGroup(t, ns, "huge", 5, 0)
		for i := range 5 {
			p := gangPod(ns, fmt.Sprintf("huge-%d", i), "huge", "1")
			p.Spec.NodeSelector = map[string]string{caseLabel: "rn"}
			createPod(t, p)
		}
		waitForPodGroupCondition(t, ns, "huge", podgroup.ReasonGangInfeasible)
		time.Sleep(3 * time.Second) // past afterSeconds
		from := time.Now()
		consistently(t, 5*time.Second, "no member of a gang that can never fit nominated", func(context.Context) (bool, error) {
			for _, node := range nominated(t, ns, gangNames("huge", 5)) {
				if node != "" {
					return false, nil
				}
			}
			return reservedCondition(t, ns, "huge") == nil, nil
		})
		if n := s.boundBetween(from, time.Now()); n < 3 {
			t.Errorf("only %d small pods placed in 5 s beside a gang that can never fit", n)
		}
	})

	t.Run("the reservation holds room within the gang's required rack", func(t *testing.T) {
		ns := testNamespace(t)
		smallNodes(t, "rr", 4, func(i int) map[string]string { return map[string]string{rackLabel: fmt.Sprintf("rack-%d", i/2)} })
		startStream(t, ns, "rr", "1", "", 400*time.Millisecond, 3*time.Second)
		time.Sleep(3 * time.Second)
		watchNotPartial(t, ns, "racked", 4)
		createTopologyPodGroup(t, ns, "racked", 4, map[string]any{"required": rackLabel})
		for i := range 4 {
			p := gangPod(ns, fmt.Sprintf("racked-%d", i), "racked", "1")
			p.Spec.NodeSelector = map[string]string{caseLabel: "rr"}
			createPod(t, p)
		}
		waitForEvent(t, ns, "racked", podgroup.ReasonReserved, schedulerName)
		racks := map[string]bool{}
		waitFor(t, ns, "every member of the reserved gang nominated", func(context.Context) (bool, error) {
			clear(racks)
			for _, node := range nominated(t, ns, gangNames("racked", 4)) {
				if node == "" {
					return false, nil
				}
				n, err := client.CoreV1().Nodes().Get(context.Background(), node, metav1.GetOptions{})
				if err != nil {
					return false, err
				}
				racks[n.Labels[rackLabel]] = true
			}
			return true, nil
		})
		if len(racks) != 1 {
			t.Errorf("the reservation holds room in racks %v, want one", racks)
		}
		waitForBoundMembers(t, ns, "racked", 4)
		consistentlyNotPartial(t, ns, "racked", 4)
		if got := racksOf(t, ns, "racked"); len(got) != 1 {
			t.Errorf("the gang was placed in racks %v, want one", got)
		}
	})

	t.Run("a higher-priority gang preempts past a reservation", func(t *testing.T) {
		ns := testNamespace(t)
		smallNodes(t, "rp", 2, nil)
		// Low-priority small pods that never finish keep the nodes full.
		for i := range 4 {
			createPod(t, prioPod(ns, fmt.Sprintf("busy-%d", i), "", "1", lowPriority, "rp", ""))
		}
		waitFor(t, ns, "the nodes full", func(ctx context.Context) (bool, error) {
			pods, err := client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
			n := 0
			for _, p := range pods.Items {
				if p.Spec.NodeName != "" {
					n++
				}
			}
			return n == 4, err
		})
		lo := runGang(t, ns, "lo", 4, "1", lowPriority, "rp", nil)
		waitForEvent(t, ns, "lo", podgroup.ReasonReserved, schedulerName)
		hi := runGang(t, ns, "hi", 2, "2", highPriority, "rp", nil)
		waitForEvent(t, ns, "hi", podgroup.ReasonPreempting, schedulerName)
		var victims []string
		waitFor(t, ns, "the preemption's victims", func(ctx context.Context) (bool, error) {
			var err error
			victims, err = preempted(ctx, ns)
			return len(victims) == 4, err
		})
		forceDelete(t, ns, victims...)
		waitForBoundMembers(t, ns, "hi", len(hi))
		consistentlyNotPartial(t, ns, "hi", len(hi))
		consistentlyNoneBound(t, 2*time.Second, ns, "lo")
		_ = lo
	})

	t.Run("big gangs waiting for the one reservation take it in the order they came", func(t *testing.T) {
		// A blocker holds the one reservation while two gangs wait behind it, both long enough to
		// reserve; when the blocker is placed, the one that came first reserves next, and the other
		// only once that one is placed.
		ns := testNamespace(t)
		smallNodes(t, "rf", 4, nil)
		// A pod that runs until the test ends it keeps the blocker, which needs every CPU, waiting.
		createPod(t, prioPod(ns, "slow", "", "1", "", "rf", "rf-0"))
		waitForPodBound(t, ns, "slow")
		startStream(t, ns, "rf", "1", "", 500*time.Millisecond, 3*time.Second)
		time.Sleep(4 * time.Second)
		blocker := runGang(t, ns, "blocker", 8, "1", "", "rf", nil)
		waitForEvent(t, ns, "blocker", podgroup.ReasonReserved, schedulerName)
		first := runGang(t, ns, "first", 6, "1", "", "rf", nil)
		time.Sleep(time.Second)
		second := runGang(t, ns, "second", 6, "1", "", "rf", nil)
		none := func(names []string) func(context.Context) (bool, error) {
			return func(context.Context) (bool, error) {
				for _, node := range nominated(t, ns, names) {
					if node != "" {
						return false, nil
					}
				}
				return true, nil
			}
		}
		consistently(t, 3*time.Second, "the waiting gangs reserve nothing while the blocker holds the reservation", func(ctx context.Context) (bool, error) {
			a, err := none(first)(ctx)
			b, _ := none(second)(ctx)
			return a && b, err
		})
		forceDelete(t, ns, "slow")
		waitForBoundMembers(t, ns, "blocker", 8)
		// The blocker's members run on until its job ends: the first gang holds the reservation until
		// then, and the second, which came later, waits behind it.
		waitForEvent(t, ns, "first", podgroup.ReasonReserved, schedulerName)
		consistently(t, 2*time.Second, "the second gang reserves nothing while the first holds the reservation", none(second))
		if evs, _ := client.CoreV1().Events(ns).List(context.Background(), metav1.ListOptions{FieldSelector: "involvedObject.name=second,reason=" + podgroup.ReasonReserved}); len(evs.Items) > 0 {
			t.Errorf("the second gang reserved before the first: %s", evs.Items[0].Message)
		}
		forceDelete(t, ns, blocker...) // the blocker's job ends
		waitForBoundMembers(t, ns, "first", 6)
		if n, _ := boundMembers(context.Background(), ns, "second"); n != 0 {
			t.Fatalf("%d members of the second gang bound before the first was placed", n)
		}
		forceDelete(t, ns, first...) // the first job ends
		waitForEvent(t, ns, "second", podgroup.ReasonReserved, schedulerName)
		waitForBoundMembers(t, ns, "second", 6)
		consistentlyNotPartial(t, ns, "second", 6)
	})
}

// TestReservationSurvivesARestart: a new scheduler takes the reservation over from the PodGroup's
// Reserved condition and its members' nominations, and keeps the room held until the gang binds.
func TestReservationSurvivesARestart(t *testing.T) {
	cfg := schedulerConfig(t, adminKubeconfig, fastReservation(t, "60"))
	first := startScheduler(t, cfg)
	ns := testNamespace(t)
	smallNodes(t, "rt", 2, nil)
	startStream(t, ns, "rt", "1", "", 400*time.Millisecond, 6*time.Second)
	time.Sleep(3 * time.Second)
	gang := runGang(t, ns, "kept", 4, "1", "", "rt", nil)
	waitForEvent(t, ns, "kept", podgroup.ReasonReserved, schedulerName)
	cond := waitForPodGroupConditionOf(t, ns, "kept", "Reserved", "RoomHeld")
	held := nominated(t, ns, gang)
	first.stop()

	startScheduler(t, cfg)
	restarted := time.Now()
	// The new scheduler adopts the reservation (its start stays the condition's), not a new one of
	// its own: the oldest reservation's start it reports is the condition's, before the gang binds.
	const oldest = "custom_scheduler_coscheduling_oldest_reservation_start_seconds"
	adopted := false
	if err := wait.PollUntilContextTimeout(context.Background(), 20*time.Millisecond, waitTimeout, true, func(ctx context.Context) (bool, error) {
		if v, _ := gaugeValue(t, oldest, schedulerName); v == float64(cond.LastTransitionTime.Unix()) {
			adopted = true
			return true, nil
		}
		n, err := boundMembers(ctx, ns, "kept")
		return n == 4, err
	}); err != nil || !adopted {
		v, _ := gaugeValue(t, oldest, schedulerName)
		t.Errorf("the new scheduler did not adopt the reservation held since %v (oldest reservation start %v, err %v)", cond.LastTransitionTime, v, err)
	}
	waitForBoundMembers(t, ns, "kept", 4)
	consistentlyNotPartial(t, ns, "kept", 4)
	after := reservedCondition(t, ns, "kept")
	if after == nil || after.Reason != "QuorumReached" {
		t.Errorf("Reserved condition after the gang bound: %+v", after)
	}
	t.Logf("held %v since %v; the new scheduler placed the gang %v after its start", held, cond.LastTransitionTime, time.Since(restarted).Round(time.Second))
}
