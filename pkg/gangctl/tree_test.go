package gangctl

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	kubefake "k8s.io/client-go/kubernetes/fake"
	clienttesting "k8s.io/client-go/testing"

	"github.com/custom-scheduler/custom-scheduler/pkg/apis/scheduling/v1alpha1"
	"github.com/custom-scheduler/custom-scheduler/pkg/coscheduling/podgroup"
	"github.com/custom-scheduler/custom-scheduler/pkg/coscheduling/tree"
	pgfake "github.com/custom-scheduler/custom-scheduler/pkg/generated/clientset/versioned/fake"
)

func annotate(pg *v1alpha1.PodGroup, kv ...string) *v1alpha1.PodGroup {
	if pg.Annotations == nil {
		pg.Annotations = map[string]string{}
	}
	for i := 0; i < len(kv); i += 2 {
		pg.Annotations[kv[i]] = kv[i+1]
	}
	return pg
}

// jobs adds to namespace jobs a job of two roles (serve: a gang composite of minGroupCount 2 over
// prefill, 2 members that do not fit, and decode, 4 bound), a group naming a parent that does not
// exist, and two composites naming each other.
func jobs(t *testing.T) func(*kubefake.Clientset, *pgfake.Clientset) {
	return func(kube *kubefake.Clientset, pgs *pgfake.Clientset) {
		ctx := context.Background()
		serve := annotate(testPG("jobs", "serve", 1, ""), tree.AnnotationMinGroupCount, "2")
		prefill := annotate(testPG("jobs", "prefill", 2, v1alpha1.PodGroupPreScheduling,
			scheduled(podgroup.ReasonGangInfeasible, "PodGroup jobs/prefill needs 2 more members placed at once", time.Minute)), tree.AnnotationParent, "serve")
		prefill.Status.Shortfall = &v1alpha1.PodGroupShortfall{Reason: v1alpha1.ShortfallNodeRoom, Needed: 2, Unscheduled: 2,
			Resources: []v1alpha1.ResourceShortfall{{Name: v1.ResourceCPU, Requested: resource.MustParse("6"), Free: resource.MustParse("4"), Member: resource.MustParse("3"), LargestFree: resource.MustParse("2")}}}
		decode := annotate(testPG("jobs", "decode", 4, v1alpha1.PodGroupRunning, scheduled(podgroup.ReasonQuorumReached, "4 of minMember 4", 2*time.Minute)),
			tree.AnnotationParent, "serve")
		orphan := annotate(testPG("jobs", "orphan", 1, ""), tree.AnnotationParent, "gone")
		a := annotate(testPG("jobs", "loop-a", 1, ""), tree.AnnotationMinGroupCount, "1", tree.AnnotationParent, "loop-b")
		b := annotate(testPG("jobs", "loop-b", 1, ""), tree.AnnotationMinGroupCount, "1", tree.AnnotationParent, "loop-a")
		flat := testPG("jobs", "flat", 1, v1alpha1.PodGroupRunning, scheduled(podgroup.ReasonQuorumReached, "1 of minMember 1", time.Minute))
		for _, pg := range []*v1alpha1.PodGroup{serve, prefill, decode, orphan, a, b, flat} {
			if _, err := pgs.SchedulingV1alpha1().PodGroups("jobs").Create(ctx, pg, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
		}
		pods := []*v1.Pod{testPod("jobs", "prefill", "prefill-0", ""), testPod("jobs", "prefill", "prefill-1", ""), testPod("jobs", "flat", "flat-0", "n1")}
		for i := range 4 {
			pods = append(pods, testPod("jobs", "decode", fmt.Sprintf("decode-%d", i), "n1"))
		}
		for _, p := range pods {
			if _, err := kube.CoreV1().Pods("jobs").Create(ctx, p, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// TestTree: get and explain of a job of several roles: the tree under its root, the group that
// blocks it with what would unblock it, and groups whose tree cannot be resolved.
func TestTree(t *testing.T) {
	table := `NAME        PHASE          LIVE  BOUND  WAITING  GATED  MIN  AGE  WAITING FOR
serve       Pending        2     1      -        -      2    10m  1 of minGroupCount 2 groups whole; short: prefill 0/2
├─ decode   Running        4     4      0        0      4    10m  running
└─ prefill  PreScheduling  2     0      0        0      2    10m  room: 0 of 2 more members fit
`
	job := `Job:      serve, not whole: a group is whole with minMember members bound, a gang composite with minGroupCount whole children
          serve       Pending        1/2 groups  1 of minGroupCount 2 groups whole; short: prefill 0/2
          ├─ decode   Running        4/4         running
          └─ prefill  PreScheduling  0/2         room: 0 of 2 more members fit
Blocked:  serve: 1 of minGroupCount 2 groups whole; it needs 1 more
          prefill: 0 of minMember 2 members bound, waiting for Room (room: 0 of 2 more members fit)
`
	cases := []struct {
		name string
		args []string
		// want is the whole output, or with contains a part of it.
		want     string
		contains bool
	}{
		{name: "the list: each job under its root, the others as they were", args: []string{"get", "-n", "jobs"},
			want: `NAME        PHASE          LIVE  BOUND  WAITING  GATED  MIN  AGE  WAITING FOR
flat        Running        1     1      0        0      1    10m  running
loop-a      Pending        0     0      0        0      1    10m  InvalidGroupTree: the parents of loop-b run in a cycle through loop-a
loop-b      Pending        0     0      0        0      1    10m  InvalidGroupTree: the parents of loop-a run in a cycle through loop-b
orphan      Pending        0     0      0        0      1    10m  ParentGroupNotFound: PodGroup orphan names parent gone, which does not exist
serve       Pending        2     1      -        -      2    10m  1 of minGroupCount 2 groups whole; short: prefill 0/2
├─ decode   Running        4     4      0        0      4    10m  running
└─ prefill  PreScheduling  2     0      0        0      2    10m  room: 0 of 2 more members fit
`},
		{name: "a child: its whole tree", args: []string{"get", "prefill", "-n", "jobs"}, want: table},
		{name: "the composite: its whole tree", args: []string{"get", "serve", "-n", "jobs"}, want: table},
		{name: "a group in no tree, beside trees", args: []string{"get", "flat", "-n", "jobs"}, want: `NAME  PHASE    LIVE  BOUND  WAITING  GATED  MIN  AGE  WAITING FOR
flat  Running  1     1      0        0      1    10m  running
`},
		{name: "a group whose parent is missing", args: []string{"get", "orphan", "-n", "jobs"}, want: `NAME    PHASE    LIVE  BOUND  WAITING  GATED  MIN  AGE  WAITING FOR
orphan  Pending  0     0      0        0      1    10m  ParentGroupNotFound: PodGroup orphan names parent gone, which does not exist
`},
		{name: "explain the blocking child: its own story, then the job's", args: []string{"explain", "prefill", "-n", "jobs"}, contains: true,
			want: `Unblock:  needs 3 cpu on one node; the largest free has 2
          needs 6 cpu in total; 4 is free
` + job + `            (what would unblock it: Unblock, above)
Members (2):
`},
		{name: "explain a whole child: which sibling blocks, and what would unblock it", args: []string{"explain", "decode", "-n", "jobs"}, contains: true,
			want: `Why:      QuorumReached (for 2m): 4 of minMember 4
` + job + `            unblock: needs 3 cpu on one node; the largest free has 2
            unblock: needs 6 cpu in total; 4 is free
Members (4):
`},
		{name: "explain the composite", args: []string{"explain", "serve", "-n", "jobs"},
			want: `PodGroup jobs/serve (gang composite): Pending, 1 of minGroupCount 2 groups whole; short: prefill 0/2 (age 10m)
Groups:   1 of its 2 children whole, of minGroupCount 2
` + job + `            unblock: needs 3 cpu on one node; the largest free has 2
            unblock: needs 6 cpu in total; 4 is free
Members (0):
  <none>
Events (0, newest first):
  <none>
`},
		{name: "explain a missing parent", args: []string{"explain", "orphan", "-n", "jobs"}, contains: true,
			want: `Tree:     ParentGroupNotFound: PodGroup orphan names parent gone, which does not exist; the scheduler holds back its members not yet placed, holding nothing, until the PodGroups are fixed
          (its parent, by annotation scheduling.x-k8s.io/parent-group: gone)
`},
		{name: "explain a cycle", args: []string{"explain", "loop-a", "-n", "jobs"}, contains: true,
			want: "Tree:     InvalidGroupTree: the parents of loop-b run in a cycle through loop-a; "},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			out, err := run(t, jobs(t), tc.args...)
			if err != nil {
				t.Fatal(err)
			}
			if tc.contains && !strings.Contains(out, tc.want) || !tc.contains && out != tc.want {
				t.Errorf("output:\n%s\nwant (contains %v):\n%s", out, tc.contains, tc.want)
			}
		})
	}
}

// TestTreeJSON: -o json carries the tree with each group's bound and minimum, the blockers, the
// parent, a composite's numbers and a tree's problem.
func TestTreeJSON(t *testing.T) {
	out, err := run(t, jobs(t), "get", "decode", "-n", "jobs", "-o", "json")
	if err != nil {
		t.Fatal(err)
	}
	var s Summary
	if err := json.Unmarshal([]byte(out), &s); err != nil {
		t.Fatalf("not JSON: %v\n%s", err, out)
	}
	want := &TreeNode{Name: "serve", Composite: true, Policy: "Gang", Phase: v1alpha1.PodGroupPending, Bound: 1, Min: 2, WaitingFor: WaitsForGroups,
		Short: "1 of minGroupCount 2 groups whole; short: prefill 0/2", Children: []TreeNode{
			{Name: "decode", Phase: v1alpha1.PodGroupRunning, Bound: 4, Min: 4, Whole: true, WaitingFor: WaitsForNothing, Short: "running"},
			{Name: "prefill", Phase: v1alpha1.PodGroupPreScheduling, Bound: 0, Min: 2, WaitingFor: WaitsForRoom, Short: "room: 0 of 2 more members fit"},
		}}
	if diff := cmp.Diff(want, s.Tree); diff != "" {
		t.Errorf("tree (-want,+got):\n%s", diff)
	}
	if s.Name != "decode" || s.Parent != "serve" || s.Root != "serve" || s.TreeProblem != nil || len(s.Blockers) != 2 ||
		!cmp.Equal(s.Blockers[0], Blocker{Name: "serve", Composite: true, Bound: 1, Min: 2, Needs: 1}) || s.Blockers[1].Name != "prefill" || len(s.Blockers[1].Unblock) != 2 {
		t.Errorf("summary: parent %q root %q problem %v blockers %+v", s.Parent, s.Root, s.TreeProblem, s.Blockers)
	}
	out, err = run(t, jobs(t), "get", "-n", "jobs", "-o", "json")
	if err != nil {
		t.Fatal(err)
	}
	var list struct{ Items []Summary }
	if err := json.Unmarshal([]byte(out), &list); err != nil {
		t.Fatalf("not JSON: %v\n%s", err, out)
	}
	var got []string
	for _, it := range list.Items {
		line := it.Name
		if it.Composite != nil {
			line += fmt.Sprintf(" composite %+v", *it.Composite)
		}
		if it.Tree != nil {
			line += " tree " + it.Tree.Name
		}
		if it.TreeProblem != nil {
			line += " problem " + it.TreeProblem.Reason
		}
		got = append(got, line)
	}
	wantItems := []string{"decode tree serve", "flat", "loop-a problem InvalidGroupTree", "loop-b problem InvalidGroupTree", "orphan problem ParentGroupNotFound",
		"prefill tree serve", "serve composite {Policy:Gang MinGroupCount:2 Children:2 Whole:1} tree serve"}
	if diff := cmp.Diff(wantItems, got); diff != "" {
		t.Errorf("items (-want,+got):\n%s", diff)
	}
	out, err = run(t, jobs(t), "get", "serve", "-n", "jobs", "-o", "yaml")
	if err != nil || !strings.Contains(out, "composite:\n  children: 2\n  minGroupCount: 2\n  policy: Gang\n  whole: 1\n") {
		t.Errorf("yaml (err %v):\n%s", err, out)
	}
}

// TestTreeReads: a group in a tree costs one list of its namespace's PodGroups and one of its pods,
// never a read per group of the tree.
func TestTreeReads(t *testing.T) {
	for _, args := range [][]string{{"get", "decode", "-n", "jobs"}, {"explain", "decode", "-n", "jobs"}} {
		var actions []string
		edit := func(kube *kubefake.Clientset, pgs *pgfake.Clientset) {
			jobs(t)(kube, pgs)
			pgs.ClearActions()
			kube.ClearActions()
			pgs.PrependReactor("*", "*", func(a clienttesting.Action) (bool, runtime.Object, error) {
				actions = append(actions, a.GetVerb()+" "+a.GetResource().Resource)
				return false, nil, nil
			})
			kube.PrependReactor("*", "pods", func(a clienttesting.Action) (bool, runtime.Object, error) {
				actions = append(actions, a.GetVerb()+" "+a.GetResource().Resource)
				return false, nil, nil
			})
		}
		if _, err := run(t, edit, args...); err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff([]string{"get podgroups", "list podgroups", "list pods"}, sorted(actions)); diff != "" {
			t.Errorf("%q read (-want,+got):\n%s", args, diff)
		}
	}
}

func sorted(s []string) []string {
	s = slices.Clone(s)
	slices.Sort(s)
	return s
}

// TestAttachTrees: the tree's decisions over summaries alone: a group complete of its own waits for
// its job's other groups (as PreEnqueue holds it back), a finished group counts as whole, a basic
// composite blocks nothing, malformed annotations are a problem; nested composites are indented.
func TestAttachTrees(t *testing.T) {
	pgs := []v1alpha1.PodGroup{
		*annotate(testPG("ns", "job", 1, ""), tree.AnnotationMinGroupCount, "2"),
		*annotate(testPG("ns", "r0", 1, ""), tree.AnnotationMinGroupCount, "2", tree.AnnotationParent, "job"),
		*annotate(testPG("ns", "r1", 1, ""), tree.AnnotationComposite, "Basic", tree.AnnotationParent, "job"),
		*annotate(testPG("ns", "r0-leader", 1, v1alpha1.PodGroupFinished), tree.AnnotationParent, "r0"),
		*annotate(testPG("ns", "r0-workers", 3, v1alpha1.PodGroupPending, scheduled(podgroup.ReasonWaitingForMembers, "", 0)), tree.AnnotationParent, "r0"),
		*annotate(testPG("ns", "r1-leader", 1, ""), tree.AnnotationParent, "r1"),
		*annotate(testPG("ns", "r1-workers", 2, ""), tree.AnnotationParent, "r1"),
		*annotate(testPG("ns", "odd", 1, ""), tree.AnnotationComposite, "Sometimes"),
		*testPG("ns", "flat", 2, ""),
	}
	pods := map[string][]*v1.Pod{
		"r0-workers": {testPod("ns", "r0-workers", "w0", ""), testPod("ns", "r0-workers", "w1", ""), testPod("ns", "r0-workers", "w2", "")},
	}
	var sums []Summary
	for i := range pgs {
		sums = append(sums, Summarize(&pgs[i], pods[pgs[i].Name], nil, nil))
	}
	flat := sums[8]
	AttachTrees(pgs, sums)
	var b strings.Builder
	if err := printTable(&b, &columns{}, sums, false, false, true, testNow, style{}); err != nil {
		t.Fatal(err)
	}
	want := `NAME              PHASE     LIVE  BOUND  WAITING  GATED  MIN  AGE  WAITING FOR
job               Pending   2     0      -        -      2    10m  0 of minGroupCount 2 groups whole; short: r0 1/2, r1 0/1
├─ r0             Pending   2     1      -        -      2    10m  1 of minGroupCount 2 groups whole; short: r0-workers 0/3
│  ├─ r0-leader   Finished  0     0      0        0      1    10m  finished
│  └─ r0-workers  Pending   3     0      0        0      3    10m  waits for the job's other groups: job: 1 of minGroupCount 2 children ready; r1: no child ready; r1-leader: 0 of minMember 1; r1-workers: 0 of minMember 2
└─ r1             Pending   2     0      -        -      -    10m  basic: 0 of 2 groups whole, each placed on its own
   ├─ r1-leader   Pending   0     0      0        0      1    10m  0 of 1 members exist
   └─ r1-workers  Pending   0     0      0        0      2    10m  0 of 2 members exist
odd               Pending   0     0      0        0      1    10m  InvalidGroupTree: PodGroup odd: annotation scheduling.x-k8s.io/composite is "Sometimes": want Gang or Basic
flat              Pending   0     0      0        0      2    10m  0 of 2 members exist
`
	if b.String() != want {
		t.Errorf("table:\n%s\nwant:\n%s", b.String(), want)
	}
	if diff := cmp.Diff(flat, sums[8]); diff != "" {
		t.Errorf("a group in no tree changed (-before,+after):\n%s", diff)
	}
	var names []string
	for _, k := range sums[4].Blockers {
		names = append(names, k.Name)
	}
	// r0-workers are short of nothing but bound members; the basic r1 blocks nothing itself.
	if got := strings.Join(names, ","); got != "job,r0,r0-workers,r1-leader,r1-workers" {
		t.Errorf("blockers %s", got)
	}
}

// TestWatchTree: get NAME --watch of a group in a tree prints its job's tree, then the line of each
// group of the job that changes (never another group's).
func TestWatchTree(t *testing.T) {
	kube, pgs := kubefake.NewClientset(), pgfake.NewSimpleClientset()
	jobs(t)(kube, pgs)
	conn := func(*genericclioptions.ConfigFlags) (Clients, string, error) {
		return Clients{Kube: kube, PodGroups: pgs}, "jobs", nil
	}
	out := &syncBuffer{}
	cmd := NewCommand(out, func() time.Time { return testNow }, conn)
	cmd.SetArgs([]string{"get", "prefill", "--watch"})
	cmd.SetErr(&bytes.Buffer{})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- cmd.ExecuteContext(ctx) }()
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(out.String(), "└─ prefill") {
		if time.Now().After(deadline) {
			t.Fatalf("no tree printed:\n%s", out.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
	// The fake watch starts when the command asks for it: change the groups until a line shows it.
	want := "decode      Finished       4     4      0        0      4    10m  finished"
	for !strings.Contains(out.String(), want) {
		if time.Now().After(deadline) {
			t.Fatalf("no %q in:\n%s", want, out.String())
		}
		for _, n := range []string{"flat", "decode"} {
			pg, err := pgs.SchedulingV1alpha1().PodGroups("jobs").Get(ctx, n, metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			pg.Status.Phase = v1alpha1.PodGroupFinished
			pg.Status.Conditions = []metav1.Condition{scheduled(podgroup.ReasonQuorumReached, "done", 0)}
			if _, err := pgs.SchedulingV1alpha1().PodGroups("jobs").UpdateStatus(ctx, pg, metav1.UpdateOptions{}); err != nil {
				t.Fatal(err)
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	cancel()
	if err := <-done; err != nil {
		t.Errorf("watch ended with %v", err)
	}
	if strings.Contains(out.String(), "flat") {
		t.Errorf("a group of no tree printed:\n%s", out.String())
	}
}
