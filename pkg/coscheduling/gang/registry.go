package gang

import (
	"slices"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"

	"github.com/custom-scheduler/custom-scheduler/pkg/apis/scheduling/v1alpha1"
	"github.com/custom-scheduler/custom-scheduler/pkg/coscheduling/attempt"
	"github.com/custom-scheduler/custom-scheduler/pkg/coscheduling/podgroup"
	"github.com/custom-scheduler/custom-scheduler/pkg/coscheduling/tree"
)

// Registry is the state of the gangs a plugin tracks, by key (podgroup.Key): made when a group is
// first met (For, Bound), dropped once it holds nothing and no live member of the group is left
// (Unused, Drop), so that the plugin's memory follows the groups that exist, not every group it ever
// saw. It also keeps how the last reservation of a dropped gang ended (Ended), the reservations of
// PodGroups recreated under their names (TakeRetired), and how many gangs have members at Permit
// (Step). Like a Gang it is pure and holds no lock: its owner (the plugin's mutex) does; the owner
// keeps the gauges (Len, Waiting).
type Registry struct {
	// Succeeded is handed to each gang's state the registry makes (see Gang.Succeeded).
	Succeeded func(types.UID) bool

	gangs map[string]*Gang
	// ended keeps how the last reservation of a gang whose state was dropped ended (its reason and
	// message), for the status and for the gang's next state: the status writer keeps a Reserved
	// condition it has no word on (a previous leader's, until it is adopted), so a reservation that
	// ended just before its gang's state was dropped would otherwise show as held.
	ended map[string][2]string
	// retired are the reservations of PodGroups recreated under their names, for TakeRetired.
	retired []Retired
	// waiting counts gangs with at least one member at Permit.
	waiting int
}

// Retired is the reservation of a PodGroup recreated under its name (see Gang.Recreated), found at
// At.
type Retired struct {
	Namespace, Name string
	At              time.Time
	Reserve         Reservation
}

// NewRegistry returns an empty registry whose gangs count succeeded members with succeeded.
func NewRegistry(succeeded func(types.UID) bool) *Registry {
	return &Registry{Succeeded: succeeded, gangs: map[string]*Gang{}, ended: map[string][2]string{}}
}

// Get returns the state of the group of key, nil when none is tracked.
func (r *Registry) Get(key string) *Gang { return r.gangs[key] }

// Len is how many gangs are tracked.
func (r *Registry) Len() int { return len(r.gangs) }

// All are the tracked gangs by key, for the reads over every gang (Queue, Held, BusyDomains, ...);
// the caller must not change the map.
func (r *Registry) All() map[string]*Gang { return r.gangs }

// Put tracks g under its key, replacing what was tracked there.
func (r *Registry) Put(g *Gang) { r.gangs[g.Key()] = g }

// For returns the state of group namespace/name of the PodGroup of uid, and whether it was made now.
// A new state starts with how this process ended the group's last reservation (it is never adopted
// again from a condition not yet cleared). State made for an earlier PodGroup of the same name
// (another UID) forgets that group's attempt history first; when the old PodGroup waited or held a
// reservation, it is kept for TakeRetired (found at now()) and retired is true: the owner ends it
// outside this cycle.
func (r *Registry) For(namespace, name string, uid types.UID, now func() time.Time) (g *Gang, made, retired bool) {
	key := podgroup.Key(namespace, name)
	if g = r.gangs[key]; g == nil {
		return r.made(namespace, name, uid), true, false
	}
	if g.PodGroupUID != uid {
		if old, end := g.Recreated(uid); end {
			r.retired = append(r.retired, Retired{Namespace: namespace, Name: name, At: now(), Reserve: old})
			return g, false, true
		}
	}
	return g, false, false
}

// Bound returns the state of group namespace/name for a member bound before its PodGroup exists (it
// is counted once the PodGroup does), and whether it was made now.
func (r *Registry) Bound(namespace, name string) (g *Gang, made bool) {
	if g = r.gangs[podgroup.Key(namespace, name)]; g != nil {
		return g, false
	}
	return r.made(namespace, name, ""), true
}

