package gangfit

import (
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/klog/v2/ktesting"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework"
	st "k8s.io/kubernetes/pkg/scheduler/testing"
)

// elNode is a 4-CPU node with labels, cordoned or not, and taints.
func elNode(name string, labels map[string]string, unschedulable bool, taints ...v1.Taint) *framework.NodeInfo {
	ni := node(name, "4")
	n := ni.Node().DeepCopy()
	n.Labels, n.Spec.Unschedulable, n.Spec.Taints = labels, unschedulable, taints
	ni.SetNode(n)
	return ni
}

// elPod is member name of PodGroup "g" requesting cpu, changed by edit.
func elPod(name, cpu string, edit func(p *v1.Pod)) *v1.Pod {
	p := member(name, "g", cpu)
	if edit != nil {
		edit(p)
	}
	return p
}

func elSelector(sel map[string]string) func(*v1.Pod) {
	return func(p *v1.Pod) { p.Spec.NodeSelector = sel }
}

func elTolerations(ts ...v1.Toleration) func(*v1.Pod) {
	return func(p *v1.Pod) { p.Spec.Tolerations = ts }
}

func elFree(nodes []fwk.NodeInfo) []freeNode {
	out := make([]freeNode, len(nodes))
	for i, ni := range nodes {
		out[i] = nodeFree(ni, nil, nil)
	}
	return out
}

func TestEligibleNodes(t *testing.T) {
	logger, _ := ktesting.NewTestContext(t)
	nodes := elFree([]fwk.NodeInfo{
		elNode("plain", map[string]string{"zone": "a"}, false),
		elNode("cordoned", map[string]string{"zone": "a"}, true),
		elNode("noschedule", map[string]string{"zone": "b"}, false, v1.Taint{Key: "dedicated", Value: "gpu", Effect: v1.TaintEffectNoSchedule}),
		elNode("noexecute", map[string]string{"zone": "b"}, false, v1.Taint{Key: "maintenance", Effect: v1.TaintEffectNoExecute}),
		elNode("prefer", map[string]string{"zone": "c"}, false, v1.Taint{Key: "spot", Effect: v1.TaintEffectPreferNoSchedule}),
	})
	withAffinity := func(edits ...func(*v1.Pod)) func(*v1.Pod) {
		return func(p *v1.Pod) {
			for _, e := range edits {
				e(p)
			}
		}
	}
	affinity := func(p *v1.Pod) {
		p.Spec.Affinity = st.MakePod().NodeAffinityIn("zone", []string{"a", "c"}, st.NodeSelectorTypeMatchExpressions).Obj().Spec.Affinity
	}
	cases := []struct {
		name string
		edit func(*v1.Pod)
		want []bool
	}{
		{name: "no constraints: PreferNoSchedule ignored", want: []bool{true, false, false, false, true}},
		{name: "unschedulable tolerated", edit: elTolerations(v1.Toleration{Key: v1.TaintNodeUnschedulable, Operator: v1.TolerationOpExists, Effect: v1.TaintEffectNoSchedule}),
			want: []bool{true, true, false, false, true}},
		{name: "unschedulable toleration of another effect", edit: elTolerations(v1.Toleration{Key: v1.TaintNodeUnschedulable, Operator: v1.TolerationOpExists, Effect: v1.TaintEffectNoExecute}),
			want: []bool{true, false, false, false, true}},
		{name: "NoSchedule taint tolerated by key and value", edit: elTolerations(v1.Toleration{Key: "dedicated", Operator: v1.TolerationOpEqual, Value: "gpu", Effect: v1.TaintEffectNoSchedule}),
			want: []bool{true, false, true, false, true}},
		{name: "NoSchedule toleration of another value", edit: elTolerations(v1.Toleration{Key: "dedicated", Operator: v1.TolerationOpEqual, Value: "cpu", Effect: v1.TaintEffectNoSchedule}),
			want: []bool{true, false, false, false, true}},
		{name: "NoExecute taint tolerated, any effect", edit: elTolerations(v1.Toleration{Key: "maintenance", Operator: v1.TolerationOpExists}),
			want: []bool{true, false, false, true, true}},
		{name: "tolerate everything", edit: elTolerations(v1.Toleration{Operator: v1.TolerationOpExists}),
			want: []bool{true, true, true, true, true}},
		{name: "nodeSelector", edit: elSelector(map[string]string{"zone": "c"}), want: []bool{false, false, false, false, true}},
		{name: "nodeSelector of a missing label", edit: elSelector(map[string]string{"rack": "r1"}), want: []bool{false, false, false, false, false}},
		{name: "required affinity", edit: affinity, want: []bool{true, false, false, false, true}},
		{name: "required affinity with every toleration", edit: withAffinity(affinity, elTolerations(v1.Toleration{Operator: v1.TolerationOpExists})),
			want: []bool{true, true, false, false, true}},
		{name: "required affinity NotIn", edit: func(p *v1.Pod) {
			p.Spec.Affinity = st.MakePod().NodeAffinityNotIn("zone", []string{"a"}).Obj().Spec.Affinity
		}, want: []bool{false, false, false, false, true}},
		{name: "preferred affinity ignored", edit: func(p *v1.Pod) {
			p.Spec.Affinity = &v1.Affinity{NodeAffinity: &v1.NodeAffinity{PreferredDuringSchedulingIgnoredDuringExecution: []v1.PreferredSchedulingTerm{
				{Weight: 1, Preference: v1.NodeSelectorTerm{MatchExpressions: []v1.NodeSelectorRequirement{{Key: "zone", Operator: v1.NodeSelectorOpIn, Values: []string{"b"}}}}}}}}
		}, want: []bool{true, false, false, false, true}},
		{name: "nodeSelector and affinity both apply", edit: withAffinity(affinity, elSelector(map[string]string{"zone": "a"})),
			want: []bool{true, false, false, false, false}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			e := newEligibility(logger, nodes)
			p := elPod("m", "1", tc.edit)
			got := e.of(p)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("eligible nodes (-want,+got):\n%s", diff)
			}
			if again := e.of(p); &again[0] != &got[0] || len(e.classes) != 1 {
				t.Errorf("asked twice: %d classes, same slice %v", len(e.classes), &again[0] == &got[0])
			}
		})
	}
}

