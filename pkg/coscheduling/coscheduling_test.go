package coscheduling

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/events"
	k8smetrics "k8s.io/component-base/metrics"
	"k8s.io/component-base/metrics/testutil"
	"k8s.io/klog/v2"
	"k8s.io/klog/v2/ktesting"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/queuesort"
	st "k8s.io/kubernetes/pkg/scheduler/testing"
	testingclock "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"

	"github.com/custom-scheduler/custom-scheduler/pkg/apis/config"
	"github.com/custom-scheduler/custom-scheduler/pkg/apis/scheduling/v1alpha1"
	"github.com/custom-scheduler/custom-scheduler/pkg/coscheduling/devices"
	"github.com/custom-scheduler/custom-scheduler/pkg/coscheduling/gang"
	"github.com/custom-scheduler/custom-scheduler/pkg/coscheduling/gangfit"
	"github.com/custom-scheduler/custom-scheduler/pkg/coscheduling/metrics"
	"github.com/custom-scheduler/custom-scheduler/pkg/coscheduling/podgroup"
	"github.com/custom-scheduler/custom-scheduler/pkg/coscheduling/podgroup/pgcache"
)

// fakeHandle is the part of fwk.Handle the plugin uses: waiting pods, activation, profile name.
type fakeHandle struct {
	fwk.Handle
	mu        sync.Mutex
	waiting   map[types.UID]*fakeWaitingPod
	activated []string
	// passes counts the Activate calls.
	passes int
}

func newFakeHandle() *fakeHandle {
	return &fakeHandle{waiting: map[types.UID]*fakeWaitingPod{}}
}

func (h *fakeHandle) GetWaitingPod(uid types.UID) fwk.WaitingPod {
	h.mu.Lock()
	defer h.mu.Unlock()
	if w, ok := h.waiting[uid]; ok {
		return w
	}
	return nil
}

func (h *fakeHandle) Activate(_ klog.Logger, pods map[string]*v1.Pod) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.passes++
	for k := range pods {
		h.activated = append(h.activated, k)
	}
}

// activationPasses counts the Activate calls so far.
func (h *fakeHandle) activationPasses() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.passes
}

// activatedPods are the pods activated so far (namespace/name).
func (h *fakeHandle) activatedPods() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Clone(h.activated)
}

func (h *fakeHandle) EventRecorder() events.EventRecorderLogger { return nil }
func (h *fakeHandle) ProfileName() string                       { return "test" }

// wait registers pod as waiting at Permit, as the framework does after Permit returns Wait.
func (h *fakeHandle) wait(pod *v1.Pod) *fakeWaitingPod {
	h.mu.Lock()
	defer h.mu.Unlock()
	w := &fakeWaitingPod{pod: pod}
	h.waiting[pod.UID] = w
	return w
}

type fakeWaitingPod struct {
	pod      *v1.Pod
	allowed  bool
	rejected string
}

func (w *fakeWaitingPod) GetPod() *v1.Pod                 { return w.pod }
func (w *fakeWaitingPod) GetPendingPlugins() []string     { return []string{Name} }
func (w *fakeWaitingPod) Allow(string)                    { w.allowed = w.rejected == "" }
func (w *fakeWaitingPod) Reject(_, msg string) bool       { w.rejected = msg; return true }
func (w *fakeWaitingPod) Preempt(_ string, _ string) bool { return true }

type testEnv struct {
	pl     *Coscheduling
	handle *fakeHandle
	clock  *testingclock.FakeClock
	pgs    cache.Store
	pods   cache.Indexer
}

func newTestEnv(t testing.TB, args config.CoschedulingArgs, pgs []*v1alpha1.PodGroup, pods []*v1.Pod) *testEnv {
	t.Helper()
	_, ctx := ktesting.NewTestContext(t)
	ctx, cancel := context.WithCancel(ctx) // ends the plugin's background work with the test
	t.Cleanup(cancel)
	pgStore := cache.NewStore(cache.MetaNamespaceKeyFunc)
	for _, pg := range pgs {
		if err := pgStore.Add(pg); err != nil {
			t.Fatal(err)
		}
	}
	podIndexer := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{podgroup.IndexName: podgroup.LiveIndexFunc})
	for _, p := range pods {
		if err := podIndexer.Add(p); err != nil {
			t.Fatal(err)
		}
	}
	h := newFakeHandle()
	clk := testingclock.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	pl := newPlugin(ctx, h, &args, clk, pgcache.Lister{Store: pgStore}, podIndexer)
	pl.running.Store(true)
	for _, p := range pods {
		pl.members.Counts.Track(p) // as the pod informer's handler does
	}
	return &testEnv{pl: pl, handle: h, clock: clk, pgs: pgStore, pods: podIndexer}
}

func defaultArgs() config.CoschedulingArgs {
	return config.CoschedulingArgs{PermitWaitingTimeSeconds: 60, PodGroupBackoffSeconds: 10}
}

