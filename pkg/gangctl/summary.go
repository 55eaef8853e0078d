// Package gangctl is kubectl-gang: it reads PodGroups, their member pods and their events from the
// API (nothing from the scheduler) and says where each gang stands and what it waits for. Summarize
// is the one decision, a pure function of the objects and the clock; the rest prints it or fetches
// its inputs.
package gangctl

import (
	"cmp"
	"fmt"
	"slices"
	"strings"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/custom-scheduler/custom-scheduler/pkg/apis/scheduling/v1alpha1"
	"github.com/custom-scheduler/custom-scheduler/pkg/coscheduling/podgroup"
)

// Member states, as a gang's quorum sees them.
const (
	StateBound       = "Bound"
	StatePending     = "Pending"
	StateGated       = "Gated"
	StateTerminating = "Terminating"
	StateSucceeded   = "Succeeded"
	StateFailed      = "Failed"
)

// What a gang waits for, in a word (Summary.WaitingFor).
const (
	WaitsForNothing     = "Nothing"
	WaitsForMembers     = "Members"
	WaitsForGates       = "Gates"
	WaitsForQueue       = "Queue"
	WaitsForQuorum      = "Quorum"
	WaitsForRoom        = "Room"
	WaitsForReservation = "Reservation"
	WaitsForPreemption  = "Preemption"
	WaitsForBackoff     = "Backoff"
	WaitsForRebind      = "LostMembers"
	// WaitsForScheduler: too few of its pods are ours for its quorum, the others naming a scheduler
	// no profile of ours serves (see Summary.Schedulers).
	WaitsForScheduler = "Scheduler"
)

// DefaultSchedulerName is the scheduler kubectl gang takes as ours unless told otherwise (the
// --scheduler-name flag, or KUBECTL_GANG_SCHEDULER_NAMES): the schedulerName of the shipped profile
// (manifests/base/scheduler-config.yaml, the chart's schedulerName).
const DefaultSchedulerName = "custom-scheduler"

// Summary is one gang, as kubectl gang shows it (and -o json prints it).
type Summary struct {
	Namespace string `json:"namespace"`
	// Name is the group's name as the scheduler's messages spell it: a PodGroup of ours by its name,
	// an in-tree object as podgroups.scheduling.k8s.io/NAME or compositepodgroups.scheduling.k8s.io/NAME.
	Name string `json:"name"`
	// APIVersion and Kind are the object's: a PodGroup of ours (scheduling.x-k8s.io/v1alpha1), an
	// in-tree PodGroup (scheduling.k8s.io/v1beta1) or CompositePodGroup (scheduling.k8s.io/v1alpha3).
	APIVersion string                 `json:"apiVersion"`
	Kind       string                 `json:"kind"`
	Phase      v1alpha1.PodGroupPhase `json:"phase"`
	MinMember  int32                  `json:"minMember"`
	Created    metav1.Time            `json:"created"`
	// Counts of the members (pods of ours with its label): live (not terminating, not finished), bound (live and on a node), waiting
	// at Permit (the scheduler's count), gated (live, with scheduling gates), terminating, finished.
	Live        int32 `json:"live"`
	Bound       int32 `json:"bound"`
	Waiting     int32 `json:"waiting"`
	Gated       int32 `json:"gated"`
	Terminating int32 `json:"terminating"`
	Finished    int32 `json:"finished"`
	// Schedulers are the schedulers of ours (each a profile's schedulerName: --scheduler-name);
	// Foreign counts the live pods with the gang's label whose spec.schedulerName is none of them: no
	// profile of ours counts them, so neither do the counts above (Members lists them, marked);
	// ForeignSchedulers names the schedulers they name.
	Schedulers        []string `json:"schedulers"`
	Foreign           int32    `json:"foreign,omitempty"`
	ForeignSchedulers []string `json:"foreignSchedulers,omitempty"`
	// WaitingFor is what the gang waits for (a WaitsFor* word, empty when it waits for nothing), Short
	// the same in a few words, Reason and Message the Scheduled condition's, Since when it has said so.
	WaitingFor string       `json:"waitingFor"`
	Short      string       `json:"short"`
	Reason     string       `json:"reason,omitempty"`
	Message    string       `json:"message,omitempty"`
	Since      *metav1.Time `json:"since,omitempty"`
	// Domain is the Topology condition's: where the gang goes.
	Domain *Condition `json:"domain,omitempty"`
	// Reservation is the Reserved condition's: held (True) or how the last one ended; ReservedUntil
	// when a held one ends at the latest.
	Reservation   *Condition   `json:"reservation,omitempty"`
	ReservedUntil *metav1.Time `json:"reservedUntil,omitempty"`
	// BackoffUntil is when the back-off after a failed attempt ends.
	BackoffUntil *metav1.Time `json:"backoffUntil,omitempty"`
	// Shortfall is the status's numbers of an infeasible gang; Unblock says, from them, what would
	// let the gang fit.
	Shortfall *v1alpha1.PodGroupShortfall `json:"shortfall,omitempty"`
	Unblock   []string                    `json:"unblock,omitempty"`
	Members   []Member                    `json:"members"`
	// Events are the gang's and its members' events, newest first.
	Events []Event `json:"events,omitempty"`
	// A group in a job's tree (see AttachTrees): Parent is the composite it names, Root the job's
	// root, Tree the job's groups with their numbers, Blockers the groups that keep the job from
	// being whole; TreeProblem why the tree cannot be resolved. Composite is a composite's own numbers.
	Parent      string       `json:"parent,omitempty"`
	Root        string       `json:"root,omitempty"`
	Composite   *Composite   `json:"composite,omitempty"`
	Tree        *TreeNode    `json:"tree,omitempty"`
	Blockers    []Blocker    `json:"blockers,omitempty"`
	TreeProblem *TreeProblem `json:"treeProblem,omitempty"`
	// Derived: an in-tree PodGroup, whose API carries none of our status: its phase and reason are
	// derived from its members and its own conditions (see deriveInTree); Upstream are an in-tree
	// object's own conditions.
	Derived  bool                `json:"derived,omitempty"`
	Upstream []UpstreamCondition `json:"upstreamConditions,omitempty"`
}

