package coscheduling

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/tools/cache"
	"k8s.io/component-base/metrics/testutil"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework"
	st "k8s.io/kubernetes/pkg/scheduler/testing"
	"k8s.io/utils/ptr"

	"github.com/custom-scheduler/custom-scheduler/pkg/apis/scheduling/v1alpha1"
	"github.com/custom-scheduler/custom-scheduler/pkg/coscheduling/devices"
	"github.com/custom-scheduler/custom-scheduler/pkg/coscheduling/gang"
	"github.com/custom-scheduler/custom-scheduler/pkg/coscheduling/metrics"
)

// Tests of a gang's whole life: only live members count, state is freed, PodGroup edits mid-attempt,
// and a queue order that never changes under the heap.

// enqueue puts group members into the pod cache and through PreEnqueue, as the queue does.
func enqueue(t testing.TB, env *testEnv, pods ...*v1.Pod) {
	t.Helper()
	for _, p := range pods {
		if err := env.pods.Add(p); err != nil {
			t.Fatal(err)
		}
		env.pl.members.Counts.Track(p)
	}
	for _, p := range pods {
		if s := env.pl.PreEnqueue(context.Background(), p); !passed(s) {
			t.Fatalf("PreEnqueue(%s) = %v, want success", p.Name, s)
		}
	}
}

// update stores a pod's new state in the pod cache and tells the plugin, as the informer does.
func update(t testing.TB, env *testEnv, pod *v1.Pod) {
	t.Helper()
	if err := env.pods.Update(pod); err != nil {
		t.Fatal(err)
	}
	env.pl.onPod(pod)
}

// remove deletes a pod from the pod cache and tells the plugin.
func remove(t testing.TB, env *testEnv, pod *v1.Pod) {
	t.Helper()
	if err := env.pods.Delete(pod); err != nil {
		t.Fatal(err)
	}
	env.pl.onPodDelete(pod)
}

