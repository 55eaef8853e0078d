package gangctl

import (
	"fmt"
	"slices"
	"strings"

	"github.com/custom-scheduler/custom-scheduler/pkg/apis/scheduling/v1alpha1"
	"github.com/custom-scheduler/custom-scheduler/pkg/coscheduling/podgroup"
	"github.com/custom-scheduler/custom-scheduler/pkg/coscheduling/tree"
)

// Jobs of several roles (see docs/coscheduling/gang-groups.md): PodGroups under composites, read from
// the annotations of the PodGroups listed in a namespace and resolved by package tree, as the
// scheduler resolves them. kubectl gang says a group is whole when minMember of its live members are
// bound (a finished group was whole), and a gang composite when minGroupCount of its children are.

// WaitsForGroups: a composite short of whole children, or a group complete of its own whose job lacks
// other groups (the scheduler holds its members back: WaitingForGroups).
const WaitsForGroups = "Groups"

// WaitsForGroupTree: the group's tree cannot be resolved (a parent missing, a cycle, malformed
// annotations): its members wait, holding nothing, until the objects are fixed.
const WaitsForGroupTree = "GroupTree"

// TreeNode is one group of a job's tree, as -o json prints it.
type TreeNode struct {
	Name string `json:"name"`
	// Composite: a group of groups; Policy is its kind (Gang or Basic).
	Composite bool                   `json:"composite,omitempty"`
	Policy    string                 `json:"policy,omitempty"`
	Phase     v1alpha1.PodGroupPhase `json:"phase"`
	// Bound and Min: a PodGroup's live members bound and its minMember; a composite's whole children
	// and its minGroupCount (1 for a basic one).
	Bound int32 `json:"bound"`
	Min   int32 `json:"min"`
	// Whole: Bound reaches Min (a finished PodGroup counts as whole).
	Whole      bool       `json:"whole"`
	WaitingFor string     `json:"waitingFor,omitempty"`
	Short      string     `json:"short,omitempty"`
	Children   []TreeNode `json:"children,omitempty"`
}

// TreeProblem is why a group's tree cannot be resolved (tree.Problem).
type TreeProblem struct {
	Reason  string `json:"reason"`
	Message string `json:"message"`
}

// Blocker is a group that keeps its job from being whole: a PodGroup short of its minMember, with
// what its own summary says it waits for and what would unblock it, or a composite short of its
// minGroupCount.
type Blocker struct {
	Name      string `json:"name"`
	Composite bool   `json:"composite,omitempty"`
	Bound     int32  `json:"bound"`
	Min       int32  `json:"min"`
	// Needs is, for a composite, how many more of its children must be whole.
	Needs      int32    `json:"needs,omitempty"`
	WaitingFor string   `json:"waitingFor,omitempty"`
	Short      string   `json:"short,omitempty"`
	Unblock    []string `json:"unblock,omitempty"`
	// Message, for an in-tree PodGroup (whose status has no shortfall to say what would unblock it),
	// is why it waits as the scheduler said it (see deriveInTree).
	Message string `json:"message,omitempty"`
}

// treeNode is a PodGroup's node, as the scheduler reads it (an in-tree basic group is no gang).
func treeNode(pg *v1alpha1.PodGroup) tree.Node {
	return tree.FromPodGroup(pg, podgroup.MinMember(pg), pg.Annotations[podgroup.AnnotationPolicy] != "Basic")
}

// inTree reports whether pg takes part in a tree by its annotations (it names a parent, or is a
// composite, or tries to be one).
func inTree(pg *v1alpha1.PodGroup) bool {
	_, parent := pg.Annotations[tree.AnnotationParent]
	_, count := pg.Annotations[tree.AnnotationMinGroupCount]
	_, policy := pg.Annotations[tree.AnnotationComposite]
	return parent || count || policy
}

// AttachTrees gives each summary of a group in a tree (sums are of pgs, in any order; pgs are every
// PodGroup of the namespaces concerned) its parent, its job's tree or the problem that keeps it from
// being resolved, and the blockers of its job; a composite's summary says how many of its children
// are whole, and a group held back for its job's other groups says so. Summaries of groups in no tree
// are left as they are. Pure.
func AttachTrees(pgs []v1alpha1.PodGroup, sums []Summary) {
	attachTrees(groups{pgs: pgs}.nodes(), sums)
}

