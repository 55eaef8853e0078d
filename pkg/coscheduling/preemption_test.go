package coscheduling

import (
	"context"
	"fmt"
	"math/rand"
	"os"
	"slices"
	"sort"
	"strconv"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	policy "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/klog/v2/ktesting"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework/preemption"
	st "k8s.io/kubernetes/pkg/scheduler/testing"

	"github.com/custom-scheduler/custom-scheduler/pkg/apis/scheduling/v1alpha1"
	"github.com/custom-scheduler/custom-scheduler/pkg/coscheduling/podgroup"
)

// running is a pod bound to node with a CPU request and a priority; group "" for a plain pod.
func running(name, group, node, cpu string, prio int32) *v1.Pod {
	b := st.MakePod().Namespace("ns").Name(name).UID(name).Node(node).Priority(prio).
		Req(map[v1.ResourceName]string{v1.ResourceCPU: cpu})
	if group != "" {
		b = b.Label(v1alpha1.PodGroupLabel, group)
	}
	p := b.Obj()
	// One start time for all: victims of equal priority and size keep the snapshot's order.
	p.Status.StartTime = &metav1.Time{Time: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	return p
}

// cpuNode is a node with the given CPUs and the pods on it.
func cpuNode(name, cpu string, pods ...*v1.Pod) fwk.NodeInfo {
	n := st.MakeNode().Name(name).Capacity(map[v1.ResourceName]string{v1.ResourceCPU: cpu, v1.ResourceMemory: "64Gi", v1.ResourcePods: "110"}).Obj()
	ni := framework.NewNodeInfo(pods...)
	ni.SetNode(n)
	return ni
}

// gangVictims runs a gang preemptor's victim selection as PostFilter does (no topology policy):
// preemptor members pending, each needing cpu, at priority prio.
func gangVictims(t *testing.T, nodes []fwk.NodeInfo, members []*v1.Pod, prio int32, pdbs []*policy.PodDisruptionBudget) ([]preemption.Victim, int, bool, *gangFit) {
	t.Helper()
	logger, _ := ktesting.NewTestContext(t)
	f := newGangFit(logger, "ns/hi", members, len(members), nodes, nil, nil, nil, false)
	nodeIdx := map[string]int{}
	for i, fn := range f.free {
		nodeIdx[fn.node.Name] = i
	}
	units := gangUnits(f, nodes, nodeIdx, prio, "ns/hi", preemption.PodTerminatingByPreemption)
	chosen, violations, ok := chooseVictims(f, units, pdbs, func() bool { return f.placeable(nil) >= len(members) })
	return chosen, violations, ok, f
}

// victimNames lists the chosen units as "gang:<name>" or the pod's name, sorted.
func victimNames(vs []preemption.Victim) []string {
	var out []string
	for _, v := range vs {
		p := v.Pods()[0].GetPod()
		if v.IsGroup() {
			name, _ := podgroup.Of(p)
			out = append(out, fmt.Sprintf("gang:%s(%d)", name, len(v.Pods())))
		} else {
			out = append(out, p.Name)
		}
	}
	sort.Strings(out)
	return out
}

func highGang(n int, cpu string) []*v1.Pod {
	pods := make([]*v1.Pod, n)
	for i := range pods {
		pods[i] = st.MakePod().Namespace("ns").Name(fmt.Sprintf("hi-%d", i)).UID(fmt.Sprintf("hi-%d", i)).
			Label(v1alpha1.PodGroupLabel, "hi").Priority(100).Req(map[v1.ResourceName]string{v1.ResourceCPU: cpu}).Obj()
	}
	return pods
}

func TestChooseVictims(t *testing.T) {
	tenSmallGangs := func() []fwk.NodeInfo {
		// 5 nodes of 4 CPUs, each full with two 2-member gangs of 1-CPU pods.
		var nodes []fwk.NodeInfo
		for n := range 5 {
			node := fmt.Sprintf("n%d", n)
			var pods []*v1.Pod
			for g := range 2 {
				gang := fmt.Sprintf("lo%d", 2*n+g)
				pods = append(pods, running(gang+"-a", gang, node, "1", 0), running(gang+"-b", gang, node, "1", 0))
			}
			nodes = append(nodes, cpuNode(node, "4", pods...))
		}
		return nodes
	}
	budget := func(app string, allowed int32) *policy.PodDisruptionBudget {
		one := intstr.FromInt32(1)
		return &policy.PodDisruptionBudget{
			ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: app},
			Spec:       policy.PodDisruptionBudgetSpec{MinAvailable: &one, Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": app}}},
			Status:     policy.PodDisruptionBudgetStatus{DisruptionsAllowed: allowed},
		}
	}
	withApp := func(p *v1.Pod, app string) *v1.Pod { p.Labels = map[string]string{"app": app}; return p }
	preempted := func(p *v1.Pod) *v1.Pod {
		now := metav1.Now()
		p.DeletionTimestamp = &now
		p.Status.Conditions = []v1.PodCondition{{Type: v1.DisruptionTarget, Status: v1.ConditionTrue, Reason: v1.PodReasonPreemptionByScheduler}}
		return p
	}

	cases := []struct {
		name           string
		nodes          []fwk.NodeInfo
		gang           []*v1.Pod
		pdbs           []*policy.PodDisruptionBudget
		wantOK         bool
		want           []string
		wantViolations int
	}{
		{
			name: "a lower-priority gang on the nodes the gang needs is evicted whole",
			nodes: []fwk.NodeInfo{
				cpuNode("n0", "4", running("lo-a", "lo", "n0", "4", 0)),
				cpuNode("n1", "4", running("lo-b", "lo", "n1", "4", 0)),
			},
			gang: highGang(2, "4"), wantOK: true, want: []string{"gang:lo(2)"},
		},
		{
			// Any three whole gangs that free room for three 2-CPU members (one node emptied and one
			// gang of another node, here) are the cheapest set; the last in the snapshot go first.
			name:  "of ten small gangs only the three needed are evicted, each whole",
			nodes: tenSmallGangs(),
			gang:  highGang(3, "2"), wantOK: true,
			want: []string{"gang:lo7(2)", "gang:lo8(2)", "gang:lo9(2)"},
		},
		{
			name: "single pods go before a gang of the same priority, even if they are more pods",
			nodes: []fwk.NodeInfo{
				cpuNode("n0", "4", running("wide-0", "wide", "n0", "1", 0), running("s0", "", "n0", "3", 0)),
				cpuNode("n1", "4", running("a", "", "n1", "1", 0), running("b", "", "n1", "1", 0), running("c", "", "n1", "1", 0), running("d", "", "n1", "1", 0)),
				cpuNode("n2", "4", running("wide-1", "wide", "n2", "1", 0), running("x2", "", "n2", "3", 1000)),
			},
			gang: highGang(1, "4"), wantOK: true, want: []string{"a", "b", "c", "d"},
		},
		{
			name: "a gang's members on other nodes are evicted with the member in the way",
			nodes: []fwk.NodeInfo{
				cpuNode("n0", "4", running("wide-0", "wide", "n0", "1", 0), running("s0", "", "n0", "3", 0)),
				cpuNode("n1", "4", running("wide-1", "wide", "n1", "1", 0), running("x1", "", "n1", "3", 1000)),
				cpuNode("n2", "4", running("wide-2", "wide", "n2", "1", 0), running("x2", "", "n2", "3", 1000)),
			},
			gang: highGang(1, "4"), wantOK: true, want: []string{"gang:wide(3)", "s0"},
		},
		{
			// Its room is the earlier preemptor's (its nomination claims it): evicting it again, or
			// counting it, would count that room twice.
			name: "a pod already terminating for an earlier preemption is no victim, and its room counts as going",
			nodes: []fwk.NodeInfo{
				cpuNode("n0", "4", preempted(running("going", "", "n0", "4", 0))),
				cpuNode("n1", "4", running("stays", "", "n1", "4", 0)),
			},
			gang: highGang(2, "4"), wantOK: true, want: []string{"stays"},
		},
		{
			name: "a gang that does not fit even on empty nodes evicts nothing",
			nodes: []fwk.NodeInfo{
				cpuNode("n0", "4", running("lo-a", "lo", "n0", "4", 0)),
				cpuNode("n1", "4", running("lo-b", "lo", "n1", "4", 0)),
			},
			gang: highGang(2, "8"), wantOK: false,
		},
		{
			name: "equal priority is never a victim",
			nodes: []fwk.NodeInfo{
				cpuNode("n0", "4", running("peer-a", "peer", "n0", "4", 100)),
				cpuNode("n1", "4", running("p", "", "n1", "4", 100)),
			},
			gang: highGang(1, "4"), wantOK: false,
		},
		{
			name: "a gang with one member of higher priority is not a victim, nor are its other members",
			nodes: []fwk.NodeInfo{
				cpuNode("n0", "4", running("mixed-a", "mixed", "n0", "4", 0)),
				cpuNode("n1", "4", running("mixed-b", "mixed", "n1", "4", 500)),
			},
			gang: highGang(1, "4"), wantOK: false,
		},
		{
			name: "a PDB-protected pod is avoided when another set works",
			nodes: []fwk.NodeInfo{
				cpuNode("n0", "4", withApp(running("guarded", "", "n0", "4", 0), "db")),
				cpuNode("n1", "4", withApp(running("free", "", "n1", "4", 10), "web")),
			},
			gang: highGang(1, "4"), pdbs: []*policy.PodDisruptionBudget{budget("db", 0)},
			wantOK: true, want: []string{"free"},
		},
		{
			name: "a PDB-protected pod is evicted when nothing else works, and counted",
			nodes: []fwk.NodeInfo{
				cpuNode("n0", "4", withApp(running("guarded", "", "n0", "4", 0), "db")),
				cpuNode("n1", "4", running("x", "", "n1", "4", 1000)),
			},
			gang: highGang(1, "4"), pdbs: []*policy.PodDisruptionBudget{budget("db", 0)},
			wantOK: true, want: []string{"guarded"}, wantViolations: 1,
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			chosen, violations, ok, _ := gangVictims(t, tc.nodes, tc.gang, 100, tc.pdbs)
			if ok != tc.wantOK {
				t.Fatalf("ok = %v, want %v (victims %v)", ok, tc.wantOK, victimNames(chosen))
			}
			if got := victimNames(chosen); !slices.Equal(got, tc.want) {
				t.Errorf("victims = %v, want %v", got, tc.want)
			}
			if violations != tc.wantViolations {
				t.Errorf("PDB violations = %d, want %d", violations, tc.wantViolations)
			}
		})
	}
}

