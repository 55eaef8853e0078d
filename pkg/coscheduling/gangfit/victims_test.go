package gangfit

import (
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
	"k8s.io/kubernetes/pkg/scheduler/framework/preemption"
	st "k8s.io/kubernetes/pkg/scheduler/testing"

	"github.com/custom-scheduler/custom-scheduler/pkg/apis/scheduling/v1alpha1"
	"github.com/custom-scheduler/custom-scheduler/pkg/coscheduling/podgroup"
)

// gangVictims runs a gang preemptor's victim selection as PostFilter does (no topology policy):
// preemptor members pending, each needing cpu, at priority prio.
func gangVictims(t *testing.T, nodes []fwk.NodeInfo, members []*v1.Pod, prio int32, pdbs []*policy.PodDisruptionBudget) ([]preemption.Victim, int, bool, *Fit) {
	t.Helper()
	logger, _ := ktesting.NewTestContext(t)
	f := New(logger, "ns/hi", members, len(members), nodes, nil, nil, nil, false)
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
	idx := BuildGangIndex(nodes)
	var possible []*preemption.DomainVictim
	for _, pi := range nodes[0].GetPods() {
		possible = append(possible, &preemption.DomainVictim{Victim: preemption.NewPodVictim(pi, nil, nil)})
	}
	preemptor := st.MakePod().Namespace("ns").Name("p").UID("p").Label(v1alpha1.PodGroupLabel, "own").Priority(100).Obj()
	got := victimNames(idx.Units(possible, preemptor))
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
			g2 := New(f.logger, "ns/hi", gang, need, nodes, nil, nil, nil, false)
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

// TestAnyPodBelow: the early exit of a gang's preemption when nothing of lower priority runs.
func TestAnyPodBelow(t *testing.T) {
	nodes := []fwk.NodeInfo{cpuNode("n0", "4", running("a", "", "n0", "1", 100)), cpuNode("n1", "4")}
	if AnyPodBelow(nodes, 100) {
		t.Error("a pod of equal priority counted as lower")
	}
	if !AnyPodBelow(nodes, 101) {
		t.Error("a pod of lower priority not found")
	}
	if AnyPodBelow(nil, 1000) {
		t.Error("pods found on no nodes")
	}
}
