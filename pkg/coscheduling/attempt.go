package coscheduling

import "time"

// A gang attempt as a state machine. step is the one place that decides how an attempt moves: the
// extension points and handlers gather its input under the plugin's mutex (counts, the member's flags,
// the time), call step, and apply its decision (allow or reject the waiting members, start the
// back-off timer, activate members, record events). step reads no clock, store or lock, so every
// transition is a row of TestAttemptTransitions.

// phase is where a gang's current attempt stands.
type phase uint8

const (
	// phaseIdle: no attempt since the state was built or its PodGroup was recreated.
	phaseIdle phase = iota
	// phaseGathering: the attempt started at a Reserve; its members wait at Permit for the quorum.
	phaseGathering
	// phaseQuorum: the attempt reached minMember; its members bind, and later members pass Permit.
	phaseQuorum
	// phaseFailed: the attempt was rejected (a member found no node or left, the deadline passed, a
	// member was preempted, the PodGroup was deleted); the members' Unreserves are echoes of that.
	phaseFailed
)

func (p phase) String() string {
	return [...]string{"Idle", "Gathering", "Quorum", "Failed"}[p]
}

// attempt is the part of a gang's state that step owns.
type attempt struct {
	phase phase
	// start and deadline: when the attempt started and when its members stop waiting at Permit.
	start, deadline time.Time
	// needsQuorum: the attempt started below minMember, so its time to quorum is worth observing.
	needsQuorum bool
	// activated: the attempt already moved the group's unscheduled members to the active queue.
	activated bool
	// backoffUntil keeps the members out of scheduling after a failed attempt.
	backoffUntil time.Time
	// lastFailure: when the last attempt failed (see queueStamp).
	lastFailure time.Time
}

// eventKind is what happened to the attempt.
type eventKind uint8

const (
	// evReserve: a member passed the other plugins' Reserve (this one's Reserve runs).
	evReserve eventKind = iota
	// evPermit: a reserved member reached Permit.
	evPermit
	// evUnreserve: a reserved member was unreserved: rejected at Permit (by this plugin, the
	// framework's timeout, or a preemption), failed by a later plugin, or its bind failed.
	evUnreserve
	// evNoNode: a member found no node (PostFilter).
	evNoNode
	// evPreempted: a member reserved here was evicted by a preemption (its Unreserve comes later).
	evPreempted
	// evPodGroupEdited: the PodGroup's spec changed (minMember may have been lowered).
	evPodGroupEdited
	// evPodGroupDeleted: the PodGroup was deleted, or replaced by one of another UID.
	evPodGroupDeleted
	// evBound: the informer shows a member bound; evGone: a member is deleted, terminating or
	// finished. Both change the member count, which the next event reads; neither moves the attempt,
	// so the pod handlers only update the count and do not call step (the table rows say why).
	evBound
	evGone
)

func (k eventKind) String() string {
	return [...]string{"Reserve", "Permit", "Unreserve", "NoNode", "Preempted", "PodGroupEdited", "PodGroupDeleted", "Bound", "Gone"}[k]
}

// attemptInput is an event with what step needs to know about the gang at that moment.
type attemptInput struct {
	kind eventKind
	now  time.Time
	// want is the PodGroup's minMember.
	want int
	// counted: live members reserved here or bound (the plugin's member set), the event's member
	// included when it counts.
	counted int
	// confirmed: the same count on the pod store's word (see confirmedCountLocked), which decides
	// a quorum; the caller computes it only when counted >= want.
	confirmed int
	// waiting: members waiting at Permit, before the event.
	waiting int
	// wasWaiting, wasReserved: the event's member waited at Permit / was reserved here
	// (evUnreserve, evPreempted).
	wasWaiting, wasReserved bool
	// timeout: the PodGroup's schedule timeout (evReserve).
	timeout time.Duration
	// backoff: the plugin's back-off after a failed attempt.
	backoff time.Duration
	// reachable (evNoNode): enough other members exist to reach the quorum without those that
	// found no node in this attempt; mayLead: the member may lead the next attempt (gang.mayLead).
	reachable, mayLead bool
}

// verdict is what the event's member gets.
type verdict uint8

const (
	// verdictPass: the extension point lets the member on (or the event has no member to answer).
	verdictPass verdict = iota
	// verdictWait: Permit makes the member wait, up to decision.waitFor.
	verdictWait
	// verdictRefuse: the member is refused (Unschedulable).
	verdictRefuse
	// verdictPreemptAlone: PostFilter places the member like a plain pod (its gang has its quorum).
	verdictPreemptAlone
)

func (v verdict) String() string { return [...]string{"pass", "wait", "refuse", "preemptAlone"}[v] }

// decision is what the caller does after step.
type decision struct {
	verdict verdict
	// waitFor is Permit's wait (verdict wait).
	waitFor time.Duration
	// reason: EventQuorumReached when the quorum is declared, or EventGangRejected or
	// EventGangTimedOut when the attempt fails; empty otherwise (a refusal says why in refusal).
	reason string
	// refusal says why a member is refused when the attempt itself does not move.
	refusal refusal
	// allowWaiting: allow every waiting member (the quorum is reached).
	allowWaiting bool
	// firstQuorum: this is the attempt's first quorum, reached from below minMember: observe the
	// time to quorum and record QuorumReached.
	firstQuorum bool
	// rejectWaiting: reject every waiting member, which stops counting at once (the attempt failed).
	rejectWaiting bool
	// backoff (with rejectWaiting): the members stay out for this long; the group is activated
	// when it ends (at once when it is zero).
	backoff time.Duration
	// lead (evNoNode, with rejectWaiting): the member leads the next attempt.
	lead bool
	// activateSiblings: move the group's other unscheduled members to the active queue.
	activateSiblings bool
	// retryMember (evUnreserve): a bind failure after the quorum: activate the member at once.
	retryMember bool
}

