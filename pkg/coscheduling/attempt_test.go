package coscheduling

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/kubernetes/pkg/scheduler/framework"

	"github.com/custom-scheduler/custom-scheduler/pkg/apis/scheduling/v1alpha1"
	"github.com/custom-scheduler/custom-scheduler/pkg/coscheduling/podgroup"
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
			in:   with(in(evPodGroupEdited, 10), func(i *attemptInput) { i.counted, i.confirmed, i.waiting, i.want = 2, 2, 2, 2 }),
			want: quorum, wantD: decision{reason: EventQuorumReached, allowWaiting: true}},
		{name: "race: minMember lowered past the deadline declares no quorum (the timed-out members still count)", from: activated,
			in:   with(in(evPodGroupEdited, 60), func(i *attemptInput) { i.counted, i.confirmed, i.waiting, i.want = 2, 2, 2, 2 }),
			want: activated},
		{name: "minMember lowered to a count the store does not confirm leaves the members waiting", from: activated,
			in:   with(in(evPodGroupEdited, 10), func(i *attemptInput) { i.counted, i.confirmed, i.waiting, i.want = 2, 1, 2, 2 }),
			want: activated},
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

// TestGangNeverPartialRandomized drives one gang through the plugin's extension points and handlers
// in random orders, as the framework would call them: members reserved and at Permit, rejected at
// Permit (by the plugin, the deadline or a preemption) and unreserved, finding no node, binding (or
// failing to bind after the quorum, then retried at once), deleted and replaced, the PodGroup's
// minMember edited, and the clock moving past deadlines and back-offs. After every step no live
// member is bound unless a quorum is; then, left alone, the gang binds whole; and once its pods are
// gone the plugin holds nothing of it. SEED=<n> replays a failure.
func TestGangNeverPartialRandomized(t *testing.T) {
	seed := uint64(time.Now().UnixNano())
	if s := os.Getenv("SEED"); s != "" {
		var err error
		if seed, err = strconv.ParseUint(s, 10, 64); err != nil {
			t.Fatal(err)
		}
	}
	defer func() {
		if t.Failed() {
			t.Logf("replay with SEED=%d", seed)
		}
	}()
	for round := range 500 {
		rng := rand.New(rand.NewPCG(seed, uint64(round)))
		if !gangRound(t, rng, round) {
			return
		}
	}
}

