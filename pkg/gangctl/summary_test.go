package gangctl

import (
	"slices"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/custom-scheduler/custom-scheduler/pkg/apis/scheduling/v1alpha1"
	"github.com/custom-scheduler/custom-scheduler/pkg/coscheduling/gangfit"
	"github.com/custom-scheduler/custom-scheduler/pkg/coscheduling/podgroup"
)

// TestSummarize: what a gang waits for, for every state the scheduler's status can say, and the
// member counts.
func TestSummarize(t *testing.T) {
	pending := func(name string) *v1.Pod { return testPod("ns", "g", name, "") }
	bound := func(name string) *v1.Pod { return testPod("ns", "g", name, "n1") }
	gated := func(name string) *v1.Pod {
		p := pending(name)
		p.Spec.SchedulingGates = []v1.PodSchedulingGate{{Name: "kueue.x-k8s.io/admission"}}
		return p
	}
	terminating := func(p *v1.Pod) *v1.Pod { p.DeletionTimestamp = ptrTime(ago(time.Second)); return p }
	finished := func(p *v1.Pod, phase v1.PodPhase) *v1.Pod { p.Status.Phase = phase; return p }
	reserved := metav1.Condition{Type: podgroup.ConditionReserved, Status: metav1.ConditionTrue, Reason: podgroup.ReasonRoomHeld, Message: "holds room for 2 members on 1 nodes"}
	cases := []struct {
		name      string
		phase     v1alpha1.PodGroupPhase
		conds     []metav1.Condition
		waiting   int32
		short     *v1alpha1.PodGroupShortfall
		pods      []*v1.Pod
		want      string
		wantShort string
		counts    [6]int32 // live, bound, waiting, gated, terminating, finished
	}{
		{name: "no status yet", pods: []*v1.Pod{pending("a")}, want: WaitsForMembers, wantShort: "1 of 2 members exist", counts: [6]int32{1, 0, 0, 0, 0, 0}},
		{name: "waiting for members", phase: v1alpha1.PodGroupPending, conds: []metav1.Condition{scheduled(podgroup.ReasonWaitingForMembers, "m", 0)},
			pods: []*v1.Pod{pending("a"), terminating(pending("b"))}, want: WaitsForMembers, wantShort: "1 of 2 members exist", counts: [6]int32{1, 0, 0, 0, 1, 0}},
		{name: "gated members keep the quorum back", phase: v1alpha1.PodGroupPending, conds: []metav1.Condition{scheduled(podgroup.ReasonWaitingForMembers, "m", 0)},
			pods: []*v1.Pod{pending("a"), gated("b")}, want: WaitsForGates, wantShort: "1 of 2 members gated", counts: [6]int32{2, 0, 0, 1, 0, 0}},
		{name: "in the queue", phase: v1alpha1.PodGroupPreScheduling, conds: []metav1.Condition{scheduled(podgroup.ReasonPending, "m", 0)},
			pods: []*v1.Pod{pending("a"), pending("b")}, want: WaitsForQueue, wantShort: "its turn in the queue", counts: [6]int32{2, 0, 0, 0, 0, 0}},
		{name: "waiting for the quorum", phase: v1alpha1.PodGroupScheduling, conds: []metav1.Condition{scheduled(podgroup.ReasonWaitingForQuorum, "m", 0)}, waiting: 1,
			pods: []*v1.Pod{pending("a"), pending("b")}, want: WaitsForQuorum, wantShort: "quorum: 1 of 2 reserved or bound", counts: [6]int32{2, 0, 1, 0, 0, 0}},
		{name: "infeasible with numbers", phase: v1alpha1.PodGroupPreScheduling, conds: []metav1.Condition{scheduled(podgroup.ReasonGangInfeasible, "m", 0)},
			short: &v1alpha1.PodGroupShortfall{Reason: v1alpha1.ShortfallNodeRoom, Needed: 2, Placeable: 1}, pods: []*v1.Pod{pending("a"), pending("b")},
			want: WaitsForRoom, wantShort: "room: 1 of 2 more members fit", counts: [6]int32{2, 0, 0, 0, 0, 0}},
		{name: "infeasible for want of members: members, not room", phase: v1alpha1.PodGroupPreScheduling, conds: []metav1.Condition{scheduled(podgroup.ReasonGangInfeasible, "m", 0)},
			short: &v1alpha1.PodGroupShortfall{Reason: v1alpha1.ShortfallTooFewMembers, Needed: 2, Unscheduled: 1}, pods: []*v1.Pod{bound("a"), pending("b")},
			want: WaitsForMembers, wantShort: "1 unscheduled members of 2 needed at once", counts: [6]int32{2, 1, 0, 0, 0, 0}},
		{name: "infeasible from an older scheduler: no numbers", phase: v1alpha1.PodGroupPreScheduling, conds: []metav1.Condition{scheduled(podgroup.ReasonGangInfeasible, "m", 0)},
			pods: []*v1.Pod{pending("a"), pending("b")}, want: WaitsForRoom, wantShort: "room", counts: [6]int32{2, 0, 0, 0, 0, 0}},
		{name: "reserved: the reservation first", phase: v1alpha1.PodGroupPreScheduling, conds: []metav1.Condition{scheduled(podgroup.ReasonGangInfeasible, "m", 0), reserved},
			pods: []*v1.Pod{pending("a"), pending("b")}, want: WaitsForReservation, wantShort: "holds a reservation: holds room for 2 members on 1 nodes", counts: [6]int32{2, 0, 0, 0, 0, 0}},
		{name: "preempting", phase: v1alpha1.PodGroupPreScheduling, conds: []metav1.Condition{scheduled(podgroup.ReasonPreempting, "m", 0)},
			pods: []*v1.Pod{pending("a"), pending("b")}, want: WaitsForPreemption, wantShort: "preempting lower-priority pods", counts: [6]int32{2, 0, 0, 0, 0, 0}},
		{name: "backing off after a rejection", phase: v1alpha1.PodGroupPreScheduling, conds: []metav1.Condition{scheduled(podgroup.ReasonGangRejected, "m", 0)},
			pods: []*v1.Pod{pending("a"), pending("b")}, want: WaitsForBackoff, wantShort: "back-off after a rejected attempt", counts: [6]int32{2, 0, 0, 0, 0, 0}},
		{name: "timed out", phase: v1alpha1.PodGroupPreScheduling, conds: []metav1.Condition{scheduled(podgroup.ReasonGangTimedOut, "m", 0)},
			pods: []*v1.Pod{pending("a"), pending("b")}, want: WaitsForBackoff, wantShort: "back-off after timing out", counts: [6]int32{2, 0, 0, 0, 0, 0}},
		{name: "below quorum", phase: v1alpha1.PodGroupScheduling, conds: []metav1.Condition{scheduled(podgroup.ReasonBelowQuorum, "m", 0)},
			pods: []*v1.Pod{bound("a"), pending("b")}, want: WaitsForRebind, wantShort: "only 1 of 2 members bound", counts: [6]int32{2, 1, 0, 0, 0, 0}},
		{name: "bound", phase: v1alpha1.PodGroupScheduled, conds: []metav1.Condition{scheduled(podgroup.ReasonQuorumReached, "m", 0)},
			pods: []*v1.Pod{bound("a"), bound("b")}, want: WaitsForNothing, wantShort: "placed", counts: [6]int32{2, 2, 0, 0, 0, 0}},
		{name: "bound in a domain: where", phase: v1alpha1.PodGroupScheduled, conds: []metav1.Condition{scheduled(podgroup.ReasonQuorumReached, "m", 0),
			{Type: podgroup.ConditionTopology, Status: metav1.ConditionTrue, Reason: "RequiredDomain", Message: "placed in rack=r1 (required rack)"}},
			pods: []*v1.Pod{bound("a"), bound("b")}, want: WaitsForNothing, wantShort: "placed in rack=r1 (required rack)", counts: [6]int32{2, 2, 0, 0, 0, 0}},
		{name: "running", phase: v1alpha1.PodGroupRunning, conds: []metav1.Condition{scheduled(podgroup.ReasonQuorumReached, "m", 0)},
			pods: []*v1.Pod{bound("a"), bound("b")}, want: WaitsForNothing, wantShort: "running", counts: [6]int32{2, 2, 0, 0, 0, 0}},
		{name: "finished", phase: v1alpha1.PodGroupFinished, conds: []metav1.Condition{scheduled(podgroup.ReasonQuorumReached, "m", 0)},
			pods: []*v1.Pod{finished(bound("a"), v1.PodSucceeded), finished(bound("b"), v1.PodSucceeded)}, want: WaitsForNothing, wantShort: "finished", counts: [6]int32{0, 0, 0, 0, 0, 2}},
		{name: "failed", phase: v1alpha1.PodGroupFailed, conds: []metav1.Condition{scheduled(podgroup.ReasonBelowQuorum, "m", 0)},
			pods: []*v1.Pod{finished(bound("a"), v1.PodFailed), bound("b")}, want: WaitsForNothing, wantShort: "failed", counts: [6]int32{1, 1, 0, 0, 0, 1}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			pg := testPG("ns", "g", 2, tc.phase, tc.conds...)
			pg.Status.Waiting, pg.Status.Shortfall = tc.waiting, tc.short
			s := Summarize(pg, tc.pods, nil, nil)
			if s.WaitingFor != tc.want || s.Short != tc.wantShort {
				t.Errorf("waiting for %q (%q), want %q (%q)", s.WaitingFor, s.Short, tc.want, tc.wantShort)
			}
			if got := [6]int32{s.Live, s.Bound, s.Waiting, s.Gated, s.Terminating, s.Finished}; got != tc.counts {
				t.Errorf("counts (live, bound, waiting, gated, terminating, finished) = %v, want %v", got, tc.counts)
			}
		})
	}
}