// TestGangIndexUnits: for a plain preemptor, a gang member found on a node stands for its whole
// gang, once; the preemptor's own gang and gangs with a member of its priority or higher are not
// victims.
func TestGangIndexUnits(t *testing.T) {
	nodes := []fwk.NodeInfo{
		cpuNode("n0", "8", running("g1-a", "g1", "n0", "1", 0), running("g2-a", "g2", "n0", "1", 0), running("solo", "", "n0", "1", 0),
			running("own-a", "own", "n0", "1", 0), running("hi-a", "hi", "n0", "1", 0)),
		cpuNode("n1", "8", running("g1-b", "g1", "n1", "1", 0), running("g2-b", "g2", "n1", "1", 0), running("g1-c", "g1", "n1", "1", 0),
			running("hi-b", "hi", "n1", "1", 100)),
	}
	idx := buildGangIndex(nodes)
	var possible []*preemption.DomainVictim
	for _, pi := range nodes[0].GetPods() {
		possible = append(possible, &preemption.DomainVictim{Victim: preemption.NewPodVictim(pi, nil, nil)})
	}
	preemptor := st.MakePod().Namespace("ns").Name("p").UID("p").Label(v1alpha1.PodGroupLabel, "own").Priority(100).Obj()
	got := victimNames(idx.units(possible, preemptor))
	want := []string{"gang:g1(3)", "gang:g2(2)", "solo"}
	if !slices.Equal(got, want) {
		t.Errorf("units = %v, want %v", got, want)
	}
}

