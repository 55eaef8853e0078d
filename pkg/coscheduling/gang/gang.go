// Package gang is one gang's state in the Coscheduling plugin (the members that count toward its
// quorum, the members waiting at Permit, its attempt, its placement and plan, its reservation, its
// last outcome) and the transitions of that state. It is pure: no clock, store, client or lock. The
// plugin holds every Gang under its mutex, builds each transition's input, calls it, and does the
// I/O the result asks for (allow or reject waiting members, arm timers, record events, write status)
// after releasing the mutex.
package gang

import (
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"

	"github.com/custom-scheduler/custom-scheduler/pkg/coscheduling/attempt"
	"github.com/custom-scheduler/custom-scheduler/pkg/coscheduling/gangfit"
	"github.com/custom-scheduler/custom-scheduler/pkg/coscheduling/podgroup"
	resv "github.com/custom-scheduler/custom-scheduler/pkg/coscheduling/reservation"
)

// Flags says why a pod counts toward its group's quorum.
type Flags uint8

const (
	// Reserved: the pod passed Reserve in this scheduler and is not bound yet.
	Reserved Flags = 1 << iota
	// Bound: the scheduler's pod informer shows the pod live and assigned to a node.
	Bound
)

// Gang is the state of one PodGroup, keyed "namespace/name". Counting is O(1): Members holds exactly
// the live pods that count toward the quorum.
//
// A member is live while it exists, has no deletionTimestamp and has not finished (Succeeded or
// Failed). Only live members count: a pod that stops being live leaves Members at once (Forget), so a
// restarted job never completes a quorum with the pods of its previous run.
type Gang struct {
	Namespace, Name string
	// PodGroupUID is the PodGroup this state was built for. A PodGroup deleted and recreated under
	// the same name has a new UID, and the attempt history starts from nothing (ResetHistory).
	PodGroupUID types.UID

	// Members are the live pods that are reserved here or bound; len(Members) plus Credit is the
	// quorum count (Count).
	Members map[types.UID]Flags
	// Credit is the finished-member rule's part of the quorum count: the members of the run of the
	// member at hand that left by succeeding (see podgroup.SucceededMember). The plugin sets it before
	// each step of a member; it is not a fact the state keeps.
	Credit int
	// Succeeded reports whether a pod is counted in Credit (nil: none is), so that a pod the pod store
	// still holds live for a moment after it succeeded is not counted twice by Confirmed.
	Succeeded func(types.UID) bool
	// ReservedOn is the node each member reserved here is on (until the informer shows it bound): a
	// gang's domain is pinned by its reserved members as much as by its bound ones.
	ReservedOn map[types.UID]string
	// Waiting are the members waiting at Permit in the current attempt.
	Waiting map[types.UID]*v1.Pod
	// Unplaced are members that found no node since the last attempt ended: when too few members
	// are left to reach the quorum without them, the attempt fails.
	Unplaced map[types.UID]struct{}

	// Attempt is the current attempt (see attempt.Step): it starts at the first Reserve while no
	// member waits.
	attempt.Attempt
	// BackoffTimer brings the group back when its back-off ends (armed and stopped by the plugin).
	BackoffTimer clock.Timer

	// Outcome is the last attempt's result as the PodGroup's status reports it, kept until the next
	// attempt starts.
	Outcome Outcome

	// Placement is the domain chosen for the current attempt of a gang with a topology policy (nil:
	// no policy, or not chosen yet).
	Placement *gangfit.Placement
	// Refused are the domains ("key=value") the real filters refused the gang in: an attempt placed
	// there failed because a member found no node in it. The next checks avoid each while another
	// domain fits, until its refusal ends (see RefusedDomainTTL).
	Refused map[string]Refusal
	// RefusedDevices are the nodes whose devices the real filter refused members on, where the
	// check counted them (see DeviceRefusals).
	RefusedDevices map[string]DeviceRefusal

	// Plan is the current attempt's placement plan (nil: none, or dropped). NoPlan is set when a
	// member fell back from a plan: no new plan is made until the attempt ends (quorum or failure).
	Plan   *gangfit.PlacementPlan
	NoPlan bool

	// Reserve is the gang's reservation against starvation.
	Reserve Reservation

	// NominatedNodes are the nodes the gang's last preemption nominated its members to: while a pod
	// it preempted is still terminating there, the gang waits instead of preempting again.
	NominatedNodes []string

	// Lead is a member that found no node in an attempt whose other members were already reserved
	// (possibly in its way, e.g. through inter-pod anti-affinity): the next attempt follows after
	// attempt.LeadRetryDelay instead of the back-off, and places it first. LedBy are the members
	// that led since the quorum was last reached: each leads at most once, and at most MaxLeads do,
	// so a gang that fails for another reason soon backs off as usual.
	Lead     types.UID
	LeadName string
	LedBy    map[types.UID]struct{}

	// TreeShort is set by the plugin before OnPermit: a gang composite above the group is not ready
	// with the counts of now (see tree.Branch.Admits), so the group's own quorum is not enough.
	TreeShort bool

	// Feasibility caches the last whole-gang check; it is valid while CacheKey matches.
	Feasibility *gangfit.Result
	CacheKey    FeasibilityKey
	// LastPreemption caches the last preemption that could not help (see CachedPreemption).
	LastPreemption *PreemptMemo
	// PreemptionsUnderWay counts the preemptions whose evictions and nominations are being made
	// outside the scheduling cycle for the gang or for its job (its own and a sibling group's may
	// overlap); the members are held back (Stage) until they are done.
	PreemptionsUnderWay int
}

