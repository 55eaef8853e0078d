package gang

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/custom-scheduler/custom-scheduler/pkg/apis/scheduling/v1alpha1"
	"github.com/custom-scheduler/custom-scheduler/pkg/coscheduling/attempt"
	"github.com/custom-scheduler/custom-scheduler/pkg/coscheduling/gangfit"
	"github.com/custom-scheduler/custom-scheduler/pkg/coscheduling/podgroup"
	resv "github.com/custom-scheduler/custom-scheduler/pkg/coscheduling/reservation"
	"github.com/custom-scheduler/custom-scheduler/pkg/coscheduling/tree"
)

// TestRegistryFor: a gang's state is made once per group; a new state starts from how this process
// ended the group's last reservation; a PodGroup recreated under its name forgets the old one's history
// and retires its reservation, if it waited or held one, for TakeRetired.
func TestRegistryFor(t *testing.T) {
	t0 := time.Unix(1000, 0)
	now := func() time.Time { return t0 }
	cases := []struct {
		name        string
		setup       func(r *Registry)
		uid         types.UID
		wantMade    bool
		wantRetired bool
		wantEnded   string
	}{
		{name: "new", uid: "a", wantMade: true},
		{name: "tracked", setup: func(r *Registry) { r.For("ns", "g", "a", now) }, uid: "a"},
		{name: "recreated, no reservation", setup: func(r *Registry) { r.For("ns", "g", "a", now) }, uid: "b"},
		{name: "recreated, reservation held", uid: "b", wantRetired: true, setup: func(r *Registry) {
			g, _, _ := r.For("ns", "g", "a", now)
			g.Reserve.Phase = resv.Held
		}},
		{name: "new after a drop with an ended reservation", uid: "a", wantMade: true, wantEnded: resv.EndTimedOut, setup: func(r *Registry) {
			g, _, _ := r.For("ns", "g", "a", now)
			g.Reserve.Ended, g.Reserve.EndMessage = resv.EndTimedOut, "timed out"
			r.Drop(g)
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := NewRegistry(nil)
			if tc.setup != nil {
				tc.setup(r)
			}
			g, made, retired := r.For("ns", "g", tc.uid, now)
			if made != tc.wantMade || retired != tc.wantRetired {
				t.Errorf("For = made %v, retired %v; want %v, %v", made, retired, tc.wantMade, tc.wantRetired)
			}
			if g.PodGroupUID != tc.uid || r.Get("ns/g") != g || r.Len() != 1 {
				t.Errorf("For tracks %+v (%d gangs), want the state of PodGroup %s", g, r.Len(), tc.uid)
			}
			if g.Reserve.Ended != tc.wantEnded || (tc.wantEnded != "") != g.Reserve.Seen {
				t.Errorf("the state starts with reservation end %q (seen %v), want %q", g.Reserve.Ended, g.Reserve.Seen, tc.wantEnded)
			}
			if reason, _ := r.Ended("ns/g"); reason != "" {
				t.Errorf("Ended while tracked = %q, want none", reason)
			}
			retiredList := r.TakeRetired()
			if (len(retiredList) == 1) != tc.wantRetired {
				t.Fatalf("TakeRetired = %+v, want one: %v", retiredList, tc.wantRetired)
			}
			if tc.wantRetired {
				old := retiredList[0].Gang()
				if old.Key() != "ns/g" || !old.Reserve.Held() || !retiredList[0].At.Equal(t0) {
					t.Errorf("retired %+v, want the old PodGroup's held reservation found at %v", retiredList[0], t0)
				}
				if len(r.TakeRetired()) != 0 {
					t.Error("TakeRetired returned the retired reservation twice")
				}
			}
		})
	}
}

