package podgroup

import (
	"errors"
	"fmt"
	"maps"
	"strconv"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/custom-scheduler/custom-scheduler/pkg/apis/scheduling/v1alpha1"
	"github.com/custom-scheduler/custom-scheduler/pkg/coscheduling/tree"
)

// The third gang source: LeaderWorkerSet's replica groups. LWS (leaderworkerset.x-k8s.io) makes, per
// replica, a leader pod and size-1 worker pods, and writes on every one of them the set's name and the
// replica's index (labels) and the replica's size (an annotation). A pod that carries them and no
// PodGroup label is a member of the group named after its replica's leader pod (LWSGroup): the set's
// name and the replica's index. The scheduler makes that PodGroup (LWSPodGroups, pkg/coscheduling/lws),
// of minMember size, owned by the leader pod, so it lives as long as the replica; the user writes none.
// When the pods also carry tree.AnnotationMinGroupCount (the user puts it on the LWS's templates), the
// replica groups are the children of a gang composite named after the set: at least that many
// replicas must be whole together (K of N). The annotation AnnotationLWSGang "false" opts out: the
// pods are placed one by one, as before.

// The keys LWS writes on its pods (sigs.k8s.io/lws/api/leaderworkerset/v1).
const (
	LWSNameLabel       = "leaderworkerset.sigs.k8s.io/name"
	LWSGroupIndexLabel = "leaderworkerset.sigs.k8s.io/group-index"
	LWSWorkerIndex     = "leaderworkerset.sigs.k8s.io/worker-index"
	LWSSizeAnnotation  = "leaderworkerset.sigs.k8s.io/size"
)

// AnnotationLWSGang "false" on a LeaderWorkerSet's pods keeps its replica groups out of gangs.
const AnnotationLWSGang = v1alpha1.GroupName + "/leaderworkerset-gang"

// LabelManagedBy marks the PodGroups the scheduler made for LeaderWorkerSets (value ManagedBy).
const (
	LabelManagedBy = "app.kubernetes.io/managed-by"
	ManagedBy      = "custom-scheduler"
)

// LWSGroup returns the group of a LeaderWorkerSet's pod: its replica's leader pod's name, the set's
// name and the replica's index. False for a pod that is not one, or opts out.
func LWSGroup(pod *v1.Pod) (string, bool) {
	set, index := pod.Labels[LWSNameLabel], pod.Labels[LWSGroupIndexLabel]
	if set == "" || index == "" || pod.Annotations[LWSSizeAnnotation] == "" || pod.Annotations[AnnotationLWSGang] == "false" {
		return "", false
	}
	return set + "-" + index, true
}

// LWSLeader reports whether pod is the leader of its LeaderWorkerSet replica (worker index 0).
func LWSLeader(pod *v1.Pod) bool { return pod.Labels[LWSWorkerIndex] == "0" }

// LWSPodGroups returns the PodGroups a LeaderWorkerSet's leader pod stands for: its replica's group
// (minMember the replica's size, owned by the leader pod) and, when the pod asks for K of N, the set's
// gang composite (owned by the leader pod's controller, the set's leader StatefulSet, which lives as
// long as the set). An error says what on the pod is malformed.
func LWSPodGroups(leader *v1.Pod) (group, composite *v1alpha1.PodGroup, err error) {
	name, ok := LWSGroup(leader)
	if !ok || !LWSLeader(leader) {
		return nil, nil, fmt.Errorf("pod %s/%s is not the leader of a LeaderWorkerSet replica", leader.Namespace, leader.Name)
	}
	size, err := strconv.Atoi(leader.Annotations[LWSSizeAnnotation])
	if err != nil || size < 1 {
		return nil, nil, fmt.Errorf("annotation %s is %q: want a whole number of at least 1", LWSSizeAnnotation, leader.Annotations[LWSSizeAnnotation])
	}
	labels := map[string]string{LabelManagedBy: ManagedBy, LWSNameLabel: leader.Labels[LWSNameLabel]}
	groupLabels := maps.Clone(labels)
	groupLabels[LWSGroupIndexLabel] = leader.Labels[LWSGroupIndexLabel]
	group = &v1alpha1.PodGroup{
		ObjectMeta: metav1.ObjectMeta{Namespace: leader.Namespace, Name: name, Labels: groupLabels,
			OwnerReferences: []metav1.OwnerReference{ownedBy(v1.SchemeGroupVersion.String(), "Pod", leader.Name, leader.UID)}},
		Spec: v1alpha1.PodGroupSpec{MinMember: int32(size)},
	}
	count, ok := leader.Annotations[tree.AnnotationMinGroupCount]
	if !ok {
		return group, nil, nil
	}
	ref := metav1.GetControllerOf(leader)
	if ref == nil {
		return nil, nil, fmt.Errorf("pod %s/%s has no controller to own its LeaderWorkerSet's composite group", leader.Namespace, leader.Name)
	}
	set := leader.Labels[LWSNameLabel]
	group.Annotations = map[string]string{tree.AnnotationParent: set}
	composite = &v1alpha1.PodGroup{
		ObjectMeta: metav1.ObjectMeta{Namespace: leader.Namespace, Name: set, Labels: labels,
			Annotations:     map[string]string{tree.AnnotationMinGroupCount: count},
			OwnerReferences: []metav1.OwnerReference{ownedBy(ref.APIVersion, ref.Kind, ref.Name, ref.UID)}},
		Spec: v1alpha1.PodGroupSpec{MinMember: 1},
	}
	// The composite's annotations are read as any PodGroup's (tree.FromPodGroup), and so checked.
	if n := tree.FromPodGroup(composite, 1, true); n.Invalid != "" {
		return nil, nil, errors.New(n.Invalid)
	}
	return group, composite, nil
}

func ownedBy(apiVersion, kind, name string, uid types.UID) metav1.OwnerReference {
	// Not BlockOwnerDeletion: setting it needs the right to update the owner's finalizers, which the
	// scheduler does not have (and needs not: nothing waits for these PodGroups to go).
	t := true
	return metav1.OwnerReference{APIVersion: apiVersion, Kind: kind, Name: name, UID: uid, Controller: &t}
}