func queued(t *testing.T, pod *v1.Pod, ts time.Time) *framework.QueuedPodInfo {
	t.Helper()
	pi, err := framework.NewPodInfo(pod)
	if err != nil {
		t.Fatal(err)
	}
	return &framework.QueuedPodInfo{PodInfo: pi, QueueingParams: framework.QueueingParams{Timestamp: ts}}
}

func TestLess(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	pgs := []*v1alpha1.PodGroup{
		makePG("ns", "old", 1, t0),
		makePG("ns", "new", 1, t0.Add(time.Minute)),
		makePG("ns", "twin-a", 1, t0.Add(2*time.Minute)),
		makePG("ns", "twin-b", 1, t0.Add(2*time.Minute)),
	}
	cases := []struct {
		name string
		a, b *v1.Pod
		ta   time.Time
		tb   time.Time
		// failed marks a group that lost its last attempt at t0+5m.
		failed string
		want   bool
	}{
		{
			name: "higher priority first",
			a:    st.MakePod().Name("a").Priority(10).Obj(), b: st.MakePod().Name("b").Priority(100).Obj(),
			want: false,
		},
		{
			name: "plain pods by queue time",
			a:    st.MakePod().Name("a").Obj(), b: st.MakePod().Name("b").Obj(),
			ta: t0.Add(time.Second), tb: t0.Add(2 * time.Second),
			want: true,
		},
		{
			name: "older group first even if its pod queued later",
			a:    member("a", "old", "1"), b: member("b", "new", "1"),
			ta: t0.Add(time.Hour), tb: t0.Add(time.Second),
			want: true,
		},
		{
			name: "same creation time: group name keeps members adjacent",
			a:    member("a", "twin-b", "1"), b: member("b", "twin-a", "1"),
			ta: t0.Add(time.Second), tb: t0.Add(time.Hour),
			want: false,
		},
		{
			name: "within a group by queue time",
			a:    member("a", "old", "1"), b: member("b", "old", "1"),
			ta: t0.Add(2 * time.Second), tb: t0.Add(time.Second),
			want: false,
		},
		{
			name: "within a group by creation before queue time",
			a:    withCreation(member("a", "old", "1"), t0), b: withCreation(member("b", "old", "1"), t0.Add(time.Second)),
			ta: t0.Add(2 * time.Second), tb: t0.Add(time.Second),
			want: true,
		},
		{
			name: "a group that just failed goes behind a newer one",
			a:    member("a", "old", "1"), b: member("b", "new", "1"),
			failed: "old",
			want:   false,
		},
		{
			name: "a group before a plain pod queued after its creation",
			a:    member("a", "new", "1"), b: st.MakePod().Name("plain").Obj(),
			ta: t0.Add(time.Hour), tb: t0.Add(90 * time.Second),
			want: true,
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			env := newTestEnv(t, defaultArgs(), pgs, nil)
			if tc.failed != "" {
				env.pl.mu.Lock()
				env.pl.gangForLocked(pgs[0]).LastFailure = t0.Add(5 * time.Minute)
				env.pl.mu.Unlock()
			}
			enqueue(t, env, tc.a, tc.b)
			if got := env.pl.Less(queued(t, tc.a, tc.ta), queued(t, tc.b, tc.tb)); got != tc.want {
				t.Errorf("Less = %v, want %v", got, tc.want)
			}
		})
	}
}

