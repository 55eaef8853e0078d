package coscheduling

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// TestAttemptTransitions has a row for every transition of a gang attempt, the races of the
// correctness round among them.
func TestAttemptTransitions(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	at := func(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }
	const timeout, backoff = 60 * time.Second, 10 * time.Second
	gathering := attempt{phase: phaseGathering, start: t0, deadline: at(60), needsQuorum: true}
	activated := gathering
	activated.activated = true
	quorum := activated
	quorum.phase = phaseQuorum
	failedAt := func(s int, reason string, b time.Duration) attempt {
		a := activated
		a.phase, a.lastFailure, a.backoffUntil = phaseFailed, at(s), at(s).Add(b)
		return a
	}
	backingOff := failedAt(5, EventGangRejected, backoff)
	in := func(k eventKind, s int) attemptInput {
		return attemptInput{kind: k, now: at(s), want: 3, backoff: backoff, timeout: timeout}
	}
	with := func(i attemptInput, f func(*attemptInput)) attemptInput { f(&i); return i }
	failed := func(reason string, b time.Duration) decision {
		return decision{reason: reason, rejectWaiting: true, backoff: b}
	}

	cases := []struct {
		name  string
		from  attempt
		in    attemptInput
		want  attempt
		wantD decision
	}{
		// Reserve
		{name: "the first Reserve starts an attempt", from: attempt{}, in: in(evReserve, 0), want: gathering},
		{name: "a Reserve after a back-off starts a new attempt and keeps the last failure",
			from: backingOff, in: in(evReserve, 16),
			want: attempt{phase: phaseGathering, start: at(16), deadline: at(76), needsQuorum: true, backoffUntil: backingOff.backoffUntil, lastFailure: at(5)}},
		{name: "a Reserve while the group backs off is refused", from: backingOff, in: in(evReserve, 6),
			want: backingOff, wantD: decision{verdict: verdictRefuse, refusal: refusedBackingOff}},
		{name: "a Reserve while members wait joins their attempt", from: activated,
			in: with(in(evReserve, 10), func(i *attemptInput) { i.waiting, i.counted = 2, 2 }), want: activated},
		{name: "an extra member of a bound quorum starts no attempt", from: quorum,
			in: with(in(evReserve, 70), func(i *attemptInput) { i.counted, i.confirmed = 3, 3 }), want: quorum},
		{name: "a quorum the store does not confirm starts an attempt (old pods still counted)", from: quorum,
			in:   with(in(evReserve, 70), func(i *attemptInput) { i.counted, i.confirmed = 3, 2 }),
			want: attempt{phase: phaseGathering, start: at(70), deadline: at(130), needsQuorum: true}},

		// Permit
		{name: "the first member below the quorum waits and activates its siblings", from: gathering,
			in:   with(in(evPermit, 1), func(i *attemptInput) { i.counted = 1 }),
			want: activated, wantD: decision{verdict: verdictWait, waitFor: 59 * time.Second, activateSiblings: true}},
		{name: "a later member below the quorum waits", from: activated,
			in:   with(in(evPermit, 2), func(i *attemptInput) { i.counted, i.waiting = 2, 1 }),
			want: activated, wantD: decision{verdict: verdictWait, waitFor: 58 * time.Second}},
		{name: "the member that completes the quorum allows every waiting member", from: activated,
			in:   with(in(evPermit, 3), func(i *attemptInput) { i.counted, i.confirmed, i.waiting = 3, 3, 2 }),
			want: quorum, wantD: decision{reason: EventQuorumReached, allowWaiting: true, firstQuorum: true, activateSiblings: true}},
		{name: "a quorum counted but not confirmed by the store waits", from: activated,
			in:   with(in(evPermit, 3), func(i *attemptInput) { i.counted, i.confirmed, i.waiting = 3, 2, 2 }),
			want: activated, wantD: decision{verdict: verdictWait, waitFor: 57 * time.Second}},
		{name: "an extra member after the quorum passes", from: quorum,
			in:   with(in(evPermit, 20), func(i *attemptInput) { i.counted, i.confirmed = 4, 0 }),
			want: quorum, wantD: decision{reason: EventQuorumReached, allowWaiting: true}},
		{name: "race: past the deadline no quorum is declared, though the timed-out members still count", from: activated,
			in:   with(in(evPermit, 60), func(i *attemptInput) { i.counted, i.confirmed, i.waiting = 3, 3, 2 }),
			want: failedAt(60, EventGangTimedOut, backoff), wantD: withVerdict(failed(EventGangTimedOut, backoff), verdictRefuse)},
		{name: "a member reaching Permit after its attempt failed is refused", from: backingOff,
			in:   with(in(evPermit, 6), func(i *attemptInput) { i.counted = 1 }),
			want: backingOff, wantD: decision{verdict: verdictRefuse, refusal: refusedFailed}},
		{name: "race: a member of a failed attempt completes a quorum with bound members", from: backingOff,
			in:   with(in(evPermit, 6), func(i *attemptInput) { i.counted, i.confirmed = 3, 3 }),
			want: withPhase(backingOff, phaseQuorum), wantD: decision{reason: EventQuorumReached, allowWaiting: true, firstQuorum: true, activateSiblings: true}},
		{name: "the first member at its deadline with no one waiting is refused", from: gathering,
			in:   with(in(evPermit, 60), func(i *attemptInput) { i.counted = 1 }),
			want: gathering, wantD: decision{verdict: verdictRefuse, refusal: refusedExpired}},

		// Unreserve
		{name: "a waiting member rejected before the quorum fails the attempt", from: activated,
			in:   with(in(evUnreserve, 10), func(i *attemptInput) { i.wasWaiting, i.wasReserved = true, true }),
			want: failedAt(10, EventGangRejected, backoff), wantD: failed(EventGangRejected, backoff)},
		{name: "a member timed out at the deadline fails the attempt as a timeout", from: activated,
			in:   with(in(evUnreserve, 60), func(i *attemptInput) { i.wasWaiting, i.wasReserved = true, true }),
			want: failedAt(60, EventGangTimedOut, backoff), wantD: failed(EventGangTimedOut, backoff)},
		{name: "a member failed by a later Reserve plugin before Permit fails the attempt", from: activated,
			in:   with(in(evUnreserve, 10), func(i *attemptInput) { i.wasReserved = true }),
			want: failedAt(10, EventGangRejected, backoff), wantD: failed(EventGangRejected, backoff)},
		{name: "a bind failure after the quorum retries the member", from: quorum,
			in:   with(in(evUnreserve, 10), func(i *attemptInput) { i.wasReserved = true }),
			want: quorum, wantD: decision{retryMember: true}},
		{name: "the echoes of a rejection change nothing", from: backingOff,
			in:   with(in(evUnreserve, 6), func(i *attemptInput) { i.wasWaiting = true }),
			want: backingOff},
		{name: "an Unreserve of a member never reserved here changes nothing", from: activated,
			in: in(evUnreserve, 10), want: activated},
		{name: "a rejected member's echo after the quorum changes nothing", from: quorum,
			in:   with(in(evUnreserve, 10), func(i *attemptInput) { i.wasWaiting, i.wasReserved = true, true }),
			want: quorum},
		{name: "a back-off of zero fails with no back-off", from: activated,
			in:   with(in(evUnreserve, 10), func(i *attemptInput) { i.wasWaiting, i.wasReserved, i.backoff = true, true, 0 }),
			want: failedAt(10, EventGangRejected, 0), wantD: failed(EventGangRejected, 0)},

		// NoNode (PostFilter)
		{name: "a member that cannot be done without fails the attempt", from: activated,
			in: in(evNoNode, 10), want: failedAt(10, EventGangRejected, backoff), wantD: withVerdict(failed(EventGangRejected, backoff), verdictRefuse)},
		{name: "a member that may lead fails the attempt for a short retry", from: activated,
			in:    with(in(evNoNode, 10), func(i *attemptInput) { i.mayLead = true }),
			want:  failedAt(10, EventGangRejected, leadRetryDelay),
			wantD: decision{verdict: verdictRefuse, reason: EventGangRejected, rejectWaiting: true, backoff: leadRetryDelay, lead: true}},
		{name: "a member the quorum can be reached without is refused alone", from: activated,
			in:   with(in(evNoNode, 10), func(i *attemptInput) { i.reachable = true }),
			want: activated, wantD: decision{verdict: verdictRefuse}},
		{name: "a member of a gang with its quorum preempts like a plain pod", from: quorum,
			in:   with(in(evNoNode, 10), func(i *attemptInput) { i.counted = 3 }),
			want: quorum, wantD: decision{verdict: verdictPreemptAlone}},

		// Preempted
		{name: "race: a waiting member preempted ends its attempt at once, before its Unreserve", from: activated,
			in:   with(in(evPreempted, 10), func(i *attemptInput) { i.wasReserved = true }),
			want: failedAt(10, EventGangRejected, backoff), wantD: failed(EventGangRejected, backoff)},
		{name: "a member preempted after the quorum leaves the attempt as it is", from: quorum,
			in:   with(in(evPreempted, 10), func(i *attemptInput) { i.wasReserved = true }),
			want: quorum},
		{name: "a bound member preempted changes no attempt", from: activated,
			in: in(evPreempted, 10), want: activated},

		// PodGroup edited or deleted
		{name: "minMember lowered to what is reserved allows the waiting members", from: activated,
			in:   with(in(evPodGroupEdited, 10), func(i *attemptInput) { i.counted, i.waiting, i.want = 2, 2, 2 }),
			want: quorum, wantD: decision{reason: EventQuorumReached, allowWaiting: true}},
		{name: "minMember raised leaves the members waiting", from: activated,
			in:   with(in(evPodGroupEdited, 10), func(i *attemptInput) { i.counted, i.waiting, i.want = 2, 2, 4 }),
			want: activated},
		{name: "a PodGroup deleted rejects the waiting members and forgets the history", from: activated,
			in:   with(in(evPodGroupDeleted, 10), func(i *attemptInput) { i.waiting = 2 }),
			want: attempt{phase: phaseFailed}, wantD: decision{reason: EventGangRejected, rejectWaiting: true}},
		{name: "a PodGroup deleted while backing off forgets the back-off", from: backingOff,
			in: in(evPodGroupDeleted, 6), want: attempt{}},

		// Members bound or gone
		{name: "a member bound moves no attempt", from: quorum, in: in(evBound, 10), want: quorum},
		{name: "a waiting member gone moves no attempt: its Unreserve does", from: activated, in: in(evGone, 10), want: activated},
	}
	seen := map[eventKind]bool{}
	for _, tc := range cases {
		seen[tc.in.kind] = true
		t.Run(tc.name, func(t *testing.T) {
			got, d := step(tc.from, tc.in)
			if diff := cmp.Diff(tc.want, got, cmp.AllowUnexported(attempt{})); diff != "" {
				t.Errorf("attempt after %v (-want,+got):\n%s", tc.in.kind, diff)
			}
			if diff := cmp.Diff(tc.wantD, d, cmp.AllowUnexported(decision{})); diff != "" {
				t.Errorf("decision on %v (-want,+got):\n%s", tc.in.kind, diff)
			}
		})
	}
	for k := evReserve; k <= evGone; k++ {
		if !seen[k] {
			t.Errorf("no row for event %v", k)
		}
	}
}

func withVerdict(d decision, v verdict) decision { d.verdict = v; return d }
func withPhase(a attempt, p phase) attempt       { a.phase = p; return a }
