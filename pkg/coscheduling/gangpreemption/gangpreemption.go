// Package gangpreemption is upstream's preemption machinery adapted to gangs: DefaultPreemption's
// Evaluator (which node a plain pod preempts on) with whole gangs as units of eviction, and
// upstream's Executor evicting victims (DisruptionTarget condition, graceful delete, event; a victim
// waiting at Permit is rejected in memory), with hooks for the gang plugin to follow each eviction.
// The decisions are gangfit's (GangIndex.Units, Reprieve); this package adds the framework calls.
//
// What could not be taken from upstream as it is: the Executor's loop over a candidate's victims
// (prepareCandidate) is unexported, and it cancels the other evictions at the first failed one,
// which would leave a victim gang half evicted; Evict runs every eviction and reports every error,
// and the plugin retries a failed member of a gang whose siblings are leaving.
package gangpreemption

import (
	"context"
	"errors"
	"fmt"
	"sync"

	v1 "k8s.io/api/core/v1"
	policy "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
	policylisters "k8s.io/client-go/listers/policy/v1"
	corev1helpers "k8s.io/component-helpers/scheduling/corev1"
	"k8s.io/klog/v2"
	extenderv1 "k8s.io/kube-scheduler/extender/v1"
	fwk "k8s.io/kube-scheduler/framework"
	kubeconfig "k8s.io/kubernetes/pkg/scheduler/apis/config"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/defaultpreemption"
	plfeature "k8s.io/kubernetes/pkg/scheduler/framework/plugins/feature"
	"k8s.io/kubernetes/pkg/scheduler/framework/preemption"

	"github.com/custom-scheduler/custom-scheduler/pkg/apis/scheduling/v1alpha1"
	"github.com/custom-scheduler/custom-scheduler/pkg/coscheduling/gangfit"
	"github.com/custom-scheduler/custom-scheduler/pkg/coscheduling/podgroup"
)

// Preemption holds the upstream preemption machinery, configured for gangs.
type Preemption struct {
	// DefaultPreemption supplies the parts of preemption.Interface that do not change (candidate
	// counts, a plain pod's eligibility, node ordering); SelectVictimsOnNode is ours.
	*defaultpreemption.DefaultPreemption
	handle fwk.Handle
	plugin string
	// Evaluator runs a plain pod's preemption.
	Evaluator *preemption.Evaluator
	PDBs      policylisters.PodDisruptionBudgetLister
	// Evicted, when set, is told of every victim evicted (the eviction's API calls succeeded, or it
	// was rejected in memory), with the preemptor's type and the preemption's victims; Failed of
	// every victim whose eviction failed.
	Evicted func(victim *v1.Pod, preemptorType string, victims []*v1.Pod)
	Failed  func(ctx context.Context, c preemption.Candidate, p preemption.ExecutorPreemptor, victim *v1.Pod)
	// WaitingLock, when set, is held while a victim waiting at Permit is preempted in memory: the
	// framework's waiting pod is not safe against two stops at once (in 1.37.2 its stopWithStatus
	// writes under a read lock), and the plugin rejects waiting pods too; it holds the same lock.
	WaitingLock sync.Locker
	// EvictOnce is upstream's eviction of one victim, without the hooks (for retries).
	EvictOnce func(ctx context.Context, c preemption.Candidate, p preemption.ExecutorPreemptor, victim *v1.Pod, plugin string) (bool, error)
}

var _ preemption.Interface = &Preemption{}

// New builds the machinery with upstream's default arguments, for the plugin named plugin. Evictions
// are made in the scheduling cycle (upstream's asynchronous mode would need its PreEnqueue, which
// DefaultPreemption owns), so a pod that preempts is retried only after its victims were asked to go.
func New(ctx context.Context, h fwk.Handle, plugin string) (*Preemption, error) {
	fts := plfeature.NewSchedulerFeaturesFromGates(utilfeature.DefaultFeatureGate)
	fts.EnableAsyncPreemption = false
	args := &kubeconfig.DefaultPreemptionArgs{MinCandidateNodesPercentage: 10, MinCandidateNodesAbsolute: 100}
	dp, err := defaultpreemption.New(ctx, args, h, fts)
	if err != nil {
		return nil, fmt.Errorf("setting up preemption: %w", err)
	}
	gp := &Preemption{
		DefaultPreemption: dp,
		handle:            h,
		plugin:            plugin,
		PDBs:              h.SharedInformerFactory().Policy().V1().PodDisruptionBudgets().Lister(),
	}
	gp.Evaluator = preemption.NewEvaluator(plugin, h, gp, dp.Executor)
	evict := dp.Executor.PreemptPod
	gp.EvictOnce = evict
	dp.Executor.PreemptPod = func(ctx context.Context, c preemption.Candidate, p preemption.ExecutorPreemptor, victim *v1.Pod, plugin string) (bool, error) {
		var (
			inMemory bool
			err      error
		)
		if gp.WaitingLock != nil && h.GetWaitingPod(victim.UID) != nil {
			gp.WaitingLock.Lock()
			inMemory, err = evict(ctx, c, p, victim, plugin)
			gp.WaitingLock.Unlock()
		} else {
			inMemory, err = evict(ctx, c, p, victim, plugin)
		}
		if err != nil {
			if gp.Failed != nil {
				gp.Failed(ctx, c, p, victim)
			}
			return inMemory, err
		}
		if gp.Evicted != nil {
			gp.Evicted(victim, p.Type(), c.Victims().Pods)
		}
		return inMemory, err
	}
	return gp, nil
}

