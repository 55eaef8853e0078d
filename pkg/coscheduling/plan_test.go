package coscheduling

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework"
	st "k8s.io/kubernetes/pkg/scheduler/testing"

	"github.com/custom-scheduler/custom-scheduler/pkg/apis/config"
	"github.com/custom-scheduler/custom-scheduler/pkg/apis/scheduling/v1alpha1"
	"github.com/custom-scheduler/custom-scheduler/pkg/coscheduling/gang"
	"github.com/custom-scheduler/custom-scheduler/pkg/coscheduling/metrics"
)

// planArgs are the default args with the placement plan on.
func planArgs(candidates int32) config.CoschedulingArgs {
	a := defaultArgs()
	a.PlacementPlan = config.PlacementPlanArgs{Enabled: true, CandidateNodes: candidates}
	return a
}

// miniCycle runs one member's scheduling cycle as the framework does, over the plugin's extension
// points: PreFilter (whose result narrows the nodes), a Filter that checks CPU and pod slots on the
// nodes' current state, a Score that picks one of the feasible nodes (choose), PostFilter when none
// fits, then Reserve (the pod is assumed on its node) and Permit.
type miniCycle struct {
	t     *testing.T
	env   *testEnv
	nodes []*framework.NodeInfo
	// choose picks the node among the feasible ones (a profile's Score); nil: the first by name.
	choose func([]string) string
	// offered records the nodes each cycle was narrowed to (nil: every node); withRoom the nodes the
	// gang's plan still sent members to right after the cycle's PreFilter.
	offered, withRoom [][]string
}

type cycleOutcome struct {
	node     string
	status   *fwk.Status
	narrowed bool
	// rejected: PreFilter rejected the member (e.g. the gang does not fit).
	rejected bool
}

func (c *miniCycle) infos() []fwk.NodeInfo {
	out := make([]fwk.NodeInfo, len(c.nodes))
	for i, n := range c.nodes {
		out[i] = n
	}
	return out
}

func (c *miniCycle) fits(ni *framework.NodeInfo, pod *v1.Pod) bool {
	alloc, req := ni.GetAllocatable(), ni.GetRequested()
	want := pod.Spec.Containers[0].Resources.Requests.Cpu().MilliValue()
	return alloc.GetMilliCPU()-req.GetMilliCPU() >= want && len(ni.GetPods()) < alloc.GetAllowedPodNumber()
}

func (c *miniCycle) run(pod *v1.Pod) cycleOutcome {
	c.t.Helper()
	ctx := context.Background()
	state := framework.NewCycleState()
	state.Write(framework.PodsToActivateKey, framework.NewPodsToActivate())
	res, s := c.env.pl.PreFilter(ctx, state, pod, c.infos())
	var room []string
	if g := c.env.pl.gangs.Get("ns/g"); g != nil && g.Plan != nil {
		for _, n := range g.Plan.Nodes {
			if n.Members > 0 {
				room = append(room, n.Name)
			}
		}
	}
	c.withRoom = append(c.withRoom, room)
	out := cycleOutcome{narrowed: gang.MarksOf(state).Planned}
	if !passed(s) {
		c.offered = append(c.offered, nil)
		_, out.status = c.env.pl.PostFilter(ctx, state, pod, nil)
		out.rejected = true
		return out
	}
	var feasible []string
	statuses := framework.NewDefaultNodeToStatus()
	if res.AllNodes() {
		c.offered = append(c.offered, nil)
	} else {
		c.offered = append(c.offered, sets.List(res.NodeNames))
	}
	for _, ni := range c.nodes {
		name := ni.Node().Name
		if !res.AllNodes() && !res.NodeNames.Has(name) {
			continue
		}
		if c.fits(ni, pod) {
			feasible = append(feasible, name)
		} else {
			statuses.Set(name, fwk.NewStatus(fwk.Unschedulable, "Insufficient cpu"))
		}
	}
	if len(feasible) == 0 {
		_, out.status = c.env.pl.PostFilter(ctx, state, pod, statuses)
		return out
	}
	slices.Sort(feasible)
	out.node = feasible[0]
	if c.choose != nil {
		out.node = c.choose(feasible)
	}
	if s := c.env.pl.Reserve(ctx, state, pod, out.node); !passed(s) {
		out.node, out.status = "", s
		return out
	}
	c.node(out.node).AddPod(boundTo(pod, out.node))
	s, _ = c.env.pl.Permit(ctx, state, pod, out.node)
	if s.IsWait() {
		c.env.handle.wait(pod)
	}
	out.status = s
	return out
}

