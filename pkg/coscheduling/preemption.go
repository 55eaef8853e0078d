package coscheduling

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	policy "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
	policylisters "k8s.io/client-go/listers/policy/v1"
	corev1helpers "k8s.io/component-helpers/scheduling/corev1"
	"k8s.io/klog/v2"
	extenderv1 "k8s.io/kube-scheduler/extender/v1"
	fwk "k8s.io/kube-scheduler/framework"
	kubeconfig "k8s.io/kubernetes/pkg/scheduler/apis/config"
	"k8s.io/kubernetes/pkg/scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/defaultpreemption"
	plfeature "k8s.io/kubernetes/pkg/scheduler/framework/plugins/feature"
	"k8s.io/kubernetes/pkg/scheduler/framework/preemption"
	schedutil "k8s.io/kubernetes/pkg/scheduler/util"

	"github.com/custom-scheduler/custom-scheduler/pkg/apis/scheduling/v1alpha1"
	"github.com/custom-scheduler/custom-scheduler/pkg/coscheduling/gangfit"
	"github.com/custom-scheduler/custom-scheduler/pkg/coscheduling/podgroup"
)

// Gang-aware preemption. It replaces DefaultPreemption in a profile (PostFilter), reusing its
// machinery: upstream's Evaluator picks the node for a plain pod, upstream's Executor evicts victims
// (DisruptionTarget condition, graceful delete, event; a victim waiting at Permit is rejected in
// memory), and upstream's victim ordering and PodDisruptionBudget accounting rank the victims. What
// differs is the unit of eviction and the preemptor:
//
//   - A victim is a whole gang: the bound and reserved members of a PodGroup (this plugin's label)
//     are evicted together or not at all, whoever the preemptor is, and their priority is the
//     highest of theirs. No eviction leaves a gang with between 1 and minMember-1 live members.
//   - A gang preempts as a whole: when its missing members do not fit the free resources, the
//     victims are chosen across the cluster so that all of them fit at once (per node, within the
//     gang's required topology domain), or nothing is evicted.

// gangPreemption holds the upstream preemption machinery, configured for gangs.
type gangPreemption struct {
	// DefaultPreemption supplies the parts of preemption.Interface that do not change (candidate
	// counts, a plain pod's eligibility, node ordering); SelectVictimsOnNode is ours.
	*defaultpreemption.DefaultPreemption
	handle    fwk.Handle
	evaluator *preemption.Evaluator
	pdbs      policylisters.PodDisruptionBudgetLister
	// evicted, when set, is told of every victim evicted (the eviction's API calls succeeded, or it
	// was rejected in memory), and failed of every victim whose eviction failed, with the other
	// victims of the same preemption.
	evicted func(victim *v1.Pod)
	failed  func(ctx context.Context, c preemption.Candidate, p preemption.ExecutorPreemptor, victim *v1.Pod)
	// evictOnce is upstream's eviction of one victim, without the hooks (for retries).
	evictOnce func(ctx context.Context, c preemption.Candidate, p preemption.ExecutorPreemptor, victim *v1.Pod, plugin string) (bool, error)
}

var _ preemption.Interface = &gangPreemption{}

