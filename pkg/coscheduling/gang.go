package coscheduling

import (
	"time"

	"github.com/custom-scheduler/custom-scheduler/pkg/coscheduling/attempt"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"

	"github.com/custom-scheduler/custom-scheduler/pkg/coscheduling/gangfit"
	"github.com/custom-scheduler/custom-scheduler/pkg/coscheduling/podgroup"
)

// memberFlags says why a pod counts toward its group's quorum.
type memberFlags uint8

const (
	// reserved: the pod passed Reserve in this scheduler and is not bound yet.
	reserved memberFlags = 1 << iota
	// bound: the scheduler's pod informer shows the pod live and assigned to a node.
	bound
)

// gang is the in-memory state of one PodGroup, keyed "namespace/name". Every field is guarded by the
// plugin's mutex. Counting is O(1): members holds exactly the live pods that count toward the quorum.
//
// A member is live while it exists, has no deletionTimestamp and has not finished (Succeeded or
// Failed). Only live members count: a pod that stops being live leaves members at once (see
// forgetLocked), so a restarted job never completes a quorum with the pods of its previous run.
type gang struct {
	namespace, name string
	// podGroupUID is the PodGroup this state was built for. A PodGroup deleted and recreated under the
	// same name has a new UID, and the attempt history starts from nothing (resetHistory).
	podGroupUID types.UID

	// members are the live pods that are reserved here or bound; len(members) is the quorum count.
	members map[types.UID]memberFlags
	// reservedOn is the node each member reserved here is on (until the informer shows it bound):
	// a gang's domain is pinned by its reserved members as much as by its bound ones.
	reservedOn map[types.UID]string
	// waiting are the members waiting at Permit in the current attempt.
	waiting map[types.UID]*v1.Pod
	// unplaced are members that found no node since the last attempt ended: when too few members
	// are left to reach the quorum without them, the attempt fails.
	unplaced map[types.UID]struct{}

	// attempt is the current attempt (see step): it starts at the first Reserve while no member waits.
	attempt.Attempt
	backoffTimer clock.Timer

	// outcome is the last attempt's result as the PodGroup's status reports it (reason and message),
	// kept until the next attempt starts.
	outcome attemptOutcome

	// placement is the domain chosen for the current attempt of a gang with a topology policy (nil:
	// no policy, or not chosen yet).
	placement *gangfit.Placement

	// plan is the current attempt's placement plan (nil: none, or dropped). noPlan is set when a
	// member fell back from a plan: no new plan is made until the attempt ends (quorum or failure).
	plan   *gangfit.PlacementPlan
	noPlan bool

	// reserve is the gang's reservation against starvation (see reservation.go).
	reserve reservation

	// nominatedNodes are the nodes the gang's last preemption nominated its members to: while a pod
	// it preempted is still terminating there, the gang waits instead of preempting again.
	nominatedNodes []string

	// lead is a member that found no node in an attempt whose other members were already reserved
	// (possibly in its way, e.g. through inter-pod anti-affinity): the next attempt follows after
	// leadRetryDelay instead of the back-off, and places it first (see PreFilter). ledBy are the
	// members that led since the quorum was last reached: each leads at most once, and at most
	// maxLeads do, so a gang that fails for another reason soon backs off as usual.
	lead     types.UID
	leadName string
	ledBy    map[types.UID]struct{}

	// feasibility caches the last check; it is valid while cacheKey matches.
	feasibility *gangfit.Result
	cacheKey    feasibilityKey
	// hint remembers the member count computed for the last pod-add event, so the hint for n gated
	// members costs one count, not n.
	hint hintCount
}

// attemptOutcome is a gang's last scheduling-side result for the status updater: a Scheduled
// condition reason (EventGangInfeasible, EventGangRejected, EventGangTimedOut, EventQuorumReached) and
// its message; empty while nothing happened yet.
type attemptOutcome struct {
	reason, message string
}

// feasibilityKey is what a cached check depends on: cluster changes that free capacity (epoch), the
// PodGroup's spec (UID and generation: status-only updates leave it valid) and the group's members.
type feasibilityKey struct {
	epoch      uint64
	uid        types.UID
	generation int64
	existing   int
	counted    int
	at         time.Time
}

func (k feasibilityKey) matches(o feasibilityKey) bool {
	return k.epoch == o.epoch && k.uid == o.uid && k.generation == o.generation && k.existing == o.existing && k.counted == o.counted
}

type hintCount struct {
	uid   types.UID
	count int
}

