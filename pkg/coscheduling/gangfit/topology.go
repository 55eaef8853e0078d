package gangfit

import (
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/util"

	"github.com/custom-scheduler/custom-scheduler/pkg/apis/config"
	"github.com/custom-scheduler/custom-scheduler/pkg/apis/scheduling/v1alpha1"
	"github.com/custom-scheduler/custom-scheduler/pkg/coscheduling/podgroup"
)

// Topology-aware placement: a gang in one domain of a node label (a rack, block or zone). The domain is
// chosen once per attempt, from the snapshot, before any member holds anything, with the same per-node
// whole-gang check as the rest of the plugin restricted to each candidate domain; among the domains
// that fit, the tightest fit wins (least free CPU, then memory, left once the gang is placed) so that
// larger domains stay free for larger gangs, ties broken by the domain's name. Members already bound
// pin the domain. The chosen domain's nodes are returned from PreFilter, so the framework evaluates
// only them. Everything here is pure: it reads the prepared check (Fit) and the policy.

// Pod annotations that give a gang a topology policy when its PodGroup cannot (for PodGroups created
// by operators that do not know the field). The PodGroup's spec.Policy wins.
const (
	// AnnotationTopologyRequired names a node label key: all members in one domain of it, or none placed.
	AnnotationTopologyRequired = "custom-scheduler.io/topology-required"
	// AnnotationTopologyPreferred lists node label keys, narrowest first, separated by commas.
	AnnotationTopologyPreferred = "custom-scheduler.io/topology-preferred"
)

// Placement levels, as the Topology condition's reason reports them.
const (
	LevelPreferred = "PreferredDomain"
	LevelRequired  = "RequiredDomain"
	LevelAnywhere  = "Anywhere"
)

// Policy is the policy in force for a gang.
type Policy struct {
	Required  string
	Preferred []string
	// Source says where it came from, for messages: "spec", "annotation" or "default".
	Source string
}

func (p Policy) Empty() bool { return p.Required == "" && len(p.Preferred) == 0 }

// topologyLevel is one step of a policy: a label key, and whether it is the required one.
type topologyLevel struct {
	key      string
	required bool
	// rank is a preferred key's place in the policy's list, from 1.
	rank int
}

// levels are the steps to try in order: the preferred keys (narrowest first), then the required key.
// A preferred key equal to the required one is tried once, as required.
func (p Policy) levels() []topologyLevel {
	out := make([]topologyLevel, 0, len(p.Preferred)+1)
	for i, k := range p.Preferred {
		if k != p.Required {
			out = append(out, topologyLevel{key: k, rank: i + 1})
		}
	}
	if p.Required != "" {
		out = append(out, topologyLevel{key: p.Required, required: true})
	}
	return out
}

// placement is a gang's chosen domain for an attempt; key "" means anywhere.
type Placement struct {
	Key, Value string
	// Level is LevelPreferred, LevelRequired or LevelAnywhere.
	Level string
	// Nodes are the domain's nodes (nil: anywhere), returned from PreFilter for every member.
	Nodes sets.Set[string]
	// Message says where the gang goes and why, for the PodGroup's event and condition.
	Message string
	// Shortfall, when no domain of the required key fits, says so in numbers.
	Shortfall *v1alpha1.PodGroupShortfall
}

// domainsOf groups the indexes of free by the value of the node label key; nodes without the label
// are in no domain. Values are returned sorted, so choices are deterministic. One label lookup per
// node; the index lists share one array.
func domainsOf(free []freeNode, key string) ([]string, map[string][]int) {
	ids := make([]int32, len(free))
	byValue := map[string]int32{}
	var values []string
	var counts []int
	for i, n := range free {
		v, ok := n.node.Labels[key]
		if !ok {
			ids[i] = -1
			continue
		}
		id, seen := byValue[v]
		if !seen {
			id = int32(len(values))
			byValue[v] = id
			values = append(values, v)
			counts = append(counts, 0)
		}
		ids[i] = id
		counts[id]++
	}
	flat := make([]int, 0, len(free))
	starts := make([]int, len(values))
	for id, c := range counts {
		starts[id] = len(flat)
		flat = flat[:len(flat)+c]
	}
	next := slices.Clone(starts)
	for i, id := range ids {
		if id >= 0 {
			flat[next[id]] = i
			next[id]++
		}
	}
	doms := make(map[string][]int, len(values))
	for id, v := range values {
		doms[v] = flat[starts[id] : starts[id]+counts[id] : starts[id]+counts[id]]
	}
	sort.Strings(values)
	return values, doms
}

