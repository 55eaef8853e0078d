package gangfit

import (
	"slices"
	"sort"

	v1 "k8s.io/api/core/v1"
	policy "k8s.io/api/policy/v1"
	corev1helpers "k8s.io/component-helpers/scheduling/corev1"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework/preemption"

	"github.com/custom-scheduler/custom-scheduler/pkg/coscheduling/podgroup"
)

// Victim choice with whole gangs as units of eviction. Pure: it reads the snapshot's NodeInfos and a
// prepared check (Fit), and uses upstream's victim ordering (MoreImportantVictim) and
// PodDisruptionBudget accounting (FilterVictimsWithPDBViolation). The plugin makes the API calls.

// GangIndex is every gang with members in the snapshot, as one victim each, keyed "namespace/name".
type GangIndex map[string]preemption.Victim

// BuildGangIndex groups the snapshot's gang members (bound or reserved) by PodGroup: one pass over
// the pods. A gang's priority as a victim is the highest of its members'.
func BuildGangIndex(nodes []fwk.NodeInfo) GangIndex {
	pods := map[string][]fwk.PodInfo{}
	prio := map[string]int32{}
	for _, ni := range nodes {
		for _, pi := range ni.GetPods() {
			p := pi.GetPod()
			name, ok := podgroup.UnitOf(p)
			if !ok {
				continue
			}
			key := podgroup.Key(p.Namespace, name)
			if pr, seen := prio[key]; !seen || corev1helpers.PodPriority(p) > pr {
				prio[key] = corev1helpers.PodPriority(p)
			}
			pods[key] = append(pods[key], pi)
		}
	}
	idx := make(GangIndex, len(pods))
	for key, ps := range pods {
		// NewVictim fails only for no pods.
		idx[key], _ = preemption.NewVictim(ps, prio[key], fwk.PodGroupKeyType)
	}
	return idx
}

// Units turns the pod victims upstream found on one node into units of eviction: a gang member
// becomes its whole gang (once). Only units of lower priority than the preemptor are kept, and the
// preemptor's own gang is never one.
func (idx GangIndex) Units(possible []*preemption.DomainVictim, preemptor *v1.Pod) []preemption.Victim {
	prio := corev1helpers.PodPriority(preemptor)
	own := ""
	if name, ok := podgroup.UnitOf(preemptor); ok {
		own = podgroup.Key(preemptor.Namespace, name)
	}
	seen := map[string]bool{}
	var out []preemption.Victim
	for _, dv := range possible {
		pods := dv.Pods()
		if len(pods) == 1 {
			if name, ok := podgroup.UnitOf(pods[0].GetPod()); ok {
				key := podgroup.Key(pods[0].GetPod().Namespace, name)
				if key == own || seen[key] {
					continue
				}
				seen[key] = true
				if g := idx[key]; g != nil {
					if g.Priority() < prio {
						out = append(out, g)
					}
					continue
				}
			}
		}
		if dv.Priority() < prio {
			out = append(out, dv.Victim)
		}
	}
	return out
}

// Reprieve starts from every unit evicted and puts units back, most important first and those
// whose eviction would violate a PodDisruptionBudget before the others, keeping each back only if
// the preemptor still fits. put(u, true) puts u back and reports whether the preemptor fits;
// put(u, false) takes it off again. It returns the units that stay evicted (most important first)
// and how many of their pods violate a budget. Putting a unit back never makes room, so no unit
// left evicted could be spared: the set is minimal.
func Reprieve(units []preemption.Victim, pdbs []*policy.PodDisruptionBudget, put func(u preemption.Victim, back bool) (bool, error)) ([]preemption.Victim, int, error) {
	sort.SliceStable(units, func(i, j int) bool { return preemption.MoreImportantVictim(units[i], units[j]) })
	violating, nonViolating := preemption.FilterVictimsWithPDBViolation(units, pdbs)
	var victims []preemption.Victim
	violations := 0
	try := func(u preemption.Victim) (bool, error) {
		fits, err := put(u, true)
		if err != nil || fits {
			return fits, err
		}
		if _, err := put(u, false); err != nil {
			return false, err
		}
		victims = append(victims, u)
		return false, nil
	}
	for _, v := range violating {
		fits, err := try(v.Victim)
		if err != nil {
			return nil, 0, err
		}
		if !fits {
			violations += v.ViolateCount
		}
	}
	for _, u := range nonViolating {
		if _, err := try(u); err != nil {
			return nil, 0, err
		}
	}
	sort.SliceStable(victims, func(i, j int) bool { return preemption.MoreImportantVictim(victims[i], victims[j]) })
	return victims, violations, nil
}

// gangUnit is a unit of eviction for a gang preemptor, with what it frees on the check's nodes.
type gangUnit struct {
	preemption.Victim
	frees []nodeDelta
	// devNodes are the nodes (indexes of a Fit) where the unit's pods hold devices that their
	// eviction frees (see releaseDevices).
	devNodes []int
}

// nodeDelta is what one pod frees on the node at index node of a Fit.
type nodeDelta struct {
	node int
	req  resources
}

