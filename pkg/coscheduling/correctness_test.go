package coscheduling

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	clientset "k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework"
	st "k8s.io/kubernetes/pkg/scheduler/testing"

	"github.com/custom-scheduler/custom-scheduler/pkg/apis/scheduling/v1alpha1"
	"github.com/custom-scheduler/custom-scheduler/pkg/coscheduling/attempt"
	"github.com/custom-scheduler/custom-scheduler/pkg/coscheduling/gang"
	"github.com/custom-scheduler/custom-scheduler/pkg/coscheduling/podgroup"
)

// The races and shapes of the gang correctness round, one test per case, each written to fail on the
// code before its fix.

func TestMembersAreLiveUngatedPodsOfTheProfile(t *testing.T) {
	gated := member("gated", "g", "1")
	gated.Spec.SchedulingGates = []v1.PodSchedulingGate{{Name: "kueue.x-k8s.io/admission"}}
	foreign := member("foreign", "g", "1")
	foreign.Spec.SchedulerName = "default-scheduler"
	cases := []struct {
		name string
		pod  *v1.Pod
		want []string
	}{
		{name: "a live member", pod: member("m", "g", "1"), want: []string{"test|ns/g"}},
		{name: "a gated pod is not a member yet", pod: gated},
		{name: "another scheduler's pod is keyed under its scheduler", pod: foreign, want: []string{"default-scheduler|ns/g"}},
		{name: "a terminating pod", pod: terminating(member("t", "g", "1"))},
		{name: "a finished pod", pod: withPodPhase(member("f", "g", "1"), v1.PodSucceeded)},
		{name: "a pod of no group", pod: st.MakePod().Namespace("ns").Name("plain").SchedulerName("test").Obj()},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := podgroup.LiveIndexFunc(tc.pod)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("index keys (-want,+got): %s", diff)
			}
		})
	}

	t.Run("PreEnqueue counts neither, and says nothing of a gated pod", func(t *testing.T) {
		pg := makePG("ns", "g", 3, time.Time{})
		env := newTestEnv(t, defaultArgs(), []*v1alpha1.PodGroup{pg}, []*v1.Pod{member("a", "g", "1"), member("b", "g", "1"), gated, foreign})
		s := env.pl.PreEnqueue(context.Background(), member("a", "g", "1"))
		if passed(s) || !strings.Contains(s.Message(), "2 of minMember 3") {
			t.Errorf("PreEnqueue = %v, want held back with 2 of minMember 3", s)
		}
		if s := env.pl.PreEnqueue(context.Background(), gated); !passed(s) {
			t.Errorf("PreEnqueue(gated) = %v, want it left to the SchedulingGates plugin", s)
		}
		if env.pl.heldBack.Held(gated.UID) {
			t.Errorf("the gated pod has a gate state of this plugin's")
		}
	})
}

func TestPermitPastTheDeadlineDeclaresNoQuorum(t *testing.T) {
	pods := []*v1.Pod{member("m0", "g", "1"), member("m1", "g", "1")}
	pg := makePG("ns", "g", 2, time.Time{})
	env := newTestEnv(t, defaultArgs(), []*v1alpha1.PodGroup{pg}, pods)
	if s := reserveAndPermit(t, env, pods[0]); !s.IsWait() {
		t.Fatalf("Permit(m0) = %v, want Wait", s)
	}
	// The deadline passes; the framework is rejecting m0 for its timeout, but its Unreserve has not
	// run yet when m1 reaches Permit.
	env.clock.Step(61 * time.Second)
	ctx := context.Background()
	state := framework.NewCycleState()
	state.Write(framework.PodsToActivateKey, framework.NewPodsToActivate())
	if s := env.pl.Reserve(ctx, state, pods[1], "n"); !passed(s) {
		t.Fatalf("Reserve(m1) = %v", s)
	}
	s, _ := env.pl.Permit(ctx, state, pods[1], "n")
	if passed(s) || !strings.Contains(s.Message(), "timed out") {
		t.Fatalf("Permit(m1) past the deadline = %v, want a timeout rejection", s)
	}
	if w := env.handle.waiting[pods[0].UID]; w.allowed {
		t.Errorf("m0 was allowed past the deadline")
	}
	if g := env.pl.gangs.Get("ns/g"); g.Phase != attempt.PhaseFailed {
		t.Errorf("attempt %v, want Failed without a quorum", g.Phase)
	}
}

