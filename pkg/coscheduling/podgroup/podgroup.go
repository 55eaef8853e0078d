// Package podgroup is what the gang plugin and its status writer share about PodGroups: which pods
// are members of which group, the keys and the pod index that find a group's members, and a reader of
// PodGroups from an informer's store. Its only state is what the in-tree source needs process-wide
// (whether it is read, which in-tree groups are units of preemption; see intree.go).
package podgroup

import (
	"fmt"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/custom-scheduler/custom-scheduler/pkg/apis/scheduling/v1alpha1"
)

// IndexName names the index of the scheduler's pod informer by MemberKey (see LiveIndexFunc), and of
// the status writer's informer of finished pods by Key (see IndexFunc).
const IndexName = "custom-scheduler/live-pod-group"

// Of returns the group a pod belongs to: the PodGroup its label names, else the in-tree PodGroup its
// spec.schedulingGroup names (as InTreePrefix and the name, see intree.go), else its LeaderWorkerSet
// replica's (see lws.go). The label wins over spec.schedulingGroup (see Conflicting).
func Of(pod *v1.Pod) (string, bool) {
	if name := pod.Labels[v1alpha1.PodGroupLabel]; name != "" {
		return name, true
	}
	if inTree, ok := schedulingGroup(pod); ok {
		return InTreePrefix + inTree, true
	}
	return LWSGroup(pod)
}

// Labelled reports whether pod (nil: not a pod) carries the PodGroup label, even an empty one.
func Labelled(pod *v1.Pod) bool {
	if pod == nil {
		return false
	}
	_, ok := pod.Labels[v1alpha1.PodGroupLabel]
	return ok
}

// InGang reports whether pod (nil: not a pod) names a gang in either way, even an empty or a
// conflicting one: what keeps it beside its siblings in the queue.
func InGang(pod *v1.Pod) bool {
	if pod == nil {
		return false
	}
	_, inTree := schedulingGroup(pod)
	_, lws := LWSGroup(pod)
	return inTree || lws || Labelled(pod)
}

// SpecChanged reports whether a PodGroup event (objects typed or unstructured, of either source)
// concerns the group namespace/name and creates it or changes its spec (its generation, or its UID: recreated).
// Status-only updates change nothing.
func SpecChanged(namespace, name string, oldObj, newObj interface{}) (bool, error) {
	obj, err := meta.Accessor(newObj)
	if err != nil {
		return false, fmt.Errorf("reading a PodGroup event: %w", err)
	}
	api, bare := v1alpha1.SchemeGroupVersion.String(), name
	if inTree, ok := InTreeName(name); ok {
		api, bare = InTreeGroupVersion.String(), inTree
	}
	if t, err := meta.TypeAccessor(newObj); err == nil && t.GetAPIVersion() != "" && t.GetAPIVersion() != api {
		return false, nil // the other source's PodGroup of the name
	}
	if obj.GetNamespace() != namespace || (obj.GetName() != bare && obj.GetName() != name) {
		return false, nil
	}
	if oldObj != nil {
		if old, err := meta.Accessor(oldObj); err == nil && old.GetUID() == obj.GetUID() && old.GetGeneration() == obj.GetGeneration() &&
			sameSpec(oldObj, newObj) {
			return false, nil
		}
	}
	return true, nil
}

// SpecChangeHint is the queueing hint of a PodGroup event for a member pod: it requeues the members
// of a PodGroup that was created or whose spec changed (see SpecChanged); status-only updates, such
// as the plugin's own status patches, requeue nobody. The objects come from the scheduler's dynamic
// informer (unstructured) or a typed one.
func SpecChangeHint(_ klog.Logger, pod *v1.Pod, oldObj, newObj interface{}) (fwk.QueueingHint, error) {
	name, ok := Of(pod)
	if !ok {
		return fwk.QueueSkip, nil
	}
	if changed, err := SpecChanged(pod.Namespace, name, oldObj, newObj); err != nil || changed {
		return fwk.Queue, err
	}
	return fwk.QueueSkip, nil
}

