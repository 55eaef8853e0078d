package attempt

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/custom-scheduler/custom-scheduler/pkg/coscheduling/podgroup"
)

// TestAttemptTransitions has a row for every transition of a gang attempt, the races of the
// correctness round among them.
func TestAttemptTransitions(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	at := func(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }
	const timeout, backoff = 60 * time.Second, 10 * time.Second
	gathering := Attempt{Phase: PhaseGathering, Start: t0, Deadline: at(60), NeedsQuorum: true}
	activated := gathering
	activated.Activated = true
	quorum := activated
	quorum.Phase = PhaseQuorum
	failedAt := func(s int, reason string, b time.Duration) Attempt {
		a := activated
		a.Phase, a.LastFailure, a.BackoffUntil = PhaseFailed, at(s), at(s).Add(b)
		return a
	}
	backingOff := failedAt(5, podgroup.ReasonGangRejected, backoff)
	in := func(k Event, s int) Input {
		return Input{Kind: k, Now: at(s), Want: 3, Backoff: backoff, Timeout: timeout}
	}
	with := func(i Input, f func(*Input)) Input { f(&i); return i }
	failed := func(reason string, b time.Duration) Decision {
		return Decision{Reason: reason, RejectWaiting: true, Backoff: b}
	}

	cases := []struct {
		name  string
		from  Attempt
		in    Input
		want  Attempt
		wantD Decision
	}{
		// Reserve
		{name: "the first Reserve starts an attempt", from: Attempt{}, in: in(Reserve, 0), want: gathering},
		{name: "a Reserve after a back-off starts a new attempt and keeps the last failure",
			from: backingOff, in: in(Reserve, 16),
			want: Attempt{Phase: PhaseGathering, Start: at(16), Deadline: at(76), NeedsQuorum: true, BackoffUntil: backingOff.BackoffUntil, LastFailure: at(5)}},
		{name: "a Reserve while the group backs off is refused", from: backingOff, in: in(Reserve, 6),
			want: backingOff, wantD: Decision{Verdict: VerdictRefuse, Refusal: RefusedBackingOff}},
		{name: "a Reserve while members wait joins their attempt", from: activated,
			in: with(in(Reserve, 10), func(i *Input) { i.Waiting, i.Counted = 2, 2 }), want: activated},
		{name: "an extra member of a bound quorum starts no attempt", from: quorum,
			in: with(in(Reserve, 70), func(i *Input) { i.Counted, i.Confirmed = 3, 3 }), want: quorum},
		{name: "a quorum the store does not confirm starts an attempt (old pods still counted)", from: quorum,
			in:   with(in(Reserve, 70), func(i *Input) { i.Counted, i.Confirmed = 3, 2 }),
			want: Attempt{Phase: PhaseGathering, Start: at(70), Deadline: at(130), NeedsQuorum: true}},

		// Permit
		{name: "the first member below the quorum waits and activates its siblings", from: gathering,
			in:   with(in(Permit, 1), func(i *Input) { i.Counted = 1 }),
			want: activated, wantD: Decision{Verdict: VerdictWait, WaitFor: 59 * time.Second, ActivateSiblings: true}},
		{name: "a later member below the quorum waits", from: activated,
			in:   with(in(Permit, 2), func(i *Input) { i.Counted, i.Waiting = 2, 1 }),
			want: activated, wantD: Decision{Verdict: VerdictWait, WaitFor: 58 * time.Second}},
		{name: "the member that completes the quorum allows every waiting member", from: activated,
			in:   with(in(Permit, 3), func(i *Input) { i.Counted, i.Confirmed, i.Waiting = 3, 3, 2 }),
			want: quorum, wantD: Decision{Reason: podgroup.ReasonQuorumReached, AllowWaiting: true, FirstQuorum: true, ActivateSiblings: true}},
		{name: "a quorum counted but not confirmed by the store waits", from: activated,
			in:   with(in(Permit, 3), func(i *Input) { i.Counted, i.Confirmed, i.Waiting = 3, 2, 2 }),
			want: activated, wantD: Decision{Verdict: VerdictWait, WaitFor: 57 * time.Second}},
		{name: "an extra member after the quorum passes", from: quorum,
			in:   with(in(Permit, 20), func(i *Input) { i.Counted, i.Confirmed = 4, 0 }),
			want: quorum, wantD: Decision{Reason: podgroup.ReasonQuorumReached, AllowWaiting: true}},
		{name: "race: past the deadline no quorum is declared, though the timed-out members still count", from: activated,
			in:   with(in(Permit, 60), func(i *Input) { i.Counted, i.Confirmed, i.Waiting = 3, 3, 2 }),
			want: failedAt(60, podgroup.ReasonGangTimedOut, backoff), wantD: withVerdict(failed(podgroup.ReasonGangTimedOut, backoff), VerdictRefuse)},
		{name: "a member reaching Permit after its attempt failed is refused", from: backingOff,
			in:   with(in(Permit, 6), func(i *Input) { i.Counted = 1 }),
			want: backingOff, wantD: Decision{Verdict: VerdictRefuse, Refusal: RefusedFailed}},
		{name: "race: a member of a failed attempt completes a quorum with bound members", from: backingOff,
			in:   with(in(Permit, 6), func(i *Input) { i.Counted, i.Confirmed = 3, 3 }),
			want: withPhase(backingOff, PhaseQuorum), wantD: Decision{Reason: podgroup.ReasonQuorumReached, AllowWaiting: true, FirstQuorum: true, ActivateSiblings: true}},
		{name: "the first member at its deadline with no one waiting is refused", from: gathering,
			in:   with(in(Permit, 60), func(i *Input) { i.Counted = 1 }),
			want: gathering, wantD: Decision{Verdict: VerdictRefuse, Refusal: RefusedExpired}},

		// Unreserve
		{name: "a waiting member rejected before the quorum fails the attempt", from: activated,
			in:   with(in(Unreserve, 10), func(i *Input) { i.WasWaiting, i.WasReserved = true, true }),
			want: failedAt(10, podgroup.ReasonGangRejected, backoff), wantD: failed(podgroup.ReasonGangRejected, backoff)},
		{name: "a member timed out at the deadline fails the attempt as a timeout", from: activated,
			in:   with(in(Unreserve, 60), func(i *Input) { i.WasWaiting, i.WasReserved = true, true }),
			want: failedAt(60, podgroup.ReasonGangTimedOut, backoff), wantD: failed(podgroup.ReasonGangTimedOut, backoff)},
		{name: "a member failed by a later Reserve plugin before Permit fails the attempt", from: activated,
			in:   with(in(Unreserve, 10), func(i *Input) { i.WasReserved = true }),
			want: failedAt(10, podgroup.ReasonGangRejected, backoff), wantD: failed(podgroup.ReasonGangRejected, backoff)},
		{name: "a bind failure after the quorum retries the member", from: quorum,
			in:   with(in(Unreserve, 10), func(i *Input) { i.WasReserved = true }),
			want: quorum, wantD: Decision{RetryMember: true}},
		{name: "the echoes of a rejection change nothing", from: backingOff,
			in:   with(in(Unreserve, 6), func(i *Input) { i.WasWaiting = true }),
			want: backingOff},
		{name: "an Unreserve of a member never reserved here changes nothing", from: activated,
			in: in(Unreserve, 10), want: activated},
		{name: "a rejected member's echo after the quorum changes nothing", from: quorum,
			in:   with(in(Unreserve, 10), func(i *Input) { i.WasWaiting, i.WasReserved = true, true }),
			want: quorum},
		{name: "a back-off of zero fails with no back-off", from: activated,
			in:   with(in(Unreserve, 10), func(i *Input) { i.WasWaiting, i.WasReserved, i.Backoff = true, true, 0 }),
			want: failedAt(10, podgroup.ReasonGangRejected, 0), wantD: failed(podgroup.ReasonGangRejected, 0)},

		// NoNode (PostFilter)
		{name: "a member that cannot be done without fails the attempt", from: activated,
			in: in(NoNode, 10), want: failedAt(10, podgroup.ReasonGangRejected, backoff), wantD: withVerdict(failed(podgroup.ReasonGangRejected, backoff), VerdictRefuse)},
		{name: "a member that may lead fails the attempt for a short retry", from: activated,
			in:    with(in(NoNode, 10), func(i *Input) { i.MayLead = true }),
			want:  failedAt(10, podgroup.ReasonGangRejected, LeadRetryDelay),
			wantD: Decision{Verdict: VerdictRefuse, Reason: podgroup.ReasonGangRejected, RejectWaiting: true, Backoff: LeadRetryDelay, Lead: true}},
		{name: "a member the quorum can be reached without is refused alone", from: activated,
			in:   with(in(NoNode, 10), func(i *Input) { i.Reachable = true }),
			want: activated, wantD: Decision{Verdict: VerdictRefuse}},
		{name: "a member of a gang with its quorum preempts like a plain pod", from: quorum,
			in:   with(in(NoNode, 10), func(i *Input) { i.Counted = 3 }),
			want: quorum, wantD: Decision{Verdict: VerdictPreemptAlone}},

		// Preempted
		{name: "race: a waiting member preempted ends its attempt at once, before its Unreserve", from: activated,
			in:   with(in(Preempted, 10), func(i *Input) { i.WasReserved = true }),
			want: failedAt(10, podgroup.ReasonGangRejected, backoff), wantD: failed(podgroup.ReasonGangRejected, backoff)},
		{name: "a member preempted after the quorum leaves the attempt as it is", from: quorum,
			in:   with(in(Preempted, 10), func(i *Input) { i.WasReserved = true }),
			want: quorum},
		{name: "a bound member preempted changes no attempt", from: activated,
			in: in(Preempted, 10), want: activated},

		// PodGroup edited or deleted
		{name: "minMember lowered to what is reserved allows the waiting members", from: activated,
			in:   with(in(PodGroupEdited, 10), func(i *Input) { i.Counted, i.Confirmed, i.Waiting, i.Want = 2, 2, 2, 2 }),
			want: quorum, wantD: Decision{Reason: podgroup.ReasonQuorumReached, AllowWaiting: true}},
		{name: "race: minMember lowered past the deadline declares no quorum (the timed-out members still count)", from: activated,
			in:   with(in(PodGroupEdited, 60), func(i *Input) { i.Counted, i.Confirmed, i.Waiting, i.Want = 2, 2, 2, 2 }),
			want: activated},
		{name: "minMember lowered to a count the store does not confirm leaves the members waiting", from: activated,
			in:   with(in(PodGroupEdited, 10), func(i *Input) { i.Counted, i.Confirmed, i.Waiting, i.Want = 2, 1, 2, 2 }),
			want: activated},
		{name: "minMember raised leaves the members waiting", from: activated,
			in:   with(in(PodGroupEdited, 10), func(i *Input) { i.Counted, i.Waiting, i.Want = 2, 2, 4 }),
			want: activated},
		{name: "a PodGroup deleted rejects the waiting members and forgets the history", from: activated,
			in:   with(in(PodGroupDeleted, 10), func(i *Input) { i.Waiting = 2 }),
			want: Attempt{Phase: PhaseFailed}, wantD: Decision{Reason: podgroup.ReasonGangRejected, RejectWaiting: true}},
		{name: "a PodGroup deleted while backing off forgets the back-off", from: backingOff,
			in: in(PodGroupDeleted, 6), want: Attempt{}},

		// Trees of groups
		{name: "tree: a gang with its own quorum waits while a gang composite above it is short", from: activated,
			in:   with(in(Permit, 10), func(i *Input) { i.Counted, i.Confirmed, i.Waiting, i.TreeShort = 3, 3, 2, true }),
			want: activated, wantD: Decision{Verdict: VerdictWait, WaitFor: 50 * time.Second}},
		{name: "tree: an extra member of a gang whose quorum was declared passes though the tree is short", from: quorum,
			in:   with(in(Permit, 10), func(i *Input) { i.Counted, i.Confirmed, i.TreeShort = 4, 4, true }),
			want: quorum, wantD: Decision{Reason: podgroup.ReasonQuorumReached, AllowWaiting: true}},
		{name: "tree: a gang short of the tree still times out at its deadline", from: activated,
			in:   with(in(Permit, 60), func(i *Input) { i.Counted, i.Confirmed, i.Waiting, i.TreeShort = 3, 3, 2, true }),
			want: failedAt(60, podgroup.ReasonGangTimedOut, backoff), wantD: Decision{Verdict: VerdictRefuse, Reason: podgroup.ReasonGangTimedOut, RejectWaiting: true, Backoff: backoff}},
		{name: "tree: the tree ready allows a gang that has its quorum", from: activated,
			in:   with(in(TreeReady, 10), func(i *Input) { i.Counted, i.Confirmed, i.Waiting = 3, 3, 3 }),
			want: quorum, wantD: Decision{Reason: podgroup.ReasonQuorumReached, AllowWaiting: true, FirstQuorum: true, ActivateSiblings: true}},
		{name: "tree: the tree ready leaves a gang short of its own quorum waiting", from: activated,
			in:   with(in(TreeReady, 10), func(i *Input) { i.Counted, i.Confirmed, i.Waiting = 2, 2, 2 }),
			want: activated},
		{name: "tree: the tree ready past the deadline declares no quorum", from: activated,
			in:   with(in(TreeReady, 60), func(i *Input) { i.Counted, i.Confirmed, i.Waiting = 3, 3, 3 }),
			want: activated},
		{name: "tree: a sibling's failure fails a gathering attempt, with its job", from: activated,
			in: with(in(TreeFailed, 10), func(i *Input) { i.Counted, i.Waiting = 2, 2 }),
			want: func() Attempt {
				a := failedAt(10, podgroup.ReasonGangRejected, backoff)
				a.FailedWithJob = true
				return a
			}(),
			wantD: failed(podgroup.ReasonGangRejected, backoff)},
		{name: "tree: a sibling's failure leaves a declared quorum as it is", from: quorum,
			in: in(TreeFailed, 10), want: quorum},
		{name: "tree: a sibling's failure leaves a group that backs off as it is", from: backingOff,
			in: in(TreeFailed, 10), want: backingOff},

		// Members bound or gone
		{name: "a member bound moves no attempt", from: quorum, in: in(Bound, 10), want: quorum},
		{name: "a waiting member gone moves no attempt: its Unreserve does", from: activated, in: in(Gone, 10), want: activated},
	}
	seen := map[Event]bool{}
	for _, tc := range cases {
		seen[tc.in.Kind] = true
		t.Run(tc.name, func(t *testing.T) {
			got, d := Step(tc.from, tc.in)
			if diff := cmp.Diff(tc.want, got, cmp.AllowUnexported(Attempt{})); diff != "" {
				t.Errorf("attempt after %v (-want,+got):\n%s", tc.in.Kind, diff)
			}
			if diff := cmp.Diff(tc.wantD, d, cmp.AllowUnexported(Decision{})); diff != "" {
				t.Errorf("decision on %v (-want,+got):\n%s", tc.in.Kind, diff)
			}
		})
	}
	for k := Reserve; k <= Gone; k++ {
		if !seen[k] {
			t.Errorf("no row for event %v", k)
		}
	}
}

func withVerdict(d Decision, v Verdict) Decision { d.Verdict = v; return d }
func withPhase(a Attempt, p Phase) Attempt       { a.Phase = p; return a }