// made tracks a new state for group namespace/name (of the PodGroup of uid; "": none yet), which
// starts with how this process ended the group's last reservation (see For).
func (r *Registry) made(namespace, name string, uid types.UID) *Gang {
	g := New(namespace, name, uid)
	g.Succeeded = r.Succeeded
	if e, ok := r.ended[g.Key()]; ok {
		g.Reserve.Ended, g.Reserve.EndMessage, g.Reserve.Seen = e[0], e[1], true
		delete(r.ended, g.Key())
	}
	r.Put(g)
	return g
}

// Unused reports whether g's state may be dropped at now: it holds nothing (see Gang.HoldsNothing)
// and live, the count of its group's live pods, is zero.
func Unused(g *Gang, now time.Time, live int) bool { return g.HoldsNothing(now) && live == 0 }

// Newer reports whether the state is a newer PodGroup's than uid's, of the same name (a scheduling
// cycle read the new one from the store before the old one's delete was told, and started afresh):
// nothing of it, its waiting members nor their nominations, is the old one's. Unknown UIDs ("") are
// no other PodGroup's.
func (g *Gang) Newer(uid types.UID) bool {
	return g.PodGroupUID != "" && uid != "" && g.PodGroupUID != uid
}

// Drop stops tracking g, keeping how its last reservation ended (see Ended). Its back-off timer is
// stopped; its reservation must have been stepped first (Deleted).
func (r *Registry) Drop(g *Gang) {
	if g.BackoffTimer != nil {
		g.BackoffTimer.Stop()
	}
	if res := &g.Reserve; res.Ended != "" {
		r.ended[g.Key()] = [2]string{res.Ended, res.EndMessage}
	}
	delete(r.gangs, g.Key())
}

// Ended is how the last reservation of the dropped gang of key ended (empty when it did not, or when
// the gang is tracked again).
func (r *Registry) Ended(key string) (reason, message string) {
	e := r.ended[key]
	return e[0], e[1]
}

// Forget forgets what is kept of the group of key once its PodGroup is deleted (how its last
// reservation ended).
func (r *Registry) Forget(key string) { delete(r.ended, key) }

// Deleted forgets what is kept of the group of key once its PodGroup (uid) is deleted (see Forget) and
// returns its gang's state (nil: none is tracked); ok is false, and nothing is forgotten, when the
// state is a newer PodGroup's (see Gang.Newer): the delete concerns nothing of it.
func (r *Registry) Deleted(key string, uid types.UID) (g *Gang, ok bool) {
	if g = r.gangs[key]; g != nil && g.Newer(uid) {
		return nil, false
	}
	r.Forget(key)
	return g, true
}

// TakeRetired returns the reservations of recreated PodGroups kept since the last call.
func (r *Registry) TakeRetired() []Retired {
	out := r.retired
	r.retired = nil
	return out
}

// Gang is the state of a gang that holds o's reservation only, for its Deleted step.
func (o Retired) Gang() *Gang {
	g := New(o.Namespace, o.Name, "")
	g.Reserve = o.Reserve
	return g
}

// Step runs one of g's steps (OnPermit, OnReserve, ...) and keeps the count of gangs with members at
// Permit; changed reports that the count moved.
func (r *Registry) Step(g *Gang, step func() Result) (res Result, changed bool) {
	waited := g.InProgress()
	res = step()
	switch waits := g.InProgress(); {
	case waited && !waits:
		r.waiting--
	case !waited && waits:
		r.waiting++
	default:
		return res, false
	}
	return res, true
}

// Waiting is how many gangs have at least one member at Permit.
func (r *Registry) Waiting() int { return r.waiting }

// StopTimers stops the timers a gang's state let go of.
func StopTimers(timers []clock.Timer) {
	for _, t := range timers {
		if t != nil {
			t.Stop()
		}
	}
}

// Unplaced are the groups of the gangs with live members (live) neither reserved nor bound that do
// not back off at now: a gang that backs off is let in when its back-off ends, not before.
// O(tracked gangs).
func (r *Registry) Unplaced(now time.Time, live func(namespace, name string) int) []tree.Node {
	out := make([]tree.Node, 0, len(r.gangs))
	for _, g := range r.gangs {
		if !g.BackingOff(now) && live(g.Namespace, g.Name) > len(g.Members) {
			out = append(out, tree.Node{Namespace: g.Namespace, Name: g.Name})
		}
	}
	return out
}

