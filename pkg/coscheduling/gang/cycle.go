package gang

import (
	"fmt"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/utils/clock"

	"github.com/custom-scheduler/custom-scheduler/pkg/coscheduling/attempt"
	"github.com/custom-scheduler/custom-scheduler/pkg/coscheduling/podgroup"
)

// The steps of a member's cycle after PreFilter, and of the events that move an attempt from outside
// it: each builds the attempt's input from the gang, moves the attempt (Step), updates the gang, and
// says in a Result what the plugin does after releasing its lock. The plugin also arms the back-off
// after a failure (RejectWaiting, unless the PodGroup was deleted), tells the reservation of a quorum
// (AllowWaiting) and keeps the waiting gauge (whether the gang waits before and after the step).

// Result is what a step leaves to the plugin.
type Result struct {
	attempt.Decision
	// Pods are the waiting members to allow (AllowWaiting) or reject (RejectWaiting).
	Pods []*v1.Pod
	// Message says what happened, in the words of the member's status and the PodGroup's event: the
	// failure (RejectWaiting), the quorum (AllowWaiting), the wait (VerdictWait) or the refusal.
	Message string
	// Count is the quorum count the step decided on; Start is when the attempt started.
	Count int
	Start time.Time
	// Event and Now are the step's.
	Event attempt.Event
	Now   time.Time
}

// Failed reports whether the attempt failed in the step (its waiting members are to be rejected).
func (r Result) Failed() bool { return r.RejectWaiting }

func ref(pod *v1.Pod) string { return pod.Namespace + "/" + pod.Name }

// OnNoNode is PostFilter's step for a member of an attempt that found no node (its gang did not have its
// quorum, so it was not placed alone). existing is the number of the group's live pods, want its
// minMember; statuses are the cycle's filter statuses per node (nil: unknown). A member that enough
// others can replace is only counted as unplaced; otherwise the attempt fails, led next by this member
// when the members already reserved may be what is in its way.
//
// An attempt that fails in a chosen domain says so, with the filters' most common reasons over the
// domain's nodes (see DomainReasons), and, unless it is retried with this member first (what is in
// its way may be its own siblings), the domain is recorded as refused: the next attempts avoid it
// while another domain fits (see RefusedDomainTTL).
func (g *Gang) OnNoNode(pod *v1.Pod, now time.Time, want, existing int, backoff time.Duration, statuses fwk.NodeToStatusReader) Result {
	in := attempt.Input{Kind: attempt.NoNode, Now: now, Want: want, Counted: g.Count(), MayLead: g.MayLead(pod.UID)}
	if in.Counted < want {
		g.Unplaced[pod.UID] = struct{}{}
		in.Reachable = existing+g.Credit-len(g.Unplaced) >= want
	}
	placed := g.Placement // a failed attempt forgets its placement (Step)
	r := g.result(in, backoff)
	if !r.Failed() {
		return r
	}
	where, avoided := "", ""
	if placed != nil && placed.Value != "" {
		domain := placed.Key + "=" + placed.Value
		why := DomainReasons(placed.Nodes, statuses)
		where = " in " + domain
		if why != "" {
			where += " (" + why + ")"
		}
		if !r.Lead {
			until := g.Refuse(domain, now, why)
			avoided = fmt.Sprintf("; %s is avoided until %s while another domain may fit", domain, until.UTC().Format(time.RFC3339))
		}
	}
	r.Message = fmt.Sprintf("PodGroup %s rejected: member %s cannot be placed%s, so the quorum of %d cannot be reached now%s", g.Key(), ref(pod), where, want, avoided)
	// Members already reserved may be what is in this one's way (inter-pod anti-affinity, a node only
	// it may use): the attempt is retried after attempt.LeadRetryDelay, not the back-off, with this
	// member first.
	if r.Lead {
		g.SetLead(pod)
		r.Message += "; retrying in a moment with it placed first"
	} else {
		g.ClearLead()
	}
	g.SetOutcome(r.Reason, r.Message)
	return r
}

// OnReserve is Reserve's step: the member counts toward the quorum on node, and an attempt starts when
// none is under way; a member of a group that backs off is refused. confirmed counts the quorum on the
// store's word (called only when the member set reaches want and no attempt is under way). planned
// reports whether the attempt's plan had a place for the member (of shape: see gangfit.ShapeOf) there.
func (g *Gang) OnReserve(uid types.UID, shape, node string, now time.Time, want int, timeout time.Duration, confirmed func() int, backoff time.Duration) (r Result, planned bool) {
	in := attempt.Input{Kind: attempt.Reserve, Now: now, Want: want, Counted: g.Count(), Timeout: timeout}
	in.Confirmed = in.Counted
	if in.Counted >= want && !g.InProgress() {
		in.Confirmed = confirmed()
	}
	if r = g.result(in, backoff); r.Verdict == attempt.VerdictRefuse {
		r.Message = fmt.Sprintf("PodGroup %s backs off after a failed attempt", g.Key())
		return r, false
	}
	g.CountReserved(uid, node)
	return r, g.Plan.Take(shape, node)
}

