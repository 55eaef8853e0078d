// Package tree is the shape of a job of several roles: PodGroups (the leaves, each a gang or a basic
// group of pods) under composite groups, to any depth up to MaxDepth, as upstream's CompositePodGroup
// (scheduling.k8s.io/v1alpha3) models it. A gang composite is ready when at least minGroupCount of its
// children are (a basic composite when one is); a PodGroup child is ready when minMember of its live
// members are reserved or bound (see Branch.Ready).
//
// Both APIs map onto the same Node: a PodGroup of ours names its parent and a composite its policy in
// annotations (Annotation*), an in-tree PodGroup names its parent in spec.parentCompositePodGroupName
// and an in-tree CompositePodGroup is a composite (FromComposite). The package is pure: an Index of the
// nodes the informers last showed, and decisions over a Branch resolved from it.
package tree

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/types"

	"github.com/custom-scheduler/custom-scheduler/pkg/apis/scheduling/v1alpha1"
)

// The annotations of a PodGroup of ours (scheduling.x-k8s.io) that make it part of a tree; they map
// one to one onto the in-tree fields.
const (
	// AnnotationParent names the composite the PodGroup belongs to, in its namespace
	// (spec.parentCompositePodGroupName).
	AnnotationParent = v1alpha1.GroupName + "/parent-group"
	// AnnotationMinGroupCount makes the PodGroup a gang composite: at least this many of its children
	// must be placeable together (spec.schedulingPolicy.gang.minGroupCount).
	AnnotationMinGroupCount = v1alpha1.GroupName + "/min-group-count"
	// AnnotationComposite makes the PodGroup a composite of the policy it names: "Gang" (with
	// AnnotationMinGroupCount) or "Basic" (spec.schedulingPolicy.basic: its children are placed
	// each on its own). AnnotationMinGroupCount alone means "Gang".
	AnnotationComposite = v1alpha1.GroupName + "/composite"
)

// InTreeCompositePrefix starts the name of an in-tree CompositePodGroup as the plugin knows it (as
// podgroup.InTreePrefix does for an in-tree PodGroup): no name of ours has a "/".
const InTreeCompositePrefix = "compositepodgroups.scheduling.k8s.io/"

// inTreeGroupPrefix is podgroup.InTreePrefix (this package does not import podgroup).
const inTreeGroupPrefix = "podgroups.scheduling.k8s.io/"

// MaxDepth is the most composites above a PodGroup (upstream's WorkloadMaxTemplateDepth).
const MaxDepth = 4

// Node is one group of a tree as its object says it: a PodGroup (a leaf) or a composite.
type Node struct {
	// Namespace and Name: the name as the plugin knows it (an in-tree object's with its prefix).
	Namespace, Name string
	UID             types.UID
	// Composite: the node groups groups, not pods.
	Composite bool
	// Gang: all or nothing (a gang PodGroup, or a gang composite).
	Gang bool
	// Min: for a PodGroup its minMember (1 for a basic one), for a composite its minGroupCount (1 for
	// a basic one).
	Min int
	// Parent is the name of the composite above it ("" for a root).
	Parent string
	// Invalid says why the object's tree fields cannot be used ("" when they can).
	Invalid string
	// Domain, for a composite, is the node label key whose one domain holds every pod under it (its
	// required topology: spec.topologyPolicy.required of ours, the first schedulingConstraints.topology
	// key of an in-tree one); "" for none.
	Domain string
	// Preferred, for a composite of ours, are node label keys, narrowest first: every pod under it in
	// one domain of the first key where the job fits, else of the next, then (within Domain, if set)
	// anywhere (spec.topologyPolicy.preferred).
	Preferred []string
}

// Key is the node's namespace/name.
func (n Node) Key() string { return n.Namespace + "/" + n.Name }

// InTree reports whether the node was read from the in-tree API.
func (n Node) InTree() bool {
	return strings.HasPrefix(n.Name, InTreeCompositePrefix) || strings.HasPrefix(n.Name, inTreeGroupPrefix)
}

// Linked reports whether the node is part of a tree (it has a parent, or is a composite).
func (n Node) Linked() bool { return n.Parent != "" || n.Composite }