// TestUnblock: what would let an infeasible gang fit, from its shortfall's numbers alone.
func TestUnblock(t *testing.T) {
	row := func(name v1.ResourceName, requested, free, member, largest string) v1alpha1.ResourceShortfall {
		return v1alpha1.ResourceShortfall{Name: name, Requested: resource.MustParse(requested), Free: resource.MustParse(free), Member: resource.MustParse(member), LargestFree: resource.MustParse(largest)}
	}
	cases := []struct {
		name string
		in   *v1alpha1.PodGroupShortfall
		want []string
	}{
		{name: "none"},
		{name: "too few members", in: &v1alpha1.PodGroupShortfall{Reason: v1alpha1.ShortfallTooFewMembers, Needed: 3, Unscheduled: 1},
			want: []string{"needs 3 unscheduled members at once; 1 exist: create the missing ones, or lower minMember"}},
		{name: "a member larger than any node", in: &v1alpha1.PodGroupShortfall{Reason: v1alpha1.ShortfallNodeRoom, Needed: 2, LargestFreeNode: "n1",
			Resources: []v1alpha1.ResourceShortfall{row(v1.ResourceCPU, "24", "32", "12", "8"), row(v1.ResourceMemory, "8Gi", "64Gi", "4Gi", "16Gi")}},
			want: []string{"needs 12 cpu on one node; the largest free has 8"}},
		{name: "short in total", in: &v1alpha1.PodGroupShortfall{Reason: v1alpha1.ShortfallNodeRoom, Needed: 4, Placeable: 2, LargestFreeNode: "n1",
			Resources: []v1alpha1.ResourceShortfall{row(v1.ResourceCPU, "12", "8", "3", "4")}},
			want: []string{"needs 12 cpu in total; 8 is free"}},
		{name: "fragmented", in: &v1alpha1.PodGroupShortfall{Reason: v1alpha1.ShortfallNodeRoom, Needed: 3, Placeable: 2, LargestFreeNode: "n1",
			Resources: []v1alpha1.ResourceShortfall{row(v1.ResourceCPU, "9", "10", "3", "5")}},
			want: []string{"the free room is split across nodes: 2 of the 3 members fit node by node"}},
		{name: "minResources", in: &v1alpha1.PodGroupShortfall{Reason: v1alpha1.ShortfallMinResources, Needed: 2,
			Resources: []v1alpha1.ResourceShortfall{row(v1.ResourceCPU, "10", "8", "1", "4"), row("example.com/gpu", "3", "0", "0", "0")}},
			want: []string{"spec.minResources asks 10 cpu; 8 is free on the nodes the members may use", "spec.minResources asks 3 example.com/gpu; 0 is free on the nodes the members may use"}},
		{name: "a domain", in: &v1alpha1.PodGroupShortfall{Reason: v1alpha1.ShortfallTopologyDomain, Needed: 5, Placeable: 4, TopologyKey: "rack",
			Domains: []v1alpha1.DomainShortfall{{Value: "r2", Placeable: 4}}, Resources: []v1alpha1.ResourceShortfall{row(v1.ResourceCPU, "15", "40", "3", "4")}},
			want: []string{"needs 5 members in one rack domain; the roomiest, rack=r2, fits 4"}},
		{name: "no domain", in: &v1alpha1.PodGroupShortfall{Reason: v1alpha1.ShortfallTopologyDomain, Needed: 2, TopologyKey: "rack"},
			want: []string{"no rack domain can be used: label the nodes with rack, or bind the members within one domain"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, Unblock(tc.in)); diff != "" {
				t.Errorf("unblock (-want,+got):\n%s", diff)
			}
		})
	}
}