// OnUnreserve is Unreserve's step: before the quorum, a member leaving (rejected, timed out, deleted, or
// failed by a later plugin) fails the attempt; after it (a bind failure) the member is retried at once
// (RetryMember). An echo of a rejection already made changes nothing.
func (g *Gang) OnUnreserve(pod *v1.Pod, now time.Time, backoff time.Duration) Result {
	wasWaiting, _ := g.RemoveWaiting(pod.UID)
	wasReserved := g.Clear(pod.UID, Reserved)
	count, start := len(g.Members), g.Start
	r := g.result(attempt.Input{Kind: attempt.Unreserve, Now: now, WasWaiting: wasWaiting, WasReserved: wasReserved}, backoff)
	if !r.Failed() {
		return r
	}
	if r.Reason == podgroup.ReasonGangTimedOut {
		r.Message = fmt.Sprintf("PodGroup %s timed out: %d members were reserved or bound within %s, fewer than minMember; all waiting members were rejected",
			g.Key(), count+1, now.Sub(start).Round(time.Second))
	} else {
		r.Message = fmt.Sprintf("PodGroup %s rejected: member %s left the attempt before the quorum was reached; all waiting members were rejected", g.Key(), ref(pod))
	}
	g.SetOutcome(r.Reason, r.Message)
	return r
}

// OnPermit is Permit's step: the member passes once minMember live members are reserved or bound, and
// every waiting member with it; until then it waits, up to the attempt's deadline, and past the
// deadline the attempt fails. The quorum is decided once, on the store's word (confirmed, called only
// when the member set reaches want and the attempt has not had its quorum).
func (g *Gang) OnPermit(pod *v1.Pod, now time.Time, want int, confirmed func() int, backoff time.Duration) Result {
	in := attempt.Input{Kind: attempt.Permit, Now: now, Want: want, Counted: g.Count(), TreeShort: g.TreeShort}
	in.Confirmed = in.Counted
	if in.Counted >= want && g.Phase != attempt.PhaseQuorum {
		in.Confirmed = confirmed()
	}
	start := g.Start
	r := g.result(in, backoff)
	r.Count, r.Start = in.Confirmed, start
	switch {
	case r.Failed():
		// Past the attempt's deadline no quorum is declared: the framework is rejecting the waiting
		// members for their timeout, and they would count until their Unreserves run.
		r.Message = fmt.Sprintf("PodGroup %s timed out: %d members were reserved or bound within %s, fewer than minMember %d; all waiting members were rejected",
			g.Key(), r.Count, now.Sub(start).Round(time.Second), want)
		g.SetOutcome(r.Reason, r.Message)
	case r.AllowWaiting:
		r.Message = fmt.Sprintf("%d of minMember %d live members reserved or bound; %d waiting members go on to bind", r.Count, want, len(r.Pods))
	case r.Verdict == attempt.VerdictRefuse && r.Refusal == attempt.RefusedFailed:
		r.Message = fmt.Sprintf("PodGroup %s was rejected in this attempt", g.Key())
	case r.Verdict == attempt.VerdictRefuse:
		r.Message = fmt.Sprintf("PodGroup %s timed out waiting for its quorum", g.Key())
	case r.Count >= want:
		g.AddWaiting(pod)
		r.Message = fmt.Sprintf("%d of minMember %d members of PodGroup %s are reserved or bound; waiting up to %s for the other groups of its job",
			r.Count, want, g.Key(), r.WaitFor.Round(time.Second))
	default:
		g.AddWaiting(pod)
		r.Message = fmt.Sprintf("%d of minMember %d members of PodGroup %s are reserved or bound; waiting up to %s for the rest",
			r.Count, want, g.Key(), r.WaitFor.Round(time.Second))
	}
	return r
}

// OnTreeReady is the step for the gang composites above the group becoming ready (a sibling group
// reached its quorum): a group with its own quorum, waiting for theirs, lets its waiting members
// through, on the store's word (confirmed, called only when the member set reaches want).
func (g *Gang) OnTreeReady(now time.Time, want int, confirmed func() int, backoff time.Duration) Result {
	in := attempt.Input{Kind: attempt.TreeReady, Now: now, Want: want, Counted: g.Count()}
	if in.Counted >= in.Want {
		in.Confirmed = confirmed()
	}
	start := g.Start
	r := g.result(in, backoff)
	r.Count, r.Start = in.Confirmed, start
	if r.AllowWaiting {
		r.Message = fmt.Sprintf("%d of minMember %d live members reserved or bound, and the other groups of its job are ready; %d waiting members go on to bind", r.Count, want, len(r.Pods))
	}
	return r
}

