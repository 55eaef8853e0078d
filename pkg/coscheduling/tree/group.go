package tree

// A group's tree as the plugin reads it: resolved by an Index, or not read yet, and whether it lets
// the group through on its own quorum.

// OfGroup is the tree of group n as an Index resolved it (root, p): a group whose own object links it
// into a tree the Index does not have yet reads as that Problem (see Unread).
func OfGroup(root *Branch, p *Problem, n Node) (*Branch, *Problem) {
	if root == nil && p == nil {
		p = Unread(n)
	}
	return root, p
}

// Short reports whether the group keyed leaf, of the tree root (p: why it cannot be resolved, see
// OfGroup), may not pass on its own quorum: a gang composite above it is not ready with count (see
// Branch.Admits), or it is linked into a tree that cannot be resolved. A group in no tree is never
// short.
func Short(root *Branch, p *Problem, leaf string, count func(key string) int) bool {
	if root == nil {
		return p != nil
	}
	return !root.Admits(leaf, count)
}