func TestPreemptedWaitingMemberEndsItsAttempt(t *testing.T) {
	pods := []*v1.Pod{member("m0", "g", "1"), member("m1", "g", "1"), member("m2", "g", "1")}
	pg := makePG("ns", "g", 3, time.Time{})
	env := newTestEnv(t, defaultArgs(), []*v1alpha1.PodGroup{pg}, pods)
	reserveAndPermit(t, env, pods[0])
	reserveAndPermit(t, env, pods[1])
	// Upstream's Executor rejects m0 in memory; its Unreserve runs later, in its binding cycle.
	env.pl.victimEvicted(pods[0])
	g := env.pl.gangs.Get("ns/g")
	if g.Phase != attempt.PhaseFailed || len(g.Members) != 0 {
		t.Fatalf("after the eviction: attempt %v members=%v, want the attempt Failed and nothing counted", g.Phase, g.Members)
	}
	if w := env.handle.waiting[pods[1].UID]; w.rejected == "" {
		t.Errorf("m1, waiting beside the victim, was not rejected")
	}
	if !env.pl.evicted.Has(pods[0].UID) {
		t.Errorf("the victim is not remembered as leaving")
	}
	// After the back-off, the third member cannot complete a quorum with the victim.
	env.clock.Step(11 * time.Second)
	if s := reserveAndPermit(t, env, pods[2]); !s.IsWait() {
		t.Errorf("Permit(m2) = %v, want Wait: only m2 counts", s)
	}
}

func TestExtraMembersRetriedAtQuorum(t *testing.T) {
	pods := []*v1.Pod{member("m0", "g", "1"), member("m1", "g", "1"), member("m2", "g", "1")}
	pg := makePG("ns", "g", 2, time.Time{})
	env := newTestEnv(t, defaultArgs(), []*v1alpha1.PodGroup{pg}, pods)
	reserveAndPermit(t, env, pods[0])
	state := framework.NewCycleState()
	toActivate := framework.NewPodsToActivate()
	state.Write(framework.PodsToActivateKey, toActivate)
	ctx := context.Background()
	env.pl.Reserve(ctx, state, pods[1], "n")
	if s, _ := env.pl.Permit(ctx, state, pods[1], "n"); !passed(s) {
		t.Fatalf("Permit(m1) = %v, want the quorum", s)
	}
	var got []string
	for k := range toActivate.Map {
		got = append(got, k)
	}
	if diff := cmp.Diff([]string{"ns/m2"}, got); diff != "" {
		t.Errorf("members activated at the quorum (-want,+got): %s", diff)
	}
}

func TestLeadRetry(t *testing.T) {
	a, b := member("a", "g", "1"), member("b", "g", "1")
	pg := makePG("ns", "g", 2, time.Time{})
	env := newTestEnv(t, defaultArgs(), []*v1alpha1.PodGroup{pg}, []*v1.Pod{a, b})
	ctx := context.Background()
	reserveAndPermit(t, env, b)
	// a finds no node behind b: the attempt fails without the 10 s back-off, with a to lead.
	state := framework.NewCycleState()
	if _, s := env.pl.PostFilter(ctx, state, a, nil); passed(s) {
		t.Fatalf("PostFilter(a) = %v, want Unschedulable", s)
	}
	g := env.pl.gangs.Get("ns/g")
	if g.Lead != a.UID || !g.BackoffUntil.Equal(env.clock.Now().Add(attempt.LeadRetryDelay)) {
		t.Fatalf("lead=%q backoffUntil=%v, want a to lead after %v", g.Lead, g.BackoffUntil, attempt.LeadRetryDelay)
	}
	env.clock.Step(attempt.LeadRetryDelay)
	nodes := []*framework.NodeInfo{node("n", "4")}
	if _, s := env.pl.PreFilter(ctx, framework.NewCycleState(), b, asNodeInfos(nodes)); passed(s) || !strings.Contains(s.Message(), "places member a first") {
		t.Errorf("PreFilter(b) before a is reserved = %v, want b held for a", s)
	}
	if _, s := env.pl.PreFilter(ctx, framework.NewCycleState(), a, asNodeInfos(nodes)); !passed(s) {
		t.Fatalf("PreFilter(a) = %v", s)
	}
	reserveAndPermit(t, env, a)
	if _, s := env.pl.PreFilter(ctx, framework.NewCycleState(), b, asNodeInfos(nodes)); !passed(s) {
		t.Errorf("PreFilter(b) once a is reserved = %v, want it placed", s)
	}
	// a fails again behind b: it led once, so this time the group backs off as usual.
	if _, s := env.pl.PostFilter(ctx, framework.NewCycleState(), b, nil); passed(s) {
		t.Fatalf("PostFilter(b) = %v", s)
	}
	if g.Lead != b.UID {
		t.Fatalf("lead = %q, want b (a already led)", g.Lead)
	}
	env.clock.Step(attempt.LeadRetryDelay)
	reserveAndPermit(t, env, b)
	env.pl.PostFilter(ctx, framework.NewCycleState(), a, nil)
	if g.Lead != "" || !g.BackoffUntil.Equal(env.clock.Now().Add(10*time.Second)) {
		t.Errorf("lead=%q backoffUntil=%v: a member that led once gets the plain back-off", g.Lead, g.BackoffUntil)
	}
}