// attachTrees is AttachTrees over the groups' nodes (PodGroups of ours, in-tree PodGroups and
// CompositePodGroups alike, as the scheduler's index holds them).
func attachTrees(all []tree.Node, sums []Summary) {
	if !slices.ContainsFunc(all, func(n tree.Node) bool { return n.Linked() || n.Invalid != "" }) {
		return
	}
	x := tree.NewIndex()
	nodes := map[string]tree.Node{}
	for _, n := range all {
		x.Set(n)
		nodes[n.Key()] = n
	}
	at := map[string]*Summary{}
	for i := range sums {
		at[sums[i].Namespace+"/"+sums[i].Name] = &sums[i]
	}
	flat := map[string]Summary{} // each summary as Summarize made it, before the tree's overrides
	for k, s := range at {
		flat[k] = *s
	}
	// whole counts what makes a group whole: its live members bound (kubectl gang's rule), or its
	// live members not gated (the scheduler's count before an attempt, PreEnqueue's); a finished group
	// was whole.
	whole := func(bound bool) func(string) int {
		return func(key string) int {
			s, ok := flat[key]
			switch {
			case !ok:
				return 0
			case s.Phase == v1alpha1.PodGroupFinished:
				return nodes[key].Min
			case bound:
				return int(s.Bound)
			}
			return int(s.Live - s.Gated)
		}
	}
	bound, existing := whole(true), whole(false)
	roots := map[string]*tree.Branch{}
	// First what each PodGroup waits for, its tree considered; then the trees, which show it.
	for key, s := range at {
		n, ok := nodes[key]
		if !ok || !n.Linked() && n.Invalid == "" {
			continue
		}
		s.Parent = n.Parent
		root, p := x.Resolve(s.Namespace, s.Name)
		if p == nil && root == nil && n.Invalid != "" {
			// Malformed annotations on a group the index keeps out of every tree.
			p = &tree.Problem{Reason: tree.ReasonInvalidTree, Message: fmt.Sprintf("PodGroup %s: %s", n.Name, n.Invalid)}
		}
		switch {
		case p != nil:
			s.TreeProblem = &TreeProblem{Reason: p.Reason, Message: p.Message}
			if held(*s) {
				s.WaitingFor, s.Short = WaitsForGroupTree, p.Reason+": "+p.Message
			}
		case root != nil:
			roots[key] = root
			// Complete of its own, held back for the others (a group short of its own members waits
			// for them first, as its own summary says).
			if !n.Composite && held(*s) && existing(key) >= n.Min && !root.Admits(key, existing) {
				s.WaitingFor = WaitsForGroups
				s.Short = "waits for the job's other groups: " + strings.Join(root.Short(existing), "; ")
			}
		}
	}
	now := map[string]Summary{}
	for k, s := range at {
		now[k] = *s
	}
	type job struct {
		tree     *TreeNode
		blockers []Blocker
	}
	jobs := map[string]job{} // by the root's key: each tree once
	for key, root := range roots {
		s, n := at[key], nodes[key]
		j, ok := jobs[root.Key()]
		if !ok {
			t := treeOf(root, now, bound)
			j = job{&t, blockers(root, now, bound)}
			jobs[root.Key()] = j
		}
		s.Root, s.Tree, s.Blockers = root.Name, j.tree, j.blockers
		t := *j.tree
		if n.Composite {
			self := find(t, n.Name)
			s.Composite = &Composite{Policy: self.Policy, MinGroupCount: self.Min, Children: int32(len(self.Children)), Whole: self.Bound}
			s.Phase, s.WaitingFor, s.Short = self.Phase, self.WaitingFor, self.Short
		}
	}
}

// held reports whether a group is still to be placed (not running, finished or failed, short of its
// minMember bound, holding no reservation): what its tree says then decides what it waits for.
func held(s Summary) bool {
	switch s.Phase {
	case v1alpha1.PodGroupFinished, v1alpha1.PodGroupFailed, v1alpha1.PodGroupRunning:
		return false
	}
	return s.Bound < s.MinMember && (s.Reservation == nil || !s.Reservation.Status)
}

func find(t TreeNode, name string) TreeNode {
	if t.Name == name {
		return t
	}
	for _, c := range t.Children {
		if f := find(c, name); f.Name != "" {
			return f
		}
	}
	return TreeNode{}
}

// policy is a composite's kind.
func policy(n tree.Node) string {
	if n.Gang {
		return "Gang"
	}
	return "Basic"
}