// TestConstraintClasses: pods with equal constraints (other objects, selectors in any map order) share
// one class and one eligibility slice; any difference sameConstraints sees makes another class, whether
// or not the hash tells them apart.
func TestConstraintClasses(t *testing.T) {
	logger, _ := ktesting.NewTestContext(t)
	secs := func(s int64) *int64 { return &s }
	tol := func(key string, op v1.TolerationOperator, value string, effect v1.TaintEffect, seconds *int64) v1.Toleration {
		return v1.Toleration{Key: key, Operator: op, Value: value, Effect: effect, TolerationSeconds: seconds}
	}
	notReady := tol(v1.TaintNodeNotReady, v1.TolerationOpExists, "", v1.TaintEffectNoExecute, secs(300))
	unreachable := tol(v1.TaintNodeUnreachable, v1.TolerationOpExists, "", v1.TaintEffectNoExecute, secs(300))
	up, down := map[string]string{}, map[string]string{}
	for i := range 20 {
		up[fmt.Sprintf("k%02d", i)] = fmt.Sprint(i)
		down[fmt.Sprintf("k%02d", 19-i)] = fmt.Sprint(19 - i)
	}
	template := elPod("a", "1", func(p *v1.Pod) {
		elSelector(map[string]string{"zone": "a"})(p)
		elTolerations(notReady, unreachable)(p)
		p.Spec.Affinity = st.MakePod().NodeAffinityIn("rack", []string{"r1", "r2"}, st.NodeSelectorTypeMatchExpressions).Obj().Spec.Affinity
	})
	variant := func(edit func(p *v1.Pod)) *v1.Pod {
		p := template.DeepCopy()
		p.Name, p.UID = "b", "b"
		edit(p)
		return p
	}
	cases := []struct {
		name         string
		a, b         *v1.Pod
		wantSame     bool
		wantSameHash bool
	}{
		{name: "copies of one template", a: template, b: variant(func(*v1.Pod) {}), wantSame: true, wantSameHash: true},
		{name: "labels and requests do not count", a: member("x", "g", "1"), b: member("y", "other", "3"), wantSame: true, wantSameHash: true},
		{name: "selectors in other map orders", a: elPod("x", "1", elSelector(up)), b: elPod("y", "1", elSelector(down)), wantSame: true, wantSameHash: true},
		{name: "nil and empty selector", a: elPod("x", "1", nil), b: elPod("y", "1", elSelector(map[string]string{})), wantSame: true, wantSameHash: true},
		{name: "selector value differs", a: template, b: variant(elSelector(map[string]string{"zone": "b"}))},
		{name: "extra selector key", a: template, b: variant(elSelector(map[string]string{"zone": "a", "rack": "r1"}))},
		{name: "equal toleration seconds in other pointers", a: template,
			b: variant(func(p *v1.Pod) { p.Spec.Tolerations[0].TolerationSeconds = secs(300) }), wantSame: true, wantSameHash: true},
		{name: "toleration seconds differ", a: template,
			b: variant(func(p *v1.Pod) { p.Spec.Tolerations[0].TolerationSeconds = secs(600) }), wantSameHash: true},
		{name: "toleration seconds unset", a: template,
			b: variant(func(p *v1.Pod) { p.Spec.Tolerations[1].TolerationSeconds = nil }), wantSameHash: true},
		{name: "operator differs", a: template,
			b: variant(func(p *v1.Pod) { p.Spec.Tolerations[0].Operator = v1.TolerationOpEqual })},
		{name: "effect differs", a: template,
			b: variant(func(p *v1.Pod) { p.Spec.Tolerations[0].Effect = v1.TaintEffectNoSchedule })},
		{name: "value differs", a: template,
			b: variant(func(p *v1.Pod) { p.Spec.Tolerations[0].Value = "x" })},
		{name: "tolerations in another order", a: template, b: variant(elTolerations(unreachable, notReady))},
		{name: "one toleration less", a: template, b: variant(elTolerations(notReady))},
		{name: "affinity values differ", a: template, wantSameHash: true,
			b: variant(func(p *v1.Pod) {
				p.Spec.Affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms[0].MatchExpressions[0].Values = []string{"r1"}
			})},
		{name: "no affinity", a: template, b: variant(func(p *v1.Pod) { p.Spec.Affinity = nil })},
		{name: "an empty affinity is none", a: elPod("x", "1", nil), b: elPod("y", "1", func(p *v1.Pod) { p.Spec.Affinity = &v1.Affinity{} }),
			wantSame: true, wantSameHash: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got, back := sameConstraints(tc.a, tc.b), sameConstraints(tc.b, tc.a); got != tc.wantSame || back != tc.wantSame {
				t.Errorf("sameConstraints = %v, reversed %v, want %v", got, back, tc.wantSame)
			}
			if got := constraintsHash(tc.a) == constraintsHash(tc.b); got != tc.wantSameHash {
				t.Errorf("equal hashes = %v, want %v", got, tc.wantSameHash)
			}
			e := newEligibility(logger, elFree([]fwk.NodeInfo{node("n", "4")}))
			ka, kb := e.key(tc.a), e.key(tc.b)
			if (ka == kb) != tc.wantSame || e.key(tc.a) != ka || e.key(tc.b) != kb {
				t.Errorf("classes %d, %d (asked again: %d, %d), want shared %v", ka, kb, e.key(tc.a), e.key(tc.b), tc.wantSame)
			}
			wantClasses := 2
			if tc.wantSame {
				wantClasses = 1
			}
			if len(e.classes) != wantClasses {
				t.Errorf("%d classes, want %d", len(e.classes), wantClasses)
			}
			if shared := &e.of(tc.a)[0] == &e.of(tc.b)[0]; shared != tc.wantSame {
				t.Errorf("eligibility slice shared = %v, want %v", shared, tc.wantSame)
			}
		})
	}
}