// TestPermitQuorum drives members through Reserve and Permit as the framework does, and checks the
// quorum count, the allowing of waiting members, and the rejection of all of them on a failure.
func TestPermitQuorum(t *testing.T) {
	pods := []*v1.Pod{member("m0", "g", "1"), member("m1", "g", "1"), member("m2", "g", "1")}
	pg := makePG("ns", "g", 3, time.Time{})
	ctx := context.Background()

	reserveAndPermit := func(t *testing.T, env *testEnv, pod *v1.Pod) (*fwk.Status, time.Duration) {
		t.Helper()
		state := framework.NewCycleState()
		state.Write(framework.PodsToActivateKey, framework.NewPodsToActivate())
		if s := env.pl.Reserve(ctx, state, pod, "n"); !passed(s) {
			t.Fatalf("Reserve(%s) = %v", pod.Name, s)
		}
		s, d := env.pl.Permit(ctx, state, pod, "n")
		if s.IsWait() {
			env.handle.wait(pod)
		}
		return s, d
	}

	t.Run("members wait until the quorum and are allowed together", func(t *testing.T) {
		env := newTestEnv(t, defaultArgs(), []*v1alpha1.PodGroup{pg}, pods)
		for i, p := range pods[:2] {
			s, d := reserveAndPermit(t, env, p)
			if !s.IsWait() {
				t.Fatalf("member %d: Permit = %v, want Wait", i, s)
			}
			if d != time.Minute {
				t.Errorf("member %d waits %v, want the 60s default", i, d)
			}
			if want := fmt.Sprintf("%d of minMember 3", i+1); !strings.Contains(s.Message(), want) {
				t.Errorf("Permit message %q does not count %q", s.Message(), want)
			}
		}
		if got := env.pl.attemptInfo("ns/g"); !got.Waiting || got.Counted != 2 {
			t.Errorf("attemptInfo = %+v while 2 members wait, want waiting with 2 counted", got)
		}
		if s, _ := reserveAndPermit(t, env, pods[2]); !passed(s) {
			t.Fatalf("last member: Permit = %v, want Success", s)
		}
		for _, p := range pods[:2] {
			if w := env.handle.waiting[p.UID]; !w.allowed || w.rejected != "" {
				t.Errorf("%s: allowed=%v rejected=%q, want allowed", p.Name, w.allowed, w.rejected)
			}
		}
		if env.pl.gangs.Waiting() != 0 {
			t.Errorf("waitingGangs = %d after the quorum, want 0", env.pl.gangs.Waiting())
		}
		// A bind failure after the quorum does not fail the gang: the member is retried at once.
		env.handle.activated = nil
		env.pl.Unreserve(ctx, nil, pods[0], "n")
		if env.pl.gangs.Get("ns/g").BackingOff(env.clock.Now()) {
			t.Errorf("the group backs off after a bind failure past the quorum")
		}
		if diff := cmp.Diff([]string{"ns/m0"}, env.handle.activated); diff != "" {
			t.Errorf("members activated after the bind failure (-want,+got): %s", diff)
		}
		if got := len(env.pl.gangs.Get("ns/g").Members); got != 2 {
			t.Errorf("%d members count after one failed to bind, want 2", got)
		}
	})

	t.Run("the tentative reservations of kube-scheduler's pod-group cycle count nothing", func(t *testing.T) {
		// GenericWorkload on: the pod-group cycle reserves every member in a state that says so,
		// reverts them all, then reserves them for real with that cleared (schedule_one_podgroup.go).
		env := newTestEnv(t, defaultArgs(), []*v1alpha1.PodGroup{pg}, pods)
		for _, p := range pods {
			state := framework.NewCycleState()
			state.SetPodGroupSchedulingCycle(framework.NewCycleState())
			if s := env.pl.Reserve(ctx, state, p, "n"); !passed(s) {
				t.Fatalf("tentative Reserve(%s) = %v", p.Name, s)
			}
			if g := env.pl.gangs.Get("ns/g"); g != nil && len(g.Members) != 0 {
				t.Fatalf("%d members counted after a tentative Reserve, want 0", len(g.Members))
			}
			env.pl.Unreserve(ctx, state, p, "n")
		}
		if g := env.pl.gangs.Get("ns/g"); g != nil && g.BackingOff(env.clock.Now()) {
			t.Fatalf("the group backs off after the pod-group cycle reverted its tentative reservations")
		}
		for i, p := range pods {
			s, _ := reserveAndPermit(t, env, p)
			if want := i == len(pods)-1; passed(s) != want {
				t.Fatalf("member %d: Permit = %v, want passed=%v", i, s, want)
			}
		}
	})

	t.Run("bound members count toward the quorum", func(t *testing.T) {
		env := newTestEnv(t, defaultArgs(), []*v1alpha1.PodGroup{pg}, pods)
		for _, p := range pods[:2] {
			update(t, env, boundTo(p, "n"))
		}
		if s, _ := reserveAndPermit(t, env, pods[2]); !passed(s) {
			t.Fatalf("Permit = %v, want Success with 2 bound members", s)
		}
	})

	t.Run("a member leaving before the quorum rejects the others and backs off", func(t *testing.T) {
		env := newTestEnv(t, defaultArgs(), []*v1alpha1.PodGroup{pg}, pods)
		reserveAndPermit(t, env, pods[0])
		reserveAndPermit(t, env, pods[1])
		env.pl.Unreserve(ctx, nil, pods[1], "n")
		if w := env.handle.waiting[pods[0].UID]; !strings.Contains(w.rejected, "rejected") {
			t.Errorf("waiting sibling rejected with %q, want a rejection", w.rejected)
		}
		g := env.pl.gangs.Get("ns/g")
		if !g.BackingOff(env.clock.Now()) {
			t.Fatalf("the group does not back off")
		}
		// The sibling's own Unreserve is an echo and changes nothing.
		env.pl.Unreserve(ctx, nil, pods[0], "n")
		if len(g.Members) != 0 {
			t.Errorf("members = %v after every Unreserve, want none", g.Members)
		}
		if s := env.pl.PreEnqueue(ctx, pods[2]); passed(s) {
			t.Errorf("PreEnqueue during back-off = success, want gated")
		}
		if s := env.pl.Reserve(ctx, framework.NewCycleState(), pods[2], "n"); passed(s) {
			t.Errorf("Reserve during back-off = success, want refused")
		}
		env.clock.Step(11 * time.Second)
		if len(env.handle.activated) == 0 {
			t.Errorf("members were not activated when the back-off ended")
		}
		if s := env.pl.PreEnqueue(ctx, pods[2]); !passed(s) {
			t.Errorf("PreEnqueue after back-off = %v, want success", s)
		}
	})

	t.Run("rejected members stop counting at once, even without back-off", func(t *testing.T) {
		four := append(pods[:3:3], member("m3", "g", "1"))
		env := newTestEnv(t, config.CoschedulingArgs{PermitWaitingTimeSeconds: 60}, []*v1alpha1.PodGroup{pg}, four)
		reserveAndPermit(t, env, four[0])
		reserveAndPermit(t, env, four[1])
		// m1 leaves; m0 is rejected, but its own Unreserve has not run yet.
		env.pl.Unreserve(ctx, nil, four[1], "n")
		reserveAndPermit(t, env, four[2])
		if s, _ := reserveAndPermit(t, env, four[3]); !s.IsWait() {
			t.Fatalf("Permit(m3) = %v, want Wait: the rejected m0 must not complete a quorum with m2 and m3", s)
		}
	})

	t.Run("spare members may fail before the gang does", func(t *testing.T) {
		five := []*v1.Pod{member("m0", "g", "1"), member("m1", "g", "1"), member("m2", "g", "1"), member("m3", "g", "1"), member("m4", "g", "1")}
		env := newTestEnv(t, defaultArgs(), []*v1alpha1.PodGroup{pg}, five)
		reserveAndPermit(t, env, five[0])
		reserveAndPermit(t, env, five[1])
		for _, p := range five[2:4] {
			env.pl.PostFilter(ctx, framework.NewCycleState(), p, nil)
			if env.handle.waiting[five[0].UID].rejected != "" {
				t.Fatalf("the gang failed when %s found no node, but enough members remain", p.Name)
			}
		}
		env.pl.PostFilter(ctx, framework.NewCycleState(), five[4], nil)
		if !strings.Contains(env.handle.waiting[five[0].UID].rejected, "cannot be placed") {
			t.Errorf("the gang did not fail when too few members were left: %q", env.handle.waiting[five[0].UID].rejected)
		}
	})

	t.Run("the group deadline is shared and a timeout is reported as such", func(t *testing.T) {
		short := pg.DeepCopy()
		short.Spec.ScheduleTimeoutSeconds = ptr.To[int32](5)
		env := newTestEnv(t, defaultArgs(), []*v1alpha1.PodGroup{short}, pods)
		if _, d := reserveAndPermit(t, env, pods[0]); d != 5*time.Second {
			t.Errorf("first member waits %v, want 5s", d)
		}
		env.clock.Step(3 * time.Second)
		if _, d := reserveAndPermit(t, env, pods[1]); d != 2*time.Second {
			t.Errorf("second member waits %v, want the 2s left of the group's deadline", d)
		}
		env.clock.Step(2 * time.Second)
		before := counterValue(t, metrics.GangTimeouts, "test")
		env.pl.Unreserve(ctx, nil, pods[0], "n")
		if got := counterValue(t, metrics.GangTimeouts, "test"); got != before+1 {
			t.Errorf("timeouts counter = %v, want %v", got, before+1)
		}
		if w := env.handle.waiting[pods[1].UID]; !strings.Contains(w.rejected, "timed out") {
			t.Errorf("sibling rejected with %q, want a timeout", w.rejected)
		}
	})
}