// newGangPreemption builds the machinery with upstream's default arguments. Evictions are made in
// the scheduling cycle (upstream's asynchronous mode would need its PreEnqueue, which DefaultPreemption
// owns), so a pod that preempts is retried only after its victims have been asked to go.
func newGangPreemption(ctx context.Context, h fwk.Handle, profile string) (*gangPreemption, error) {
	fts := plfeature.NewSchedulerFeaturesFromGates(utilfeature.DefaultFeatureGate)
	fts.EnableAsyncPreemption = false
	args := &kubeconfig.DefaultPreemptionArgs{MinCandidateNodesPercentage: 10, MinCandidateNodesAbsolute: 100}
	dp, err := defaultpreemption.New(ctx, args, h, fts)
	if err != nil {
		return nil, fmt.Errorf("setting up preemption: %w", err)
	}
	gp := &gangPreemption{
		DefaultPreemption: dp,
		handle:            h,
		pdbs:              h.SharedInformerFactory().Policy().V1().PodDisruptionBudgets().Lister(),
	}
	gp.evaluator = preemption.NewEvaluator(Name, h, gp, dp.Executor)
	evict := dp.Executor.PreemptPod
	gp.evictOnce = evict
	dp.Executor.PreemptPod = func(ctx context.Context, c preemption.Candidate, p preemption.ExecutorPreemptor, victim *v1.Pod, plugin string) (bool, error) {
		inMemory, err := evict(ctx, c, p, victim, plugin)
		if err != nil {
			if gp.failed != nil {
				gp.failed(ctx, c, p, victim)
			}
			return inMemory, err
		}
		if gp.evicted != nil {
			gp.evicted(victim)
		}
		kind := preemptorKind(p.Type())
		preemptionVictimPods.WithLabelValues(profile, kind).Inc()
		if firstOfItsGang(victim, c.Victims().Pods) {
			preemptionVictimGangs.WithLabelValues(profile, kind).Inc()
		}
		return inMemory, err
	}
	return gp, nil
}

// preemptorKind is the metrics label of a preemptor type: "gang" or "pod".
func preemptorKind(t string) string {
	if t == gangPreemptorType {
		return "gang"
	}
	return "pod"
}

// firstOfItsGang reports whether victim is a gang member and the first of its gang among victims.
func firstOfItsGang(victim *v1.Pod, victims []*v1.Pod) bool {
	name, ok := podgroup.Of(victim)
	if !ok {
		return false
	}
	for _, v := range victims {
		if n, ok := podgroup.Of(v); ok && n == name && v.Namespace == victim.Namespace {
			return v.UID == victim.UID
		}
	}
	return false
}

// gangIndexKey holds, for a plain pod's preemption, the gangs of the snapshot (see lazyGangIndex).
const gangIndexKey fwk.StateKey = Name + "/gang-victims"

// lazyGangIndex builds the snapshot's gang index on first use, once for all the nodes a preemption
// dry-runs (in parallel): a pod that preemption cannot help never pays for it.
type lazyGangIndex struct {
	once  sync.Once
	nodes fwk.NodeInfoLister
	idx   gangfit.GangIndex
}

// Clone returns the same index: the dry run's copies of the cycle state share it.
func (l *lazyGangIndex) Clone() fwk.StateData { return l }

func (l *lazyGangIndex) get() gangfit.GangIndex {
	l.once.Do(func() {
		if nodes, err := l.nodes.List(); err == nil {
			l.idx = gangfit.BuildGangIndex(nodes)
		}
	})
	return l.idx
}