func terminating(p *v1.Pod) *v1.Pod {
	p.DeletionTimestamp = &metav1.Time{Time: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	return p
}

func boundTo(p *v1.Pod, nodeName string) *v1.Pod {
	p = p.DeepCopy()
	p.Spec.NodeName = nodeName
	return p
}

func withPodPhase(p *v1.Pod, phase v1.PodPhase) *v1.Pod {
	p = p.DeepCopy()
	p.Status.Phase = phase
	return p
}

func members(prefix, group string, n int) []*v1.Pod {
	out := make([]*v1.Pod, n)
	for i := range out {
		out[i] = member(fmt.Sprintf("%s%d", prefix, i), group, "1")
	}
	return out
}

// reserveAndPermit runs Reserve and Permit as the framework does, registering a waiting pod.
func reserveAndPermit(t testing.TB, env *testEnv, pod *v1.Pod) *fwk.Status {
	t.Helper()
	ctx := context.Background()
	state := framework.NewCycleState()
	state.Write(framework.PodsToActivateKey, framework.NewPodsToActivate())
	if s := env.pl.Reserve(ctx, state, pod, "n"); !passed(s) {
		t.Fatalf("Reserve(%s) = %v", pod.Name, s)
	}
	s, _ := env.pl.Permit(ctx, state, pod, "n")
	if s.IsWait() {
		env.handle.wait(pod)
	}
	return s
}

// placeGang takes a gang through PreFilter, Reserve, Permit and binding.
func placeGang(t testing.TB, env *testEnv, pods []*v1.Pod, nodes []fwk.NodeInfo) []*v1.Pod {
	t.Helper()
	if _, s := env.pl.PreFilter(context.Background(), framework.NewCycleState(), pods[0], nodes); !passed(s) {
		t.Fatalf("PreFilter(%s) = %v", pods[0].Name, s)
	}
	for _, p := range pods {
		reserveAndPermit(t, env, p)
	}
	out := make([]*v1.Pod, len(pods))
	for i, p := range pods {
		if w := env.handle.waiting[p.UID]; w != nil && !w.allowed {
			t.Fatalf("%s was not allowed once the gang was reserved", p.Name)
		}
		out[i] = boundTo(p, "n")
		update(t, env, out[i])
	}
	return out
}

func TestOnlyLiveMembersCount(t *testing.T) {
	ctx := context.Background()
	nodes := func(n int) []fwk.NodeInfo {
		out := make([]fwk.NodeInfo, n)
		for i := range out {
			out[i] = node(fmt.Sprintf("n%d", i), "1")
		}
		return out
	}

	t.Run("a restarted job does not complete a quorum with its previous run", func(t *testing.T) {
		pg := makePG("ns", "g", 3, time.Time{})
		env := newTestEnv(t, defaultArgs(), []*v1alpha1.PodGroup{pg}, nil)
		old := members("old", "g", 3)
		enqueue(t, env, old...)
		bound := placeGang(t, env, old, nodes(3))
		// The job restarts: every pod is deleted, and new ones come.
		for _, p := range bound {
			remove(t, env, p)
		}
		fresh := members("new", "g", 3)
		enqueue(t, env, fresh...)
		if s := reserveAndPermit(t, env, fresh[0]); !s.IsWait() || !strings.Contains(s.Message(), "1 of minMember 3") {
			t.Fatalf("first member of the new run: Permit = %v, want Wait with 1 of minMember 3", s)
		}
	})

	t.Run("members of the previous run that are still terminating count nowhere", func(t *testing.T) {
		pg := makePG("ns", "g", 3, time.Time{})
		env := newTestEnv(t, defaultArgs(), []*v1alpha1.PodGroup{pg}, nil)
		old := members("old", "g", 3)
		enqueue(t, env, old...)
		for _, p := range placeGang(t, env, old, nodes(3)) {
			update(t, env, terminating(p.DeepCopy()))
		}
		fresh := members("new", "g", 3)
		for _, p := range fresh[:2] {
			if err := env.pods.Add(p); err != nil {
				t.Fatal(err)
			}
			env.pl.members.Counts.Track(p)
		}
		if s := env.pl.PreEnqueue(ctx, fresh[0]); !strings.Contains(s.Message(), "2 of minMember 3 live pods") {
			t.Errorf("PreEnqueue with 2 new pods beside 3 terminating = %v, want 2 of minMember 3", s)
		}
		enqueue(t, env, fresh...)
		// Room for two: the three terminating pods still hold the third node.
		_, s := env.pl.PreFilter(ctx, framework.NewCycleState(), fresh[0], nodes(2))
		if s.Code() != fwk.UnschedulableAndUnresolvable || !strings.Contains(s.Message(), "3 more members") {
			t.Fatalf("PreFilter = %v, want the whole new gang (3) checked and refused", s)
		}
		if got := len(env.pl.gangs.Get("ns/g").Members); got != 0 {
			t.Errorf("%d members count, want 0: terminating pods are not live", got)
		}
	})

	t.Run("the quorum is decided on the pod store, not on a member set its handler has not caught up with", func(t *testing.T) {
		pg := makePG("ns", "g", 3, time.Time{})
		env := newTestEnv(t, defaultArgs(), []*v1alpha1.PodGroup{pg}, nil)
		old := members("old", "g", 3)
		enqueue(t, env, old...)
		bound := placeGang(t, env, old, nodes(3))
		// The job restarts: the store has the old pods terminating, but the plugin's handler has
		// not seen those updates yet when the new pods are scheduled.
		for _, p := range bound {
			if err := env.pods.Update(terminating(p.DeepCopy())); err != nil {
				t.Fatal(err)
			}
		}
		fresh := members("new", "g", 3)
		enqueue(t, env, fresh...)
		if _, s := env.pl.PreFilter(ctx, framework.NewCycleState(), fresh[0], nodes(3)); !passed(s) {
			t.Fatalf("PreFilter = %v", s)
		}
		if s := reserveAndPermit(t, env, fresh[0]); !s.IsWait() {
			t.Fatalf("Permit(new0) = %v, want Wait: the old run's terminating pods must not complete its quorum", s)
		}
	})

	t.Run("a finished member's replacement is placed alone", func(t *testing.T) {
		pg := makePG("ns", "g", 3, time.Time{})
		env := newTestEnv(t, defaultArgs(), []*v1alpha1.PodGroup{pg}, nil)
		gang := members("m", "g", 3)
		enqueue(t, env, gang...)
		bound := placeGang(t, env, gang, nodes(3))
		update(t, env, withPodPhase(bound[1], v1.PodFailed))
		if got := len(env.pl.gangs.Get("ns/g").Members); got != 2 {
			t.Fatalf("%d members count after one failed, want 2", got)
		}
		replacement := member("r", "g", "1")
		enqueue(t, env, replacement)
		if _, s := env.pl.PreFilter(ctx, framework.NewCycleState(), replacement, nodes(1)); !passed(s) {
			t.Fatalf("PreFilter(replacement) = %v: one member is missing and one node is free", s)
		}
		if s := reserveAndPermit(t, env, replacement); !passed(s) {
			t.Fatalf("Permit(replacement) = %v, want Success: with it the live members reach minMember", s)
		}
	})

	t.Run("a replacement alone does not complete a gang of which only it is live", func(t *testing.T) {
		pg := makePG("ns", "g", 2, time.Time{})
		env := newTestEnv(t, defaultArgs(), []*v1alpha1.PodGroup{pg}, nil)
		gang := members("m", "g", 2)
		enqueue(t, env, gang...)
		bound := placeGang(t, env, gang, nodes(2))
		update(t, env, withPodPhase(bound[0], v1.PodSucceeded))
		update(t, env, terminating(bound[1].DeepCopy()))
		r := members("r", "g", 2)
		enqueue(t, env, r...)
		if s := reserveAndPermit(t, env, r[0]); !s.IsWait() {
			t.Fatalf("Permit = %v, want Wait", s)
		}
	})

	t.Run("a PodGroup recreated under the same name starts from nothing", func(t *testing.T) {
		pg := makePG("ns", "g", 2, time.Time{})
		pg.UID = "first"
		env := newTestEnv(t, defaultArgs(), []*v1alpha1.PodGroup{pg}, nil)
		gang := members("m", "g", 2)
		enqueue(t, env, gang...)
		reserveAndPermit(t, env, gang[0])
		env.pl.Unreserve(ctx, nil, gang[0], "n") // the attempt fails: the group backs off
		if s := env.pl.PreEnqueue(ctx, gang[1]); passed(s) {
			t.Fatalf("PreEnqueue during the back-off = success")
		}
		if err := env.pgs.Delete(pg); err != nil {
			t.Fatal(err)
		}
		env.pl.onPodGroupDelete(pg)
		again := pg.DeepCopy()
		again.UID = "second"
		if err := env.pgs.Add(again); err != nil {
			t.Fatal(err)
		}
		if s := env.pl.PreEnqueue(ctx, gang[1]); !passed(s) {
			t.Errorf("PreEnqueue under the recreated PodGroup = %v, want success: no back-off carried over", s)
		}
	})
}

// TestLateDeleteOfARecreatedPodGroup: a scheduling cycle may read a recreated PodGroup from the store
// before the handler is told of the old one's delete; the late delete leaves the new PodGroup's
// attempt alone (it rejected the new attempt's waiting members before).
func TestLateDeleteOfARecreatedPodGroup(t *testing.T) {
	old := makePG("ns", "g", 2, time.Time{})
	old.UID = "old"
	env := newTestEnv(t, defaultArgs(), []*v1alpha1.PodGroup{old}, nil)
	gang := members("m", "g", 2)
	enqueue(t, env, gang...)
	if err := env.pgs.Delete(old); err != nil {
		t.Fatal(err)
	}
	recreated := old.DeepCopy()
	recreated.UID = "new"
	if err := env.pgs.Add(recreated); err != nil {
		t.Fatal(err)
	}
	if s := reserveAndPermit(t, env, gang[0]); !s.IsWait() {
		t.Fatalf("Permit(m0) under the recreated PodGroup = %v, want Wait", s)
	}
	env.pl.podGroupEventHandler().OnDelete(old)
	if w := env.handle.waiting[gang[0].UID]; w.rejected != "" {
		t.Errorf("the old PodGroup's late delete rejected the new one's member: %q", w.rejected)
	}
	if s := reserveAndPermit(t, env, gang[1]); !passed(s) {
		t.Errorf("Permit(m1) = %v, want Success: the new attempt reaches its quorum", s)
	}
}

func TestPodGroupEditsMidAttempt(t *testing.T) {
	ctx := context.Background()
	setup := func(t *testing.T) (*testEnv, *v1alpha1.PodGroup, []*v1.Pod) {
		pg := makePG("ns", "g", 3, time.Time{})
		pg.Generation = 1
		env := newTestEnv(t, defaultArgs(), []*v1alpha1.PodGroup{pg}, nil)
		gang := members("m", "g", 4)
		enqueue(t, env, gang...)
		for _, p := range gang[:2] {
			if s := reserveAndPermit(t, env, p); !s.IsWait() {
				t.Fatalf("Permit(%s) = %v, want Wait", p.Name, s)
			}
		}
		return env, pg, gang
	}
	edit := func(t *testing.T, env *testEnv, pg *v1alpha1.PodGroup, minMember int32) *v1alpha1.PodGroup {
		changed := pg.DeepCopy()
		changed.Spec.MinMember = minMember
		changed.Generation++
		if err := env.pgs.Update(changed); err != nil {
			t.Fatal(err)
		}
		env.pl.podGroupEventHandler().OnUpdate(pg, changed)
		return changed
	}

	t.Run("deleted: waiting members are rejected at once and new ones wait for it", func(t *testing.T) {
		env, pg, gang := setup(t)
		if err := env.pgs.Delete(pg); err != nil {
			t.Fatal(err)
		}
		env.pl.podGroupEventHandler().OnDelete(pg)
		for _, p := range gang[:2] {
			if w := env.handle.waiting[p.UID]; !strings.Contains(w.rejected, "deleted") {
				t.Errorf("%s: rejected with %q, want a rejection naming the deletion", p.Name, w.rejected)
			}
		}
		if s := env.pl.PreEnqueue(ctx, gang[2]); !strings.Contains(s.Message(), "does not exist") {
			t.Errorf("PreEnqueue = %v, want PodGroupNotFound", s)
		}
	})

	t.Run("being deleted (a finalizer holds it): as deleted", func(t *testing.T) {
		env, pg, gang := setup(t)
		deleting := pg.DeepCopy()
		deleting.DeletionTimestamp = &metav1.Time{Time: time.Now()}
		if err := env.pgs.Update(deleting); err != nil {
			t.Fatal(err)
		}
		env.pl.podGroupEventHandler().OnUpdate(pg, deleting)
		for _, p := range gang[:2] {
			if w := env.handle.waiting[p.UID]; !strings.Contains(w.rejected, "deleted") {
				t.Errorf("%s: rejected with %q, want a rejection naming the deletion", p.Name, w.rejected)
			}
		}
		if s := env.pl.PreEnqueue(ctx, gang[2]); !strings.Contains(s.Message(), "does not exist") {
			t.Errorf("PreEnqueue = %v, want PodGroupNotFound while it is being deleted", s)
		}
		// A later update of the terminating object (its finalizer going) changes nothing more.
		env.pl.podGroupEventHandler().OnUpdate(deleting, deleting.DeepCopy())
	})

	t.Run("minMember lowered without a new generation (the in-tree API's way): allowed at once", func(t *testing.T) {
		env, pg, gang := setup(t)
		changed := pg.DeepCopy()
		changed.Spec.MinMember = 2
		if err := env.pgs.Update(changed); err != nil {
			t.Fatal(err)
		}
		env.pl.podGroupEventHandler().OnUpdate(pg, changed)
		for _, p := range gang[:2] {
			if w := env.handle.waiting[p.UID]; !w.allowed {
				t.Errorf("%s was not allowed after minMember was lowered to 2", p.Name)
			}
		}
	})

	t.Run("minMember lowered to what is reserved: waiting members are allowed at once", func(t *testing.T) {
		env, pg, gang := setup(t)
		edit(t, env, pg, 2)
		for _, p := range gang[:2] {
			if w := env.handle.waiting[p.UID]; !w.allowed {
				t.Errorf("%s was not allowed after minMember was lowered to 2", p.Name)
			}
		}
	})

	t.Run("minMember raised: waiting members keep waiting within the deadline", func(t *testing.T) {
		env, pg, gang := setup(t)
		edit(t, env, pg, 4)
		for _, p := range gang[:2] {
			if w := env.handle.waiting[p.UID]; w.allowed || w.rejected != "" {
				t.Errorf("%s: allowed=%v rejected=%q, want still waiting", p.Name, w.allowed, w.rejected)
			}
		}
		if s := reserveAndPermit(t, env, gang[2]); !s.IsWait() || !strings.Contains(s.Message(), "3 of minMember 4") {
			t.Errorf("Permit(m2) = %v, want Wait with 3 of minMember 4", s)
		}
		if s := reserveAndPermit(t, env, gang[3]); !passed(s) {
			t.Errorf("Permit(m3) = %v, want Success", s)
		}
	})

	t.Run("recreated while the watch was down: the relist's update to a new UID rejects the old attempt", func(t *testing.T) {
		env, pg, gang := setup(t)
		pg.UID = "old"
		recreated := makePG("ns", "g", 3, time.Time{})
		recreated.UID, recreated.Generation = "new", 1
		if err := env.pgs.Update(recreated); err != nil {
			t.Fatal(err)
		}
		env.handle.activated = nil
		env.pl.podGroupEventHandler().OnUpdate(pg, recreated)
		for _, p := range gang[:2] {
			if w := env.handle.waiting[p.UID]; !strings.Contains(w.rejected, "deleted") {
				t.Errorf("%s: rejected with %q, want the old PodGroup's attempt rejected", p.Name, w.rejected)
			}
		}
		if len(env.handle.activated) == 0 {
			t.Errorf("the new PodGroup's members were not let in")
		}
		// The new PodGroup's attempt starts from nothing: the old members' Unreserves are echoes.
		for _, p := range gang[:2] {
			env.pl.Unreserve(ctx, framework.NewCycleState(), p, "n")
		}
		if g := env.pl.gangs.Get("ns/g"); g.BackingOff(env.clock.Now()) || len(g.Members) != 0 {
			t.Errorf("after the echoes: backing off %v, members %v; want a fresh state", g.BackingOff(env.clock.Now()), g.Members)
		}
		if s := reserveAndPermit(t, env, gang[2]); !s.IsWait() || !strings.Contains(s.Message(), "1 of minMember 3") {
			t.Errorf("Permit(m2) = %v, want Wait with 1 of minMember 3", s)
		}
	})

	t.Run("feasibility results are keyed by generation, not by status updates", func(t *testing.T) {
		pg := makePG("ns", "g", 3, time.Time{})
		pg.Generation = 1
		env := newTestEnv(t, defaultArgs(), []*v1alpha1.PodGroup{pg}, nil)
		gang := members("m", "g", 3)
		enqueue(t, env, gang...)
		nodes := []fwk.NodeInfo{node("a", "1"), node("b", "1")}
		check := func() float64 {
			_, _ = env.pl.PreFilter(ctx, framework.NewCycleState(), gang[0], nodes)
			return counterValue(t, metrics.GangRejections, "test", metrics.ReasonInfeasible)
		}
		first := check()
		statusOnly := pg.DeepCopy()
		statusOnly.ResourceVersion = "2"
		statusOnly.Status.Phase = v1alpha1.PodGroupPreScheduling
		if err := env.pgs.Update(statusOnly); err != nil {
			t.Fatal(err)
		}
		if got := check(); got != first {
			t.Errorf("a status-only update made the gang be checked again")
		}
		edit(t, env, statusOnly, 4)
		if got := check(); got != first+1 {
			t.Errorf("a spec change did not make the gang be checked again (%v checks, want %v)", got, first+1)
		}
	})
}

// TestStateIsFreed creates, runs and finishes 1,000 gangs (some whose attempts fail first) and checks
// that the plugin's state is back at its starting size.
func TestStateIsFreed(t *testing.T) {
	ctx := context.Background()
	env := newTestEnv(t, defaultArgs(), nil, nil)
	nodes := []fwk.NodeInfo{node("a", "8"), node("b", "8")}
	for i := range 1000 {
		name := fmt.Sprintf("g%d", i)
		pg := makePG("ns", name, 2, time.Time{})
		pg.UID = types.UID(name)
		if err := env.pgs.Add(pg); err != nil {
			t.Fatal(err)
		}
		gang := members(name+"-", name, 2)
		enqueue(t, env, gang...)
		if i%10 == 0 {
			// A failed attempt first: the gang backs off, then runs.
			reserveAndPermit(t, env, gang[0])
			env.pl.Unreserve(ctx, nil, gang[0], "n")
			env.clock.Step(11 * time.Second)
		}
		for _, p := range placeGang(t, env, gang, nodes) {
			update(t, env, withPodPhase(p, v1.PodSucceeded))
			remove(t, env, p)
		}
		if i%3 == 0 {
			if err := env.pgs.Delete(pg); err != nil {
				t.Fatal(err)
			}
			env.pl.onPodGroupDelete(pg)
		}
	}
	env.clock.Step(time.Minute)
	if groups, gated, stamps := env.pl.stateSize(); groups+gated+stamps != 0 {
		t.Errorf("state after 1000 finished gangs: %d groups, %d gated pods, %d queue stamps; want none", groups, gated, stamps)
	}
	if v, err := testutil.GetGaugeMetricValue(metrics.TrackedGroups.WithLabelValues("test")); err != nil || v != 0 {
		t.Errorf("tracked_pod_groups = %v (%v), want 0", v, err)
	}
	if env.pl.gangs.Waiting() != 0 {
		t.Errorf("waitingGangs = %d, want 0", env.pl.gangs.Waiting())
	}
}

// TestQueueOrderIsStable checks that Less does not change for pods already in the queue when their
// group fails, and that it is a strict weak order that keeps a group's members adjacent, over random
// pods and groups. Replay a failure with the seed it prints.
func TestQueueOrderIsStable(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

	t.Run("a failure does not reorder pods already queued", func(t *testing.T) {
		pgs := []*v1alpha1.PodGroup{makePG("ns", "old", 1, t0), makePG("ns", "new", 1, t0.Add(time.Minute))}
		env := newTestEnv(t, defaultArgs(), pgs, nil)
		a, b := member("a", "old", "1"), member("b", "new", "1")
		enqueue(t, env, a, b)
		qa, qb := queued(t, a, t0), queued(t, b, t0)
		if !env.pl.Less(qa, qb) {
			t.Fatal("the older group is not first")
		}
		env.clock.Step(2 * time.Minute)
		env.pl.mu.Lock()
		g := env.pl.gangs.Get("ns/old")
		env.pl.stepLocked(g, func() gang.Result { return g.OnNoNode(a, env.clock.Now(), 1, 0, env.pl.backoff, nil) })
		env.pl.mu.Unlock()
		if !env.pl.Less(qa, qb) {
			t.Errorf("the order of queued pods changed when the group failed")
		}
		// Entering the queue again after the failure and its back-off, the member goes behind the
		// newer group.
		env.clock.Step(11 * time.Second)
		if s := env.pl.PreEnqueue(context.Background(), a); !passed(s) {
			t.Fatalf("PreEnqueue after the back-off = %v", s)
		}
		if env.pl.Less(qa, qb) {
			t.Errorf("a member queued after its group failed still goes first")
		}
	})

	t.Run("random pods and groups", func(t *testing.T) {
		seed := uint64(time.Now().UnixNano())
		t.Logf("seed %d", seed)
		for round := range 20 {
			rng := rand.New(rand.NewPCG(seed, uint64(round)))
			env := newTestEnv(t, defaultArgs(), nil, nil)
			var entities []*framework.QueuedPodInfo
			groupOf := map[types.UID]string{}
			for g := range rng.IntN(6) + 1 {
				name := fmt.Sprintf("g%d", g)
				stamp := gang.QueueStamp{At: t0.Add(time.Duration(rng.IntN(3)) * time.Minute), Key: "ns/" + name}
				prio := int32(rng.IntN(2))
				for i := range rng.IntN(5) + 1 {
					p := st.MakePod().SchedulerName("test").Namespace("ns").Name(fmt.Sprintf("%s-%d", name, i)).UID(fmt.Sprintf("%s-%d", name, i)).
						Label(v1alpha1.PodGroupLabel, name).Priority(prio).Obj()
					p.CreationTimestamp = metav1.NewTime(t0.Add(time.Duration(rng.IntN(3)) * time.Second))
					env.pl.stamps.Store(p.UID, stamp)
					groupOf[p.UID] = stamp.Key
					entities = append(entities, queued(t, p, t0.Add(time.Duration(rng.IntN(4))*time.Minute)))
				}
			}
			for i := range rng.IntN(6) {
				p := st.MakePod().Namespace("ns").Name(fmt.Sprintf("plain-%d", i)).UID(fmt.Sprintf("plain-%d", i)).Priority(int32(rng.IntN(2))).Obj()
				entities = append(entities, queued(t, p, t0.Add(time.Duration(rng.IntN(4))*time.Minute)))
			}
			less := func(a, b *framework.QueuedPodInfo) bool { return env.pl.Less(a, b) }
			for _, a := range entities {
				if less(a, a) {
					t.Fatalf("seed %d round %d: Less(%s, %s) is true", seed, round, a.Pod.Name, a.Pod.Name)
				}
				for _, b := range entities {
					if less(a, b) && less(b, a) {
						t.Fatalf("seed %d round %d: not antisymmetric for %s, %s", seed, round, a.Pod.Name, b.Pod.Name)
					}
					for _, c := range entities {
						if less(a, b) && less(b, c) && !less(a, c) {
							t.Fatalf("seed %d round %d: not transitive for %s < %s < %s", seed, round, a.Pod.Name, b.Pod.Name, c.Pod.Name)
						}
					}
				}
			}
			sort.SliceStable(entities, func(i, j int) bool { return less(entities[i], entities[j]) })
			seen, last := map[string]bool{}, ""
			for _, e := range entities {
				key := groupOf[e.Pod.UID]
				if key != "" && key != last && seen[key] {
					t.Fatalf("seed %d round %d: members of %s are not adjacent", seed, round, key)
				}
				seen[key], last = true, key
			}
		}
	})
}

// TestPreEnqueueCountsOnTheStoreBelowTheQuorum: the scheduling queue runs PreEnqueue for a new pod
// before the plugin's pod handler may have counted it. Below minMember the count comes from the store,
// so a member held back is held back on the store's word and its message counts every member; at
// minMember and above the handler's O(1) count answers.
func TestPreEnqueueCountsOnTheStoreBelowTheQuorum(t *testing.T) {
	env := newTestEnv(t, defaultArgs(), []*v1alpha1.PodGroup{makePG("ns", "g", 3, time.Time{})}, nil)
	a, b, c := member("a", "g", "1"), member("b", "g", "1"), member("c", "g", "1")
	for _, p := range []*v1.Pod{a, b} {
		if err := env.pods.Add(p); err != nil {
			t.Fatal(err)
		}
	}
	env.pl.members.Counts.Track(a) // the handler has seen a, not b yet
	if s := env.pl.PreEnqueue(context.Background(), b); !strings.Contains(s.Message(), "2 of minMember 3 live pods") {
		t.Errorf("PreEnqueue(b) = %v, want it held back counting a and b", s)
	}
	if err := env.pods.Add(c); err != nil {
		t.Fatal(err)
	}
	if s := env.pl.PreEnqueue(context.Background(), c); !passed(s) {
		t.Errorf("PreEnqueue(c) with 3 members in the store = %v, want it let in", s)
	}
}

// TestWaitingForClaims: members wait until minMember of them have their claims from templates made
// (the resourceclaim controller records each in the pod's status), and the update that makes the
// last one lets the whole group in, after the count.
func TestWaitingForClaims(t *testing.T) {
	withClaim := func(p *v1.Pod, made bool) *v1.Pod {
		p = p.DeepCopy()
		p.Spec.ResourceClaims = []v1.PodResourceClaim{{Name: "gpu", ResourceClaimTemplateName: ptr.To("gpu")}}
		if made {
			p.Status.ResourceClaimStatuses = []v1.PodResourceClaimStatus{{Name: "gpu", ResourceClaimName: ptr.To(p.Name + "-gpu")}}
		}
		return p
	}
	a, b := withClaim(member("a", "g", "1"), true), withClaim(member("b", "g", "1"), false)
	env := newTestEnv(t, defaultArgs(), []*v1alpha1.PodGroup{makePG("ns", "g", 2, time.Time{})}, nil)
	env.pl.members.Counts.Unmade = func(p *v1.Pod) bool { return devices.ClaimsUnmade(p, nil) }
	for _, p := range []*v1.Pod{a, b} {
		if err := env.pods.Add(p); err != nil {
			t.Fatal(err)
		}
		env.pl.onPodAdd(p)
	}
	if s := env.pl.PreEnqueue(context.Background(), a); passed(s) || !strings.Contains(s.Message(), "1 of minMember 2 live pods of PodGroup ns/g have their ResourceClaims from templates made") {
		t.Fatalf("PreEnqueue(a) with b's claim unmade = %v, want it held back", s)
	}
	if got := env.pl.heldBack.Len(); got != 1 {
		t.Errorf("%d pods held back, want 1", got)
	}
	env.handle.activated = nil
	env.pl.onPodUpdate(a) // nothing changed: nobody let in
	if got := env.handle.activatedPods(); len(got) != 0 {
		t.Errorf("an update that makes no claim activated %v", got)
	}
	bMade := withClaim(member("b", "g", "1"), true)
	if err := env.pods.Update(bMade); err != nil {
		t.Fatal(err)
	}
	env.pl.onPodUpdate(bMade)
	if diff := cmp.Diff([]string{"ns/a", "ns/b"}, sets.List(sets.New(env.handle.activatedPods()...))); diff != "" {
		t.Errorf("members activated once the last claim is made (-want,+got): %s", diff)
	}
	for _, p := range []*v1.Pod{a, bMade} {
		if s := env.pl.PreEnqueue(context.Background(), p); !passed(s) {
			t.Errorf("PreEnqueue(%s) with every claim made = %v, want it let in", p.Name, s)
		}
	}
	// The store answers where the handler's count trails it (the queue may run PreEnqueue first).
	c := withClaim(member("c", "g", "1"), false)
	env2 := newTestEnv(t, defaultArgs(), []*v1alpha1.PodGroup{makePG("ns", "g", 2, time.Time{})}, nil)
	env2.pl.members.Counts.Unmade = env.pl.members.Counts.Unmade
	for _, p := range []*v1.Pod{a, c} {
		if err := env2.pods.Add(p); err != nil {
			t.Fatal(err)
		}
		env2.pl.onPodAdd(p)
	}
	cMade := withClaim(member("c", "g", "1"), true)
	if err := env2.pods.Update(cMade); err != nil {
		t.Fatal(err)
	}
	if s := env2.pl.PreEnqueue(context.Background(), cMade); !passed(s) {
		t.Errorf("PreEnqueue(c) with its claim made in the store, not yet counted = %v, want it let in", s)
	}
}

// TestClaimEventHandler: a claim change that frees devices (an allocation dropped, an allocated claim
// deleted, also through a tombstone) or pins a PodGroup's claim makes the cached checks stale and
// activates the unscheduled members that may claim devices of the gangs the plugin tracks; a claim
// allocated at binding, or any other write, does neither.
func TestClaimEventHandler(t *testing.T) {
	withClaim := func(p *v1.Pod) *v1.Pod {
		p.Spec.ResourceClaims = []v1.PodResourceClaim{{Name: "gpu", ResourceClaimTemplateName: ptr.To("gpu")}}
		return p
	}
	claim := func(allocated bool, owner string) *resourceapi.ResourceClaim {
		c := &resourceapi.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "c"}}
		if owner != "" {
			c.OwnerReferences = []metav1.OwnerReference{{Kind: owner, Name: "g"}}
		}
		if allocated {
			c.Status.Allocation = &resourceapi.AllocationResult{}
		}
		return c
	}
	cases := []struct {
		name     string
		old, new interface{}
		delete   bool
		want     []string
	}{
		{name: "allocation dropped", old: claim(true, ""), new: claim(false, ""), want: []string{"ns/a", "ns/b"}},
		{name: "allocated claim deleted", old: claim(true, ""), delete: true, want: []string{"ns/a", "ns/b"}},
		{name: "allocated claim deleted, seen as a tombstone", old: cache.DeletedFinalStateUnknown{Key: "ns/c", Obj: claim(true, "")}, delete: true, want: []string{"ns/a", "ns/b"}},
		{name: "a PodGroup's claim allocated", old: claim(false, "PodGroup"), new: claim(true, "PodGroup"), want: []string{"ns/a", "ns/b"}},
		{name: "a member's claim allocated at binding", old: claim(false, ""), new: claim(true, "")},
		{name: "an allocated claim's status written", old: claim(true, ""), new: claim(true, "")},
		{name: "an unallocated claim deleted", old: claim(false, ""), delete: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			// a and b wait for devices; bound is placed; plain claims nothing; other is another
			// profile's pod in the group.
			a, b := withClaim(member("a", "g", "1")), withClaim(member("b", "g", "1"))
			bound := withClaim(member("bound", "g", "1"))
			bound.Spec.NodeName = "n1"
			plain := member("plain", "g", "1")
			other := withClaim(member("other", "g", "1"))
			other.Spec.SchedulerName = "default-scheduler"
			env := newTestEnv(t, defaultArgs(), []*v1alpha1.PodGroup{makePG("ns", "g", 4, time.Time{})}, []*v1.Pod{a, b, bound, plain, other})
			env.pl.onPod(bound) // the gang is tracked from its bound member
			epoch := env.pl.epoch.Load()
			h := env.pl.claimEventHandler()
			if tc.delete {
				h.OnDelete(tc.old)
			} else {
				h.OnUpdate(tc.old, tc.new)
			}
			if diff := cmp.Diff(tc.want, sets.List(sets.New(env.handle.activatedPods()...)), cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("activated (-want,+got): %s", diff)
			}
			if stale := env.pl.epoch.Load() != epoch; stale != (len(tc.want) > 0) {
				t.Errorf("cached checks made stale = %v, want %v", stale, len(tc.want) > 0)
			}
		})
	}
}