// AnyPodBelow reports whether some pod on the nodes has a priority below prio (one pass over the
// pods, far cheaper than the victim search it spares).
func AnyPodBelow(nodes []fwk.NodeInfo, prio int32) bool {
	for _, ni := range nodes {
		for _, pi := range ni.GetPods() {
			if corev1helpers.PodPriority(pi.GetPod()) < prio {
				return true
			}
		}
	}
	return false
}

// gangUnits lists the units a gang preemptor may evict: lower-priority pods on the nodes its members
// may use, each gang member standing for its whole gang (wherever its members run), with what each
// frees on the check's nodes (devices included, see releaseDevices). A gang is a unit only if every
// member has lower priority. Pods already leaving (see leaving) are no unit: their room is taken off
// f's nodes at once.
//
// One pass over the pods that allocates only for the candidates (pods below prio, and one entry per
// gang met): a gang with a member at or above prio is dropped the moment one is seen, and nothing is
// built for pods the preemptor may not evict (upstream builds its victims only from lower-priority
// pods too). The units come in the order their first pod was met, as the victim ordering's ties need.
func gangUnits(f *Fit, nodes []fwk.NodeInfo, nodeIdx map[string]int, prio int32, own string, leaving func(*v1.Pod) bool) []*gangUnit {
	usable := f.usable()
	// A pod reserving a claim that pins the members to its nodes is never a victim (see PinningDevices).
	pins := func(*v1.Pod) bool { return false }
	if pd, ok := f.devices.(PinningDevices); ok {
		pins = pd.Pins
	}
	type groupKey struct{ namespace, name string }
	type group struct {
		pods []fwk.PodInfo
		prio int32
		out  bool // a member at or above prio, or the preemptor's own gang
	}
	// entries are the units in the order met: a plain pod's victim, or a gang to build at the end.
	type entry struct {
		victim preemption.Victim
		group  *group
	}
	var (
		groups  map[groupKey]*group
		entries []entry
	)
	for _, ni := range nodes {
		for _, pi := range ni.GetPods() {
			p := pi.GetPod()
			pp := corev1helpers.PodPriority(p)
			name, ok := podgroup.UnitOf(p)
			if !ok {
				if pp < prio && !pins(p) {
					entries = append(entries, entry{victim: preemption.NewPodVictim(pi, nil, nil)})
				}
				continue
			}
			k := groupKey{p.Namespace, name}
			g := groups[k]
			if g == nil {
				if groups == nil {
					groups = map[groupKey]*group{}
				}
				g = &group{prio: pp, out: pp >= prio || podgroup.Key(p.Namespace, name) == own}
				groups[k] = g
				if !g.out {
					entries = append(entries, entry{group: g})
				}
			}
			switch {
			case g.out:
			case pp >= prio, pins(p):
				g.out, g.pods = true, nil
			default:
				g.pods = append(g.pods, pi)
				g.prio = max(g.prio, pp)
			}
		}
	}
	var out, gone []*gangUnit
	for _, e := range entries {
		v := e.victim
		if e.group != nil {
			if e.group.out {
				continue
			}
			// NewVictim fails only for no pods.
			v, _ = preemption.NewVictim(e.group.pods, e.group.prio, fwk.PodGroupKeyType)
		}
		u := &gangUnit{Victim: v}
		helps, leavingUnit := false, true
		for _, pi := range v.Pods() {
			p := pi.GetPod()
			leavingUnit = leavingUnit && leaving != nil && leaving(p)
			i, ok := nodeIdx[p.Spec.NodeName]
			if !ok {
				continue
			}
			helps = helps || usable[i]
			u.frees = append(u.frees, nodeDelta{node: i, req: resourcesFromList(podRequestList(p), f.names)})
		}
		switch {
		case leavingUnit:
			gone = append(gone, u)
		case helps:
			out = append(out, u)
		}
	}
	// The devices the units' claims hold are freed with them (see releaseDevices); the room of the
	// pods already leaving, devices included, is taken off at once.
	f.releaseDevices(f.infos, nodeIdx, append(slices.Clone(out), gone...))
	for _, u := range gone {
		u.apply(f, true)
	}
	return out
}

// chooseVictims finds the cheapest units whose eviction makes fits() true: with every unit evicted
// from f's nodes the gang must fit (else ok is false and f is left as it was), then units are put
// back (see Reprieve). f is left with the chosen units evicted.
func chooseVictims(f *Fit, units []*gangUnit, pdbs []*policy.PodDisruptionBudget, fits func() bool) (chosen []preemption.Victim, violations int, ok bool) {
	for _, u := range units {
		u.apply(f, true)
	}
	if !fits() {
		for _, u := range units {
			u.apply(f, false)
		}
		return nil, 0, false
	}
	byVictim := make(map[preemption.Victim]*gangUnit, len(units))
	asVictims := make([]preemption.Victim, len(units))
	for i, u := range units {
		byVictim[u.Victim], asVictims[i] = u, u.Victim
	}
	chosen, violations, _ = Reprieve(asVictims, pdbs, func(v preemption.Victim, back bool) (bool, error) {
		byVictim[v].apply(f, !back)
		return back && fits(), nil
	})
	return chosen, violations, true
}

