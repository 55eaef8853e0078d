package gangfit

import (
	"errors"
	"fmt"
	"math/rand"
	"os"
	"sort"
	"strconv"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	policy "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/klog/v2/ktesting"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework/preemption"
	st "k8s.io/kubernetes/pkg/scheduler/testing"

	"github.com/custom-scheduler/custom-scheduler/pkg/apis/scheduling/v1alpha1"
	"github.com/custom-scheduler/custom-scheduler/pkg/coscheduling/podgroup"
)

// planOutcome is a Plan by names: victims in the plan's order, assignment as "pod@node".
type planOutcome struct {
	Fits       bool
	Units      int
	Victims    []string
	Gangs      []string
	Singles    int
	Violations int
	Assignment []string
}

func outcomeOf(p Plan) planOutcome {
	out := planOutcome{Fits: p.Fits, Units: p.Units, Gangs: p.Gangs, Singles: p.Singles, Violations: p.Violations}
	for _, v := range p.Victims {
		out.Victims = append(out.Victims, v.Name)
	}
	for _, a := range p.Assignment {
		out.Assignment = append(out.Assignment, a.Pod.Name+"@"+a.Node)
	}
	return out
}

// planTainted taints the node NoSchedule, so that no preemptor member may use it.
func planTainted(ni fwk.NodeInfo) fwk.NodeInfo {
	n := ni.Node().DeepCopy()
	n.Spec.Taints = []v1.Taint{{Key: "dedicated", Value: "x", Effect: v1.TaintEffectNoSchedule}}
	ni.(*framework.NodeInfo).SetNode(n)
	return ni
}

func planBudget(app string, allowed int32) *policy.PodDisruptionBudget {
	one := intstr.FromInt32(1)
	return &policy.PodDisruptionBudget{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: app},
		Spec:       policy.PodDisruptionBudgetSpec{MinAvailable: &one, Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": app}}},
		Status:     policy.PodDisruptionBudgetStatus{DisruptionsAllowed: allowed},
	}
}

func planApp(p *v1.Pod, app string) *v1.Pod {
	if p.Labels == nil {
		p.Labels = map[string]string{}
	}
	p.Labels["app"] = app
	return p
}

func planStarted(p *v1.Pod, year int) *v1.Pod {
	p.Status.StartTime = &metav1.Time{Time: time.Date(year, 1, 1, 0, 0, 0, 0, time.UTC)}
	return p
}

func planLeaving(names ...string) func(*v1.Pod) bool {
	s := sets.New(names...)
	return func(p *v1.Pod) bool { return s.Has(p.Name) }
}