// PinnedDomains returns, per label key of the policy, the domain that all the given bound members'
// nodes share; a key whose members are in several domains (or on nodes without the label) maps to "".
func PinnedDomains(p Policy, boundNodes []*v1.Node) map[string]string {
	if len(boundNodes) == 0 {
		return nil
	}
	out := map[string]string{}
	for _, lvl := range p.levels() {
		value, shared := "", true
		for i, n := range boundNodes {
			v, ok := n.Labels[lvl.key]
			if !ok || (i > 0 && v != value) {
				shared = false
				break
			}
			value = v
		}
		if !shared {
			value = ""
		}
		out[lvl.key] = value
	}
	return out
}

// ChoosePlacement picks the gang's domain: level by level, the tightest domain that holds every
// missing member; with bound members (pinned), only the domain they share. It returns ok=false with a
// message when the required level has no domain that fits (nothing should be held then). Without a
// required key, a gang no preferred domain fits goes anywhere (the whole-cluster check decides).
// Domains in busy ("key=value", see gang.BusyDomains) are taken only when no other domain of their
// level fits. It is ChoosePlacementAvoiding with busy domains only.
func ChoosePlacement(f *Fit, p Policy, pinned map[string]string, busy map[string]bool) (Placement, bool) {
	return ChoosePlacementAvoiding(f, p, pinned, Avoid{Busy: busy})
}

// ChoosePlacementAvoiding is ChoosePlacement steered away from the domains in avoid (see Avoid): at
// each level, domains not refused before refused ones (least recently refused first), then nominated
// before not, then not busy before busy, then the tightest fit, then the name.
func ChoosePlacementAvoiding(f *Fit, p Policy, pinned map[string]string, avoid Avoid) (Placement, bool) {
	var notes []string
	// within reports whether a preferred domain lies in one domain of the required key (the one the
	// bound members pin, if they do): a preferred domain that spans two cannot hold the gang.
	within := func(idx []int) bool {
		if p.Required == "" {
			return true
		}
		want := pinned[p.Required]
		for _, i := range idx {
			v, ok := f.free[i].node.Labels[p.Required]
			if !ok || (want != "" && v != want) {
				return false
			}
			want = v
		}
		return true
	}
	for _, lvl := range p.levels() {
		values, doms := domainsOf(f.free, lvl.key)
		if pinned != nil {
			v := pinned[lvl.key]
			if v == "" {
				notes = append(notes, fmt.Sprintf("the bound members are not in one %s domain", lvl.key))
				if lvl.required {
					return Placement{Message: strings.Join(notes, "; "), Shortfall: f.domainShortfall(lvl.key, nil)}, false
				}
				continue
			}
			values = []string{v}
		}
		var (
			best             string
			bestCPU, bestMem int64
			bestBusy         bool
			bestNominated    bool
			bestRefused      time.Time // zero: not refused
			mostPlaced       int
			spanning         int
			placeable        map[string]int
			refusedFit       []string // refused domains with room, in name order
		)
		if lvl.required {
			placeable = make(map[string]int, len(values))
		}
		for _, v := range values {
			idx := doms[v]
			if idx == nil {
				idx = []int{} // a pinned value no node carries: no node, not every node
			}
			if !lvl.required && !within(idx) {
				spanning++
				continue
			}
			if n := f.placeable(idx); n < f.need {
				mostPlaced = max(mostPlaced, n)
				if placeable != nil {
					placeable[v] = n
				}
				continue
			}
			// A domain where another gang's attempt is still gathering its quorum is chosen only if no
			// other fits: the snapshot shows that gang's reserved members but not the ones still to
			// come, so the tightest fit would otherwise draw concurrent gangs into the same domain.
			isBusy := avoid.Busy[lvl.key+"="+v]
			// A domain the filters refused this gang in likewise, and before a busy one: it is known not
			// to hold the gang, a busy one only may not. Pinned domains are not avoided.
			var refused time.Time
			if pinned == nil {
				refused = avoid.Refused[lvl.key+"="+v]
			}
			if !refused.IsZero() {
				refusedFit = append(refusedFit, lvl.key+"="+v)
			}
			isNominated := avoid.Nominated[lvl.key+"="+v]
			cpu, mem := f.leftover(idx)
			better := func() bool {
				switch {
				case best == "":
					return true
				case refused.IsZero() != bestRefused.IsZero():
					return refused.IsZero()
				case !refused.Equal(bestRefused):
					return refused.Before(bestRefused)
				case bestNominated != isNominated:
					return isNominated
				case bestBusy != isBusy:
					return bestBusy
				}
				return cpu < bestCPU || (cpu == bestCPU && mem < bestMem)
			}
			if better() {
				best, bestCPU, bestMem, bestBusy, bestRefused, bestNominated = v, cpu, mem, isBusy, refused, isNominated
			}
		}
		if best != "" && !bestRefused.IsZero() && !lvl.required {
			// Every preferred domain of this level with room was refused: the next level is tried.
			notes = append(notes, fmt.Sprintf("%s refused by the filters recently", domainList(refusedFit)))
			continue
		}
		if best != "" {
			how := fmt.Sprintf("required %s", lvl.key)
			pl := Placement{Key: lvl.key, Value: best, Level: LevelRequired, Nodes: sets.New[string]()}
			if !lvl.required {
				pl.Level = LevelPreferred
				how = fmt.Sprintf("preferred level %d of %d", lvl.rank, len(p.Preferred))
			}
			for _, i := range doms[best] {
				pl.Nodes.Insert(f.free[i].node.Name)
			}
			switch {
			case !bestRefused.IsZero():
				notes = append(notes, fmt.Sprintf("every %s domain with room was refused by the filters recently (%s); retrying the least recently refused",
					lvl.key, domainList(refusedFit)))
			case len(refusedFit) > 0:
				notes = append(notes, fmt.Sprintf("avoiding %s, refused by the filters recently", domainList(refusedFit)))
			}
			pl.Message = fmt.Sprintf("placed in %s=%s (%s)", lvl.key, best, how)
			if len(notes) > 0 {
				pl.Message += ": " + strings.Join(notes, "; ")
			}
			return pl, true
		}
		switch {
		case len(values) == 0:
			notes = append(notes, fmt.Sprintf("no node has the label %s", lvl.key))
		case spanning == len(values):
			notes = append(notes, fmt.Sprintf("no %s domain lies in one %s domain", lvl.key, p.Required))
		default:
			notes = append(notes, fmt.Sprintf("no %s domain has room for %d members; the best fits %d%s", lvl.key, f.need, mostPlaced, f.domainDeviceNote(lvl.key, doms)))
		}
		if lvl.required {
			return Placement{Message: strings.Join(notes, "; "), Shortfall: f.domainShortfall(lvl.key, placeable)}, false
		}
	}
	msg := "placed anywhere"
	if len(notes) > 0 {
		msg += ": " + strings.Join(notes, "; ")
	}
	return Placement{Level: LevelAnywhere, Message: msg}, true
}

