package status

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	schedulingv1beta1 "k8s.io/api/scheduling/v1beta1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/custom-scheduler/custom-scheduler/pkg/apis/scheduling/v1alpha1"
	"github.com/custom-scheduler/custom-scheduler/pkg/coscheduling/podgroup"
	"github.com/custom-scheduler/custom-scheduler/pkg/coscheduling/tree"
)

// The status of in-tree PodGroups (scheduling.k8s.io/v1beta1). Their API has conditions only, of its
// own types: PodGroupInitiallyScheduled (True, reason Scheduled, once the quorum was first placed,
// and never False again; False, reason Unschedulable, after a failed attempt) and DisruptionTarget
// (True, reason PreemptionByScheduler, once the gang is preempted whole). Those are what the updater
// writes there, with the same words as ours in the messages; the rest of our status (phase, counts,
// our conditions, whose times the BelowQuorum report runs from) is kept in memory for such a group,
// so it starts afresh when another replica leads.

// ReasonScheduled is the PodGroupInitiallyScheduled reason once the group was placed (upstream's word).
const ReasonScheduled = "Scheduled"

// unschedulable are our Scheduled reasons that end an attempt unplaced: the in-tree condition turns
// False with reason Unschedulable for them. Other states (waiting for members, for the quorum, for
// victims to go) are no result yet, and leave it as it is, as upstream's scheduler does.
var unschedulable = map[string]bool{
	podgroup.ReasonGangInfeasible: true, podgroup.ReasonGangRejected: true, podgroup.ReasonGangTimedOut: true,
}

// InTreeConditions returns the in-tree conditions that st (our status of the group) and disruption
// (the message of the gang's preemption as a victim, empty if none) call for, among existing: only
// those that differ from existing (nothing: nothing to write). A condition keeps its
// lastTransitionTime while its status and reason stay.
func InTreeConditions(existing []metav1.Condition, st v1alpha1.PodGroupStatus, disruption string, generation int64, now time.Time) []metav1.Condition {
	var want []metav1.Condition
	if c := inTreeScheduled(existing, st, generation); c != nil {
		want = append(want, *c)
	}
	if disruption != "" {
		want = append(want, metav1.Condition{Type: schedulingv1beta1.DisruptionTarget, Status: metav1.ConditionTrue,
			Reason: schedulingv1beta1.PodGroupReasonPreemptionByScheduler, Message: disruption, ObservedGeneration: generation})
	}
	return changedConditions(existing, want, now)
}

// changedConditions returns those of want that differ from existing (status, reason, message or
// observedGeneration), each with its lastTransitionTime: existing's while its status and reason stay,
// now's otherwise.
func changedConditions(existing, want []metav1.Condition, now time.Time) []metav1.Condition {
	var out []metav1.Condition
	for _, c := range want {
		old := meta.FindStatusCondition(existing, c.Type)
		if old != nil && old.Status == c.Status && old.Reason == c.Reason && old.Message == c.Message && old.ObservedGeneration == c.ObservedGeneration {
			continue
		}
		c.LastTransitionTime = metav1.NewTime(now.Truncate(time.Second))
		if old != nil && old.Status == c.Status && old.Reason == c.Reason {
			c.LastTransitionTime = old.LastTransitionTime
		}
		out = append(out, c)
	}
	return out
}

// inTreeScheduled is the PodGroupInitiallyScheduled condition st calls for, nil for none: True stays
// True whatever follows (the API's rule).
func inTreeScheduled(existing []metav1.Condition, st v1alpha1.PodGroupStatus, generation int64) *metav1.Condition {
	if old := meta.FindStatusCondition(existing, schedulingv1beta1.PodGroupInitiallyScheduled); old != nil && old.Status == metav1.ConditionTrue {
		return nil
	}
	ours := meta.FindStatusCondition(st.Conditions, ConditionScheduled)
	switch {
	case ours == nil:
		return nil
	case ours.Status == metav1.ConditionTrue:
		return &metav1.Condition{Type: schedulingv1beta1.PodGroupInitiallyScheduled, Status: metav1.ConditionTrue,
			Reason: ReasonScheduled, Message: ours.Message, ObservedGeneration: generation}
	case unschedulable[ours.Reason]:
		return &metav1.Condition{Type: schedulingv1beta1.PodGroupInitiallyScheduled, Status: metav1.ConditionFalse,
			Reason: schedulingv1beta1.PodGroupReasonUnschedulable, Message: ours.Reason + ": " + ours.Message, ObservedGeneration: generation}
	}
	return nil
}

// Disrupted records that the in-tree group of victim is being preempted whole (msg says for whom),
// for its DisruptionTarget condition; it is forgotten with the group. A victim whose unit is an
// in-tree CompositePodGroup (a job of several roles) marks that composite and the in-tree composites
// under it instead (see disruptComposites). Groups of ours, and a nil Updater, take no note.
func (u *Updater) Disrupted(victim *v1.Pod, msg string) {
	name, ok := podgroup.UnitOf(victim)
	if u != nil && ok && strings.HasPrefix(name, tree.InTreeCompositePrefix) {
		// A job of several roles, preempted whole: its in-tree composites say so.
		u.disruptComposites(victim.Namespace, name, msg)
		return
	}
	if _, inTree := podgroup.InTreeName(name); u == nil || !ok || !inTree {
		return
	}
	key := podgroup.Key(victim.Namespace, name)
	u.mu.Lock()
	u.disrupted[key] = msg
	u.mu.Unlock()
	u.Enqueue(key)
}

// syncInTree writes an in-tree group's conditions (see InTreeConditions), from our status of it
// computed over the status kept in memory.
func (u *Updater) syncInTree(ctx context.Context, key string, pg *v1alpha1.PodGroup, pods []*v1.Pod, now time.Time) error {
	u.mu.Lock()
	own, disruption := pg.DeepCopy(), u.disrupted[key]
	own.Status = u.inTree[key]
	u.mu.Unlock()
	if len(pods) == 0 && disruption == "" {
		// No member of this profile (another scheduler's group, or all gone): nothing to say, and
		// nothing kept of it.
		u.forgetInTree(key)
		u.setBelowQuorum(key, false)
		return nil
	}
	want := ComputeStatus(own, pods, u.attempt(key), now)
	u.followBelowQuorum(key, pg, want, now)
	u.mu.Lock()
	u.inTree[key] = want
	u.mu.Unlock()
	conds := InTreeConditions(pg.Status.Conditions, want, disruption, pg.Generation, now)
	if len(conds) == 0 {
		return nil
	}
	// A strategic merge patch merges conditions by type: other writers' conditions stay.
	patch, err := json.Marshal(map[string]any{"status": map[string]any{"conditions": conds}})
	if err != nil {
		return err
	}
	name, _ := podgroup.InTreeName(pg.Name)
	if _, err := u.kube.SchedulingV1beta1().PodGroups(pg.Namespace).Patch(ctx, name, types.StrategicMergePatchType, patch, metav1.PatchOptions{}, "status"); err != nil {
		return fmt.Errorf("patching the status of PodGroup %s/%s (%s): %w", pg.Namespace, name, podgroup.InTreeGroupVersion, err)
	}
	statusUpdates.WithLabelValues(u.profile, "success").Inc()
	return nil
}

// forgetInTree drops what is kept in memory of a group that is gone.
func (u *Updater) forgetInTree(key string) {
	u.mu.Lock()
	delete(u.inTree, key)
	delete(u.disrupted, key)
	u.mu.Unlock()
}
