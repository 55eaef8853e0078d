// Package attempt is a gang attempt as a state machine: Step is the one place that decides how an
// attempt moves. The plugin gathers its input under its mutex, calls Step, and applies the decision.
package attempt

import (
	"time"

	"github.com/custom-scheduler/custom-scheduler/pkg/coscheduling/podgroup"
)

// LeadRetryDelay is the back-off of an attempt retried with another member first (see
// gang.Gang.Lead): long enough for the rejected members' reservations and nominations to be released, so
// that the lead does not meet them again.
const LeadRetryDelay = time.Second

// A gang attempt as a state machine. step is the one place that decides how an attempt moves: the
// extension points and handlers gather its input under the plugin's mutex (counts, the member's flags,
// the time), call step, and apply its decision (allow or reject the waiting members, start the
// back-off timer, activate members, record events). step reads no clock, store or lock, so every
// transition is a row of TestAttemptTransitions.

// phase is where a gang's current attempt stands.
type Phase uint8

const (
	// phaseIdle: no attempt since the state was built or its PodGroup was recreated.
	PhaseIdle Phase = iota
	// phaseGathering: the attempt started at a Reserve; its members wait at Permit for the quorum.
	PhaseGathering
	// phaseQuorum: the attempt reached minMember; its members bind, and later members pass Permit.
	PhaseQuorum
	// phaseFailed: the attempt was rejected (a member found no node or left, the deadline passed, a
	// member was preempted, the PodGroup was deleted); the members' Unreserves are echoes of that.
	PhaseFailed
)

func (p Phase) String() string {
	return [...]string{"Idle", "Gathering", "Quorum", "Failed"}[p]
}

// attempt is the part of a gang's state that step owns.
type Attempt struct {
	Phase Phase
	// start and deadline: when the attempt started and when its members stop waiting at Permit.
	Start, Deadline time.Time
	// needsQuorum: the attempt started below minMember, so its time to quorum is worth observing.
	NeedsQuorum bool
	// activated: the attempt already moved the group's unscheduled members to the active queue.
	Activated bool
	// backoffUntil keeps the members out of scheduling after a failed attempt.
	BackoffUntil time.Time
	// lastFailure: when the last attempt failed (see queueStamp).
	LastFailure time.Time
	// FailedWithJob: the attempt failed with another group of its job (TreeFailed), not on its own
	// account: its back-off is an echo of that group's failure and says nothing of its own room.
	FailedWithJob bool
}

// eventKind is what happened to the attempt.
type Event uint8

const (
	// evReserve: a member passed the other plugins' Reserve (this one's Reserve runs).
	Reserve Event = iota
	// evPermit: a reserved member reached Permit.
	Permit
	// evUnreserve: a reserved member was unreserved: rejected at Permit (by this plugin, the
	// framework's timeout, or a preemption), failed by a later plugin, or its bind failed.
	Unreserve
	// evNoNode: a member found no node (PostFilter).
	NoNode
	// evPreempted: a member reserved here was evicted by a preemption (its Unreserve comes later).
	Preempted
	// evPodGroupEdited: the PodGroup's spec changed (minMember may have been lowered).
	PodGroupEdited
	// evPodGroupDeleted: the PodGroup was deleted, or replaced by one of another UID.
	PodGroupDeleted
	// TreeReady: the gang composites above the gang became ready (a sibling group reached its
	// quorum): a gang that has its own quorum, waiting for theirs, lets its members through.
	TreeReady
	// TreeFailed: a sibling group's attempt failed, so the gang composite above the gang cannot be
	// ready in this attempt: the gang's attempt fails with it, and its waiting members release what
	// they hold.
	TreeFailed
	// evBound: the informer shows a member bound; evGone: a member is deleted, terminating or
	// finished. Both change the member count, which the next event reads; neither moves the attempt,
	// so the pod handlers only update the count and do not call step (the table rows say why).
	Bound
	Gone
)

func (k Event) String() string {
	return [...]string{"Reserve", "Permit", "Unreserve", "NoNode", "Preempted", "PodGroupEdited", "PodGroupDeleted", "TreeReady", "TreeFailed", "Bound", "Gone"}[k]
}

