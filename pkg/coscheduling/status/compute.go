package status

import (
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/custom-scheduler/custom-scheduler/pkg/apis/scheduling/v1alpha1"
	"github.com/custom-scheduler/custom-scheduler/pkg/coscheduling/podgroup"
	resv "github.com/custom-scheduler/custom-scheduler/pkg/coscheduling/reservation"
)

// The status as a pure function of the PodGroup, its pods and the plugin's attempt (ComputeStatus), with
// its conditions, and the merge patch that writes it.

// staleReservation decides for endStaleReservation: whether the Reserved condition of a group
// without pods is to end now, else in how long to look again (0: never; held: this profile holds a
// reservation for it). Pure.
func staleReservation(pg *v1alpha1.PodGroup, held bool, now time.Time) (stale bool, recheck time.Duration) {
	c := meta.FindStatusCondition(pg.Status.Conditions, ConditionReserved)
	if c == nil || c.Status != metav1.ConditionTrue || held {
		return false, 0
	}
	if until := pg.Status.ReservedUntil; until != nil {
		if end := until.Add(staleReservationGrace); now.Before(end) {
			return false, end.Sub(now)
		}
	}
	return true, 0
}

// GroupPods merges a group's finished and live pods of one profile. A member that has just finished
// can be in both for a moment (the scheduler's informer has not seen it go yet): its finished copy
// counts.
func GroupPods(profile string, finished, live []interface{}) []*v1.Pod {
	pods := make([]*v1.Pod, 0, len(finished)+len(live))
	var seen map[types.UID]struct{}
	for _, o := range finished {
		if p, ok := o.(*v1.Pod); ok && p.Spec.SchedulerName == profile {
			pods = append(pods, p)
			if seen == nil {
				seen = map[types.UID]struct{}{}
			}
			seen[p.UID] = struct{}{}
		}
	}
	for _, o := range live {
		if p, ok := o.(*v1.Pod); ok && p.Spec.SchedulerName == profile {
			if _, dup := seen[p.UID]; !dup {
				pods = append(pods, p)
			}
		}
	}
	return pods
}

// ComputeStatus derives a PodGroup's status from its pods and the scheduler's attempt state. Only
// live members (no deletionTimestamp, not finished) count as scheduled or running.
func ComputeStatus(pg *v1alpha1.PodGroup, pods []*v1.Pod, attempt Attempt, now time.Time) v1alpha1.PodGroupStatus {
	st := v1alpha1.PodGroupStatus{OccupiedBy: pg.Status.OccupiedBy, ScheduleStartTime: pg.Status.ScheduleStartTime}
	live := int32(0)
	for _, p := range pods {
		switch p.Status.Phase {
		case v1.PodSucceeded:
			st.Succeeded++
		case v1.PodFailed:
			st.Failed++
		}
		if !podgroup.IsLive(p) {
			continue
		}
		live++
		if p.Spec.NodeName != "" {
			st.Scheduled++
			if p.Status.Phase == v1.PodRunning {
				st.Running++
			}
		}
		if st.OccupiedBy == "" {
			if ref := metav1.GetControllerOf(p); ref != nil {
				st.OccupiedBy = string(ref.UID)
			}
		}
	}
	want := int32(podgroup.MinMember(pg))
	// The members of the run in progress that succeeded count toward the quorum, as the scheduler
	// counts them (the finished-member rule); those of a run that ended do not.
	credit := int32(podgroup.RunCredit(pods, profileOf(pods), pg.CreationTimestamp.Time))
	st.Phase = podgroup.Phase(podgroup.Counts{Live: live, Scheduled: st.Scheduled, Running: st.Running, Failed: st.Failed, Credit: credit,
		Waiting: attempt.Waiting}, want)
	if st.ScheduleStartTime.IsZero() && st.Phase != v1alpha1.PodGroupPending && st.Phase != v1alpha1.PodGroupPreScheduling {
		st.ScheduleStartTime = metav1.NewTime(now.Truncate(time.Second))
	}
	st.Waiting = int32(attempt.AtPermit)
	st.Conditions = withCondition(pg.Status.Conditions, scheduledCondition(pg, st, live, credit, attempt), now)
	if attempt.PlacementLevel != "" {
		st.Conditions = withCondition(st.Conditions, metav1.Condition{Type: ConditionTopology, Status: metav1.ConditionTrue,
			Reason: attempt.PlacementLevel, Message: attempt.PlacementMessage, ObservedGeneration: pg.Generation}, now)
	}
	if c, ok := reservedCondition(pg, st, live+credit, attempt); ok {
		st.Conditions = withCondition(st.Conditions, c, now)
	}
	if c := meta.FindStatusCondition(st.Conditions, ConditionScheduled); c != nil && c.Reason == podgroup.ReasonGangInfeasible {
		st.Shortfall = attempt.Shortfall.DeepCopy()
	} else if c != nil && (c.Reason == podgroup.ReasonGangRejected || c.Reason == podgroup.ReasonGangTimedOut) && !attempt.BackoffUntil.IsZero() {
		st.BackoffUntil = ptr.To(metav1.NewTime(ceilSecond(attempt.BackoffUntil)))
	}
	if c := meta.FindStatusCondition(st.Conditions, ConditionReserved); c != nil && c.Status == metav1.ConditionTrue && !attempt.ReservedUntil.IsZero() {
		st.ReservedUntil = ptr.To(metav1.NewTime(ceilSecond(attempt.ReservedUntil)))
	}
	return st
}

