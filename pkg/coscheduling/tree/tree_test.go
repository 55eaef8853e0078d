package tree

import (
	"reflect"
	"slices"
	"strings"
	"testing"

	schedulingv1alpha3 "k8s.io/api/scheduling/v1alpha3"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/custom-scheduler/custom-scheduler/pkg/apis/scheduling/v1alpha1"
)

const ns = "ns"

func group(name, parent string, min int) Node {
	return Node{Namespace: ns, Name: name, Gang: min > 1, Min: max(min, 1), Parent: parent}
}

func gangOf(name, parent string, minGroupCount int) Node {
	return Node{Namespace: ns, Name: name, Composite: true, Gang: true, Min: minGroupCount, Parent: parent}
}

func basicOf(name, parent string) Node {
	return Node{Namespace: ns, Name: name, Composite: true, Min: 1, Parent: parent}
}

func index(nodes ...Node) *Index {
	x := NewIndex()
	for _, n := range nodes {
		x.Set(n)
	}
	return x
}

func counts(m map[string]int) func(string) int {
	return func(key string) int { return m[strings.TrimPrefix(key, ns+"/")] }
}

// The shapes of upstream's test/integration/scheduler/podgroup/cpg_test.go, as readiness and
// admission over counts of members reserved or bound. Where upstream allows every assumed pod of a
// ready tree, a leaf here is also held to its own minMember (no child is ever bound in part).
func TestReadyAndAdmits(t *testing.T) {
	hierarchy := []Node{gangOf("root", "", 2), gangOf("mid", "root", 2), group("a", "mid", 2), group("b", "mid", 2), group("c", "root", 2)}
	for _, tc := range []struct {
		name   string
		nodes  []Node
		leaf   string
		counts map[string]int
		ready  bool
		admits bool
		short  []string
	}{
		{name: "hierarchical: all children whole", nodes: hierarchy, leaf: "a", counts: map[string]int{"a": 2, "b": 2, "c": 2}, ready: true, admits: true},
		{name: "hierarchical: a grandchild short fails its parent and the root", nodes: hierarchy, leaf: "c", counts: map[string]int{"a": 2, "b": 1, "c": 2},
			short: []string{"root: 1 of minGroupCount 2 children ready", "mid: 1 of minGroupCount 2 children ready", "b: 1 of minMember 2"}},
		{name: "minGroupCount: 2 of 3 children are enough", nodes: []Node{gangOf("root", "", 2), group("a", "root", 2), group("b", "root", 2), group("c", "root", 2)},
			leaf: "a", counts: map[string]int{"a": 2, "b": 3}, ready: true, admits: true},
		{name: "minGroupCount: 1 of 3 is not", nodes: []Node{gangOf("root", "", 2), group("a", "root", 2), group("b", "root", 2), group("c", "root", 2)},
			leaf: "a", counts: map[string]int{"a": 2, "b": 1},
			short: []string{"root: 1 of minGroupCount 2 children ready", "b: 1 of minMember 2", "c: 0 of minMember 2"}},
		{name: "basic over gang children: each child on its own", nodes: []Node{basicOf("root", ""), group("a", "root", 2), group("b", "root", 2)},
			leaf: "a", counts: map[string]int{"a": 2}, ready: true, admits: true},
		{name: "basic over basic children", nodes: []Node{basicOf("root", ""), group("a", "root", 1), group("b", "root", 1)},
			leaf: "b", counts: map[string]int{"b": 1}, ready: true, admits: true},
		{name: "gang over basic children: one basic child alone is not enough", nodes: []Node{gangOf("root", "", 2), group("a", "root", 1), group("b", "root", 1)},
			leaf: "a", counts: map[string]int{"a": 3}, short: []string{"root: 1 of minGroupCount 2 children ready", "b: 0 of minMember 1"}},
		{name: "basic with an unschedulable basic child: the others go on", nodes: []Node{basicOf("root", ""), group("a", "root", 1), group("b", "root", 1)},
			leaf: "a", counts: map[string]int{"a": 1}, ready: true, admits: true},
		{name: "basic root over a gang composite: the gang composite still gates", nodes: []Node{basicOf("root", ""), gangOf("x", "root", 2), group("a", "x", 1), group("b", "x", 1), group("c", "root", 1)},
			leaf: "a", counts: map[string]int{"a": 1, "c": 1}, ready: true, admits: false},
		{name: "a child added later: not ready with one of two", nodes: []Node{gangOf("root", "", 2), group("a", "root", 2)},
			leaf: "a", counts: map[string]int{"a": 2}, short: []string{"root: 1 of minGroupCount 2 children ready"}},
		{name: "a composite with no child is never ready", nodes: []Node{gangOf("root", "", 1), gangOf("empty", "root", 1), group("a", "root", 1)},
			leaf: "a", counts: map[string]int{"a": 1}, ready: true, admits: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			root, p := index(tc.nodes...).Resolve(ns, tc.leaf)
			if p != nil || root == nil {
				t.Fatalf("Resolve: %v, %+v", root, p)
			}
			c := counts(tc.counts)
			if got := root.Ready(c); got != tc.ready {
				t.Errorf("Ready = %v, want %v", got, tc.ready)
			}
			if got := root.Admits(ns+"/"+tc.leaf, c); got != tc.admits {
				t.Errorf("Admits(%s) = %v, want %v", tc.leaf, got, tc.admits)
			}
			if got := root.Short(c); strings.Join(got, "; ") != strings.Join(tc.short, "; ") {
				t.Errorf("Short = %q, want %q", got, tc.short)
			}
		})
	}
}