func TestPlanPreemption(t *testing.T) {
	logger, _ := ktesting.NewTestContext(t)
	racks := func(a1, b0, b1 *v1.Pod) []fwk.NodeInfo {
		pods := func(p *v1.Pod) []*v1.Pod {
			if p == nil {
				return nil
			}
			return []*v1.Pod{p}
		}
		return []fwk.NodeInfo{rackedNode("a0", "", "", "r1"), rackedNode("a1", "", "", "r1", pods(a1)...),
			rackedNode("b0", "", "", "r2", pods(b0)...), rackedNode("b1", "", "", "r2", pods(b1)...)}
	}
	oneEach := func() []fwk.NodeInfo {
		return racks(running("p1", "", "a1", "4", 0), nil, running("p2", "", "b1", "4", 0))
	}
	cases := []struct {
		name    string
		nodes   []fwk.NodeInfo
		gang    []*v1.Pod
		policy  Policy
		pinned  map[string]string
		leaving func(*v1.Pod) bool
		pdbs    []*policy.PodDisruptionBudget
		want    planOutcome
	}{
		{name: "no pod of lower priority: nothing fits, no units",
			nodes: []fwk.NodeInfo{cpuNode("n0", "4", running("eq", "", "n0", "4", 100)), cpuNode("n1", "4", running("peer-a", "peer", "n1", "4", 100))},
			gang:  highGang(1, "4"), want: planOutcome{}},
		{name: "fits without evicting anything: no victims, no assignment",
			nodes: []fwk.NodeInfo{cpuNode("n0", "4"), cpuNode("n1", "4", running("lo", "", "n1", "4", 0))},
			gang:  highGang(1, "4"), want: planOutcome{Fits: true, Units: 1}},
		{name: "does not fit even with everything evicted",
			nodes: []fwk.NodeInfo{cpuNode("n0", "4", running("lo", "", "n0", "4", 0))},
			gang:  highGang(1, "8"), want: planOutcome{Units: 1}},
		{name: "a gang goes whole, with its member on a node the preemptor cannot use",
			nodes: []fwk.NodeInfo{cpuNode("n0", "4", running("lo-a", "lo", "n0", "4", 0)), cpuNode("n1", "4", running("lo-b", "lo", "n1", "4", 0)),
				planTainted(cpuNode("n2", "4", running("lo-c", "lo", "n2", "1", 0), running("t-solo", "", "n2", "3", 0)))},
			gang: highGang(2, "4"),
			want: planOutcome{Fits: true, Units: 1, Victims: []string{"lo-a", "lo-b", "lo-c"}, Gangs: []string{"ns/lo"}, Assignment: []string{"hi-0@n0", "hi-1@n1"}}},
		{name: "a single pod goes rather than a gang of its priority",
			nodes: []fwk.NodeInfo{cpuNode("n0", "4", running("lo-a", "lo", "n0", "4", 0)), cpuNode("n1", "4", running("lo-b", "lo", "n1", "4", 0)),
				cpuNode("n2", "4", running("s", "", "n2", "4", 0))},
			gang: highGang(1, "4"),
			want: planOutcome{Fits: true, Units: 2, Victims: []string{"s"}, Gangs: []string{}, Singles: 1, Assignment: []string{"hi-0@n2"}}},
		{name: "a gang of lower priority goes rather than a more important single pod",
			nodes: []fwk.NodeInfo{cpuNode("n0", "4", running("lo-a", "lo", "n0", "4", 0)), cpuNode("n1", "4", running("lo-b", "lo", "n1", "4", 0)),
				cpuNode("n2", "4", running("s", "", "n2", "4", 50))},
			gang: highGang(1, "4"),
			want: planOutcome{Fits: true, Units: 2, Victims: []string{"lo-a", "lo-b"}, Gangs: []string{"ns/lo"}, Assignment: []string{"hi-0@n0"}}},
		{name: "the pod of lowest priority goes",
			nodes: []fwk.NodeInfo{cpuNode("n0", "4", running("b", "", "n0", "4", 50)), cpuNode("n1", "4", running("a", "", "n1", "4", 10))},
			gang:  highGang(1, "4"),
			want:  planOutcome{Fits: true, Units: 2, Victims: []string{"a"}, Gangs: []string{}, Singles: 1, Assignment: []string{"hi-0@n1"}}},
		{name: "of equal priority, the pod started later goes",
			nodes: []fwk.NodeInfo{cpuNode("n0", "4", planStarted(running("young", "", "n0", "4", 0), 2026)), cpuNode("n1", "4", planStarted(running("old", "", "n1", "4", 0), 2020))},
			gang:  highGang(1, "4"),
			want:  planOutcome{Fits: true, Units: 2, Victims: []string{"young"}, Gangs: []string{}, Singles: 1, Assignment: []string{"hi-0@n0"}}},
		{name: "of equal priority, the smaller gang goes",
			nodes: []fwk.NodeInfo{cpuNode("n0", "4", running("small-a", "small", "n0", "4", 0)), cpuNode("n1", "4", running("big-a", "big", "n1", "4", 0)),
				cpuNode("n2", "4", running("small-b", "small", "n2", "1", 0), running("big-b", "big", "n2", "1", 0), running("big-c", "big", "n2", "1", 0))},
			gang: highGang(1, "4"),
			want: planOutcome{Fits: true, Units: 2, Victims: []string{"small-a", "small-b"}, Gangs: []string{"ns/small"}, Assignment: []string{"hi-0@n0"}}},
		{name: "a PDB-protected pod is spared when a more important one will do",
			nodes: []fwk.NodeInfo{cpuNode("n0", "4", planApp(running("guarded", "", "n0", "4", 0), "db")), cpuNode("n1", "4", running("free", "", "n1", "4", 10))},
			gang:  highGang(1, "4"), pdbs: []*policy.PodDisruptionBudget{planBudget("db", 0)},
			want: planOutcome{Fits: true, Units: 2, Victims: []string{"free"}, Gangs: []string{}, Singles: 1, Assignment: []string{"hi-0@n1"}}},
		{name: "every member of a gang past its budget is a violation",
			nodes: []fwk.NodeInfo{cpuNode("n0", "4", planApp(running("lo-a", "lo", "n0", "4", 0), "db")), cpuNode("n1", "4", planApp(running("lo-b", "lo", "n1", "4", 0), "db"))},
			gang:  highGang(2, "4"), pdbs: []*policy.PodDisruptionBudget{planBudget("db", 0)},
			want: planOutcome{Fits: true, Units: 1, Victims: []string{"lo-a", "lo-b"}, Gangs: []string{"ns/lo"}, Violations: 2, Assignment: []string{"hi-0@n0", "hi-1@n1"}}},
		{name: "a budget allowing one disruption: the second member violates it",
			nodes: []fwk.NodeInfo{cpuNode("n0", "4", planApp(running("lo-a", "lo", "n0", "4", 0), "db")), cpuNode("n1", "4", planApp(running("lo-b", "lo", "n1", "4", 0), "db"))},
			gang:  highGang(2, "4"), pdbs: []*policy.PodDisruptionBudget{planBudget("db", 1)},
			want: planOutcome{Fits: true, Units: 1, Victims: []string{"lo-a", "lo-b"}, Gangs: []string{"ns/lo"}, Violations: 1, Assignment: []string{"hi-0@n0", "hi-1@n1"}}},
		{name: "gangs of equal or higher priority and the preemptor's own gang are never victims",
			nodes: []fwk.NodeInfo{cpuNode("n0", "4", running("hi-bound", "hi", "n0", "4", 0)), cpuNode("n1", "4", running("peer-a", "peer", "n1", "4", 100)),
				cpuNode("n2", "4", running("mixed-a", "mixed", "n2", "4", 0)), cpuNode("n3", "4", running("mixed-b", "mixed", "n3", "4", 500))},
			gang: highGang(1, "4"), want: planOutcome{}},
		{name: "a leaving pod is no unit and its room is free",
			nodes: []fwk.NodeInfo{cpuNode("n0", "4", running("going", "", "n0", "4", 0)), cpuNode("n1", "4", running("stays", "", "n1", "4", 0)),
				cpuNode("n2", "4", running("stays2", "", "n2", "4", 0))},
			gang: highGang(2, "4"), leaving: planLeaving("going"),
			want: planOutcome{Fits: true, Units: 2, Victims: []string{"stays2"}, Gangs: []string{}, Singles: 1, Assignment: []string{"hi-0@n0", "hi-1@n2"}}},
		{name: "the same pods, none leaving: one more victim",
			nodes: []fwk.NodeInfo{cpuNode("n0", "4", running("going", "", "n0", "4", 0)), cpuNode("n1", "4", running("stays", "", "n1", "4", 0)),
				cpuNode("n2", "4", running("stays2", "", "n2", "4", 0))},
			gang: highGang(2, "4"),
			want: planOutcome{Fits: true, Units: 3, Victims: []string{"stays", "stays2"}, Gangs: []string{}, Singles: 2, Assignment: []string{"hi-0@n1", "hi-1@n2"}}},
		{name: "a gang with one member leaving is still a unit, evicted whole",
			nodes: []fwk.NodeInfo{cpuNode("n0", "4", running("lo-a", "lo", "n0", "4", 0)), cpuNode("n1", "4", running("lo-b", "lo", "n1", "4", 0))},
			gang:  highGang(1, "4"), leaving: planLeaving("lo-a"),
			want: planOutcome{Fits: true, Units: 1, Victims: []string{"lo-a", "lo-b"}, Gangs: []string{"ns/lo"}, Assignment: []string{"hi-0@n0"}}},
		{name: "a gang with every member leaving frees its room: nothing to evict",
			nodes: []fwk.NodeInfo{cpuNode("n0", "4", running("lo-a", "lo", "n0", "4", 0)), cpuNode("n1", "4", running("lo-b", "lo", "n1", "4", 0))},
			gang:  highGang(2, "4"), leaving: planLeaving("lo-a", "lo-b"),
			want: planOutcome{Fits: true}},
		{name: "every missing member is assigned a node with room",
			nodes: []fwk.NodeInfo{cpuNode("n0", "4", running("lo", "", "n0", "4", 0)), cpuNode("n1", "4", running("x", "", "n1", "2", 1000))},
			gang:  highGang(3, "2"),
			want:  planOutcome{Fits: true, Units: 1, Victims: []string{"lo"}, Gangs: []string{}, Singles: 1, Assignment: []string{"hi-0@n0", "hi-1@n0", "hi-2@n1"}}},
		{name: "required rack: the victim that frees a whole rack", nodes: oneEach(), gang: highGang(2, "4"), policy: Policy{Required: rackKey},
			want: planOutcome{Fits: true, Units: 2, Victims: []string{"p2"}, Gangs: []string{}, Singles: 1, Assignment: []string{"hi-0@b0", "hi-1@b1"}}},
		{name: "the same nodes without a policy: nothing to evict", nodes: oneEach(), gang: highGang(2, "4"),
			want: planOutcome{Fits: true, Units: 2}},
		{name: "the same nodes with a preferred rack: a preference evicts nothing", nodes: oneEach(), gang: highGang(2, "4"), policy: Policy{Preferred: []string{rackKey}},
			want: planOutcome{Fits: true, Units: 2}},
		{name: "bound members pin the required rack: its pod goes, though the other rack is cheaper to free", nodes: oneEach(), gang: highGang(2, "4"),
			policy: Policy{Required: rackKey}, pinned: map[string]string{rackKey: "r1"},
			want: planOutcome{Fits: true, Units: 2, Victims: []string{"p1"}, Gangs: []string{}, Singles: 1, Assignment: []string{"hi-0@a0", "hi-1@a1"}}},
		{name: "required rack: a gang across racks goes whole, the more important pod stays",
			nodes: racks(running("lo-a", "lo", "a1", "4", 0), running("q", "", "b0", "4", 10), running("lo-b", "lo", "b1", "4", 0)),
			gang:  highGang(2, "4"), policy: Policy{Required: rackKey},
			want: planOutcome{Fits: true, Units: 2, Victims: []string{"lo-a", "lo-b"}, Gangs: []string{"ns/lo"}, Assignment: []string{"hi-0@a0", "hi-1@a1"}}},
		{name: "required rack: no rack holds the gang even emptied", nodes: oneEach(), gang: highGang(3, "4"), policy: Policy{Required: rackKey},
			want: planOutcome{Units: 2}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := New(logger, "ns/hi", tc.gang, len(tc.gang), tc.nodes, nil, nil, nil, false)
			got := PlanPreemption(f, tc.nodes, tc.policy, tc.pinned, 100, "ns/hi", tc.leaving, tc.pdbs)
			if diff := cmp.Diff(tc.want, outcomeOf(got)); diff != "" {
				t.Errorf("plan (-want,+got):\n%s", diff)
			}
		})
	}
}