// refusal is why a member is refused without the attempt moving.
type refusal uint8

const (
	refusedNone refusal = iota
	// refusedBackingOff: the group backs off after a failed attempt.
	refusedBackingOff
	// refusedFailed: the attempt was rejected while the member was on its way to Permit.
	refusedFailed
	// refusedExpired: the attempt's deadline has passed.
	refusedExpired
)

func (a attempt) backingOff(now time.Time) bool { return now.Before(a.backoffUntil) }

// step moves an attempt on one event and says what to do about it.
func step(a attempt, in attemptInput) (attempt, decision) {
	var d decision
	fail := func(reason string, backoff time.Duration) {
		a.phase = phaseFailed
		a.lastFailure = in.now
		a.backoffUntil = in.now.Add(backoff)
		d.reason, d.rejectWaiting, d.backoff = reason, true, backoff
	}
	switch in.kind {
	case evReserve:
		if a.backingOff(in.now) {
			d.verdict, d.refusal = verdictRefuse, refusedBackingOff
			return a, d
		}
		// An attempt starts at the first Reserve while no member waits, unless the quorum is
		// already there (an extra member of a gang whose quorum is bound).
		if in.waiting == 0 && (in.counted < in.want || in.confirmed < in.want) {
			a = attempt{phase: phaseGathering, start: in.now, deadline: in.now.Add(in.timeout), needsQuorum: true,
				backoffUntil: a.backoffUntil, lastFailure: a.lastFailure}
		}
	case evPermit:
		count := in.counted
		if count >= in.want && a.phase != phaseQuorum {
			// The attempt's quorum is decided once, on the pod store's word.
			count = in.confirmed
		}
		if in.waiting > 0 && a.phase == phaseGathering && !in.now.Before(a.deadline) {
			// Past the deadline no quorum is declared: the framework is rejecting the waiting
			// members for their timeout, and they would count until their Unreserves run.
			fail(EventGangTimedOut, in.backoff)
			d.verdict = verdictRefuse
			return a, d
		}
		if count >= in.want {
			d.firstQuorum = a.phase != phaseQuorum && a.needsQuorum
			// Members beyond the quorum that found no node while the attempt gathered it are
			// retried now: placed like any pod, they may preempt.
			d.activateSiblings = d.firstQuorum
			a.phase = phaseQuorum
			d.reason, d.allowWaiting = EventQuorumReached, true
			return a, d
		}
		if a.phase == phaseFailed {
			d.verdict, d.refusal = verdictRefuse, refusedFailed
			return a, d
		}
		if remaining := a.deadline.Sub(in.now); remaining > 0 {
			d.verdict, d.waitFor = verdictWait, remaining
			// The attempt has begun: its other unscheduled members are tried next, together.
			d.activateSiblings = !a.activated
			a.activated = true
			return a, d
		}
		d.verdict, d.refusal = verdictRefuse, refusedExpired
	case evUnreserve:
		switch {
		case a.phase == phaseQuorum && in.wasReserved && !in.wasWaiting:
			// A bind failure after the quorum: the member is retried ahead of other work and passes
			// Permit at once while the rest of the quorum holds.
			d.retryMember = true
		case !in.wasWaiting && !in.wasReserved, a.phase == phaseQuorum, a.phase == phaseFailed:
			// Never reserved here, or the echo of a rejection already made.
		case !a.deadline.IsZero() && !in.now.Before(a.deadline):
			fail(EventGangTimedOut, in.backoff)
		default:
			fail(EventGangRejected, in.backoff)
		}
	case evNoNode:
		switch {
		case in.counted >= in.want:
			d.verdict = verdictPreemptAlone
		case in.reachable:
			// Other members can still make the quorum: the attempt goes on without this one.
			d.verdict = verdictRefuse
		default:
			backoff := in.backoff
			if in.mayLead {
				// Members already reserved may be what is in its way: retry soon, with it first.
				backoff, d.lead = leadRetryDelay, true
			}
			fail(EventGangRejected, backoff)
			d.verdict = verdictRefuse
		}
	case evPreempted:
		if in.wasReserved && a.phase != phaseQuorum && a.phase != phaseFailed {
			// The victim's Unreserve runs later, in its binding cycle: a sibling's Permit in
			// between must not complete a quorum with it.
			fail(EventGangRejected, in.backoff)
		}
	case evPodGroupEdited:
		// minMember lowered to what is reserved lets the waiting members through, on the store's
		// word and before the deadline only: past it the framework is rejecting them, and they
		// count until their Unreserves run.
		if in.waiting > 0 && a.phase == phaseGathering && in.now.Before(a.deadline) && in.counted >= in.want && in.confirmed >= in.want {
			a.phase = phaseQuorum
			d.reason, d.allowWaiting = EventQuorumReached, true
		}
	case evPodGroupDeleted:
		// The history is the old PodGroup's; the waiting members are rejected, and their Unreserves
		// are echoes of that.
		next := attempt{}
		if in.waiting > 0 {
			next.phase = phaseFailed
			d.reason, d.rejectWaiting = EventGangRejected, true
		}
		return next, d
	case evBound, evGone:
		// Counted or uncounted by the caller; a waiting member that is gone is rejected by the
		// framework, and its Unreserve fails the attempt.
	}
	return a, d
}