func TestResolveProblems(t *testing.T) {
	deep := []Node{gangOf("c0", "", 1)}
	for i := 1; i <= MaxDepth+1; i++ {
		deep = append(deep, gangOf("c"+string(rune('0'+i)), "c"+string(rune('0'+i-1)), 1))
	}
	deep = append(deep, group("leaf", "c5", 1))
	for _, tc := range []struct {
		name   string
		nodes  []Node
		leaf   string
		reason string
		says   string
	}{
		{name: "missing parent", nodes: []Node{group("a", "job", 2)}, leaf: "a", reason: ReasonParentNotFound, says: "names parent job, which does not exist"},
		{name: "parent not a composite", nodes: []Node{group("a", "b", 2), group("b", "", 2)}, leaf: "a", reason: ReasonInvalidTree, says: "not a composite"},
		{name: "cycle", nodes: []Node{gangOf("x", "y", 1), gangOf("y", "x", 1), group("a", "x", 1)}, leaf: "a", reason: ReasonInvalidTree, says: "cycle"},
		{name: "parent of the other API", nodes: []Node{group("a", InTreeCompositePrefix+"job", 2)}, leaf: "a", reason: ReasonInvalidTree, says: "other API"},
		{name: "in-tree group under a composite of ours", nodes: []Node{gangOf("job", "", 1), {Namespace: ns, Name: inTreeGroupPrefix + "a", Min: 1, Parent: "job"}},
			leaf: inTreeGroupPrefix + "a", reason: ReasonInvalidTree, says: "other API"},
		{name: "too deep", nodes: deep, leaf: "leaf", reason: ReasonInvalidTree, says: "more than 4 composites deep"},
		{name: "invalid annotations on the way", nodes: []Node{{Namespace: ns, Name: "job", Invalid: "bad count"}, group("a", "job", 1)}, leaf: "a", reason: ReasonInvalidTree, says: "not a composite"},
		{name: "invalid leaf", nodes: []Node{{Namespace: ns, Name: "a", Parent: "a", Invalid: "names the group itself"}}, leaf: "a", reason: ReasonInvalidTree, says: "names the group itself"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b, p := index(tc.nodes...).Resolve(ns, tc.leaf)
			if p == nil {
				t.Fatalf("Resolve = %v, want a problem", b)
			}
			if p.Reason != tc.reason || !strings.Contains(p.Message, tc.says) {
				t.Errorf("problem = %+v, want reason %s saying %q", p, tc.reason, tc.says)
			}
		})
	}
}