// treeOf is b's tree with each group's numbers: a PodGroup's from its summary, a composite's from
// its children.
func treeOf(b *tree.Branch, sums map[string]Summary, bound func(string) int) TreeNode {
	if !b.Composite {
		s := sums[b.Key()]
		return TreeNode{Name: b.Name, Phase: s.Phase, Bound: int32(bound(b.Key())), Min: int32(b.Min),
			Whole: b.Ready(bound), WaitingFor: s.WaitingFor, Short: s.Short}
	}
	t := TreeNode{Name: b.Name, Composite: true, Policy: policy(b.Node), Min: int32(b.Min), Whole: b.Ready(bound)}
	finished, running := len(b.Children) > 0, len(b.Children) > 0
	for _, c := range b.Children {
		ct := treeOf(c, sums, bound)
		if ct.Whole {
			t.Bound++
		}
		finished = finished && ct.Phase == v1alpha1.PodGroupFinished
		running = running && (ct.Phase == v1alpha1.PodGroupRunning || ct.Phase == v1alpha1.PodGroupFinished)
		t.Children = append(t.Children, ct)
	}
	// A composite has no phase of its own: its children's, or Scheduled once it is whole.
	switch {
	case finished:
		t.Phase = v1alpha1.PodGroupFinished
	case running && t.Whole:
		t.Phase = v1alpha1.PodGroupRunning
	case t.Whole:
		t.Phase = v1alpha1.PodGroupScheduled
	default:
		t.Phase = v1alpha1.PodGroupPending
	}
	switch {
	case !b.Gang:
		t.WaitingFor, t.Short = WaitsForNothing, fmt.Sprintf("basic: %d of %d groups whole, each placed on its own", t.Bound, len(b.Children))
	case t.Whole:
		t.WaitingFor, t.Short = WaitsForNothing, fmt.Sprintf("%d of minGroupCount %d groups whole", t.Bound, b.Min)
	case len(b.Children) == 0:
		t.WaitingFor, t.Short = WaitsForGroups, fmt.Sprintf("no groups: minGroupCount %d", b.Min)
	default:
		var short []string
		for _, c := range t.Children {
			if !c.Whole {
				short = append(short, fmt.Sprintf("%s %d/%d", c.Name, c.Bound, c.Min))
			}
		}
		t.WaitingFor, t.Short = WaitsForGroups, fmt.Sprintf("%d of minGroupCount %d groups whole; short: %s", t.Bound, b.Min, strings.Join(short, ", "))
	}
	return t
}

// blockers are the groups that keep b from being whole, root first, as tree.Branch.Short walks
// them: each gang composite short of its minGroupCount, and under it each child that is not whole.
// A basic composite blocks nothing (its groups are placed each on its own), but its groups that are
// gangs may still be short of their own members.
func blockers(b *tree.Branch, sums map[string]Summary, bound func(string) int) []Blocker {
	if b.Ready(bound) {
		return nil
	}
	if !b.Composite {
		s := sums[b.Key()]
		k := Blocker{Name: b.Name, Bound: int32(bound(b.Key())), Min: int32(b.Min), WaitingFor: s.WaitingFor, Short: s.Short, Unblock: s.Unblock}
		if s.Derived {
			k.Message = s.Message
		}
		return []Blocker{k}
	}
	var out []Blocker
	whole := 0
	var below []Blocker
	for _, c := range b.Children {
		if c.Ready(bound) {
			whole++
			continue
		}
		below = append(below, blockers(c, sums, bound)...)
	}
	if b.Gang {
		out = append(out, Blocker{Name: b.Name, Composite: true, Bound: int32(whole), Min: int32(b.Min), Needs: int32(max(b.Min-whole, 0))})
	}
	return append(out, below...)
}

// treeRows are the names of t's groups as a table shows them, indented under their parents, with
// each group's key, depth first.
func treeRows(t TreeNode, prefix string, last, top bool) []treeRow {
	name := t.Name
	childPrefix := prefix
	if !top {
		glyph, more := "├─ ", "│  "
		if last {
			glyph, more = "└─ ", "   "
		}
		name = prefix + glyph + t.Name
		childPrefix = prefix + more
	}
	out := []treeRow{{label: name, name: t.Name}}
	for i, c := range t.Children {
		out = append(out, treeRows(c, childPrefix, i == len(t.Children)-1, false)...)
	}
	return out
}

type treeRow struct{ label, name string }
