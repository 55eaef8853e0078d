package status

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"time"

	schedulingv1alpha3 "k8s.io/api/scheduling/v1alpha3"
	schedulingv1beta1 "k8s.io/api/scheduling/v1beta1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"

	"github.com/custom-scheduler/custom-scheduler/pkg/apis/scheduling/v1alpha1"
	"github.com/custom-scheduler/custom-scheduler/pkg/coscheduling/podgroup"
	"github.com/custom-scheduler/custom-scheduler/pkg/coscheduling/tree"
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

// writesComposites: the in-tree CompositePodGroups are served, and their conditions written.
func (u *Updater) writesComposites() bool { return u.composites != nil && u.trees != nil }

// enqueueComposite queues the in-tree CompositePodGroup obj (a tombstone's too) as the plugin keys it.
func (u *Updater) enqueueComposite(obj interface{}) {
	if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = tomb.Obj
	}
	if c, ok := obj.(*schedulingv1alpha3.CompositePodGroup); ok {
		u.Enqueue(podgroup.Key(c.Namespace, tree.InTreeCompositePrefix+c.Name))
	}
}

// syncComposite writes the conditions of the in-tree CompositePodGroup namespace/name (see
// CompositeConditions), from our status of it computed over its in-tree children's. Like a composite
// of ours, it is written by the profile whose pods are under it (or that preempted it); another
// profile's updater leaves it alone.
func (u *Updater) syncComposite(ctx context.Context, namespace, name string, now time.Time) error {
	key := podgroup.Key(namespace, tree.InTreeCompositePrefix+name)
	if !u.writesComposites() {
		return nil
	}
	obj, exists, err := u.composites.GetStore().GetByKey(namespace + "/" + name)
	c, _ := obj.(*schedulingv1alpha3.CompositePodGroup)
	if err != nil || !exists || c == nil || c.DeletionTimestamp != nil {
		u.forgetInTree(key)
		return err
	}
	n := tree.FromComposite(c)
	if n.Parent != "" {
		u.Enqueue(podgroup.Key(namespace, n.Parent)) // its composite's status follows from this one's
	}
	st, unsched, ours, err := u.compositeStatus(n, c.Generation, now, 0)
	if err != nil {
		return err
	}
	u.mu.Lock()
	disruption := u.disrupted[key]
	u.mu.Unlock()
	if !ours && disruption == "" {
		return nil
	}
	s := CompositeState{Status: st, Unschedulable: unsched, Disruption: disruption}
	if _, p := u.trees.Resolve(namespace, n.Name); p != nil && p.Reason == tree.ReasonInvalidTree {
		s.Invalid = p.Message
	}
	conds := CompositeConditions(c.Status.Conditions, s, c.Generation, now)
	if len(conds) == 0 {
		return nil
	}
	// A strategic merge patch merges conditions by type: other writers' conditions stay.
	patch, err := json.Marshal(map[string]any{"status": map[string]any{"conditions": conds}})
	if err != nil {
		return err
	}
	if _, err := u.kube.SchedulingV1alpha3().CompositePodGroups(namespace).Patch(ctx, name, types.StrategicMergePatchType, patch, metav1.PatchOptions{}, "status"); err != nil {
		return fmt.Errorf("patching the status of CompositePodGroup %s/%s (%s): %w", namespace, name, schedulingv1alpha3.SchemeGroupVersion, err)
	}
	statusUpdates.WithLabelValues(u.profile, "success").Inc()
	return nil
}

// compositeStatus is our status of the in-tree composite n (ComputeComposite's, over its in-tree
// children's, at most tree.MaxDepth composites down) with why it cannot be whole (see
// Unschedulable); ours says whether a pod of this profile is under it.
func (u *Updater) compositeStatus(n tree.Node, generation int64, now time.Time, depth int) (st v1alpha1.PodGroupStatus, unsched string, ours bool, err error) {
	var kids []Child
	for _, c := range u.trees.Children(n.Namespace, n.Name) {
		if !c.InTree() || c.Composite && depth >= tree.MaxDepth {
			continue
		}
		kid, mine := Child{Name: inTreeBareName(c.Name), Min: c.Min}, false
		if c.Composite {
			kid.Status, kid.Unschedulable, mine, err = u.compositeStatus(c, 0, now, depth+1)
		} else if pg := u.podGroups.Get(c.Namespace, c.Name); pg != nil {
			kid.Status, mine, err = u.statusOf(pg, now, depth+1)
		} else {
			continue
		}
		if err != nil {
			return st, "", false, err
		}
		ours = ours || mine
		kids = append(kids, kid)
	}
	pg := &v1alpha1.PodGroup{ObjectMeta: metav1.ObjectMeta{Namespace: n.Namespace, Name: n.Name, Generation: generation}}
	return ComputeComposite(pg, n.Min, kids, now), Unschedulable(n.Min, kids), ours, nil
}

// inTreeBareName is an in-tree object's name without the prefix the plugin knows it by.
func inTreeBareName(name string) string {
	if bare, ok := podgroup.InTreeName(name); ok {
		return bare
	}
	return strings.TrimPrefix(name, tree.InTreeCompositePrefix)
}

// disruptComposites records that the in-tree composite unit (as the plugin names it) is being
// preempted whole, with every in-tree composite and PodGroup under it, for their DisruptionTarget
// condition.
func (u *Updater) disruptComposites(namespace, unit, msg string) {
	if !u.writesComposites() {
		return
	}
	var keys []string
	seen := map[string]bool{}
	var walk func(name string, depth int)
	walk = func(name string, depth int) {
		key := podgroup.Key(namespace, name)
		if seen[key] || depth > tree.MaxDepth {
			return
		}
		seen[key] = true
		keys = append(keys, key)
		for _, c := range u.trees.Children(namespace, name) {
			switch {
			case c.Composite && c.InTree():
				walk(c.Name, depth+1)
			case c.InTree() && !seen[c.Key()]:
				// An in-tree PodGroup of the job: its own DisruptionTarget (see syncInTree).
				seen[c.Key()] = true
				keys = append(keys, c.Key())
			}
		}
	}
	walk(unit, 0)
	u.mu.Lock()
	for _, key := range keys {
		u.disrupted[key] = msg
	}
	u.mu.Unlock()
	for _, key := range keys {
		u.Enqueue(key)
	}
}