func TestUsableAndHomogeneous(t *testing.T) {
	logger, _ := ktesting.NewTestContext(t)
	nodes := []fwk.NodeInfo{
		elNode("a", map[string]string{"zone": "a"}, false),
		elNode("b", map[string]string{"zone": "b"}, false),
		elNode("c", map[string]string{"zone": "c"}, false, v1.Taint{Key: "dedicated", Effect: v1.TaintEffectNoSchedule}),
	}
	zone := func(z string) func(*v1.Pod) { return elSelector(map[string]string{"zone": z}) }
	tolerant := elTolerations(v1.Toleration{Key: "dedicated", Operator: v1.TolerationOpExists})
	cases := []struct {
		name            string
		members         []*v1.Pod
		want            []bool
		wantHomogeneous bool
	}{
		{name: "one template", members: []*v1.Pod{elPod("m0", "1", zone("a")), elPod("m1", "1", zone("a"))},
			want: []bool{true, false, false}, wantHomogeneous: true},
		{name: "a single member", members: []*v1.Pod{elPod("m0", "2", tolerant)}, want: []bool{true, true, true}, wantHomogeneous: true},
		{name: "selectors differ: the union", members: []*v1.Pod{elPod("m0", "1", zone("a")), elPod("m1", "1", zone("b"))},
			want: []bool{true, true, false}},
		{name: "sizes differ, one class", members: []*v1.Pod{elPod("m0", "1", nil), elPod("m1", "2", nil)}, want: []bool{true, true, false}},
		{name: "a toleration opens the tainted node", members: []*v1.Pod{elPod("m0", "1", nil), elPod("m1", "1", tolerant), elPod("m2", "1", nil)},
			want: []bool{true, true, true}},
		{name: "a memory request differs", members: []*v1.Pod{elPod("m0", "1", nil), elPod("m1", "1", func(p *v1.Pod) {
			p.Spec.Containers[0].Resources.Requests[v1.ResourceMemory] = resource.MustParse("1Gi")
		})}, want: []bool{true, true, false}},
		{name: "no node for anyone", members: []*v1.Pod{elPod("m0", "1", zone("z")), elPod("m1", "2", zone("y"))}, want: []bool{false, false, false}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := New(logger, "ns/g", tc.members, len(tc.members), nodes, nil, nil, nil, false)
			if f.homogeneous != tc.wantHomogeneous || homogeneous(f.members, f.eligible) != tc.wantHomogeneous {
				t.Errorf("homogeneous = %v, want %v", f.homogeneous, tc.wantHomogeneous)
			}
			if diff := cmp.Diff(tc.want, f.usable()); diff != "" {
				t.Errorf("usable (-want,+got):\n%s", diff)
			}
		})
	}
}