func newGang(namespace, name string) *gang {
	return &gang{namespace: namespace, name: name, members: map[types.UID]memberFlags{}, reservedOn: map[types.UID]string{},
		waiting: map[types.UID]*v1.Pod{}, unplaced: map[types.UID]struct{}{}}
}

func (g *gang) key() string { return podgroup.Key(g.namespace, g.name) }

func (g *gang) set(uid types.UID, f memberFlags) { g.members[uid] |= f }

func (g *gang) clear(uid types.UID, f memberFlags) bool {
	old, ok := g.members[uid]
	if !ok || old&f == 0 {
		return false
	}
	if f&reserved != 0 {
		delete(g.reservedOn, uid)
	}
	if rest := old &^ f; rest == 0 {
		delete(g.members, uid)
	} else {
		g.members[uid] = rest
	}
	return true
}

// reservedNodes are the nodes the gang's members are reserved on and not yet seen bound.
func (g *gang) reservedNodes() []string {
	out := make([]string, 0, len(g.reservedOn))
	for _, n := range g.reservedOn {
		out = append(out, n)
	}
	return out
}

// attemptInProgress reports whether members of the current attempt wait at Permit.
func (g *gang) attemptInProgress() bool { return len(g.waiting) > 0 }

// holdsNothing reports whether the state tracks no member, no attempt and no back-off: with no live
// pod left in the group either, it may be dropped.
func (g *gang) holdsNothing(now time.Time) bool {
	return len(g.members) == 0 && len(g.waiting) == 0 && !g.BackingOff(now)
}

// resetHistory forgets what earlier attempts left behind (back-off, last failure, cached check,
// outcome) for a PodGroup that was recreated. Members stay: they are facts about live pods.
func (g *gang) resetHistory(uid types.UID) {
	g.podGroupUID = uid
	if g.backoffTimer != nil {
		g.backoffTimer.Stop()
		g.backoffTimer = nil
	}
	g.Attempt = attempt.Attempt{}
	g.feasibility, g.cacheKey = nil, feasibilityKey{}
	g.placement = nil
	g.dropPlanLocked()
	g.nominatedNodes = nil
	g.outcome = attemptOutcome{}
	g.reserve = reservation{}
	g.clearLead()
	g.ledBy = nil
	g.hint = hintCount{}
}

// maxLeads bounds the attempts retried with another member first (see gang.lead).
const maxLeads = 3

// mayLead reports whether a member that found no node may lead the next attempt: other members of
// the attempt are reserved (they may be what is in its way), it has not led since the last quorum,
// and fewer than maxLeads members have.
func (g *gang) mayLead(uid types.UID) bool {
	if len(g.waiting) == 0 || len(g.ledBy) >= maxLeads {
		return false
	}
	_, led := g.ledBy[uid]
	return !led
}

// setLead makes a member the next attempt's first.
func (g *gang) setLead(pod *v1.Pod) {
	if g.ledBy == nil {
		g.ledBy = map[types.UID]struct{}{}
	}
	g.ledBy[pod.UID] = struct{}{}
	g.lead, g.leadName = pod.UID, pod.Name
}

// clearLead forgets the next attempt's first member (ledBy stays: see gang.lead).
func (g *gang) clearLead() { g.lead, g.leadName = "", "" }

// waitsForLead reports whether a member must wait for the attempt's lead to be reserved first.
func (g *gang) waitsForLead(uid types.UID) bool {
	return g.lead != "" && g.lead != uid && g.members[g.lead] == 0
}

// rank orders the members of one group in the queue: the lead first, then constrained members, then
// the rest.
func (g *gang) rank(pod *v1.Pod) uint8 {
	switch {
	case g.lead != "" && pod.UID == g.lead:
		return 0
	case constrained(pod):
		return 1
	default:
		return 2
	}
}

// constrained reports whether a member restricts where it may go beyond its resources: a node
// selector, required node affinity, required inter-pod (anti-)affinity or a hard topology spread.
// Such members go first in an attempt, while the most nodes are still open to them.
func constrained(pod *v1.Pod) bool {
	if len(pod.Spec.NodeSelector) > 0 {
		return true
	}
	for _, c := range pod.Spec.TopologySpreadConstraints {
		if c.WhenUnsatisfiable == v1.DoNotSchedule {
			return true
		}
	}
	a := pod.Spec.Affinity
	if a == nil {
		return false
	}
	if a.NodeAffinity != nil && a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution != nil {
		return true
	}
	if a.PodAffinity != nil && len(a.PodAffinity.RequiredDuringSchedulingIgnoredDuringExecution) > 0 {
		return true
	}
	return a.PodAntiAffinity != nil && len(a.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution) > 0
}