func TestIndexFollowsChanges(t *testing.T) {
	x := index(group("flat", "", 3))
	if !x.Empty() {
		t.Fatal("a flat group makes the index non-empty")
	}
	if b, p := x.Resolve(ns, "flat"); b != nil || p != nil {
		t.Fatalf("flat group resolved to %v, %v", b, p)
	}
	x.Set(gangOf("job", "", 2))
	x.Set(group("a", "job", 2))
	x.Set(group("b", "job", 2))
	b, _ := x.Resolve(ns, "a")
	if got := len(b.Leaves()); got != 2 {
		t.Fatalf("leaves = %d, want 2", got)
	}
	// b moves out of the tree (a new version without the parent), then the composite goes.
	x.Set(group("b", "", 2))
	if b, _ = x.Resolve(ns, "a"); len(b.Leaves()) != 1 {
		t.Fatalf("leaves after b left = %v", b.Leaves())
	}
	x.Delete(ns, "job")
	if _, p := x.Resolve(ns, "a"); p == nil || p.Reason != ReasonParentNotFound {
		t.Fatalf("after the composite's delete: %+v", p)
	}
	x.Delete(ns, "a")
	if !x.Empty() {
		t.Fatal("the index still counts linked nodes after every one left")
	}
}

func TestFromPodGroup(t *testing.T) {
	pg := func(ann map[string]string) *v1alpha1.PodGroup {
		return &v1alpha1.PodGroup{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "g", Annotations: ann}}
	}
	for _, tc := range []struct {
		name string
		ann  map[string]string
		want Node
	}{
		{name: "flat", want: Node{Namespace: ns, Name: "g", Gang: true, Min: 3}},
		{name: "child", ann: map[string]string{AnnotationParent: "job"}, want: Node{Namespace: ns, Name: "g", Gang: true, Min: 3, Parent: "job"}},
		{name: "gang composite", ann: map[string]string{AnnotationMinGroupCount: "2"}, want: Node{Namespace: ns, Name: "g", Composite: true, Gang: true, Min: 2}},
		{name: "gang composite, policy named", ann: map[string]string{AnnotationComposite: "Gang", AnnotationMinGroupCount: "2", AnnotationParent: "top"},
			want: Node{Namespace: ns, Name: "g", Composite: true, Gang: true, Min: 2, Parent: "top"}},
		{name: "basic composite", ann: map[string]string{AnnotationComposite: "Basic"}, want: Node{Namespace: ns, Name: "g", Composite: true, Min: 1}},
		{name: "basic with a count", ann: map[string]string{AnnotationComposite: "Basic", AnnotationMinGroupCount: "2"},
			want: Node{Namespace: ns, Name: "g", Gang: true, Min: 3, Invalid: "annotation scheduling.x-k8s.io/composite is Basic but scheduling.x-k8s.io/min-group-count is set: a basic composite has no minimum"}},
		{name: "unknown policy", ann: map[string]string{AnnotationComposite: "Some"},
			want: Node{Namespace: ns, Name: "g", Gang: true, Min: 3, Invalid: `annotation scheduling.x-k8s.io/composite is "Some": want Gang or Basic`}},
		{name: "gang without a count", ann: map[string]string{AnnotationComposite: "Gang"},
			want: Node{Namespace: ns, Name: "g", Gang: true, Min: 3, Invalid: "annotation scheduling.x-k8s.io/composite is Gang but scheduling.x-k8s.io/min-group-count is not set"}},
		{name: "count not a number", ann: map[string]string{AnnotationMinGroupCount: "two"},
			want: Node{Namespace: ns, Name: "g", Gang: true, Min: 3, Invalid: `annotation scheduling.x-k8s.io/min-group-count is "two": want a whole number of at least 1`}},
		{name: "count zero", ann: map[string]string{AnnotationMinGroupCount: "0"},
			want: Node{Namespace: ns, Name: "g", Gang: true, Min: 3, Invalid: `annotation scheduling.x-k8s.io/min-group-count is "0": want a whole number of at least 1`}},
		{name: "own parent", ann: map[string]string{AnnotationParent: "g"},
			want: Node{Namespace: ns, Name: "g", Gang: true, Min: 3, Parent: "g", Invalid: "annotation scheduling.x-k8s.io/parent-group names the group itself"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := FromPodGroup(pg(tc.ann), 3, true); !reflect.DeepEqual(got, tc.want) {
				t.Errorf("FromPodGroup =\n%+v, want\n%+v", got, tc.want)
			}
		})
	}
}