// StartPreempting holds the members back while a preemption's calls are made (see
// PreemptionsUnderWay); DonePreempting lets them in once the last is done.
func (g *Gang) StartPreempting() { g.PreemptionsUnderWay++ }

// DonePreempting: see StartPreempting. A history reset in between leaves nothing to undo.
func (g *Gang) DonePreempting() { g.PreemptionsUnderWay = max(g.PreemptionsUnderWay-1, 0) }

// Outcome is a gang's last scheduling-side result for the status updater: a Scheduled condition
// reason (GangInfeasible, GangRejected, GangTimedOut, QuorumReached, Preempting) and its message;
// empty while nothing happened yet.
type Outcome struct {
	Reason, Message string
}

// Reservation is a gang's reservation: its state machine's state (package reservation), the plan it
// holds with each member's node, and the gang's timer (armed by the plugin).
type Reservation struct {
	resv.State
	Plan gangfit.ReservationPlan
	Node map[types.UID]string
	// Groups are the keys of the other groups of a job whose reservation the gang holds (see
	// ReserveIn.Job; nil: its own members only): their members are nominated by its plan, and their
	// nominations cleared at its end (ReservationDone.Groups).
	Groups []string
	// Timer fires the machine's Timer event at TimerAt.
	Timer   clock.Timer
	TimerAt time.Time
}

// Held reports whether the gang holds a reservation.
func (r *Reservation) Held() bool { return r.Phase == resv.Held }

// FeasibilityKey is what a cached check depends on: cluster changes that free capacity (Epoch), the
// PodGroup's spec (UID and Generation: status-only updates leave it valid; and Want, its minMember,
// which the in-tree API edits without a new generation) and the group's members.
type FeasibilityKey struct {
	Epoch uint64
	// Claims is the version of the nominations that hold room against the gang (see
	// claims.Claims.VersionAgainst): a nomination of a lower priority leaves the check good.
	Claims     uint64
	UID        types.UID
	Generation int64
	Want       int
	Existing   int
	Counted    int
	// Job fingerprints the members of the other groups of the gang's job (see PreFilterIn.jobMembers;
	// 0: in none): a check made before one of them had all its pods cannot judge the ways through it.
	Job uint64
	At  time.Time
}