// elNames maps each member of f to the name of the node assign put it on ("" for none).
func elNames(f *Fit, out []int) map[string]string {
	m := map[string]string{}
	for i, n := range out {
		m[f.members[i].pod.Name] = ""
		if n >= 0 {
			m[f.members[i].pod.Name] = f.free[n].node.Name
		}
	}
	return m
}

type elNodeState struct {
	CPU, Memory int64
	Slots       int
}

func elState(f *Fit) []elNodeState {
	var out []elNodeState
	for _, fn := range f.free {
		out = append(out, elNodeState{fn.free.milliCPU, fn.free.memory, fn.slots})
	}
	return out
}

func TestFitPlacement(t *testing.T) {
	logger, _ := ktesting.NewTestContext(t)
	three := []fwk.NodeInfo{node("a", "4"), node("b", "4"), node("c", "4")}
	sizes := func(cpus ...string) []*v1.Pod {
		var out []*v1.Pod
		for i, c := range cpus {
			out = append(out, member(fmt.Sprintf("m%d", i+1), "g", c))
		}
		return out
	}
	twoSlots := rsNode("a", map[v1.ResourceName]string{v1.ResourceCPU: "4", v1.ResourceMemory: "8Gi", v1.ResourcePods: "2"})
	oneSlot := rsNode("a", map[v1.ResourceName]string{v1.ResourceCPU: "4", v1.ResourceMemory: "8Gi", v1.ResourcePods: "1"})
	tainted := elNode("a", nil, false, v1.Taint{Key: "dedicated", Effect: v1.TaintEffectNoSchedule})
	cases := []struct {
		name          string
		members       []*v1.Pod
		need          int
		nodes         []fwk.NodeInfo
		idx           []int
		wantPlaceable int
		wantAssign    map[string]string
		wantLeftover  [2]int64 // cpu, memory on idx
	}{
		{name: "homogeneous on all nodes", members: gangOf(3, "3"), need: 3, nodes: three, wantPlaceable: 3,
			wantAssign: map[string]string{"m0": "a", "m1": "b", "m2": "c"}, wantLeftover: [2]int64{-9000, 0}},
		{name: "homogeneous on a subset", members: gangOf(3, "3"), need: 3, nodes: three, idx: []int{0, 2}, wantPlaceable: 2,
			wantAssign: map[string]string{"m0": "a", "m1": "c", "m2": ""}, wantLeftover: [2]int64{-1000, 16 * gi}},
		{name: "an empty subset", members: gangOf(2, "1"), need: 2, nodes: three, idx: []int{}, wantPlaceable: 0,
			wantAssign: map[string]string{"m0": "", "m1": ""}, wantLeftover: [2]int64{-2000, 0}},
		{name: "homogeneous capped at need", members: gangOf(2, "1"), need: 2, nodes: three, idx: []int{1}, wantPlaceable: 2,
			wantAssign: map[string]string{"m0": "b", "m1": "b"}, wantLeftover: [2]int64{2000, 8 * gi}},
		{name: "pods without requests: bound by slots", need: 3, nodes: []fwk.NodeInfo{twoSlots}, idx: []int{0}, wantPlaceable: 2,
			members:    []*v1.Pod{rsPod("p0", nil), rsPod("p1", nil), rsPod("p2", nil)},
			wantAssign: map[string]string{"p0": "a", "p1": "a", "p2": ""}, wantLeftover: [2]int64{4000, 8 * gi}},
		{name: "a tainted node is no room", members: gangOf(2, "1"), need: 2, nodes: []fwk.NodeInfo{tainted, node("b", "1")}, idx: []int{0, 1},
			wantPlaceable: 1, wantAssign: map[string]string{"m0": "b", "m1": ""}, wantLeftover: [2]int64{3000, 16 * gi}},
		{name: "mixed: largest first, each on the first node with room", members: sizes("1", "1", "2", "3"), need: 4,
			nodes: three[:2], idx: []int{0, 1}, wantPlaceable: 4,
			wantAssign: map[string]string{"m4": "a", "m3": "b", "m1": "a", "m2": "b"}, wantLeftover: [2]int64{1000, 16 * gi}},
		{name: "mixed: the subset's order is the first-fit order", members: sizes("1", "1", "2", "3"), need: 4,
			nodes: three[:2], idx: []int{1, 0}, wantPlaceable: 4,
			wantAssign: map[string]string{"m4": "b", "m3": "a", "m1": "b", "m2": "a"}, wantLeftover: [2]int64{1000, 16 * gi}},
		{name: "mixed: one node only", members: sizes("1", "1", "2", "3"), need: 4, nodes: three[:2], idx: []int{1}, wantPlaceable: 2,
			wantAssign: map[string]string{"m4": "b", "m3": "", "m1": "b", "m2": ""}, wantLeftover: [2]int64{-3000, 8 * gi}},
		{name: "mixed: no room for the last", members: sizes("3", "3", "2"), need: 3, nodes: three[:2], wantPlaceable: 2,
			wantAssign: map[string]string{"m1": "a", "m2": "b", "m3": ""}, wantLeftover: [2]int64{-8000, 0}},
		{name: "mixed: slots are room too", members: sizes("1", "2"), need: 2, nodes: []fwk.NodeInfo{oneSlot, node("b", "4")}, idx: []int{0, 1},
			wantPlaceable: 2, wantAssign: map[string]string{"m2": "a", "m1": "b"}, wantLeftover: [2]int64{5000, 16 * gi}},
		{name: "overcommitted nodes leave nothing", members: gangOf(1, "1"), need: 1, idx: []int{0, 1},
			nodes:         []fwk.NodeInfo{nodeWith("a", "4", member("x", "other", "6")), node("b", "2")},
			wantPlaceable: 1, wantAssign: map[string]string{"m0": "b"}, wantLeftover: [2]int64{1000, 16 * gi}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := New(logger, "ns/g", tc.members, tc.need, tc.nodes, nil, nil, nil, false)
			before := elState(f)
			if got := f.placeable(tc.idx); got != tc.wantPlaceable {
				t.Errorf("placeable = %d, want %d", got, tc.wantPlaceable)
			}
			if diff := cmp.Diff(tc.wantAssign, elNames(f, f.assign(tc.idx))); diff != "" {
				t.Errorf("assign (-want,+got):\n%s", diff)
			}
			if diff := cmp.Diff(before, elState(f)); diff != "" {
				t.Errorf("the free capacity changed (-before,+after):\n%s", diff)
			}
			if cpu, mem := f.leftover(tc.idx); cpu != tc.wantLeftover[0] || mem != tc.wantLeftover[1] {
				t.Errorf("leftover = %d, %d, want %d, %d", cpu, mem, tc.wantLeftover[0], tc.wantLeftover[1])
			}
		})
	}
}