// unitLabel is a unit of eviction as "gang:<name>(<pods>)/<priority>" or "<pod>/<priority>".
func unitLabel(v preemption.Victim) string {
	p := v.Pods()[0].GetPod()
	if name, ok := podgroup.Of(p); ok && v.IsGroup() {
		return fmt.Sprintf("gang:%s(%d)/%d", name, len(v.Pods()), v.Priority())
	}
	return fmt.Sprintf("%s/%d", p.Name, v.Priority())
}

func TestGangIndexUnitsRows(t *testing.T) {
	nodes := []fwk.NodeInfo{
		cpuNode("n0", "16", running("g1-a", "g1", "n0", "1", 0), running("g2-a", "g2", "n0", "1", 0), running("solo", "", "n0", "1", 0),
			running("solo-hi", "", "n0", "1", 100), running("own-a", "own", "n0", "1", 0), running("mix-a", "mix", "n0", "1", 0)),
		cpuNode("n1", "16", running("g1-b", "g1", "n1", "1", 0), running("g1-c", "g1", "n1", "1", 20), running("g2-b", "g2", "n1", "1", 0),
			running("mix-b", "mix", "n1", "1", 100)),
	}
	idx := BuildGangIndex(nodes)
	infos := map[string]fwk.PodInfo{}
	for _, ni := range nodes {
		for _, pi := range ni.GetPods() {
			infos[pi.GetPod().Name] = pi
		}
	}
	ghost, _ := framework.NewPodInfo(running("ghost", "ghost", "n9", "1", 0))
	infos["ghost"] = ghost
	pods := func(names ...string) []*preemption.DomainVictim {
		var out []*preemption.DomainVictim
		for _, n := range names {
			out = append(out, &preemption.DomainVictim{Victim: preemption.NewPodVictim(infos[n], nil, nil)})
		}
		return out
	}
	group := func(prio int32, names ...string) *preemption.DomainVictim {
		var ps []fwk.PodInfo
		for _, n := range names {
			ps = append(ps, infos[n])
		}
		v, _ := preemption.NewVictim(ps, prio, fwk.PodGroupKeyType)
		return &preemption.DomainVictim{Victim: v}
	}
	preemptor := func(ns, group string, prio int32) *v1.Pod {
		b := st.MakePod().Namespace(ns).Name("p").UID("p").Priority(prio)
		if group != "" {
			b = b.Label(v1alpha1.PodGroupLabel, group)
		}
		return b.Obj()
	}
	cases := []struct {
		name      string
		possible  []*preemption.DomainVictim
		preemptor *v1.Pod
		want      []string
	}{
		{name: "a gang member becomes its whole gang, once, at its highest member's priority", possible: pods("g1-a", "g1-b", "g1-c"),
			preemptor: preemptor("ns", "", 100), want: []string{"gang:g1(3)/20"}},
		{name: "a gang whose highest member has the preemptor's priority is no unit", possible: pods("g1-b", "solo"),
			preemptor: preemptor("ns", "", 20), want: []string{"solo/0"}},
		{name: "one priority more and it is", possible: pods("g1-b", "solo"),
			preemptor: preemptor("ns", "", 21), want: []string{"gang:g1(3)/20", "solo/0"}},
		{name: "a gang with a member of the preemptor's priority is no unit, from either member", possible: pods("mix-a", "mix-b"),
			preemptor: preemptor("ns", "", 100), want: nil},
		{name: "the preemptor's own gang is skipped", possible: pods("own-a", "g2-a", "solo"),
			preemptor: preemptor("ns", "own", 100), want: []string{"gang:g2(2)/0", "solo/0"}},
		{name: "a gang of the same name in another namespace is not the preemptor's", possible: pods("own-a"),
			preemptor: preemptor("other", "own", 100), want: []string{"gang:own(1)/0"}},
		{name: "plain pods are kept below the preemptor's priority only", possible: pods("solo-hi", "solo"),
			preemptor: preemptor("ns", "", 100), want: []string{"solo/0"}},
		{name: "plain pods of any lower priority", possible: pods("solo-hi", "solo"),
			preemptor: preemptor("ns", "", 101), want: []string{"solo-hi/100", "solo/0"}},
		{name: "a member of a gang the index does not hold stands alone", possible: pods("ghost"),
			preemptor: preemptor("ns", "", 100), want: []string{"ghost/0"}},
		{name: "a group upstream formed is kept as it is, below the preemptor's priority", possible: []*preemption.DomainVictim{group(0, "g2-a", "g2-b"), group(100, "g1-a", "g1-b")},
			preemptor: preemptor("ns", "", 100), want: []string{"gang:g2(2)/0"}},
		{name: "nothing possible", preemptor: preemptor("ns", "", 100), want: nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var got []string
			for _, u := range idx.Units(tc.possible, tc.preemptor) {
				got = append(got, unitLabel(u))
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("units (-want,+got):\n%s", diff)
			}
		})
	}
}