func (c *miniCycle) node(name string) *framework.NodeInfo {
	for _, ni := range c.nodes {
		if ni.Node().Name == name {
			return ni
		}
	}
	c.t.Fatalf("no node %s", name)
	return nil
}

// TestPlacementPlanNarrowsEachMember: with the plan on, each member's cycle sees at most
// candidateNodes planned nodes, the gang lands on the planned nodes (the fullest first), and the plan
// ends with the quorum.
func TestPlacementPlanNarrowsEachMember(t *testing.T) {
	pods := []*v1.Pod{member("m0", "g", "1"), member("m1", "g", "1"), member("m2", "g", "1"), member("m3", "g", "1")}
	env := newTestEnv(t, planArgs(2), []*v1alpha1.PodGroup{makePG("ns", "g", 4, time.Time{})}, nil)
	enqueue(t, env, pods...)
	c := &miniCycle{t: t, env: env, nodes: []*framework.NodeInfo{
		node("empty", "4"),
		nodeWith("half", "4", running("x", "", "half", "2", 0)),
		nodeWith("most", "4", running("y", "", "most", "3", 0)),
	}}
	before := counterValue(t, metrics.PlacementPlanMembers, "test", planPlaced)
	var got []string
	for _, p := range pods {
		out := c.run(p)
		if out.node == "" || !out.narrowed {
			t.Fatalf("%s: node %q, narrowed %v, status %v", p.Name, out.node, out.narrowed, out.status)
		}
		got = append(got, out.node)
	}
	// The plan: most 1, half 2, empty 1. The Score here takes the first offered node by name, so
	// half is used up before most; whichever an offered node the Score prefers, the plan places
	// every member.
	want := [][]string{{"half", "most"}, {"half", "most"}, {"empty", "most"}, {"most"}}
	if fmt.Sprint(c.offered) != fmt.Sprint(want) {
		t.Errorf("offered %v, want %v", c.offered, want)
	}
	if fmt.Sprint(got) != "[half half empty most]" {
		t.Errorf("placed on %v", got)
	}
	for _, p := range pods[:3] {
		if w := env.handle.waiting[p.UID]; w == nil || !w.allowed {
			t.Errorf("%s not allowed at the quorum", p.Name)
		}
	}
	if g := env.pl.gangs.Get("ns/g"); g.Plan != nil {
		t.Errorf("the plan outlived the quorum: %+v", g.Plan.Nodes)
	}
	if n := counterValue(t, metrics.PlacementPlanMembers, "test", planPlaced) - before; n != 4 {
		t.Errorf("placed through the plan: %v, want 4", n)
	}
}

// TestPlacementPlanFallback: a member none of whose offered nodes fits any more (another pod took the
// room) drops the plan, is retried at once, and the attempt goes on with full cycles; it does not fail.
func TestPlacementPlanFallback(t *testing.T) {
	pods := []*v1.Pod{member("m0", "g", "2"), member("m1", "g", "2")}
	env := newTestEnv(t, planArgs(1), []*v1alpha1.PodGroup{makePG("ns", "g", 2, time.Time{})}, nil)
	enqueue(t, env, pods...)
	c := &miniCycle{t: t, env: env, nodes: []*framework.NodeInfo{node("a", "4"), node("b", "4")}}
	if out := c.run(pods[0]); out.node != "a" || !out.narrowed {
		t.Fatalf("m0: %+v", out)
	}
	// A pod of another scheduler takes the rest of a, the node the plan keeps for m1.
	c.node("a").AddPod(running("intruder", "", "a", "2", 0))
	before := counterValue(t, metrics.PlacementPlanMembers, "test", planFallback)
	out := c.run(pods[1])
	if out.node != "" || out.status.Code() != fwk.Unschedulable || !strings.Contains(out.status.Message(), "retried at once without the plan") ||
		!strings.Contains(out.status.Message(), "a: Insufficient cpu") {
		t.Fatalf("m1 on the used-up plan: %+v", out)
	}
	if n := counterValue(t, metrics.PlacementPlanMembers, "test", planFallback) - before; n != 1 {
		t.Errorf("fallbacks counted: %v", n)
	}
	if !slices.Contains(env.handle.activated, "ns/m1") {
		t.Errorf("m1 not activated: %v", env.handle.activated)
	}
	env.clock.Step(planRetryDelay)
	if n := strings.Count(strings.Join(env.handle.activated, ","), "ns/m1"); n != 2 {
		t.Errorf("m1 activated %d times, want twice (in flight, then out of its back-off)", n)
	}
	g := env.pl.gangs.Get("ns/g")
	if g.Plan != nil || !g.NoPlan || len(g.Unplaced) != 0 || len(g.Waiting) != 1 || g.Phase.String() != "Gathering" {
		t.Fatalf("after the fallback: plan %v, noPlan %v, unplaced %v, waiting %d, phase %v", g.Plan, g.NoPlan, g.Unplaced, len(g.Waiting), g.Phase)
	}
	out = c.run(pods[1])
	if out.node != "b" || out.narrowed || !out.status.IsSuccess() {
		t.Fatalf("m1 retried: %+v", out)
	}
	if g.NoPlan || g.Plan != nil {
		t.Errorf("the fallback outlived the quorum")
	}
}