func TestFollow(t *testing.T) {
	twoOfThree := []Node{gangOf("job", "", 2), group("a", "job", 2), group("b", "job", 2), group("c", "job", 2)}
	all := []Node{gangOf("job", "", 2), group("prefill", "job", 2), group("decode", "job", 4)}
	mixed := []Node{basicOf("root", ""), gangOf("x", "root", 2), group("a", "x", 1), group("b", "x", 1), group("c", "root", 2)}
	for _, tc := range []struct {
		name   string
		nodes  []Node
		leaf   string
		failed bool
		counts map[string]int
		out    []string
		want   []string
	}{
		{name: "ready: the sibling with its quorum follows", nodes: all, leaf: "prefill", counts: map[string]int{"prefill": 2, "decode": 4}, want: []string{"decode"}},
		{name: "ready: a sibling short of its own quorum does not", nodes: twoOfThree, leaf: "a", counts: map[string]int{"a": 2, "b": 2, "c": 1}, want: []string{"b"}},
		{name: "ready: the tree still short moves nobody", nodes: all, leaf: "prefill", counts: map[string]int{"prefill": 2, "decode": 3}},
		{name: "failed: a child every gang needs fails the others", nodes: all, leaf: "prefill", failed: true, out: []string{"prefill"}, want: []string{"decode"}},
		{name: "failed: 2 of 3 still reachable without it: nobody follows", nodes: twoOfThree, leaf: "c", failed: true, out: []string{"c"}},
		{name: "failed: the second out of 2 of 3 fails the last", nodes: twoOfThree, leaf: "c", failed: true, out: []string{"b", "c"}, want: []string{"a"}},
		{name: "failed: under a basic root only the failed group's gang composite follows", nodes: mixed, leaf: "a", failed: true, out: []string{"a"}, want: []string{"b"}},
		{name: "failed: a group under no gang composite fails nobody", nodes: mixed, leaf: "c", failed: true, out: []string{"c"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			root, p := index(tc.nodes...).Resolve(ns, tc.leaf)
			if p != nil {
				t.Fatal(p)
			}
			out := func(key string) bool { return slices.Contains(tc.out, strings.TrimPrefix(key, ns+"/")) }
			var got []string
			for _, n := range root.Follow(ns+"/"+tc.leaf, tc.failed, counts(tc.counts), out) {
				got = append(got, n.Name)
			}
			if strings.Join(got, ",") != strings.Join(tc.want, ",") {
				t.Errorf("Follow = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestInTreeComposite(t *testing.T) {
	parent := "top"
	gang := &schedulingv1alpha3.CompositePodGroup{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "job"},
		Spec: schedulingv1alpha3.CompositePodGroupSpec{ParentCompositePodGroupName: &parent,
			SchedulingPolicy: schedulingv1alpha3.CompositePodGroupSchedulingPolicy{Gang: &schedulingv1alpha3.CompositeGangSchedulingPolicy{MinGroupCount: 2}}}}
	basic := &schedulingv1alpha3.CompositePodGroup{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "top"},
		Spec: schedulingv1alpha3.CompositePodGroupSpec{SchedulingPolicy: schedulingv1alpha3.CompositePodGroupSchedulingPolicy{Basic: &schedulingv1alpha3.CompositeBasicSchedulingPolicy{}}}}
	if got, want := FromComposite(gang), (Node{Namespace: ns, Name: InTreeCompositePrefix + "job", Composite: true, Gang: true, Min: 2, Parent: InTreeCompositePrefix + "top"}); !reflect.DeepEqual(got, want) {
		t.Errorf("FromComposite(gang) = %+v, want %+v", got, want)
	}
	if got, want := FromComposite(basic), (Node{Namespace: ns, Name: InTreeCompositePrefix + "top", Composite: true, Min: 1}); !reflect.DeepEqual(got, want) {
		t.Errorf("FromComposite(basic) = %+v, want %+v", got, want)
	}
	inBlock := gang.DeepCopy()
	inBlock.Spec.SchedulingConstraints = &schedulingv1alpha3.CompositePodGroupSchedulingConstraints{Topology: []schedulingv1alpha3.TopologyConstraint{{Key: "example.com/block"}}}
	if got := FromComposite(inBlock); got.Domain != "example.com/block" {
		t.Errorf("FromComposite with a topology constraint: domain %q, want example.com/block", got.Domain)
	}
	// The in-tree tree: a group under the gang composite under the basic one.
	x := NewIndex()
	leaf := Node{Namespace: ns, Name: inTreeGroupPrefix + "a", Gang: true, Min: 2, Parent: InTreeParent(&gang.Name)}
	x.Set(leaf)
	x.Set(FromComposite(basic))
	x.Set(FromComposite(gang))
	if under := x.Under(ns, InTreeCompositePrefix+"top"); len(under) != 1 || !reflect.DeepEqual(under[0], leaf) {
		t.Errorf("Under(top) = %v, want the group two levels below", under)
	}
	root, p := x.Resolve(ns, leaf.Name)
	if p != nil || root.Name != InTreeCompositePrefix+"top" || len(root.Children) != 1 || !root.Gated(leaf.Key()) {
		t.Fatalf("Resolve = %+v, %+v; want top > job > a, a gated", root, p)
	}
	x.Delete(ns, InTreeCompositePrefix+"job")
	if _, p := x.Resolve(ns, leaf.Name); p == nil || p.Reason != ReasonParentNotFound {
		t.Errorf("after the composite's delete: %+v", p)
	}
}

func TestHoldBack(t *testing.T) {
	job := []Node{gangOf("serve", "", 2), group("prefill", "serve", 2), group("decode", "serve", 4)}
	for _, tc := range []struct {
		name    string
		nodes   []Node
		leaf    string
		counts  map[string]int
		reason  string
		message string
	}{
		{name: "in no tree", nodes: []Node{group("flat", "", 2)}, leaf: "flat", counts: map[string]int{}},
		{name: "the job's other group lacks members", nodes: job, leaf: "decode", counts: map[string]int{"decode": 4},
			reason: ReasonWaitingForGroups, message: "PodGroup ns/decode is part of job serve, which lacks groups with their members (serve: 1 of minGroupCount 2 children ready; prefill: 0 of minMember 2); the pod waits without holding resources"},
		{name: "every group has its members", nodes: job, leaf: "decode", counts: map[string]int{"decode": 4, "prefill": 2}},
		{name: "a missing parent", nodes: []Node{group("a", "gone", 1)}, leaf: "a", counts: map[string]int{"a": 1},
			reason: ReasonParentNotFound, message: "the pod waits without holding resources"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			root, p := index(tc.nodes...).Resolve(ns, tc.leaf)
			reason, msg := HoldBack(root, p, ns+"/"+tc.leaf, counts(tc.counts))
			if reason != tc.reason || !strings.Contains(msg, tc.message) {
				t.Errorf("HoldBack = %q, %q; want %q, %q", reason, msg, tc.reason, tc.message)
			}
		})
	}
}

// The whole-tree check's groups: what a leaf needs placed with it for every gang composite above it
// to be ready.
func TestNeeded(t *testing.T) {
	disaggregated := []Node{gangOf("serve", "", 2), group("prefill", "serve", 2), group("decode", "serve", 4)}
	replicas := []Node{gangOf("lws", "", 2), group("a", "lws", 2), group("b", "lws", 2), group("c", "lws", 2)}
	// Three replicas, each a leader group and a worker group; the set needs 2 (composites[:7]: the set, rep-0 and rep-1).
	composites := []Node{gangOf("set", "", 2),
		gangOf("rep-0", "set", 2), group("lead-0", "rep-0", 1), group("work-0", "rep-0", 2),
		gangOf("rep-1", "set", 2), group("lead-1", "rep-1", 1), group("work-1", "rep-1", 2),
		gangOf("rep-2", "set", 2), group("lead-2", "rep-2", 1), group("work-2", "rep-2", 2)}
	hierarchy := []Node{gangOf("root", "", 2), gangOf("mid", "root", 2), group("a", "mid", 2), group("b", "mid", 2), group("c", "root", 2)}
	names := func(ns []Node) []string {
		var out []string
		for _, n := range ns {
			out = append(out, n.Name)
		}
		return out
	}
	for _, tc := range []struct {
		name    string
		nodes   []Node
		leaf    string
		counts  map[string]int
		want    []string
		choices [][]string
		notOK   bool
	}{
		{name: "a role needs the other role", nodes: disaggregated, leaf: "decode", want: []string{"prefill"}},
		{name: "the other role is whole already", nodes: disaggregated, leaf: "decode", counts: map[string]int{"prefill": 2}},
		{name: "K of N: the replica closest to whole is picked among alike ones", nodes: replicas, leaf: "a", counts: map[string]int{"c": 1},
			want: []string{"c"}, choices: [][]string{{"b", "c"}}},
		{name: "K of N: enough replicas whole", nodes: replicas, leaf: "a", counts: map[string]int{"b": 2}},
		{name: "hierarchy: the root's other child, then the parent's", nodes: hierarchy, leaf: "a", want: []string{"c", "b"}},
		{name: "hierarchy: a composite sibling with what it needs", nodes: hierarchy, leaf: "c", want: []string{"a", "b"}},
		{name: "hierarchy: a ready grandchild is not needed", nodes: hierarchy, leaf: "c", counts: map[string]int{"a": 2}, want: []string{"b"}},
		{name: "basic root: nothing", nodes: []Node{basicOf("root", ""), group("a", "root", 2), group("b", "root", 2)}, leaf: "a"},
		{name: "a basic composite under a gang one needs one child", nodes: []Node{gangOf("root", "", 2), group("a", "root", 2), basicOf("any", "root"), group("b1", "any", 2), group("b2", "any", 2)},
			leaf: "a", want: []string{"b1"}, choices: [][]string{{"b1", "b2"}}},
		{name: "a choice among alike composites of one group each", nodes: []Node{gangOf("root", "", 2), group("c", "root", 2), gangOf("m1", "root", 1), group("a", "m1", 2), gangOf("m2", "root", 1), group("b", "m2", 2)},
			leaf: "c", want: []string{"a"}, choices: [][]string{{"a", "b"}}},
		{name: "K of N composites: one other replica with both its groups, a leaf set per position", nodes: composites, leaf: "lead-0",
			want: []string{"lead-1", "work-1", "work-0"}, choices: [][]string{{"lead-1", "lead-2"}, {"work-1", "work-2"}}},
		{name: "K of N composites: the replica closest to whole", nodes: composites, leaf: "lead-0", counts: map[string]int{"work-2": 1},
			want: []string{"lead-2", "work-2", "work-0"}, choices: [][]string{{"lead-1", "lead-2"}, {"work-1", "work-2"}}},
		{name: "K of N composites: members beyond a group's minimum bring no closer", nodes: composites, leaf: "lead-0", counts: map[string]int{"lead-1": 3, "work-2": 2},
			want: []string{"lead-2", "work-0"}, choices: [][]string{{"lead-1", "lead-2"}, {"work-1", "work-2"}}},
		{name: "K of N composites: a whole replica is not needed", nodes: composites, leaf: "lead-0", counts: map[string]int{"lead-2": 1, "work-2": 2},
			want: []string{"work-0"}},
		{name: "K of N composites: paired by shape, not name", nodes: []Node{gangOf("set", "", 2), gangOf("r0", "set", 2), group("a-work", "r0", 2), group("b-lead", "r0", 1),
			gangOf("r1", "set", 2), group("x-lead", "r1", 1), group("y-work", "r1", 2), gangOf("r2", "set", 2), group("m-lead", "r2", 1), group("n-work", "r2", 2)},
			leaf: "b-lead", want: []string{"x-lead", "y-work", "a-work"}, choices: [][]string{{"x-lead", "m-lead"}, {"y-work", "n-work"}}},
		{name: "K of N composites not alike (another worker minimum): not said", nodes: append(slices.Clone(composites[:7]), gangOf("rep-2", "set", 2), group("lead-2", "rep-2", 1), group("work-2", "rep-2", 3)),
			leaf: "lead-0", notOK: true},
		{name: "K of N composites not alike (another group count): not said", nodes: append(slices.Clone(composites[:7]), gangOf("rep-2", "set", 1), group("lead-2", "rep-2", 1)),
			leaf: "lead-0", notOK: true},
		{name: "K of N composites not alike (another required key): not said", nodes: append(slices.Clone(composites[:7]), Node{Namespace: ns, Name: "rep-2", Composite: true, Gang: true, Min: 2, Parent: "set", Domain: "rack"},
			group("lead-2", "rep-2", 1), group("work-2", "rep-2", 2)),
			leaf: "lead-0", notOK: true},
		{name: "a choice between a group and a composite: not said", nodes: append(slices.Clone(composites[:7]), group("rep-2", "set", 1)),
			leaf: "lead-0", notOK: true},
		{name: "a choice among groups of different minimums: not said", nodes: []Node{gangOf("root", "", 2), group("a", "root", 2), group("b", "root", 3), group("c", "root", 2)},
			leaf: "a", notOK: true},
		{name: "too few children", nodes: []Node{gangOf("root", "", 3), group("a", "root", 2), group("b", "root", 2)}, leaf: "a", notOK: true},
		{name: "a group in no composite", nodes: []Node{group("a", "", 2)}, leaf: "a"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			root, p := index(tc.nodes...).Resolve(ns, tc.leaf)
			if p != nil {
				t.Fatalf("Resolve: %v", p)
			}
			if root == nil {
				root = &Branch{Node: tc.nodes[0]}
			}
			got, ok := root.Needed(ns+"/"+tc.leaf, counts(tc.counts))
			if ok == tc.notOK {
				t.Fatalf("ok = %v, want %v", ok, !tc.notOK)
			}
			if !slices.Equal(names(got.Groups), tc.want) {
				t.Errorf("groups %v, want %v", names(got.Groups), tc.want)
			}
			var choices [][]string
			for _, c := range got.Choices {
				choices = append(choices, names(c))
			}
			if !slices.EqualFunc(choices, tc.choices, slices.Equal) {
				t.Errorf("choices %v, want %v", choices, tc.choices)
			}
		})
	}
}

// The unit of preemption: a group under a gang composite is evicted with the topmost one's tree.
func TestUnit(t *testing.T) {
	x := index(
		gangOf("root", "", 2), gangOf("mid", "root", 2), group("a", "mid", 2), group("c", "root", 2),
		basicOf("any", ""), gangOf("pair", "any", 2), group("p1", "pair", 1), group("lone", "any", 2),
		group("flat", "", 2))
	for leaf, want := range map[string]string{"a": "root", "c": "root", "p1": "pair", "lone": "", "flat": "", "unknown": ""} {
		got, ok := x.Unit(ns, leaf)
		if got != want || ok != (want != "") {
			t.Errorf("Unit(%s) = %q, %v; want %q", leaf, got, ok, want)
		}
	}
}

// A composite of ours holds its pods in one domain of its spec's required key; a group's own
// policy is its own (not the tree's).
func TestFromPodGroupDomain(t *testing.T) {
	pg := func(ann map[string]string) *v1alpha1.PodGroup {
		return &v1alpha1.PodGroup{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "x", Annotations: ann},
			Spec: v1alpha1.PodGroupSpec{TopologyPolicy: &v1alpha1.TopologyPolicy{Required: "example.com/block"}}}
	}
	if n := FromPodGroup(pg(map[string]string{AnnotationMinGroupCount: "2"}), 1, true); n.Domain != "example.com/block" {
		t.Errorf("composite: domain %q", n.Domain)
	}
	if n := FromPodGroup(pg(map[string]string{AnnotationParent: "job"}), 2, true); n.Domain != "" {
		t.Errorf("leaf: domain %q, want none (its policy is its own)", n.Domain)
	}
	x := index(Node{Namespace: ns, Name: "job", Composite: true, Gang: true, Min: 1, Domain: "example.com/block"}, gangOf("mid", "job", 1), group("a", "mid", 2))
	root, _ := x.Resolve(ns, "a")
	if c, ok := root.DomainAbove(ns + "/a"); !ok || c.Name != "job" {
		t.Errorf("DomainAbove(a) = %v, %v; want job", c, ok)
	}
	if _, ok := root.DomainAbove(ns + "/none"); ok {
		t.Error("DomainAbove of a group not in the tree")
	}
}