func ptrTime(t metav1.Time) *metav1.Time { return &t }

// TestGangEvents: only the gang's and its members' events, newest first, the same event of the same
// object once with its count.
func TestGangEvents(t *testing.T) {
	ev := func(uid, reason, msg string, at time.Duration, count int32) v1.Event {
		return v1.Event{InvolvedObject: v1.ObjectReference{UID: types.UID(uid)}, Type: v1.EventTypeWarning, Reason: reason, Message: msg, LastTimestamp: ago(at), Count: count}
	}
	uids := map[string]string{"pg": "PodGroup/g", "a": "Pod/a"}
	got := gangEvents([]v1.Event{
		ev("a", "FailedScheduling", "no room", 3*time.Minute, 1),
		ev("other", "FailedScheduling", "no room", time.Minute, 1),
		ev("pg", podgroup.ReasonGangInfeasible, "no room", 2*time.Minute, 0),
		ev("a", "FailedScheduling", "no room", time.Minute, 2),
		ev("a", "FailedScheduling", "another message", 4*time.Minute, 1),
	}, uids)
	want := []Event{
		{Last: ago(time.Minute), Type: v1.EventTypeWarning, Reason: "FailedScheduling", Object: "Pod/a", Message: "no room", Count: 3},
		{Last: ago(2 * time.Minute), Type: v1.EventTypeWarning, Reason: podgroup.ReasonGangInfeasible, Object: "PodGroup/g", Message: "no room", Count: 1},
		{Last: ago(4 * time.Minute), Type: v1.EventTypeWarning, Reason: "FailedScheduling", Object: "Pod/a", Message: "another message", Count: 1},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("events (-want,+got):\n%s", diff)
	}
}