// FromPodGroup is the node of a PodGroup as the plugin reads it (ours, or an in-tree one converted,
// whose parent podgroup.FromInTree writes into AnnotationParent with InTreeCompositePrefix). minMember
// is the group's (podgroup.MinMember), gang whether it is a gang. Malformed annotations make the
// node Invalid, never a panic.
func FromPodGroup(pg *v1alpha1.PodGroup, minMember int, gang bool) Node {
	n := Node{Namespace: pg.Namespace, Name: pg.Name, UID: pg.UID, Gang: gang, Min: max(minMember, 1),
		Parent: pg.Annotations[AnnotationParent]}
	policy, hasPolicy := pg.Annotations[AnnotationComposite]
	count, hasCount := pg.Annotations[AnnotationMinGroupCount]
	switch {
	case !hasPolicy && !hasCount:
	case policy == "Basic" && hasCount:
		n.Invalid = fmt.Sprintf("annotation %s is Basic but %s is set: a basic composite has no minimum", AnnotationComposite, AnnotationMinGroupCount)
	case policy == "Basic":
		n.Composite, n.Gang, n.Min = true, false, 1
	case hasPolicy && policy != "Gang":
		n.Invalid = fmt.Sprintf("annotation %s is %q: want Gang or Basic", AnnotationComposite, policy)
	case !hasCount:
		n.Invalid = fmt.Sprintf("annotation %s is Gang but %s is not set", AnnotationComposite, AnnotationMinGroupCount)
	default:
		v, err := strconv.Atoi(count)
		if err != nil || v < 1 {
			n.Invalid = fmt.Sprintf("annotation %s is %q: want a whole number of at least 1", AnnotationMinGroupCount, count)
			break
		}
		n.Composite, n.Gang, n.Min = true, true, v
	}
	if tp := pg.Spec.TopologyPolicy; n.Composite && tp != nil {
		n.Domain = string(tp.Required)
		for _, k := range tp.Preferred {
			n.Preferred = append(n.Preferred, string(k))
		}
	}
	if n.Parent != "" && n.Parent == n.Name {
		n.Invalid = fmt.Sprintf("annotation %s names the group itself", AnnotationParent)
	}
	return n
}

// Problem says why a group's tree cannot be resolved: its pods are held back with it (Reason, a
// PascalCase event reason) until the objects are fixed.
type Problem struct {
	Reason, Message string
}

// The reasons of a Problem.
const (
	// ReasonParentNotFound: a group names a parent that does not exist (yet).
	ReasonParentNotFound = "ParentGroupNotFound"
	// ReasonInvalidTree: a cycle, a parent that is no composite or of the other API, a tree too
	// deep, malformed annotations.
	ReasonInvalidTree = "InvalidGroupTree"
	// ReasonWaitingForGroups (pod, Normal): the member's own group is complete, but not the other
	// groups its job needs.
	ReasonWaitingForGroups = "WaitingForGroups"
)

// HoldBack says why a member of the group keyed leaf is held back for its tree before it is queued
// (root and p as Index.Resolve returned them; existing counts each group's live members): the tree's
// problem, or the gang composites above the group lacking groups with their members. Empty: it is
// not held back for its tree.
func HoldBack(root *Branch, p *Problem, leaf string, existing func(key string) int) (reason, msg string) {
	if p != nil {
		return p.Reason, p.Message + "; the pod waits without holding resources"
	}
	if root == nil || root.Admits(leaf, existing) {
		return "", ""
	}
	return ReasonWaitingForGroups, fmt.Sprintf("PodGroup %s is part of job %s, which lacks groups with their members (%s); the pod waits without holding resources",
		leaf, root.Name, strings.Join(root.Short(existing), "; "))
}

// Unread is the Problem of a group whose own object links it into a tree (n, read from the object)
// while the Index does not have it yet: an informer's store shows a PodGroup before its handlers
// (which keep the Index) have run, so a member may come to PreEnqueue or Permit in between. Its
// members wait, as for a missing parent, until the Index has it; nil when n is not linked.
func Unread(n Node) *Problem {
	if !n.Linked() {
		return nil
	}
	return &Problem{Reason: ReasonParentNotFound, Message: fmt.Sprintf("%s %s is part of a tree the scheduler has not read yet", kind(n), n.Name)}
}

// Branch is a node with its children, resolved from an Index: a tree, or part of one.
type Branch struct {
	Node
	Children []*Branch
}

// JobOf is the leaf's job: the topmost gang composite above it, its unit of preemption (as
// Index.Unit names it), with every group under it; nil when no gang composite is above it.
func (b *Branch) JobOf(leaf string) *Branch {
	for _, c := range b.pathTo(leaf) {
		if c.Gang {
			return c
		}
	}
	return nil
}

// LeavesBut returns the PodGroups under b other than the one named name, in name order (none when b
// is nil: the group is in no tree).
func (b *Branch) LeavesBut(name string) []Node {
	if b == nil {
		return nil
	}
	var out []Node
	for _, n := range b.Leaves() {
		if n.Name != name {
			out = append(out, n)
		}
	}
	return out
}

