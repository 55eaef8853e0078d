package status

import (
	"fmt"
	"sort"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/custom-scheduler/custom-scheduler/pkg/apis/scheduling/v1alpha1"
	"github.com/custom-scheduler/custom-scheduler/pkg/coscheduling/podgroup"
	"github.com/custom-scheduler/custom-scheduler/pkg/coscheduling/tree"
)

// The status of a composite PodGroup of ours (a job of several roles, see package tree): its counts
// are of groups, not pods. scheduled: the children whole (a PodGroup scheduled, running or finished
// with its quorum; a composite with its minimum of children whole); running, succeeded, failed: the
// children in that phase. The phase follows from them as a PodGroup's follows from its pods, against
// minGroupCount (1 for a basic composite), and the Scheduled condition names the children that are
// short. A composite's status is recomputed whenever one of its children's is (each child's sync
// queues its parent).

// Reasons of a composite's Scheduled condition.
const (
	// ReasonGroupsWhole: at least minGroupCount children are whole.
	ReasonGroupsWhole = "GroupsWhole"
	// ReasonWaitingForGroups: fewer than minGroupCount children are whole (the message names them).
	ReasonWaitingForGroups = tree.ReasonWaitingForGroups
)

// Child is one child of a composite as its status says it.
type Child struct {
	Name string
	// Min is the child's minMember (a PodGroup) or minGroupCount (a composite).
	Min    int
	Status v1alpha1.PodGroupStatus
	// Unschedulable, for a composite child, says why it cannot be whole (see Unschedulable).
	Unschedulable string
}

// whole: the child has its quorum (or its minimum of children) placed.
func (c Child) whole() bool {
	switch c.Status.Phase {
	case v1alpha1.PodGroupScheduled, v1alpha1.PodGroupRunning, v1alpha1.PodGroupFinished:
		return true
	}
	return false
}

// ComputeComposite derives a composite's status from its children's, min being its minGroupCount (1
// for a basic composite). Pure.
func ComputeComposite(pg *v1alpha1.PodGroup, min int, children []Child, now time.Time) v1alpha1.PodGroupStatus {
	st := v1alpha1.PodGroupStatus{ScheduleStartTime: pg.Status.ScheduleStartTime}
	started, prescheduling := false, false
	var short []string
	for _, c := range children {
		switch c.Status.Phase {
		case v1alpha1.PodGroupRunning:
			st.Running++
		case v1alpha1.PodGroupFinished:
			st.Succeeded++
		case v1alpha1.PodGroupFailed:
			st.Failed++
		case v1alpha1.PodGroupPreScheduling:
			prescheduling = true
		}
		if c.whole() {
			st.Scheduled++
		} else {
			short = append(short, fmt.Sprintf("%s (%s, %d of %d)", c.Name, orPending(c.Status.Phase), c.Status.Scheduled, c.Min))
		}
		started = started || c.Status.Scheduled > 0 || c.Status.Phase == v1alpha1.PodGroupScheduling
	}
	want := int32(max(min, 1))
	switch {
	case st.Succeeded >= want:
		st.Phase = v1alpha1.PodGroupFinished
	case st.Running+st.Succeeded >= want:
		st.Phase = v1alpha1.PodGroupRunning
	case st.Scheduled >= want:
		st.Phase = v1alpha1.PodGroupScheduled
	case st.Failed > 0 && int(st.Failed) > len(children)-int(want):
		st.Phase = v1alpha1.PodGroupFailed
	case started:
		st.Phase = v1alpha1.PodGroupScheduling
	case prescheduling:
		st.Phase = v1alpha1.PodGroupPreScheduling
	default:
		st.Phase = v1alpha1.PodGroupPending
	}
	if st.ScheduleStartTime.IsZero() && st.Phase != v1alpha1.PodGroupPending && st.Phase != v1alpha1.PodGroupPreScheduling {
		st.ScheduleStartTime = metav1.NewTime(now.Truncate(time.Second))
	}
	c := metav1.Condition{Type: ConditionScheduled, ObservedGeneration: pg.Generation,
		Message: fmt.Sprintf("%d of minGroupCount %d groups whole", st.Scheduled, want)}
	if st.Scheduled >= want {
		c.Status, c.Reason = metav1.ConditionTrue, ReasonGroupsWhole
	} else {
		sort.Strings(short)
		c.Status, c.Reason = metav1.ConditionFalse, ReasonWaitingForGroups
		c.Message += "; short: " + strings.Join(short, ", ")
		if len(children) < int(want) {
			c.Message += fmt.Sprintf("; only %d groups name it as their parent", len(children))
		}
	}
	st.Conditions = withCondition(pg.Status.Conditions, c, now)
	return st
}

func orPending(p v1alpha1.PodGroupPhase) v1alpha1.PodGroupPhase {
	if p == "" {
		return v1alpha1.PodGroupPending
	}
	return p
}

// compositeNode reports whether pg is a composite of ours, and its minimum.
func compositeNode(pg *v1alpha1.PodGroup) (tree.Node, bool) {
	if podgroup.IsInTree(pg) {
		return tree.Node{}, false
	}
	n := tree.FromPodGroup(pg, podgroup.MinMember(pg), true)
	return n, n.Composite && n.Invalid == ""
}
