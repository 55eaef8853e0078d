package gang

import (
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	corev1helpers "k8s.io/component-helpers/scheduling/corev1"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/custom-scheduler/custom-scheduler/pkg/apis/config"
	"github.com/custom-scheduler/custom-scheduler/pkg/apis/scheduling/v1alpha1"
	"github.com/custom-scheduler/custom-scheduler/pkg/coscheduling/gangfit"
	"github.com/custom-scheduler/custom-scheduler/pkg/coscheduling/podgroup"
	resv "github.com/custom-scheduler/custom-scheduler/pkg/coscheduling/reservation"
)

// The reservation's part of a gang's state: the machine's step (package reservation) applied to the
// gang, and what the plugin reads across all its gangs (the order, the gauges, the note for a pod kept
// off held room). The plugin arms the timer and does the I/O the effects ask for.

// StepReservation moves the gang's reservation on an event (see reservation.Step): at an end, the
// plan and its nodes are forgotten.
func (g *Gang) StepReservation(args resv.Args, in resv.Input) resv.Effects {
	r := &g.Reserve
	var e resv.Effects
	r.State, e = resv.Step(r.State, args, in)
	if e.End != "" {
		r.Plan, r.Node = gangfit.ReservationPlan{}, nil
	}
	return e
}

// ReserveIn is a reservation step's snapshot, for a member of a gang found not to fit whose
// preemption does not help (see ReserveRoom): the member, its PodGroup and, read only when the step
// needs them, the group's live pods (to adopt or to plan), the nodes and the claims (to plan).
type ReserveIn struct {
	Args     resv.Args
	Now      time.Time
	Pod      *v1.Pod
	PodGroup *v1alpha1.PodGroup
	// Adopt is the PodGroup's Reserved condition when it is True: a previous leader's reservation.
	Adopt *metav1.Condition
	// Members lists the group's live pods; it is called at most once.
	Members func() []*v1.Pod
	// Queue counts the other gangs that hold a reservation and reports whether one goes before this
	// gang at priority prio (see Queue).
	Queue           func(prio int32) (others int, ahead bool)
	Nodes           func() ([]fwk.NodeInfo, error)
	Claims          func(prio int32) []*v1.Pod
	DefaultTopology config.TopologyPolicy
	Logger          klog.Logger
	// Devices models the members' DRA devices for the plan (nil: none are counted).
	Devices gangfit.DeviceSource
	// Job is the job of several roles the reservation is for (nil: the group alone): its holder's
	// gang (JobPreemption.Holder, the PodGroup) holds one reservation for the missing members of all
	// the groups the job's check places together, in the job's domain; Members lists all its groups'.
	Job *JobPreemption
}

// ReserveOut is what a reservation step leaves to the plugin.
type ReserveOut struct {
	// Steps are the reservation machine's effects in the order it made them (adopting, no room,
	// planned): the plugin applies each (the timer, the gauges, an end).
	Steps []resv.Effects
	// Adopted: a previous leader's reservation is held here now.
	Adopted bool
	// Room is what to plan (nil: the machine asked for no plan). The plugin plans it (PlanRoom)
	// outside its lock, since a plan reads every pod of every node, and hands the plan to Planned.
	Room *Room
	// Planned: the reservation was planned (Plan); the last step says whether it started or moved.
	Planned bool
	Plan    gangfit.ReservationPlan
}

// Room is the gang's part of a reservation plan, read under the plugin's lock: the group's live
// pods, the members still to place (in a fixed order, so that the same room gives the same plan) and
// how many of them the quorum needs.
type Room struct {
	Members, Candidates []*v1.Pod
	Need                int
	// Job is the job the room is planned for (nil: the group alone).
	Job *JobPreemption
}

// Last is the effects of the step's last event.
func (o ReserveOut) Last() resv.Effects { return o.Steps[len(o.Steps)-1] }