func asNodeInfos(nodes []*framework.NodeInfo) []fwk.NodeInfo {
	out := make([]fwk.NodeInfo, len(nodes))
	for i, n := range nodes {
		out[i] = n
	}
	return out
}

func TestMemberRank(t *testing.T) {
	selector := member("sel", "g", "1")
	selector.Spec.NodeSelector = map[string]string{"k": "v"}
	anti := member("anti", "g", "1")
	anti.Spec.Affinity = &v1.Affinity{PodAntiAffinity: &v1.PodAntiAffinity{RequiredDuringSchedulingIgnoredDuringExecution: []v1.PodAffinityTerm{{TopologyKey: v1.LabelHostname}}}}
	preferredOnly := member("pref", "g", "1")
	preferredOnly.Spec.Affinity = &v1.Affinity{PodAntiAffinity: &v1.PodAntiAffinity{PreferredDuringSchedulingIgnoredDuringExecution: []v1.WeightedPodAffinityTerm{{Weight: 1}}}}
	spread := member("spread", "g", "1")
	spread.Spec.TopologySpreadConstraints = []v1.TopologySpreadConstraint{{MaxSkew: 1, TopologyKey: v1.LabelHostname, WhenUnsatisfiable: v1.DoNotSchedule}}
	g := gang.New("ns", "g", "")
	g.Lead = "lead"
	lead := member("lead", "g", "1")
	for _, tc := range []struct {
		pod  *v1.Pod
		want uint8
	}{
		{lead, 0}, {selector, 1}, {anti, 1}, {spread, 1}, {preferredOnly, 2}, {member("plain", "g", "1"), 2},
	} {
		if got := g.Rank(tc.pod); got != tc.want {
			t.Errorf("rank(%s) = %d, want %d", tc.pod.Name, got, tc.want)
		}
	}

	// In the queue, a constrained member created later goes before an unconstrained one.
	pg := makePG("ns", "g", 2, time.Time{})
	plain := withCreation(member("plain", "g", "1"), time.Unix(1, 0))
	late := withCreation(selector.DeepCopy(), time.Unix(2, 0))
	env := newTestEnv(t, defaultArgs(), []*v1alpha1.PodGroup{pg}, []*v1.Pod{plain, late})
	for _, p := range []*v1.Pod{plain, late} {
		if s := env.pl.PreEnqueue(context.Background(), p); !passed(s) {
			t.Fatalf("PreEnqueue(%s) = %v", p.Name, s)
		}
	}
	now := time.Unix(10, 0)
	if !env.pl.Less(queued(t, late, now), queued(t, plain, now)) {
		t.Errorf("the constrained member is not ordered before the unconstrained one")
	}
}

func TestExtraMemberLeavesAFullPreferredDomain(t *testing.T) {
	pg := makePG("ns", "g", 2, time.Time{})
	pg.Spec.TopologyPolicy = &v1alpha1.TopologyPolicy{Preferred: []v1alpha1.TopologyKey{"rack"}}
	bound := []*v1.Pod{boundTo(member("m0", "g", "1"), "a0"), boundTo(member("m1", "g", "1"), "a0")}
	late := member("late", "g", "1")
	env := newTestEnv(t, defaultArgs(), []*v1alpha1.PodGroup{pg}, append(bound, late))
	for _, p := range bound {
		update(t, env, p)
	}
	rackNode := func(name, rack, cpu string, pods ...*v1.Pod) *framework.NodeInfo {
		ni := nodeWith(name, cpu, pods...)
		n := ni.Node().DeepCopy()
		n.Labels = map[string]string{"rack": rack}
		ni.SetNode(n)
		return ni
	}
	for _, tc := range []struct {
		name  string
		nodes []*framework.NodeInfo
		want  []string
	}{
		{name: "the bound members' rack has room", nodes: []*framework.NodeInfo{rackNode("a0", "a", "4", bound...), rackNode("b0", "b", "4")}, want: []string{"a0"}},
		{name: "the bound members' rack is full", nodes: []*framework.NodeInfo{rackNode("a0", "a", "2", bound...), rackNode("b0", "b", "4")}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res, s := env.pl.PreFilter(context.Background(), framework.NewCycleState(), late, asNodeInfos(tc.nodes))
			if !passed(s) {
				t.Fatalf("PreFilter = %v", s)
			}
			var got []string
			if res != nil {
				got = sets.List(res.NodeNames)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("nodes for the late member (-want,+got): %s", diff)
			}
		})
	}
}