// TestPlacementPlanNotUsed: members the plan does not model, nominated members, and a profile with
// the plan off search every node.
func TestPlacementPlanNotUsed(t *testing.T) {
	spread := member("m0", "g", "1")
	spread.Spec.TopologySpreadConstraints = st.MakePod().SpreadConstraint(1, "zone", v1.DoNotSchedule, nil, nil, nil, nil, nil).Obj().Spec.TopologySpreadConstraints
	nominated := member("m0", "g", "1")
	nominated.Status.NominatedNodeName = "a"
	cases := []struct {
		name string
		args config.CoschedulingArgs
		pod  *v1.Pod
	}{
		{name: "the plan off", args: defaultArgs(), pod: member("m0", "g", "1")},
		{name: "a topology spread constraint", args: planArgs(4), pod: spread},
		{name: "a nominated member", args: planArgs(4), pod: nominated},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			env := newTestEnv(t, tc.args, []*v1alpha1.PodGroup{makePG("ns", "g", 2, time.Time{})}, nil)
			enqueue(t, env, tc.pod, member("m1", "g", "1"))
			state := framework.NewCycleState()
			res, s := env.pl.PreFilter(context.Background(), state, tc.pod, []fwk.NodeInfo{node("a", "4"), node("b", "4")})
			if !passed(s) || !res.AllNodes() {
				t.Errorf("PreFilter = %v, %v; want every node", res, s)
			}
			if gang.MarksOf(state).Planned {
				t.Error("the cycle is marked planned")
			}
		})
	}
}

// TestPlacementPlanRandomized drives gangs through miniCycle on random clusters, with random Score
// choices among the offered nodes and, in some rounds, other pods taking room between the members'
// cycles. Properties: every cycle is offered at most candidateNodes nodes, all of the current plan;
// without interference and with identical members the plan never misses (whatever the Score picks)
// and the gang reaches its quorum, no cycle of it finding no node; with interference, the gang is never bound in part
// and a miss drops the plan, so the member's retry searches every node; the plan never outlives the
// quorum. SEED=<n> replays a failure.
func TestPlacementPlanRandomized(t *testing.T) {
	runSeeded(t, 300, planRound)
}