// TestRegistryDrop: a dropped gang is no longer tracked, keeps how its reservation ended until it is
// tracked again or its PodGroup is forgotten, and its back-off timer is stopped.
func TestRegistryDrop(t *testing.T) {
	r := NewRegistry(func(types.UID) bool { return true })
	g, made := r.Bound("ns", "g")
	if !made || g.Succeeded == nil || g.PodGroupUID != "" {
		t.Fatalf("Bound = %+v, %v: want a new state without a PodGroup that counts succeeded members", g, made)
	}
	if again, made := r.Bound("ns", "g"); made || again != g {
		t.Error("Bound made the state twice")
	}
	g.Reserve.Ended, g.Reserve.EndMessage = resv.EndBelowMinMember, "1 of 2"
	r.Drop(g)
	if r.Get("ns/g") != nil || r.Len() != 0 {
		t.Error("the dropped gang is still tracked")
	}
	if reason, msg := r.Ended("ns/g"); reason != resv.EndBelowMinMember || msg != "1 of 2" {
		t.Errorf("Ended = %q, %q, want the dropped gang's end", reason, msg)
	}
	// A member bound before the PodGroup is seen again tracks the group again: the state starts with
	// the end, and the registry keeps it no more (as For's does).
	if again, made := r.Bound("ns", "g"); !made || again.Reserve.Ended != resv.EndBelowMinMember || !again.Reserve.Seen {
		t.Errorf("Bound after Drop = %+v, %v; want a new state with the last end", again.Reserve, made)
	}
	if reason, _ := r.Ended("ns/g"); reason != "" {
		t.Errorf("Ended while tracked again = %q, want none", reason)
	}
	r.Drop(r.Get("ns/g"))
	r.Forget("ns/g")
	if reason, _ := r.Ended("ns/g"); reason != "" {
		t.Errorf("Ended after Forget = %q, want none", reason)
	}
}

func TestUnused(t *testing.T) {
	now := time.Unix(1000, 0)
	cases := []struct {
		name string
		g    func() *Gang
		live int
		want bool
	}{
		{name: "empty, no live pod", g: func() *Gang { return New("ns", "g", "") }, want: true},
		{name: "empty, a live pod", g: func() *Gang { return New("ns", "g", "") }, live: 1},
		{name: "a member counted", g: func() *Gang { g := New("ns", "g", ""); g.Set("a", Bound); return g }},
		{name: "backing off", g: func() *Gang { g := New("ns", "g", ""); g.BackoffUntil = now.Add(time.Second); return g }},
	}
	for _, tc := range cases {
		if got := Unused(tc.g(), now, tc.live); got != tc.want {
			t.Errorf("%s: Unused = %v, want %v", tc.name, got, tc.want)
		}
	}
}

// TestRegistryStep: the count of gangs with members at Permit moves when a step starts or ends a
// wait, and only then.
func TestRegistryStep(t *testing.T) {
	r := NewRegistry(nil)
	g, _, _ := r.For("ns", "g", "a", time.Now)
	pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "p", UID: "p"}}
	steps := []struct {
		name        string
		step        func()
		wantChanged bool
		wantWaiting int
	}{
		{name: "nothing", step: func() {}},
		{name: "a member waits", step: func() { g.Waiting[pod.UID] = pod }, wantChanged: true, wantWaiting: 1},
		{name: "another waits", step: func() { g.Waiting["q"] = pod }, wantWaiting: 1},
		{name: "none waits", step: func() { clear(g.Waiting) }, wantChanged: true},
	}
	for _, s := range steps {
		_, changed := r.Step(g, func() Result { s.step(); return Result{} })
		if changed != s.wantChanged || r.Waiting() != s.wantWaiting {
			t.Errorf("%s: Step changed %v, Waiting %d; want %v, %d", s.name, changed, r.Waiting(), s.wantChanged, s.wantWaiting)
		}
	}
}