// attemptInput is an event with what step needs to know about the gang at that moment.
type Input struct {
	Kind Event
	Now  time.Time
	// want is the PodGroup's minMember.
	Want int
	// counted: live members reserved here or bound (the plugin's member set), the event's member
	// included when it counts.
	Counted int
	// confirmed: the same count on the pod store's word (see gang.Gang.Confirmed), which decides
	// a quorum; the caller computes it only when counted >= want.
	Confirmed int
	// waiting: members waiting at Permit, before the event.
	Waiting int
	// wasWaiting, wasReserved: the event's member waited at Permit / was reserved here
	// (evUnreserve, evPreempted).
	WasWaiting, WasReserved bool
	// timeout: the PodGroup's schedule timeout (evReserve).
	Timeout time.Duration
	// backoff: the plugin's back-off after a failed attempt.
	Backoff time.Duration
	// TreeShort (Permit): a gang composite above the gang is not ready (see tree.Branch.Admits): its
	// own quorum is not enough, and its members wait for the tree's.
	TreeShort bool
	// reachable (evNoNode): enough other members exist to reach the quorum without those that
	// found no node in this attempt; mayLead: the member may lead the next attempt (gang.mayLead).
	Reachable, MayLead bool
}

// verdict is what the event's member gets.
type Verdict uint8

const (
	// verdictPass: the extension point lets the member on (or the event has no member to answer).
	VerdictPass Verdict = iota
	// verdictWait: Permit makes the member wait, up to decision.waitFor.
	VerdictWait
	// verdictRefuse: the member is refused (Unschedulable).
	VerdictRefuse
	// verdictPreemptAlone: PostFilter places the member like a plain pod (its gang has its quorum).
	VerdictPreemptAlone
)

func (v Verdict) String() string { return [...]string{"pass", "wait", "refuse", "preemptAlone"}[v] }

// decision is what the caller does after step.
type Decision struct {
	Verdict Verdict
	// waitFor is Permit's wait (verdict wait).
	WaitFor time.Duration
	// reason: ReasonQuorumReached when the quorum is declared, or ReasonGangRejected or
	// ReasonGangTimedOut when the attempt fails; empty otherwise (a refusal says why in refusal).
	Reason string
	// refusal says why a member is refused when the attempt itself does not move.
	Refusal Refusal
	// allowWaiting: allow every waiting member (the quorum is reached).
	AllowWaiting bool
	// firstQuorum: this is the attempt's first quorum, reached from below minMember: observe the
	// time to quorum and record QuorumReached.
	FirstQuorum bool
	// rejectWaiting: reject every waiting member, which stops counting at once (the attempt failed).
	RejectWaiting bool
	// backoff (with rejectWaiting): the members stay out for this long; the group is activated
	// when it ends (at once when it is zero).
	Backoff time.Duration
	// lead (evNoNode, with rejectWaiting): the member leads the next attempt.
	Lead bool
	// activateSiblings: move the group's other unscheduled members to the active queue.
	ActivateSiblings bool
	// retryMember (evUnreserve): a bind failure after the quorum: activate the member at once.
	RetryMember bool
}

// refusal is why a member is refused without the attempt moving.
type Refusal uint8

const (
	RefusedNone Refusal = iota
	// refusedBackingOff: the group backs off after a failed attempt.
	RefusedBackingOff
	// refusedFailed: the attempt was rejected while the member was on its way to Permit.
	RefusedFailed
	// refusedExpired: the attempt's deadline has passed.
	RefusedExpired
)

func (a Attempt) BackingOff(now time.Time) bool { return now.Before(a.BackoffUntil) }