// ReserveRoom is a reservation's step for a member that found no room: a reservation a previous
// leader left is adopted by a gang this process has not seen trying, and the machine hears NoRoom.
// When it asks for a plan, out.Room says what to plan; PlanRoom plans it and Planned ends the step.
func (g *Gang) ReserveRoom(in ReserveIn) ReserveOut {
	var members []*v1.Pod
	listed := false
	list := func() []*v1.Pod {
		if !listed {
			members, listed = in.Members(), true
		}
		return members
	}
	var out ReserveOut
	r := &g.Reserve
	if in.Adopt != nil && r.MayAdopt() {
		out.Steps = append(out.Steps, g.AdoptReservation(in.Args, in.Adopt, list(), in.Job.Others(g.Key()), in.Now, in.Queue))
		out.Adopted = r.Held()
	}
	if groups := in.Job.Others(g.Key()); r.Held() && !slices.Equal(r.Groups, groups) {
		// The room is held for other groups than the job has now (a group joined or left it, or
		// the group reserves alone now): it ends, every group's nominations cleared, before the
		// gang reserves again for what it is.
		out.Steps = append(out.Steps, g.StepReservation(in.Args, resv.Input{Event: resv.Planned, Now: in.Now,
			Plan: resv.Plan{Message: "the groups it holds room for changed"}}))
	}
	prio := corev1helpers.PodPriority(in.Pod)
	others, ahead := in.Queue(prio)
	e := g.StepReservation(in.Args, resv.Input{Event: resv.NoRoom, Now: in.Now, Prio: prio, Others: others, Ahead: ahead})
	out.Steps = append(out.Steps, e)
	if e.Plan && in.Job != nil {
		out.Room = in.Job.room()
	} else if e.Plan {
		all := list()
		candidates, _, counted := g.Split(all)
		sort.Slice(candidates, func(i, j int) bool { return candidates[i].Name < candidates[j].Name })
		out.Room = &Room{Members: all, Candidates: candidates, Need: podgroup.MinMember(in.PodGroup) - counted}
	}
	return out
}

// Planned hands a plan made for out.Room to the reservation machine (Planned, after the order is
// read again) and holds it when the reservation starts or moves; out records the step.
func (g *Gang) Planned(in ReserveIn, p gangfit.ReservationPlan, out *ReserveOut) {
	others, ahead := in.Queue(corev1helpers.PodPriority(in.Pod))
	plan := resv.Plan{OK: p.OK, Message: p.Message, Same: g.Reserve.Plan.Same(p)}
	e := g.StepReservation(in.Args, resv.Input{Event: resv.Planned, Now: in.Now, Others: others, Ahead: ahead, Plan: plan})
	out.Steps, out.Planned, out.Plan = append(out.Steps, e), true, p
	if e.Start || e.Moved {
		g.Reserve.Hold(p)
		g.Reserve.Groups = in.Job.Others(g.Key())
	}
}

// MayAdopt reports whether the gang may adopt a reservation a previous leader left: this process has
// not seen it trying (see Registry.For), and it holds none.
func (r *Reservation) MayAdopt() bool { return !r.Seen && !r.Held() }

// HeldBy are the keys of the job's groups other than key whose room the group of key holds with its
// own, when it is the job's holder (nil otherwise, and for no job).
func (j *JobPreemption) HeldBy(key string) []string {
	if j == nil || j.Holder != key {
		return nil
	}
	return j.Others(key)
}

// Has reports whether the group keyed key is one of the job's groups its room is for (false for no
// job): of K of N replicas, only those it takes.
func (j *JobPreemption) Has(key string) bool { return j != nil && slices.Contains(j.Keys, key) }

// Others are the keys of the job's groups other than key (nil for no job).
func (j *JobPreemption) Others(key string) []string {
	if j == nil {
		return nil
	}
	var out []string
	for _, k := range j.Keys {
		if k != key {
			out = append(out, k)
		}
	}
	return out
}

// room is the job's part of a reservation plan: the missing members of its groups together (see
// gangfit.Joint; none when they cannot be counted together), each group's in name order and the
// groups in key order, so that the same room gives the same plan whichever group's member asks.
func (j *JobPreemption) room() *Room {
	groups := byName(j.Groups)
	sort.Slice(groups, func(a, b int) bool { return groups[a].Key < groups[b].Key })
	members, need, _ := gangfit.Joint(groups)
	return &Room{Members: j.Members, Candidates: members, Need: need, Job: j}
}

// byName are groups with each one's candidates in name order (copies), so that the same members give
// the same plan whatever order the pod store lists them in.
func byName(groups []gangfit.Group) []gangfit.Group {
	out := make([]gangfit.Group, len(groups))
	for i, o := range groups {
		c := slices.Clone(o.Candidates)
		sort.Slice(c, func(a, b int) bool { return c[a].Name < c[b].Name })
		out[i] = gangfit.Group{Key: o.Key, Candidates: c, Need: o.Need}
	}
	return out
}

