package integration

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/custom-scheduler/custom-scheduler/pkg/coscheduling/tree"
)

// Upstream's CompositePodGroup scenarios (k8s.io/kubernetes v1.37.2,
// test/integration/scheduler/podgroup/cpg_test.go, TestCPGScheduling) against our scheduler with the
// shipped profile, on both APIs: our PodGroups with the tree annotations, and the in-tree
// CompositePodGroup (v1alpha3) over in-tree PodGroups. Each shape has a 20-CPU node of its own (its
// pods select it, as upstream's run each on one node); a member of 1 CPU fits, one of 100 CPU does
// not. A gang leaf has 3 members and minMember 3, a basic one 2 members (minMember 1 for ours, the
// basic policy in-tree). The tree invariant (watchTrees) and each gang leaf's (watchWhole) are
// watched throughout. Upstream's topology scenarios (cpg_tas_test.go) are TestGangGroupsInOneBlock
// and TestGangGroupsNestedDomains.

// upstreamShape is one scenario: its jobs, and the leaves that must end bound whole (the others
// must end with no member bound).
type upstreamShape struct {
	name  string
	job   *tnode
	bound []string
}

// gangLeaf is a gang leaf of 3 members of cpu each; basicLeaf a basic leaf of 2.
func gangLeaf(name string, cpu int) *tnode {
	return &tnode{name: name, min: 3, members: 3, cpu: cpu}
}

func basicLeaf(name string, cpu int) *tnode {
	return &tnode{name: name, min: 1, members: 2, cpu: cpu, basic: true}
}

func gangOver(name string, minGroupCount int, children ...*tnode) *tnode {
	return &tnode{name: name, composite: true, min: minGroupCount, children: children}
}

func basicOver(name string, children ...*tnode) *tnode {
	return &tnode{name: name, composite: true, basic: true, min: 1, children: children}
}

// upstreamShapes are TestCPGScheduling's static cases; (S) and (F) as upstream marks them.
func upstreamShapes() []upstreamShape {
	const fits, never = 1, 100
	return []upstreamShape{
		{name: "hierarchical", // root (gang 2): sub1 (gang 2: S S F), sub2 (basic: basic S, gang S), sub3 (gang 2: S F)
			job: gangOver("h", 2,
				gangOver("h-sub1", 2, gangLeaf("h-pg1", fits), gangLeaf("h-pg2", fits), gangLeaf("h-pg3", never)),
				basicOver("h-sub2", basicLeaf("h-pg4", fits), gangLeaf("h-pg5", fits)),
				gangOver("h-sub3", 2, gangLeaf("h-pg6", fits), gangLeaf("h-pg7", never))),
			bound: []string{"h-pg1", "h-pg2", "h-pg4", "h-pg5"}}, // pg6 fits but its parent does not
		{name: "minGroupCount", job: gangOver("m", 2, gangLeaf("m-pg1", fits), gangLeaf("m-pg2", fits), gangLeaf("m-pg3", never)),
			bound: []string{"m-pg1", "m-pg2"}},
		{name: "basic over gangs", job: basicOver("bg", gangLeaf("bg-pg1", fits), gangLeaf("bg-pg2", never)),
			bound: []string{"bg-pg1"}},
		{name: "basic over basics", job: basicOver("bb", basicLeaf("bb-pg1", fits), basicLeaf("bb-pg2", fits)),
			bound: []string{"bb-pg1", "bb-pg2"}},
		{name: "gang over basics", job: gangOver("gb", 2, basicLeaf("gb-pg1", fits), basicLeaf("gb-pg2", fits), basicLeaf("gb-pg3", never)),
			bound: []string{"gb-pg1", "gb-pg2"}},
		{name: "basic over unschedulable basics", job: basicOver("bu", basicLeaf("bu-pg1", never), basicLeaf("bu-pg2", never))},
	}
}

// treeAPI makes a tree's objects through one of the two APIs.
type treeAPI struct {
	name string
	// group makes group n under parent (nil: a root).
	group func(t *testing.T, ns string, n, parent *tnode)
	// pod is member i of leaf n, on the nodes labelled shape=node.
	pod func(ns string, n *tnode, i int, node string) *v1.Pod
	// key is a leaf's name as watchWhole reads it.
	key func(name string) string
}

var treeAPIs = []treeAPI{
	{name: "ours",
		group: func(t *testing.T, ns string, n, parent *tnode) {
			ann := map[string]string{}
			if parent != nil {
				ann[tree.AnnotationParent] = parent.name
			}
			minMember := int64(n.min)
			switch {
			case n.composite && n.basic:
				ann[tree.AnnotationComposite], minMember = "Basic", 1
			case n.composite:
				ann[tree.AnnotationMinGroupCount], minMember = fmt.Sprint(n.min), 1
			}
			createGroupIn(t, ns, n.name, minMember, ann)
		},
		pod: func(ns string, n *tnode, i int, node string) *v1.Pod {
			p := gangPod(ns, fmt.Sprintf("%s-%d", n.name, i), n.name, fmt.Sprint(n.cpu))
			p.Spec.NodeSelector = map[string]string{"shape": node}
			return p
		},
		key: func(name string) string { return name }},
	{name: "in-tree",
		group: func(t *testing.T, ns string, n, parent *tnode) {
			parentName := ""
			if parent != nil {
				parentName = parent.name
			}
			count := int32(n.min) // 0: basic
			if n.basic {
				count = 0
			}
			if n.composite {
				createComposite(t, ns, n.name, parentName, count)
				return
			}
			createInTreePodGroup(t, ns, n.name, inTreeChild(count, parentName, n.name)) // every leaf has a parent
		},
		pod: func(ns string, n *tnode, i int, node string) *v1.Pod {
			p := inTreePod(ns, fmt.Sprintf("%s-%d", n.name, i), n.name, fmt.Sprint(n.cpu))
			p.Spec.NodeSelector = map[string]string{"shape": node}
			return p
		},
		key: inTree},
}