// drainEvents returns the events recorded so far.
func drainEvents(rec *events.FakeRecorder) []string {
	var got []string
	for {
		select {
		case e := <-rec.Events:
			got = append(got, e)
		default:
			return got
		}
	}
}

// TestGateEventsDelayed: a member held back while its group is incomplete gets its event only if it
// is still held back gang.GateEventDelay later (with the latest count); a member whose group completes
// meanwhile gets none.
func TestGateEventsDelayed(t *testing.T) {
	env := newTestEnv(t, defaultArgs(), []*v1alpha1.PodGroup{makePG("ns", "g", 3, time.Now())}, nil)
	rec := events.NewFakeRecorder(10)
	env.pl.recorder.Events = rec
	ctx := context.Background()
	add := func(p *v1.Pod) *v1.Pod {
		if err := env.pods.Add(p); err != nil {
			t.Fatal(err)
		}
		env.pl.members.Counts.Track(p)
		return p
	}
	a := add(member("a", "g", "1"))
	if s := env.pl.PreEnqueue(ctx, a); passed(s) {
		t.Fatal("a member of an incomplete group was let in")
	}
	env.clock.Step(gang.GateEventDelay / 2)
	b := add(member("b", "g", "1"))
	for _, p := range []*v1.Pod{b, a} { // a is asked again: the count has changed
		if s := env.pl.PreEnqueue(ctx, p); passed(s) {
			t.Fatal("a member of an incomplete group was let in")
		}
	}
	if got := drainEvents(rec); len(got) != 0 {
		t.Fatalf("events before the delay: %v", got)
	}
	env.clock.Step(gang.GateEventDelay / 2)
	got := drainEvents(rec)
	if len(got) != 1 || !strings.Contains(got[0], podgroup.ReasonWaitingForMembers) || !strings.Contains(got[0], "2 of minMember 3") {
		t.Fatalf("events after a's delay = %v, want one WaitingForMembers (for a, with the latest count)", got)
	}
	// b's group completes before its delay ends.
	add(member("c", "g", "1"))
	for _, p := range []*v1.Pod{a, b} {
		if s := env.pl.PreEnqueue(ctx, p); !passed(s) {
			t.Fatalf("member %s of a complete group held back: %v", p.Name, s)
		}
	}
	env.clock.Step(gang.GateEventDelay)
	if got := drainEvents(rec); len(got) != 0 {
		t.Errorf("events for members whose group completed: %v", got)
	}
}

