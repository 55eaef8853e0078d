package podgroup

import "github.com/custom-scheduler/custom-scheduler/pkg/apis/scheduling/v1alpha1"

// Counts are what a group's phase follows from, counted over its pods of one profile.
type Counts struct {
	// Live members (not being deleted, not finished); Scheduled of them bound to a node, Running of
	// those running; Failed pods; Credit the succeeded members that count by the finished-member rule
	// (RunCredit).
	Live, Scheduled, Running, Failed, Credit int32
	// Waiting: some member waits at Permit for the rest of the quorum (the scheduler's attempt; false
	// where it is not known).
	Waiting bool
}

// Phase is a group's phase from its counts and minMember: the status writer's rule for the phase it
// writes on a PodGroup of ours, and kubectl gang's for an in-tree PodGroup, whose API has no phase.
func Phase(c Counts, minMember int32) v1alpha1.PodGroupPhase {
	switch {
	case c.Credit >= minMember:
		return v1alpha1.PodGroupFinished
	case c.Running+c.Credit >= minMember:
		return v1alpha1.PodGroupRunning
	case c.Failed > 0 && c.Failed+c.Running+c.Credit >= minMember:
		return v1alpha1.PodGroupFailed
	case c.Scheduled >= minMember:
		return v1alpha1.PodGroupScheduled
	case c.Scheduled > 0 || c.Waiting:
		return v1alpha1.PodGroupScheduling
	case c.Live+c.Credit >= minMember:
		return v1alpha1.PodGroupPreScheduling
	}
	return v1alpha1.PodGroupPending
}
