package gang

import (
	"fmt"
	"testing"

	v1 "k8s.io/api/core/v1"

	"github.com/custom-scheduler/custom-scheduler/pkg/coscheduling/tree"
)

// benchTreeJob is a job of three roles (8 + 16 + 2 members, the benchmark's) on 100 nodes, the
// PreFilter input of the first role's member.
func benchTreeJob(b *testing.B) (*Gang, PreFilterIn) {
	x := tree.NewIndex()
	x.Set(tree.Node{Namespace: "ns", Name: "job", Composite: true, Gang: true, Min: 3})
	pods := map[string][]*v1.Pod{}
	for name, n := range map[string]int{"a": 8, "b": 16, "c": 2} {
		x.Set(tree.Node{Namespace: "ns", Name: name, Gang: true, Min: n, Parent: "job"})
		pods[name] = role(name, n, "1")
	}
	root, p := x.Resolve("ns", "a")
	if p != nil {
		b.Fatal(p)
	}
	var names []string
	for i := range 100 {
		names = append(names, fmt.Sprint("n", i))
	}
	g := New("ns", "a", "uid")
	return g, treeIn(g, pods["a"][0], 8, cpuNodes("8", names...), map[string]*Gang{g.Key(): g}, root, pods)
}

// BenchmarkPreFilterTreeCached is a tree job's member's PreFilter answered by its group's cached
// check (the members after the first of a burst), FeasibilityKey.Job included.
func BenchmarkPreFilterTreeCached(b *testing.B) {
	g, in := benchTreeJob(b)
	if out := g.PreFilter(in); out.Reject {
		b.Fatalf("refused: %s", out.Message)
	}
	b.ReportAllocs()
	for b.Loop() {
		g.PreFilter(in)
	}
}

// BenchmarkJobMembers is FeasibilityKey.Job's part of it.
func BenchmarkJobMembers(b *testing.B) {
	g, in := benchTreeJob(b)
	root := in.tree()
	b.ReportAllocs()
	for b.Loop() {
		in.jobMembers(root, g.Key())
	}
}
