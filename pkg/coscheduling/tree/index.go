package tree

import (
	"fmt"
	"strings"
	"sync"
)

// Index holds the nodes the informers last showed, with each parent's children, so that a group's
// tree is resolved in O(its size). Safe for concurrent use; Set and Delete are the informer
// handlers' (O(1)), Resolve the scheduling cycle's.
type Index struct {
	mu       sync.RWMutex
	nodes    map[string]Node
	children map[string]map[string]struct{} // parent key -> child keys
	// linked counts the nodes that are part of a tree: while it is 0, Resolve answers at once.
	linked int
}

// NewIndex returns an empty index.
func NewIndex() *Index {
	return &Index{nodes: map[string]Node{}, children: map[string]map[string]struct{}{}}
}

func parentKey(n Node) string { return n.Namespace + "/" + n.Parent }

// Set records n (a new object, or a new version of one).
func (x *Index) Set(n Node) {
	x.mu.Lock()
	defer x.mu.Unlock()
	x.deleteLocked(n.Key())
	x.nodes[n.Key()] = n
	if n.Linked() {
		x.linked++
	}
	if n.Parent != "" {
		p := parentKey(n)
		if x.children[p] == nil {
			x.children[p] = map[string]struct{}{}
		}
		x.children[p][n.Key()] = struct{}{}
	}
}

// Delete forgets the node of namespace/name.
func (x *Index) Delete(namespace, name string) {
	x.mu.Lock()
	defer x.mu.Unlock()
	x.deleteLocked(namespace + "/" + name)
}

func (x *Index) deleteLocked(key string) {
	old, ok := x.nodes[key]
	if !ok {
		return
	}
	delete(x.nodes, key)
	if old.Linked() {
		x.linked--
	}
	if old.Parent != "" {
		p := parentKey(old)
		delete(x.children[p], key)
		if len(x.children[p]) == 0 {
			delete(x.children, p)
		}
	}
}

// Empty reports whether no node is part of a tree (the common case: flat gangs only).
func (x *Index) Empty() bool {
	x.mu.RLock()
	defer x.mu.RUnlock()
	return x.linked == 0
}

// Resolve returns the tree of the PodGroup namespace/name: nil when the group is in no tree (or not
// known), else the root's branch, or the Problem that keeps it from being resolved. O(the tree).
func (x *Index) Resolve(namespace, name string) (*Branch, *Problem) {
	x.mu.RLock()
	defer x.mu.RUnlock()
	if x.linked == 0 {
		return nil, nil
	}
	n, ok := x.nodes[namespace+"/"+name]
	if !ok || !n.Linked() {
		return nil, nil
	}
	root, p := x.rootLocked(n)
	if p != nil {
		return nil, p
	}
	b, p := x.branchLocked(root, 0, map[string]bool{})
	return b, p
}

// rootLocked walks up from n to its root, checking each link.
func (x *Index) rootLocked(n Node) (Node, *Problem) {
	seen := map[string]bool{n.Key(): true}
	for depth := 0; ; depth++ {
		if n.Invalid != "" {
			return n, invalid("%s %s: %s", kind(n), n.Name, n.Invalid)
		}
		if n.Parent == "" {
			return n, nil
		}
		if depth == MaxDepth {
			return n, invalid("group %s is more than %d composites deep", n.Name, MaxDepth)
		}
		parentInTree := strings.HasPrefix(n.Parent, InTreeCompositePrefix)
		if parentInTree != n.InTree() {
			return n, invalid("%s %s names parent %s of the other API: a PodGroup of %s has a parent of its own API, an in-tree one a CompositePodGroup",
				kind(n), n.Name, n.Parent, "scheduling.x-k8s.io")
		}
		p, ok := x.nodes[parentKey(n)]
		if !ok {
			return n, &Problem{Reason: ReasonParentNotFound, Message: fmt.Sprintf("%s %s names parent %s, which does not exist", kind(n), n.Name, n.Parent)}
		}
		if !p.Composite {
			return n, invalid("%s %s names parent %s, which is not a composite (annotate it with %s or %s)", kind(n), n.Name, n.Parent, AnnotationMinGroupCount, AnnotationComposite)
		}
		if seen[p.Key()] {
			return n, invalid("the parents of %s run in a cycle through %s", n.Name, p.Name)
		}
		seen[p.Key()] = true
		n = p
	}
}

// branchLocked builds the branch of n with its children, depth composites below the root.
func (x *Index) branchLocked(n Node, depth int, seen map[string]bool) (*Branch, *Problem) {
	b := &Branch{Node: n}
	if !n.Composite {
		return b, nil
	}
	if depth > MaxDepth {
		return nil, invalid("composite %s is more than %d composites deep", n.Name, MaxDepth)
	}
	seen[n.Key()] = true
	for key := range x.children[n.Key()] {
		if seen[key] {
			return nil, invalid("the parents of %s run in a cycle", x.nodes[key].Name)
		}
		c, p := x.branchLocked(x.nodes[key], depth+1, seen)
		if p != nil {
			return nil, p
		}
		b.Children = append(b.Children, c)
	}
	sortChildren(b.Children)
	return b, nil
}

func invalid(format string, args ...any) *Problem {
	return &Problem{Reason: ReasonInvalidTree, Message: fmt.Sprintf(format, args...)}
}

func kind(n Node) string {
	if n.Composite {
		return "composite"
	}
	return "PodGroup"
}

// Under returns the PodGroups below the composite namespace/name, at any depth (it need not exist).
func (x *Index) Under(namespace, name string) []Node {
	x.mu.RLock()
	defer x.mu.RUnlock()
	var out []Node
	seen := map[string]bool{}
	var walk func(key string)
	walk = func(key string) {
		if seen[key] {
			return
		}
		seen[key] = true
		for c := range x.children[key] {
			if n := x.nodes[c]; n.Composite {
				walk(c)
			} else {
				out = append(out, n)
			}
		}
	}
	walk(namespace + "/" + name)
	return out
}

// Children returns the groups directly below the composite namespace/name (PodGroups and composites),
// in no order.
func (x *Index) Children(namespace, name string) []Node {
	x.mu.RLock()
	defer x.mu.RUnlock()
	kids := x.children[namespace+"/"+name]
	out := make([]Node, 0, len(kids))
	for c := range kids {
		if n, ok := x.nodes[c]; ok {
			out = append(out, n)
		}
	}
	return out
}

// Unit is the composite whose whole tree preemption evicts together with the group namespace/name:
// the topmost gang composite above it (evicting less could leave a gang composite short of its
// minGroupCount); false when no gang composite is above it (the group is a unit of its own).
// O(the depth).
func (x *Index) Unit(namespace, name string) (string, bool) {
	x.mu.RLock()
	defer x.mu.RUnlock()
	if x.linked == 0 {
		return "", false
	}
	n, ok := x.nodes[namespace+"/"+name]
	unit := ""
	for depth := 0; ok && n.Parent != "" && depth <= MaxDepth; depth++ {
		if n, ok = x.nodes[parentKey(n)]; ok && n.Composite && n.Gang {
			unit = n.Name
		}
	}
	return unit, unit != ""
}
