package coscheduling

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/kubernetes/pkg/scheduler/framework"

	"github.com/custom-scheduler/custom-scheduler/pkg/apis/scheduling/v1alpha1"
	"github.com/custom-scheduler/custom-scheduler/pkg/coscheduling/podgroup"
)

// TestGangNeverPartialRandomized drives one gang through the plugin's extension points and handlers
// in random orders, as the framework would call them: members reserved and at Permit, rejected at
// Permit (by the plugin, the deadline or a preemption) and unreserved, finding no node, binding (or
// failing to bind after the quorum, then retried at once), deleted and replaced, the PodGroup's
// minMember edited, and the clock moving past deadlines and back-offs. After every step no live
// member is bound unless a quorum is; then, left alone, the gang binds whole; and once its pods are
// gone the plugin holds nothing of it. SEED=<n> replays a failure.
func TestGangNeverPartialRandomized(t *testing.T) {
	runSeeded(t, 500, gangRound)
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
		if s := env.pl.Reserve(ctx, state, p, "n"); !passed(s) {
			unreserve(p)
			return true
		}
		s, d := env.pl.Permit(ctx, state, p, "n")
		switch {
		case passed(s):
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
		g := env.pl.gangs.Get("ns/g")
		return fail("state left: %d groups, %d gated, %d stamps (members %v, waiting %d, attempt %+v, now %v)", groups, gated, stamps, g.Members, len(g.Waiting), g.Attempt, env.clock.Now())
	}
	return true
}