func TestBuildGangIndex(t *testing.T) {
	inNS := func(p *v1.Pod, ns string) *v1.Pod { p.Namespace = ns; return p }
	unlabelled := running("blank", "", "n1", "1", 0)
	unlabelled.Labels = map[string]string{v1alpha1.PodGroupLabel: ""}
	nodes := []fwk.NodeInfo{
		cpuNode("n0", "16", running("g1-a", "g1", "n0", "1", 0), running("solo", "", "n0", "1", 50), running("g2-a", "g2", "n0", "1", 5),
			inNS(running("x", "g1", "n0", "1", 0), "other")),
		cpuNode("n1", "16", running("g1-b", "g1", "n1", "1", 30), running("g2-b", "g2", "n1", "1", 5), unlabelled),
		cpuNode("n2", "16"),
	}
	type entry struct {
		Priority int32
		Pods     []string
		Group    bool
	}
	summarize := func(idx GangIndex) map[string]entry {
		out := map[string]entry{}
		for k, v := range idx {
			e := entry{Priority: v.Priority(), Group: v.IsGroup() && v.Type() == fwk.PodGroupKeyType}
			for _, pi := range v.Pods() {
				e.Pods = append(e.Pods, pi.GetPod().Name)
			}
			out[k] = e
		}
		return out
	}
	cases := []struct {
		name  string
		nodes []fwk.NodeInfo
		want  map[string]entry
	}{
		{name: "gangs by namespace and name, members in snapshot order, the highest member's priority", nodes: nodes,
			want: map[string]entry{
				"ns/g1":    {Priority: 30, Pods: []string{"g1-a", "g1-b"}, Group: true},
				"ns/g2":    {Priority: 5, Pods: []string{"g2-a", "g2-b"}, Group: true},
				"other/g1": {Priority: 0, Pods: []string{"x"}, Group: true},
			}},
		{name: "no gang members", nodes: []fwk.NodeInfo{cpuNode("n0", "4", running("solo", "", "n0", "1", 0))}, want: map[string]entry{}},
		{name: "no nodes", want: map[string]entry{}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, summarize(BuildGangIndex(tc.nodes))); diff != "" {
				t.Errorf("index (-want,+got):\n%s", diff)
			}
		})
	}
}