// TestFit: a message is cut to the terminal's width, never below 20 characters, and not at all
// without a terminal.
func TestFit(t *testing.T) {
	msg := strings.Repeat("x", 100)
	cases := []struct {
		width, used, want int
	}{{0, 50, 100}, {200, 50, 100}, {80, 50, 30}, {60, 50, 20}}
	for _, tc := range cases {
		got := style{width: tc.width}.fit(msg, tc.used)
		if n := utf8.RuneCountInString(got); n != tc.want {
			t.Errorf("width %d, used %d: %d characters, want %d", tc.width, tc.used, n, tc.want)
		}
	}
}

// TestOtherSchedulers: pods of a scheduler that is none of ours are never members of our gangs; a
// gang whose pods of ours are too few for its quorum while others name another scheduler waits for
// no member our profiles would see, and says so, naming theirs and ours.
func TestOtherSchedulers(t *testing.T) {
	pod := func(name, scheduler, node string) *v1.Pod {
		p := testPod("ns", "g", name, node)
		p.Spec.SchedulerName = scheduler
		return p
	}
	succeeded := func(p *v1.Pod) *v1.Pod { p.Status.Phase = v1.PodSucceeded; return p }
	cases := []struct {
		name        string
		ours        []string
		reason      string
		pods        []*v1.Pod
		want        string
		wantShort   string
		wantForeign int32
		wantTheirs  []string
		wantLive    int32 // pods of ours only
	}{
		{name: "every pod another scheduler's, no status", pods: []*v1.Pod{pod("a", "default-scheduler", ""), pod("b", "default-scheduler", ""), pod("c", "default-scheduler", "")},
			want: WaitsForScheduler, wantShort: "no scheduler of ours serves its pods: they name default-scheduler (ours: custom-scheduler)", wantForeign: 3, wantTheirs: []string{"default-scheduler"}, wantLive: 0},
		{name: "no schedulerName is the default scheduler's", pods: []*v1.Pod{pod("a", "", ""), pod("b", "volcano", "")},
			want: WaitsForScheduler, wantShort: "no scheduler of ours serves its pods: they name default-scheduler, volcano (ours: custom-scheduler)", wantForeign: 2, wantTheirs: []string{"default-scheduler", "volcano"}, wantLive: 0},
		{name: "bound by another scheduler: still not ours", pods: []*v1.Pod{pod("a", "default-scheduler", "n1"), pod("b", "default-scheduler", "n1"), pod("c", "default-scheduler", "n2")},
			want: WaitsForScheduler, wantShort: "no scheduler of ours serves its pods: they name default-scheduler (ours: custom-scheduler)", wantForeign: 3, wantTheirs: []string{"default-scheduler"}, wantLive: 0},
		{name: "too few of ours", reason: podgroup.ReasonWaitingForMembers, pods: []*v1.Pod{pod("a", "custom-scheduler", ""), pod("b", "volcano", ""), pod("c", "volcano", "")},
			want: WaitsForScheduler, wantShort: "2 of 3 pods name volcano, which no scheduler of ours serves (ours: custom-scheduler); only 1 of minMember 3 are ours", wantForeign: 2, wantTheirs: []string{"volcano"}, wantLive: 1},
		{name: "another profile of ours", ours: []string{"custom-scheduler", "scheduler-plugins-scheduler"}, reason: podgroup.ReasonPending,
			pods: []*v1.Pod{pod("a", "custom-scheduler", ""), pod("b", "scheduler-plugins-scheduler", ""), pod("c", "scheduler-plugins-scheduler", "")},
			want: WaitsForQueue, wantShort: "its turn in the queue", wantLive: 3},
		{name: "enough of ours, one aside", reason: podgroup.ReasonPending, pods: []*v1.Pod{pod("a", "custom-scheduler", ""), pod("b", "custom-scheduler", ""), pod("c", "custom-scheduler", ""), pod("d", "volcano", "")},
			want: WaitsForQueue, wantShort: "its turn in the queue", wantForeign: 1, wantTheirs: []string{"volcano"}, wantLive: 3},
		{name: "placed by ours: the status has the word", reason: podgroup.ReasonQuorumReached, pods: []*v1.Pod{pod("a", "custom-scheduler", "n1"), pod("b", "volcano", ""), pod("c", "volcano", "")},
			want: WaitsForNothing, wantShort: "placed", wantForeign: 2, wantTheirs: []string{"volcano"}, wantLive: 1},
		{name: "another scheduler's pod that finished is no pod of the gang's now", reason: podgroup.ReasonWaitingForMembers,
			pods: []*v1.Pod{pod("a", "custom-scheduler", ""), pod("b", "custom-scheduler", ""), succeeded(pod("c", "volcano", "n1"))},
			want: WaitsForMembers, wantShort: "2 of 3 members exist", wantLive: 2},
		{name: "too few members and none of another scheduler: members", reason: podgroup.ReasonWaitingForMembers, pods: []*v1.Pod{pod("a", "custom-scheduler", "")},
			want: WaitsForMembers, wantShort: "1 of 3 members exist", wantLive: 1},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var conds []metav1.Condition
			if tc.reason != "" {
				conds = append(conds, scheduled(tc.reason, "m", 0))
			}
			s := Summarize(testPG("ns", "g", 3, "", conds...), tc.pods, nil, tc.ours)
			if s.WaitingFor != tc.want || s.Short != tc.wantShort {
				t.Errorf("waiting for %q (%q), want %q (%q)", s.WaitingFor, s.Short, tc.want, tc.wantShort)
			}
			if s.Foreign != tc.wantForeign || !slices.Equal(s.ForeignSchedulers, tc.wantTheirs) || s.Live != tc.wantLive {
				t.Errorf("foreign %d %q, live %d; want %d %q, live %d", s.Foreign, s.ForeignSchedulers, s.Live, tc.wantForeign, tc.wantTheirs, tc.wantLive)
			}
			ours := tc.ours
			if ours == nil {
				ours = []string{DefaultSchedulerName}
			}
			for _, m := range s.Members {
				if m.Foreign == slices.Contains(ours, m.Scheduler) {
					t.Errorf("member %s of scheduler %q: foreign %v", m.Name, m.Scheduler, m.Foreign)
				}
			}
		})
	}
}

