package gang

import (
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"

	"github.com/custom-scheduler/custom-scheduler/pkg/coscheduling/attempt"
	"github.com/custom-scheduler/custom-scheduler/pkg/coscheduling/gangfit"
	"github.com/custom-scheduler/custom-scheduler/pkg/coscheduling/podgroup"
)

// PreFilter's decisions for a member. The plugin reads the gang under its lock, asks Stage what the
// member's cycle is, and then: refuses it (Refuse); narrows it to where its attempt goes (Join, see
// Offer); places it on its own (Extra); or, for the first member of an attempt, checks the gang whole,
// from the cache while it answers (Cached) or afresh, and records the check (Checked).

// Stage is what a member's PreFilter does.
type Stage uint8

const (
	// Refuse: the member holds nothing this cycle; the message says why.
	Refuse Stage = iota
	// Join: an attempt is under way and was checked: the member goes where its attempt goes (its
	// placement, and its planned nodes when the attempt has a plan).
	Join
	// Extra: the quorum is met: the member is a late or replacement member, placed on its own.
	Extra
	// Check: the member is the first of an attempt: the members still missing from the quorum are
	// checked as a whole.
	Check
)

func (s Stage) String() string { return [...]string{"Refuse", "Join", "Extra", "Check"}[s] }

// PreFilterIn is what PreFilter knows of a member's cycle besides the gang.
type PreFilterIn struct {
	Now    time.Time
	Member types.UID
	// Want is the PodGroup's minMember.
	Want int
	// Confirmed counts the quorum on the pod store's word (see Confirmed); it is called only when
	// the member set reaches Want and no attempt is under way, since it lists the group.
	Confirmed func() int
}

// Stage decides what a member's PreFilter does: refused while the group backs off or while it must
// wait for the attempt's lead; joined to an attempt under way; placed on its own once the quorum is
// met; otherwise the first member of an attempt.
func (g *Gang) Stage(in PreFilterIn) (Stage, string) {
	switch {
	case g.BackingOff(in.Now):
		return Refuse, BackoffMessage(g.Key(), g.BackoffUntil)
	case g.WaitsForLead(in.Member):
		return Refuse, fmt.Sprintf("PodGroup %s places member %s first: it found no node behind its siblings in the last attempt", g.Key(), g.LeadName)
	case g.InProgress():
		return Join, ""
	case len(g.Members) >= in.Want && in.Confirmed() >= in.Want:
		return Extra, ""
	}
	return Check, ""
}

// BackoffMessage says until when a group backs off.
func BackoffMessage(key string, until time.Time) string {
	return fmt.Sprintf("PodGroup %s backs off until %s after a failed attempt", key, until.UTC().Format(time.RFC3339))
}

// Offer returns the planned nodes offered to a member (at most limit), when the attempt has a plan
// that still places members and the member may be planned; nil otherwise (the member gets its
// placement's nodes, or every node).
func (g *Gang) Offer(plannable bool, limit int) sets.Set[string] {
	if g.Plan == nil || !plannable {
		return nil
	}
	nodes := g.Plan.Offer(limit)
	if nodes.Len() == 0 {
		return nil
	}
	return nodes
}

// Cached returns the gang's last check while it answers for k: made under the same epoch, PodGroup
// spec and members, less than ttl before k.At.
func (g *Gang) Cached(k FeasibilityKey, ttl time.Duration) (gangfit.Result, bool) {
	if g.Feasibility == nil || !g.CacheKey.Matches(k) || k.At.Sub(g.CacheKey.At) >= ttl {
		return gangfit.Result{}, false
	}
	return *g.Feasibility, true
}

// Checked records a fresh whole-gang check made under k: its result, the plan it made (a fresh check
// replaces the plan of the one before; see KeepPlan) and the placement it chose (nil: no topology
// policy, or the gang does not fit). It reports whether the placement is a domain the attempt did not
// have, and whether the outcome changed: a gang that does not fit is GangInfeasible, except one that
// preempted, which stays Preempting while the room it made is nominated to it.
func (g *Gang) Checked(res gangfit.Result, k FeasibilityKey, chosen *gangfit.Placement, plan *gangfit.PlacementPlan) (newDomain, outcomeChanged bool) {
	g.Feasibility, g.CacheKey = &res, k
	g.KeepPlan(plan)
	newDomain = chosen != nil && (g.Placement == nil || g.Placement.Key != chosen.Key || g.Placement.Value != chosen.Value || g.Placement.Level != chosen.Level)
	g.Placement = chosen
	if !res.Feasible && (g.Outcome.Reason != podgroup.ReasonPreempting || len(g.NominatedNodes) == 0) {
		outcomeChanged = g.SetOutcome(podgroup.ReasonGangInfeasible, res.Message)
	}
	return newDomain, outcomeChanged
}

// StoppedPreempting forgets the gang's last preemption once preemption cannot place it: the nodes it
// nominated (kept only while its victims terminate), and a Preempting outcome, which becomes
// GangInfeasible with the whole-gang check's reason. It returns that reason's message when the
// outcome changed.
func (g *Gang) StoppedPreempting() (string, bool) {
	g.NominatedNodes = nil
	if g.Outcome.Reason != podgroup.ReasonPreempting || g.Feasibility == nil || g.Feasibility.Feasible {
		return "", false
	}
	msg := g.Feasibility.Message
	return msg, g.SetOutcome(podgroup.ReasonGangInfeasible, msg)
}

// Preempted records a preemption the gang made: its members are nominated to nodes, and the victims'
// room is the gang's now, so the next member checks again rather than reuse the infeasible answer.
func (g *Gang) Preempted(nodes []string, message string) {
	g.NominatedNodes = nodes
	g.SetOutcome(podgroup.ReasonPreempting, message)
	g.Feasibility = nil
}

// BusyDomains are the domains ("key=value") chosen by the gangs other than self whose attempt has
// members waiting for the quorum: a gang choosing its domain avoids them while another fits. O(gangs);
// called once per attempt of a gang with a topology policy.
func BusyDomains(gangs map[string]*Gang, self *Gang) map[string]bool {
	var busy map[string]bool
	for _, g := range gangs {
		if g == self || g.Phase == attempt.PhaseQuorum || !g.InProgress() || g.Placement == nil || g.Placement.Value == "" {
			continue
		}
		if busy == nil {
			busy = map[string]bool{}
		}
		busy[g.Placement.Key+"="+g.Placement.Value] = true
	}
	return busy
}