func TestReprieve(t *testing.T) {
	type unit struct {
		name  string
		prio  int32
		pods  int // more than one: a gang
		frees int // CPUs freed when evicted
		app   string
	}
	cases := []struct {
		name           string
		units          []unit
		need           int // CPUs the preemptor needs freed
		pdbs           []*policy.PodDisruptionBudget
		failAt         int // the put call that fails (1-based), 0: none
		want           []string
		wantViolations int
		wantErr        bool
	}{
		{name: "the most important are put back first", need: 2,
			units: []unit{{name: "C", prio: 1, frees: 2}, {name: "A", prio: 10, frees: 2}, {name: "B", prio: 5, frees: 2}}, want: []string{"C"}},
		{name: "a budget-violating unit is put back before a more important one", need: 2, pdbs: []*policy.PodDisruptionBudget{planBudget("db", 0)},
			units: []unit{{name: "A", prio: 1, frees: 2, app: "db"}, {name: "B", prio: 10, frees: 2}}, want: []string{"B"}},
		{name: "the same units without the budget", need: 2,
			units: []unit{{name: "A", prio: 1, frees: 2, app: "db"}, {name: "B", prio: 10, frees: 2}}, want: []string{"A"}},
		{name: "a violating gang kept evicted counts each violating member", need: 4, pdbs: []*policy.PodDisruptionBudget{planBudget("db", 0)},
			units: []unit{{name: "A", prio: 1, pods: 2, frees: 4, app: "db"}, {name: "B", prio: 10, frees: 1}}, want: []string{"A"}, wantViolations: 2},
		{name: "the result is sorted most important first, violating or not", need: 4, pdbs: []*policy.PodDisruptionBudget{planBudget("db", 0)},
			units: []unit{{name: "A", prio: 1, frees: 2, app: "db"}, {name: "B", prio: 10, frees: 2}}, want: []string{"B", "A"}, wantViolations: 1},
		{name: "a gang is more important than a pod of its priority", need: 2,
			units: []unit{{name: "P", prio: 3, frees: 2}, {name: "G", prio: 3, pods: 2, frees: 2}}, want: []string{"P"}},
		{name: "minimal: each victim is needed", need: 5,
			units: []unit{{name: "A", prio: 3, frees: 3}, {name: "B", prio: 2, frees: 3}, {name: "C", prio: 1, frees: 2}}, want: []string{"B", "C"}},
		{name: "nothing needed: every unit is put back", need: 0,
			units: []unit{{name: "A", prio: 3, frees: 3}, {name: "B", prio: 2, frees: 3}}, want: nil},
		{name: "no units", need: 0, want: nil},
		{name: "an error from put is returned", need: 2, failAt: 2,
			units: []unit{{name: "A", prio: 3, frees: 3}, {name: "B", prio: 2, frees: 3}}, wantErr: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var units []preemption.Victim
			names := map[preemption.Victim]string{}
			frees := map[preemption.Victim]int{}
			for _, u := range tc.units {
				var infos []fwk.PodInfo
				group := ""
				if u.pods > 1 {
					group = u.name
				}
				for i := range max(u.pods, 1) {
					p := running(fmt.Sprintf("%s-%d", u.name, i), group, "n0", "1", u.prio)
					if u.app != "" {
						planApp(p, u.app)
					}
					pi, _ := framework.NewPodInfo(p)
					infos = append(infos, pi)
				}
				kind := fwk.PodKeyType
				if u.pods > 1 {
					kind = fwk.PodGroupKeyType
				}
				v, _ := preemption.NewVictim(infos, u.prio, kind)
				units, names[v], frees[v] = append(units, v), u.name, u.frees
			}
			evicted := map[preemption.Victim]bool{}
			freed := 0
			for _, v := range units {
				evicted[v], freed = true, freed+frees[v]
			}
			calls := 0
			put := func(v preemption.Victim, back bool) (bool, error) {
				if calls++; calls == tc.failAt {
					return false, errors.New("boom")
				}
				if back == !evicted[v] {
					t.Fatalf("put(%s, %v) twice", names[v], back)
				}
				evicted[v] = !back
				if back {
					freed -= frees[v]
				} else {
					freed += frees[v]
				}
				return back && freed >= tc.need, nil
			}
			victims, violations, err := Reprieve(units, tc.pdbs, put)
			if (err != nil) != tc.wantErr {
				t.Fatalf("error %v, want one: %v", err, tc.wantErr)
			}
			if tc.wantErr {
				if victims != nil || violations != 0 {
					t.Errorf("on error: victims %v, violations %d, want none", victims, violations)
				}
				return
			}
			var got []string
			for _, v := range victims {
				got = append(got, names[v])
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("victims (-want,+got):\n%s", diff)
			}
			if violations != tc.wantViolations {
				t.Errorf("violations = %d, want %d", violations, tc.wantViolations)
			}
			// What stays evicted is exactly the victims, enough, and none of them could be spared.
			var still []string
			for v, e := range evicted {
				if e {
					still = append(still, names[v])
				}
			}
			sort.Strings(still)
			sorted := append([]string(nil), got...)
			sort.Strings(sorted)
			if diff := cmp.Diff(sorted, still); diff != "" {
				t.Errorf("left evicted vs victims (-victims,+evicted):\n%s", diff)
			}
			if freed < tc.need {
				t.Errorf("the victims free %d, want at least %d", freed, tc.need)
			}
			for _, v := range victims {
				if freed-frees[v] >= tc.need {
					t.Errorf("victim %s could have been spared", names[v])
				}
			}
		})
	}
}