// SelectVictimsOnNode finds, like DefaultPreemption's, the fewest and least important victims whose
// eviction lets the preemptor pass the Filter plugins on nodeInfo (remove every eligible victim, then
// reprieve them one by one, most important first, PDB-violating ones first), with whole gangs as
// victims. A gang's members on other nodes are evicted with it: the Filter plugins' pre-computed
// state sees them go (PreFilterExtensions) and their number counts in the candidate's cost.
func (gp *gangPreemption) SelectVictimsOnNode(ctx context.Context, state fwk.CycleState, preemptor *v1.Pod, nodeInfo fwk.NodeInfo, possible []*preemption.DomainVictim, pdbs []*policy.PodDisruptionBudget) ([]*v1.Pod, int, *fwk.Status) {
	logger := klog.FromContext(ctx)
	var idx gangfit.GangIndex
	if d, err := state.Read(gangIndexKey); err == nil {
		if l, ok := d.(*lazyGangIndex); ok {
			idx = l.get()
		}
	}
	units := idx.Units(possible, preemptor)
	if len(units) == 0 {
		return nil, 0, fwk.NewStatus(fwk.UnschedulableAndUnresolvable, "No preemption victims found for incoming pod")
	}
	mainNode := nodeInfo.Node().Name
	nodeOf := func(name string) (fwk.NodeInfo, error) {
		if name == mainNode {
			return nodeInfo, nil
		}
		return gp.handle.SnapshotSharedLister().NodeInfos().Get(name)
	}
	// move takes a unit off its nodes (remove) or puts it back. Only the main node's NodeInfo (a copy)
	// changes; other nodes are seen by the plugins' PreFilterExtensions only.
	move := func(u preemption.Victim, remove bool) error {
		for _, pi := range u.Pods() {
			p := pi.GetPod()
			ni, err := nodeOf(p.Spec.NodeName)
			if err != nil {
				return err
			}
			var st *fwk.Status
			if remove {
				if p.Spec.NodeName == mainNode {
					if err := nodeInfo.RemovePod(logger, p); err != nil {
						return err
					}
				}
				st = gp.handle.RunPreFilterExtensionRemovePod(ctx, state, preemptor, pi, ni)
			} else {
				if p.Spec.NodeName == mainNode {
					nodeInfo.AddPodInfo(pi)
				}
				st = gp.handle.RunPreFilterExtensionAddPod(ctx, state, preemptor, pi, ni)
			}
			if !st.IsSuccess() {
				return st.AsError()
			}
		}
		return nil
	}
	for _, u := range units {
		if err := move(u, true); err != nil {
			return nil, 0, fwk.AsStatus(err)
		}
	}
	if st := gp.handle.RunFilterPluginsWithNominatedPods(ctx, state, preemptor, nodeInfo); !st.IsSuccess() {
		return nil, 0, st
	}
	victims, violations, err := gangfit.Reprieve(units, pdbs, func(u preemption.Victim, back bool) (bool, error) {
		if err := move(u, !back); err != nil {
			return false, err
		}
		return back && gp.handle.RunFilterPluginsWithNominatedPods(ctx, state, preemptor, nodeInfo).IsSuccess(), nil
	})
	if err != nil {
		return nil, 0, fwk.AsStatus(err)
	}
	var pods []*v1.Pod
	for _, u := range victims {
		for _, pi := range u.Pods() {
			pods = append(pods, pi.GetPod())
		}
	}
	return pods, violations, nil
}

// preemptForPod runs upstream's preemption for a pod that is not placed as part of a gang attempt
// (a plain pod, or an extra member of a gang that has its quorum), with whole gangs as victims.
func (pl *Coscheduling) preemptForPod(ctx context.Context, state fwk.CycleState, pod *v1.Pod, m fwk.NodeToStatusReader) (*fwk.PostFilterResult, *fwk.Status) {
	if pl.preempt == nil {
		return nil, fwk.NewStatus(fwk.Unschedulable)
	}
	state.Write(gangIndexKey, &lazyGangIndex{nodes: pl.handle.SnapshotSharedLister().NodeInfos()})
	res, st := pl.preempt.evaluator.Preempt(ctx, state, pod, m)
	result := "preempted"
	switch {
	case st.Code() == fwk.Error:
		result = "error"
	case !st.IsSuccess():
		result = "unschedulable"
	}
	preemptionAttempts.WithLabelValues(pl.profile, "pod", result).Inc()
	if msg := st.Message(); msg != "" {
		return res, fwk.NewStatus(st.Code(), "preemption: "+msg)
	}
	return res, st
}

// gangPreemptorType is the preemptor type upstream's Executor writes in victims' conditions and
// events ("preempting to accommodate a higher priority PodGroup").
const gangPreemptorType = "PodGroup"

// gangPreemptor is a gang as upstream's Executor sees a preemptor.
type gangPreemptor struct {
	pg        *v1alpha1.PodGroup
	members   []*v1.Pod
	priority  int32
	scheduler string
}

var _ preemption.ExecutorPreemptor = &gangPreemptor{}