// gangRound is one round of TestGangNeverPartialRandomized; it reports whether the round passed.
func gangRound(t *testing.T, rng *rand.Rand, round int) bool {
	t.Helper()
	ctx := context.Background()
	want := 2 + rng.IntN(3)
	pg := makePG("ns", "g", int32(want), time.Time{})
	pg.UID = "pg-1"
	args := defaultArgs()
	args.PodGroupBackoffSeconds = int64(rng.IntN(2) * 10)
	var pods []*v1.Pod
	next := 0
	newMember := func() *v1.Pod {
		p := member(fmt.Sprintf("m%d", next), "g", "1")
		next++
		return p
	}
	for range want + rng.IntN(3) {
		pods = append(pods, newMember())
	}
	env := newTestEnv(t, args, []*v1alpha1.PodGroup{pg}, nil)
	enqueue(t, env, pods...)

	type memberState uint8
	const (
		unscheduled memberState = iota
		waiting
		// leaving: rejected at Permit (by the plugin, its deadline or a preemption); its Unreserve
		// is pending.
		leaving
		// gone: deleted (evicted or by its owner), its Unreserve or replacement pending.
		gone
		bound
	)
	states := map[types.UID]memberState{}
	waitUntil := map[types.UID]time.Time{}
	byUID := map[types.UID]*v1.Pod{}
	for _, p := range pods {
		byUID[p.UID] = p
	}
	var log []string
	fail := func(format string, a ...any) bool {
		t.Errorf("round %d: "+format+"\nsteps:\n  %s", append([]any{round}, append(a, strings.Join(log, "\n  "))...)...)
		return false
	}
	unreserve := func(p *v1.Pod) {
		env.pl.Unreserve(ctx, framework.NewCycleState(), p, "n")
		delete(env.handle.waiting, p.UID)
		delete(waitUntil, p.UID)
		if states[p.UID] != gone {
			states[p.UID] = unscheduled
		}
	}
	// pending are what the framework and the informer do later, in another goroutine: Unreserves of
	// rejected members, a victim's delete reaching the informer. Each runs at a random later step.
	var pending []func()
	later := func(f func()) { pending = append(pending, f) }
	runPending := func(all bool) {
		var keep []func()
		for _, f := range pending {
			if all || rng.IntN(2) == 0 {
				f()
			} else {
				keep = append(keep, f)
			}
		}
		pending = keep
	}
	bindFailures := rng.IntN(2) == 0
	var schedule func(p *v1.Pod) bool
	bind := func(p *v1.Pod) bool {
		delete(env.handle.waiting, p.UID)
		delete(waitUntil, p.UID)
		if bindFailures && rng.IntN(5) == 0 {
			// The bind fails after the quorum: the plugin activates the member, which is retried at
			// once and must pass Permit while the rest of its quorum holds.
			log = append(log, "bind of "+p.Name+" fails")
			unreserve(p)
			return schedule(p)
		}
		b := boundTo(p, "n")
		byUID[p.UID] = b
		update(t, env, b)
		states[p.UID] = bound
		return true
	}
	// settle does what the framework does with the waiting members the plugin allowed or rejected.
	settle := func() bool {
		for uid, w := range env.handle.waiting {
			switch {
			case w.allowed:
				if !bind(byUID[uid]) {
					return false
				}
			case w.rejected != "" && states[uid] == waiting:
				states[uid] = leaving
				p := byUID[uid]
				later(func() { unreserve(p) })
			}
		}
		return true
	}
	schedule = func(p *v1.Pod) bool {
		state := framework.NewCycleState()
		state.Write(framework.PodsToActivateKey, framework.NewPodsToActivate())
		if s := env.pl.Reserve(ctx, state, p, "n"); !s.IsSuccess() {
			unreserve(p)
			return true
		}
		s, d := env.pl.Permit(ctx, state, p, "n")
		switch {
		case s.IsSuccess():
			return bind(p)
		case s.IsWait():
			env.handle.wait(p)
			states[p.UID], waitUntil[p.UID] = waiting, env.clock.Now().Add(d)
		default:
			unreserve(p)
		}
		return true
	}
	live := func(s memberState) []*v1.Pod {
		var out []*v1.Pod
		for _, p := range pods {
			if states[p.UID] == s {
				out = append(out, byUID[p.UID])
			}
		}
		return out
	}
	add := func(p *v1.Pod) {
		if err := env.pods.Add(p); err != nil {
			t.Fatal(err)
		}
		env.pl.onPodAdd(p)
	}
	pick := func(ps []*v1.Pod) *v1.Pod { return ps[rng.IntN(len(ps))] }
	replace := func(p *v1.Pod) {
		if _, ok, _ := env.pods.Get(byUID[p.UID]); ok {
			remove(t, env, byUID[p.UID])
		}
		delete(states, p.UID)
		for i := range pods {
			if pods[i].UID == p.UID {
				pods[i] = newMember()
				byUID[pods[i].UID] = pods[i]
				add(pods[i])
				break
			}
		}
	}
	check := func() bool {
		n := len(live(bound))
		if n > 0 && n < podgroup.MinMember(pg) {
			return fail("%d live members bound, minMember %d", n, podgroup.MinMember(pg))
		}
		return true
	}

	for range 40 {
		if len(live(bound)) == len(pods) {
			break
		}
		switch op := rng.IntN(10); {
		case op < 4:
			if ps := live(unscheduled); len(ps) > 0 {
				p := pick(ps)
				log = append(log, "schedule "+p.Name)
				if !schedule(p) {
					return false
				}
			}
		case op == 4:
			if ps := live(unscheduled); len(ps) > 0 {
				p := pick(ps)
				log = append(log, "no node for "+p.Name)
				env.pl.PostFilter(ctx, framework.NewCycleState(), p, nil)
			}
		case op == 5:
			if ps := live(waiting); len(ps) > 0 {
				// A preemption evicts a waiting member: upstream's Executor rejects it in memory,
				// the delete succeeds, and a Job controller creates a replacement.
				p := pick(ps)
				log = append(log, "preempt "+p.Name)
				env.handle.waiting[p.UID].rejected = "preempted"
				env.pl.victimEvicted(p)
				states[p.UID] = gone
				later(func() { unreserve(p) })
				later(func() { log = append(log, "informer: "+p.Name+" deleted"); replace(p) })
			}
		case op == 6:
			if ps := live(unscheduled); len(ps) > 0 {
				p := pick(ps)
				log = append(log, "delete and replace "+p.Name)
				replace(p)
			}
		case op == 7:
			d := time.Duration(rng.IntN(70)) * time.Second
			log = append(log, fmt.Sprintf("clock +%v", d))
			env.clock.Step(d)
			// The framework rejects the members whose Permit wait expired.
			for uid, until := range waitUntil {
				if w := env.handle.waiting[uid]; w != nil && !env.clock.Now().Before(until) {
					w.rejected = "timed out"
				}
			}
		case op == 8:
			// (Not above a bound quorum: that would make a running gang partial by the user's hand.)
			m := 2 + rng.IntN(3)
			if n := len(live(bound)); n > 0 && m > n {
				m = n
			}
			pg = pg.DeepCopy()
			pg.Spec.MinMember = int32(m)
			pg.Generation++
			log = append(log, fmt.Sprintf("minMember %d", pg.Spec.MinMember))
			if err := env.pgs.Update(pg); err != nil {
				t.Fatal(err)
			}
			env.pl.onPodGroupSpecChange(pg)
		default:
			if ps := live(waiting); len(ps) > 0 {
				// Another plugin's Permit, or the framework, rejects a waiting member.
				// A waiting member deleted: the informer shows it gone, the framework rejects it
				// (its Unreserve comes later), and a replacement is created later still.
				p := pick(ps)
				log = append(log, "delete waiting "+p.Name)
				remove(t, env, p)
				env.handle.waiting[p.UID].rejected = "deleted"
				states[p.UID] = gone
				later(func() { unreserve(p) })
				later(func() { log = append(log, "replacement of "+p.Name); replace(p) })
			}
		}
		runPending(false)
		if !settle() || !check() {
			return false
		}
		for len(pods) < podgroup.MinMember(pg) {
			// (A lowered and raised minMember leaves too few pods: the Job grows.)
			p := newMember()
			pods = append(pods, p)
			byUID[p.UID] = p
			add(p)
		}
	}

	// Left alone, the gang binds whole: every live member passes its attempt within a few back-offs.
	log = append(log, "-- left alone")
	runPending(true)
	if !settle() || !check() {
		return false
	}
	runPending(true)
	for range 10 {
		if len(live(bound)) == len(pods) {
			break
		}
		env.clock.Step(11 * time.Second)
		for uid, until := range waitUntil {
			if !env.clock.Now().Before(until) {
				unreserve(byUID[uid])
			}
		}
		runPending(true)
		for _, p := range live(unscheduled) {
			if !schedule(p) || !settle() || !check() {
				return false
			}
		}
	}
	if n := len(live(bound)); n != len(pods) {
		return fail("left alone, %d of %d members bound (minMember %d)", n, len(pods), podgroup.MinMember(pg))
	}

	// Once its pods are gone the plugin holds nothing of the gang.
	for _, p := range pods {
		remove(t, env, byUID[p.UID])
	}
	env.clock.Step(time.Minute)
	if groups, gated, stamps := env.pl.stateSize(); groups+gated+stamps != 0 {
		g := env.pl.gangs["ns/g"]
		return fail("state left: %d groups, %d gated, %d stamps (members %v, waiting %d, attempt %+v, now %v)", groups, gated, stamps, g.members, len(g.waiting), g.attempt, env.clock.Now())
	}
	return true
}