func TestAnyPodBelowRows(t *testing.T) {
	noPrio := running("none", "", "n0", "1", 0)
	noPrio.Spec.Priority = nil
	cases := []struct {
		name  string
		nodes []fwk.NodeInfo
		prio  int32
		want  bool
	}{
		{name: "no nodes", prio: 1000, want: false},
		{name: "nodes without pods", nodes: []fwk.NodeInfo{cpuNode("n0", "4"), cpuNode("n1", "4")}, prio: 1000, want: false},
		{name: "a pod without a priority is at 0: below 1", nodes: []fwk.NodeInfo{cpuNode("n0", "4", noPrio)}, prio: 1, want: true},
		{name: "a pod without a priority is not below 0", nodes: []fwk.NodeInfo{cpuNode("n0", "4", noPrio)}, prio: 0, want: false},
		{name: "a negative priority is below 0", nodes: []fwk.NodeInfo{cpuNode("n0", "4", running("neg", "", "n0", "1", -5))}, prio: 0, want: true},
		{name: "only the last node's last pod is lower",
			nodes: []fwk.NodeInfo{cpuNode("n0", "4", running("a", "", "n0", "1", 200)), cpuNode("n1", "4", running("b", "", "n1", "1", 100), running("c", "", "n1", "1", 99))},
			prio:  100, want: true},
		{name: "all equal or higher", nodes: []fwk.NodeInfo{cpuNode("n0", "4", running("a", "", "n0", "1", 200), running("b", "g", "n0", "1", 100))},
			prio: 100, want: false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := AnyPodBelow(tc.nodes, tc.prio); got != tc.want {
				t.Errorf("AnyPodBelow(%d) = %v, want %v", tc.prio, got, tc.want)
			}
		})
	}
}