func (p *gangPreemptor) GetName() string       { return p.pg.Name }
func (p *gangPreemptor) GetNamespace() string  { return p.pg.Namespace }
func (p *gangPreemptor) UID() types.UID        { return p.pg.UID }
func (p *gangPreemptor) SchedulerName() string { return p.scheduler }
func (p *gangPreemptor) Priority() int32       { return p.priority }
func (p *gangPreemptor) Type() string          { return gangPreemptorType }

// Obj is the PodGroup as an object reference: the event recorder's scheme does not know its type.
func (p *gangPreemptor) Obj() runtime.Object { return podGroupRef(p.pg) }

func (p *gangPreemptor) Pods() map[string]*v1.Pod {
	out := make(map[string]*v1.Pod, len(p.members))
	for _, m := range p.members {
		out[m.Namespace+"/"+m.Name] = m
	}
	return out
}

// victimCandidate is one victim's eviction as upstream's Executor sees it (its node names the event).
type victimCandidate struct {
	node    string
	victims *extenderv1.Victims
}

func (c *victimCandidate) Victims() *extenderv1.Victims { return c.victims }
func (c *victimCandidate) Name() string                 { return c.node }
func (c *victimCandidate) NumPodGroupDisruptions() int  { return 0 }

// stoppedPreempting forgets a gang's last preemption once preemption cannot place it: the nodes it
// nominated (kept only while its victims terminate), and a Preempting outcome, which becomes
// GangInfeasible with the whole-gang check's reason.
func (pl *Coscheduling) stoppedPreempting(pg *v1alpha1.PodGroup) {
	key := podgroup.Key(pg.Namespace, pg.Name)
	pl.mu.Lock()
	g := pl.gangs[key]
	var changed bool
	var msg string
	if g != nil {
		g.nominatedNodes = nil
		if g.outcome.reason == EventPreempting && g.feasibility != nil && !g.feasibility.Feasible {
			msg = g.feasibility.Message
			changed = g.setOutcome(EventGangInfeasible, msg)
		}
	}
	pl.mu.Unlock()
	if changed {
		pl.podGroupEvent(pg, v1.EventTypeWarning, EventGangInfeasible, msg)
		pl.notifyStatus(key)
	}
}