// TestRegistryUnplacedAndUnscheduled: the gangs with live members neither reserved nor bound (not
// backing off), and a group's pods neither placed nor reserved here.
func TestRegistryUnplacedAndUnscheduled(t *testing.T) {
	now := time.Unix(1000, 0)
	r := NewRegistry(nil)
	placed, _ := r.Bound("ns", "placed")
	placed.Set("a", Bound)
	open, _ := r.Bound("ns", "open")
	open.Set("a", Reserved)
	backing, _ := r.Bound("ns", "backing")
	backing.BackoffUntil = now.Add(time.Minute)
	live := map[string]int{"placed": 1, "open": 2, "backing": 2}
	got := r.Unplaced(now, func(_, name string) int { return live[name] })
	if diff := cmp.Diff([]tree.Node{{Namespace: "ns", Name: "open"}}, got); diff != "" {
		t.Errorf("Unplaced (-want +got):\n%s", diff)
	}

	pod := func(uid, node string) *v1.Pod {
		return &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: uid, UID: types.UID(uid)}, Spec: v1.PodSpec{NodeName: node}}
	}
	members := []*v1.Pod{pod("a", ""), pod("b", ""), pod("c", "n1"), pod("d", "")}
	names := func(pods []*v1.Pod) []string {
		var out []string
		for _, p := range pods {
			out = append(out, p.Name)
		}
		return out
	}
	if diff := cmp.Diff([]string{"b"}, names(r.Unscheduled("ns/open", members, "d"))); diff != "" {
		t.Errorf("Unscheduled of a tracked gang (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"a", "b", "d"}, names(r.Unscheduled("ns/none", members, ""))); diff != "" {
		t.Errorf("Unscheduled of an untracked gang (-want +got):\n%s", diff)
	}
	others := []*v1.Pod{pod("e", ""), pod("d", "")}
	if diff := cmp.Diff([]string{"b", "e"}, names(r.UnscheduledIn([]string{"ns/open", "ns/none"}, [][]*v1.Pod{members, others}, "d"))); diff != "" {
		t.Errorf("UnscheduledIn of two groups (-want +got):\n%s", diff)
	}
	open.Reserve.Phase = resv.Held
	if !r.Holds("ns/open") || r.Holds("ns/placed") || r.Holds("ns/none") {
		t.Error("Holds does not follow the gangs' reservations")
	}
}

// TestRegistryGathering: only the attempt that started at start, still gathering, waits for its quorum.
func TestRegistryGathering(t *testing.T) {
	start, deadline := time.Unix(1000, 0), time.Unix(2000, 0)
	r := NewRegistry(nil)
	g, _ := r.Bound("ns", "g")
	if _, _, ok := r.Gathering("ns/g", start); ok {
		t.Error("a gang with no attempt gathers")
	}
	pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "p", UID: "p"}}
	g.Waiting[pod.UID] = pod
	g.Set(pod.UID, Reserved)
	g.Phase, g.Start, g.Deadline = attempt.PhaseGathering, start, deadline
	if count, d, ok := r.Gathering("ns/g", start); !ok || count != 1 || !d.Equal(deadline) {
		t.Errorf("Gathering = %d, %v, %v; want 1, %v, true", count, d, ok, deadline)
	}
	if _, _, ok := r.Gathering("ns/g", start.Add(time.Second)); ok {
		t.Error("another attempt's wait counts as this one's")
	}
	g.Phase = attempt.PhaseQuorum
	if _, _, ok := r.Gathering("ns/g", start); ok {
		t.Error("an attempt with its quorum gathers")
	}
	if _, _, ok := r.Gathering("ns/none", start); ok {
		t.Error("an untracked gang gathers")
	}
}

// TestNewer: a delete of an older PodGroup of the name leaves a newer one's state alone; a delete
// of its own, or where either UID is unknown, does not.
func TestNewer(t *testing.T) {
	for _, tc := range []struct {
		state, deleted types.UID
		want           bool
	}{
		{"new", "old", true},
		{"same", "same", false},
		{"", "old", false},
		{"new", "", false},
	} {
		if got := New("ns", "g", tc.state).Newer(tc.deleted); got != tc.want {
			t.Errorf("state of %q, delete of %q: Newer = %v, want %v", tc.state, tc.deleted, got, tc.want)
		}
	}
}

