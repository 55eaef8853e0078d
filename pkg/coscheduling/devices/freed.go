package devices

import (
	"context"
	"sync"
	"time"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/util/wait"
)

// Freed coalesces the claim events that may change a whole-gang check (ClaimFreesOrPins). The check
// reads the scheduler's claim cache, which the scheduler's own handler on the same informer updates,
// in no set order with the plugin's: the members must be activated once that cache shows the change,
// not before, or their attempt would still see the devices taken and nothing would bring them back.
// A burst of such events (a job's 300 claims deleted together) is one wait and one activation: the
// first event starts one waiter, later ones join its set, and once the cache shows every claim of the
// set as its event said (or Wait passes) Then runs once. Without a cache (tests), Then runs at once.
type Freed struct {
	// Cache reads a claim from the scheduler's claim cache; nil: none.
	Cache func(namespace, name string) (*resourceapi.ResourceClaim, error)
	// Then runs once per burst, after the cache agrees.
	Then func()
	// Poll is how often the waiter asks the cache; Wait how long it waits at most.
	Poll, Wait time.Duration

	mu      sync.Mutex
	pending map[claimRef]bool
	waiting bool
}

type claimRef struct{ namespace, name, uid string }

// Add records a claim event: the cache must show claim allocated, or not (a claim gone, or replaced
// under its name, is not), as allocated says. The waiter runs under ctx.
func (f *Freed) Add(ctx context.Context, claim *resourceapi.ResourceClaim, allocated bool) {
	if f.Cache == nil {
		f.Then()
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.pending == nil {
		f.pending = map[claimRef]bool{}
	}
	f.pending[claimRef{claim.Namespace, claim.Name, string(claim.UID)}] = allocated
	if f.waiting {
		return
	}
	f.waiting = true
	go f.wait(ctx)
}

// wait polls until the cache agrees on every pending claim (or Wait passes), then runs Then once for
// the events it saw; an event that comes after the set is taken starts the next round.
func (f *Freed) wait(ctx context.Context) {
	err := wait.PollUntilContextTimeout(ctx, f.Poll, f.Wait, false, func(context.Context) (bool, error) {
		return f.take(false), nil
	})
	if err != nil {
		f.take(true)
	}
	if ctx.Err() == nil {
		f.Then()
	}
}

// take ends the round when the cache shows every pending claim as its event said, or anyway with
// force, and reports whether it did.
func (f *Freed) take(force bool) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if !force {
		for ref, allocated := range f.pending {
			c, err := f.Cache(ref.namespace, ref.name)
			now := err == nil && c != nil && string(c.UID) == ref.uid && c.Status.Allocation != nil
			if now != allocated {
				return false
			}
		}
	}
	f.pending, f.waiting = nil, false
	return true
}
