package gangfit

import "sort"

// Member packing: which members each node can take, first-fit decreasing, and what is left.

// usable reports, per node, whether some member may use it. One pass per distinct eligibility (the
// members of a gang usually share one), not per member.
func (f *Fit) usable() []bool {
	if f.homogeneous {
		return f.eligible.of(f.members[0].pod)
	}
	return f.usableBy(f.members)
}

// usableBy reports, per node, whether one of members may use it.
func (f *Fit) usableBy(members []gangMember) []bool {
	out := make([]bool, len(f.free))
	seen := map[*bool]bool{}
	for _, m := range members {
		elig := f.eligible.of(m.pod)
		if len(elig) == 0 || seen[&elig[0]] {
			continue
		}
		seen[&elig[0]] = true
		for i, ok := range elig {
			out[i] = out[i] || ok
		}
	}
	return out
}

// placeable returns how many of the gang's `need` members fit at once on the nodes at the given
// indexes of f.free (all nodes when idx is nil), at most need: exact for identical members, first-fit
// decreasing for mixed ones.
func (f *Fit) placeable(idx []int) int {
	placed := 0
	if f.homogeneous {
		elig := f.eligible.of(f.members[0].pod)
		eachNode(idx, len(f.free), func(i int) bool {
			if elig[i] && f.free[i].slots > 0 {
				placed += f.members[0].req.copies(f.free[i].free, f.free[i].slots)
			}
			return placed < f.need
		})
		return min(placed, f.need)
	}
	for _, node := range f.assign(idx) {
		if node >= 0 {
			placed++
		}
	}
	return placed
}

// assign places the gang's members first-fit decreasing (largest first, each on the first node with
// room) on the nodes at the given indexes of f.free (all nodes when idx is nil), and returns each
// member's node index (-1: no room), in the order of f.members.
func (f *Fit) assign(idx []int) []int {
	order := make([]int, len(f.members))
	for i := range order {
		order[i] = i
	}
	// Largest first; among members of one size, those that may use fewer nodes first.
	size, usable := make([][]float64, len(f.members)), make([]int, len(f.members))
	byClass := map[int]int{} // nodes usable per class of constraints: counted once per class
	for i, m := range f.members {
		size[i] = shares(m.req, f.totals)
		c := f.eligible.key(m.pod)
		n, ok := byClass[c]
		if !ok {
			for _, e := range f.eligible.of(m.pod) {
				if e {
					n++
				}
			}
			byClass[c] = n
		}
		usable[i] = n
	}
	sort.SliceStable(order, func(i, j int) bool {
		if c := bySize(size[order[i]], size[order[j]]); c != 0 {
			return c > 0
		}
		return usable[order[i]] < usable[order[j]]
	})
	out := make([]int, len(f.members))
	sim := map[int]freeNode{}
	// kinds counts, with joint devices, the members of each device kind put on a node.
	var kinds map[int][]int
	for _, mi := range order {
		m := f.members[mi]
		out[mi] = -1
		elig := f.eligible.of(m.pod)
		eachNode(idx, len(f.free), func(i int) bool {
			n, ok := sim[i]
			if !ok {
				n = f.free[i]
				n.free = n.free.clone()
			}
			if elig[i] && n.slots > 0 && m.req.fits(n.free) && f.devicesFit(i, kinds[i], m) {
				m.req.subFrom(&n.free)
				n.slots--
				sim[i] = n
				out[mi] = i
				if k := f.kindOf(m); k >= 0 {
					if kinds == nil {
						kinds = map[int][]int{}
					}
					if kinds[i] == nil {
						kinds[i] = make([]int, f.devices.Kinds())
					}
					kinds[i][k]++
				}
				return false
			}
			return true
		})
	}
	return out
}

// kindOf is a member's device kind when the check places device kinds jointly, else -1.
func (f *Fit) kindOf(m gangMember) int {
	if !f.joint {
		return -1
	}
	return f.devices.Kind(m.pod)
}

// eachNode calls fn with each index of idx (0..n-1 when idx is nil) until fn returns false.
func eachNode(idx []int, n int, fn func(i int) bool) {
	if idx == nil {
		for i := range n {
			if !fn(i) {
				return
			}
		}
		return
	}
	for _, i := range idx {
		if !fn(i) {
			return
		}
	}
}

// leftover is the free CPU and memory the nodes at idx keep once the gang's members are placed on
// them: the smaller, the tighter the fit.
func (f *Fit) leftover(idx []int) (milliCPU, memory int64) {
	for _, i := range idx {
		milliCPU += max(f.free[i].free.milliCPU, 0)
		memory += max(f.free[i].free.memory, 0)
	}
	for _, m := range f.members {
		milliCPU -= m.req.milliCPU
		memory -= m.req.memory
	}
	return milliCPU, memory
}
