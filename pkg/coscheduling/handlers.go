package coscheduling

import (
	"time"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	"github.com/custom-scheduler/custom-scheduler/pkg/apis/scheduling/v1alpha1"
	"github.com/custom-scheduler/custom-scheduler/pkg/coscheduling/devices"
	"github.com/custom-scheduler/custom-scheduler/pkg/coscheduling/effects"
	"github.com/custom-scheduler/custom-scheduler/pkg/coscheduling/gang"
	"github.com/custom-scheduler/custom-scheduler/pkg/coscheduling/podgroup"
	"github.com/custom-scheduler/custom-scheduler/pkg/coscheduling/podgroup/pgcache"
	resv "github.com/custom-scheduler/custom-scheduler/pkg/coscheduling/reservation"
)

// How often, and for how long at most, a burst of freeing claim events waits for the scheduler's claim
// cache to show it before the members are activated (see devices.Freed).
const (
	claimCachePoll = 20 * time.Millisecond
	claimCacheWait = 5 * time.Second
)

// podEventHandler keeps the quorum counts current from the scheduler's pod informer: a live member
// that is bound counts (also after a restart, from the initial list); a member that is deleted, gets
// a deletionTimestamp or finishes stops counting at once. Pods without the label are filtered out
// before any work.
func (pl *Coscheduling) podEventHandler() cache.ResourceEventHandler {
	return cache.FilteringResourceEventHandler{
		FilterFunc: pgcache.IsGangPod,
		Handler: cache.ResourceEventHandlerFuncs{
			AddFunc: pl.onPodAdd,
			UpdateFunc: func(oldObj, obj interface{}) {
				if old, ok := oldObj.(*v1.Pod); ok && len(old.Spec.SchedulingGates) > 0 {
					// The last gate removed makes the pod a member, as if it had just been created.
					pl.onPodAdd(obj)
					return
				}
				pl.onPodUpdate(obj)
			},
			DeleteFunc: pl.onPodDelete,
		},
	}
}

// onPodAdd also lets a group in when its last missing member appears (bound or not): the member that
// brings the count to minMember activates the members PreEnqueue held back. The scheduler broadcasts
// unscheduled-pod additions to the queue only with the GenericWorkload feature gate, and its hints and
// PreEnqueue may have counted before this handler did (the count is this handler's, see
// pgcache.Members): the activation comes after the count, so a member held back on the old count is
// in the queue's unschedulable pool by then, and PreEnqueue lets it in.
func (pl *Coscheduling) onPodAdd(obj interface{}) {
	grew := pl.onPod(obj)
	pod, ok := obj.(*v1.Pod)
	if !ok || !podgroup.IsMember(pod) || pod.Spec.SchedulerName != pl.profile {
		return
	}
	if podgroup.Conflicting(pod) && pod.Spec.NodeName == "" {
		pl.recorder.Pod(pod, v1.EventTypeWarning, podgroup.ReasonTwoPodGroups, podgroup.TwoPodGroupsMessage(pod))
	}
	name, _ := podgroup.Of(pod)
	pl.activateIfCompleted(pod.Namespace, name, func(minMember int) bool {
		live, ready := pl.members.Count(pod.Namespace, name), pl.members.Counts.Ready(pod.Namespace, name)
		return podgroup.CompletedByAdd(live, ready, pl.credit(pod), minMember, grew)
	})
}

// activateIfCompleted activates the members of group namespace/name when its PodGroup exists and
// completed says a count of now completes it, for the PodGroup's minMember (see podgroup.CompletedBy*).
func (pl *Coscheduling) activateIfCompleted(namespace, name string, completed func(minMember int) bool) {
	if pg := pl.podGroups.Get(namespace, name); pg != nil && completed(podgroup.MinMember(pg)) {
		pl.activateGroup(namespace, name)
	}
}

// onPodUpdate lets a group in when the last of its minMember members gets its claims from templates
// made (the resourceclaim controller records them in the pod's status): PreEnqueue held the others
// back until then (ReasonWaitingForClaims). As in onPodAdd, the activation comes after the count.
func (pl *Coscheduling) onPodUpdate(obj interface{}) {
	if !pl.onPod(obj) {
		return
	}
	pod, ok := obj.(*v1.Pod)
	if !ok || pod.Spec.SchedulerName != pl.profile {
		return
	}
	name, _ := podgroup.Of(pod)
	pl.activateIfCompleted(pod.Namespace, name, func(minMember int) bool {
		return podgroup.CompletedByReady(pl.members.Counts.Ready(pod.Namespace, name), pl.credit(pod), minMember)
	})
}