// Composite is a composite's numbers: its policy (Gang or Basic), its minGroupCount (1 for a basic
// one), its children and how many of them are whole.
type Composite struct {
	Policy        string `json:"policy"`
	MinGroupCount int32  `json:"minGroupCount"`
	Children      int32  `json:"children"`
	Whole         int32  `json:"whole"`
}

// Condition is one of the PodGroup's conditions, as shown.
type Condition struct {
	Status  bool        `json:"status"`
	Reason  string      `json:"reason"`
	Message string      `json:"message,omitempty"`
	Since   metav1.Time `json:"since"`
}

// Member is one member pod.
type Member struct {
	Name      string   `json:"name"`
	State     string   `json:"state"`
	Node      string   `json:"node,omitempty"`
	Nominated string   `json:"nominated,omitempty"`
	Gates     []string `json:"gates,omitempty"`
	// Scheduler is the pod's spec.schedulerName; Foreign, that it is none of ours.
	Scheduler string `json:"scheduler"`
	Foreign   bool   `json:"foreign,omitempty"`
}

// Event is one event of the gang or a member.
type Event struct {
	Last    metav1.Time `json:"last"`
	Type    string      `json:"type"`
	Reason  string      `json:"reason"`
	Object  string      `json:"object"`
	Message string      `json:"message"`
	Count   int32       `json:"count,omitempty"`
}