// TestChooseVictimsRandomized checks, over random clusters of lower- and higher-priority gangs and
// pods, the properties gang preemption promises: when it finds victims, evicting them makes the
// whole gang fit; every victim is a whole gang (all its members in the snapshot) or a plain pod, of
// lower priority; no victim could be spared; and when it finds none, the gang does not fit even with
// every lower-priority pod gone. SEED=<n> replays a failure.
func TestChooseVictimsRandomized(t *testing.T) {
	seed := time.Now().UnixNano()
	if s := os.Getenv("SEED"); s != "" {
		var err error
		if seed, err = strconv.ParseInt(s, 10, 64); err != nil {
			t.Fatalf("SEED: %v", err)
		}
	}
	rng := rand.New(rand.NewSource(seed))
	defer func() {
		if t.Failed() {
			t.Logf("replay with SEED=%d", seed)
		}
	}()
	for round := range 300 {
		nodes, byGang := randomCluster(rng)
		gang := highGang(1+rng.Intn(5), strconv.Itoa(1+rng.Intn(4)))
		chosen, _, ok, f := gangVictims(t, nodes, gang, 100, nil)
		need := len(gang)
		if !ok {
			// Nothing may be evicted: with every lower-priority pod gone the gang must not fit.
			g2 := newGangFit(f.logger, "ns/hi", gang, need, nodes, nil, nil, nil, false)
			for i, ni := range nodes {
				for _, pi := range ni.GetPods() {
					if p := pi.GetPod(); p.Spec.Priority != nil && *p.Spec.Priority < 100 && !gangHasHigh(byGang, p) {
						resourcesFromList(podRequestList(p), g2.names).addTo(&g2.free[i].free)
						g2.free[i].slots++
					}
				}
			}
			if g2.placeable(nil) >= need {
				t.Fatalf("round %d: no victims found, but the gang fits with every lower-priority pod gone", round)
			}
			continue
		}
		if f.placeable(nil) < need {
			t.Fatalf("round %d: the gang does not fit after evicting %v", round, victimNames(chosen))
		}
		for _, v := range chosen {
			if v.Priority() >= 100 {
				t.Fatalf("round %d: victim %v has priority %d", round, victimNames([]preemption.Victim{v}), v.Priority())
			}
			p := v.Pods()[0].GetPod()
			if name, isMember := podgroup.Of(p); isMember && len(v.Pods()) != len(byGang[name]) {
				t.Fatalf("round %d: gang %s evicted partly: %d of %d members", round, name, len(v.Pods()), len(byGang[name]))
			}
		}
		// Minimal: putting any one victim back leaves the gang without room.
		units := map[string]*gangUnit{}
		nodeIdx := map[string]int{}
		for i, fn := range f.free {
			nodeIdx[fn.node.Name] = i
		}
		for _, u := range gangUnits(f, nodes, nodeIdx, 100, "ns/hi", nil) {
			units[string(u.Pods()[0].GetPod().UID)] = u
		}
		for _, v := range chosen {
			u := units[string(v.Pods()[0].GetPod().UID)]
			u.apply(f, false)
			if f.placeable(nil) >= need {
				t.Fatalf("round %d: victim %v could have been spared", round, victimNames([]preemption.Victim{v}))
			}
			u.apply(f, true)
		}
	}
}