// maxListedDomains bounds the domains a placement's message names.
const maxListedDomains = 3

// domainList names domains ("key=value"), at most maxListedDomains of them.
func domainList(domains []string) string {
	if len(domains) <= maxListedDomains {
		return strings.Join(domains, ", ")
	}
	return fmt.Sprintf("%s and %d more", strings.Join(domains[:maxListedDomains], ", "), len(domains)-maxListedDomains)
}

// PinnedPlacement is the placement of a gang that needs no more members checked: the narrowest domain
// of the policy that its bound members share, or anywhere.
func PinnedPlacement(p Policy, pinned map[string]string, nodes []fwk.NodeInfo) Placement {
	for _, lvl := range p.levels() {
		v := pinned[lvl.key]
		if v == "" {
			continue
		}
		pl := Placement{Key: lvl.key, Value: v, Level: LevelPreferred, Nodes: sets.New[string]()}
		if lvl.required {
			pl.Level = LevelRequired
		}
		for _, ni := range nodes {
			if n := ni.Node(); n != nil {
				if got, ok := n.Labels[lvl.key]; ok && got == v {
					pl.Nodes.Insert(n.Name)
				}
			}
		}
		pl.Message = fmt.Sprintf("placed in %s=%s, where its bound members are", lvl.key, v)
		return pl
	}
	return Placement{Level: LevelAnywhere, Message: "placed anywhere: its bound members share no domain of the policy"}
}

// BoundNodes returns the nodes of the snapshot that the bound pods are on, and the reserved nodes
// (members reserved on them, whose binds the pods do not show yet).
func BoundNodes(pods []*v1.Pod, nodes []fwk.NodeInfo, reserved ...string) []*v1.Node {
	names := sets.New[string](reserved...)
	for _, p := range pods {
		if p.Spec.NodeName != "" {
			names.Insert(p.Spec.NodeName)
		}
	}
	if names.Len() == 0 {
		return nil
	}
	out := make([]*v1.Node, 0, names.Len())
	for _, ni := range nodes {
		if n := ni.Node(); n != nil && names.Has(n.Name) {
			out = append(out, n)
		}
	}
	return out
}

// PreFilterResult is what PreFilter returns for a member of a gang with this placement: the domain's nodes,
// or nil (all nodes) for no placement or anywhere.
func (pl *Placement) PreFilterResult() *fwk.PreFilterResult {
	if pl == nil || pl.Key == "" {
		return nil
	}
	return &fwk.PreFilterResult{NodeNames: pl.Nodes}
}