// finishedEventHandler keeps the count of the members that succeeded (pl.finished) from the status
// writer's informer of finished pods. A count that grows may complete a group whose replacement
// members PreEnqueue held back: they are let in (only then: a group complete without it is not
// listed on every member that finishes).
func (pl *Coscheduling) finishedEventHandler() cache.ResourceEventHandler {
	track := func(obj interface{}) {
		pod, ok := obj.(*v1.Pod)
		if !ok {
			return
		}
		if name, run, grew := pl.finished.Track(pod); grew {
			pl.activateIfCompleted(pod.Namespace, name, func(minMember int) bool {
				return podgroup.CompletedByFinished(pl.members.Count(pod.Namespace, name), pl.finished.Credit(pl.members.Counts, pod.Namespace, name, run), minMember)
			})
		}
	}
	return cache.ResourceEventHandlerFuncs{
		AddFunc:    track,
		UpdateFunc: func(_, obj interface{}) { track(obj) },
		DeleteFunc: func(obj interface{}) {
			if pod, ok := pgcache.Unwrap(obj).(*v1.Pod); ok {
				pl.finished.Forget(pod)
			}
		},
	}
}

// onPod keeps the counts and the gang state of a pod added or updated (see podgroup.ChangeOf). It
// reports whether the pod became a member with its claims made (see pgcache.Members.Track).
func (pl *Coscheduling) onPod(obj interface{}) (ready bool) {
	pod, ok := obj.(*v1.Pod)
	if !ok {
		return false
	}
	ready = pl.members.Counts.Track(pod)
	switch podgroup.ChangeOf(pod, pl.profile) {
	case podgroup.ChangeOther, podgroup.ChangeUnbound:
		return
	case podgroup.ChangeGone:
		pl.forget(pod)
		pl.fit.Forget(pod.UID)
		return
	}
	name, _ := podgroup.Of(pod)
	pg := pl.podGroups.Get(pod.Namespace, name)
	pl.heldBack.Release(pod.UID)
	pl.mu.Lock()
	var g *gang.Gang
	var made bool
	if pg != nil {
		g = pl.gangForLocked(pg)
	} else if g, made = pl.gangs.Bound(pod.Namespace, name); made {
		// A bound member of a group without a PodGroup: counted once the PodGroup exists.
		pl.trackedChangedLocked()
	}
	g.CountBound(pod.UID)
	pl.mu.Unlock()
	pl.stamps.Delete(pod.UID)
	return ready
}

func (pl *Coscheduling) onPodDelete(obj interface{}) {
	pod, ok := pgcache.Unwrap(obj).(*v1.Pod)
	if !ok {
		return
	}
	pl.members.Counts.Forget(pod)
	if pod.Spec.SchedulerName != pl.profile {
		return
	}
	pl.forget(pod)
	// (Its cached request is forgotten by claims.Handler, which sees every pod's delete.)
}

// podGroupEventHandler reacts to PodGroups from this plugin's own informer (PreEnqueue reads this
// informer, so activating from here cannot race with it):
//   - a new PodGroup lets its members in and gets its status;
//   - a spec change (generation) lets the members in again and, when minMember was lowered so that the
//     reserved members now reach it, allows the waiting members at once; status-only updates (the
//     plugin's own patches) change nothing;
//   - a deleted PodGroup (or one being deleted) rejects its waiting members at once, so they release
//     what they hold, and its history is forgotten (a PodGroup recreated under the name starts from
//     nothing); an update to another UID (a relist after a delete and a create) is both (see
//     podgroup.UpdateOf).
func (pl *Coscheduling) podGroupEventHandler() cache.ResourceEventHandler {
	return cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj interface{}) {
			if pg, ok := obj.(*v1alpha1.PodGroup); ok {
				pl.activateGroup(pg.Namespace, pg.Name)
				pl.notifyStatus(podgroup.Key(pg.Namespace, pg.Name))
			}
		},
		UpdateFunc: func(oldObj, newObj interface{}) {
			oldPG, ok1 := oldObj.(*v1alpha1.PodGroup)
			pg, ok2 := newObj.(*v1alpha1.PodGroup)
			if !ok1 || !ok2 {
				return
			}
			switch podgroup.UpdateOf(oldPG, pg) {
			case podgroup.UpdateRecreated:
				pl.onPodGroupDelete(oldPG)
				pl.activateGroup(pg.Namespace, pg.Name)
				pl.notifyStatus(podgroup.Key(pg.Namespace, pg.Name))
			case podgroup.UpdateDeleting:
				pl.onPodGroupDelete(oldPG)
			case podgroup.UpdateSpec:
				pl.onPodGroupSpecChange(pg)
			}
		},
		DeleteFunc: func(obj interface{}) {
			if pg, ok := pgcache.Unwrap(obj).(*v1alpha1.PodGroup); ok {
				pl.onPodGroupDelete(pg)
			}
		},
	}
}