// AdoptReservation takes over a reservation a previous leader started: the PodGroup's Reserved
// condition c is True, and its plan is read from the members' nominations (see Adoptable). Its start
// is the condition's. The machine decides (see reservation.Adopt): only a gang this process has not
// seen trying adopts, and one it does not take over (over maxGangs, reservation off, or none of its
// members nominated while some still need a node) ends, so that the condition does not stay True. A
// gang whose members are all bound is left alone: the status writes how it was placed.
//
// groups are the job's other groups whose members' nominations the reservation holds too (nil: the
// group alone), read from members as its own.
func (g *Gang) AdoptReservation(args resv.Args, c *metav1.Condition, members []*v1.Pod, groups []string, now time.Time, queue func(prio int32) (int, bool)) resv.Effects {
	p, nominated := Adoptable(members, c.Message)
	if !nominated && !slices.ContainsFunc(members, func(m *v1.Pod) bool { return m.Spec.NodeName == "" }) {
		// Every member is bound (or none is left): the gang needs no room, and the status says
		// how it was placed (or nothing, with no member).
		return resv.Effects{}
	}
	others, _ := queue(g.Reserve.Prio)
	g.Reserve.Groups = groups
	e := g.StepReservation(args, resv.Input{Event: resv.Adopt, Now: now, AdoptSince: c.LastTransitionTime.Time, Others: others, Nominated: nominated})
	if g.Reserve.Held() {
		g.Reserve.Hold(p)
	}
	return e
}

// PlanRoom plans where a gang's missing members hold room (see gangfit.PlanReservation). It reads
// no gang state, so the plugin runs it outside its lock.
func PlanRoom(in ReserveIn, room Room) gangfit.ReservationPlan {
	nodes, err := in.Nodes()
	if err != nil {
		return gangfit.ReservationPlan{Message: err.Error()}
	}
	prio := corev1helpers.PodPriority(in.Pod)
	if j := room.Job; j != nil {
		if room.Need <= 0 {
			return gangfit.ReservationPlan{Message: "its job " + j.Job + "'s groups cannot be counted together (a group short of members, or whose spare members differ)"}
		}
		if len(j.Parts) > 0 {
			return planRoomParts(in, j, nodes, prio)
		}
		// The job's domain (no group to place has a required topology below it, see JobToReserve).
		var policy gangfit.Policy
		var pinned map[string]string
		if j.Domain != nil {
			policy, pinned = j.Domain.Policy(), j.Domain.Pinned
		}
		f := gangfit.NewReservable(in.Logger, j.Job, room.Candidates, room.Need, nodes, in.claimed(prio), prio, in.Devices)
		p := gangfit.PlanReservation(f, policy, pinned)
		p.Message = "for its job " + j.Job + " " + p.Message
		return p
	}
	policy, err := gangfit.PolicyFor(in.PodGroup, in.Pod, in.DefaultTopology)
	if err != nil {
		return gangfit.ReservationPlan{Message: err.Error()}
	}
	key := podgroup.Key(in.PodGroup.Namespace, in.PodGroup.Name)
	f := gangfit.NewReservable(in.Logger, key, room.Candidates, room.Need, nodes, in.claimed(prio), prio, in.Devices)
	return gangfit.PlanReservation(f, policy, gangfit.PinnedDomains(policy, gangfit.BoundNodes(room.Members, nodes)))
}

// Hold makes p the plan the gang holds: each member's node is where it is nominated.
func (r *Reservation) Hold(p gangfit.ReservationPlan) {
	r.Plan = p
	r.Node = make(map[types.UID]string, len(p.Assignment))
	for _, a := range p.Assignment {
		r.Node[a.Pod.UID] = a.Node
	}
}

// Adoptable is the plan a previous leader left, read from the members' nominations (the nodes they
// are nominated to and not bound), with the Reserved condition's message; ok is false when no member
// is nominated (nothing is left to adopt).
func Adoptable(members []*v1.Pod, message string) (p gangfit.ReservationPlan, ok bool) {
	for _, m := range members {
		if m.Spec.NodeName == "" && m.Status.NominatedNodeName != "" {
			p.Assignment = append(p.Assignment, gangfit.Nomination{Pod: m, Node: m.Status.NominatedNodeName})
		}
	}
	if len(p.Assignment) == 0 {
		return gangfit.ReservationPlan{}, false
	}
	p.OK, p.Message = true, message
	return p, true
}

