package gang

import (
	"slices"
	"sort"
	"testing"

	v1 "k8s.io/api/core/v1"
	policy "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/utils/ptr"

	"github.com/custom-scheduler/custom-scheduler/pkg/coscheduling/gangfit"
	"github.com/custom-scheduler/custom-scheduler/pkg/coscheduling/internal/gangtest"
)

func partsMember(name, group, cpu string) *v1.Pod {
	p := gangtest.Member(name, group, cpu)
	p.Spec.Priority = ptr.To[int32](100)
	return p
}

func partsIn(job *JobPreemption, nodes []fwk.NodeInfo, pdbs []*policy.PodDisruptionBudget) PreemptIn {
	pod := job.Groups[0].Candidates[0]
	return PreemptIn{Pod: pod, PodGroup: gangtest.PodGroup("ns", "a", 1, t0), Members: nil, Nodes: nodes, Job: job,
		Fit: &gangfit.Shared{}, Logger: klog.Background(),
		Terminating: func([]string, int32) int { return 0 },
		Claims:      func() []*v1.Pod { return nil },
		PDBs:        func() ([]*policy.PodDisruptionBudget, error) { return pdbs, nil }}
}

func partsVictims(out PreemptOut) []string {
	var v []string
	for _, p := range out.Plan.Victims {
		v = append(v, p.Name)
	}
	sort.Strings(v)
	return v
}

func twoReplicaJob(outerValue string) *JobPreemption {
	a := []gangfit.Group{{Key: "ns/a", Candidates: []*v1.Pod{partsMember("a0", "a", "4")}, Need: 1}}
	b := []gangfit.Group{{Key: "ns/b", Candidates: []*v1.Pod{partsMember("b0", "b", "4")}, Need: 1}}
	return &JobPreemption{Job: "ns/job", Unit: "ns/job", Groups: append(append([]gangfit.Group{}, a...), b...),
		Outer: &TreeDomain{Composite: "ns/job", Key: gangtest.BlockKey, Value: outerValue},
		Parts: []JobPart{{Chain: []*TreeDomain{{Composite: "ns/rep0", Key: gangtest.RackKey}}, Groups: a},
			{Chain: []*TreeDomain{{Composite: "ns/rep1", Key: gangtest.RackKey}}, Groups: b}}}
}

// TestPartsCountBudgetsTogether: the parts' victims are counted against the PodDisruptionBudgets
// together: two victims in two racks under one budget allowing 1 disruption violate it once, so the
// block whose plan violates none (four pods) is chosen over theirs (two).
func TestPartsCountBudgetsTogether(t *testing.T) {
	low := func(name, node, cpu string, labels map[string]string) *v1.Pod {
		p := gangtest.Running(name, "", node, cpu, 10)
		p.Labels = labels
		return p
	}
	db := map[string]string{"app": "db"}
	nodes := []fwk.NodeInfo{
		// b1: one PDB-covered pod per rack.
		gangtest.RackedNode("r1-0", "", "b1", "r1", low("x", "r1-0", "4", db)),
		gangtest.RackedNode("r2-0", "", "b1", "r2", low("y", "r2-0", "4", db)),
		// b2: two uncovered pods per rack.
		gangtest.RackedNode("r3-0", "", "b2", "r3", low("u1", "r3-0", "2", nil), low("u2", "r3-0", "2", nil)),
		gangtest.RackedNode("r4-0", "", "b2", "r4", low("v1", "r4-0", "2", nil), low("v2", "r4-0", "2", nil)),
	}
	pdb := &policy.PodDisruptionBudget{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "db"},
		Spec:   policy.PodDisruptionBudgetSpec{Selector: &metav1.LabelSelector{MatchLabels: db}},
		Status: policy.PodDisruptionBudgetStatus{DisruptionsAllowed: 1}}
	out := Preempt(partsIn(twoReplicaJob(""), nodes, []*policy.PodDisruptionBudget{pdb}))
	t.Logf("result %s victims %v violations %d", out.Result, partsVictims(out), out.Plan.Violations)
	if v := partsVictims(out); len(v) == 2 && v[0] == "x" {
		t.Errorf("evicts x and y (1 PDB violation, counted %d) although b2 (u1,u2,v1,v2) violates none", out.Plan.Violations)
	}
}

