package tree

import "testing"

// TestOfGroup: a group the Index resolves keeps its tree or problem; one it does not have is in no
// tree, unless its own object links it into one (not read yet).
func TestOfGroup(t *testing.T) {
	x := index(gangOf("job", "", 2), group("a", "job", 2), group("b", "job", 2), group("orphan", "missing", 2))
	for _, tc := range []struct {
		name        string
		n           Node
		wantRoot    string
		wantProblem string
	}{
		{name: "resolved", n: group("a", "job", 2), wantRoot: "job"},
		{name: "a missing parent", n: group("orphan", "missing", 2), wantProblem: ReasonParentNotFound},
		{name: "in no tree", n: group("alone", "", 2)},
		{name: "linked, not read yet", n: group("late", "job", 2), wantProblem: ReasonParentNotFound},
	} {
		r, p := x.Resolve(ns, tc.n.Name)
		root, problem := OfGroup(r, p, tc.n)
		gotRoot, gotProblem := "", ""
		if root != nil {
			gotRoot = root.Name
		}
		if problem != nil {
			gotProblem = problem.Reason
		}
		if gotRoot != tc.wantRoot || gotProblem != tc.wantProblem {
			t.Errorf("%s: OfGroup = %q, %q; want %q, %q", tc.name, gotRoot, gotProblem, tc.wantRoot, tc.wantProblem)
		}
	}
}

// TestShort: a group is short while a gang composite above it is not ready, or its tree cannot be
// resolved; never in no tree.
func TestShort(t *testing.T) {
	x := index(gangOf("job", "", 2), group("a", "job", 2), group("b", "job", 2))
	root, _ := x.Resolve(ns, "a")
	for _, tc := range []struct {
		name   string
		root   *Branch
		p      *Problem
		counts map[string]int
		want   bool
	}{
		{name: "in no tree"},
		{name: "its tree unread", p: Unread(group("a", "job", 2)), want: true},
		{name: "a sibling short", root: root, counts: map[string]int{"a": 2, "b": 1}, want: true},
		{name: "the job ready", root: root, counts: map[string]int{"a": 2, "b": 2}},
	} {
		if got := Short(tc.root, tc.p, ns+"/a", counts(tc.counts)); got != tc.want {
			t.Errorf("%s: Short = %v, want %v", tc.name, got, tc.want)
		}
	}
}