// Matches reports whether a cached check made under k answers for o (At aside).
func (k FeasibilityKey) Matches(o FeasibilityKey) bool {
	return k.Epoch == o.Epoch && k.Claims == o.Claims && k.UID == o.UID && k.Generation == o.Generation && k.Want == o.Want && k.Existing == o.Existing && k.Counted == o.Counted && k.Job == o.Job
}

// New returns the empty state of PodGroup namespace/name of UID uid.
func New(namespace, name string, uid types.UID) *Gang {
	return &Gang{Namespace: namespace, Name: name, PodGroupUID: uid, Members: map[types.UID]Flags{}, ReservedOn: map[types.UID]string{},
		Waiting: map[types.UID]*v1.Pod{}, Unplaced: map[types.UID]struct{}{}}
}

// Count is the quorum count: the live members reserved here or bound, plus the members of the run
// that succeeded (Credit). O(1).
func (g *Gang) Count() int { return len(g.Members) + g.Credit }

// Key is the group's "namespace/name".
func (g *Gang) Key() string { return podgroup.Key(g.Namespace, g.Name) }

// Set counts a member for f.
func (g *Gang) Set(uid types.UID, f Flags) { g.Members[uid] |= f }

// CountReserved counts a member reserved on node: it no longer counts as one that found no node.
func (g *Gang) CountReserved(uid types.UID, node string) {
	g.Set(uid, Reserved)
	g.ReservedOn[uid] = node
	delete(g.Unplaced, uid)
}

// CountBound counts a member the informer shows bound: it counts from the informer now, not from a
// reservation.
func (g *Gang) CountBound(uid types.UID) {
	g.Members[uid] = Bound
	delete(g.ReservedOn, uid)
}

// Clear stops counting a member for f; it reports whether the member counted for f.
func (g *Gang) Clear(uid types.UID, f Flags) bool {
	old, ok := g.Members[uid]
	if !ok || old&f == 0 {
		return false
	}
	if f&Reserved != 0 {
		delete(g.ReservedOn, uid)
	}
	if rest := old &^ f; rest == 0 {
		delete(g.Members, uid)
	} else {
		g.Members[uid] = rest
	}
	return true
}

// Forget stops counting a pod that is gone or no longer live: it leaves the members at once, so no
// quorum is completed with it. A member waiting at Permit stays in Waiting: the framework rejects it
// and its Unreserve fails the attempt.
func (g *Gang) Forget(uid types.UID) {
	delete(g.Members, uid)
	delete(g.ReservedOn, uid)
	delete(g.Unplaced, uid)
	if g.Lead == uid {
		g.ClearLead()
	}
}

// ReservedNodes are the nodes the gang's members are reserved on and not yet seen bound.
func (g *Gang) ReservedNodes() []string {
	out := make([]string, 0, len(g.ReservedOn))
	for _, n := range g.ReservedOn {
		out = append(out, n)
	}
	return out
}

// InProgress reports whether members of the current attempt wait at Permit.
func (g *Gang) InProgress() bool { return len(g.Waiting) > 0 }

// HoldsNothing reports whether the state tracks no member, no attempt and no back-off: with no live
// pod left in the group either, it may be dropped.
func (g *Gang) HoldsNothing(now time.Time) bool {
	return len(g.Members) == 0 && len(g.Waiting) == 0 && !g.BackingOff(now)
}

// ResetHistory forgets what earlier attempts left behind (back-off, last failure, cached check,
// placement, refused domains, plan, nominations, outcome, reservation, leads) for a PodGroup that was
// recreated, and returns the timers the caller must stop. Members stay: they are facts about live pods.
func (g *Gang) ResetHistory(uid types.UID) []clock.Timer {
	timers := []clock.Timer{g.BackoffTimer, g.Reserve.Timer}
	g.PodGroupUID = uid
	g.BackoffTimer = nil
	g.Attempt = attempt.Attempt{}
	g.Feasibility, g.CacheKey = nil, FeasibilityKey{}
	g.LastPreemption = nil
	g.PreemptionsUnderWay = 0
	g.Placement = nil
	g.Refused, g.RefusedDevices = nil, nil
	g.DropPlan()
	g.NominatedNodes = nil
	g.Outcome = Outcome{}
	g.Reserve = Reservation{}
	g.ClearLead()
	g.LedBy = nil
	return timers
}

