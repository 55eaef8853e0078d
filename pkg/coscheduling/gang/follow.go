package gang

import (
	"fmt"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/custom-scheduler/custom-scheduler/pkg/coscheduling/attempt"
	"github.com/custom-scheduler/custom-scheduler/pkg/coscheduling/podgroup"
	"github.com/custom-scheduler/custom-scheduler/pkg/coscheduling/tree"
)

// A job of several roles moves together (package tree): a group's quorum lets through the groups
// its tree now admits, and a group's failure fails those that can no longer be ready. The plugin
// resolves the tree and runs each group's step as it runs any (its Registry.Step and what it keeps);
// what moves is decided here.

// Followed is a group moved with another's step (see Registry.Follow): its key and its step's result.
type Followed struct {
	Key string
	Result
}

// Follow moves the other groups of g's tree (root, resolved only when needed; nil: g is in none) with
// g's step res (see tree.Branch.Follow): at g's quorum, those the tree now admits are let through
// (OnTreeReady); at g's failure, those that can no longer be ready fail with it and back off
// (OnTreeFailed). step runs one group's step as the plugin runs g's; confirmed counts a group on the
// pod store's word. It returns the groups whose waiting members are allowed or rejected with g's. A
// follower's step moves nobody else.
func (r *Registry) Follow(g *Gang, res Result, root func() *tree.Branch, backoff time.Duration, confirmed func(*Gang) int, step func(*Gang, func() Result) Result) []Followed {
	if res.Event == attempt.TreeReady || res.Event == attempt.TreeFailed {
		return nil
	}
	b := root()
	if b == nil {
		return nil
	}
	// Out of this attempt: g, and the groups that failed on their own account and back off. A group
	// that backs off only because it failed with another (OnTreeFailed) is not: counting it would
	// have a group that fails at every try (a replica of K of N that fits beside no other) reject
	// the others in turn, each while the one it needs backs off for the last rejection.
	out := func(key string) bool {
		o := r.gangs[key]
		return key == g.Key() || o != nil && o.Phase == attempt.PhaseFailed && !o.FailedWithJob && o.BackingOff(res.Now)
	}
	var moved []Followed
	for _, n := range b.Follow(g.Key(), res.RejectWaiting, r.Count, out) {
		o := r.gangs[n.Key()]
		if o == nil {
			continue
		}
		or := step(o, func() Result {
			if res.RejectWaiting {
				return o.OnTreeFailed(res.Now, res.Message, backoff)
			}
			return o.OnTreeReady(res.Now, n.Min, func() int { return confirmed(o) }, backoff)
		})
		if or.AllowWaiting || or.RejectWaiting {
			moved = append(moved, Followed{Key: n.Key(), Result: or})
		}
	}
	return moved
}

// FollowedPods are the waiting members of the groups moved, allowed or rejected with the step's.
func FollowedPods(moved []Followed) []*v1.Pod {
	var pods []*v1.Pod
	for _, f := range moved {
		pods = append(pods, f.Pods...)
	}
	return pods
}

// Event is the PodGroup event of a group moved with its tree: QuorumReached at its first quorum, its
// failure's reason when it fails; none ("" reason) otherwise.
func (f Followed) Event() (eventType, reason, message string) {
	switch {
	case f.AllowWaiting && f.FirstQuorum:
		return v1.EventTypeNormal, podgroup.ReasonQuorumReached, f.Message
	case f.RejectWaiting:
		return v1.EventTypeWarning, f.Reason, f.Message
	}
	return "", "", ""
}

// Count is the count of live members reserved or bound of the group of key (0: not tracked).
func (r *Registry) Count(key string) int {
	if g := r.gangs[key]; g != nil {
		return g.Count()
	}
	return 0
}

// Credits are the finished-member credit of the groups of root's tree, each as its gang's last step
// counted it, own's (the group of the member at hand) as ownCredit, for the tree's hold-back (see
// tree.HoldBack).
func (r *Registry) Credits(root *tree.Branch, own string, ownCredit int) map[string]int {
	credit := map[string]int{own: ownCredit}
	for _, n := range root.Leaves() {
		if g := r.gangs[n.Key()]; g != nil && n.Key() != own {
			credit[n.Key()] = g.Credit
		}
	}
	return credit
}

// Infeasible is the failure a group found not to fit as a whole (PreFilter) brings on the groups of
// its job that cannot be ready without it, at now: its attempt does not start, so it is no step of
// its own, only what the others follow (Registry.Follow). The message is the check's outcome. None
// (ok false) while the room is freeing, its preemption's outcome preempted being PreemptWaiting (the
// victims of its job's preemption still leave): the job's groups keep what they reserved.
func (g *Gang) Infeasible(now time.Time, preempted string) (_ Result, ok bool) {
	if preempted == PreemptWaiting {
		return Result{}, false
	}
	msg := g.Outcome.Message
	if msg == "" {
		msg = fmt.Sprintf("PodGroup %s does not fit the nodes now", g.Key())
	}
	return Result{Decision: attempt.Decision{RejectWaiting: true}, Message: msg, Now: now, Event: attempt.NoNode}, true
}