// preemptForGang looks for the cheapest set of lower-priority victims whose eviction lets the
// gang's missing members all fit at once, evicts it, and nominates the members to the nodes the
// placement gives them. It is called when PreFilter found the gang infeasible on free resources.
func (pl *Coscheduling) preemptForGang(ctx context.Context, pod *v1.Pod, pg *v1alpha1.PodGroup) (*fwk.PostFilterResult, *fwk.Status) {
	if pl.preempt == nil {
		return nil, fwk.NewStatus(fwk.Unschedulable)
	}
	logger := klog.FromContext(ctx)
	key := podgroup.Key(pg.Namespace, pg.Name)
	prio := corev1helpers.PodPriority(pod)
	members := pl.membersOf(pg.Namespace, pg.Name)
	done := func(result string, res *fwk.PostFilterResult, st *fwk.Status) (*fwk.PostFilterResult, *fwk.Status) {
		preemptionAttempts.WithLabelValues(pl.profile, "gang", result).Inc()
		if result == "not_eligible" || result == "not_helpful" {
			pl.stoppedPreempting(pg)
		}
		return res, st
	}
	for _, m := range members {
		if m.Spec.PreemptionPolicy != nil && *m.Spec.PreemptionPolicy == v1.PreemptNever {
			return done("not_eligible", nil, fwk.NewStatus(fwk.Unschedulable, fmt.Sprintf("preemption: PodGroup %s: member %s has preemptionPolicy Never", key, klog.KObj(m))))
		}
	}
	nodes, err := pl.handle.SnapshotSharedLister().NodeInfos().List()
	if err != nil {
		return done("error", nil, fwk.AsStatus(err))
	}
	if !gangfit.AnyPodBelow(nodes, prio) {
		// A cluster of one priority (or the gang at the lowest): nothing could be evicted, so the
		// simulation is not built. Every member of an infeasible gang comes here on every attempt.
		pl.clearNominations(ctx, members, pod.UID)
		return done("not_helpful", framework.NewPostFilterResultWithNominatedNode(""), fwk.NewStatus(fwk.Unschedulable,
			fmt.Sprintf("preemption: PodGroup %s does not fit, and no pod of lower priority runs on any node", key)))
	}

	pl.mu.Lock()
	g := pl.gangForLocked(pg)
	nominated := slices.Clone(g.nominatedNodes)
	for _, m := range members {
		if m.Status.NominatedNodeName != "" {
			nominated = append(nominated, m.Status.NominatedNodeName)
		}
	}
	candidates, _, countedN := splitMembersLocked(g, members)
	need := podgroup.MinMember(pg) - countedN
	pl.mu.Unlock()

	if n := terminatingVictims(pl.handle, nominated, prio); n > 0 {
		msg := fmt.Sprintf("preemption: PodGroup %s waits for %d pods it preempted to terminate", key, n)
		return done("waiting", nil, fwk.NewStatus(fwk.Unschedulable, msg))
	}
	policy, err := gangfit.PolicyFor(pg, pod, pl.defaultTopology)
	if err != nil {
		return done("not_eligible", nil, fwk.NewStatus(fwk.Unschedulable, err.Error()))
	}
	// Room nominated to other preemptors of at least this priority is not free (as in PreFilter).
	f := gangfit.New(logger, key, candidates, need, nodes, pg.Spec.MinResources, pl.claims.against(prio, key), &pl.fit, true)
	if f == nil {
		return done("not_eligible", nil, fwk.NewStatus(fwk.Unschedulable))
	}
	pdbs, err := pl.preempt.pdbs.List(labels.Everything())
	if err != nil {
		return done("error", nil, fwk.AsStatus(fmt.Errorf("listing PodDisruptionBudgets: %w", err)))
	}
	pinned := gangfit.PinnedDomains(policy, gangfit.BoundNodes(members, nodes))
	plan := gangfit.PlanPreemption(f, nodes, policy, pinned, prio, key, pl.leaving, pdbs)
	if !plan.Fits {
		msg := fmt.Sprintf("preemption: PodGroup %s does not fit even if all %d lower-priority pods and gangs on the nodes its members may use were evicted; nothing was evicted", key, plan.Units)
		if plan.Units == 0 {
			msg = fmt.Sprintf("preemption: PodGroup %s does not fit, and no pod of lower priority runs on the nodes its members may use", key)
		}
		pl.clearNominations(ctx, members, pod.UID)
		return done("not_helpful", framework.NewPostFilterResultWithNominatedNode(""), fwk.NewStatus(fwk.Unschedulable, msg))
	}
	if len(plan.Victims) == 0 {
		// It fits without evicting anything: PreFilter rejected it for another reason (e.g. minResources).
		return done("not_helpful", nil, fwk.NewStatus(fwk.Unschedulable))
	}
	victimPods, gangs, singles, violations, assignment := plan.Victims, plan.Gangs, plan.Singles, plan.Violations, plan.Assignment
	preemptorObj := &gangPreemptor{pg: pg, members: members, priority: prio, scheduler: pod.Spec.SchedulerName}
	if err := pl.evict(ctx, preemptorObj, victimPods, violations); err != nil {
		return done("error", nil, fwk.AsStatus(fmt.Errorf("PodGroup %s: preempting: %w", key, err)))
	}
	nodesUsed := pl.nominate(ctx, pod, assignment, prio)

	msg := fmt.Sprintf("preempting %d pods of lower priority than %d (%d gangs%s, %d single pods) so that %d members fit; members nominated to %s",
		len(victimPods), prio, len(gangs), listed(gangs), singles, need, strings.Join(nodesUsed, ", "))
	logger.V(2).Info("Gang preempts", "pod", klog.KObj(pod), "podGroup", key, "victims", len(victimPods), "gangs", gangs, "pdbViolations", violations)
	pl.mu.Lock()
	g.nominatedNodes = nodesUsed
	g.setOutcome(EventPreempting, msg)
	// The victims' room is the gang's now: the next member checks again rather than reuse the
	// infeasible answer, and so does every other gang.
	g.feasibility = nil
	pl.mu.Unlock()
	pl.epoch.Add(1)
	pl.podGroupEvent(pg, v1.EventTypeNormal, EventPreempting, msg)
	pl.notifyStatus(key)
	var res *fwk.PostFilterResult
	for _, a := range assignment {
		if a.Pod.UID == pod.UID {
			res = framework.NewPostFilterResultWithNominatedNode(a.Node)
		}
	}
	return done("preempted", res, fwk.NewStatus(fwk.Unschedulable, "preemption: "+msg))
}