// Recreated makes g the state of a PodGroup recreated under its name (uid): what earlier attempts
// left behind is forgotten (see ResetHistory) and its timers are stopped. The old PodGroup's
// reservation, when it waited or held one, is returned for the caller to end (the room it nominated is
// not the new PodGroup's); its timer is stopped too.
func (g *Gang) Recreated(uid types.UID) (old Reservation, end bool) {
	old = g.Reserve
	for _, t := range g.ResetHistory(uid) {
		if t != nil {
			t.Stop()
		}
	}
	old.Timer, old.TimerAt = nil, time.Time{}
	return old, old.Phase != resv.Idle
}

// SetOutcome records the last attempt's result for the status; it reports whether it changed.
func (g *Gang) SetOutcome(reason, message string) bool {
	o := Outcome{Reason: reason, Message: message}
	if g.Outcome == o {
		return false
	}
	g.Outcome = o
	return true
}

// MaxLeads bounds the attempts retried with another member first (see Gang.Lead).
const MaxLeads = 3

// MayLead reports whether a member that found no node may lead the next attempt: other members of
// the attempt are reserved (they may be what is in its way), it has not led since the last quorum,
// and fewer than MaxLeads members have.
func (g *Gang) MayLead(uid types.UID) bool {
	if len(g.Waiting) == 0 || len(g.LedBy) >= MaxLeads {
		return false
	}
	_, led := g.LedBy[uid]
	return !led
}

// SetLead makes a member the next attempt's first.
func (g *Gang) SetLead(pod *v1.Pod) {
	if g.LedBy == nil {
		g.LedBy = map[types.UID]struct{}{}
	}
	g.LedBy[pod.UID] = struct{}{}
	g.Lead, g.LeadName = pod.UID, pod.Name
}

// ClearLead forgets the next attempt's first member (LedBy stays: see Gang.Lead).
func (g *Gang) ClearLead() { g.Lead, g.LeadName = "", "" }

// WaitsForLead reports whether a member must wait for the attempt's lead to be reserved first.
func (g *Gang) WaitsForLead(uid types.UID) bool {
	return g.Lead != "" && g.Lead != uid && g.Members[g.Lead] == 0
}

// Rank orders the members of one group in the queue: the lead first, then constrained members, then
// the rest.
func (g *Gang) Rank(pod *v1.Pod) uint8 {
	switch {
	case g.Lead != "" && pod.UID == g.Lead:
		return 0
	case Constrained(pod):
		return 1
	default:
		return 2
	}
}