// randomCluster is 2–8 nodes of 4–8 CPUs filled with gangs (spread over nodes) and plain pods of
// random priorities around 100.
func randomCluster(rng *rand.Rand) ([]fwk.NodeInfo, map[string][]*v1.Pod) {
	n := 2 + rng.Intn(7)
	size0, capacity := make([]int, n), make([]int, n)
	pods := make([][]*v1.Pod, n)
	for i := range capacity {
		size0[i] = 4 + rng.Intn(5)
		capacity[i] = size0[i]
	}
	byGang := map[string][]*v1.Pod{}
	prios := []int32{0, 50, 99, 100, 150}
	for k := range 3 * n {
		group := ""
		size := 1
		if rng.Intn(2) == 0 {
			group, size = fmt.Sprintf("g%d", k), 1+rng.Intn(3)
		}
		prio := prios[rng.Intn(len(prios))]
		for m := range size {
			i := rng.Intn(n)
			cpu := 1 + rng.Intn(2)
			if capacity[i] < cpu {
				continue
			}
			capacity[i] -= cpu
			name := fmt.Sprintf("p%d-%d", k, m)
			mprio := prio
			if group != "" && rng.Intn(8) == 0 {
				mprio = 150 // a gang with one member the preemptor may not evict
			}
			p := running(name, group, fmt.Sprintf("n%d", i), strconv.Itoa(cpu), mprio)
			pods[i] = append(pods[i], p)
			if group != "" {
				byGang[group] = append(byGang[group], p)
			}
		}
	}
	nodes := make([]fwk.NodeInfo, n)
	for i := range nodes {
		nodes[i] = cpuNode(fmt.Sprintf("n%d", i), strconv.Itoa(size0[i]), pods[i]...)
	}
	return nodes, byGang
}