// A group whose object links it into a tree the Index does not have yet is held as for a missing
// parent; one that is linked to nothing is not.
func TestUnread(t *testing.T) {
	if p := Unread(Node{Namespace: "ns", Name: "a"}); p != nil {
		t.Errorf("an unlinked group: %+v, want none", p)
	}
	p := Unread(Node{Namespace: "ns", Name: "a", Gang: true, Min: 2, Parent: "job"})
	if p == nil || p.Reason != ReasonParentNotFound || !strings.Contains(p.Message, "a is part of a tree the scheduler has not read yet") {
		t.Errorf("a group naming a parent: %+v", p)
	}
	if reason, _ := HoldBack(nil, p, "", nil); reason != ReasonParentNotFound {
		t.Errorf("held back for %q, want %q", reason, ReasonParentNotFound)
	}
}

// TestJobLeavesBut: a group's job is its topmost gang composite's groups, not every group of the
// tree (a basic composite above holds other jobs); a group in no job or no tree has none.
func TestJobLeavesBut(t *testing.T) {
	mixed := []Node{basicOf("root", ""), gangOf("x", "root", 2), group("a", "x", 1), group("b", "x", 1), group("c", "root", 2)}
	for _, tc := range []struct {
		name, leaf string
		want       []string
	}{
		{name: "under a gang composite: its other groups", leaf: "a", want: []string{"ns/b"}},
		{name: "under a basic composite only: no job", leaf: "c"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			root, p := index(mixed...).Resolve(ns, tc.leaf)
			if p != nil {
				t.Fatal(p)
			}
			if got := Keys(root.JobLeavesBut(ns+"/"+tc.leaf, tc.leaf)); strings.Join(got, ",") != strings.Join(tc.want, ",") {
				t.Errorf("JobLeavesBut = %v, want %v", got, tc.want)
			}
		})
	}
	var none *Branch
	if none.JobLeavesBut("ns/a", "a") != nil || none.LeavesBut("a") != nil {
		t.Errorf("a group in no tree has other groups")
	}
}

