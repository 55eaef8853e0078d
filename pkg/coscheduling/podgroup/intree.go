package podgroup

import (
	"fmt"
	"strings"
	"sync"
	"sync/atomic"

	v1 "k8s.io/api/core/v1"
	schedulingv1beta1 "k8s.io/api/scheduling/v1beta1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/custom-scheduler/custom-scheduler/pkg/apis/scheduling/v1alpha1"
	"github.com/custom-scheduler/custom-scheduler/pkg/coscheduling/tree"
)

// The second gang source: the in-tree PodGroups of scheduling.k8s.io/v1beta1, which a pod joins with
// spec.schedulingGroup.podGroupName. The plugin knows a group by a name; an in-tree group's name is
// InTreePrefix and the PodGroup's name (kubectl's spelling of the object, and no PodGroup of ours can
// be named so: a name has no "/"), and FromInTree turns the in-tree object into the PodGroup the
// plugin decides over (pgcache converts as it reads the informer's store and hands its events on).
// Everything between the informer and the API writes is the same for both.

// InTreePrefix starts the group name of an in-tree PodGroup.
const InTreePrefix = "podgroups.scheduling.k8s.io/"

// InTreeGroupVersion is the API the in-tree PodGroups are read from and written to.
var InTreeGroupVersion = schedulingv1beta1.SchemeGroupVersion

// InTreeEventResource names the in-tree PodGroups' events in EventsToRegister, as a dynamic
// informer's resource (the scheduler's own name for them, fwk.PodGroup, reaches plugins only with
// its GenericWorkload gate).
const InTreeEventResource = "podgroups.v1beta1.scheduling.k8s.io"

// InTreeName returns the name of the in-tree PodGroup a group name stands for, if it stands for one.
func InTreeName(group string) (string, bool) { return strings.CutPrefix(group, InTreePrefix) }

// IsInTree reports whether pg was read from the in-tree API (see FromInTree).
func IsInTree(pg *v1alpha1.PodGroup) bool { return pg.APIVersion == InTreeGroupVersion.String() }

// inTreeRead is whether this process reads the in-tree PodGroups (see SetInTreeRead).
var inTreeRead atomic.Bool

// SetInTreeRead says whether this process reads the in-tree PodGroups: the plugin's setup says so
// once discovery finds them served. Until then spec.schedulingGroup names no gang, so where the API
// is not served a pod that sets it anyway (an apiserver with the gate on and the API off) is placed
// on its own, as it was before this source existed, rather than waiting for a PodGroup nobody reads.
func SetInTreeRead(read bool) { inTreeRead.Store(read) }

// schedulingGroup returns the in-tree PodGroup a pod names in spec.schedulingGroup, while they are
// read.
func schedulingGroup(pod *v1.Pod) (string, bool) {
	if sg := pod.Spec.SchedulingGroup; inTreeRead.Load() && sg != nil && sg.PodGroupName != nil && *sg.PodGroupName != "" {
		return *sg.PodGroupName, true
	}
	return "", false
}

// Conflicting reports whether a pod names two gangs: a PodGroup of ours by its label and an in-tree
// one in spec.schedulingGroup. The label wins (Of): it is what the pod's author wrote to join our
// gang, while spec.schedulingGroup may be a controller's: the Job controller, with the WorkloadWithJob
// gate, gives every new Job's pods a basic (not a gang) in-tree PodGroup of its own. Refusing such
// pods would stop every labelled Job on those clusters. The pod gets a warning (ReasonTwoPodGroups).
func Conflicting(pod *v1.Pod) bool {
	_, inTree := schedulingGroup(pod)
	return inTree && pod.Labels[v1alpha1.PodGroupLabel] != ""
}

// ReasonTwoPodGroups (pod, Warning): the pod names a PodGroup of ours by its label and an in-tree one
// in spec.schedulingGroup; the label's is its gang.
const ReasonTwoPodGroups = "TwoPodGroups"

// TwoPodGroupsMessage says which gang a Conflicting pod is in, and why.
func TwoPodGroupsMessage(pod *v1.Pod) string {
	inTree, _ := schedulingGroup(pod)
	return fmt.Sprintf("the pod names two gangs: PodGroup %q (%s) by its label %s, and PodGroup %q (%s) in spec.schedulingGroup; "+
		"it is scheduled as a member of the first, and the second's policy does not apply",
		pod.Labels[v1alpha1.PodGroupLabel], v1alpha1.SchemeGroupVersion, v1alpha1.PodGroupLabel, inTree, InTreeGroupVersion)
}

// Annotations of a PodGroup read from the in-tree API, for what our PodGroup type has no field for.
const (
	// AnnotationDisruptionMode carries spec.disruptionMode ("All" or "Single").
	AnnotationDisruptionMode = v1alpha1.GroupName + "/in-tree-disruption-mode"
	// AnnotationPolicy carries spec.schedulingPolicy's kind ("Gang" or "Basic").
	AnnotationPolicy = v1alpha1.GroupName + "/in-tree-policy"
)