// TestGateEventCountsOfNow: the delayed event counts the group as it is when it is recorded, not as
// the held member's last PreEnqueue saw it (a peer that arrives, or gets its claims, does not run that
// PreEnqueue again while the group is incomplete).
func TestGateEventCountsOfNow(t *testing.T) {
	withClaim := func(p *v1.Pod, made bool) *v1.Pod {
		p.Spec.ResourceClaims = []v1.PodResourceClaim{{Name: "gpu", ResourceClaimTemplateName: ptr.To("gpu")}}
		if made {
			p.Status.ResourceClaimStatuses = []v1.PodResourceClaimStatus{{Name: "gpu", ResourceClaimName: ptr.To(p.Name + "-gpu")}}
		}
		return p
	}
	env := newTestEnv(t, defaultArgs(), []*v1alpha1.PodGroup{makePG("ns", "g", 3, time.Now())}, nil)
	env.pl.members.Counts.Unmade = func(p *v1.Pod) bool { return devices.ClaimsUnmade(p, nil) }
	rec := events.NewFakeRecorder(10)
	env.pl.recorder.Events = rec
	put := func(p *v1.Pod) *v1.Pod {
		if err := env.pods.Update(p); err != nil {
			t.Fatal(err)
		}
		env.pl.members.Counts.Track(p)
		return p
	}
	a := put(withClaim(member("a", "g", "1"), true))
	put(withClaim(member("b", "g", "1"), false))
	put(withClaim(member("c", "g", "1"), false))
	if s := env.pl.PreEnqueue(context.Background(), a); !strings.Contains(s.Message(), "1 of minMember 3") {
		t.Fatalf("PreEnqueue(a) = %v, want it held back counting 1 member with its claims made", s)
	}
	put(withClaim(member("b", "g", "1"), true)) // a's PreEnqueue does not run again
	env.clock.Step(gang.GateEventDelay)
	got := drainEvents(rec)
	if len(got) != 1 || !strings.Contains(got[0], podgroup.ReasonWaitingForClaims) || !strings.Contains(got[0], "2 of minMember 3") {
		t.Fatalf("events after the delay = %v, want one WaitingForClaims counting the 2 members with their claims made now", got)
	}
}

// TestWaitingForQuorumEventDelayed: the PodGroup gets WaitingForQuorum only if its attempt still waits
// gang.GateEventDelay after it started (with the count of that moment); a gang that reaches its quorum
// meanwhile gets QuorumReached alone.
func TestWaitingForQuorumEventDelayed(t *testing.T) {
	slow, quick := members("s", "slow", 3), members("q", "quick", 2)
	env := newTestEnv(t, defaultArgs(), []*v1alpha1.PodGroup{makePG("ns", "slow", 3, time.Now()), makePG("ns", "quick", 2, time.Now())},
		append(append([]*v1.Pod{}, slow...), quick...))
	rec := events.NewFakeRecorder(10)
	env.pl.recorder.Events = rec
	reserveAndPermit(t, env, slow[0])
	reserveAndPermit(t, env, quick[0])
	env.clock.Step(gang.GateEventDelay / 2)
	reserveAndPermit(t, env, slow[1])
	if s := reserveAndPermit(t, env, quick[1]); !passed(s) {
		t.Fatalf("the quick gang's last member: Permit = %v, want Success", s)
	}
	got := drainEvents(rec)
	if len(got) != 1 || !strings.Contains(got[0], podgroup.ReasonQuorumReached) {
		t.Fatalf("events before the delay = %v, want the quick gang's QuorumReached alone", got)
	}
	env.clock.Step(gang.GateEventDelay / 2)
	got = drainEvents(rec)
	if len(got) != 1 || !strings.Contains(got[0], podgroup.ReasonWaitingForQuorum) || !strings.Contains(got[0], "2 of minMember 3") {
		t.Fatalf("events after the delay = %v, want one WaitingForQuorum for the slow gang, with the latest count", got)
	}
	env.clock.Step(gang.GateEventDelay)
	if got := drainEvents(rec); len(got) != 0 {
		t.Errorf("events later: %v, want none (one WaitingForQuorum per attempt)", got)
	}
}