// sameSpec reports whether two unstructured objects have the same spec (the in-tree API keeps the
// generation when the spec changes); typed objects are left to their generation.
func sameSpec(oldObj, newObj interface{}) bool {
	o, ok1 := oldObj.(*unstructured.Unstructured)
	n, ok2 := newObj.(*unstructured.Unstructured)
	return !ok1 || !ok2 || equality.Semantic.DeepEqual(o.Object["spec"], n.Object["spec"])
}

// Key is a group's "namespace/name".
func Key(namespace, name string) string { return namespace + "/" + name }

// MemberKey is the live-member index key of a group for one scheduler profile.
func MemberKey(profile, namespace, group string) string {
	return profile + "|" + Key(namespace, group)
}

// IsLive reports whether a pod can count toward a quorum: not being deleted and not finished.
func IsLive(pod *v1.Pod) bool {
	return pod.DeletionTimestamp == nil && pod.Status.Phase != v1.PodSucceeded && pod.Status.Phase != v1.PodFailed
}

// IsMember reports whether a pod counts as a member of its group: live and not gated.
func IsMember(pod *v1.Pod) bool { return IsLive(pod) && len(pod.Spec.SchedulingGates) == 0 }

// HeldReservation is pg's Reserved condition when it is True (nil otherwise): a reservation a leader
// held, which this process adopts when it did not see the gang try.
func HeldReservation(pg *v1alpha1.PodGroup) *metav1.Condition {
	if c := meta.FindStatusCondition(pg.Status.Conditions, ConditionReserved); c != nil && c.Status == metav1.ConditionTrue {
		return c
	}
	return nil
}

// MinMember is the PodGroup's quorum (at least 1).
func MinMember(pg *v1alpha1.PodGroup) int {
	if pg.Spec.MinMember < 1 {
		return 1
	}
	return int(pg.Spec.MinMember)
}

// MaxScheduleTimeout is the longest a member may wait at Permit: the framework's limit.
const MaxScheduleTimeout = 15 * time.Minute

// ScheduleTimeout is how long the PodGroup's members wait at Permit for the quorum: its
// spec.scheduleTimeoutSeconds, else def, capped at MaxScheduleTimeout.
func ScheduleTimeout(pg *v1alpha1.PodGroup, def time.Duration) time.Duration {
	if s := pg.Spec.ScheduleTimeoutSeconds; s != nil && *s > 0 {
		def = time.Duration(*s) * time.Second
	}
	return min(def, MaxScheduleTimeout)
}

// IndexFunc indexes a pod with the PodGroup label by Key, whatever its state.
func IndexFunc(obj interface{}) ([]string, error) {
	pod, ok := obj.(*v1.Pod)
	if !ok {
		return nil, nil
	}
	name, ok := Of(pod)
	if !ok {
		return nil, nil
	}
	return []string{Key(pod.Namespace, name)}, nil
}

// LiveIndexFunc indexes a pod by MemberKey (its scheduler, "namespace/podgroup") while it is a member:
// live (a pod that is being deleted or has finished leaves the index with the update that says so) and
// without scheduling gates (a gated pod, e.g. one Kueue has not admitted yet, joins with the update
// that removes its last gate). The index therefore holds exactly the members that count.
func LiveIndexFunc(obj interface{}) ([]string, error) {
	pod, ok := obj.(*v1.Pod)
	if !ok || !IsMember(pod) {
		return nil, nil
	}
	name, ok := Of(pod)
	if !ok {
		return nil, nil
	}
	return []string{MemberKey(pod.Spec.SchedulerName, pod.Namespace, name)}, nil
}

// Ref refers to a PodGroup in events (the event recorder's scheme does not know the PodGroup type):
// ours, or the in-tree object FromInTree read.
func Ref(pg *v1alpha1.PodGroup) *v1.ObjectReference {
	ref := &v1.ObjectReference{
		APIVersion: v1alpha1.SchemeGroupVersion.String(), Kind: "PodGroup",
		Namespace: pg.Namespace, Name: pg.Name, UID: pg.UID, ResourceVersion: pg.ResourceVersion,
	}
	if name, ok := InTreeName(pg.Name); ok && IsInTree(pg) {
		ref.APIVersion, ref.Name = InTreeGroupVersion.String(), name
	}
	return ref
}