// FirstOfItsGang reports whether victim is a gang member and the first of its gang among victims.
func FirstOfItsGang(victim *v1.Pod, victims []*v1.Pod) bool {
	name, ok := podgroup.UnitOf(victim)
	if !ok {
		return false
	}
	for _, v := range victims {
		if n, ok := podgroup.UnitOf(v); ok && n == name && v.Namespace == victim.Namespace {
			return v.UID == victim.UID
		}
	}
	return false
}

// gangIndexKey holds, for a plain pod's preemption, the gangs of the snapshot (see lazyGangIndex).
const gangIndexKey fwk.StateKey = "Coscheduling/gang-victims"

// PrepareGangIndex lets a plain pod's preemption (Evaluator.Preempt with this state) see the
// snapshot's gangs as units of eviction; the index is built only if a node's victims are looked at.
func PrepareGangIndex(state fwk.CycleState, nodes fwk.NodeInfoLister) {
	state.Write(gangIndexKey, &lazyGangIndex{nodes: nodes})
}

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
func (gp *Preemption) SelectVictimsOnNode(ctx context.Context, state fwk.CycleState, preemptor *v1.Pod, nodeInfo fwk.NodeInfo, possible []*preemption.DomainVictim, pdbs []*policy.PodDisruptionBudget) ([]*v1.Pod, int, *fwk.Status) {
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

// MetricsKind is the metrics label of a preemptor type: "gang" or "pod".
func MetricsKind(preemptorType string) string {
	if preemptorType == PreemptorType {
		return "gang"
	}
	return "pod"
}

// PreemptorType is the preemptor type upstream's Executor writes in victims' conditions and events
// ("preempting to accommodate a higher priority PodGroup").
const PreemptorType = "PodGroup"

// Gang is a gang as upstream's Executor sees a preemptor.
type Gang struct {
	pg        *v1alpha1.PodGroup
	members   []*v1.Pod
	priority  int32
	scheduler string
}

var _ preemption.ExecutorPreemptor = &Gang{}

// NewGang is the PodGroup pg preempting for members at priority, on behalf of the scheduler named.
func NewGang(pg *v1alpha1.PodGroup, members []*v1.Pod, priority int32, scheduler string) *Gang {
	return &Gang{pg: pg, members: members, priority: priority, scheduler: scheduler}
}

func (p *Gang) GetName() string       { return p.pg.Name }
func (p *Gang) GetNamespace() string  { return p.pg.Namespace }
func (p *Gang) UID() types.UID        { return p.pg.UID }
func (p *Gang) SchedulerName() string { return p.scheduler }
func (p *Gang) Priority() int32       { return p.priority }
func (p *Gang) Type() string          { return PreemptorType }

// Obj is the PodGroup as an object reference: the event recorder's scheme does not know its type.
func (p *Gang) Obj() runtime.Object { return podgroup.Ref(p.pg) }

func (p *Gang) Pods() map[string]*v1.Pod {
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

// TerminatingVictims counts the pods of lower priority than prio that preemption is terminating on
// the given nodes: while there are some, a preemptor nominated there waits for them.
func TerminatingVictims(infos fwk.NodeInfoLister, nodes []string, prio int32) int {
	n := 0
	seen := map[string]bool{}
	for _, name := range nodes {
		if seen[name] {
			continue
		}
		seen[name] = true
		ni, err := infos.Get(name)
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

// Evict asks upstream's Executor to preempt every victim (in parallel), for the preemptor p: the
// DisruptionTarget condition, a graceful delete and an event on each; a victim waiting at Permit is
// rejected in memory. Every eviction is tried, whatever the others do; the errors are joined.
func (gp *Preemption) Evict(ctx context.Context, p preemption.ExecutorPreemptor, victims []*v1.Pod, violations int) error {
	var (
		mu   sync.Mutex
		errs []error
	)
	all := &extenderv1.Victims{Pods: victims, NumPDBViolations: int64(violations)}
	gp.handle.Parallelizer().Until(ctx, len(victims), func(i int) {
		v := victims[i]
		if v.DeletionTimestamp != nil {
			return
		}
		if _, err := gp.Executor.PreemptPod(ctx, &victimCandidate{node: v.Spec.NodeName, victims: all}, p, v, gp.plugin); err != nil {
			mu.Lock()
			errs = append(errs, err)
			mu.Unlock()
		}
	}, gp.plugin)
	return errors.Join(errs...)
}