// TestPlanPreemptionRandomized checks PlanPreemption's promises over random clusters (racks,
// gangs and pods of priorities around the preemptor's, some pods leaving, a budget), recomputing
// free capacity from the NodeInfos without Fit: with victims, the assignment fits once they (and the
// leaving units) are gone, each victim is of lower priority and its gang whole, and none could be
// spared; without, the gang fits as it is; when it does not fit, it would not even with every
// lower-priority pod evicted. SEED=<n> replays a run.
func TestPlanPreemptionRandomized(t *testing.T) {
	seed := time.Now().UnixNano()
	if s := os.Getenv("SEED"); s != "" {
		var err error
		if seed, err = strconv.ParseInt(s, 10, 64); err != nil {
			t.Fatalf("SEED: %v", err)
		}
	}
	t.Logf("SEED=%d", seed)
	logger, _ := ktesting.NewTestContext(t)
	rng := rand.New(rand.NewSource(seed))
	policies := []Policy{{}, {Required: rackKey}, {Preferred: []string{rackKey}}}
	cpuOf := func(p *v1.Pod) int64 {
		var m int64
		for _, c := range p.Spec.Containers {
			m += c.Resources.Requests.Cpu().MilliValue()
		}
		return m
	}
	var noFit, noVictims, withVictims, inRack int
	defer func() {
		t.Logf("%d rounds without a fit, %d fitting as they are, %d with victims (%d in a required rack)", noFit, noVictims, withVictims, inRack)
	}()
	for round := range 300 {
		fail := func(format string, args ...any) {
			t.Helper()
			t.Fatalf("SEED=%d round %d: %s", seed, round, fmt.Sprintf(format, args...))
		}
		nodes, byGang := randomCluster(rng)
		nRacks := 1 + rng.Intn(3)
		for _, ni := range nodes {
			if rng.Intn(6) > 0 { // some nodes in no rack
				ni.Node().Labels = map[string]string{rackKey: fmt.Sprintf("r%d", rng.Intn(nRacks))}
			}
		}
		leavingSet := map[*v1.Pod]bool{}
		var pdbs []*policy.PodDisruptionBudget
		for _, ni := range nodes {
			for _, pi := range ni.GetPods() {
				if rng.Intn(8) == 0 {
					leavingSet[pi.GetPod()] = true
				}
				if rng.Intn(4) == 0 {
					planApp(pi.GetPod(), "db")
				}
			}
		}
		if rng.Intn(2) == 0 {
			pdbs = []*policy.PodDisruptionBudget{planBudget("db", int32(rng.Intn(3)))}
		}
		leaving := func(p *v1.Pod) bool { return leavingSet[p] }
		pol := policies[rng.Intn(len(policies))]
		gang := highGang(1+rng.Intn(5), strconv.Itoa(1+rng.Intn(4)))
		need, memberCPU := len(gang), cpuOf(gang[0])

		// Units of eviction as the plan must see them: plain pods below 100, gangs without a member at 100 or more.
		evictable := func(p *v1.Pod) bool {
			if _, ok := podgroup.Of(p); ok {
				return !gangHasHigh(byGang, p)
			}
			return *p.Spec.Priority < 100
		}
		// A unit whose pods are all leaving is gone already.
		gone := func(p *v1.Pod) bool {
			if !evictable(p) {
				return false
			}
			if name, ok := podgroup.Of(p); ok {
				for _, m := range byGang[name] {
					if !leavingSet[m] {
						return false
					}
				}
				return true
			}
			return leavingSet[p]
		}
		// freeWithout is each node's free CPU and pod slots with the pods for which out is true gone.
		type room struct{ cpu, slots int64 }
		freeWithout := func(out func(*v1.Pod) bool) map[string]room {
			free := map[string]room{}
			for _, ni := range nodes {
				n := ni.Node()
				r := room{cpu: n.Status.Allocatable.Cpu().MilliValue(), slots: n.Status.Allocatable.Pods().Value()}
				for _, pi := range ni.GetPods() {
					if p := pi.GetPod(); !out(p) {
						r.cpu -= cpuOf(p)
						r.slots--
					}
				}
				free[n.Name] = r
			}
			return free
		}
		// fitsIn counts, per domain of the required key (or the whole cluster), the members that fit.
		fitsIn := func(free map[string]room) bool {
			count := map[string]int64{}
			for _, ni := range nodes {
				n := ni.Node()
				dom := ""
				if pol.Required != "" {
					v, ok := n.Labels[pol.Required]
					if !ok {
						continue
					}
					dom = v
				}
				r := free[n.Name]
				count[dom] += max(0, min(r.cpu/memberCPU, r.slots))
			}
			for _, c := range count {
				if c >= int64(need) {
					return true
				}
			}
			return false
		}

		f := New(logger, "ns/hi", gang, need, nodes, nil, nil, nil, false)
		plan := PlanPreemption(f, nodes, pol, nil, 100, "ns/hi", leaving, pdbs)

		if !plan.Fits {
			if len(plan.Victims) > 0 || len(plan.Assignment) > 0 {
				fail("no fit, yet victims %d and assignment %d", len(plan.Victims), len(plan.Assignment))
			}
			var bare []fwk.NodeInfo
			for _, ni := range nodes {
				var keep []*v1.Pod
				for _, pi := range ni.GetPods() {
					if p := pi.GetPod(); !evictable(p) {
						keep = append(keep, p)
					}
				}
				n := framework.NewNodeInfo(keep...)
				n.SetNode(ni.Node())
				bare = append(bare, n)
			}
			f2 := New(logger, "ns/hi", gang, need, bare, nil, nil, nil, false)
			fitsBare := f2.placeable(nil) >= need
			if pol.Required != "" {
				_, fitsBare = ChoosePlacement(f2, pol, nil, nil)
			}
			if fitsBare {
				fail("no fit (policy %+v), but the gang fits with every lower-priority pod evicted", pol)
			}
			if fitsIn(freeWithout(evictable)) {
				fail("no fit (policy %+v), but the recount fits the gang with every lower-priority pod evicted", pol)
			}
			noFit++
			continue
		}
		if len(plan.Victims) == 0 {
			if plan.Assignment != nil || plan.Gangs != nil || plan.Singles != 0 || plan.Violations != 0 {
				fail("no victims, yet %+v", plan)
			}
			if !fitsIn(freeWithout(gone)) {
				fail("fits without victims (policy %+v), but the recount does not fit the gang", pol)
			}
			noVictims++
			continue
		}

		victims := map[*v1.Pod]bool{}
		gangs, singles, inBudget := sets.New[string](), 0, 0
		for _, p := range plan.Victims {
			if victims[p] {
				fail("victim %s listed twice", p.Name)
			}
			victims[p] = true
			if *p.Spec.Priority >= 100 {
				fail("victim %s has priority %d", p.Name, *p.Spec.Priority)
			}
			if gone(p) {
				fail("victim %s is of a unit already leaving", p.Name)
			}
			if p.Labels["app"] == "db" {
				inBudget++
			}
			if name, ok := podgroup.Of(p); ok {
				gangs.Insert(podgroup.Key(p.Namespace, name))
			} else {
				singles++
			}
		}
		for key := range gangs {
			name := key[len("ns/"):]
			if gangHasHigh(byGang, byGang[name][0]) {
				fail("victim gang %s has a member of priority 100 or more", name)
			}
			for _, m := range byGang[name] {
				if !victims[m] {
					fail("victim gang %s evicted without its member %s", name, m.Name)
				}
			}
		}
		if diff := cmp.Diff(sets.List(gangs), plan.Gangs); diff != "" {
			fail("Gangs (-victims' gangs,+plan):\n%s", diff)
		}
		if singles != plan.Singles || plan.Violations > inBudget || (len(pdbs) == 0 && plan.Violations != 0) {
			fail("singles %d (plan %d), violations %d of %d pods under a budget (%d budgets)", singles, plan.Singles, plan.Violations, inBudget, len(pdbs))
		}

		withVictims++
		if pol.Required != "" {
			inRack++
		}
		out := func(p *v1.Pod) bool { return victims[p] || gone(p) }
		free := freeWithout(out)
		if len(plan.Assignment) != need {
			fail("assignment of %d members, want %d", len(plan.Assignment), need)
		}
		placed, domain := sets.New[string](), ""
		for i, a := range plan.Assignment {
			if placed.Has(a.Pod.Name) {
				fail("member %s assigned twice", a.Pod.Name)
			}
			placed.Insert(a.Pod.Name)
			r, ok := free[a.Node]
			if !ok {
				fail("member %s assigned to unknown node %s", a.Pod.Name, a.Node)
			}
			r.cpu, r.slots = r.cpu-cpuOf(a.Pod), r.slots-1
			if r.cpu < 0 || r.slots < 0 {
				fail("node %s over-committed by the assignment (%dm, %d slots left)", a.Node, r.cpu, r.slots)
			}
			free[a.Node] = r
			if pol.Required != "" {
				var n *v1.Node
				for _, ni := range nodes {
					if ni.Node().Name == a.Node {
						n = ni.Node()
					}
				}
				v, has := n.Labels[pol.Required]
				if !has || (i > 0 && v != domain) {
					fail("member %s on %s, outside the rack %q of the others", a.Pod.Name, a.Node, domain)
				}
				domain = v
			}
		}
		// No victim unit could have been spared.
		for _, p := range plan.Victims {
			unit := func(q *v1.Pod) bool { return q == p }
			if name, ok := podgroup.Of(p); ok {
				unit = func(q *v1.Pod) bool { n, ok := podgroup.Of(q); return ok && n == name }
			}
			if fitsIn(freeWithout(func(q *v1.Pod) bool { return out(q) && !unit(q) })) {
				fail("victim %s (policy %+v) could have been spared", p.Name, pol)
			}
		}
	}
}