func TestFailedAttemptWithoutBackoff(t *testing.T) {
	args := defaultArgs()
	args.PodGroupBackoffSeconds = 0
	pods := []*v1.Pod{member("m0", "g", "1"), member("m1", "g", "1")}
	pg := makePG("ns", "g", 2, time.Time{})
	env := newTestEnv(t, args, []*v1alpha1.PodGroup{pg}, pods)
	reserveAndPermit(t, env, pods[0])
	// m1 led once already, so the attempt backs off as configured: not at all.
	env.pl.gangs.Get("ns/g").LedBy = map[types.UID]struct{}{pods[1].UID: {}}
	env.pl.PostFilter(context.Background(), framework.NewCycleState(), pods[1], nil)
	if w := env.handle.waiting[pods[0].UID]; w.rejected == "" {
		t.Fatalf("m0 was not rejected when m1 found no node")
	}
	env.pl.Unreserve(context.Background(), framework.NewCycleState(), pods[0], "n")
	env.handle.activated = nil
	env.clock.Step(0)
	if diff := cmp.Diff([]string{"ns/m0", "ns/m1"}, sets.List(sets.New(env.handle.activated...))); diff != "" {
		t.Errorf("members activated after a failure with no back-off (-want,+got): %s", diff)
	}
	if s := env.pl.PreEnqueue(context.Background(), pods[0]); !passed(s) {
		t.Errorf("PreEnqueue = %v, want no back-off", s)
	}
	for _, p := range pods {
		remove(t, env, p)
	}
	if groups, _, _ := env.pl.stateSize(); groups != 0 {
		t.Errorf("%d groups tracked after the pods are gone", groups)
	}
}

func TestPreemptingOutcomeLastsWhileItsRoomIsNominated(t *testing.T) {
	ctx := context.Background()
	pods := []*v1.Pod{member("m0", "g", "3"), member("m1", "g", "3")}
	pg := makePG("ns", "g", 2, time.Time{})
	env := newTestEnv(t, defaultArgs(), []*v1alpha1.PodGroup{pg}, pods)
	nodes := []fwk.NodeInfo{node("a", "4")}
	preempted := func(nominated ...string) {
		g := env.pl.gangForLocked(pg)
		g.SetOutcome(podgroup.ReasonPreempting, "preempting 1 pod")
		g.NominatedNodes = nominated
		g.Feasibility = nil
	}
	preempted("a")
	if _, s := env.pl.PreFilter(ctx, framework.NewCycleState(), pods[0], nodes); passed(s) {
		t.Fatalf("PreFilter = %v, want infeasible", s)
	}
	if got := env.pl.gangs.Get("ns/g").Outcome.Reason; got != podgroup.ReasonPreempting {
		t.Errorf("outcome %q while the victims' room is nominated to the gang, want %q", got, podgroup.ReasonPreempting)
	}
	// The preemption's room went elsewhere and preemption can no longer place the gang.
	env.pl.stoppedPreempting(pg)
	g := env.pl.gangs.Get("ns/g")
	if g.Outcome.Reason != podgroup.ReasonGangInfeasible || len(g.NominatedNodes) != 0 {
		t.Errorf("after preemption stopped: outcome %q, nominated %v; want %q and none", g.Outcome.Reason, g.NominatedNodes, podgroup.ReasonGangInfeasible)
	}
	// A gang whose nominations were dropped elsewhere says so at its next check.
	preempted()
	env.pl.epoch.Add(1)
	if _, s := env.pl.PreFilter(ctx, framework.NewCycleState(), pods[0], nodes); passed(s) {
		t.Fatalf("PreFilter = %v, want infeasible", s)
	}
	if got := env.pl.gangs.Get("ns/g").Outcome.Reason; got != podgroup.ReasonGangInfeasible {
		t.Errorf("outcome %q of a gang that nominates nothing, want %q", got, podgroup.ReasonGangInfeasible)
	}
}