func TestPreEnqueue(t *testing.T) {
	ctx := context.Background()
	pg := makePG("ns", "g", 3, time.Time{})
	cases := []struct {
		name   string
		pgs    []*v1alpha1.PodGroup
		pods   []*v1.Pod
		pod    *v1.Pod
		wantOK bool
		want   string
	}{
		{name: "a pod without the label passes", pod: st.MakePod().Namespace("ns").Name("plain").Obj(), wantOK: true},
		{name: "no PodGroup", pod: member("m0", "g", "1"), pods: []*v1.Pod{member("m0", "g", "1")}, want: "does not exist"},
		{name: "too few members", pgs: []*v1alpha1.PodGroup{pg}, pod: member("m0", "g", "1"),
			pods: []*v1.Pod{member("m0", "g", "1"), member("m1", "g", "1")}, want: "2 of minMember 3"},
		{name: "complete group", pgs: []*v1alpha1.PodGroup{pg}, pod: member("m0", "g", "1"),
			pods: []*v1.Pod{member("m0", "g", "1"), member("m1", "g", "1"), member("m2", "g", "1")}, wantOK: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			env := newTestEnv(t, defaultArgs(), tc.pgs, tc.pods)
			s := env.pl.PreEnqueue(ctx, tc.pod)
			if passed(s) != tc.wantOK {
				t.Fatalf("PreEnqueue = %v, want success=%v", s, tc.wantOK)
			}
			if !tc.wantOK && (s.Code() != fwk.UnschedulableAndUnresolvable || !strings.Contains(s.Message(), tc.want)) {
				t.Errorf("PreEnqueue = %v %q, want UnschedulableAndUnresolvable with %q", s.Code(), s.Message(), tc.want)
			}
		})
	}
}

// TestPreFilterChecksOncePerAttempt checks that the gang check runs for the first member and is
// reused (not repeated) by the next members while the snapshot's inputs stay the same.
func TestPreFilterChecksOncePerAttempt(t *testing.T) {
	ctx := context.Background()
	pods := []*v1.Pod{member("m0", "g", "3"), member("m1", "g", "3"), member("m2", "g", "3")}
	env := newTestEnv(t, defaultArgs(), []*v1alpha1.PodGroup{makePG("ns", "g", 3, time.Time{})}, pods)
	nodes := []fwk.NodeInfo{node("a", "4"), node("b", "4")}
	before := counterValue(t, metrics.GangRejections, "test", metrics.ReasonInfeasible)
	for _, p := range pods {
		state := framework.NewCycleState()
		_, s := env.pl.PreFilter(ctx, state, p, nodes)
		if s.Code() != fwk.UnschedulableAndUnresolvable || !strings.Contains(s.Message(), "fit only 2") {
			t.Fatalf("PreFilter(%s) = %v, want infeasible", p.Name, s)
		}
		// PostFilter after a PreFilter rejection holds nothing to release and does not back off.
		if _, ps := env.pl.PostFilter(ctx, state, p, nil); ps.Code() != fwk.Unschedulable {
			t.Errorf("PostFilter = %v", ps)
		}
	}
	first := env.pl.gangs.Get("ns/g").CacheKey
	// Three members rejected, one check made.
	if got := counterValue(t, metrics.GangRejections, "test", metrics.ReasonInfeasible) - before; got != 1 {
		t.Errorf("the gang was checked %v times for 3 members, want once", got)
	}
	// A node added (the hint bumps the epoch) invalidates the cached answer.
	nodes = append(nodes, node("c", "4"))
	if _, err := gangfit.NodeChangeHint(env.pl.stale)(klog.Background(), pods[0], nil, nodes[2].Node()); err != nil {
		t.Fatal(err)
	}
	if _, s := env.pl.PreFilter(ctx, framework.NewCycleState(), pods[0], nodes); !passed(s) {
		t.Fatalf("PreFilter after a node was added = %v, want success", s)
	}
	if env.pl.gangs.Get("ns/g").CacheKey.Epoch == first.Epoch {
		t.Errorf("the cached result was not recomputed after the epoch changed")
	}
}

func TestNewRejectsInvalidArgs(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	_, err := New(ctx, &config.CoschedulingArgs{PermitWaitingTimeSeconds: 0, PodGroupBackoffSeconds: -1}, nil)
	if err == nil {
		t.Fatal("New accepted invalid args")
	}
	for _, want := range []string{"permitWaitingTimeSeconds", "podGroupBackoffSeconds"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not name %s", err, want)
		}
	}
}