func planRound(t *testing.T, rng *rand.Rand, round int) bool {
	t.Helper()
	candidates := int32(1 + rng.IntN(4))
	size := 2 + rng.IntN(6)
	minMember := 2 + rng.IntN(size-1)
	identical := rng.IntN(3) > 0
	interfere := rng.IntN(2) == 0
	var pods []*v1.Pod
	for i := range size {
		cpu := "1"
		if !identical && i%2 == 1 {
			cpu = "2"
		}
		pods = append(pods, member(fmt.Sprintf("m%d", i), "g", cpu))
	}
	var nodes []*framework.NodeInfo
	for i := range 2 + rng.IntN(10) {
		name := fmt.Sprintf("n%02d", i)
		var used []*v1.Pod
		if u := rng.IntN(4); u > 0 {
			used = append(used, running(name+"-used", "", name, strconv.Itoa(u), 0))
		}
		nodes = append(nodes, nodeWith(name, strconv.Itoa(2+rng.IntN(5)), used...))
	}
	env := newTestEnv(t, planArgs(candidates), []*v1alpha1.PodGroup{makePG("ns", "g", int32(minMember), time.Time{})}, nil)
	enqueue(t, env, pods...)
	c := &miniCycle{t: t, env: env, nodes: nodes, choose: func(names []string) string { return names[rng.IntN(len(names))] }}
	var log []string
	fail := func(format string, a ...any) bool {
		t.Errorf("round %d (candidates %d, size %d, minMember %d, identical %v, interfere %v): "+format+"\nsteps:\n  %s",
			append([]any{round, candidates, size, minMember, identical, interfere}, append(a, strings.Join(log, "\n  "))...)...)
		return false
	}
	placed := map[string]string{}
	// passed are the members that went through Permit at once (the quorum was there).
	passed := map[string]bool{}
	for step := 0; step < 4*size && len(placed) < size; step++ {
		var p *v1.Pod
		for _, m := range pods {
			if placed[m.Name] == "" {
				p = m
				break
			}
		}
		if interfere && rng.IntN(3) == 0 {
			n := nodes[rng.IntN(len(nodes))]
			n.AddPod(running(fmt.Sprintf("other-%d", step), "", n.Node().Name, "1", 0))
			log = append(log, "another pod on "+n.Node().Name)
		}
		out := c.run(p)
		offered, room := c.offered[len(c.offered)-1], c.withRoom[len(c.withRoom)-1]
		log = append(log, fmt.Sprintf("%s: offered %v, placed %q, %v", p.Name, offered, out.node, out.status))
		if offered != nil {
			if len(offered) > int(candidates) {
				return fail("%s offered %d nodes, more than %d", p.Name, len(offered), candidates)
			}
			if out.narrowed && !sets.New(room...).IsSuperset(sets.New(offered...)) {
				return fail("%s offered %v, not all planned nodes with room %v", p.Name, offered, room)
			}
		}
		if len(placed) >= minMember && out.narrowed {
			return fail("%s narrowed by a plan after the quorum", p.Name)
		}
		switch {
		case out.node != "":
			placed[p.Name] = out.node
		case out.rejected && len(placed) == 0:
			// The gang does not fit (or no longer does): nothing may be held.
			if len(env.handle.waiting) > 0 {
				return fail("rejected at PreFilter while %d members wait", len(env.handle.waiting))
			}
			return true
		case out.narrowed:
			if !interfere && identical {
				return fail("the plan missed with no other pod placed: %v", out.status)
			}
			// The miss is retried at once, on every node: the next cycle of this member must not
			// be narrowed.
			if g := env.pl.gangs.Get("ns/g"); g.Plan != nil {
				return fail("the plan survived its miss")
			}
		case !interfere && identical && len(placed) < minMember:
			return fail("a full cycle found no node for %s though the gang was feasible: %v", p.Name, out.status)
		default:
			// Beyond the quorum a member searches alone; an interfered cluster may no longer hold
			// the gang.
			step = 4 * size
		}
		if out.node != "" && out.status.IsSuccess() {
			passed[p.Name] = true
		}
		bound := len(passed)
		for uid, w := range env.handle.waiting {
			if w.allowed && !passed[string(uid)] {
				bound++
			}
		}
		if bound > 0 && bound < minMember {
			return fail("%d members allowed, minMember %d", bound, minMember)
		}
	}
	if !interfere && identical && len(placed) < size {
		// The whole-gang check (minMember at once) passed or the first member would have been
		// rejected; members beyond minMember search on their own and may find no room.
		if len(placed) < minMember {
			return fail("placed %d of %d, below minMember %d", len(placed), size, minMember)
		}
	}
	if len(placed) >= minMember {
		if g := env.pl.gangs.Get("ns/g"); g.Plan != nil || g.NoPlan {
			return fail("the plan outlived the quorum")
		}
	}
	return true
}

// TestPlacementPlanMissKeepsTheAttemptUnplanned: after a miss, no new plan is made until the attempt
// ends, even when a fresh check runs (the capacity epoch moved), so a plan that keeps offering a node
// the filters reject cannot loop.
func TestPlacementPlanMissKeepsTheAttemptUnplanned(t *testing.T) {
	pods := []*v1.Pod{member("m0", "g", "2"), member("m1", "g", "2")}
	env := newTestEnv(t, planArgs(1), []*v1alpha1.PodGroup{makePG("ns", "g", 2, time.Time{})}, nil)
	enqueue(t, env, pods...)
	c := &miniCycle{t: t, env: env, nodes: []*framework.NodeInfo{node("a", "4"), node("b", "4")}}
	// The plan offers a (both members fit there); another pod takes it before m0's filters run.
	ctx := context.Background()
	state := framework.NewCycleState()
	if res, s := env.pl.PreFilter(ctx, state, pods[0], c.infos()); !passed(s) || res.AllNodes() {
		t.Fatalf("PreFilter = %v, %v", res, s)
	}
	statuses := framework.NewDefaultNodeToStatus()
	statuses.Set("a", fwk.NewStatus(fwk.Unschedulable, "Insufficient cpu"))
	statuses.SetAbsentNodesStatus(fwk.NewStatus(fwk.UnschedulableAndUnresolvable, "node(s) didn't satisfy plugin(s) [Coscheduling]"))
	if _, s := env.pl.PostFilter(ctx, state, pods[0], statuses); !strings.Contains(s.Message(), "fits none of its planned nodes") {
		t.Fatalf("PostFilter = %v, want a miss", s)
	}
	// Capacity is freed somewhere (the epoch moves) and the cached check expires: a fresh check.
	env.pl.epoch.Add(1)
	env.clock.Step(feasibilityCacheTTL + time.Second)
	for _, p := range pods {
		if out := c.run(p); out.narrowed || out.node == "" {
			t.Fatalf("%s after the miss: %+v (want a full cycle that places it)", p.Name, out)
		}
	}
	if g := env.pl.gangs.Get("ns/g"); g.NoPlan || g.Plan != nil {
		t.Errorf("the attempt ended at its quorum, and the fall-back with it: noPlan %v, plan %v", g.NoPlan, g.Plan)
	}
}