// Summarize says where pg stands from its member pods (those with its label, in its namespace),
// events (any; those of pg and its members are kept) and the names of our schedulers (ours: the
// schedulerNames of our profiles; none: DefaultSchedulerName).
func Summarize(pg *v1alpha1.PodGroup, pods []*v1.Pod, events []v1.Event, ours []string) Summary {
	if len(ours) == 0 {
		ours = []string{DefaultSchedulerName}
	}
	s := Summary{Namespace: pg.Namespace, Name: pg.Name, APIVersion: v1alpha1.SchemeGroupVersion.String(), Kind: KindPodGroup, Phase: pg.Status.Phase, MinMember: int32(podgroup.MinMember(pg)),
		Created: pg.CreationTimestamp, Waiting: pg.Status.Waiting, Shortfall: pg.Status.Shortfall,
		ReservedUntil: pg.Status.ReservedUntil, BackoffUntil: pg.Status.BackoffUntil, Schedulers: ours}
	if s.Phase == "" {
		s.Phase = v1alpha1.PodGroupPending
	}
	uids := map[string]string{string(pg.UID): "PodGroup/" + pg.Name}
	for _, p := range pods {
		uids[string(p.UID)] = "Pod/" + p.Name
		m := Member{Name: p.Name, Node: p.Spec.NodeName, Nominated: p.Status.NominatedNodeName, Scheduler: schedulerOf(p)}
		m.Foreign = !slices.Contains(ours, m.Scheduler)
		switch {
		case p.Status.Phase == v1.PodSucceeded:
			m.State = StateSucceeded
		case p.Status.Phase == v1.PodFailed:
			m.State = StateFailed
		case p.DeletionTimestamp != nil:
			m.State = StateTerminating
		case p.Spec.NodeName != "":
			m.State = StateBound
		case len(p.Spec.SchedulingGates) > 0:
			m.State = StateGated
			for _, g := range p.Spec.SchedulingGates {
				m.Gates = append(m.Gates, g.Name)
			}
		default:
			m.State = StatePending
		}
		s.Members = append(s.Members, m)
		live := m.State == StateBound || m.State == StateGated || m.State == StatePending
		if m.Foreign {
			// Listed, but no member of the gang's: no profile of ours counts it.
			if live {
				s.Foreign++
				if !slices.Contains(s.ForeignSchedulers, m.Scheduler) {
					s.ForeignSchedulers = append(s.ForeignSchedulers, m.Scheduler)
				}
			}
			continue
		}
		switch m.State {
		case StateSucceeded, StateFailed:
			s.Finished++
		case StateTerminating:
			s.Terminating++
		case StateBound:
			s.Bound++
		case StateGated:
			s.Gated++
		}
		if live {
			s.Live++
		}
	}
	slices.Sort(s.ForeignSchedulers)
	slices.SortFunc(s.Members, func(a, b Member) int { return strings.Compare(a.Name, b.Name) })
	if podgroup.IsInTree(pg) {
		s.APIVersion = pg.APIVersion
		deriveInTree(&s, pg, pods)
	} else if c := meta.FindStatusCondition(pg.Status.Conditions, podgroup.ConditionScheduled); c != nil {
		s.Reason, s.Message, s.Since = c.Reason, c.Message, &c.LastTransitionTime
	}
	s.Domain = condition(pg, podgroup.ConditionTopology)
	s.Reservation = condition(pg, podgroup.ConditionReserved)
	s.WaitingFor, s.Short = waitingFor(s)
	if d := s.Domain; d != nil && d.Message != "" && (s.WaitingFor == WaitsForNothing || s.WaitingFor == WaitsForQuorum) && s.Phase != v1alpha1.PodGroupFinished {
		if s.Short == "placed" {
			s.Short = d.Message // "placed in key=value (...)"
		} else {
			s.Short += "; " + d.Message
		}
	}
	s.Unblock = Unblock(s.Shortfall)
	s.Events = gangEvents(events, uids)
	return s
}

// gangEvents are the events of the objects in uids, newest first; events that say the same of the
// same object (a FailedScheduling per attempt) are one, counted, at their newest.
func gangEvents(events []v1.Event, uids map[string]string) []Event {
	type same struct{ object, typ, reason, message string }
	at := map[same]int{}
	var out []Event
	for _, e := range events {
		obj, ok := uids[string(e.InvolvedObject.UID)]
		if !ok {
			continue
		}
		ev := Event{Last: lastSeen(e), Type: e.Type, Reason: e.Reason, Object: obj, Message: e.Message, Count: max(e.Count, 1)}
		k := same{obj, e.Type, e.Reason, e.Message}
		if i, ok := at[k]; ok {
			out[i].Count += ev.Count
			if ev.Last.After(out[i].Last.Time) {
				out[i].Last = ev.Last
			}
			continue
		}
		at[k] = len(out)
		out = append(out, ev)
	}
	slices.SortStableFunc(out, func(a, b Event) int {
		return cmp.Or(b.Last.Compare(a.Last.Time), strings.Compare(a.Object, b.Object), strings.Compare(a.Reason, b.Reason))
	})
	return out
}

// schedulerOf is the scheduler a pod names (the apiserver's default when it names none).
func schedulerOf(p *v1.Pod) string {
	if p.Spec.SchedulerName == "" {
		return v1.DefaultSchedulerName
	}
	return p.Spec.SchedulerName
}

// condition is pg's condition of type t, if it has one.
func condition(pg *v1alpha1.PodGroup, t string) *Condition {
	c := meta.FindStatusCondition(pg.Status.Conditions, t)
	if c == nil {
		return nil
	}
	return &Condition{Status: c.Status == metav1.ConditionTrue, Reason: c.Reason, Message: c.Message, Since: c.LastTransitionTime}
}