// OnTreeFailed is the step for a sibling group's failed attempt (why): the gang composite above the
// group cannot be ready in this attempt, so the group's attempt fails with it and its waiting
// members release what they hold; the groups of the job back off and come back together.
func (g *Gang) OnTreeFailed(now time.Time, why string, backoff time.Duration) Result {
	r := g.result(attempt.Input{Kind: attempt.TreeFailed, Now: now}, backoff)
	if r.Failed() {
		r.Message = fmt.Sprintf("PodGroup %s rejected with the other groups of its job: %s", g.Key(), why)
		g.SetOutcome(r.Reason, r.Message)
	}
	return r
}

// OnEvicted is the step for a member reserved here that a preemption evicted: an attempt still gathering
// its quorum fails at once (the victim's Unreserve runs later, in its binding cycle, and a sibling's
// Permit in between must not complete a quorum with it). ok is false when the pod was not reserved
// here (nothing moves).
func (g *Gang) OnEvicted(victim *v1.Pod, now time.Time, backoff time.Duration) (r Result, ok bool) {
	if g.Members[victim.UID]&Reserved == 0 {
		return Result{}, false
	}
	g.RemoveWaiting(victim.UID)
	g.Clear(victim.UID, Reserved)
	r = g.result(attempt.Input{Kind: attempt.Preempted, Now: now, WasReserved: true}, backoff)
	if r.Failed() {
		r.Message = fmt.Sprintf("PodGroup %s rejected: member %s was preempted; all waiting members were rejected", g.Key(), ref(victim))
		g.SetOutcome(r.Reason, r.Message)
	}
	return r, true
}

// OnEdited is the step for a change of the PodGroup's spec: minMember lowered to what is reserved lets
// the waiting members through at once, on the store's word (confirmed, called only when the member
// set reaches want).
func (g *Gang) OnEdited(now time.Time, want int, confirmed func() int, backoff time.Duration) Result {
	in := attempt.Input{Kind: attempt.PodGroupEdited, Now: now, Want: want, Counted: g.Count()}
	if in.Counted >= in.Want {
		in.Confirmed = confirmed()
	}
	r := g.result(in, backoff)
	r.Count = in.Confirmed
	if r.AllowWaiting {
		r.Message = fmt.Sprintf("minMember lowered to %d: %d live members reserved or bound; %d waiting members go on to bind", want, r.Count, len(r.Pods))
	}
	return r
}

// OnDeleted is the step for a PodGroup deleted (or replaced by one of another UID): its history is
// forgotten (the caller stops the timers returned) and its waiting members are rejected; their
// Unreserves are echoes of that.
func (g *Gang) OnDeleted(now time.Time) (Result, []clock.Timer) {
	timers := g.ResetHistory("")
	r := g.result(attempt.Input{Kind: attempt.PodGroupDeleted, Now: now}, 0)
	if r.Failed() {
		r.Message = fmt.Sprintf("PodGroup %s was deleted; its waiting members were rejected", g.Key())
	}
	return r, timers
}

func (g *Gang) result(in attempt.Input, backoff time.Duration) Result {
	d, pods := g.Step(in, backoff)
	return Result{Decision: d, Pods: pods, Event: in.Kind, Now: in.Now}
}

// Tentative reports a Reserve or Unreserve of kube-scheduler's own pod-group cycle (the scheduler's
// GenericWorkload gate on, an in-tree PodGroup): its algorithm reserves every member tentatively and
// reverts them all (Unreserve) once the group is evaluated, then reserves the chosen members again
// with the pod-group cycle cleared from their state before Permit (schedule_one_podgroup.go,
// runRootSchedulingAlgorithm and submitPodGroupAlgorithmResult). Counting the tentative ones would
// fail every attempt: the revert reads as a member leaving before the quorum, and the group backs off
// before its real Reserve. Such a step is no step of the gang's.
func Tentative(state fwk.CycleState) bool {
	return state != nil && state.IsPodGroupSchedulingCycle()
}

// BackoffEnded is the gang's back-off timer firing: the timer is done (dropping the state must not
// stop it: a fake clock runs the callback under its own lock, which Stop takes again). clear reports
// whether the members' nominations are to be cleared: after an attempt a member led, members rejected
// at Permit may keep the node the scheduler nominated them to while they waited, where a sibling's
// inter-pod anti-affinity would still see them; and the gang did not preempt, so none of its
// nominations keeps room it made.
func (g *Gang) BackoffEnded() (clear bool) {
	g.BackoffTimer = nil
	return g.Lead != "" && len(g.NominatedNodes) == 0
}