func counterValue(t *testing.T, c *k8smetrics.CounterVec, labels ...string) float64 {
	t.Helper()
	v, err := testutil.GetCounterMetricValue(c.WithLabelValues(labels...))
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func TestQueueingHints(t *testing.T) {
	logger, _ := ktesting.NewTestContext(t)
	pg := makePG("ns", "g", 2, time.Time{})
	gangMember := member("m0", "g", "1")
	plain := st.MakePod().Namespace("ns").Name("plain").Obj()
	small := st.MakeNode().Name("n").Capacity(map[v1.ResourceName]string{v1.ResourceCPU: "2"}).Obj()
	bigger := st.MakeNode().Name("n").Capacity(map[v1.ResourceName]string{v1.ResourceCPU: "4"}).Obj()
	cordoned := small.DeepCopy()
	cordoned.Spec.Unschedulable = true
	relabelled := small.DeepCopy()
	relabelled.Labels = map[string]string{"zone": "a"}
	unstructuredPG := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "scheduling.x-k8s.io/v1alpha1", "kind": "PodGroup",
		"metadata": map[string]any{"namespace": "ns", "name": "g"},
	}}
	otherPG := unstructuredPG.DeepCopy()
	otherPG.SetName("other")
	statusPatched := unstructuredPG.DeepCopy()
	statusPatched.SetResourceVersion("2")
	specChanged := unstructuredPG.DeepCopy()
	specChanged.SetGeneration(2)

	cases := []struct {
		name     string
		fn       func(*Coscheduling) fwk.QueueingHintFn
		pod      *v1.Pod
		old, new interface{}
		pods     []*v1.Pod
		want     fwk.QueueingHint
	}{
		{name: "node added", fn: func(pl *Coscheduling) fwk.QueueingHintFn { return gangfit.NodeChangeHint(pl.stale) },
			pod: gangMember, new: small, want: fwk.Queue},
		{name: "node grew", fn: func(pl *Coscheduling) fwk.QueueingHintFn { return gangfit.NodeChangeHint(pl.stale) },
			pod: gangMember, old: small, new: bigger, want: fwk.Queue},
		{name: "node shrank", fn: func(pl *Coscheduling) fwk.QueueingHintFn { return gangfit.NodeChangeHint(pl.stale) },
			pod: gangMember, old: bigger, new: small, want: fwk.QueueSkip},
		{name: "node uncordoned", fn: func(pl *Coscheduling) fwk.QueueingHintFn { return gangfit.NodeChangeHint(pl.stale) },
			pod: gangMember, old: cordoned, new: small, want: fwk.Queue},
		{name: "node cordoned", fn: func(pl *Coscheduling) fwk.QueueingHintFn { return gangfit.NodeChangeHint(pl.stale) },
			pod: gangMember, old: small, new: cordoned, want: fwk.QueueSkip},
		{name: "node relabelled", fn: func(pl *Coscheduling) fwk.QueueingHintFn { return gangfit.NodeChangeHint(pl.stale) },
			pod: gangMember, old: small, new: relabelled, want: fwk.Queue},
		{name: "plain pod ignores nodes", fn: func(pl *Coscheduling) fwk.QueueingHintFn { return gangfit.NodeChangeHint(pl.stale) },
			pod: plain, new: small, want: fwk.QueueSkip},
		{name: "assigned pod deleted", fn: func(pl *Coscheduling) fwk.QueueingHintFn { return gang.CapacityFreedHint(pl.sparedByDelete, pl.stale) },
			pod: gangMember, old: st.MakePod().Name("gone").Node("n").Obj(), want: fwk.Queue},
		{name: "its PodGroup appeared", fn: func(pl *Coscheduling) fwk.QueueingHintFn { return podgroup.SpecChangeHint },
			pod: gangMember, new: unstructuredPG, want: fwk.Queue},
		{name: "its PodGroup's status was patched", fn: func(pl *Coscheduling) fwk.QueueingHintFn { return podgroup.SpecChangeHint },
			pod: gangMember, old: unstructuredPG, new: statusPatched, want: fwk.QueueSkip},
		{name: "its PodGroup's spec changed", fn: func(pl *Coscheduling) fwk.QueueingHintFn { return podgroup.SpecChangeHint },
			pod: gangMember, old: unstructuredPG, new: specChanged, want: fwk.Queue},
		{name: "another PodGroup appeared", fn: func(pl *Coscheduling) fwk.QueueingHintFn { return podgroup.SpecChangeHint },
			pod: gangMember, new: otherPG, want: fwk.QueueSkip},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			env := newTestEnv(t, defaultArgs(), []*v1alpha1.PodGroup{pg}, tc.pods)
			got, err := tc.fn(env.pl)(logger, tc.pod, tc.old, tc.new)
			if err != nil {
				t.Fatal(err)
			}
			if got != tc.want {
				t.Errorf("hint = %v, want %v", got, tc.want)
			}
		})
	}
}
func withCreation(p *v1.Pod, t time.Time) *v1.Pod {
	p.CreationTimestamp = metav1.NewTime(t)
	return p
}