// TestPlacementPlanAfterAnInfeasibleCheck: a fresh check that finds the gang infeasible drops the plan
// of the check before, so the rejected member goes the infeasible way (preemption, reservation), not
// the plan's fall-back.
func TestPlacementPlanAfterAnInfeasibleCheck(t *testing.T) {
	pods := []*v1.Pod{member("m0", "g", "2"), member("m1", "g", "2")}
	env := newTestEnv(t, planArgs(2), []*v1alpha1.PodGroup{makePG("ns", "g", 2, time.Time{})}, nil)
	enqueue(t, env, pods...)
	ctx := context.Background()
	if res, s := env.pl.PreFilter(ctx, framework.NewCycleState(), pods[0], []fwk.NodeInfo{node("a", "4")}); !passed(s) || res.AllNodes() {
		t.Fatalf("PreFilter = %v, %v", res, s)
	}
	// m0's cycle ended without a Reserve (a Score error, say); the node filled up meanwhile.
	env.pl.epoch.Add(1)
	full := []fwk.NodeInfo{nodeWith("a", "4", running("x", "", "a", "3", 0))}
	for _, p := range pods {
		state := framework.NewCycleState()
		if _, s := env.pl.PreFilter(ctx, state, p, full); s.Code() != fwk.UnschedulableAndUnresolvable {
			t.Fatalf("PreFilter(%s) = %v, want infeasible", p.Name, s)
		}
		if gang.MarksOf(state).Planned {
			t.Fatalf("%s: an infeasible cycle is marked planned", p.Name)
		}
	}
	if g := env.pl.gangs.Get("ns/g"); g.Plan != nil {
		t.Errorf("the plan of the feasible check outlived the infeasible one: %+v", g.Plan.Nodes)
	}
}

// TestPlacementPlanOtherPreFilterRejection: a cycle another plugin's PreFilter rejected is no miss of
// the plan (every node carries that plugin's status): the plan stays and nothing is activated.
func TestPlacementPlanOtherPreFilterRejection(t *testing.T) {
	// A spare member, so that m0 finding no node does not fail the attempt (which ends the plan).
	pods := []*v1.Pod{member("m0", "g", "1"), member("m1", "g", "1"), member("m2", "g", "1")}
	env := newTestEnv(t, planArgs(2), []*v1alpha1.PodGroup{makePG("ns", "g", 2, time.Time{})}, nil)
	enqueue(t, env, pods...)
	ctx := context.Background()
	state := framework.NewCycleState()
	if res, s := env.pl.PreFilter(ctx, state, pods[0], []fwk.NodeInfo{node("a", "4")}); !passed(s) || res.AllNodes() {
		t.Fatalf("PreFilter = %v, %v", res, s)
	}
	statuses := framework.NewDefaultNodeToStatus()
	statuses.SetAbsentNodesStatus(fwk.NewStatus(fwk.UnschedulableAndUnresolvable, "pod has unbound immediate PersistentVolumeClaims").WithPlugin("VolumeBinding"))
	before := counterValue(t, metrics.PlacementPlanMembers, "test", planFallback)
	if _, s := env.pl.PostFilter(ctx, state, pods[0], statuses); strings.Contains(s.Message(), "planned nodes") {
		t.Fatalf("PostFilter = %v: taken as a miss of the plan", s)
	}
	if n := counterValue(t, metrics.PlacementPlanMembers, "test", planFallback) - before; n != 0 {
		t.Errorf("fallbacks counted: %v", n)
	}
	if g := env.pl.gangs.Get("ns/g"); g.Plan == nil || g.NoPlan {
		t.Errorf("the plan was dropped for another plugin's rejection: plan %v, noPlan %v", g.Plan, g.NoPlan)
	}
	if len(env.handle.activated) != 0 {
		t.Errorf("activated %v", env.handle.activated)
	}
}
