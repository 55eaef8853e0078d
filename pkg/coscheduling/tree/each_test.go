package tree

import (
	"fmt"
	"slices"
	"testing"
)

// NeededEach: every way to make a leaf's job ready, for the choices Needed cannot make.
func TestNeededEach(t *testing.T) {
	// Three replicas of a leader group and a worker group of 1, 2 and 3 workers: the set needs 2.
	unlike := []Node{gangOf("set", "", 2),
		gangOf("rep-0", "set", 2), group("lead-0", "rep-0", 1), group("work-0", "rep-0", 1),
		gangOf("rep-1", "set", 2), group("lead-1", "rep-1", 1), group("work-1", "rep-1", 2),
		gangOf("rep-2", "set", 2), group("lead-2", "rep-2", 1), group("work-2", "rep-2", 3)}
	minimums := []Node{gangOf("root", "", 2), group("a", "root", 2), group("b", "root", 3), group("c", "root", 2)}
	// Needs 2 of 4 groups of different minimums beside a: C(3,2) = 3 ways.
	four := []Node{gangOf("root", "", 3), group("a", "root", 2), group("b", "root", 3), group("c", "root", 4), group("d", "root", 5)}
	for _, tc := range []struct {
		name   string
		nodes  []Node
		leaf   string
		counts map[string]int
		prefer string
		limit  int
		want   [][]string
	}{
		{name: "replicas not alike: each other replica whole, by name", nodes: unlike, leaf: "lead-2",
			want: [][]string{{"lead-0", "work-0", "work-2"}, {"lead-1", "work-1", "work-2"}}},
		{name: "the replica closest to ready first", nodes: unlike, leaf: "lead-2", counts: map[string]int{"work-1": 1},
			want: [][]string{{"lead-1", "work-1", "work-2"}, {"lead-0", "work-0", "work-2"}}},
		{name: "the preferred replica first", nodes: unlike, leaf: "lead-2", counts: map[string]int{"work-1": 1}, prefer: "work-0",
			want: [][]string{{"lead-0", "work-0", "work-2"}, {"lead-1", "work-1", "work-2"}}},
		{name: "a whole replica: nothing to choose", nodes: unlike, leaf: "lead-2", counts: map[string]int{"lead-0": 1, "work-0": 1},
			want: [][]string{{"work-2"}}},
		{name: "groups of different minimums", nodes: minimums, leaf: "a", want: [][]string{{"b"}, {"c"}}},
		{name: "two of three, in combination order", nodes: four, leaf: "a", want: [][]string{{"b", "c"}, {"b", "d"}, {"c", "d"}}},
		{name: "at most limit", nodes: four, leaf: "a", limit: 2, want: [][]string{{"b", "c"}, {"b", "d"}}},
		{name: "too few children: none", nodes: []Node{gangOf("root", "", 3), group("a", "root", 2), group("b", "root", 2)}, leaf: "a"},
		{name: "a group in no composite: one way, nothing with it", nodes: []Node{group("a", "", 2)}, leaf: "a", want: [][]string{nil}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			root, p := index(tc.nodes...).Resolve(ns, tc.leaf)
			if p != nil {
				t.Fatalf("Resolve: %v", p)
			}
			if root == nil {
				root = &Branch{Node: tc.nodes[0]}
			}
			limit := tc.limit
			if limit == 0 {
				limit = 8
			}
			ways := root.NeededEach(ns+"/"+tc.leaf, counts(tc.counts), func(key string) bool { return key == ns+"/"+tc.prefer }, limit)
			var got [][]string
			for _, w := range ways {
				var names []string
				for _, n := range w {
					names = append(names, n.Name)
				}
				got = append(got, names)
			}
			if !slices.EqualFunc(got, tc.want, slices.Equal) {
				t.Errorf("ways %v, want %v", got, tc.want)
			}
		})
	}
}

// The first way is Needed's pick, where Needed can make it (children alike).
func TestNeededEachFirstIsNeeded(t *testing.T) {
	composites := []Node{gangOf("set", "", 2)}
	for i := range 3 {
		r := fmt.Sprintf("rep-%d", i)
		composites = append(composites, gangOf(r, "set", 2), group(fmt.Sprintf("lead-%d", i), r, 1), group(fmt.Sprintf("work-%d", i), r, 2))
	}
	root, _ := index(composites...).Resolve(ns, "lead-0")
	for _, c := range []map[string]int{nil, {"work-2": 1}, {"lead-1": 1, "work-2": 2}} {
		needed, ok := root.Needed(ns+"/lead-0", counts(c))
		ways := root.NeededEach(ns+"/lead-0", counts(c), nil, 8)
		if !ok || len(ways) != 2 {
			t.Fatalf("counts %v: Needed ok %v, %d ways; want ok and 2 ways", c, ok, len(ways))
		}
		got, want := Keys(ways[0]), Keys(needed.Groups)
		slices.Sort(got)
		slices.Sort(want)
		if !slices.Equal(got, want) {
			t.Errorf("counts %v: first way %v, Needed %v", c, got, want)
		}
	}
}

func TestCombinations(t *testing.T) {
	var got [][]int
	combinations(4, 2, func(c []int) bool { got = append(got, slices.Clone(c)); return true })
	want := [][]int{{0, 1}, {0, 2}, {0, 3}, {1, 2}, {1, 3}, {2, 3}}
	if !slices.EqualFunc(got, want, slices.Equal) {
		t.Errorf("combinations(4, 2) = %v, want %v", got, want)
	}
	n := 0
	combinations(10, 3, func([]int) bool { n++; return n < 5 })
	if n != 5 {
		t.Errorf("combinations stopped after %d calls, want 5", n)
	}
}