// Of K of N alike composites, the choice takes first a composite one of whose groups prefer names (a
// group holding nominations or a reservation), whatever the others' counts.
func TestNeededPreferringComposites(t *testing.T) {
	x := index(gangOf("set", "", 2),
		gangOf("rep-0", "set", 2), group("lead-0", "rep-0", 1), group("work-0", "rep-0", 2),
		gangOf("rep-1", "set", 2), group("lead-1", "rep-1", 1), group("work-1", "rep-1", 2),
		gangOf("rep-2", "set", 2), group("lead-2", "rep-2", 1), group("work-2", "rep-2", 2))
	root, p := x.Resolve(ns, "lead-0")
	if p != nil {
		t.Fatal(p)
	}
	cnt := counts(map[string]int{"lead-1": 1, "work-1": 1})
	for _, tc := range []struct {
		prefer string
		want   []string
	}{
		{prefer: "", want: []string{"ns/work-1", "ns/work-0"}},
		{prefer: "ns/work-2", want: []string{"ns/lead-2", "ns/work-2", "ns/work-0"}},
		{prefer: "ns/lead-1", want: []string{"ns/work-1", "ns/work-0"}},
	} {
		got, ok := root.NeededPreferring(ns+"/lead-0", cnt, func(key string) bool { return key == tc.prefer })
		if !ok || !slices.Equal(Keys(got.Groups), tc.want) {
			t.Errorf("preferring %q: %v, %v; want %v", tc.prefer, Keys(got.Groups), ok, tc.want)
		}
	}
}
