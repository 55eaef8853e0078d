package gangctl

import (
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	schedulingv1alpha3 "k8s.io/api/scheduling/v1alpha3"
	schedulingv1beta1 "k8s.io/api/scheduling/v1beta1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/custom-scheduler/custom-scheduler/pkg/apis/scheduling/v1alpha1"
	"github.com/custom-scheduler/custom-scheduler/pkg/coscheduling/podgroup"
)

// inTreePG is an in-tree PodGroup: a gang of minCount (0: basic) under parent ("" for none).
func inTreePG(ns, name string, minCount int32, parent string, conds ...metav1.Condition) *schedulingv1beta1.PodGroup {
	pg := &schedulingv1beta1.PodGroup{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, UID: types.UID(ns + "-it-" + name), CreationTimestamp: ago(10 * time.Minute)},
		Status: schedulingv1beta1.PodGroupStatus{Conditions: conds}}
	if minCount > 0 {
		pg.Spec.SchedulingPolicy.Gang = &schedulingv1beta1.GangSchedulingPolicy{MinCount: minCount}
	} else {
		pg.Spec.SchedulingPolicy.Basic = &schedulingv1beta1.BasicSchedulingPolicy{}
	}
	if parent != "" {
		pg.Spec.ParentCompositePodGroupName = ptr.To(parent)
	}
	return pg
}

// inTreeComposite is an in-tree CompositePodGroup: a gang of minGroupCount children (0: basic).
func inTreeComposite(ns, name string, minGroupCount int32, conds ...metav1.Condition) *schedulingv1alpha3.CompositePodGroup {
	c := &schedulingv1alpha3.CompositePodGroup{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, UID: types.UID(ns + "-cpg-" + name), CreationTimestamp: ago(10 * time.Minute)},
		Status: schedulingv1alpha3.CompositePodGroupStatus{Conditions: conds}}
	if minGroupCount > 0 {
		c.Spec.SchedulingPolicy.Gang = &schedulingv1alpha3.CompositeGangSchedulingPolicy{MinGroupCount: minGroupCount}
	} else {
		c.Spec.SchedulingPolicy.Basic = &schedulingv1alpha3.CompositeBasicSchedulingPolicy{}
	}
	return c
}

// inTreeMember is a member of the in-tree PodGroup group: no label, spec.schedulingGroup.
func inTreeMember(ns, group, name, node string, phase v1.PodPhase) *v1.Pod {
	return &v1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, UID: types.UID(ns + "-" + name), CreationTimestamp: ago(9 * time.Minute)},
		Spec:   v1.PodSpec{NodeName: node, SchedulerName: DefaultSchedulerName, SchedulingGroup: &v1.PodSchedulingGroup{PodGroupName: ptr.To(group)}},
		Status: v1.PodStatus{Phase: phase}}
}

func unschedulable(msg string) metav1.Condition {
	return metav1.Condition{Type: schedulingv1beta1.PodGroupInitiallyScheduled, Status: metav1.ConditionFalse, Reason: schedulingv1beta1.PodGroupReasonUnschedulable,
		Message: msg, LastTransitionTime: ago(time.Minute)}
}