// gangHasHigh reports whether p belongs to a gang with a member of priority 100 or more.
func gangHasHigh(byGang map[string][]*v1.Pod, p *v1.Pod) bool {
	name, ok := podgroup.Of(p)
	if !ok {
		return false
	}
	for _, m := range byGang[name] {
		if *m.Spec.Priority >= 100 {
			return true
		}
	}
	return false
}

// TestClaims: room nominated to pods of at least the gang's priority, other than its own members, is
// not free for the whole-gang check; bound, finished or lower-priority claims are not counted.
func TestClaims(t *testing.T) {
	logger, _ := ktesting.NewTestContext(t)
	nominatedTo := func(name, group, node string, prio int32) *v1.Pod {
		p := running(name, group, "", "4", prio)
		p.Status.NominatedNodeName = node
		return p
	}
	var c claims
	for _, p := range []*v1.Pod{
		nominatedTo("other-gang", "other", "n0", 100),
		nominatedTo("low", "", "n1", 10),
		nominatedTo("own", "hi", "n1", 100),
	} {
		if !c.set(p) {
			t.Fatalf("claim of %s not recorded", p.Name)
		}
	}
	bound := nominatedTo("bound", "", "n1", 1000)
	bound.Spec.NodeName = "n1"
	if c.set(bound) {
		t.Errorf("a bound pod's nomination was recorded")
	}
	against := c.against(100, "ns/hi")
	if len(against) != 1 || against[0].Name != "other-gang" {
		t.Fatalf("claims against ns/hi at priority 100 = %v, want [other-gang]", against)
	}
	nodes := []fwk.NodeInfo{cpuNode("n0", "4"), cpuNode("n1", "4")}
	if res, _ := checkFeasible(logger, "ns/hi", highGang(2, "4"), 2, nodes, nil, nil, against, nil); res.feasible {
		t.Errorf("gang feasible on room nominated to another gang")
	}
	if res, _ := checkFeasible(logger, "ns/hi", highGang(1, "4"), 1, nodes, nil, nil, against, nil); !res.feasible {
		t.Errorf("gang of one infeasible though n1 is free: %s", res.message)
	}
	// The nomination dropped (the pod bound elsewhere or deleted): nothing is claimed any more.
	if !c.forget(against[0]) || len(c.against(100, "ns/hi")) != 0 {
		t.Errorf("forgetting the claim left it counted")
	}
}

// TestClaimsOfAssumedMembers: a gang member reserved on a node is counted there by the snapshot; the
// nomination the scheduler gives it while it waits at Permit and binds claims nothing more, and does
// not make cached checks stale. Unreserved, a later nomination claims again; bound, it is forgotten.
func TestClaimsOfAssumedMembers(t *testing.T) {
	env := newTestEnv(t, defaultArgs(), []*v1alpha1.PodGroup{makePG("ns", "g", 2, time.Now()), makePG("ns", "g2", 2, time.Now())}, nil)
	ctx := context.Background()
	m := running("m0", "g", "", "4", 100)
	if s := env.pl.Reserve(ctx, framework.NewCycleState(), m, "n0"); !s.IsSuccess() {
		t.Fatal(s)
	}
	waiting := m.DeepCopy()
	waiting.Status.NominatedNodeName = "n0"
	epoch := env.pl.epoch.Load()
	if env.pl.claims.set(waiting) || len(env.pl.claims.against(0, "ns/other")) != 0 {
		t.Fatal("the nomination of a member waiting at Permit was recorded as a claim")
	}
	if env.pl.epoch.Load() != epoch {
		t.Error("the nomination of an assumed member made cached checks stale")
	}

	env.pl.Unreserve(ctx, framework.NewCycleState(), m, "n0")
	if !env.pl.claims.set(waiting) || len(env.pl.claims.against(0, "ns/other")) != 1 {
		t.Fatal("an unreserved member's nomination claims nothing")
	}

	// Another member reserved, then bound: forgotten.
	m = running("m1", "g2", "", "4", 100)
	if s := env.pl.Reserve(ctx, framework.NewCycleState(), m, "n0"); !s.IsSuccess() {
		t.Fatal(s)
	}
	waiting = m.DeepCopy()
	waiting.Status.NominatedNodeName = "n0"
	bound := waiting.DeepCopy()
	bound.Spec.NodeName = "n0"
	env.pl.claims.set(bound)
	if n := env.pl.claims.nAssumed.Load(); n != 0 {
		t.Errorf("a bound member is still marked assumed (%d)", n)
	}
}