// JobLeavesBut returns the other groups of leaf's job (leaf is the group named name): those under
// its unit (JobOf), not every group of the tree (a basic composite above holds other jobs). nil: b is
// nil, or leaf is in no job.
func (b *Branch) JobLeavesBut(leaf, name string) []Node {
	if b == nil {
		return nil
	}
	return b.JobOf(leaf).LeavesBut(name)
}

// Keys are the nodes' keys (nil for none).
func Keys(nodes []Node) []string {
	var keys []string
	for _, n := range nodes {
		keys = append(keys, n.Key())
	}
	return keys
}

// Leaves returns the PodGroups under b (b itself if it is one), in name order.
func (b *Branch) Leaves() []Node {
	if !b.Composite {
		return []Node{b.Node}
	}
	var out []Node
	for _, c := range b.Children {
		out = append(out, c.Leaves()...)
	}
	return out
}

// Ready reports whether b is ready by upstream's rule, given count(key): a PodGroup's live members
// reserved or bound (or, before an attempt, the members that exist). A PodGroup is ready with Min of
// them; a composite with Min ready children (a composite with no children is never ready).
func (b *Branch) Ready(count func(key string) int) bool {
	return b.holds(func(n Node) bool { return count(n.Key()) >= n.Min })
}

// holds reports whether b is ready when each PodGroup under it is ready as ok says: a composite with
// Min children that hold (so never one without children).
func (b *Branch) holds(ok func(Node) bool) bool {
	if !b.Composite {
		return ok(b.Node)
	}
	n := 0
	for _, c := range b.Children {
		if c.holds(ok) {
			n++
		}
	}
	return n >= max(b.Min, 1)
}

// Gated reports whether the tree holds back a ready PodGroup of it, the one keyed leaf: only under a
// gang composite (a basic one places what is placeable) is a group's own quorum not enough.
func (b *Branch) Gated(leaf string) bool {
	path := b.pathTo(leaf)
	for _, n := range path {
		if n.Composite && n.Gang {
			return true
		}
	}
	return false
}

// pathTo returns the composites from b down to the leaf keyed leaf (nil if it is not under b).
func (b *Branch) pathTo(leaf string) []*Branch {
	if !b.Composite {
		return nil
	}
	for _, c := range b.Children {
		if !c.Composite && c.Key() == leaf {
			return []*Branch{b}
		}
		if p := c.pathTo(leaf); p != nil {
			return append([]*Branch{b}, p...)
		}
	}
	return nil
}

// Admits reports whether the leaf's own quorum is enough now: no gang composite above it, or every
// gang composite above it ready given count. A gang composite's readiness is its own rule; a basic
// composite above a gang one passes (it places what is placeable).
func (b *Branch) Admits(leaf string, count func(key string) int) bool {
	for _, n := range b.pathTo(leaf) {
		if n.Gang && !n.Ready(count) {
			return false
		}
	}
	return true
}

// Short lists what keeps b from being ready: each composite short of its minimum with its count of
// ready children, and each PodGroup not ready under it with its count, as "name: x of min", root
// first. Empty when b is ready.
func (b *Branch) Short(count func(key string) int) []string {
	if b.Ready(count) {
		return nil
	}
	if !b.Composite {
		return []string{fmt.Sprintf("%s: %d of minMember %d", b.Name, count(b.Key()), b.Min)}
	}
	ready := 0
	var below []string
	for _, c := range b.Children {
		if c.Ready(count) {
			ready++
		} else {
			below = append(below, c.Short(count)...)
		}
	}
	line := fmt.Sprintf("%s: %d of minGroupCount %d children ready", b.Name, ready, b.Min)
	if !b.Gang {
		line = fmt.Sprintf("%s: no child ready", b.Name)
	}
	return append([]string{line}, below...)
}

// sortChildren orders children by name, for stable messages and walks.
func sortChildren(cs []*Branch) {
	slices.SortFunc(cs, func(a, b *Branch) int { return strings.Compare(a.Name, b.Name) })
}

// Follow says which other groups of b's tree move with a step of the group keyed leaf (see
// gang.Gang.OnTreeReady and OnTreeFailed):
//   - ready (leaf's quorum was declared): the gated groups with their own quorum that the tree now
//     admits, given count;
//   - failed (leaf's attempt failed, out says which groups are out of this attempt, leaf among them):
//     the groups not out yet under a gang composite that can no longer be ready without those that are.
//
// A group under no gang composite never follows: it is placed on its own.
func (b *Branch) Follow(leaf string, failed bool, count func(key string) int, out func(key string) bool) []Node {
	var follow []Node
	for _, n := range b.Leaves() {
		if n.Key() == leaf || !b.Gated(n.Key()) {
			continue
		}
		if failed && !out(n.Key()) && !b.reachableFor(n.Key(), out) || !failed && count(n.Key()) >= n.Min && b.Admits(n.Key(), count) {
			follow = append(follow, n)
		}
	}
	return follow
}