// TestClaimEventHandlerWaitsForTheClaimCache: the members are activated once the scheduler's claim
// cache shows the claim gone, not before (their attempt would still see the devices taken).
func TestClaimEventHandlerWaitsForTheClaimCache(t *testing.T) {
	env := pendingDeviceGang(t)
	held := &resourceapi.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "c", UID: "c1"}}
	held.Status.Allocation = &resourceapi.AllocationResult{}
	var mu sync.Mutex
	cached := held
	env.pl.freed.Cache = func(_, _ string) (*resourceapi.ResourceClaim, error) {
		mu.Lock()
		defer mu.Unlock()
		if cached == nil {
			return nil, fmt.Errorf("not found")
		}
		return cached, nil
	}
	env.pl.claimEventHandler().OnDelete(held)
	time.Sleep(5 * claimCachePoll)
	if got := env.handle.activatedPods(); len(got) != 0 {
		t.Fatalf("activated %v while the claim cache still holds the claim", got)
	}
	mu.Lock()
	cached = nil
	mu.Unlock()
	if err := wait.PollUntilContextTimeout(context.Background(), claimCachePoll, claimCacheWait, true, func(context.Context) (bool, error) {
		return len(env.handle.activatedPods()) > 0, nil
	}); err != nil {
		t.Fatalf("nothing activated once the claim cache dropped the claim: %v", err)
	}
	if diff := cmp.Diff([]string{"ns/a"}, env.handle.activatedPods()); diff != "" {
		t.Errorf("activated (-want,+got): %s", diff)
	}
}