// Queue counts the gangs other than self that hold a reservation, and reports whether one that may
// reserve and holds none goes before self, of priority prio (see reservation.Eligible and Before).
// Only gangs still trying count: one that fell below minMember or stopped trying blocks no one.
// O(gangs).
func Queue(gangs map[string]*Gang, self *Gang, args resv.Args, prio int32, now time.Time) (others int, ahead bool) {
	me := self.Reserve.State
	me.Prio = prio
	if me.Phase == resv.Idle {
		me.WaitingSince = now
	}
	for _, o := range gangs {
		if o == self {
			continue
		}
		switch {
		case o.Reserve.Held():
			others++
		case !ahead && resv.Eligible(o.Reserve.State, args, now) && resv.Before(o.Reserve.State, me):
			ahead = true
		}
	}
	return others, ahead
}

// QueueFor is Queue over the registry's gangs for g at now, as ReserveIn.Queue and AdoptReservation
// ask for it (the caller holds the registry's lock when it is called).
func (r *Registry) QueueFor(g *Gang, args resv.Args, now time.Time) func(prio int32) (others int, ahead bool) {
	return func(prio int32) (int, bool) { return Queue(r.gangs, g, args, prio, now) }
}

// WaitingBehind are the gangs other than self that wait for room in the order (namespace, name):
// when a reservation ends they take their turn.
func WaitingBehind(gangs map[string]*Gang, self *Gang) [][2]string {
	var out [][2]string
	for _, o := range gangs {
		if o != self && o.Reserve.Phase == resv.Waiting && o.Reserve.Lost == "" {
			out = append(out, [2]string{o.Namespace, o.Name})
		}
	}
	return out
}

// HeldTotals are the reservations held across gangs: how many, the CPU (milli) and memory (bytes)
// they hold, and the start of the oldest (zero when none).
type HeldTotals struct {
	Gangs       int
	MilliCPU    int64
	Memory      int64
	OldestSince time.Time
}

// Held sums the reservations held across gangs. O(gangs).
func Held(gangs map[string]*Gang) HeldTotals {
	var t HeldTotals
	for _, g := range gangs {
		if r := &g.Reserve; r.Held() {
			t.Gangs++
			t.MilliCPU += r.Plan.MilliCPU
			t.Memory += r.Plan.Memory
			if t.OldestSince.IsZero() || r.Since.Before(t.OldestSince) {
				t.OldestSince = r.Since
			}
		}
	}
	return t
}

// KeptOff names the reservations that keep pod off their room (those of its priority or more, not
// its own gang's), for its scheduling failure; empty when none does. O(gangs).
func KeptOff(gangs map[string]*Gang, pod *v1.Pod) string {
	prio := corev1helpers.PodPriority(pod)
	own, _ := podgroup.Of(pod)
	var notes []string
	for key, g := range gangs {
		r := &g.Reserve
		if !r.Held() || r.Prio < prio || (g.Namespace == pod.Namespace && g.Name == own) || own != "" && slices.Contains(r.Groups, podgroup.Key(pod.Namespace, own)) {
			continue
		}
		notes = append(notes, fmt.Sprintf("room on %s is held for PodGroup %s (a reservation since %s)", strings.Join(r.Plan.Nodes, ", "), key, r.Since.UTC().Format(time.RFC3339)))
	}
	sort.Strings(notes)
	return strings.Join(notes, "; ")
}

// HeldRoom is a reservation another pod must leave room for: the gang, since when it holds, and
// where each of its members is nominated (read only: Hold replaces the map, never changes it).
type HeldRoom struct {
	Namespace, Name string
	Since           time.Time
	Node            map[types.UID]string
}

// HeldAgainst are the reservations that keep a pod of priority prio and group own ("" for none) off
// their room: those of its priority or more, not its own gang's (as KeptOff). O(gangs).
func HeldAgainst(gangs map[string]*Gang, prio int32, own string) []HeldRoom {
	var out []HeldRoom
	for _, g := range gangs {
		r := &g.Reserve
		if !r.Held() || r.Prio < prio || g.Key() == own || slices.Contains(r.Groups, own) || len(r.Node) == 0 {
			continue
		}
		out = append(out, HeldRoom{Namespace: g.Namespace, Name: g.Name, Since: r.Since, Node: r.Node})
	}
	sort.Slice(out, func(i, j int) bool {
		return out[i].Namespace+"/"+out[i].Name < out[j].Namespace+"/"+out[j].Name
	})
	return out
}