// TestEligibilityClasses: members with equal placement constraints (as separate objects, node
// selectors in any order) share one class and one pass over the nodes; any difference makes another.
func TestEligibilityClasses(t *testing.T) {
	logger, _ := ktesting.NewTestContext(t)
	seconds := int64(300)
	withConstraints := func(name string, sel map[string]string, tolerationKey string) *v1.Pod {
		p := running(name, "g", "", "1", 0)
		p.Spec.NodeSelector = sel
		if tolerationKey != "" {
			s := seconds
			p.Spec.Tolerations = []v1.Toleration{{Key: tolerationKey, Operator: v1.TolerationOpExists, Effect: v1.TaintEffectNoExecute, TolerationSeconds: &s}}
		}
		return p
	}
	a := withConstraints("a", map[string]string{"x": "1", "y": "2"}, v1.TaintNodeNotReady)
	b := withConstraints("b", map[string]string{"y": "2", "x": "1"}, v1.TaintNodeNotReady)
	c := withConstraints("c", map[string]string{"x": "1", "y": "2"}, v1.TaintNodeUnreachable)
	d := withConstraints("d", map[string]string{"x": "1"}, v1.TaintNodeNotReady)
	e := newEligibility(logger, nil)
	if e.key(a) != e.key(b) {
		t.Errorf("equal constraints in two pods got two classes")
	}
	if e.key(a) == e.key(c) || e.key(a) == e.key(d) || e.key(c) == e.key(d) {
		t.Errorf("different constraints share a class: a=%d c=%d d=%d", e.key(a), e.key(c), e.key(d))
	}
	if len(e.classes) != 3 {
		t.Errorf("%d classes, want 3", len(e.classes))
	}
}

// TestReserveDropsClaim: a nominated pod, once reserved, is assumed on its node: its claim goes, so
// the room is not counted twice.
func TestReserveDropsClaim(t *testing.T) {
	env := newTestEnv(t, defaultArgs(), nil, nil)
	p := running("preemptor", "", "", "4", 100)
	p.Status.NominatedNodeName = "n0"
	env.pl.claims.set(p)
	if got := env.pl.claims.against(0, ""); len(got) != 1 {
		t.Fatalf("claims before Reserve = %d, want 1", len(got))
	}
	if st := env.pl.Reserve(context.Background(), nil, p, "n0"); !st.IsSuccess() {
		t.Fatal(st)
	}
	if got := env.pl.claims.against(0, ""); len(got) != 0 {
		t.Errorf("claims after Reserve = %v, want none", got)
	}
}

// TestAnyPodBelow: the early exit of a gang's preemption when nothing of lower priority runs.
func TestAnyPodBelow(t *testing.T) {
	nodes := []fwk.NodeInfo{cpuNode("n0", "4", running("a", "", "n0", "1", 100)), cpuNode("n1", "4")}
	if anyPodBelow(nodes, 100) {
		t.Error("a pod of equal priority counted as lower")
	}
	if !anyPodBelow(nodes, 101) {
		t.Error("a pod of lower priority not found")
	}
	if anyPodBelow(nil, 1000) {
		t.Error("pods found on no nodes")
	}
}