// listed formats names for a message: " (a, b)", or nothing.
func listed(names []string) string {
	if len(names) == 0 {
		return ""
	}
	return " (" + strings.Join(names, ", ") + ")"
}

// evictedMemory is how long an evicted pod is remembered: longer than any scheduling cycle's snapshot
// can still show it after its delete (it is a UID that never comes back).
const evictedMemory = time.Minute

// leaving reports whether a pod is on its way out for an earlier preemption: terminating with the
// scheduler's DisruptionTarget condition, or evicted by this plugin within evictedMemory (a victim with
// no grace period is deleted at once, and a snapshot taken before the cache learned it still shows it).
// Its room is claimed by that preemptor's nominations, so counting the pod as well would count the
// room twice, and more pods would be evicted than needed.
func (pl *Coscheduling) leaving(p *v1.Pod) bool {
	if preemption.PodTerminatingByPreemption(p) {
		return true
	}
	_, evicted := pl.evicted.Load(p.UID)
	return evicted
}

// terminatingVictims counts the pods of lower priority than prio that preemption is terminating on
// the given nodes: while there are some, a preemptor nominated there waits for them.
func terminatingVictims(h fwk.Handle, nodes []string, prio int32) int {
	n := 0
	seen := map[string]bool{}
	for _, name := range nodes {
		if seen[name] {
			continue
		}
		seen[name] = true
		ni, err := h.SnapshotSharedLister().NodeInfos().Get(name)
		if err != nil {
			continue
		}
		for _, pi := range ni.GetPods() {
			if p := pi.GetPod(); preemption.PodTerminatingByPreemption(p) && corev1helpers.PodPriority(p) < prio {
				n++
			}
		}
	}
	return n
}

// evict asks upstream's Executor to preempt every victim (in parallel): the DisruptionTarget
// condition, a graceful delete and an event on each; a victim waiting at Permit is rejected in memory.
func (pl *Coscheduling) evict(ctx context.Context, p *gangPreemptor, victims []*v1.Pod, violations int) error {
	var (
		mu   sync.Mutex
		errs []error
	)
	all := &extenderv1.Victims{Pods: victims, NumPDBViolations: int64(violations)}
	now := pl.clock.Now()
	pl.evicted.Range(func(uid, at any) bool {
		if now.Sub(at.(time.Time)) > evictedMemory {
			pl.evicted.Delete(uid)
		}
		return true
	})
	pl.handle.Parallelizer().Until(ctx, len(victims), func(i int) {
		v := victims[i]
		if v.DeletionTimestamp != nil {
			return
		}
		// (A victim counts as leaving once its eviction succeeded: see victimEvicted.)
		if _, err := pl.preempt.Executor.PreemptPod(ctx, &victimCandidate{node: v.Spec.NodeName, victims: all}, p, v, Name); err != nil {
			mu.Lock()
			errs = append(errs, err)
			mu.Unlock()
		}
	}, Name)
	return errors.Join(errs...)
}