// TestUnblockDevices: a device kind's shortfall row (devices/<class>, counted in members) is said
// in devices of its class for so many members, never by the row's name.
func TestUnblockDevices(t *testing.T) {
	row := func(name v1.ResourceName, requested, free, member, largest string) v1alpha1.ResourceShortfall {
		return v1alpha1.ResourceShortfall{Name: name, Requested: resource.MustParse(requested), Free: resource.MustParse(free), Member: resource.MustParse(member), LargestFree: resource.MustParse(largest)}
	}
	gpu := v1.ResourceName("devices/gpu.example.com")
	cases := []struct {
		name string
		in   *v1alpha1.PodGroupShortfall
		want []string
	}{
		{name: "too few devices in total", in: &v1alpha1.PodGroupShortfall{Reason: v1alpha1.ShortfallNodeRoom, Needed: 4, Placeable: 3,
			Resources: []v1alpha1.ResourceShortfall{row(v1.ResourceCPU, "4", "24", "1", "8"), row(gpu, "4", "3", "1", "1")}},
			want: []string{"needs devices of class gpu.example.com for 4 members; the free ones hold 3"}},
		{name: "no node has any", in: &v1alpha1.PodGroupShortfall{Reason: v1alpha1.ShortfallMemberFitsNowhere, Needed: 2,
			Resources: []v1alpha1.ResourceShortfall{row(gpu, "2", "0", "1", "0")}},
			want: []string{"no node the members may use has free devices of class gpu.example.com for a member", "needs devices of class gpu.example.com for 2 members; the free ones hold 0"}},
		{name: "a required rack", in: &v1alpha1.PodGroupShortfall{Reason: v1alpha1.ShortfallTopologyDomain, Needed: 4, Placeable: 3, TopologyKey: "rack",
			Domains:   []v1alpha1.DomainShortfall{{Value: "r1", Placeable: 3}, {Value: "r2", Placeable: 2}},
			Resources: []v1alpha1.ResourceShortfall{row(v1.ResourceCPU, "4", "40", "1", "8"), row(gpu, "4", "5", "1", "1")}},
			want: []string{"needs 4 members, with their devices of class gpu.example.com, in one rack domain; the roomiest, rack=r1, fits 3"}},
		{name: "two kinds, one of two classes", in: &v1alpha1.PodGroupShortfall{Reason: v1alpha1.ShortfallTopologyDomain, Needed: 4, Placeable: 1, TopologyKey: "rack",
			Domains:   []v1alpha1.DomainShortfall{{Value: "r1", Placeable: 1}},
			Resources: []v1alpha1.ResourceShortfall{row(gpu, "2", "2", "1", "1"), row("devices/gpu.example.com+nic.example.com#1", "2", "1", "1", "1")}},
			want: []string{"needs 4 members, with their devices of classes gpu.example.com and nic.example.com, in one rack domain; the roomiest, rack=r1, fits 1",
				"needs devices of classes gpu.example.com and nic.example.com for 2 members; the free ones hold 1"}},
		{name: "an extended resource of a device plugin is a resource", in: &v1alpha1.PodGroupShortfall{Reason: v1alpha1.ShortfallNodeRoom, Needed: 4,
			Resources: []v1alpha1.ResourceShortfall{row("nvidia.com/gpu", "4", "3", "1", "1")}},
			want: []string{"needs 4 nvidia.com/gpu in total; 3 is free"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, Unblock(tc.in)); diff != "" {
				t.Errorf("unblock (-want,+got):\n%s", diff)
			}
		})
	}
}