// PolicyFixed reports whether an update of a member from old to pod makes its policy (see PolicyFor)
// valid: a member refused for malformed topology annotations is retried then, and only then.
func PolicyFixed(pg *v1alpha1.PodGroup, old, pod *v1.Pod, def config.TopologyPolicy) bool {
	if _, err := PolicyFor(pg, old, def); err == nil {
		return false
	}
	_, err := PolicyFor(pg, pod, def)
	return err == nil
}

// PolicyFixedHint is the queueing hint of a member's own update: it requeues a member refused for
// malformed topology annotations once an update of its own makes them valid (see PolicyFixed; the
// queue requeues a pod for an annotation change only on a hint). podGroup reads a member's PodGroup
// (nil: none).
func PolicyFixedHint(podGroup func(namespace, name string) *v1alpha1.PodGroup, def config.TopologyPolicy) fwk.QueueingHintFn {
	return func(_ klog.Logger, pod *v1.Pod, oldObj, newObj interface{}) (fwk.QueueingHint, error) {
		oldPod, newPod, err := util.As[*v1.Pod](oldObj, newObj)
		if err != nil {
			return fwk.Queue, err
		}
		name, ok := podgroup.Of(newPod)
		if !ok {
			return fwk.QueueSkip, nil
		}
		pg := podGroup(pod.Namespace, name)
		if pg == nil || oldPod == nil || !PolicyFixed(pg, oldPod, newPod, def) {
			return fwk.QueueSkip, nil
		}
		return fwk.Queue, nil
	}
}

// PolicyFor returns the policy in force for a member: the PodGroup's spec, else the member's
// annotations, else the profile's default. A malformed annotation is an error (the member is refused
// with it, never placed as if no policy had been asked for).
func PolicyFor(pg *v1alpha1.PodGroup, pod *v1.Pod, def config.TopologyPolicy) (Policy, error) {
	if tp := pg.Spec.TopologyPolicy; tp != nil && (tp.Required != "" || len(tp.Preferred) > 0) {
		p := Policy{Required: string(tp.Required), Source: "spec"}
		for _, k := range tp.Preferred {
			p.Preferred = append(p.Preferred, string(k))
		}
		return p, nil
	}
	req, hasReq := pod.Annotations[AnnotationTopologyRequired]
	pref, hasPref := pod.Annotations[AnnotationTopologyPreferred]
	if hasReq || hasPref {
		p := Policy{Required: strings.TrimSpace(req), Source: "annotation"}
		if hasReq {
			if errs := validation.IsQualifiedName(p.Required); len(errs) > 0 {
				return Policy{}, fmt.Errorf("annotation %s=%q is not a label key: %s", AnnotationTopologyRequired, req, strings.Join(errs, "; "))
			}
		}
		if hasPref {
			for _, k := range strings.Split(pref, ",") {
				k = strings.TrimSpace(k)
				if errs := validation.IsQualifiedName(k); len(errs) > 0 {
					return Policy{}, fmt.Errorf("annotation %s=%q: %q is not a label key: %s", AnnotationTopologyPreferred, pref, k, strings.Join(errs, "; "))
				}
				p.Preferred = append(p.Preferred, k)
			}
		}
		return p, nil
	}
	return Policy{Required: def.Required, Preferred: def.Preferred, Source: "default"}, nil
}

// ExtraMemberPlacement is where a member of a gang whose quorum is met goes (f is the check of that
// one member): in the narrowest domain of the policy that its bound members share (pinned) and that
// has room for it, so a preferred domain that is full gives way to the next level (as it would for
// the gang's own attempt); in the required domain they share even when that one is full (the member
// waits there), or anywhere. f may be nil (nothing to check): then the pinned domains decide.
func ExtraMemberPlacement(f *Fit, p Policy, pinned map[string]string, nodes []fwk.NodeInfo) Placement {
	if f != nil {
		if pl, ok := ChoosePlacement(f, p, pinned, nil); ok {
			return pl
		}
	}
	return PinnedPlacement(Policy{Required: p.Required}, pinned, nodes)
}

// domainShortfall is a required topology key's shortfall: no domain of key holds the needed members;
// placeable says how many each domain fits (none: no domain could be tried).
func (f *Fit) domainShortfall(key string, placeable map[string]int) *v1alpha1.PodGroupShortfall {
	most := 0
	for _, n := range placeable {
		most = max(most, n)
	}
	s := f.shortfall(v1alpha1.ShortfallTopologyDomain, most, total(f.members), f.largest())
	s.TopologyKey, s.Domains = key, domainShortfalls(placeable)
	f.domainDevices(key, s.Domains)
	return s
}
