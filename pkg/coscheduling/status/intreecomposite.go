package status

import (
	"fmt"
	"sort"
	"strings"
	"time"

	schedulingv1beta1 "k8s.io/api/scheduling/v1beta1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/custom-scheduler/custom-scheduler/pkg/apis/scheduling/v1alpha1"
)

// The conditions of in-tree CompositePodGroups (scheduling.k8s.io/v1alpha3). Their API has
// conditions only: CompositePodGroupInitiallyScheduled (True once the subtree's requirement was met,
// and never False again; False, reason Unschedulable, when the subtree could not be placed; False,
// reason Invalid, when its layout is invalid) and DisruptionTarget (True, reason
// PreemptionByScheduler). They follow from our status of the composite (ComputeComposite over its
// children's) as a PodGroup's in-tree conditions follow from ours (InTreeConditions); nothing of it
// is kept.

// The condition types and reasons of a CompositePodGroup that the API names in its documentation
// only (k8s.io/api/scheduling/v1alpha3 has no constants for them); Unschedulable,
// PreemptionByScheduler and DisruptionTarget are the PodGroup's words (schedulingv1beta1).
const (
	ConditionCompositeInitiallyScheduled = "CompositePodGroupInitiallyScheduled"
	// ReasonInvalid: the composite's tree cannot be resolved (a cycle, deeper than tree.MaxDepth, a
	// parent of the other API or no composite).
	ReasonInvalid = "Invalid"
)

// CompositeState is what an in-tree CompositePodGroup's conditions follow from.
type CompositeState struct {
	// Status is our status of the composite (ComputeComposite's).
	Status v1alpha1.PodGroupStatus
	// Unschedulable says why its subtree cannot be placed after its children's last attempts (see
	// Unschedulable); empty: it can, or no attempt ended yet.
	Unschedulable string
	// Invalid says why its tree cannot be resolved; empty: it can.
	Invalid string
	// Disruption is the message of the composite's preemption as a victim, empty if none.
	Disruption string
}

// CompositeConditions returns the in-tree conditions of a CompositePodGroup that s calls for, among
// existing: only those that differ from existing (nothing: nothing to write). A condition keeps its
// lastTransitionTime while its status and reason stay. Pure.
func CompositeConditions(existing []metav1.Condition, s CompositeState, generation int64, now time.Time) []metav1.Condition {
	var want []metav1.Condition
	if c := compositeScheduled(existing, s, generation); c != nil {
		want = append(want, *c)
	}
	if s.Disruption != "" {
		want = append(want, metav1.Condition{Type: schedulingv1beta1.DisruptionTarget, Status: metav1.ConditionTrue,
			Reason: schedulingv1beta1.PodGroupReasonPreemptionByScheduler, Message: s.Disruption, ObservedGeneration: generation})
	}
	return changedConditions(existing, want, now)
}

// compositeScheduled is the CompositePodGroupInitiallyScheduled condition s calls for, nil for none:
// True stays True whatever follows (the API's rule); an invalid tree comes before the children's
// state; a state that is no result yet (children waiting for members, for their quorum, retrying)
// leaves the condition as it is.
func compositeScheduled(existing []metav1.Condition, s CompositeState, generation int64) *metav1.Condition {
	if old := meta.FindStatusCondition(existing, ConditionCompositeInitiallyScheduled); old != nil && old.Status == metav1.ConditionTrue {
		return nil
	}
	c := &metav1.Condition{Type: ConditionCompositeInitiallyScheduled, Status: metav1.ConditionFalse, ObservedGeneration: generation}
	ours := meta.FindStatusCondition(s.Status.Conditions, ConditionScheduled)
	switch {
	case s.Invalid != "":
		c.Reason, c.Message = ReasonInvalid, s.Invalid
	case ours != nil && ours.Status == metav1.ConditionTrue:
		c.Status, c.Reason, c.Message = metav1.ConditionTrue, ReasonScheduled, ours.Message
	case s.Unschedulable != "":
		c.Reason, c.Message = schedulingv1beta1.PodGroupReasonUnschedulable, s.Unschedulable
	default:
		return nil
	}
	return c
}

// Unschedulable says why a composite of minimum min (its minGroupCount, 1 for a basic one) cannot be
// whole after its children's last attempts: fewer than min children are whole or still without a
// failed attempt (a PodGroup whose Scheduled reason is GangInfeasible, GangRejected or GangTimedOut,
// a composite whose Child.Unschedulable is set). Empty when it can still be, or is. Pure.
func Unschedulable(min int, children []Child) string {
	want := max(min, 1)
	possible := 0
	var failed []string
	for _, c := range children {
		if why := c.unschedulable(); why != "" {
			failed = append(failed, c.Name+": "+why)
			continue
		}
		possible++
	}
	if possible >= want || len(failed) == 0 {
		return ""
	}
	sort.Strings(failed)
	return fmt.Sprintf("%d of minGroupCount %d groups can be whole; %s", possible, want, strings.Join(failed, "; "))
}

// unschedulable says why the child's last attempt failed ("" if it is whole or has not failed).
func (c Child) unschedulable() string {
	if c.whole() {
		return ""
	}
	if c.Unschedulable != "" {
		return c.Unschedulable
	}
	if s := meta.FindStatusCondition(c.Status.Conditions, ConditionScheduled); s != nil && s.Status == metav1.ConditionFalse && unschedulable[s.Reason] {
		return s.Reason + ": " + s.Message
	}
	return ""
}
