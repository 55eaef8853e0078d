package tree

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
)

// A choice of K of N (see Needed.pick): among PodGroups of one minimum (LeaderWorkerSet's replicas,
// each one group), or among alike composites (replicas each made of groups, as a leader group and a
// worker group). Composites are alike when their shapes are equal (shapeOf): the same policy (Gang,
// Min), the same required and preferred keys, and children alike in turn, in shape order. Their leaf
// groups are paired by position in shape order, and the choice is recorded as one set per position
// (the first leaf of each composite, the second of each, ...): the check takes a chosen composite's
// groups for the others' when each set's members are alike (gangfit.AlikeGroups), as for groups.

// shaped is a branch's shape and its PodGroups in shape order.
type shaped struct {
	shape  string
	leaves []Node
}

// shapeOf is b's shape: a PodGroup's policy and minimum; a composite's policy, minimum, required and
// preferred keys and its children's shapes, its children in shape order (by shape, then by name,
// so that a leader group of minimum 1 pairs with the other replicas' leaders whatever their names).
// With it, b's PodGroups in that order. O(b's subtree × log).
func shapeOf(b *Branch) shaped {
	if !b.Composite {
		return shaped{shape: fmt.Sprintf("g(%v,%d)", b.Gang, b.Min), leaves: []Node{b.Node}}
	}
	type child struct {
		name string
		shaped
	}
	cs := make([]child, len(b.Children))
	for i, c := range b.Children {
		cs[i] = child{name: c.Name, shaped: shapeOf(c)}
	}
	slices.SortStableFunc(cs, func(x, y child) int {
		return cmp.Or(strings.Compare(x.shape, y.shape), strings.Compare(x.name, y.name))
	})
	var sb strings.Builder
	fmt.Fprintf(&sb, "c(%v,%d,%q,%q)[", b.Gang, b.Min, b.Domain, strings.Join(b.Preferred, ","))
	var leaves []Node
	for i, c := range cs {
		if i > 0 {
			sb.WriteByte(',')
		}
		sb.WriteString(c.shape)
		leaves = append(leaves, c.leaves...)
	}
	sb.WriteByte(']')
	return shaped{shape: sb.String(), leaves: leaves}
}

// choiceAmong is the record of a choice among the short branches: for PodGroups of one minimum, one
// set of them; for alike composites, one set per leaf position in shape order. ok is false when the
// branches are neither (groups of several minimums, a group beside a composite, composites of
// different shapes).
func choiceAmong(short []*Branch) (sets [][]Node, ok bool) {
	if !short[0].Composite {
		var among []Node
		for _, s := range short {
			if s.Composite || s.Min != short[0].Min {
				return nil, false
			}
			among = append(among, s.Node)
		}
		return [][]Node{among}, true
	}
	first := shapeOf(short[0])
	sets = make([][]Node, len(first.leaves))
	for _, s := range short {
		if !s.Composite {
			return nil, false
		}
		sh := first
		if s != short[0] {
			sh = shapeOf(s)
		}
		if sh.shape != first.shape { // one shape: as many leaves, in the same order of shapes
			return nil, false
		}
		for i, l := range sh.leaves {
			sets[i] = append(sets[i], l)
		}
	}
	if len(first.leaves) == 0 {
		return nil, false // composites with no groups: nothing stands for anything
	}
	return sets, true
}

// preferred reports whether prefer names b or one of its PodGroups.
func (n *Needed) preferred(b *Branch) bool {
	if n.prefer == nil {
		return false
	}
	if !b.Composite {
		return n.prefer(b.Key())
	}
	return slices.ContainsFunc(b.Leaves(), func(l Node) bool { return n.prefer(l.Key()) })
}

// progress is how close b is to ready: a PodGroup's count; a composite's, its PodGroups' counts,
// each up to its minimum (members beyond a group's minimum bring its composite no closer).
func progress(b *Branch, count func(key string) int) int {
	if !b.Composite {
		return count(b.Key())
	}
	sum := 0
	for _, l := range b.Leaves() {
		sum += min(count(l.Key()), l.Min)
	}
	return sum
}

// choose returns the lacking of short (in name order) the choice takes: the first of them in
// ordered's order.
func (n *Needed) choose(short []*Branch, lacking int, count func(key string) int) []*Branch {
	return n.ordered(short, count)[:lacking]
}

// ordered is short (in name order) in the order a choice takes them: those prefer names (a
// composite: one of its groups) first, then those closest to ready (progress), then by name.
func (n *Needed) ordered(short []*Branch, count func(key string) int) []*Branch {
	short = slices.Clone(short)
	slices.SortStableFunc(short, func(a, b *Branch) int {
		if pa, pb := n.preferred(a), n.preferred(b); pa != pb {
			if pa {
				return -1
			}
			return 1
		}
		return progress(b, count) - progress(a, count)
	})
	return short
}
