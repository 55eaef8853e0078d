package podgroup

import (
	"fmt"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"

	"github.com/custom-scheduler/custom-scheduler/pkg/apis/scheduling/v1alpha1"
)

// When an informer event completes a group, so that the members PreEnqueue held back must be let
// in: pure predicates over the group's counts (live members, those with their claims made, and the
// credit of the run's members that succeeded, see SucceededMember) and its minMember (want). Each is
// true for the event that brings a count to minMember, not for every event of a complete group.

// CompletedByAdd reports whether a member added (bound or not) completes its group: its live members
// reach minMember, or it became a member with its claims made (ready) and those reach it.
func CompletedByAdd(live, ready, credit, want int, grew bool) bool {
	return live+credit == want || (grew && ready+credit == want)
}

// CompletedByReady reports whether a member that got its claims made (the last of minMember members
// to) completes its group.
func CompletedByReady(ready, credit, want int) bool { return ready+credit == want }

// CompletedByFinished reports whether a member that succeeded (credit grew) completes a group with
// live members short of minMember, whose replacement members wait for it.
func CompletedByFinished(live, credit, want int) bool {
	return live > 0 && live < want && live+credit >= want
}

// Change is what a pod added or updated in the informer means for its group's state, in the profile
// of a scheduler: see ChangeOf.
type Change int

const (
	// ChangeOther: another scheduler's pod (another profile's, the default scheduler's, a pod created
	// with its node set) is no member of this profile's gangs: it never counts toward their quorum,
	// and no state is made for its group (every bound pod of a Job carries spec.schedulingGroup where
	// the Job controller writes in-tree PodGroups).
	ChangeOther Change = iota
	// ChangeGone: it is no longer live (being deleted, finished): it stops counting at once.
	ChangeGone
	// ChangeUnbound: live and not bound yet: it counts once reserved, nothing changes now.
	ChangeUnbound
	// ChangeBound: bound: it counts from the informer now, not from a reservation.
	ChangeBound
)

// ChangeOf is what pod, added or updated, means for its group's state in the scheduler profile.
func ChangeOf(pod *v1.Pod, profile string) Change {
	switch {
	case pod.Spec.SchedulerName != profile:
		return ChangeOther
	case !IsLive(pod):
		return ChangeGone
	case pod.Spec.NodeName == "":
		return ChangeUnbound
	}
	return ChangeBound
}

// Update is what an update of a PodGroup in an informer means for its gang.
type Update int

const (
	// UpdateNone: status only (the plugin's own patches), or nothing the gang reads.
	UpdateNone Update = iota
	// UpdateRecreated: another UID under the name (deleted and recreated while the watch was down, a
	// relist shows it as an update): the old PodGroup's delete and the new one's add.
	UpdateRecreated
	// UpdateDeleting: it got a deletionTimestamp (held by a finalizer, as in-tree ones are while pods
	// use them): its delete.
	UpdateDeleting
	// UpdateSpec: its spec changed (the in-tree API keeps the generation on a minCount edit).
	UpdateSpec
)

// UpdateOf classifies an update of a PodGroup from old to pg.
func UpdateOf(old, pg *v1alpha1.PodGroup) Update {
	switch {
	case old.UID != pg.UID:
		return UpdateRecreated
	case pg.DeletionTimestamp != nil && old.DeletionTimestamp == nil:
		return UpdateDeleting
	case pg.DeletionTimestamp == nil && (old.Generation != pg.Generation || !equality.Semantic.DeepEqual(old.Spec, pg.Spec)):
		return UpdateSpec
	}
	return UpdateNone
}

// NotFoundMessage is the status of a member of the group of key held back while its PodGroup does not
// exist.
func NotFoundMessage(key string) string {
	return fmt.Sprintf("PodGroup %s does not exist; the pod waits for it without holding resources", key)
}

// WaitingForQuorumMessage is the WaitingForQuorum event of an attempt of the group of pg still
// gathering its quorum after delay: count members reserved or bound, waiting until deadline.
func WaitingForQuorumMessage(pg *v1alpha1.PodGroup, delay time.Duration, count int, deadline time.Time) string {
	return fmt.Sprintf("attempt under way for %s: %d of minMember %d members reserved or bound; waiting until %s for the rest",
		delay, count, MinMember(pg), deadline.UTC().Format(time.RFC3339))
}