// TestDeriveInTree: an in-tree PodGroup's phase and reason, from its members and its own condition.
func TestDeriveInTree(t *testing.T) {
	members := func(n int, node string, phase v1.PodPhase) []*v1.Pod {
		var out []*v1.Pod
		for i := range n {
			out = append(out, inTreeMember("ns", "g", "g-"+string(rune('a'+i)), node, phase))
		}
		return out
	}
	infeasible := unschedulable("GangInfeasible: PodGroup ns/podgroups.scheduling.k8s.io/g needs 2 more members placed at once")
	cases := []struct {
		name       string
		conds      []metav1.Condition
		pods       []*v1.Pod
		phase      v1alpha1.PodGroupPhase
		reason     string
		waitingFor string
		short      string
	}{
		{name: "too few members", pods: members(1, "", v1.PodPending), phase: v1alpha1.PodGroupPending,
			reason: podgroup.ReasonWaitingForMembers, waitingFor: WaitsForMembers, short: "1 of 2 members exist"},
		{name: "enough, no result yet", pods: members(2, "", v1.PodPending), phase: v1alpha1.PodGroupPreScheduling,
			waitingFor: WaitsForQueue, short: "2 of 2 members exist, none bound; an in-tree group has no reason of ours"},
		{name: "the last attempt found no room", conds: []metav1.Condition{infeasible}, pods: members(2, "", v1.PodPending), phase: v1alpha1.PodGroupPreScheduling,
			reason: podgroup.ReasonGangInfeasible, waitingFor: WaitsForRoom, short: "room"},
		{name: "a condition that is not ours", conds: []metav1.Condition{unschedulable("SchedulerError: boom")}, pods: members(2, "", v1.PodPending),
			phase: v1alpha1.PodGroupPreScheduling, waitingFor: WaitsForQueue, short: "2 of 2 members exist, none bound; an in-tree group has no reason of ours"},
		{name: "bound: the stale condition no longer counts", conds: []metav1.Condition{infeasible}, pods: members(2, "n1", v1.PodPending), phase: v1alpha1.PodGroupScheduled,
			reason: podgroup.ReasonQuorumReached, waitingFor: WaitsForNothing, short: "placed"},
		{name: "running", pods: members(2, "n1", v1.PodRunning), phase: v1alpha1.PodGroupRunning,
			reason: podgroup.ReasonQuorumReached, waitingFor: WaitsForNothing, short: "running"},
		{name: "one bound", pods: append(members(1, "n1", v1.PodRunning), inTreeMember("ns", "g", "g-z", "", v1.PodPending)), phase: v1alpha1.PodGroupScheduling,
			reason: podgroup.ReasonBelowQuorum, waitingFor: WaitsForRebind, short: "only 1 of 2 members bound"},
		{name: "succeeded", pods: members(2, "n1", v1.PodSucceeded), phase: v1alpha1.PodGroupFinished,
			reason: podgroup.ReasonQuorumReached, waitingFor: WaitsForNothing, short: "finished"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			pg := podgroup.FromInTree(inTreePG("ns", "g", 2, "", tc.conds...))
			s := Summarize(pg, tc.pods, nil, nil)
			if s.Phase != tc.phase || s.Reason != tc.reason || s.WaitingFor != tc.waitingFor || s.Short != tc.short || !s.Derived {
				t.Errorf("phase %s reason %q waiting for %s %q derived %v; want %s %q %s %q", s.Phase, s.Reason, s.WaitingFor, s.Short, s.Derived,
					tc.phase, tc.reason, tc.waitingFor, tc.short)
			}
			if s.Name != "podgroups.scheduling.k8s.io/g" || s.APIVersion != "scheduling.k8s.io/v1beta1" || s.Kind != KindPodGroup || len(s.Upstream) != len(tc.conds) {
				t.Errorf("name %s, %s %s, upstream %+v", s.Name, s.APIVersion, s.Kind, s.Upstream)
			}
		})
	}
	// A PodGroup of ours is left as its status says, whatever its members.
	ours := Summarize(testPG("ns", "g", 2, v1alpha1.PodGroupPending), members(2, "n1", v1.PodRunning), nil, nil)
	if ours.Derived || ours.Phase != v1alpha1.PodGroupPending || ours.APIVersion != "scheduling.x-k8s.io/v1alpha1" || ours.Upstream != nil {
		t.Errorf("a PodGroup of ours: %+v", ours)
	}
}

// inTreeJob is a job on the in-tree API: serve (a gang composite of minGroupCount 2) over prefill
// (2 members that do not fit) and decode (4 bound), and a group of ours of the same name as one of
// them (never part of their tree).
func inTreeJob() (groups, map[string][]*v1.Pod) {
	var g groups
	g.pgs = append(g.pgs, *testPG("jobs", "prefill", 1, v1alpha1.PodGroupRunning))
	g.fromInTree([]schedulingv1beta1.PodGroup{
		*inTreePG("jobs", "prefill", 2, "serve", unschedulable("GangInfeasible: PodGroup jobs/podgroups.scheduling.k8s.io/prefill needs 2 more members placed at once")),
		*inTreePG("jobs", "decode", 4, "serve"),
	})
	g.composites = []schedulingv1alpha3.CompositePodGroup{*inTreeComposite("jobs", "serve", 2,
		metav1.Condition{Type: compositeInitiallyScheduled, Status: metav1.ConditionFalse, Reason: "Unschedulable", Message: "prefill: GangInfeasible", LastTransitionTime: ago(time.Minute)})}
	pods := map[string][]*v1.Pod{}
	for i := range 2 {
		pods["jobs/podgroups.scheduling.k8s.io/prefill"] = append(pods["jobs/podgroups.scheduling.k8s.io/prefill"], inTreeMember("jobs", "prefill", "prefill-"+string(rune('0'+i)), "", v1.PodPending))
	}
	for i := range 4 {
		pods["jobs/podgroups.scheduling.k8s.io/decode"] = append(pods["jobs/podgroups.scheduling.k8s.io/decode"], inTreeMember("jobs", "decode", "decode-"+string(rune('0'+i)), "n1", v1.PodRunning))
	}
	return g, pods
}