// reachableFor reports whether every gang composite above the leaf can still be ready with the
// groups that are not out.
func (b *Branch) reachableFor(leaf string, out func(key string) bool) bool {
	for _, n := range b.pathTo(leaf) {
		if n.Gang && !n.reachable(out) {
			return false
		}
	}
	return true
}

func (b *Branch) reachable(out func(key string) bool) bool {
	return b.holds(func(n Node) bool { return !out(n.Key()) })
}

// Needed is what the whole-tree check places together with a group (see Branch.Needed).
type Needed struct {
	// Groups are the other PodGroups to place with it, each short of its minimum.
	Groups []Node
	// Choices are the sets of PodGroups a pick was made among (a composite with more children short
	// than it lacks): the pick stands for any other only when their members are alike. A pick among
	// alike composites records one set per leaf position (see choiceAmong).
	Choices [][]Node
	prefer  func(key string) bool
}

// Needed says which other PodGroups of b's tree must be ready together with the leaf keyed leaf for
// every gang composite above it to be ready, given count (each group's live members reserved or
// bound): for each gang composite on the leaf's path, as many of its other children as it lacks,
// each with what it lacks in turn. Where a composite has more children short than it lacks, it takes
// those closest to ready (then by name), and only among PodGroups of one minimum (replicas, as
// LeaderWorkerSet's) or among alike composites (replicas of several groups, see choiceAmong); ok is
// false when the tree offers another kind of choice, or too few children.
// O(the tree).
func (b *Branch) Needed(leaf string, count func(key string) int) (n Needed, ok bool) {
	return b.NeededPreferring(leaf, count, nil)
}

// NeededPreferring is Needed where a choice takes the PodGroups prefer names first (nil: none; a
// composite when prefer names one of its groups), then those closest to ready: a reservation keeps
// the replicas it holds room for while they are still a choice, whatever the others' counts do.
func (b *Branch) NeededPreferring(leaf string, count func(key string) int, prefer func(key string) bool) (n Needed, ok bool) {
	n.prefer = prefer
	for _, c := range b.lacking(leaf, count) {
		if !n.pick(c.short, c.lacking, count) {
			return Needed{}, false
		}
	}
	return n, true
}

// lack is what a gang composite on a leaf's path lacks besides the child on the path: lacking more
// of its other children ready, among short (those not ready, in name order).
type lack struct {
	short   []*Branch
	lacking int
}

// lacking lists what each gang composite on the path to the leaf keyed leaf lacks (see lack), root
// first; a basic composite on the path is ready with the leaf's branch.
func (b *Branch) lacking(leaf string, count func(key string) int) []lack {
	var out []lack
	path := b.pathTo(leaf)
	for i, c := range path {
		if !c.Gang {
			continue
		}
		onPath := leaf
		if i+1 < len(path) {
			onPath = path[i+1].Key()
		}
		var short []*Branch
		ready := 1 // the child on the path, made ready by the leaf and what is needed below
		for _, o := range c.Children {
			switch {
			case o.Key() == onPath:
			case o.Ready(count):
				ready++
			default:
				short = append(short, o)
			}
		}
		out = append(out, lack{short: short, lacking: c.Min - ready})
	}
	return out
}

// pick adds lacking of the short branches, with what each lacks.
func (n *Needed) pick(short []*Branch, lacking int, count func(key string) int) bool {
	if lacking <= 0 {
		return true
	}
	if len(short) < lacking {
		return false
	}
	if len(short) > lacking {
		sets, ok := choiceAmong(short)
		if !ok {
			return false
		}
		n.Choices = append(n.Choices, sets...)
		short = n.choose(short, lacking, count)
	}
	for _, s := range short {
		if !s.Composite {
			n.Groups = append(n.Groups, s.Node)
			continue
		}
		if below, lacking := s.unready(count); !n.pick(below, lacking, count) {
			return false
		}
	}
	return true
}

// unready are composite b's children not ready given count (in name order), and how many more of
// them it lacks to be ready (a basic composite: one).
func (b *Branch) unready(count func(key string) int) (below []*Branch, lacking int) {
	ready := 0
	for _, c := range b.Children {
		if c.Ready(count) {
			ready++
		} else {
			below = append(below, c)
		}
	}
	return below, max(b.Min, 1) - ready
}
