package gangfit

import (
	"cmp"
	"slices"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/sets"
)

// The placement plan: once per gang attempt, where the members still missing from the quorum go. The
// whole-gang check has already read every node's free capacity; the plan places the `need` members on
// it, tightest node first, and each member's scheduling cycle is then offered only a few planned nodes
// (PreFilterResult) instead of searching every node. The real Filter plugins still run on the offered
// nodes and the profile's Score plugins still choose among them, so nothing the plan does not model is
// skipped; when none of them fits, the member falls back to a full cycle.

// PlannedNode is a node of a plan and how many more members the plan still sends there.
type PlannedNode struct {
	Name    string
	Members int
}

// PlacementPlan is where an attempt's missing members go. Not safe for concurrent use (the plugin
// guards it with its mutex).
type PlacementPlan struct {
	// Nodes in plan order: tightest first.
	Nodes []PlannedNode
	index map[string]int
	// next is the first node that may still have room in the plan (those before it are used up).
	next int
	// left is how many members the plan still places.
	left int
}

// PlanPlacement places f's `need` members on the nodes of the gang's domain (every node when in is nil
// or anywhere):
// nodes whose free capacity is smallest first (by the members' dominant resource), so that the gang
// fills partly used nodes and leaves empty ones whole for the next gang, each node up to the copies of a
// member it holds (for members that claim devices through DRA, up to the members' claims its free
// devices hold: see DeviceCheck). It plans only gangs whose candidates are all alike (one request, one
// set of node constraints: the usual gang, one pod template) and whose ResourceClaims the device model
// counts (DeviceCheck.Modelled); it returns nil for the others, and when the members do not all fit;
// those attempts use full cycles.
func PlanPlacement(f *Fit, in *Placement) *PlacementPlan {
	if f == nil || f.need <= 0 || !f.alike {
		// Members that differ (in requests or node constraints) would need the plan's places kept per
		// shape: a small member offered a big one's node takes its room. They use full cycles.
		return nil
	}
	for _, m := range f.all {
		if len(m.pod.Spec.ResourceClaims) > 0 && (f.devices == nil || !f.devices.Modelled(m.pod)) {
			// Claims the device model does not count (shared, allocated already, not created yet):
			// the check does not know which nodes hold them, so neither does the plan.
			return nil
		}
	}
	var idx []int
	if in != nil {
		idx = f.indexesIn(in.Nodes)
	}
	// The members are alike: one request, one eligibility (f.usable is the first member's).
	req, usable := f.members[0].req, f.usable()
	dim := dominantDimension(req, f.totals)
	type candidate struct {
		i, copies int
		share     float64
	}
	var cands []candidate
	eachNode(idx, len(f.free), func(i int) bool {
		if n := f.free[i]; usable[i] && n.slots > 0 {
			if c := req.copies(n.free, n.slots); c > 0 {
				cands = append(cands, candidate{i: i, copies: c, share: dim(n.free)})
			}
		}
		return true
	})
	slices.SortStableFunc(cands, func(a, b candidate) int {
		if c := cmp.Compare(a.share, b.share); c != 0 {
			return c
		}
		return cmp.Compare(f.free[a.i].node.Name, f.free[b.i].node.Name)
	})
	var planned []PlannedNode
	left := 0
	for _, c := range cands {
		if left >= f.need {
			break
		}
		n := min(c.copies, f.need-left)
		planned = append(planned, PlannedNode{Name: f.free[c.i].node.Name, Members: n})
		left += n
	}
	if left < f.need {
		return nil
	}
	return NewPlacementPlan(planned)
}

// NewPlacementPlan is the plan that places Members members on each of nodes, in their order.
func NewPlacementPlan(nodes []PlannedNode) *PlacementPlan {
	p := &PlacementPlan{Nodes: nodes, index: make(map[string]int, len(nodes))}
	for i, n := range nodes {
		p.index[n.Name] = i
		p.left += n.Members
	}
	return p
}