// TestSummarizeInTree: in-tree PodGroups and a CompositePodGroup make one tree, resolved by package
// tree as the scheduler resolves it, with the blocking child named; a group of ours is apart.
func TestSummarizeInTree(t *testing.T) {
	g, pods := inTreeJob()
	sums := summarize(g, pods, nil)
	var b strings.Builder
	if err := printTable(&b, &columns{}, sums, false, true, true, testNow, style{}); err != nil {
		t.Fatal(err)
	}
	want := `NAME                                          PHASE          LIVE  BOUND  WAITING  GATED  MIN  AGE  WAITING FOR                                            REASON             DOMAIN  RESERVATION  KIND
prefill                                       Running        0     0      0        0      1    10m  0 of 1 members exist                                   <none>             <none>  <none>       PodGroup.scheduling.x-k8s.io
compositepodgroups.scheduling.k8s.io/serve    Pending        2     1      -        -      2    10m  1 of minGroupCount 2 groups whole; short: podgroups.scheduling.k8s.io/prefill 0/2  Unschedulable      <none>  <none>       CompositePodGroup.scheduling.k8s.io
├─ podgroups.scheduling.k8s.io/decode         Running        4     4      0        0      4    10m  running                                                QuorumReached      <none>  <none>       PodGroup.scheduling.k8s.io
└─ podgroups.scheduling.k8s.io/prefill        PreScheduling  2     0      0        0      2    10m  room                                                   GangInfeasible     <none>  <none>       PodGroup.scheduling.k8s.io
`
	if padding.ReplaceAllString(b.String(), " | ") != padding.ReplaceAllString(want, " | ") {
		t.Errorf("table:\n%s\nwant:\n%s", b.String(), want)
	}
	decode := sums[2]
	if decode.Name != "podgroups.scheduling.k8s.io/decode" || decode.Root != "compositepodgroups.scheduling.k8s.io/serve" || decode.Parent != "compositepodgroups.scheduling.k8s.io/serve" {
		t.Fatalf("decode: %+v", decode)
	}
	var blockers []string
	for _, k := range decode.Blockers {
		blockers = append(blockers, k.Name+" "+k.WaitingFor)
	}
	if diff := cmp.Diff([]string{"compositepodgroups.scheduling.k8s.io/serve ", "podgroups.scheduling.k8s.io/prefill Room"}, blockers); diff != "" {
		t.Errorf("blockers (-want,+got):\n%s", diff)
	}
	serve := sums[3]
	if serve.Kind != KindCompositePodGroup || serve.Composite == nil || *serve.Composite != (Composite{Policy: "Gang", MinGroupCount: 2, Children: 2, Whole: 1}) ||
		serve.Reason != "Unschedulable" || len(serve.Upstream) != 1 {
		t.Errorf("serve: %+v composite %+v", serve, serve.Composite)
	}
	if sums[0].Tree != nil || sums[0].Kind != KindPodGroup || sums[0].Derived {
		t.Errorf("the group of ours named prefill: %+v", sums[0])
	}
}

// TestSummarizeInTreeProblems: an in-tree group whose composite does not exist waits for its tree,
// and one naming a parent of ours is of the other API, as the scheduler says.
func TestSummarizeInTreeProblems(t *testing.T) {
	var g groups
	g.pgs = append(g.pgs, *annotate(testPG("ns", "job", 1, ""), "scheduling.x-k8s.io/min-group-count", "1"))
	g.fromInTree([]schedulingv1beta1.PodGroup{*inTreePG("ns", "orphan", 1, "gone"), *inTreePG("ns", "cross", 1, "job")})
	sums := summarize(g, nil, nil)
	got := map[string]string{}
	for _, s := range sums {
		if s.TreeProblem != nil {
			got[s.Name] = s.TreeProblem.Reason + ": " + s.TreeProblem.Message
		}
	}
	want := map[string]string{
		"podgroups.scheduling.k8s.io/orphan": "ParentGroupNotFound: PodGroup podgroups.scheduling.k8s.io/orphan names parent compositepodgroups.scheduling.k8s.io/gone, which does not exist",
		"podgroups.scheduling.k8s.io/cross":  "ParentGroupNotFound: PodGroup podgroups.scheduling.k8s.io/cross names parent compositepodgroups.scheduling.k8s.io/job, which does not exist",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("problems (-want,+got):\n%s", diff)
	}
}

// padding is the space between a table's cells.
var padding = regexp.MustCompile(` {2,}`)