// TestPartsTryEveryOrder: part a, searched first, would take the rack part b needs; the job fits (a on
// the free node of the rack a higher pod holds, b in x's rack, x evicted), and every order of the
// parts is tried, whichever rack comes first by name.
func TestPartsTryEveryOrder(t *testing.T) {
	low := func(name, node, cpu string) *v1.Pod { return gangtest.Running(name, "", node, cpu, 10) }
	high := func(name, node, cpu string) *v1.Pod { return gangtest.Running(name, "", node, cpu, 200) }
	a := []gangfit.Group{{Key: "ns/a", Candidates: []*v1.Pod{partsMember("a0", "a", "2")}, Need: 1}}
	b := []gangfit.Group{{Key: "ns/b", Candidates: []*v1.Pod{partsMember("b0", "b", "4"), partsMember("b1", "b", "4")}, Need: 2}}
	job := &JobPreemption{Job: "ns/job", Unit: "ns/job", Groups: append(append([]gangfit.Group{}, a...), b...),
		Parts: []JobPart{{Chain: []*TreeDomain{{Composite: "ns/rep0", Key: gangtest.RackKey}}, Groups: a},
			{Chain: []*TreeDomain{{Composite: "ns/rep1", Key: gangtest.RackKey}}, Groups: b}}}
	for _, swap := range []bool{false, true} {
		r1, r2 := "r1", "r2"
		if swap {
			r1, r2 = r2, r1
		}
		nodes := []fwk.NodeInfo{
			gangtest.RackedNode(r1+"-0", "", "", r1), gangtest.RackedNode(r1+"-1", "", "", r1, low("x", r1+"-1", "4")),
			gangtest.RackedNode(r2+"-0", "", "", r2, high("h", r2+"-0", "4")), gangtest.RackedNode(r2+"-1", "", "", r2),
		}
		out := Preempt(partsIn(job, nodes, nil))
		t.Logf("swap=%v: result %s hopeless %v victims %v msg %q", swap, out.Result, out.Hopeless, partsVictims(out), out.Message)
		if out.Result != PreemptVictims {
			t.Errorf("swap=%v: want victims [x] (a on the free node of the high rack, b in x's rack), got %s hopeless=%v", swap, out.Result, out.Hopeless)
		}
	}
}

// TestPartsEvictVictimGangsWhole: a victim gang with members in two blocks is evicted whole, though
// the parts are searched in one block.
func TestPartsEvictVictimGangsWhole(t *testing.T) {
	vg := func(name, node string) *v1.Pod { return gangtest.Running(name, "v", node, "4", 10) }
	nodes := []fwk.NodeInfo{
		gangtest.RackedNode("r1-0", "", "b1", "r1", vg("v0", "r1-0")),
		gangtest.RackedNode("r2-0", "", "b1", "r2"),
		gangtest.RackedNode("r3-0", "", "b2", "r3", vg("v1", "r3-0")),
		gangtest.RackedNode("r4-0", "", "b2", "r4", gangtest.Running("h", "", "r4-0", "4", 200)),
	}
	out := Preempt(partsIn(twoReplicaJob(""), nodes, nil))
	t.Logf("result %s victims %v gangs %v", out.Result, partsVictims(out), out.Plan.Gangs)
	if v := partsVictims(out); len(v) != 2 {
		t.Errorf("victim gang ns/v is evicted in part: victims %v, want v0 and v1 (its whole gang)", v)
	}
}

// TestPartsPinTheirSharedDomain: two replicas under a pair that requires one block (not placed yet),
// each requiring a rack. Block b1 has a rack for one replica only, with the lowest pod (its other
// rack is held by a higher-priority pod); b2 has a rack for each, each with two low pods. The parts
// are placed in one block: b2, its four pods the victims. Searched with the pair free, the replicas
// went to r1 (b1, the cheapest victim) and r4 (b2): the pair's block split.
func TestPartsPinTheirSharedDomain(t *testing.T) {
	low := func(name, node, cpu string) *v1.Pod { return gangtest.Running(name, "", node, cpu, 10) }
	high := func(name, node string) *v1.Pod { return gangtest.Running(name, "", node, "4", 200) }
	nodes := []fwk.NodeInfo{
		gangtest.RackedNode("r1-0", "", "b1", "r1", gangtest.Running("x", "", "r1-0", "4", 1)), gangtest.RackedNode("r2-0", "", "b1", "r2", high("h", "r2-0")),
		gangtest.RackedNode("r3-0", "", "b2", "r3", low("u1", "r3-0", "2"), low("u2", "r3-0", "2")),
		gangtest.RackedNode("r4-0", "", "b2", "r4", low("v1", "r4-0", "2"), low("v2", "r4-0", "2")),
	}
	a := []gangfit.Group{{Key: "ns/a", Candidates: []*v1.Pod{partsMember("a0", "a", "4")}, Need: 1}}
	b := []gangfit.Group{{Key: "ns/b", Candidates: []*v1.Pod{partsMember("b0", "b", "4")}, Need: 1}}
	pair := &TreeDomain{Composite: "ns/pair", Key: gangtest.BlockKey}
	job := &JobPreemption{Job: "ns/job", Unit: "ns/job", Groups: append(append([]gangfit.Group{}, a...), b...),
		Parts: []JobPart{{Chain: []*TreeDomain{pair, {Composite: "ns/rep0", Key: gangtest.RackKey}}, Groups: a},
			{Chain: []*TreeDomain{pair, {Composite: "ns/rep1", Key: gangtest.RackKey}}, Groups: b}}}
	out := Preempt(partsIn(job, nodes, nil))
	if v := partsVictims(out); out.Result != PreemptVictims || !slices.Equal(v, []string{"u1", "u2", "v1", "v2"}) {
		t.Errorf("result %s, victims %v (%s); want u1, u2, v1 and v2: both replicas in b2", out.Result, v, out.Message)
	}
}