// lastSeen is when an event last happened, for events.k8s.io and core events alike.
func lastSeen(e v1.Event) metav1.Time {
	switch {
	case e.Series != nil && !e.Series.LastObservedTime.IsZero():
		return metav1.NewTime(e.Series.LastObservedTime.Time)
	case !e.LastTimestamp.IsZero():
		return e.LastTimestamp
	case !e.EventTime.IsZero():
		return metav1.NewTime(e.EventTime.Time)
	}
	return e.CreationTimestamp
}

// waitingFor is what the gang waits for, decided from its phase, its conditions and its members,
// the most decisive first.
func waitingFor(s Summary) (string, string) {
	switch s.Phase {
	case v1alpha1.PodGroupFinished:
		return WaitsForNothing, "finished"
	case v1alpha1.PodGroupFailed:
		return WaitsForNothing, "failed"
	}
	if s.Reservation != nil && s.Reservation.Status {
		return WaitsForReservation, "holds a reservation: " + s.Reservation.Message
	}
	// Pods of another scheduler are never members of our gangs: a gang whose pods of ours are too
	// few for its quorum while others name another scheduler waits for no member our profiles would
	// see (its status, if any, says WaitingForMembers, counting ours only).
	if s.Foreign > 0 && s.Live < s.MinMember && (s.Reason == "" || s.Reason == podgroup.ReasonWaitingForMembers) {
		theirs, mine := strings.Join(s.ForeignSchedulers, ", "), strings.Join(s.Schedulers, ", ")
		if s.Live == 0 {
			return WaitsForScheduler, fmt.Sprintf("no scheduler of ours serves its pods: they name %s (ours: %s)", theirs, mine)
		}
		return WaitsForScheduler, fmt.Sprintf("%d of %d pods name %s, which no scheduler of ours serves (ours: %s); only %d of minMember %d are ours",
			s.Foreign, s.Foreign+s.Live, theirs, mine, s.Live, s.MinMember)
	}
	if s.Bound < s.MinMember && s.Gated > 0 && s.Live >= s.MinMember && s.Live-s.Gated < s.MinMember {
		return WaitsForGates, fmt.Sprintf("%d of %d members gated", s.Gated, s.Live)
	}
	if s.Derived && s.Reason == "" {
		// Enough members, none bound, and no attempt's result on the in-tree object: the scheduler
		// keeps why in memory.
		return WaitsForQueue, fmt.Sprintf("%d of %d members exist, none bound; an in-tree group has no reason of ours", s.Live, s.MinMember)
	}
	switch s.Reason {
	case podgroup.ReasonQuorumReached:
		if s.Phase == v1alpha1.PodGroupRunning {
			return WaitsForNothing, "running"
		}
		return WaitsForNothing, "placed"
	case podgroup.ReasonWaitingForMembers, "":
		return WaitsForMembers, fmt.Sprintf("%d of %d members exist", s.Live, s.MinMember)
	case podgroup.ReasonPending:
		return WaitsForQueue, "its turn in the queue"
	case podgroup.ReasonWaitingForQuorum:
		return WaitsForQuorum, fmt.Sprintf("quorum: %d of %d reserved or bound", s.Waiting+s.Bound, s.MinMember)
	case podgroup.ReasonGangInfeasible:
		switch sf := s.Shortfall; {
		case sf == nil:
			return WaitsForRoom, "room"
		case sf.Reason == v1alpha1.ShortfallTooFewMembers:
			return WaitsForMembers, fmt.Sprintf("%d unscheduled members of %d needed at once", sf.Unscheduled, sf.Needed)
		case sf.Reason == v1alpha1.ShortfallMinResources:
			return WaitsForRoom, "room for spec.minResources"
		}
		return WaitsForRoom, fmt.Sprintf("room: %d of %d more members fit", s.Shortfall.Placeable, s.Shortfall.Needed)
	case podgroup.ReasonPreempting:
		return WaitsForPreemption, "preempting lower-priority pods"
	case podgroup.ReasonGangRejected:
		return WaitsForBackoff, "back-off after a rejected attempt"
	case podgroup.ReasonGangTimedOut:
		return WaitsForBackoff, "back-off after timing out"
	case podgroup.ReasonBelowQuorum:
		return WaitsForRebind, fmt.Sprintf("only %d of %d members bound", s.Bound, s.MinMember)
	}
	return WaitsForQueue, s.Reason
}