// nominate records each member's node in the scheduler's nominator (so that pods of lower priority
// do not take the room) and in the member's status (the framework writes the preemptor's own), and
// clears the nominations of lower-priority pods to those nodes. It returns the nodes, sorted.
func (pl *Coscheduling) nominate(ctx context.Context, preemptor *v1.Pod, assignment []gangfit.Nomination, prio int32) []string {
	logger := klog.FromContext(ctx)
	nodes := map[string]bool{}
	var patch []*v1.Pod
	var to []string
	for _, a := range assignment {
		m, node := a.Pod, a.Node
		nodes[node] = true
		pi, err := framework.NewPodInfo(m)
		if err != nil {
			continue
		}
		pl.handle.AddNominatedPod(logger, pi, &fwk.NominatingInfo{NominatingMode: fwk.ModeOverride, NominatedNodeName: node})
		// Claimed at once, not when the status patch comes back through the informer: a gang that
		// preempts next must not count this room as free.
		claimed := m.DeepCopy()
		claimed.Status.NominatedNodeName = node
		pl.claims.set(claimed)
		if m.UID != preemptor.UID && m.Status.NominatedNodeName != node {
			patch, to = append(patch, m), append(to, node)
		}
	}
	var others []*v1.Pod
	for node := range nodes {
		for _, np := range pl.handle.NominatedPodsForNode(node) {
			if p := np.GetPod(); corev1helpers.PodPriority(p) < prio {
				others = append(others, p)
			}
		}
	}
	all := append(patch, others...)
	pl.handle.Parallelizer().Until(ctx, len(all), func(i int) {
		p, node := all[i], ""
		if i < len(patch) {
			node = to[i]
		}
		st := p.Status.DeepCopy()
		st.NominatedNodeName = node
		if err := schedutil.PatchPodStatus(ctx, pl.handle.ClientSet(), p.Name, p.Namespace, &p.Status, st); err != nil {
			logger.V(2).Info("Could not set a pod's nominated node", "pod", klog.KObj(p), "node", node, "err", err)
		}
	}, Name)
	out := make([]string, 0, len(nodes))
	for n := range nodes {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// clearNominations drops the nominations of a gang's members (in the nominator and in their
// status), when the gang no longer preempts: preemption cannot place it, or its PodGroup is gone.
// The preemptor's own status is left to the framework (except is its UID, or empty).
func (pl *Coscheduling) clearNominations(ctx context.Context, members []*v1.Pod, except types.UID) {
	logger := klog.FromContext(ctx)
	var clear []*v1.Pod
	for _, m := range members {
		// A nomination recorded here whose status patch failed is cleared too: the informer's copy
		// does not show it, but the claim and the nominator's entry hold its room.
		inStatus := m.Status.NominatedNodeName != ""
		if m.Spec.NodeName != "" || (!inStatus && !pl.claims.has(m.UID)) {
			continue
		}
		if pi, err := framework.NewPodInfo(m); err == nil {
			pl.handle.AddNominatedPod(logger, pi, &fwk.NominatingInfo{NominatingMode: fwk.ModeOverride})
		}
		if pl.claims.forget(m) {
			pl.epoch.Add(1)
		}
		if inStatus && m.UID != except {
			clear = append(clear, m)
		}
	}
	pl.handle.Parallelizer().Until(ctx, len(clear), func(i int) {
		p := clear[i]
		st := p.Status.DeepCopy()
		st.NominatedNodeName = ""
		if err := schedutil.PatchPodStatus(ctx, pl.handle.ClientSet(), p.Name, p.Namespace, &p.Status, st); err != nil {
			logger.V(2).Info("Could not clear a pod's nominated node", "pod", klog.KObj(p), "err", err)
		}
	}, Name)
}

// victimEvicted records a victim whose eviction succeeded: it counts as leaving (see leaving) from
// now on, never before its delete succeeded. A victim that was reserved here (waiting at Permit, where
// upstream's Executor rejects it in memory, or on its way to bind) stops counting toward its gang's
// quorum at once, and an attempt still gathering its quorum fails at once: the victim's Unreserve runs
// later, in its binding cycle, and a sibling's Permit in between must not complete a quorum with it.
func (pl *Coscheduling) victimEvicted(victim *v1.Pod) {
	pl.evicted.Store(victim.UID, pl.clock.Now())
	name, ok := podgroup.Of(victim)
	if !ok {
		return
	}
	now := pl.clock.Now()
	msg := fmt.Sprintf("PodGroup %s rejected: member %s was preempted; all waiting members were rejected", podgroup.Key(victim.Namespace, name), klog.KObj(victim))
	pl.mu.Lock()
	g := pl.gangs[podgroup.Key(victim.Namespace, name)]
	if g == nil || g.members[victim.UID]&reserved == 0 {
		pl.mu.Unlock()
		return
	}
	pl.removeWaitingLocked(g, victim.UID)
	g.clear(victim.UID, reserved)
	d, rest := pl.stepLocked(g, attemptInput{kind: evPreempted, now: now, wasReserved: true})
	if d.rejectWaiting {
		g.setOutcome(d.reason, msg)
	}
	pl.mu.Unlock()
	if !d.rejectWaiting {
		return
	}
	gangRejections.WithLabelValues(pl.profile, reasonMemberRejected).Inc()
	pl.rejectWaiting(rest, msg)
	pl.reportFailure(pl.podGroups.Get(victim.Namespace, name), EventGangRejected, msg, rest)
}

// evictionRetry bounds the retries of a failed eviction of a gang member whose siblings are leaving.
var evictionRetry = wait.Backoff{Duration: 100 * time.Millisecond, Factor: 2, Jitter: 0.2, Cap: 5 * time.Second, Steps: 40}

// victimEvictionFailed follows a gang member whose eviction failed (an API error): a victim gang is
// evicted whole, so while any other member of its gang in the same preemption is leaving, the
// eviction is retried in the background until it succeeds or the pod is gone. A gang none of whose
// members was evicted is left alone (nothing of it is partial).
func (pl *Coscheduling) victimEvictionFailed(ctx context.Context, c preemption.Candidate, p preemption.ExecutorPreemptor, victim *v1.Pod) {
	name, ok := podgroup.Of(victim)
	if !ok {
		return
	}
	var siblings []*v1.Pod
	for _, v := range c.Victims().Pods {
		if n, ok := podgroup.Of(v); ok && n == name && v.Namespace == victim.Namespace && v.UID != victim.UID {
			siblings = append(siblings, v)
		}
	}
	if len(siblings) == 0 {
		return
	}
	logger := klog.FromContext(ctx)
	go func() {
		// The preemption's other evictions run in parallel with this one: give them a moment.
		idle := 0
		_ = wait.ExponentialBackoffWithContext(pl.ctx, evictionRetry, func(ctx context.Context) (bool, error) {
			if pl.victimGone(victim) {
				return true, nil
			}
			leaving := false
			for _, s := range siblings {
				if pl.leaving(s) || pl.victimGone(s) {
					leaving = true
					break
				}
			}
			if !leaving {
				idle++
				return idle > 3, nil
			}
			preemptionEvictionRetries.WithLabelValues(pl.profile).Inc()
			if _, err := pl.preempt.evictOnce(ctx, c, p, victim, Name); err != nil {
				logger.V(2).Info("Retrying the eviction of a member of a gang being preempted", "pod", klog.KObj(victim), "err", err)
				return false, nil
			}
			pl.victimEvicted(victim)
			logger.V(2).Info("Evicted a member of a gang being preempted after a failed attempt", "pod", klog.KObj(victim))
			return true, nil
		})
	}()
}

// victimGone reports whether the scheduler's pod informer no longer holds the victim live (deleted,
// terminating, or another pod under its name).
func (pl *Coscheduling) victimGone(victim *v1.Pod) bool {
	obj, ok, err := pl.pods.GetByKey(victim.Namespace + "/" + victim.Name)
	if err != nil || !ok {
		return true
	}
	p, isPod := obj.(*v1.Pod)
	return !isPod || p.UID != victim.UID || p.DeletionTimestamp != nil
}