// indexesIn returns the indexes of f.free of the named nodes; nil (every node) when nodes is nil.
func (f *Fit) indexesIn(nodes sets.Set[string]) []int {
	if nodes == nil {
		return nil
	}
	idx := []int{}
	for i, fn := range f.free {
		if nodes.Has(fn.node.Name) {
			idx = append(idx, i)
		}
	}
	return idx
}

// dominantDimension returns the share of the cluster's free capacity a node's free amount is, in the
// dimension r asks the most of (its dominant resource): the order in which nodes are tight for r.
func dominantDimension(r, totals resources) func(resources) float64 {
	ratio := func(v, t int64) float64 {
		if t <= 0 {
			return 0
		}
		return float64(v) / float64(t)
	}
	get := func(x resources) int64 { return x.milliCPU }
	best := ratio(r.milliCPU, totals.milliCPU)
	if s := ratio(r.memory, totals.memory); s > best {
		best, get = s, func(x resources) int64 { return x.memory }
	}
	if s := ratio(r.ephemeral, totals.ephemeral); s > best {
		best, get = s, func(x resources) int64 { return x.ephemeral }
	}
	for i, v := range r.scalar {
		if s := ratio(v, scalarAt(totals.scalar, i)); s > best {
			best, get = s, func(x resources) int64 { return scalarAt(x.scalar, i) }
		}
	}
	return func(free resources) float64 {
		return ratio(get(free), max(get(totals), 1))
	}
}

// Left is how many members the plan still places.
func (p *PlacementPlan) Left() int {
	if p == nil {
		return 0
	}
	return p.left
}

// Offer is the set of nodes a member is offered: the first `limit` planned nodes that the plan still
// sends members to, in plan order (nil when the plan places nobody more).
func (p *PlacementPlan) Offer(limit int) sets.Set[string] {
	if p == nil || p.left == 0 {
		return nil
	}
	for p.next < len(p.Nodes) && p.Nodes[p.next].Members == 0 {
		p.next++
	}
	out := sets.New[string]()
	for k := p.next; k < len(p.Nodes) && out.Len() < limit; k++ {
		if p.Nodes[k].Members > 0 {
			out.Insert(p.Nodes[k].Name)
		}
	}
	return out
}

// Take records a member reserved on node: it reports whether the plan sent a member there, and if so
// the plan sends one fewer.
func (p *PlacementPlan) Take(node string) bool {
	if p == nil {
		return false
	}
	k, ok := p.index[node]
	if !ok || p.Nodes[k].Members == 0 {
		return false
	}
	p.Nodes[k].Members--
	p.left--
	return true
}

// Plannable reports whether a member's placement is fully modelled by the plan's inputs (resources,
// pod slots, taints, unschedulable nodes, node selector and required node affinity, and the devices
// its ResourceClaims ask for, which PlanPlacement checks against the device model), so that a plan
// may narrow its cycle to a few nodes. Required constraints between pods (inter-pod affinity and
// anti-affinity, DoNotSchedule topology spread), host ports and volumes whose topology the plan cannot
// see are not modelled: such members search every node as before. Preferred terms and ScheduleAnyway
// spread never reject a node; the Score plugins weigh them among the offered.
func Plannable(pod *v1.Pod) bool {
	if a := pod.Spec.Affinity; a != nil && ((a.PodAffinity != nil && len(a.PodAffinity.RequiredDuringSchedulingIgnoredDuringExecution) > 0) ||
		(a.PodAntiAffinity != nil && len(a.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution) > 0)) {
		return false
	}
	for _, c := range pod.Spec.TopologySpreadConstraints {
		if c.WhenUnsatisfiable == v1.DoNotSchedule {
			return false
		}
	}
	for _, v := range pod.Spec.Volumes {
		if v.PersistentVolumeClaim != nil || v.Ephemeral != nil {
			return false
		}
	}
	for i := range pod.Spec.Containers {
		for _, port := range pod.Spec.Containers[i].Ports {
			if port.HostPort > 0 {
				return false
			}
		}
	}
	for i := range pod.Spec.InitContainers {
		for _, port := range pod.Spec.InitContainers[i].Ports {
			if port.HostPort > 0 {
				return false
			}
		}
	}
	return true
}
