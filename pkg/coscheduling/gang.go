package coscheduling

import (
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"

	"github.com/custom-scheduler/custom-scheduler/pkg/apis/scheduling/v1alpha1"
)

// memberFlags says why a pod counts toward its group's quorum.
type memberFlags uint8

const (
	// reserved: the pod passed Reserve in this scheduler and was not unreserved.
	reserved memberFlags = 1 << iota
	// bound: the scheduler's pod informer shows the pod assigned to a node.
	bound
)

// gang is the in-memory state of one PodGroup, keyed "namespace/name". Every field is guarded by the
// plugin's mutex. Counting is O(1): members holds exactly the pods that count toward the quorum.
type gang struct {
	namespace, name string

	// members are the pods that are reserved or bound; len(members) is the quorum count.
	members map[types.UID]memberFlags
	// waiting are the members waiting at Permit in the current attempt.
	waiting map[types.UID]*v1.Pod
	// unplaced are members that found no node since the last attempt ended: when too few members
	// are left to reach the quorum without them, the attempt fails.
	unplaced map[types.UID]struct{}

	// The current attempt: it starts at the first Reserve while no member waits.
	attemptStart time.Time
	deadline     time.Time
	// quorumMet: the attempt reached minMember; later Unreserves (bind failures) do not fail the gang.
	quorumMet bool
	// failed: the attempt was rejected; siblings' Unreserves are echoes of that.
	failed bool
	// needsQuorum: the attempt started below minMember, so its time to quorum is worth observing.
	needsQuorum bool
	// activated: the attempt already moved the unscheduled members to the active queue.
	activated bool

	// backoffUntil keeps the members out of scheduling after a failed attempt.
	backoffUntil time.Time
	backoffTimer clock.Timer
	// lastFailure orders the group behind others in QueueSort after a failed attempt.
	lastFailure time.Time

	// feasibility caches the last check; it is valid while cacheKey matches.
	feasibility *feasibility
	cacheKey    feasibilityKey
}

// feasibilityKey is what a cached check depends on: cluster changes that free capacity (epoch), the
// PodGroup's spec (resourceVersion) and the group's members.
type feasibilityKey struct {
	epoch           uint64
	resourceVersion string
	existing        int
	counted         int
	at              time.Time
}

func newGang(namespace, name string) *gang {
	return &gang{namespace: namespace, name: name, members: map[types.UID]memberFlags{}, waiting: map[types.UID]*v1.Pod{}, unplaced: map[types.UID]struct{}{}}
}

func (g *gang) key() string { return g.namespace + "/" + g.name }

func (g *gang) set(uid types.UID, f memberFlags) { g.members[uid] |= f }

func (g *gang) clear(uid types.UID, f memberFlags) bool {
	old, ok := g.members[uid]
	if !ok || old&f == 0 {
		return false
	}
	if rest := old &^ f; rest == 0 {
		delete(g.members, uid)
	} else {
		g.members[uid] = rest
	}
	return true
}

func (g *gang) backingOff(now time.Time) bool { return now.Before(g.backoffUntil) }

// idle reports whether the state holds nothing worth keeping.
func (g *gang) idle(now time.Time) bool {
	return len(g.members) == 0 && len(g.waiting) == 0 && !g.backingOff(now) && g.lastFailure.IsZero()
}

// minMember is the PodGroup's quorum (at least 1).
func minMember(pg *v1alpha1.PodGroup) int {
	if pg.Spec.MinMember < 1 {
		return 1
	}
	return int(pg.Spec.MinMember)
}

// podGroupName returns the PodGroup a pod belongs to, from its label.
func podGroupName(pod *v1.Pod) (string, bool) {
	name, ok := pod.Labels[v1alpha1.PodGroupLabel]
	return name, ok && name != ""
}

func groupKey(namespace, name string) string { return namespace + "/" + name }