// TestClaimEventHandlerSkipsPlacedGangs: a gang whose live members are all bound is passed over on its
// counts, and the count test does not pass over a gang with one member bound and one unscheduled: that
// member is activated.
func TestClaimEventHandlerSkipsPlacedGangs(t *testing.T) {
	withClaim := func(p *v1.Pod, node string) *v1.Pod {
		p.Spec.ResourceClaims = []v1.PodResourceClaim{{Name: "gpu", ResourceClaimTemplateName: ptr.To("gpu")}}
		p.Spec.NodeName = node
		return p
	}
	placed := []*v1.Pod{withClaim(member("p0", "placed", "1"), "n1"), withClaim(member("p1", "placed", "1"), "n2")}
	pending := []*v1.Pod{withClaim(member("w0", "waiting", "1"), "n1"), withClaim(member("w1", "waiting", "1"), "")}
	env := newTestEnv(t, defaultArgs(), []*v1alpha1.PodGroup{makePG("ns", "placed", 2, time.Time{}), makePG("ns", "waiting", 2, time.Time{})},
		append(append([]*v1.Pod{}, placed...), pending...))
	for _, p := range []*v1.Pod{placed[0], placed[1], pending[0]} {
		env.pl.onPod(p)
	}
	freed := &resourceapi.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "c"}}
	freed.Status.Allocation = &resourceapi.AllocationResult{}
	env.pl.claimEventHandler().OnDelete(freed)
	if diff := cmp.Diff([]string{"ns/w1"}, env.handle.activatedPods()); diff != "" {
		t.Errorf("activated (-want,+got): %s", diff)
	}
}

