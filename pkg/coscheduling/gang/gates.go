package gang

import (
	"fmt"

	"github.com/custom-scheduler/custom-scheduler/pkg/coscheduling/podgroup"
	"k8s.io/apimachinery/pkg/types"
)

// Gates are why members are held back (by PreEnqueue or PreFilter), per pod: the reason, the latest
// message, and the episode of that reason, so that each reason is reported once per pod, and a
// delayed report only if the pod is still held back in the same episode. The zero value is ready;
// the caller serializes access (the plugin's lock).
type Gates struct {
	pods     map[types.UID]Gate
	episodes uint64
}

// Gate is why one pod is held back.
type Gate struct {
	Reason, Message string
	// Episode numbers the stretch during which the pod has been held back for Reason without a break.
	Episode uint64
}

// Hold records pod uid held back for reason, with msg. It reports the gate, and whether this starts
// an episode (the pod was not held back, or for another reason): only then is it reported.
func (g *Gates) Hold(uid types.UID, reason, msg string) (Gate, bool) {
	prev, had := g.pods[uid]
	gate := Gate{Reason: reason, Message: msg, Episode: prev.Episode}
	started := !had || prev.Reason != reason
	if started {
		g.episodes++
		gate.Episode = g.episodes
	}
	if g.pods == nil {
		g.pods = map[types.UID]Gate{}
	}
	g.pods[uid] = gate
	return gate, started
}

// Still returns uid's gate if the pod is still held back in episode.
func (g *Gates) Still(uid types.UID, episode uint64) (Gate, bool) {
	gate, ok := g.pods[uid]
	return gate, ok && gate.Episode == episode
}

// Held reports whether uid is held back.
func (g *Gates) Held(uid types.UID) bool { _, ok := g.pods[uid]; return ok }

// Release forgets uid's gate: it was let in, bound, or is gone.
func (g *Gates) Release(uid types.UID) { delete(g.pods, uid) }

// Len is how many pods are held back.
func (g *Gates) Len() int { return len(g.pods) }

// HoldBack says whether a member of group key waits for its group to have want live pods, with credit
// of them counted as its run's succeeded members (podgroup.ReasonWaitingForMembers), or for want of
// them to have their claims from templates made (ReasonWaitingForClaims: members enter together once
// their claims exist; one let in earlier is placed while its peers' devices are still unknown to the
// check, and in-tree PodGroup claims are shared only with members placed in the same pod-group
// cycle), and why in the current counts ("" when neither). existing and ready count the live members
// and those with their claims made, each up to its argument (O(1) when the counts reach it).
func HoldBack(key string, want, credit int, existing, ready func(upTo int) int) (reason, msg string) {
	if n := existing(want - credit); n+credit < want {
		succeeded := ""
		if credit > 0 {
			succeeded = fmt.Sprintf(" (and %d of its run succeeded)", credit)
		}
		return podgroup.ReasonWaitingForMembers,
			fmt.Sprintf("%d of minMember %d live pods of PodGroup %s exist%s; the pod waits for the rest without holding resources", n, want, key, succeeded)
	}
	if n := ready(want - credit); n+credit < want {
		return podgroup.ReasonWaitingForClaims,
			fmt.Sprintf("%d of minMember %d live pods of PodGroup %s have their ResourceClaims from templates made; the pod waits for the rest without holding resources", n, want, key)
	}
	return "", ""
}