func (pl *Coscheduling) onPodGroupSpecChange(pg *v1alpha1.PodGroup) {
	key := podgroup.Key(pg.Namespace, pg.Name)
	var r gang.Result
	pl.mu.Lock()
	if g := pl.gangs.Get(key); g != nil {
		now, want := pl.clock.Now(), podgroup.MinMember(pg)
		r = pl.stepLocked(g, func() gang.Result {
			return g.OnEdited(now, want, func() int { return pl.confirmedCountLocked(g) }, pl.backoff)
		})
		pl.belowMinMemberLocked(g, pg, now)
	}
	pl.mu.Unlock()
	if r.AllowWaiting && len(r.Pods) > 0 {
		pl.allow(r.Pods)
		pl.recorder.PodGroup(pg, v1.EventTypeNormal, podgroup.ReasonQuorumReached, r.Message)
	}
	pl.activateGroup(pg.Namespace, pg.Name)
	pl.notifyStatus(key)
}

func (pl *Coscheduling) onPodGroupDelete(pg *v1alpha1.PodGroup) {
	if pl.lws != nil {
		pl.lws.GroupDeleted(pg) // a replica's PodGroup deleted under its live leader is made again
	}
	key := podgroup.Key(pg.Namespace, pg.Name)
	var r gang.Result
	pl.mu.Lock()
	g, ok := pl.gangs.Deleted(key, pg.UID)
	if !ok {
		pl.mu.Unlock()
		return
	}
	pl.notifyStatus(key) // the writer forgets what it kept of the group
	if g != nil {
		now := pl.clock.Now()
		pl.stepReservationAsyncLocked(g, resv.Input{Event: resv.Deleted, Now: now, Message: "the PodGroup was deleted"})
		r = pl.stepLocked(g, func() gang.Result {
			r, timers := g.OnDeleted(now)
			gang.StopTimers(timers)
			return r
		})
		pl.dropIfUnusedLocked(g, now)
	}
	pl.mu.Unlock()
	// The victims' Unreserves are echoes of this rejection (the attempt is Failed).
	pl.rejectWaiting(r.Pods, r.Message)
	for _, v := range r.Pods {
		pl.recorder.Pod(v, v1.EventTypeWarning, podgroup.ReasonGangRejected, r.Message)
	}
	if pl.preempt != nil {
		// Room the gang's preemption nominated is not kept for a gang that is gone.
		go pl.clearNominations(pl.ctx, pl.members.InGroup(pg.Namespace, pg.Name), "")
	}
}

// claimEventHandler lets in the members that may claim devices when a ResourceClaim changes in a way
// that may change a whole-gang check (devices.ClaimFreed: devices freed, or a PodGroup's own claim
// allocated or freed). It is a handler, not a queueing hint (see EventsToRegister). A burst of such
// events is one wait for the scheduler's claim cache and one activation pass (see devices.Freed).
func (pl *Coscheduling) claimEventHandler() cache.ResourceEventHandler {
	changed := func(oldObj, newObj interface{}) {
		oldClaim, _ := oldObj.(*resourceapi.ResourceClaim)
		newClaim, _ := newObj.(*resourceapi.ResourceClaim)
		if claim, allocated, ok := devices.ClaimFreed(oldClaim, newClaim); ok {
			pl.freed.Add(pl.ctx, claim, allocated)
		}
	}
	return cache.ResourceEventHandlerFuncs{
		UpdateFunc: changed,
		DeleteFunc: func(obj interface{}) { changed(pgcache.Unwrap(obj), nil) },
	}
}

// devicesFreed makes the cached checks stale and lets in the device members (once per burst of claim
// events, see claimEventHandler).
func (pl *Coscheduling) devicesFreed() {
	pl.epoch.Add(1)
	pl.activateDeviceMembers()
}

// activateDeviceMembers activates the unscheduled members that may claim devices of every gang the
// plugin tracks that has live members neither reserved nor bound and does not back off (see
// gang.Registry.Unplaced), then O(members) of those gangs; on a freeing claim event only, off the
// scheduling cycle.
func (pl *Coscheduling) activateDeviceMembers() {
	if !pl.running.Load() {
		return
	}
	now := pl.clock.Now()
	pl.mu.RLock()
	groups := pl.gangs.Unplaced(now, pl.members.Count)
	pl.mu.RUnlock()
	// Live members of this profile.
	effects.Activate(klog.FromContext(pl.ctx), pl.handle, devices.Claimers(pl.unscheduledMembers(groups, ""))...)
}