// makeTree creates job (groups parents first, then the members) on the node labelled node, watching
// each gang leaf whole.
func makeTree(t *testing.T, api treeAPI, ns string, job *tnode, node string) {
	t.Helper()
	job.walk(nil, func(n, parent *tnode) {
		api.group(t, ns, n, parent)
		if !n.composite && !n.basic {
			watchWhole(t, ns, api.key(n.name), n.min, nil)
		}
	})
	job.walk(nil, func(n, _ *tnode) {
		for i := range n.members {
			createPod(t, api.pod(ns, n, i, node))
		}
	})
}

// expectBound waits until every leaf of want is bound whole (all its members), then checks for
// settle that they stay so and that the leaves in none stay with no member bound.
func expectBound(t *testing.T, ns string, leaves map[string]*tnode, want, none []string, settle time.Duration) {
	t.Helper()
	check := func(bound map[string]int) string {
		for _, name := range want {
			if bound[name] != leaves[name].members {
				return fmt.Sprintf("%s has %d of %d members bound", name, bound[name], leaves[name].members)
			}
		}
		for _, name := range none {
			if bound[name] != 0 {
				return fmt.Sprintf("%s has %d members bound, want none", name, bound[name])
			}
		}
		return ""
	}
	var last string
	waitFor(t, ns, fmt.Sprintf("%v bound whole and %v not", want, none), func(ctx context.Context) (bool, error) {
		bound, err := boundPerLeaf(ctx, ns)
		last = check(bound)
		return err == nil && last == "", err
	})
	consistently(t, settle, fmt.Sprintf("%v bound whole and %v not", want, none), func(ctx context.Context) (bool, error) {
		bound, err := boundPerLeaf(ctx, ns)
		if msg := check(bound); msg != "" {
			t.Logf("in %s: %s", ns, msg)
			return false, nil
		}
		return true, err
	})
}

// leavesOf indexes the leaves of jobs by name.
func leavesOf(jobs ...*tnode) map[string]*tnode {
	out := map[string]*tnode{}
	for _, j := range jobs {
		j.walk(nil, func(n, _ *tnode) {
			if !n.composite {
				out[n.name] = n
			}
		})
	}
	return out
}

// TestGangGroupsUpstreamShapes runs upstream's static scenarios, all at once, on each API, then its
// DynamicChildAddition: a basic root whose basic children are added one by one and bind as they
// come; a gang composite (minGroupCount 2) added under it with one basic child, which stays unbound;
// its second child, added later, and both bind.
func TestGangGroupsUpstreamShapes(t *testing.T) {
	startScheduler(t, schedulerConfig(t, adminKubeconfig, shippedProfiles(t)))
	for _, api := range treeAPIs {
		t.Run(api.name, func(t *testing.T) {
			t.Parallel()
			ns := testNamespace(t)
			var jobs []*tnode
			var want []string
			for _, shape := range upstreamShapes() {
				node := ns + "-" + shape.job.name
				createNode(t, node, "20", "8Gi", map[string]string{"shape": node})
				t.Logf("%s: %s", shape.name, shape.job)
				jobs = append(jobs, shape.job)
				want = append(want, shape.bound...)
			}
			watchTrees(t, ns, jobs)
			for _, job := range jobs {
				makeTree(t, api, ns, job, ns+"-"+job.name)
			}
			leaves := leavesOf(jobs...)
			none := slices.DeleteFunc(slices.Sorted(maps.Keys(leaves)), func(name string) bool { return slices.Contains(want, name) })
			expectBound(t, ns, leaves, want, none, 3*time.Second)

			// DynamicChildAddition, in a namespace of its own.
			ns = testNamespace(t)
			node := ns + "-d"
			createNode(t, node, "20", "8Gi", map[string]string{"shape": node})
			pg1, pg2, sub1, sub2 := basicLeaf("d-pg1", 1), basicLeaf("d-pg2", 1), basicLeaf("d-sub-pg1", 1), basicLeaf("d-sub-pg2", 1)
			sub := gangOver("d-sub", 2, sub1, sub2)
			root := basicOver("d", pg1, pg2, sub)
			watchTrees(t, ns, []*tnode{root})
			add := func(n, parent *tnode) {
				api.group(t, ns, n, parent)
				for i := range n.members {
					createPod(t, api.pod(ns, n, i, node))
				}
			}
			leaves = leavesOf(root)
			api.group(t, ns, root, nil)
			add(pg1, root)
			expectBound(t, ns, leaves, []string{"d-pg1"}, nil, 0)
			add(pg2, root)
			expectBound(t, ns, leaves, []string{"d-pg1", "d-pg2"}, nil, 0)
			api.group(t, ns, sub, root)
			add(sub1, sub)
			expectBound(t, ns, leaves, []string{"d-pg1", "d-pg2"}, []string{"d-sub-pg1"}, 3*time.Second)
			add(sub2, sub)
			expectBound(t, ns, leaves, []string{"d-pg1", "d-pg2", "d-sub-pg1", "d-sub-pg2"}, nil, 0)
		})
	}
}
