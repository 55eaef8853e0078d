package tree

import "slices"

// Every way to make a leaf's job ready (see Branch.NeededEach), for a choice Needed cannot make: K
// of N among children that are not alike (replicas of different sizes or shapes), where no child
// stands for another and the check must try them.

// maxCombinations bounds the combinations of children NeededEach looks at per choice, whether or
// not they give a way (a composite among them may have too few children).
const maxCombinations = 256

// NeededEach lists the ways to make every gang composite above the leaf keyed leaf ready with it,
// given count (see Needed): each the other PodGroups to place with it, with no choice left, what the
// composites on its path lack root first. Where a
// composite has more children short than it lacks, every combination of them is a way, those prefer
// names and those closest to ready first, then by name (the first way is the pick Needed would make,
// as groups, for children alike); the combinations are taken in that order. At most limit ways; none
// when the tree has too few children. Each choice looks at most maxCombinations combinations, each
// walking the chosen children's subtrees: O(maxCombinations × the tree) per choice, a choice nested
// in a chosen child again per combination.
func (b *Branch) NeededEach(leaf string, count func(key string) int, prefer func(key string) bool, limit int) [][]Node {
	n := &Needed{prefer: prefer}
	ways := [][]Node{nil}
	for _, c := range b.lacking(leaf, count) {
		if ways = product(ways, n.ways(c.short, c.lacking, count, limit), limit); len(ways) == 0 {
			return nil
		}
	}
	return ways
}

// ways are the ways to make lacking more of short ready (see NeededEach), at most limit.
func (n *Needed) ways(short []*Branch, lacking int, count func(key string) int, limit int) [][]Node {
	if lacking <= 0 {
		return [][]Node{nil}
	}
	if len(short) < lacking {
		return nil
	}
	ordered := short // all of them, in name order (as Needed takes them)
	if len(short) > lacking {
		ordered = n.ordered(short, count)
	}
	var out [][]Node
	looked := 0
	combinations(len(ordered), lacking, func(chosen []int) bool {
		way := [][]Node{nil}
		for _, i := range chosen {
			if way = product(way, n.waysOf(ordered[i], count, limit), limit); len(way) == 0 {
				break
			}
		}
		out = append(out, way[:min(len(way), limit-len(out))]...)
		looked++
		return len(out) < limit && looked < maxCombinations
	})
	return out
}

// waysOf are the ways to make s ready: a PodGroup itself; a composite, the ways to make as many of
// its children ready as it lacks.
func (n *Needed) waysOf(s *Branch, count func(key string) int, limit int) [][]Node {
	if !s.Composite {
		return [][]Node{{s.Node}}
	}
	below, lacking := s.unready(count)
	return n.ways(below, lacking, count, limit)
}

// product is every way of a followed by one of b, at most limit, a's order first.
func product(a, b [][]Node, limit int) [][]Node {
	var out [][]Node
	for _, x := range a {
		for _, y := range b {
			if len(out) == limit {
				return out
			}
			out = append(out, append(slices.Clone(x), y...))
		}
	}
	return out
}

// combinations calls yield with each k of 0..n-1, ascending, in lexicographic order, until it
// returns false.
func combinations(n, k int, yield func([]int) bool) {
	idx := make([]int, k)
	for i := range idx {
		idx[i] = i
	}
	for {
		if !yield(idx) {
			return
		}
		i := k - 1
		for i >= 0 && idx[i] == n-k+i {
			i--
		}
		if i < 0 {
			return
		}
		idx[i]++
		for j := i + 1; j < k; j++ {
			idx[j] = idx[j-1] + 1
		}
	}
}