// Unscheduled are the pods of members (a group's live pods) without a node and not counted by the
// gang of key (reserved here), except one.
func (r *Registry) Unscheduled(key string, members []*v1.Pod, except types.UID) []*v1.Pod {
	g := r.gangs[key]
	var out []*v1.Pod
	for _, p := range members {
		if p.UID == except || p.Spec.NodeName != "" {
			continue
		}
		if g != nil {
			if _, isMember := g.Members[p.UID]; isMember {
				continue
			}
		}
		out = append(out, p)
	}
	return out
}

// UnscheduledIn are the pods Unscheduled finds in several groups: members[i] are the live pods of
// the group keys[i]; except is left out wherever it is.
func (r *Registry) UnscheduledIn(keys []string, members [][]*v1.Pod, except types.UID) []*v1.Pod {
	var out []*v1.Pod
	for i, key := range keys {
		out = append(out, r.Unscheduled(key, members[i], except)...)
	}
	return out
}

// DonePreempting tells the gangs of groups that a preemption's calls for them are made (see
// Gang.DonePreempting); a group whose state went meanwhile is passed over.
func (r *Registry) DonePreempting(groups ...*v1alpha1.PodGroup) {
	for _, pg := range groups {
		if g := r.gangs[podgroup.Key(pg.Namespace, pg.Name)]; g != nil {
			g.DonePreempting()
		}
	}
}

// Preempted records the preemption made for pg's gang (see Gang.Preempted), unless the PodGroup went
// or was recreated while its calls were made.
func (r *Registry) Preempted(pg *v1alpha1.PodGroup, nodes []string, message string) {
	if g := r.gangs[podgroup.Key(pg.Namespace, pg.Name)]; g != nil && g.PodGroupUID == pg.UID {
		g.Preempted(nodes, message)
	}
}

// StoppedPreempting tells the gang of key that preemption cannot place it (see
// Gang.StoppedPreempting); changed reports that its outcome became GangInfeasible, for msg.
func (r *Registry) StoppedPreempting(key string) (msg string, changed bool) {
	if g := r.gangs[key]; g != nil {
		return g.StoppedPreempting()
	}
	return "", false
}

// MissPlan drops the plan of the gang of key for the rest of its attempt (see Gang.MissPlan).
func (r *Registry) MissPlan(key string) {
	if g := r.gangs[key]; g != nil {
		g.MissPlan()
	}
}

// Holds reports whether a reservation holds room for the gang of key (its own, or its job's).
func (r *Registry) Holds(key string) bool {
	return r.HolderOf(key) != nil
}

// HolderOf is the gang whose reservation holds room for the group of key: its own, or its job's
// (see Reservation.Groups; the first by key, should two hold it while a job's groups change); nil
// when none does. O(gangs) when its own holds none.
func (r *Registry) HolderOf(key string) *Gang {
	if g := r.gangs[key]; g != nil && g.Reserve.Held() {
		return g
	}
	var holder *Gang
	for k, g := range r.gangs {
		if g.Reserve.Held() && slices.Contains(g.Reserve.Groups, key) && (holder == nil || k < holder.Key()) {
			holder = g
		}
	}
	return holder
}

// AfterStep says what the result res of a step of g asks of the reservations and the back-off: the
// quorum (AllowWaiting; in a job, only once the job is ready) is told to the reservations that hold
// g's room, its own and its job's (held by another group, whose members may all be placed already);
// a failure backs g off, unless its PodGroup was deleted.
func (r *Registry) AfterStep(g *Gang, res Result) (quorum []*Gang, backoff bool) {
	switch {
	case res.AllowWaiting:
		quorum = []*Gang{g}
		if h := r.HolderOf(g.Key()); h != nil && h != g {
			quorum = append(quorum, h)
		}
	case res.RejectWaiting && res.Event != attempt.PodGroupDeleted:
		backoff = true
	}
	return quorum, backoff
}

// Gathering reports whether the gang of key still gathers the quorum of the attempt that started at
// start, with the count of members reserved or bound and the attempt's deadline.
func (r *Registry) Gathering(key string, start time.Time) (count int, deadline time.Time, ok bool) {
	g := r.gangs[key]
	if g == nil || !g.InProgress() || g.Phase != attempt.PhaseGathering || !g.Start.Equal(start) {
		return 0, time.Time{}, false
	}
	return len(g.Members), g.Deadline, true
}