// Constrained reports whether a member restricts where it may go beyond its resources: a node
// selector, required node affinity, required inter-pod (anti-)affinity or a hard topology spread.
// Such members go first in an attempt, while the most nodes are still open to them.
func Constrained(pod *v1.Pod) bool {
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

// DropPlan forgets the gang's plan and its fall-back (at the end of an attempt).
func (g *Gang) DropPlan() { g.Plan, g.NoPlan = nil, false }

// KeepPlan keeps the plan a fresh whole-gang check made (nil when the gang does not fit or the plan
// could not place it), unless the attempt already fell back from a plan, the gang's members are
// nominated (by a preemption) or it holds a reservation.
func (g *Gang) KeepPlan(plan *gangfit.PlacementPlan) {
	g.Plan = nil
	if plan == nil || g.NoPlan || len(g.NominatedNodes) > 0 || g.Reserve.Held() {
		return
	}
	g.Plan = plan
}

// MissPlan drops the plan for the rest of the attempt: a member fitted none of its planned nodes.
func (g *Gang) MissPlan() { g.Plan, g.NoPlan = nil, true }

// AddWaiting records a member waiting at Permit; it reports whether it is the first (the gang starts
// waiting).
func (g *Gang) AddWaiting(pod *v1.Pod) (first bool) {
	first = len(g.Waiting) == 0
	g.Waiting[pod.UID] = pod
	return first
}

// RemoveWaiting forgets a member that waited at Permit; it reports whether it waited, and whether
// the gang waits no more.
func (g *Gang) RemoveWaiting(uid types.UID) (was, emptied bool) {
	if _, ok := g.Waiting[uid]; !ok {
		return false, false
	}
	delete(g.Waiting, uid)
	return true, len(g.Waiting) == 0
}

// TakeWaiting empties the waiting set and returns what it held.
func (g *Gang) TakeWaiting() []*v1.Pod {
	if len(g.Waiting) == 0 {
		return nil
	}
	out := make([]*v1.Pod, 0, len(g.Waiting))
	for _, p := range g.Waiting {
		out = append(out, p)
	}
	g.Waiting = map[types.UID]*v1.Pod{}
	return out
}

// Split splits a group's live pods into the members that count toward its quorum (reserved here or
// bound) and the candidates still to be placed; countedN is the count, taking the member set when it
// is ahead of the store.
func (g *Gang) Split(members []*v1.Pod) (candidates, counted []*v1.Pod, countedN int) {
	for _, m := range members {
		if _, isMember := g.Members[m.UID]; isMember || m.Spec.NodeName != "" {
			counted = append(counted, m)
		} else {
			candidates = append(candidates, m)
		}
	}
	return candidates, counted, max(len(counted), len(g.Members))
}

// Confirmed counts the group's members on the pod store's word: live pods bound, plus live pods
// reserved here, plus the members of the run that succeeded (Credit; a pod the store still holds live
// is counted once). The member set is kept by the plugin's informer handler, which can lag the store
// (and the scheduling queue's own handler) by a moment: a job restarted by deleting its pods and
// creating new ones could have its new pods scheduled while the old ones still count. The store is
// updated before any handler runs, so deciding a quorum on it never counts a pod that is gone.
func (g *Gang) Confirmed(members []*v1.Pod) int {
	n := 0
	for _, p := range members {
		if p.Spec.NodeName != "" || g.Members[p.UID]&Reserved != 0 {
			if g.Credit > 0 && g.Succeeded != nil && g.Succeeded(p.UID) {
				continue
			}
			n++
		}
	}
	return n + g.Credit
}

// Step moves the gang's attempt on an event (see attempt.Step) and applies what belongs to the
// gang's state: at a quorum, the waiting members are taken to be allowed and what the attempts
// before it left (lead, unplaced members, nominations, plan) is dropped; at a failure, the waiting
// members are taken to be rejected and stop counting at once, and the cached check, placement and
// plan are dropped. It returns the decision and the members to allow or reject; the caller allows or
// rejects them, arms the back-off (d.RejectWaiting, unless the PodGroup was deleted) and tells the
// reservation of a quorum (d.AllowWaiting) after releasing its lock. The outcome's message is the
// caller's to set.
func (g *Gang) Step(in attempt.Input, backoff time.Duration) (attempt.Decision, []*v1.Pod) {
	in.Waiting, in.Backoff = len(g.Waiting), backoff
	var d attempt.Decision
	g.Attempt, d = attempt.Step(g.Attempt, in)
	switch {
	case d.AllowWaiting:
		g.ClearLead()
		g.LedBy = nil
		clear(g.Unplaced)
		g.NominatedNodes = nil
		g.DropPlan()
		g.SetOutcome(podgroup.ReasonQuorumReached, "")
		return d, g.TakeWaiting()
	case d.RejectWaiting:
		clear(g.Unplaced)
		victims := g.TakeWaiting()
		// The victims stop counting now, not when their own Unreserve runs (asynchronously, in their
		// binding cycles): a member reserved meanwhile must not see them as part of a quorum.
		for _, v := range victims {
			g.Clear(v.UID, Reserved)
		}
		g.Feasibility = nil
		g.Placement = nil
		g.DropPlan()
		return d, victims
	}
	return d, nil
}