// step moves an attempt on one event and says what to do about it.
func Step(a Attempt, in Input) (Attempt, Decision) {
	var d Decision
	fail := func(reason string, backoff time.Duration) {
		a.Phase = PhaseFailed
		a.LastFailure = in.Now
		a.FailedWithJob = in.Kind == TreeFailed
		a.BackoffUntil = in.Now.Add(backoff)
		d.Reason, d.RejectWaiting, d.Backoff = reason, true, backoff
	}
	switch in.Kind {
	case Reserve:
		if a.BackingOff(in.Now) {
			d.Verdict, d.Refusal = VerdictRefuse, RefusedBackingOff
			return a, d
		}
		// An attempt starts at the first Reserve while no member waits, unless the quorum is
		// already there (an extra member of a gang whose quorum is bound).
		if in.Waiting == 0 && (in.Counted < in.Want || in.Confirmed < in.Want) {
			a = Attempt{Phase: PhaseGathering, Start: in.Now, Deadline: in.Now.Add(in.Timeout), NeedsQuorum: true,
				BackoffUntil: a.BackoffUntil, LastFailure: a.LastFailure}
		}
	case Permit:
		count := in.Counted
		if count >= in.Want && a.Phase != PhaseQuorum {
			// The attempt's quorum is decided once, on the pod store's word.
			count = in.Confirmed
		}
		if in.Waiting > 0 && a.Phase == PhaseGathering && !in.Now.Before(a.Deadline) {
			// Past the deadline no quorum is declared: the framework is rejecting the waiting
			// members for their timeout, and they would count until their Unreserves run.
			fail(podgroup.ReasonGangTimedOut, in.Backoff)
			d.Verdict = VerdictRefuse
			return a, d
		}
		if count >= in.Want && (!in.TreeShort || a.Phase == PhaseQuorum) {
			d.FirstQuorum = a.Phase != PhaseQuorum && a.NeedsQuorum
			// Members beyond the quorum that found no node while the attempt gathered it are
			// retried now: placed like any pod, they may preempt.
			d.ActivateSiblings = d.FirstQuorum
			a.Phase = PhaseQuorum
			d.Reason, d.AllowWaiting = podgroup.ReasonQuorumReached, true
			return a, d
		}
		if a.Phase == PhaseFailed {
			d.Verdict, d.Refusal = VerdictRefuse, RefusedFailed
			return a, d
		}
		if remaining := a.Deadline.Sub(in.Now); remaining > 0 {
			d.Verdict, d.WaitFor = VerdictWait, remaining
			// The attempt has begun: its other unscheduled members are tried next, together.
			d.ActivateSiblings = !a.Activated
			a.Activated = true
			return a, d
		}
		d.Verdict, d.Refusal = VerdictRefuse, RefusedExpired
	case Unreserve:
		switch {
		case a.Phase == PhaseQuorum && in.WasReserved && !in.WasWaiting:
			// A bind failure after the quorum: the member is retried ahead of other work and passes
			// Permit at once while the rest of the quorum holds.
			d.RetryMember = true
		case !in.WasWaiting && !in.WasReserved, a.Phase == PhaseQuorum, a.Phase == PhaseFailed:
			// Never reserved here, or the echo of a rejection already made.
		case !a.Deadline.IsZero() && !in.Now.Before(a.Deadline):
			fail(podgroup.ReasonGangTimedOut, in.Backoff)
		default:
			fail(podgroup.ReasonGangRejected, in.Backoff)
		}
	case NoNode:
		switch {
		case in.Counted >= in.Want:
			d.Verdict = VerdictPreemptAlone
		case in.Reachable:
			// Other members can still make the quorum: the attempt goes on without this one.
			d.Verdict = VerdictRefuse
		default:
			backoff := in.Backoff
			if in.MayLead {
				// Members already reserved may be what is in its way: retry soon, with it first.
				backoff, d.Lead = LeadRetryDelay, true
			}
			fail(podgroup.ReasonGangRejected, backoff)
			d.Verdict = VerdictRefuse
		}
	case Preempted:
		if in.WasReserved && a.Phase != PhaseQuorum && a.Phase != PhaseFailed {
			// The victim's Unreserve runs later, in its binding cycle: a sibling's Permit in
			// between must not complete a quorum with it.
			fail(podgroup.ReasonGangRejected, in.Backoff)
		}
	case PodGroupEdited:
		// minMember lowered to what is reserved lets the waiting members through, on the store's
		// word and before the deadline only: past it the framework is rejecting them, and they
		// count until their Unreserves run.
		if in.Waiting > 0 && a.Phase == PhaseGathering && in.Now.Before(a.Deadline) && in.Counted >= in.Want && in.Confirmed >= in.Want {
			a.Phase = PhaseQuorum
			d.Reason, d.AllowWaiting = podgroup.ReasonQuorumReached, true
		}
	case TreeReady:
		// As a lowered minMember: the waiting members go through on the store's word, before the
		// deadline only.
		if in.Waiting > 0 && a.Phase == PhaseGathering && in.Now.Before(a.Deadline) && in.Counted >= in.Want && in.Confirmed >= in.Want {
			d.FirstQuorum = a.NeedsQuorum
			d.ActivateSiblings = true
			a.Phase = PhaseQuorum
			d.Reason, d.AllowWaiting = podgroup.ReasonQuorumReached, true
		}
	case TreeFailed:
		if a.Phase == PhaseGathering {
			fail(podgroup.ReasonGangRejected, in.Backoff)
		}
	case PodGroupDeleted:
		// The history is the old PodGroup's; the waiting members are rejected, and their Unreserves
		// are echoes of that.
		next := Attempt{}
		if in.Waiting > 0 {
			next.Phase = PhaseFailed
			d.Reason, d.RejectWaiting = podgroup.ReasonGangRejected, true
		}
		return next, d
	case Bound, Gone:
		// Counted or uncounted by the caller; a waiting member that is gone is rejected by the
		// framework, and its Unreserve fails the attempt.
	}
	return a, d
}