// What counts toward a gang's quorum (docs/coscheduling/quorum.md, "What counts toward the quorum"): the
// pods of the profile's own scheduler only; live members bound or reserved; and, by the
// finished-member rule, the members of the run in progress that left by succeeding. A run is the pods
// of one controller (the Job, the operator's object; pods without a controller are one run), and it is
// in progress while one of its live members is bound to a node: a gang that reached its quorum keeps
// it while members of its run finish successfully, so the replacement of a member that failed is
// placed with the running ones and the succeeded ones. Once no live member of the run is bound, the run
// has ended: what its members succeeded at counts for nothing, and the pods that come next (the next
// wave of an indexed Job, bare pods run again, a PodGroup deleted and recreated) are a new run,
// placed whole. A member reserved but not yet bound never puts a run in progress: the first member of
// a new run is reserved on the strength of its own quorum. Failed and deleted pods never count. The
// scheduler counts these pods per run (pgcache.Finished, and pgcache.Members.BoundInRun for whether
// the run is in progress) and the status writer from the group's pods (RunCredit); both ask
// SucceededMember of each pod and RunInProgress of the run.

// RunInProgress is the finished-member rule's test of a run: its succeeded members count toward the
// quorum only while boundLive (its live members bound to a node) is above 0.
func RunInProgress(boundLive int) bool { return boundLive > 0 }

// Run is the run a pod belongs to: the UID of its controller, empty for a pod without one.
func Run(pod *v1.Pod) types.UID {
	for i := range pod.OwnerReferences {
		if r := &pod.OwnerReferences[i]; r.Controller != nil && *r.Controller {
			return r.UID
		}
	}
	return ""
}

// SucceededMember reports whether pod counts toward its group's quorum for profile by the
// finished-member rule, and its run: a pod of profile's scheduler that ran (it has a node), succeeded
// and is not being deleted. The group is the caller's to check (Of).
func SucceededMember(pod *v1.Pod, profile string) (types.UID, bool) {
	if pod.Spec.SchedulerName != profile || pod.Status.Phase != v1.PodSucceeded || pod.DeletionTimestamp != nil || pod.Spec.NodeName == "" {
		return "", false
	}
	return Run(pod), true
}

// RunCredit is the finished-member rule over a group's pods of one profile, as the status counts it:
// the succeeded members (SucceededMember) of a run in progress (RunInProgress: one of its live pods is
// bound; for several such runs, the one with the most succeeded members). With live pods but no run in
// progress, nothing counts: those pods are a new run. With no live pod left, the run that finished last
// is taken to be the one with the most succeeded members, counting only the pods created at or after
// since (the PodGroup's creation; zero: all), so that a PodGroup recreated after its run ended does
// not report that run as its own.
func RunCredit(pods []*v1.Pod, profile string, since time.Time) int {
	// succeeded counts each run's succeeded members, sinceCreated those created at or after since,
	// bound its live members bound.
	succeeded, sinceCreated, bound := map[types.UID]int{}, map[types.UID]int{}, map[types.UID]int{}
	anyLive := false
	for _, p := range pods {
		if run, ok := SucceededMember(p, profile); ok {
			succeeded[run]++
			if !p.CreationTimestamp.Time.Before(since) {
				sinceCreated[run]++
			}
		} else if p.Spec.SchedulerName == profile && IsLive(p) {
			anyLive = true
			if p.Spec.NodeName != "" {
				bound[Run(p)]++
			}
		}
	}
	credit := 0
	if anyLive {
		for run, n := range bound {
			if RunInProgress(n) {
				credit = max(credit, succeeded[run])
			}
		}
		return credit
	}
	for _, n := range sinceCreated {
		credit = max(credit, n)
	}
	return credit
}