// TreeNode is a PodGroup's node in its job's tree (see tree.FromPodGroup), for both APIs: its
// minMember, and whether it is a gang (an in-tree group with a basic policy is not).
func TreeNode(pg *v1alpha1.PodGroup) tree.Node {
	return tree.FromPodGroup(pg, MinMember(pg), pg.Annotations[AnnotationPolicy] != "Basic")
}

// FromInTree is the PodGroup the plugin decides over for an in-tree PodGroup:
//   - name: InTreePrefix + its name; uid, generation, creation and deletion as they are;
//   - minMember: schedulingPolicy.gang.minCount; a basic policy (no gang) is minMember 1, so that
//     each member is placed on its own;
//   - topologyPolicy.required: schedulingConstraints.topology's key (v1beta1 allows one);
//   - the conditions: its own (PodGroupInitiallyScheduled, DisruptionTarget);
//   - disruptionMode and the policy's kind as annotations (AnnotationDisruptionMode, AnnotationPolicy);
//   - spec.parentCompositePodGroupName as tree.AnnotationParent (see tree.InTreeParent).
//
// What the in-tree API cannot say (scheduleTimeoutSeconds, minResources, preferred levels) is left
// unset, so the plugin's args and the members' annotations decide it, as for a PodGroup of ours
// without those fields.
func FromInTree(in *schedulingv1beta1.PodGroup) *v1alpha1.PodGroup {
	pg := &v1alpha1.PodGroup{
		TypeMeta: metav1.TypeMeta{APIVersion: InTreeGroupVersion.String(), Kind: "PodGroup"},
		ObjectMeta: metav1.ObjectMeta{
			Namespace: in.Namespace, Name: InTreePrefix + in.Name, UID: in.UID, Generation: in.Generation,
			ResourceVersion: in.ResourceVersion, CreationTimestamp: in.CreationTimestamp,
			DeletionTimestamp: in.DeletionTimestamp, Labels: in.Labels,
		},
	}
	annotations := make(map[string]string, len(in.Annotations)+2)
	for k, v := range in.Annotations {
		annotations[k] = v
	}
	pg.Spec.MinMember = 1
	annotations[AnnotationPolicy] = "Basic"
	if g := in.Spec.SchedulingPolicy.Gang; g != nil {
		pg.Spec.MinMember = max(g.MinCount, 1)
		annotations[AnnotationPolicy] = "Gang"
	}
	if c := in.Spec.SchedulingConstraints; c != nil && len(c.Topology) > 0 && c.Topology[0].Key != "" {
		pg.Spec.TopologyPolicy = &v1alpha1.TopologyPolicy{Required: v1alpha1.TopologyKey(c.Topology[0].Key)}
	}
	if parent := tree.InTreeParent(in.Spec.ParentCompositePodGroupName); parent != "" {
		annotations[tree.AnnotationParent] = parent
	}
	annotations[AnnotationDisruptionMode] = "Single"
	if d := in.Spec.DisruptionMode; d != nil && d.All != nil {
		annotations[AnnotationDisruptionMode] = "All"
	}
	pg.Annotations = annotations
	pg.Status.Conditions = in.Status.Conditions
	return pg
}

// inTreeUnits holds the key of every in-tree group whose members are preempted together (see
// UnitOf), kept by the in-tree informer's handler (TrackInTreeUnit).
var inTreeUnits sync.Map

// TrackInTreeUnit records whether an in-tree group (as FromInTree made it) is one unit of preemption:
// a gang (its members go together, never leaving it below its quorum, whatever its disruptionMode), or
// a basic group with disruptionMode All. A basic group with disruptionMode Single (the in-tree
// defaults, which the Job controller gives every Job) lets its members go one by one. gone forgets it.
func TrackInTreeUnit(pg *v1alpha1.PodGroup, gone bool) {
	key := Key(pg.Namespace, pg.Name)
	if !gone && (pg.Annotations[AnnotationPolicy] == "Gang" || pg.Annotations[AnnotationDisruptionMode] == "All") {
		inTreeUnits.Store(key, struct{}{})
		return
	}
	inTreeUnits.Delete(key)
}

// treeUnit finds the composite whose tree is evicted whole with a group (see SetTreeUnits).
var treeUnit atomic.Pointer[func(namespace, name string) (string, bool)]

// SetTreeUnits tells UnitOf where the jobs of several roles are (tree.Index.Unit): a group under a
// gang composite is evicted with the composite's whole tree.
func SetTreeUnits(unit func(namespace, name string) (string, bool)) {
	if unit == nil {
		treeUnit.Store(nil)
		return
	}
	treeUnit.Store(&unit)
}

// UnitOf is the group whose members preemption evicts together with pod: the composite whose tree
// it is part of (see SetTreeUnits); else the group Of names, if it is ours, or an in-tree one
// TrackInTreeUnit recorded as a unit. Any other pod is a victim of its own.
func UnitOf(pod *v1.Pod) (string, bool) {
	name, ok := Of(pod)
	if f := treeUnit.Load(); ok && f != nil {
		if unit, in := (*f)(pod.Namespace, name); in {
			return unit, true
		}
	}
	if _, inTree := InTreeName(name); ok && inTree {
		_, ok = inTreeUnits.Load(Key(pod.Namespace, name))
	}
	return name, ok
}