// TestRegistryPreempting: a preemption's end lets the members of each of its groups still tracked in
// (one count each, never below none), and its outcome is recorded only on the PodGroup it was made
// for, not on one recreated under the name meanwhile.
func TestRegistryPreempting(t *testing.T) {
	pg := func(name string, uid types.UID) *v1alpha1.PodGroup {
		return &v1alpha1.PodGroup{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, UID: uid}}
	}
	r := NewRegistry(nil)
	a, _, _ := r.For("ns", "a", "ua", func() time.Time { return t0 })
	b, _, _ := r.For("ns", "b", "ub", func() time.Time { return t0 })
	a.StartPreempting()
	a.StartPreempting()
	r.DonePreempting(pg("a", "ua"), pg("b", "ub"), pg("gone", "ug"))
	if a.PreemptionsUnderWay != 1 || b.PreemptionsUnderWay != 0 {
		t.Errorf("under way after one preemption's end: a %d, b %d; want 1, 0", a.PreemptionsUnderWay, b.PreemptionsUnderWay)
	}
	r.Preempted(pg("a", "old"), []string{"n1"}, "preempting")
	if a.Outcome.Reason != "" || a.NominatedNodes != nil {
		t.Errorf("a recreated PodGroup got its predecessor's preemption: %+v, %v", a.Outcome, a.NominatedNodes)
	}
	r.Preempted(pg("a", "ua"), []string{"n1"}, "preempting")
	if a.Outcome.Reason != podgroup.ReasonPreempting || a.Outcome.Message != "preempting" || len(a.NominatedNodes) != 1 {
		t.Errorf("the preemption was not recorded: %+v, %v", a.Outcome, a.NominatedNodes)
	}
	r.Preempted(pg("gone", "ug"), nil, "preempting") // no state: nothing to record
}

// TestRegistryByKey: the registry's steps by key reach the tracked gang of the key (preemption
// stopped: its outcome becomes GangInfeasible with its check's message; the plan missed: dropped for
// the attempt), and do nothing for a key it does not track.
func TestRegistryByKey(t *testing.T) {
	type got struct {
		Msg          string
		Changed      bool
		Outcome      string
		Plan, NoPlan bool
	}
	for _, tc := range []struct {
		name string
		key  string
		step func(r *Registry, key string) (string, bool)
		want got
	}{
		{name: "preemption stopped", key: "ns/g", step: (*Registry).StoppedPreempting,
			want: got{Msg: "no room", Changed: true, Outcome: podgroup.ReasonGangInfeasible, Plan: true}},
		{name: "preemption stopped, another group", key: "ns/other", step: (*Registry).StoppedPreempting,
			want: got{Outcome: podgroup.ReasonPreempting, Plan: true}},
		{name: "the plan missed", key: "ns/g", step: func(r *Registry, key string) (string, bool) { r.MissPlan(key); return "", false },
			want: got{Outcome: podgroup.ReasonPreempting, NoPlan: true}},
		{name: "the plan missed, another group", key: "ns/other", step: func(r *Registry, key string) (string, bool) { r.MissPlan(key); return "", false },
			want: got{Outcome: podgroup.ReasonPreempting, Plan: true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := NewRegistry(nil)
			g, _, _ := r.For("ns", "g", "a", time.Now)
			g.Checked(gangfit.Result{Message: "no room"}, FeasibilityKey{}, nil, nil)
			g.Preempted([]string{"n1"}, "preempting")
			g.Checked(gangfit.Result{Message: "no room"}, FeasibilityKey{}, nil, nil)
			g.Plan = &gangfit.PlacementPlan{}
			msg, changed := tc.step(r, tc.key)
			gotten := got{Msg: msg, Changed: changed, Outcome: g.Outcome.Reason, Plan: g.Plan != nil, NoPlan: g.NoPlan}
			if diff := cmp.Diff(tc.want, gotten); diff != "" {
				t.Errorf("(-want,+got):\n%s", diff)
			}
		})
	}
}

