package gangfit

import (
	"cmp"
	"slices"
	"strconv"
	"strings"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/sets"
)

// The placement plan: once per gang attempt, where the members still missing from the quorum go. The
// whole-gang check has already read every node's free capacity; the plan places the `need` members on
// it, tightest node first, and each member's scheduling cycle is then offered only a few planned nodes
// (PreFilterResult) instead of searching every node. The real Filter plugins still run on the offered
// nodes and the profile's Score plugins still choose among them, so nothing the plan does not model is
// skipped; when none of them fits, the member falls back to a full cycle.

// PlannedNode is a node of a plan and how many more members the plan still sends there: of one
// member shape (see ShapeOf), or of any when Shape is empty (a gang whose members are alike).
type PlannedNode struct {
	Name    string
	Members int
	Shape   string
}

// PlacementPlan is where an attempt's missing members go. Not safe for concurrent use (the plugin
// guards it with its mutex).
type PlacementPlan struct {
	// Nodes in plan order: tightest first.
	Nodes []PlannedNode
	// index is each node's entries in Nodes (one per shape planned there).
	index map[string][]int
	// next is the first node that may still have room in the plan (those before it are used up).
	next int
	// left is how many members the plan still places.
	left int
	// byShape: some places are of one shape (see ShapeOf); else every place takes any member.
	byShape bool
}

// PlanPlacement places f's `need` members on the nodes of the gang's domain (every node when in is nil
// or anywhere). Members that are alike (one request, one set of node constraints: the usual gang, one
// pod template) go to the nodes whose free capacity is smallest first (by the members' dominant
// resource), so that the gang fills partly used nodes and leaves empty ones whole for the next gang,
// each node up to the copies of a member it holds (for members that claim devices through DRA, up to
// the members' claims its free devices hold: see DeviceCheck). Members of different shapes (a launcher
// beside GPU workers, a head beside workers) are each given a node before any is reserved, the scarcest
// first (see planShapes), and the plan keeps each node's places per shape, so that a member is offered
// only the places of its own shape: a small member never takes the room a big one was planned on. It
// plans only gangs whose ResourceClaims the device model counts (DeviceCheck.Modelled); it returns nil
// for the others, and when the members do not all fit; those attempts use full cycles.
func PlanPlacement(f *Fit, in *Placement) *PlacementPlan {
	if f == nil || f.need <= 0 {
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
	if !f.alike {
		return f.planShapes(idx)
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

// planShapes plans a gang of members of different shapes: every one of the `need` members is given
// a node (see assign: the largest share of the cluster's free capacity first, devices counted, each on
// the first node with room left, as the whole-gang check places them), and the places are kept per
// node and shape, in the order they were given. nil when some member finds no
// room. O(members × nodes of the domain).
func (f *Fit) planShapes(idx []int) *PlacementPlan {
	nodes := f.assign(idx)
	at := map[[2]string]int{}
	var planned []PlannedNode
	for mi, i := range nodes {
		if i < 0 {
			return nil
		}
		k := [2]string{f.free[i].node.Name, ShapeOf(f.members[mi].pod)}
		if e, ok := at[k]; ok {
			planned[e].Members++
			continue
		}
		at[k] = len(planned)
		planned = append(planned, PlannedNode{Name: k[0], Shape: k[1], Members: 1})
	}
	return NewPlacementPlan(planned)
}

// ShapeOf is what the plan tells members apart by: the pod's requests, its node constraints and the
// ResourceClaims it asks for (by template, or by claim). Members of one shape may take each other's
// planned places. O(containers + constraints).
func ShapeOf(pod *v1.Pod) string {
	if pod == nil {
		return ""
	}
	var b strings.Builder
	reqs := podRequestList(pod)
	names := make([]string, 0, len(reqs))
	for n := range reqs {
		names = append(names, string(n))
	}
	slices.Sort(names)
	for _, n := range names {
		q := reqs[v1.ResourceName(n)]
		b.WriteString(n)
		b.WriteByte('=')
		b.WriteString(q.String())
		b.WriteByte(',')
	}
	h := constraintsHash(pod)
	if a := nodeAffinityOf(pod); a != nil {
		h = fnvAdd(h, a.String())
	}
	b.WriteString(strconv.FormatUint(h, 36))
	for _, c := range pod.Spec.ResourceClaims {
		b.WriteByte('|')
		if c.ResourceClaimTemplateName != nil {
			b.WriteString("t:" + *c.ResourceClaimTemplateName)
		} else if c.ResourceClaimName != nil {
			b.WriteString("c:" + *c.ResourceClaimName)
		}
	}
	return b.String()
}

// NewPlacementPlan is the plan that places Members members on each of nodes, in their order.
func NewPlacementPlan(nodes []PlannedNode) *PlacementPlan {
	p := &PlacementPlan{Nodes: nodes, index: make(map[string][]int, len(nodes))}
	for i, n := range nodes {
		p.index[n.Name] = append(p.index[n.Name], i)
		p.left += n.Members
		p.byShape = p.byShape || n.Shape != ""
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

// ShapeFor is what Offer and Take need to know of member: its shape (ShapeOf) when the plan keeps
// places per shape, else "" (any member takes any place: no shape is computed).
func (p *PlacementPlan) ShapeFor(member *v1.Pod) string {
	if p == nil || !p.byShape {
		return ""
	}
	return ShapeOf(member)
}

// Left is how many members the plan still places.
func (p *PlacementPlan) Left() int {
	if p == nil {
		return 0
	}
	return p.left
}

// Offer is the set of nodes a member of shape (see ShapeOf) is offered: the first `limit` planned nodes
// that the plan still sends members of that shape (or of any) to, in plan order (nil when the plan
// places nobody more).
func (p *PlacementPlan) Offer(shape string, limit int) sets.Set[string] {
	if p == nil || p.left == 0 {
		return nil
	}
	for p.next < len(p.Nodes) && p.Nodes[p.next].Members == 0 {
		p.next++
	}
	out := sets.New[string]()
	for k := p.next; k < len(p.Nodes) && out.Len() < limit; k++ {
		if n := &p.Nodes[k]; n.Members > 0 && (n.Shape == "" || n.Shape == shape) {
			out.Insert(n.Name)
		}
	}
	return out
}

// Take records a member of shape reserved on node: it reports whether the plan sent a member of that
// shape (or of any) there, and if so the plan sends one fewer.
func (p *PlacementPlan) Take(shape, node string) bool {
	if p == nil {
		return false
	}
	for _, k := range p.index[node] {
		if n := &p.Nodes[k]; n.Members > 0 && (n.Shape == "" || n.Shape == shape) {
			n.Members--
			p.left--
			return true
		}
	}
	return false
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