// nominatingHandle records the nominations the plugin makes and runs its parallel work inline.
type nominatingHandle struct {
	*fakeHandle
	nominated map[string]string
}

func (h *nominatingHandle) AddNominatedPod(_ klog.Logger, pi fwk.PodInfo, ni *fwk.NominatingInfo) {
	h.nominated[pi.GetPod().Name] = ni.NominatedNodeName
}
func (h *nominatingHandle) Parallelizer() fwk.Parallelizer { return inline{} }
func (h *nominatingHandle) ClientSet() clientset.Interface { return fake.NewClientset() }

type inline struct{}

func (inline) Until(_ context.Context, pieces int, f workqueue.DoWorkPieceFunc, _ string) {
	for i := range pieces {
		f(i)
	}
}

func TestClaimWhoseStatusPatchFailedIsCleared(t *testing.T) {
	m0, m1 := member("m0", "g", "1"), member("m1", "g", "1")
	env := newTestEnv(t, defaultArgs(), []*v1alpha1.PodGroup{makePG("ns", "g", 2, time.Time{})}, []*v1.Pod{m0, m1})
	h := &nominatingHandle{fakeHandle: env.handle, nominated: map[string]string{}}
	env.pl.handle = h
	// The gang's preemption nominated both members; m1's status patch failed, so the informer's copy
	// of m1 shows no nomination, but the claim was recorded at once.
	for _, m := range []*v1.Pod{m0, m1} {
		c := m.DeepCopy()
		c.Status.NominatedNodeName = "n0"
		env.pl.claims.Set(c)
	}
	m0.Status.NominatedNodeName = "n0"
	env.pl.clearNominations(context.Background(), []*v1.Pod{m0, m1}, "")
	if env.pl.claims.Has(m0.UID) || env.pl.claims.Has(m1.UID) {
		t.Errorf("claims left after the nominations were cleared: m0 %v, m1 %v", env.pl.claims.Has(m0.UID), env.pl.claims.Has(m1.UID))
	}
	if diff := cmp.Diff(map[string]string{"m0": "", "m1": ""}, h.nominated); diff != "" {
		t.Errorf("nominator entries cleared (-want,+got): %s", diff)
	}
}

// TestExtraMemberJoinsItsReservedSiblings: a gang whose quorum is reserved but not yet seen bound (its
// members are binding) pins an extra member to its required rack all the same; the pods alone show no
// node yet (the soak found an extra member of a required gang bound in another rack this way).
func TestExtraMemberJoinsItsReservedSiblings(t *testing.T) {
	ctx := context.Background()
	pg := makePG("ns", "g", 2, time.Time{})
	pg.Spec.TopologyPolicy = &v1alpha1.TopologyPolicy{Required: "rack"}
	pods := []*v1.Pod{member("m0", "g", "1"), member("m1", "g", "1"), member("late", "g", "1")}
	env := newTestEnv(t, defaultArgs(), []*v1alpha1.PodGroup{pg}, pods)
	rackNode := func(name, rack string) *framework.NodeInfo {
		ni := nodeWith(name, "4")
		n := ni.Node().DeepCopy()
		n.Labels = map[string]string{"rack": rack}
		ni.SetNode(n)
		return ni
	}
	// Rack b is the tighter fit for one member: without its siblings' pin it would go there.
	nodes := asNodeInfos([]*framework.NodeInfo{rackNode("a0", "a"), rackNode("a1", "a"), rackNode("b0", "b")})
	for _, p := range pods[:2] {
		state := framework.NewCycleState()
		state.Write(framework.PodsToActivateKey, framework.NewPodsToActivate())
		if s := env.pl.Reserve(ctx, state, p, "a0"); !passed(s) {
			t.Fatalf("Reserve(%s) = %v", p.Name, s)
		}
		if s, _ := env.pl.Permit(ctx, state, p, "a0"); s.IsWait() {
			env.handle.wait(p)
		}
	}
	res, s := env.pl.PreFilter(ctx, framework.NewCycleState(), pods[2], nodes)
	if !passed(s) || res == nil {
		t.Fatalf("PreFilter(late) = %v, %v; want its gang's rack", res, s)
	}
	if got := sets.List(res.NodeNames); !slices.Equal(got, []string{"a0", "a1"}) {
		t.Errorf("the extra member may go to %v, want rack a (a0, a1), where its siblings are reserved", got)
	}
}