// TestDeviceClasses: the device classes of a shortfall row, read from the names the whole-gang
// check gives its device kinds (gangfit.DeviceKindName).
func TestDeviceClasses(t *testing.T) {
	taken := func(v1.ResourceName) bool { return true }
	free := func(v1.ResourceName) bool { return false }
	cases := []struct {
		name v1.ResourceName
		want []string
		ok   bool
	}{
		{name: gangfit.DeviceKindName([]string{"gpu.example.com"}, 0, free), want: []string{"gpu.example.com"}, ok: true},
		{name: gangfit.DeviceKindName([]string{"gpu.example.com", "nic.example.com"}, 0, free), want: []string{"gpu.example.com", "nic.example.com"}, ok: true},
		{name: gangfit.DeviceKindName([]string{"gpu.example.com"}, 2, taken), want: []string{"gpu.example.com"}, ok: true},
		{name: v1.ResourceCPU},
		{name: "example.com/gpu"},
		{name: "devices/"},
	}
	for _, tc := range cases {
		got, ok := DeviceClasses(tc.name)
		if ok != tc.ok || !slices.Equal(got, tc.want) {
			t.Errorf("DeviceClasses(%q) = %q, %v; want %q, %v", tc.name, got, ok, tc.want, tc.ok)
		}
		if ok != gangfit.IsDeviceKind(tc.name) && tc.name != "devices/" {
			t.Errorf("%q: a device kind to kubectl gang %v, to the check %v", tc.name, ok, gangfit.IsDeviceKind(tc.name))
		}
	}
}