// apply takes the unit's pods off the check's nodes (evict) or puts them back.
func (u *gangUnit) apply(f *Fit, evict bool) {
	for _, d := range u.frees {
		n := &f.free[d.node]
		if evict {
			d.req.addTo(&n.free)
			n.slots++
		} else {
			d.req.subFrom(&n.free)
			n.slots--
		}
	}
	for _, n := range u.devNodes {
		f.released.step(f, n, u, evict)
	}
}

// Nomination is a member's node in a gang preemption's placement.
type Nomination struct {
	Pod  *v1.Pod
	Node string
}

// Plan is a gang preemption's outcome, decided on the snapshot: whom to evict and where the gang's
// missing members go once they are gone.
type Plan struct {
	// Fits is false when the gang does not fit even with every unit it may evict evicted.
	Fits bool
	// Units is how many units of eviction (gangs and single pods) the gang could evict.
	Units int
	// Victims are the pods to evict, the most important unit's first; empty when the gang fits
	// without evicting anything.
	Victims []*v1.Pod
	// Gangs are the victim gangs ("namespace/name", sorted); Singles counts the victim plain pods.
	Gangs   []string
	Singles int
	// Violations counts the victims whose eviction violates a PodDisruptionBudget.
	Violations int
	// Assignment is each placed member's node, with the victims gone.
	Assignment []Nomination
	// Parts counts the parts placed each in one domain of its own (a composite's, a group's, or the
	// job's only), one search after the other (see gang.JobPart); 0 for one search.
	Parts int
}

// Violations counts the pods among victims whose eviction violates a PodDisruptionBudget, all
// evicted together (victims chosen by several searches, each of which counted only its own).
func Violations(victims []*v1.Pod, pdbs []*policy.PodDisruptionBudget) int {
	units := make([]preemption.Victim, 0, len(victims))
	for _, p := range victims {
		pi, err := framework.NewPodInfo(p)
		if err != nil {
			continue
		}
		units = append(units, preemption.NewPodVictim(pi, nil, nil))
	}
	violating, _ := preemption.FilterVictimsWithPDBViolation(units, pdbs)
	n := 0
	for _, v := range violating {
		n += v.ViolateCount
	}
	return n
}

// Assign places f's members in the gang's domain (policy p, within the domains pinned; anywhere
// without a required key), first fit, on f's free capacity as it is: each placed member's node.
func Assign(f *Fit, p Policy, pinned map[string]string) []Nomination {
	var idx []int
	if !p.Empty() {
		if pl, ok := ChoosePlacement(f, p, pinned, nil); ok && pl.Nodes != nil {
			for i, fn := range f.free {
				if pl.Nodes.Has(fn.node.Name) {
					idx = append(idx, i)
				}
			}
		}
	}
	var out []Nomination
	for mi, ni := range f.assign(idx) {
		if ni >= 0 {
			out = append(out, Nomination{Pod: f.members[mi].pod, Node: f.free[ni].node.Name})
		}
	}
	return out
}

// PlanPreemption chooses the cheapest lower-priority units (gangs whole, single pods) whose eviction
// lets the `f.need` missing members of the gang own (priority prio) all fit at once on f's nodes; the
// units are read on nodes (every node: a gang with members beyond f's nodes is evicted whole): per node, and in
// one domain of policy's required key (pinned by bound members, see PinnedDomains) when it has one.
// Pods leaving for an earlier preemption are no unit, and their room is counted free. Members are
// then placed in the gang's domain (its topology policy), first fit. f is left with the victims
// evicted; the caller releases it.
func PlanPreemption(f *Fit, nodes []fwk.NodeInfo, p Policy, pinned map[string]string, prio int32, own string, leaving func(*v1.Pod) bool, pdbs []*policy.PodDisruptionBudget) Plan {
	fits := func() bool {
		if p.Required != "" {
			_, ok := ChoosePlacement(f, p, pinned, nil)
			return ok
		}
		return f.placeable(nil) >= f.need
	}
	nodeIdx := make(map[string]int, len(f.free))
	for i, fn := range f.free {
		nodeIdx[fn.node.Name] = i
	}
	units := gangUnits(f, nodes, nodeIdx, prio, own, leaving)
	chosen, violations, ok := chooseVictims(f, units, pdbs, fits)
	plan := Plan{Fits: ok, Units: len(units), Violations: violations}
	if !ok || len(chosen) == 0 {
		return plan
	}
	plan.Assignment = Assign(f, p, pinned)
	plan.Gangs = []string{}
	for _, v := range chosen {
		if v.IsGroup() {
			pod := v.Pods()[0].GetPod()
			name, _ := podgroup.UnitOf(pod)
			plan.Gangs = append(plan.Gangs, podgroup.Key(pod.Namespace, name))
		} else {
			plan.Singles++
		}
		for _, pi := range v.Pods() {
			plan.Victims = append(plan.Victims, pi.GetPod())
		}
	}
	sort.Strings(plan.Gangs)
	return plan
}