// TestPodAddCompletingTheGroupLetsTheHeldIn: the pod handler is what lets a held member in when a
// pod added completes its group (there is no pod-added queueing hint: the queue would walk every
// held member on every bind). Both an unscheduled member and one created bound complete it; a pod
// that does not complete it, or belongs to another group, lets nobody in.
func TestPodAddCompletingTheGroupLetsTheHeldIn(t *testing.T) {
	bound := func(p *v1.Pod) *v1.Pod { p.Spec.NodeName = "n1"; return p }
	cases := []struct {
		name  string
		added *v1.Pod
		want  []string
	}{
		{name: "an unscheduled member completes the group", added: member("b", "g", "1"), want: []string{"ns/a", "ns/b"}},
		{name: "a member created bound completes the group", added: bound(member("b", "g", "1")), want: []string{"ns/a"}},
		{name: "a pod of another group", added: member("x", "other", "1")},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			a := member("a", "g", "1")
			env := newTestEnv(t, defaultArgs(), []*v1alpha1.PodGroup{makePG("ns", "g", 2, time.Time{}), makePG("ns", "other", 2, time.Time{})}, []*v1.Pod{a})
			if s := env.pl.PreEnqueue(context.Background(), a); passed(s) {
				t.Fatalf("PreEnqueue(a) alone = %v, want it held back", s)
			}
			if err := env.pods.Add(tc.added); err != nil {
				t.Fatal(err)
			}
			env.pl.onPodAdd(tc.added)
			if diff := cmp.Diff(tc.want, sets.List(sets.New(env.handle.activatedPods()...)), cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("activated (-want,+got): %s", diff)
			}
		})
	}
}