// reservedCondition is the Reserved condition, if the gang has one to show: True while it holds a
// reservation, False once one ended. A condition left True that this process does not hold (a
// previous leader's, or one whose gang state this process dropped with its last member) turns False
// once the gang is placed, or once fewer than minMember live members exist (counted: live members
// plus the run's succeeded ones): no scheduler holds room for such a gang, and nothing else would
// end it.
func reservedCondition(pg *v1alpha1.PodGroup, st v1alpha1.PodGroupStatus, counted int32, attempt Attempt) (metav1.Condition, bool) {
	c := metav1.Condition{Type: ConditionReserved, Status: metav1.ConditionFalse, ObservedGeneration: pg.Generation}
	switch {
	case attempt.Reserved:
		c.Status, c.Reason, c.Message = metav1.ConditionTrue, ReasonRoomHeld, attempt.ReservedMessage
	case attempt.ReservationEnded != "":
		c.Reason, c.Message = attempt.ReservationEnded, attempt.ReservedMessage
	default:
		old := meta.FindStatusCondition(pg.Status.Conditions, ConditionReserved)
		placed := st.Phase == v1alpha1.PodGroupScheduled || st.Phase == v1alpha1.PodGroupRunning || st.Phase == v1alpha1.PodGroupFinished
		want := int32(podgroup.MinMember(pg))
		switch {
		case old == nil || old.Status != metav1.ConditionTrue:
			return c, false
		case placed:
			c.Reason, c.Message = podgroup.ReasonQuorumReached, "the gang was placed"
		case counted < want:
			c.Reason = resv.EndBelowMinMember
			c.Message = fmt.Sprintf("the reservation ended: %d of minMember %d live members exist", counted, want)
		default:
			return c, false
		}
	}
	return c, true
}

// scheduledCondition says where the gang stands, most decisive fact first.
func scheduledCondition(pg *v1alpha1.PodGroup, st v1alpha1.PodGroupStatus, live, credit int32, attempt Attempt) metav1.Condition {
	want := int32(podgroup.MinMember(pg))
	c := metav1.Condition{Type: ConditionScheduled, Status: metav1.ConditionFalse, ObservedGeneration: pg.Generation}
	placed := max(st.Scheduled, int32(attempt.Counted))
	succeeded := ""
	if credit > 0 {
		succeeded = fmt.Sprintf(", and %d of the run succeeded", credit)
	}
	switch {
	case placed+credit >= want:
		// Members of the run that succeeded were placed: a gang finishing member by member is not
		// below quorum, and the replacement of one that failed is placed with them.
		c.Status, c.Reason = metav1.ConditionTrue, podgroup.ReasonQuorumReached
		c.Message = fmt.Sprintf("%d of minMember %d live members are bound or binding, %d succeeded", placed, want, credit)
	case attempt.Waiting:
		c.Reason = podgroup.ReasonWaitingForQuorum
		c.Message = fmt.Sprintf("%d of minMember %d live members are reserved or bound%s; the reserved ones wait for the rest of the quorum", placed, want, succeeded)
	case st.Scheduled > 0:
		c.Reason = podgroup.ReasonBelowQuorum
		c.Message = fmt.Sprintf("%d of minMember %d live members are bound%s", st.Scheduled, want, succeeded)
	case live+credit < want:
		c.Reason = podgroup.ReasonWaitingForMembers
		c.Message = fmt.Sprintf("%d of minMember %d live pods exist%s; the group waits for the rest without holding resources", live, want, succeeded)
	case attempt.Reason != "" && attempt.Reason != podgroup.ReasonQuorumReached:
		c.Reason, c.Message = attempt.Reason, attempt.Message
	default:
		c.Reason = ReasonPending
		c.Message = fmt.Sprintf("%d live pods exist (minMember %d); the group waits for its turn in the scheduling queue", live, want)
	}
	return c
}