// TestRegistryAfterStep: a step's quorum is told to the gang's own reservation and to its job's,
// held by another group (once); a failure backs the gang off unless its PodGroup was deleted; a
// step that neither allows nor rejects asks nothing.
func TestRegistryAfterStep(t *testing.T) {
	type got struct {
		Quorum  []string
		Backoff bool
	}
	for _, tc := range []struct {
		name    string
		jobHeld bool // another group's reservation holds room for g's job
		ownHeld bool
		res     Result
		want    got
	}{
		{name: "the quorum", res: Result{Decision: attempt.Decision{AllowWaiting: true}}, want: got{Quorum: []string{"ns/g"}}},
		{name: "the quorum of a group of a held job", jobHeld: true, res: Result{Decision: attempt.Decision{AllowWaiting: true}},
			want: got{Quorum: []string{"ns/g", "ns/holder"}}},
		{name: "the quorum of the holder itself", ownHeld: true, res: Result{Decision: attempt.Decision{AllowWaiting: true}},
			want: got{Quorum: []string{"ns/g"}}},
		{name: "a failure", res: Result{Decision: attempt.Decision{RejectWaiting: true}}, want: got{Backoff: true}},
		{name: "the PodGroup deleted", res: Result{Decision: attempt.Decision{RejectWaiting: true}, Event: attempt.PodGroupDeleted}},
		{name: "a wait", jobHeld: true, res: Result{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := NewRegistry(nil)
			g, _, _ := r.For("ns", "g", "a", time.Now)
			h, _, _ := r.For("ns", "holder", "b", time.Now)
			if tc.jobHeld {
				h.Reserve.Phase, h.Reserve.Groups = resv.Held, []string{"ns/g"}
			}
			if tc.ownHeld {
				g.Reserve.Phase = resv.Held
			}
			quorum, backoff := r.AfterStep(g, tc.res)
			gotten := got{Backoff: backoff}
			for _, q := range quorum {
				gotten.Quorum = append(gotten.Quorum, q.Key())
			}
			if diff := cmp.Diff(tc.want, gotten); diff != "" {
				t.Errorf("AfterStep (-want,+got):\n%s", diff)
			}
		})
	}
}

// TestRegistryDeleted: a PodGroup's delete concerns the state of its own UID (or an unknown one) and
// forgets how the group's last reservation ended; a newer PodGroup's state is left alone.
func TestRegistryDeleted(t *testing.T) {
	cases := []struct {
		name string
		// tracked is the UID of the tracked state ("-": none).
		tracked, deleted types.UID
		wantGang, wantOK bool
	}{
		{name: "none tracked", tracked: "-", deleted: "a", wantOK: true},
		{name: "its own", tracked: "a", deleted: "a", wantGang: true, wantOK: true},
		{name: "tracked without a PodGroup", tracked: "", deleted: "a", wantGang: true, wantOK: true},
		{name: "an unknown UID", tracked: "a", deleted: "", wantGang: true, wantOK: true},
		{name: "a newer PodGroup's", tracked: "b", deleted: "a"},
	}
	for _, tc := range cases {
		r := NewRegistry(nil)
		r.ended["ns/g"] = [2]string{resv.EndBelowMinMember, "1 of 2"}
		if tc.tracked != "-" {
			r.Put(New("ns", "g", tc.tracked))
		}
		g, ok := r.Deleted("ns/g", tc.deleted)
		if (g != nil) != tc.wantGang || ok != tc.wantOK {
			t.Errorf("%s: Deleted = %v, %v; want a gang %v, %v", tc.name, g, ok, tc.wantGang, tc.wantOK)
		}
		if reason, _ := r.Ended("ns/g"); (reason == "") != tc.wantOK {
			t.Errorf("%s: Ended after Deleted = %q; forgotten: want %v", tc.name, reason, tc.wantOK)
		}
	}
}
