package pgcache

import (
	"fmt"
	"strings"

	v1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/custom-scheduler/custom-scheduler/pkg/coscheduling/podgroup"
	"github.com/custom-scheduler/custom-scheduler/pkg/coscheduling/tree"
)

// Pods are one scheduler profile's gang members: listed from the scheduler's pod store (Store,
// indexed by podgroup.IndexName, which holds live, ungated pods only) and counted in O(1) (Counts, see
// Members).
type Pods struct {
	Store   cache.Indexer
	Counts  *Members
	Profile string
}

// InGroup lists the group's members from the pod store. O(members).
func (p Pods) InGroup(namespace, name string) []*v1.Pod {
	objs, err := p.Store.ByIndex(podgroup.IndexName, podgroup.MemberKey(p.Profile, namespace, name))
	if err != nil {
		return nil
	}
	out := make([]*v1.Pod, 0, len(objs))
	for _, o := range objs {
		if pod, ok := o.(*v1.Pod); ok {
			out = append(out, pod)
		}
	}
	return out
}

// InGroupKey lists the members of the group of key (namespace/name, see podgroup.Key) from the pod
// store. O(members).
func (p Pods) InGroupKey(key string) []*v1.Pod {
	namespace, name, _ := strings.Cut(key, "/")
	return p.InGroup(namespace, name)
}

// InGroupAnd lists the members of the group namespace/name and then of the groups keyed others (a
// job's reservation's, see InGroupKey) from the pod store. O(members).
func (p Pods) InGroupAnd(namespace, name string, others []string) []*v1.Pod {
	members := p.InGroup(namespace, name)
	for _, key := range others {
		members = append(members, p.InGroupKey(key)...)
	}
	return members
}

// InGroups lists the members of each of groups from the pod store, in order. O(members).
func (p Pods) InGroups(groups []tree.Node) [][]*v1.Pod {
	out := make([][]*v1.Pod, len(groups))
	for i, n := range groups {
		out[i] = p.InGroup(n.Namespace, n.Name)
	}
	return out
}

// Gone reports whether the store no longer holds pod live: deleted, terminating, or another pod under
// its name.
func (p Pods) Gone(pod *v1.Pod) bool {
	obj, ok, err := p.Store.GetByKey(pod.Namespace + "/" + pod.Name)
	if err != nil || !ok {
		return true
	}
	held, isPod := obj.(*v1.Pod)
	return !isPod || held.UID != pod.UID || held.DeletionTimestamp != nil
}

// Count counts the group's members in O(1) (see Members): what the hints and the handlers count. It
// trails the pod store by the pod handler's delay.
func (p Pods) Count(namespace, name string) int { return p.Counts.Count(namespace, name) }

// StoreCount counts the group's members on the pod store's word (O(members)), for the decisions that
// must not trail it: a member held back, and whether an attempt can still reach its quorum.
func (p Pods) StoreCount(namespace, name string) int {
	objs, err := p.Store.ByIndex(podgroup.IndexName, podgroup.MemberKey(p.Profile, namespace, name))
	if err != nil {
		return 0
	}
	return len(objs)
}

// CountUpTo is PreEnqueue's count: O(1) while it reaches want (the common case, and the whole of a
// complete group's activation, which runs under the scheduling queue's lock: listing the group there
// made a 1000-member activation quadratic); below want, the store answers, so that a member held back
// is held back on the store's word and its message counts every member that exists (the queue's own
// handler runs PreEnqueue for a new pod before the plugin's handler may have counted it). A member
// let in on a count that still holds a pod just gone is no risk: the quorum is decided on the store.
func (p Pods) CountUpTo(namespace, name string, want int) int {
	if n := p.Count(namespace, name); n >= want {
		return n
	}
	return p.StoreCount(namespace, name)
}

// ReadyUpTo is PreEnqueue's count of the members whose claims from templates are made (see
// Members.Ready), as CountUpTo counts them: O(1) while it reaches want, and below want on the store's
// word, each member asked (Members.Unmade).
func (p Pods) ReadyUpTo(namespace, name string, want int) int {
	if n := p.Counts.Ready(namespace, name); n >= want {
		return n
	}
	ready := 0
	for _, pod := range p.InGroup(namespace, name) {
		if p.Counts.Unmade == nil || !p.Counts.Unmade(pod) {
			ready++
		}
	}
	return ready
}

// AddIndex adds the live-member index (podgroup.IndexName) to a pod informer, unless another
// profile's instance of the plugin already did.
func AddIndex(informer cache.SharedIndexInformer) error {
	if _, exists := informer.GetIndexer().GetIndexers()[podgroup.IndexName]; exists {
		return nil
	}
	if err := informer.AddIndexers(cache.Indexers{podgroup.IndexName: podgroup.LiveIndexFunc}); err != nil {
		return fmt.Errorf("indexing pods by PodGroup: %w", err)
	}
	return nil
}