// profileOf is the scheduler of a group's pods as GroupPods selects them (one profile's).
func profileOf(pods []*v1.Pod) string {
	if len(pods) == 0 {
		return ""
	}
	return pods[0].Spec.SchedulerName
}

// withCondition returns conds with c in place of the condition of its type. The lastTransitionTime
// stays while the status and the reason stay, so it says since when the group has been in its state
// (BelowQuorum's timer runs from it). meta.SetStatusCondition keeps the time while the status alone
// stays, so WaitingForMembers turning into BelowQuorum (both False) would keep the older time.
func withCondition(conds []metav1.Condition, c metav1.Condition, now time.Time) []metav1.Condition {
	out := make([]metav1.Condition, 0, len(conds)+1)
	c.LastTransitionTime = metav1.NewTime(now.Truncate(time.Second))
	for _, old := range conds {
		if old.Type != c.Type {
			out = append(out, old)
			continue
		}
		if old.Status == c.Status && old.Reason == c.Reason {
			c.LastTransitionTime = old.LastTransitionTime
		}
	}
	return append(out, c)
}

func statusEqual(a, b v1alpha1.PodGroupStatus) bool {
	return a.Phase == b.Phase && a.OccupiedBy == b.OccupiedBy && a.Scheduled == b.Scheduled && a.Waiting == b.Waiting && a.Running == b.Running &&
		a.Succeeded == b.Succeeded && a.Failed == b.Failed && a.ScheduleStartTime.Equal(&b.ScheduleStartTime) &&
		equality.Semantic.DeepEqual(a.Conditions, b.Conditions) && equality.Semantic.DeepEqual(a.Shortfall, b.Shortfall) &&
		equality.Semantic.DeepEqual(a.BackoffUntil, b.BackoffUntil) && equality.Semantic.DeepEqual(a.ReservedUntil, b.ReservedUntil)
}

// statusPatch spells every field out, zeros included, so the merge patch overwrites stale counts. The
// conditions list is replaced whole (other writers' condition types are carried over by computeStatus);
// so is the shortfall (see shortfallPatch).
func statusPatch(st v1alpha1.PodGroupStatus) map[string]any {
	p := map[string]any{
		"phase":         st.Phase,
		"scheduled":     st.Scheduled,
		"waiting":       st.Waiting,
		"running":       st.Running,
		"succeeded":     st.Succeeded,
		"failed":        st.Failed,
		"conditions":    st.Conditions,
		"shortfall":     shortfallPatch(st.Shortfall),
		"backoffUntil":  st.BackoffUntil,
		"reservedUntil": st.ReservedUntil,
	}
	if st.OccupiedBy != "" {
		p["occupiedBy"] = st.OccupiedBy
	}
	if !st.ScheduleStartTime.IsZero() {
		p["scheduleStartTime"] = st.ScheduleStartTime
	}
	return p
}

// ceilSecond rounds t up to the second (the API keeps seconds): an end is never shown early.
func ceilSecond(t time.Time) time.Time {
	if r := t.Truncate(time.Second); !r.Equal(t) {
		return r.Add(time.Second)
	}
	return t
}

// shortfallPatch is the merge patch of a shortfall that replaces the stored one whole: null when
// there is none, else every field spelled out (an absent one as null, so that none of the stored
// one's survives); its lists are replaced whole by a merge patch anyway.
func shortfallPatch(s *v1alpha1.PodGroupShortfall) any {
	if s == nil {
		return nil
	}
	data, err := json.Marshal(s)
	p := map[string]any{}
	if err != nil || json.Unmarshal(data, &p) != nil {
		return nil // cannot happen for this type; no shortfall rather than a broken patch
	}
	// Every field the type has: one the stored shortfall has and this one omits goes.
	t := reflect.TypeFor[v1alpha1.PodGroupShortfall]()
	for i := range t.NumField() {
		name, _, _ := strings.Cut(t.Field(i).Tag.Get("json"), ",")
		if _, ok := p[name]; !ok {
			p[name] = nil
		}
	}
	return p
}