func TestEachNode(t *testing.T) {
	cases := []struct {
		name string
		idx  []int
		n    int
		stop int // fn returns false on its stop-th call (0: never)
		want []int
	}{
		{name: "nil: all nodes", n: 3, want: []int{0, 1, 2}},
		{name: "nil, no nodes", n: 0},
		{name: "indexes in their order", idx: []int{2, 0}, n: 3, want: []int{2, 0}},
		{name: "empty indexes: none", idx: []int{}, n: 3},
		{name: "stop on all nodes", n: 5, stop: 2, want: []int{0, 1}},
		{name: "stop on indexes", idx: []int{4, 3, 1}, n: 5, stop: 1, want: []int{4}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var got []int
			eachNode(tc.idx, tc.n, func(i int) bool {
				got = append(got, i)
				return len(got) != tc.stop
			})
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("visited (-want,+got):\n%s", diff)
			}
		})
	}
}

// TestCheckResults runs every case with no Shared, a fresh one and one a previous check filled: the
// answers agree, a check on the shared table holds its lock until Done, and a check with claimed room
// (on a private copy) leaves the shared table as the snapshot has it.
func TestCheckResults(t *testing.T) {
	logger, _ := ktesting.NewTestContext(t)
	cpu := func(c string) v1.ResourceList { return v1.ResourceList{v1.ResourceCPU: resource.MustParse(c)} }
	two := func() []fwk.NodeInfo { return []fwk.NodeInfo{node("a", "4"), node("b", "4")} }
	nominated := func(name, node, cpu string) *v1.Pod {
		p := rsPod(name, map[v1.ResourceName]string{v1.ResourceCPU: cpu})
		p.Status.NominatedNodeName = node
		return p
	}
	gpuNode := func(name string, pods ...*v1.Pod) fwk.NodeInfo {
		return rsNode(name, map[v1.ResourceName]string{v1.ResourceCPU: "4", v1.ResourceMemory: "8Gi", rsGPU: "1", rsFPGA: "2"}, pods...)
	}
	withGPU := func(name, cpu, gpu, fpga string) *v1.Pod {
		req := map[v1.ResourceName]string{v1.ResourceCPU: cpu}
		if gpu != "" {
			req[rsGPU] = gpu
		}
		if fpga != "" {
			req[rsFPGA] = fpga
		}
		return rsPod(name, req)
	}
	// onSSD asks for a node label no node has.
	onSSD := func(p *v1.Pod) *v1.Pod {
		p.Spec.NodeSelector = map[string]string{"disk": "ssd"}
		return p
	}
	// The device plugin reports one GPU while pods on the node hold two: the node's free GPUs are -1.
	shrunk := func() fwk.NodeInfo { return gpuNode("a", withGPU("held", "0", "2", "")) }
	tainted := elNode("t", nil, false, v1.Taint{Key: "dedicated", Effect: v1.TaintEffectNoSchedule})
	cases := []struct {
		name         string
		candidates   []*v1.Pod
		need         int
		nodes        func() []fwk.NodeInfo
		minResources v1.ResourceList
		counted      []*v1.Pod
		claimed      []*v1.Pod
		want         Result
		wantFit      bool
	}{
		{name: "nothing needed", candidates: gangOf(1, "9"), need: 0, nodes: two, want: Result{Feasible: true}},
		{name: "negative need", candidates: nil, need: -1, nodes: two, want: Result{Feasible: true}},
		{name: "too few candidates", candidates: gangOf(2, "1"), need: 3, nodes: two,
			want: Result{Message: "PodGroup ns/g needs 3 more members placed at once, but only 2 unscheduled members exist"}},
		{name: "homogeneous fits", candidates: gangOf(4, "2"), need: 4, nodes: two, want: Result{Feasible: true}, wantFit: true},
		{name: "homogeneous short", candidates: gangOf(3, "3"), need: 3, nodes: two, wantFit: true,
			want: Result{Message: "PodGroup ns/g needs 3 more members placed at once, but the nodes' free resources fit only 2 of them (checked per node, not in total)"}},
		{name: "only the smallest needed are placed", candidates: []*v1.Pod{member("big", "g", "5"), member("s0", "g", "3"), member("s1", "g", "3")},
			need: 2, nodes: two, want: Result{Feasible: true}, wantFit: true},
		{name: "minResources exceeded", candidates: gangOf(2, "1"), need: 2, nodes: two, minResources: cpu("10"), wantFit: true,
			want: Result{Message: "PodGroup ns/g: spec.minResources exceed the free resources of the nodes its members may use (cpu 10000m > 8000m)"}},
		{name: "minResources less the counted pods", candidates: gangOf(2, "1"), need: 2, nodes: two, minResources: cpu("10"),
			counted: []*v1.Pod{running("c0", "g", "x", "1", 0), running("c1", "g", "x", "1", 0)}, want: Result{Feasible: true}, wantFit: true},
		{name: "minResources less too few counted pods", candidates: gangOf(2, "1"), need: 2, nodes: two, minResources: cpu("10"),
			counted: []*v1.Pod{running("c0", "g", "x", "1", 0)}, wantFit: true,
			want: Result{Message: "PodGroup ns/g: spec.minResources exceed the free resources of the nodes its members may use (cpu 9000m > 8000m)"}},
		{name: "minResources of every kind, by name", candidates: gangOf(2, "1"), need: 2, nodes: two, wantFit: true,
			minResources: v1.ResourceList{v1.ResourceCPU: resource.MustParse("1"), v1.ResourceMemory: resource.MustParse("20Gi"), rsGPU: resource.MustParse("3")},
			want:         Result{Message: "PodGroup ns/g: spec.minResources exceed the free resources of the nodes its members may use (example.com/gpu 3 > 0, memory 21474836480 > 17179869184)"}},
		{name: "minResources count usable nodes only", candidates: gangOf(1, "1"), need: 1, minResources: cpu("6"), wantFit: true,
			nodes: func() []fwk.NodeInfo { return []fwk.NodeInfo{node("a", "4"), tainted} },
			want:  Result{Message: "PodGroup ns/g: spec.minResources exceed the free resources of the nodes its members may use (cpu 6000m > 4000m)"}},
		{name: "mixed gang admitted by the aggregate test when first-fit fails", need: 3, nodes: two, wantFit: true,
			candidates: []*v1.Pod{member("x0", "g", "3"), member("x1", "g", "3"), member("y", "g", "2")}, want: Result{Feasible: true}},
		{name: "mixed gang short in total", need: 3, nodes: two, wantFit: true,
			candidates: []*v1.Pod{member("x0", "g", "3"), member("x1", "g", "3"), member("y", "g", "2500m")},
			want:       Result{Message: "PodGroup ns/g needs 3 more members placed at once, but the nodes' free resources fit only 2 of them (cpu 8500m > 8000m)"}},
		{name: "a member that fits no node", need: 2, nodes: two, wantFit: true,
			candidates: []*v1.Pod{member("huge", "g", "6"), member("s1", "g", "1")},
			want:       Result{Message: "PodGroup ns/g: member ns/huge fits on no node's free resources"}},
		{name: "claimed room is taken off its node", candidates: gangOf(2, "3"), need: 2, nodes: two, wantFit: true,
			claimed: []*v1.Pod{nominated("c", "b", "3")},
			want:    Result{Message: "PodGroup ns/g needs 2 more members placed at once, but the nodes' free resources fit only 1 of them (checked per node, not in total)"}},
		{name: "claimed room on an unknown node", candidates: gangOf(2, "3"), need: 2, nodes: two, wantFit: true,
			claimed: []*v1.Pod{nominated("c", "gone", "3")}, want: Result{Feasible: true}},
		{name: "a claim takes a slot", candidates: gangOf(1, "1"), need: 1, wantFit: true, claimed: []*v1.Pod{nominated("c", "a", "0")},
			nodes: func() []fwk.NodeInfo {
				return []fwk.NodeInfo{rsNode("a", map[v1.ResourceName]string{v1.ResourceCPU: "4", v1.ResourcePods: "1"})}
			},
			want: Result{Message: "PodGroup ns/g needs 1 more members placed at once, but the nodes' free resources fit only 0 of them (checked per node, not in total)"}},
		{name: "a NodeInfo without node is skipped", candidates: gangOf(2, "3"), need: 2, wantFit: true,
			nodes: func() []fwk.NodeInfo { return []fwk.NodeInfo{node("a", "4"), framework.NewNodeInfo(), node("b", "4")} },
			want:  Result{Feasible: true}},
		{name: "homogeneous members ignore a GPU they do not ask for", need: 2, wantFit: true,
			nodes:      func() []fwk.NodeInfo { return []fwk.NodeInfo{shrunk()} },
			candidates: []*v1.Pod{withGPU("m0", "1", "", "1"), withGPU("m1", "1", "", "1"), withGPU("g", "3", "1", "")},
			want:       Result{Feasible: true}},
		// Zero requests are not compared (as NodeResourcesFit): m0 and m1 fit on a although its free
		// GPU count is negative, as they do in the homogeneous case above.
		{name: "mixed members and a GPU they do not ask for", need: 2, wantFit: true,
			nodes:      func() []fwk.NodeInfo { return []fwk.NodeInfo{shrunk()} },
			candidates: []*v1.Pod{withGPU("m0", "1", "", "1"), withGPU("m1", "2", "", "1"), withGPU("g", "3", "1", "")},
			want:       Result{Feasible: true}},
		// Members are ordered by their share of every resource, extended ones too: a GPU no node has
		// makes the member the largest, so b0 and b1 fill the quorum on a.
		{name: "the smallest member by cpu asks for a missing GPU", need: 2, wantFit: true,
			nodes:      func() []fwk.NodeInfo { return []fwk.NodeInfo{node("a", "4")} },
			candidates: []*v1.Pod{withGPU("gpu", "1", "1", ""), withGPU("b0", "2", "", ""), withGPU("b1", "2", "", "")},
			want:       Result{Feasible: true}},
		// The chosen members are identical, but another candidate is not: the exact answer for
		// identical members does not hold, and the sound tests over every candidate decide.
		{name: "identical chosen members fit nowhere, other candidates do: the sound tests decide", need: 2, wantFit: true,
			nodes: func() []fwk.NodeInfo { return []fwk.NodeInfo{node("a", "4")} },
			candidates: []*v1.Pod{onSSD(withGPU("s0", "1", "", "")), onSSD(withGPU("s1", "1", "", "")),
				withGPU("b0", "2", "", ""), withGPU("b1", "2", "", "")},
			want: Result{Feasible: true}},
		{name: "fewer candidates than needed fit anywhere", need: 2, wantFit: true,
			nodes:      func() []fwk.NodeInfo { return []fwk.NodeInfo{node("a", "2")} },
			candidates: []*v1.Pod{withGPU("s0", "1", "", ""), withGPU("g0", "1", "1", ""), withGPU("g1", "1", "1", "")},
			want:       Result{Message: "PodGroup ns/g needs 2 more members placed at once, but only 1 of its 3 unscheduled members fit on any node's free resources"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			primed := &Shared{}
			nodes := tc.nodes()
			_, f := Check(logger, "ns/g", gangOf(1, "1"), 1, nodes, nil, nil, nil, primed)
			f.Done()
			var first *Result
			for _, sc := range []struct {
				name   string
				shared *Shared
			}{{"nil", nil}, {"fresh", &Shared{}}, {"primed", primed}} {
				got, f := Check(logger, "ns/g", tc.candidates, tc.need, nodes, tc.minResources, tc.counted, tc.claimed, sc.shared)
				// The shortfall's numbers are TestShortfall's; here: one exactly when infeasible, and
				// the same whatever the Shared.
				if diff := cmp.Diff(tc.want, got, cmpopts.IgnoreFields(Result{}, "Shortfall")); diff != "" {
					t.Errorf("%s Shared: result (-want,+got):\n%s", sc.name, diff)
				}
				if (got.Shortfall == nil) != got.Feasible {
					t.Errorf("%s Shared: feasible %v with shortfall %v", sc.name, got.Feasible, got.Shortfall)
				}
				if first == nil {
					first = &got
				} else if diff := cmp.Diff(first.Shortfall, got.Shortfall); diff != "" {
					t.Errorf("%s Shared: shortfall differs from nil Shared's (-nil,+this):\n%s", sc.name, diff)
				}
				if (f != nil) != tc.wantFit {
					t.Errorf("%s Shared: fit returned = %v, want %v", sc.name, f != nil, tc.wantFit)
				}
				if sc.shared == nil {
					f.Done()
					continue
				}
				locked := !sc.shared.capacity.mu.TryLock()
				if !locked {
					sc.shared.capacity.mu.Unlock()
				}
				// The check reads the shared table unless it had to change it or could not build it.
				wantLocked := f != nil && len(tc.claimed) == 0
				for _, ni := range nodes {
					wantLocked = wantLocked && ni.Node() != nil
				}
				if locked != wantLocked {
					t.Errorf("%s Shared: lock held = %v, want %v", sc.name, locked, wantLocked)
				}
				f.Done()
				if !sc.shared.capacity.mu.TryLock() {
					t.Fatalf("%s Shared: lock held after Done", sc.name)
				}
				sc.shared.capacity.mu.Unlock()
				table, names, _, ok := sc.shared.capacity.acquire(nodes, nil)
				if !ok {
					continue
				}
				for i, ni := range nodes {
					fresh := nodeFree(ni, names, make([]int64, len(names)))
					if table[i].slots != fresh.slots || !table[i].free.equal(fresh.free) {
						t.Errorf("%s Shared: the table's %s is %+v, the snapshot's %+v", sc.name, ni.Node().Name, table[i], fresh)
					}
				}
				sc.shared.capacity.mu.Unlock()
			}
		})
	}
}