// BenchmarkPreFilter measures PreFilter as the framework calls it, at 1000 and 5000 nodes: for a pod
// without a group (the cost every plain pod pays), for the first member of a 5-pod gang when the
// whole-gang check runs, and when its result is reused for the next members of the burst.
func BenchmarkPreFilter(b *testing.B) {
	for _, n := range []int{1000, 5000} {
		nodes := make([]fwk.NodeInfo, n)
		for i := range nodes {
			nodes[i] = node(fmt.Sprintf("n%d", i), "4")
		}
		members := make([]*v1.Pod, 5)
		for i := range members {
			members[i] = member(fmt.Sprintf("m%d", i), "g", "1")
		}
		env := newTestEnv(b, defaultArgs(), []*v1alpha1.PodGroup{makePG("ns", "g", 5, time.Now())}, members)
		ctx := context.Background()
		plain := st.MakePod().Namespace("ns").Name("plain").Req(map[v1.ResourceName]string{v1.ResourceCPU: "1"}).Obj()

		b.Run(fmt.Sprintf("%dNodes/PlainPod", n), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, s := env.pl.PreFilter(ctx, framework.NewCycleState(), plain, nodes); !s.IsSkip() {
					b.Fatal(s)
				}
			}
		})
		b.Run(fmt.Sprintf("%dNodes/GangCheck", n), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				env.pl.epoch.Add(1) // invalidate the cached result: the whole-gang check runs
				if _, s := env.pl.PreFilter(ctx, framework.NewCycleState(), members[0], nodes); !passed(s) {
					b.Fatal(s)
				}
			}
		})
		b.Run(fmt.Sprintf("%dNodes/GangCached", n), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, s := env.pl.PreFilter(ctx, framework.NewCycleState(), members[1], nodes); !passed(s) {
					b.Fatal(s)
				}
			}
		})
	}
}

// BenchmarkPreEnqueueLargeGang is what the scheduling queue pays, under its lock, per member when it
// activates a whole 1000-member gang (the last member's arrival activates all the others).
func BenchmarkPreEnqueueLargeGang(b *testing.B) {
	const size = 1000
	members := make([]*v1.Pod, size)
	for i := range members {
		members[i] = member(fmt.Sprintf("m%d", i), "g", "1")
	}
	env := newTestEnv(b, defaultArgs(), []*v1alpha1.PodGroup{makePG("ns", "g", size, time.Now())}, members)
	ctx := context.Background()
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		if s := env.pl.PreEnqueue(ctx, members[i%size]); s != nil {
			b.Fatal(s)
		}
		i++
	}
}

// BenchmarkPlainPod is what a pod without a group pays in Coscheduling over one scheduling: PreEnqueue,
// SignPod, PreFilter, Reserve and Permit once, and Less for the comparisons of a heap of 1000 pods
// (about 2·log2(1000) = 20: a push and a pop). LessOnly/PrioritySort is the in-tree QueueSort's Less
// over the same comparisons, which a profile without Coscheduling pays instead.
func BenchmarkPlainPod(b *testing.B) {
	env := newTestEnv(b, defaultArgs(), nil, nil)
	ctx := context.Background()
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	plain := func(i int) *framework.QueuedPodInfo {
		pod := st.MakePod().Namespace("ns").Name(fmt.Sprintf("p%d", i)).UID(fmt.Sprintf("p%d", i)).
			Req(map[v1.ResourceName]string{v1.ResourceCPU: "1"}).Obj()
		pi, err := framework.NewPodInfo(pod)
		if err != nil {
			b.Fatal(err)
		}
		return &framework.QueuedPodInfo{PodInfo: pi, QueueingParams: framework.QueueingParams{Timestamp: t0.Add(time.Duration(i) * time.Millisecond)}}
	}
	const comparisons = 20
	pod := plain(0)
	others := make([]*framework.QueuedPodInfo, comparisons)
	for i := range others {
		others[i] = plain(i + 1)
	}
	nodes := []fwk.NodeInfo{node("n0", "4")}
	b.Run("AllExtensionPoints", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if s := env.pl.PreEnqueue(ctx, pod.Pod); s != nil {
				b.Fatal(s)
			}
			for _, o := range others {
				env.pl.Less(pod, o)
			}
			if f, s := env.pl.SignPod(ctx, pod.Pod); f != nil || s != nil {
				b.Fatal(s)
			}
			state := framework.NewCycleState()
			if _, s := env.pl.PreFilter(ctx, state, pod.Pod, nodes); !s.IsSkip() {
				b.Fatal(s)
			}
			if s := env.pl.Reserve(ctx, state, pod.Pod, "n0"); s != nil {
				b.Fatal(s)
			}
			if s, _ := env.pl.Permit(ctx, state, pod.Pod, "n0"); s != nil {
				b.Fatal(s)
			}
		}
	})
	b.Run("LessOnly/Coscheduling", func(b *testing.B) {
		for b.Loop() {
			for _, o := range others {
				env.pl.Less(pod, o)
			}
		}
	})
	b.Run("LessOnly/PrioritySort", func(b *testing.B) {
		ps := &queuesort.PrioritySort{}
		for b.Loop() {
			for _, o := range others {
				ps.Less(pod, o)
			}
		}
	})
}