// Unblock says, from an infeasible gang's shortfall, what would let it fit: one sentence per fact,
// the most direct first. None without a shortfall.
func Unblock(sf *v1alpha1.PodGroupShortfall) []string {
	if sf == nil {
		return nil
	}
	var out []string
	switch sf.Reason {
	case v1alpha1.ShortfallTooFewMembers:
		return []string{fmt.Sprintf("needs %d unscheduled members at once; %d exist: create the missing ones, or lower minMember", sf.Needed, sf.Unscheduled)}
	case v1alpha1.ShortfallTopologyDomain:
		if len(sf.Domains) == 0 {
			out = append(out, fmt.Sprintf("no %s domain can be used: label the nodes with %s, or bind the members within one domain", sf.TopologyKey, sf.TopologyKey))
		} else {
			d := sf.Domains[0]
			// A domain's count is of members with everything they ask, their devices among it.
			with := ""
			if classes := deviceRows(sf.Resources); len(classes) > 0 {
				with = ", with their devices of " + classPhrase(classes) + ","
			}
			out = append(out, fmt.Sprintf("needs %d members%s in one %s domain; the roomiest, %s=%s, fits %d", sf.Needed, with, sf.TopologyKey, sf.TopologyKey, d.Value, d.Placeable))
		}
	}
	for _, r := range sf.Resources {
		if sf.Reason == v1alpha1.ShortfallMinResources {
			if r.Requested.Cmp(r.Free) > 0 {
				out = append(out, fmt.Sprintf("spec.minResources asks %s %s; %s is free on the nodes the members may use", r.Requested.String(), r.Name, r.Free.String()))
			}
			continue
		}
		if classes, ok := DeviceClasses(r.Name); ok {
			out = append(out, unblockDevices(classPhrase(classes), r)...)
			continue
		}
		if r.Member.Cmp(r.LargestFree) > 0 {
			out = append(out, fmt.Sprintf("needs %s %s on one node; the largest free has %s", r.Member.String(), r.Name, r.LargestFree.String()))
		}
		if r.Requested.Cmp(r.Free) > 0 {
			out = append(out, fmt.Sprintf("needs %s %s in total; %s is free", r.Requested.String(), r.Name, r.Free.String()))
		}
	}
	if len(out) == 0 && sf.Reason == v1alpha1.ShortfallNodeRoom {
		out = append(out, fmt.Sprintf("the free room is split across nodes: %d of the %d members fit node by node", sf.Placeable, sf.Needed))
	}
	return out
}

// devicePrefix starts the name of a device kind in a shortfall: the whole-gang check counts the
// devices members claim through Dynamic Resource Allocation as one more resource per kind, named
// "devices/<class>" after the device classes the kind's members claim ("+" between several, "#<n>"
// after a name two kinds share; see gangfit.DeviceKindName), in units of one member's devices.
const devicePrefix = "devices/"

// DeviceClasses returns the device classes a shortfall row of a device kind counts, and whether the
// row is one.
func DeviceClasses(name v1.ResourceName) ([]string, bool) {
	rest, ok := strings.CutPrefix(string(name), devicePrefix)
	if !ok || rest == "" {
		return nil, false
	}
	if i := strings.LastIndexByte(rest, '#'); i > 0 {
		rest = rest[:i]
	}
	return strings.Split(rest, "+"), true
}

// deviceRows returns the device classes of a shortfall's device rows, each once, in order.
func deviceRows(rows []v1alpha1.ResourceShortfall) []string {
	var out []string
	for _, r := range rows {
		classes, _ := DeviceClasses(r.Name)
		for _, c := range classes {
			if !slices.Contains(out, c) {
				out = append(out, c)
			}
		}
	}
	return out
}

// classPhrase is "class a", or "classes a and b" ("a, b and c").
func classPhrase(classes []string) string {
	if len(classes) == 1 {
		return "class " + classes[0]
	}
	return "classes " + strings.Join(classes[:len(classes)-1], ", ") + " and " + classes[len(classes)-1]
}

// unblockDevices says what a device kind's row is short of. Its amounts are members, not devices:
// one unit is what one member claims (the check counts how many members' claims the free devices
// hold at once, node by node), so the devices are said for so many members.
func unblockDevices(class string, r v1alpha1.ResourceShortfall) []string {
	var out []string
	if r.Member.Cmp(r.LargestFree) > 0 {
		if r.LargestFree.IsZero() {
			out = append(out, fmt.Sprintf("no node the members may use has free devices of %s for a member", class))
		} else {
			out = append(out, fmt.Sprintf("needs devices of %s for %s members on one node; the most any node's free ones hold is %s", class, r.Member.String(), r.LargestFree.String()))
		}
	}
	if r.Requested.Cmp(r.Free) > 0 {
		out = append(out, fmt.Sprintf("needs devices of %s for %s members; the free ones hold %s", class, r.Requested.String(), r.Free.String()))
	}
	return out
}
