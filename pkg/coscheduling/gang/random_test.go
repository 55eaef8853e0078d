package gang

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/custom-scheduler/custom-scheduler/pkg/coscheduling/attempt"
	"github.com/custom-scheduler/custom-scheduler/pkg/coscheduling/internal/gangtest"
)

// TestStepsKeepTheGangConsistent drives one gang through random orderings of its steps, as the
// framework and the informers can interleave them (members reserved and at Permit, rejected, found no
// node, bound, evicted; minMember edited; the clock moving past deadlines and back-offs), and checks
// after every step that the state is consistent and that no member passes Permit below the quorum:
//   - every waiting member counts as reserved here, and every reserved node belongs to one;
//   - a member that counts as reserved is not counted as unplaced;
//   - members allowed through Permit are allowed with at least minMember counted, on the store's word;
//   - members rejected stop counting at once, and nobody waits after a quorum or a failure.
//
// SEED=<n> replays a run.
func TestStepsKeepTheGangConsistent(t *testing.T) {
	gangtest.RunSeeded(t, 300, stepRound)
}

func stepRound(t *testing.T, rng *rand.Rand, round int) bool {
	n := 2 + rng.IntN(5)
	want := 1 + rng.IntN(n)
	pods := make([]*v1.Pod, n)
	for i := range pods {
		pods[i] = pod(fmt.Sprintf("m%d", i))
	}
	g := New("ns", "g", "uid")
	now := t0
	// bound are the members the informer shows bound (the store's word); allowed are those through
	// Permit and on their way to bind.
	bound := map[types.UID]bool{}
	allowed := map[types.UID]bool{}
	// gone are members deleted from the store whose delete the plugin's handler has not seen yet:
	// the member set still counts them, the store does not.
	gone := map[types.UID]bool{}
	// rejecting are waiting members the plugin forgot (they are gone) whose rejection by the framework,
	// and so their Unreserve, has not come yet.
	rejecting := map[types.UID]*v1.Pod{}
	confirmed := func() int {
		c := 0
		for _, p := range pods {
			if gone[p.UID] {
				continue
			}
			if bound[p.UID] || g.Members[p.UID]&Reserved != 0 {
				c++
			}
		}
		return c
	}
	var log []string
	fail := func(format string, args ...any) bool {
		t.Errorf("round %d (%d members, minMember %d): "+format+"\nsteps: %v", append([]any{round, n, want}, append(args, log)...)...)
		return false
	}
	// passed records members let through Permit, checking the quorum they were let through on.
	passed := func(r Result, p *v1.Pod) bool {
		through := r.Pods
		if p != nil {
			through = append(through, p)
		}
		if c := confirmed(); c < want {
			return fail("%d members let through Permit with %d counted", len(through), c)
		}
		for _, q := range through {
			allowed[q.UID] = true
		}
		return true
	}
	for step := range 40 {
		p := pods[rng.IntN(n)]
		var r Result
		if gone[p.UID] {
			// The handler catches up; the pod's replacement (same name, a new pod) starts afresh.
			log = append(log, "forgotten "+p.Name)
			g.Forget(p.UID)
			if g.Waiting[p.UID] != nil {
				rejecting[p.UID] = p
			}
			delete(gone, p.UID)
			delete(bound, p.UID)
			delete(allowed, p.UID)
			p = pod(p.Name + "x")
			for i := range pods {
				if pods[i].Name+"x" == p.Name {
					pods[i] = p
				}
			}
			continue
		}
		switch k := rng.IntN(11); {
		case k == 9 && len(rejecting) > 0:
			for uid, q := range rejecting {
				log = append(log, "framework rejects "+q.Name)
				r = g.OnUnreserve(q, now, backoff)
				delete(rejecting, uid)
				break
			}
		case k < 3 && !bound[p.UID] && g.Members[p.UID] == 0:
			log = append(log, "reserve+permit "+p.Name)
			var refused Result
			if refused, _ = g.OnReserve(p.UID, "", "node-"+p.Name, now, want, time.Minute, confirmed, backoff); refused.Verdict == attempt.VerdictRefuse {
				break
			}
			r = g.OnPermit(p, now, want, confirmed, backoff)
			switch {
			case r.AllowWaiting:
				if !passed(r, p) {
					return false
				}
			case r.Verdict == attempt.VerdictRefuse:
				// The framework unreserves a member its Permit refused.
				r = g.OnUnreserve(p, now, backoff)
			}
		case k == 3 && g.Waiting[p.UID] != nil:
			log = append(log, "unreserve "+p.Name)
			r = g.OnUnreserve(p, now, backoff)
		case k == 4 && !bound[p.UID] && g.Members[p.UID] == 0:
			log = append(log, "no node "+p.Name)
			r = g.OnNoNode(p, now, want, n, backoff, nil)
		case k == 5 && allowed[p.UID] && !bound[p.UID]:
			log = append(log, "bound "+p.Name)
			bound[p.UID] = true
			g.CountBound(p.UID)
		case k == 6 && g.Members[p.UID]&Reserved != 0:
			log = append(log, "evicted "+p.Name)
			r, _ = g.OnEvicted(p, now, backoff)
			delete(allowed, p.UID)
		case k == 8 && g.Members[p.UID] != 0:
			log = append(log, "gone from the store "+p.Name)
			gone[p.UID] = true
		case k == 7:
			want = 1 + rng.IntN(n)
			log = append(log, fmt.Sprintf("minMember %d", want))
			if r = g.OnEdited(now, want, confirmed, backoff); r.AllowWaiting && !passed(r, nil) {
				return false
			}
		default:
			d := time.Duration(rng.IntN(40)) * time.Second
			log = append(log, "wait "+d.String())
			now = now.Add(d)
		}
		if r.RejectWaiting {
			for _, q := range r.Pods {
				if g.Members[q.UID]&Reserved != 0 {
					return fail("step %d: rejected member %s still counts as reserved", step, q.Name)
				}
			}
		}
		if (r.RejectWaiting || r.AllowWaiting) && g.InProgress() {
			return fail("step %d: %d members wait after the attempt was decided", step, len(g.Waiting))
		}
		for uid := range g.Waiting {
			if g.Members[uid]&Reserved == 0 && rejecting[uid] == nil {
				return fail("step %d: %s waits at Permit but does not count as reserved", step, uid)
			}
		}
		for uid := range g.ReservedOn {
			if g.Members[uid]&Reserved == 0 {
				return fail("step %d: %s keeps a reserved node but is not reserved", step, uid)
			}
		}
		for uid := range g.Unplaced {
			if g.Members[uid]&Reserved != 0 {
				return fail("step %d: %s counts as reserved and unplaced", step, uid)
			}
		}
	}
	return true
}
