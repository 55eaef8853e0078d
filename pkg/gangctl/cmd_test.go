package gangctl

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	kubefake "k8s.io/client-go/kubernetes/fake"
	clienttesting "k8s.io/client-go/testing"

	"github.com/custom-scheduler/custom-scheduler/pkg/apis/scheduling/v1alpha1"
	"github.com/custom-scheduler/custom-scheduler/pkg/coscheduling/podgroup"
	pgfake "github.com/custom-scheduler/custom-scheduler/pkg/generated/clientset/versioned/fake"
)

var testNow = time.Date(2026, 12, 3, 12, 0, 0, 0, time.UTC)

func ago(d time.Duration) metav1.Time { return metav1.NewTime(testNow.Add(-d)) }

func testPG(ns, name string, minMember int32, phase v1alpha1.PodGroupPhase, conds ...metav1.Condition) *v1alpha1.PodGroup {
	return &v1alpha1.PodGroup{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, UID: types.UID(ns + "-" + name), CreationTimestamp: ago(10 * time.Minute)},
		Spec:       v1alpha1.PodGroupSpec{MinMember: minMember},
		Status:     v1alpha1.PodGroupStatus{Phase: phase, Conditions: conds},
	}
}

func scheduled(reason, msg string, since time.Duration) metav1.Condition {
	status := metav1.ConditionFalse
	if reason == podgroup.ReasonQuorumReached {
		status = metav1.ConditionTrue
	}
	return metav1.Condition{Type: podgroup.ConditionScheduled, Status: status, Reason: reason, Message: msg, LastTransitionTime: ago(since)}
}

func testPod(ns, group, name, node string) *v1.Pod {
	return &v1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, UID: types.UID(ns + "-" + name), Labels: map[string]string{v1alpha1.PodGroupLabel: group}},
		Spec: v1.PodSpec{NodeName: node, SchedulerName: DefaultSchedulerName}, Status: v1.PodStatus{Phase: v1.PodPending}}
}

// fixture is two gangs in demo (too-big: infeasible with numbers; training: running) and one in
// other, with their pods and an event.
func fixture() ([]runtime.Object, []runtime.Object) {
	big := testPG("demo", "too-big", 2, v1alpha1.PodGroupPreScheduling, scheduled(podgroup.ReasonGangInfeasible, "PodGroup demo/too-big needs 2 more members placed at once, but the nodes' free resources fit only 0 of them (checked per node, not in total)", 5*time.Minute))
	big.Status.Shortfall = &v1alpha1.PodGroupShortfall{Reason: v1alpha1.ShortfallNodeRoom, Needed: 2, Unscheduled: 2, LargestFreeNode: "kwok-node-1",
		Resources: []v1alpha1.ResourceShortfall{{Name: v1.ResourceCPU, Requested: resource.MustParse("24"), Free: resource.MustParse("30"), Member: resource.MustParse("12"), LargestFree: resource.MustParse("8")}}}
	train := testPG("demo", "training", 3, v1alpha1.PodGroupRunning, scheduled(podgroup.ReasonQuorumReached, "3 of minMember 3 live members are bound or binding, 0 succeeded", 9*time.Minute))
	solo := testPG("other", "solo", 2, v1alpha1.PodGroupPending, scheduled(podgroup.ReasonWaitingForMembers, "1 of minMember 2 live pods exist", time.Minute))
	pods := []runtime.Object{
		testPod("demo", "too-big", "too-big-0", ""), testPod("demo", "too-big", "too-big-1", ""),
		testPod("demo", "training", "training-0", "n1"), testPod("demo", "training", "training-1", "n2"), testPod("demo", "training", "training-2", "n2"),
		testPod("other", "solo", "solo-0", ""),
		&v1.Event{ObjectMeta: metav1.ObjectMeta{Namespace: "demo", Name: "e1"}, InvolvedObject: v1.ObjectReference{Kind: "PodGroup", Name: "too-big", UID: big.UID},
			Type: v1.EventTypeWarning, Reason: podgroup.ReasonGangInfeasible, Message: "does not fit", LastTimestamp: ago(5 * time.Minute), Count: 1},
	}
	return []runtime.Object{big, train, solo}, pods
}

// run runs kubectl gang with args against fake clients (edit may add reactors); namespace "default"
// unless -n says otherwise.
func run(t *testing.T, edit func(kube *kubefake.Clientset, pgs *pgfake.Clientset), args ...string) (string, error) {
	t.Helper()
	pgObjs, kubeObjs := fixture()
	kube, pgs := kubefake.NewClientset(kubeObjs...), pgfake.NewSimpleClientset(pgObjs...)
	if edit != nil {
		edit(kube, pgs)
	}
	conn := func(flags *genericclioptions.ConfigFlags) (Clients, string, error) {
		ns := "default"
		if flags.Namespace != nil && *flags.Namespace != "" {
			ns = *flags.Namespace
		}
		return Clients{Kube: kube, PodGroups: pgs}, ns, nil
	}
	var out bytes.Buffer
	cmd := NewCommand(&out, func() time.Time { return testNow }, conn)
	cmd.SetArgs(args)
	cmd.SetErr(&bytes.Buffer{})
	err := cmd.ExecuteContext(context.Background())
	return out.String(), err
}

func TestCommands(t *testing.T) {
	forbidden := func(kube *kubefake.Clientset, pgs *pgfake.Clientset) {
		pgs.PrependReactor("*", "podgroups", func(clienttesting.Action) (bool, runtime.Object, error) {
			return true, nil, apierrors.NewForbidden(schema.GroupResource{Group: v1alpha1.GroupName, Resource: "podgroups"}, "", nil)
		})
	}
	eventsForbidden := func(kube *kubefake.Clientset, pgs *pgfake.Clientset) {
		kube.PrependReactor("list", "events", func(clienttesting.Action) (bool, runtime.Object, error) {
			return true, nil, apierrors.NewForbidden(schema.GroupResource{Resource: "events"}, "", nil)
		})
	}
	cases := []struct {
		name    string
		args    []string
		edit    func(*kubefake.Clientset, *pgfake.Clientset)
		want    string
		wantErr string
	}{
		{name: "get in a namespace", args: []string{"get", "-n", "demo"}, want: `NAME      PHASE          LIVE  BOUND  WAITING  GATED  MIN  AGE  WAITING FOR
too-big   PreScheduling  2     0      0        0      2    10m  room: 0 of 2 more members fit
training  Running        3     3      0        0      3    10m  running
`},
		{name: "get in every namespace", args: []string{"get", "-A"}, want: `NAMESPACE  NAME      PHASE          LIVE  BOUND  WAITING  GATED  MIN  AGE  WAITING FOR
demo       too-big   PreScheduling  2     0      0        0      2    10m  room: 0 of 2 more members fit
demo       training  Running        3     3      0        0      3    10m  running
other      solo      Pending        1     0      0        0      2    10m  1 of 2 members exist
`},
		{name: "get one, wide", args: []string{"get", "too-big", "-n", "demo", "-o", "wide"}, want: `NAME     PHASE          LIVE  BOUND  WAITING  GATED  MIN  AGE  WAITING FOR                    REASON          DOMAIN  RESERVATION  KIND
too-big  PreScheduling  2     0      0        0      2    10m  room: 0 of 2 more members fit  GangInfeasible  <none>  <none>       PodGroup.scheduling.x-k8s.io
`},
		{name: "the kubeconfig's namespace by default", args: []string{"get"}, want: "No gangs (PodGroups) in namespace default.\n"},
		{name: "not found", args: []string{"get", "nope", "-n", "demo"}, wantErr: `PodGroup "nope" not found in namespace demo`},
		{name: "explain: not found", args: []string{"explain", "nope", "-n", "demo"}, wantErr: `PodGroup "nope" not found in namespace demo`},
		{name: "forbidden", args: []string{"get", "-n", "demo"}, edit: forbidden,
			wantErr: "not allowed to read PodGroups in namespace demo: kubectl gang needs get and list on podgroups.scheduling.x-k8s.io, pods and events"},
		{name: "forbidden in every namespace", args: []string{"get", "-A"}, edit: forbidden, wantErr: "not allowed to read PodGroups in any namespace"},
		{name: "explain: events forbidden", args: []string{"explain", "too-big", "-n", "demo"}, edit: eventsForbidden, wantErr: "not allowed to read events in namespace demo"},
		{name: "an unknown output", args: []string{"get", "-o", "table"}, wantErr: `unknown output format "table": use one of wide, json, yaml`},
		{name: "explain has no wide", args: []string{"explain", "too-big", "-o", "wide"}, wantErr: `unknown output format "wide": use one of json, yaml`},
		{name: "a name with -A", args: []string{"get", "too-big", "-A"}, wantErr: "a gang's name and --all-namespaces do not go together"},
		{name: "explain needs a name", args: []string{"explain"}, wantErr: "accepts 1 arg(s), received 0"},
		{name: "an unknown colour", args: []string{"get", "--color", "pink"}, wantErr: `unknown --color "pink"`},
		{name: "an unknown colour, explain too", args: []string{"explain", "too-big", "-n", "demo", "--color", "pink"}, wantErr: `unknown --color "pink"`},
		{name: "colour always", args: []string{"get", "training", "-n", "demo", "--color", "always"}, want: "NAME      \x1b[01mPHASE\x1b[0m    LIVE  BOUND  WAITING  GATED  MIN  AGE  WAITING FOR\ntraining  \x1b[32mRunning\x1b[0m  3     3      0        0      3    10m  running\n"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			out, err := run(t, tc.edit, tc.args...)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error = %v, want one containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("error: %v", err)
			}
			if out != tc.want {
				t.Errorf("output:\n%s\nwant:\n%s", out, tc.want)
			}
		})
	}
}

// TestJSON checks -o json by field, for get (one and the list) and explain.
func TestJSON(t *testing.T) {
	out, err := run(t, nil, "explain", "too-big", "-n", "demo", "-o", "json")
	if err != nil {
		t.Fatal(err)
	}
	var s Summary
	if err := json.Unmarshal([]byte(out), &s); err != nil {
		t.Fatalf("not JSON: %v\n%s", err, out)
	}
	if s.Name != "too-big" || s.WaitingFor != WaitsForRoom || s.Live != 2 || s.Bound != 0 || s.MinMember != 2 || len(s.Members) != 2 || len(s.Events) != 1 {
		t.Errorf("summary = %+v", s)
	}
	if s.Shortfall == nil || s.Shortfall.Reason != v1alpha1.ShortfallNodeRoom || len(s.Unblock) == 0 || s.Unblock[0] != "needs 12 cpu on one node; the largest free has 8" {
		t.Errorf("shortfall %+v, unblock %q", s.Shortfall, s.Unblock)
	}
	out, err = run(t, nil, "get", "-A", "-o", "json")
	if err != nil {
		t.Fatal(err)
	}
	var list struct{ Items []Summary }
	if err := json.Unmarshal([]byte(out), &list); err != nil {
		t.Fatalf("not JSON: %v\n%s", err, out)
	}
	var names []string
	for _, it := range list.Items {
		names = append(names, it.Namespace+"/"+it.Name+"="+it.WaitingFor)
	}
	if got := strings.Join(names, ","); got != "demo/too-big=Room,demo/training=Nothing,other/solo=Members" {
		t.Errorf("items = %s", got)
	}
	out, err = run(t, nil, "get", "training", "-n", "demo", "-o", "yaml")
	if err != nil || !strings.Contains(out, "name: training\n") || !strings.Contains(out, "phase: Running\n") {
		t.Errorf("yaml (err %v):\n%s", err, out)
	}
}

// TestExplainUntil: explain says until when a gang backs off, and until when a reservation holds.
func TestExplainUntil(t *testing.T) {
	edit := func(kube *kubefake.Clientset, pgs *pgfake.Clientset) {
		off := testPG("demo", "off", 2, v1alpha1.PodGroupPreScheduling, scheduled(podgroup.ReasonGangTimedOut, "timed out", 5*time.Second))
		off.Status.BackoffUntil = ptrTime(metav1.NewTime(testNow.Add(3 * time.Second)))
		held := testPG("demo", "held", 2, v1alpha1.PodGroupPreScheduling, scheduled(podgroup.ReasonGangInfeasible, "no room", time.Minute),
			metav1.Condition{Type: podgroup.ConditionReserved, Status: metav1.ConditionTrue, Reason: podgroup.ReasonRoomHeld, Message: "holds room for 2 members on 1 nodes", LastTransitionTime: ago(time.Minute)})
		held.Status.ReservedUntil = ptrTime(metav1.NewTime(testNow.Add(4 * time.Minute)))
		for _, pg := range []*v1alpha1.PodGroup{off, held} {
			if _, err := pgs.SchedulingV1alpha1().PodGroups("demo").Create(context.Background(), pg, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
		}
	}
	for name, want := range map[string]string{
		"off":  "Back-off: until 2026-12-03T12:00:03Z (in 3s); then its members are tried again\n",
		"held": "Reserved: holds room for 2 members on 1 nodes (for 60s, until 2026-12-03T12:04:00Z at the latest (in 4m)); pods of its priority or lower are kept off the held nodes\n",
	} {
		out, err := run(t, edit, "explain", name, "-n", "demo")
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(out, want) {
			t.Errorf("explain %s: no %q in\n%s", name, want, out)
		}
	}
}

// TestExplainEventsByUID: explain reads the events of the PodGroup and of each member, selected by
// their uids (involvedObject.uid), not every event of the namespace; each event once.
func TestExplainEventsByUID(t *testing.T) {
	var mu sync.Mutex
	var selectors []string
	edit := func(kube *kubefake.Clientset, pgs *pgfake.Clientset) {
		kube.PrependReactor("list", "events", func(a clienttesting.Action) (bool, runtime.Object, error) {
			mu.Lock()
			defer mu.Unlock()
			selectors = append(selectors, a.(clienttesting.ListAction).GetListRestrictions().Fields.String())
			return false, nil, nil
		})
	}
	out, err := run(t, edit, "explain", "too-big", "-n", "demo", "-o", "json")
	if err != nil {
		t.Fatal(err)
	}
	var s Summary
	if err := json.Unmarshal([]byte(out), &s); err != nil {
		t.Fatal(err)
	}
	if len(s.Events) != 1 || s.Events[0].Count != 1 {
		t.Errorf("events %+v, want the one GangInfeasible once", s.Events)
	}
	slices.Sort(selectors)
	want := []string{"involvedObject.uid=demo-too-big", "involvedObject.uid=demo-too-big-0", "involvedObject.uid=demo-too-big-1"}
	if diff := cmp.Diff(want, selectors); diff != "" {
		t.Errorf("events listed with field selectors (-want,+got):\n%s", diff)
	}
}

// TestSchedulerNames: which schedulers are ours: --scheduler-name (repeated, or with commas), else
// $KUBECTL_GANG_SCHEDULER_NAMES, else custom-scheduler; a gang whose pods name another is said to
// be served by none of ours, in get's line and explain's story.
func TestSchedulerNames(t *testing.T) {
	elsewhere := func(kube *kubefake.Clientset, pgs *pgfake.Clientset) {
		ctx := context.Background()
		if _, err := pgs.SchedulingV1alpha1().PodGroups("demo").Create(ctx, testPG("demo", "elsewhere", 2, ""), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		for i, sched := range []string{"volcano", "volcano"} {
			p := testPod("demo", "elsewhere", fmt.Sprintf("elsewhere-%d", i), "")
			p.Spec.SchedulerName = sched
			if _, err := kube.CoreV1().Pods("demo").Create(ctx, p, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
		}
	}
	cases := []struct {
		name    string
		env     string
		args    []string
		want    string
		wantErr string
	}{
		{name: "the default", args: []string{"get", "elsewhere", "-n", "demo"},
			want: "no scheduler of ours serves its pods: they name volcano (ours: custom-scheduler)"},
		{name: "the environment's", env: "custom-scheduler, scheduler-plugins-scheduler", args: []string{"get", "elsewhere", "-n", "demo"},
			want: "they name volcano (ours: custom-scheduler, scheduler-plugins-scheduler)"},
		{name: "the flag's, over the environment's", env: "a", args: []string{"get", "elsewhere", "-n", "demo", "--scheduler-name", "b,c", "--scheduler-name", "d"},
			want: "they name volcano (ours: b, c, d)"},
		{name: "volcano is ours", args: []string{"get", "elsewhere", "-n", "demo", "--scheduler-name", "volcano"}, want: "2 of 2 members exist"},
		{name: "explain says which pods", args: []string{"explain", "elsewhere", "-n", "demo"},
			want: `PodGroup demo/elsewhere: Pending, no scheduler of ours serves its pods: they name volcano (ours: custom-scheduler) (age 10m)
Quorum:   0 of minMember 2 live members bound, 0 waiting at Permit, 0 gated; 0 terminating, 0 finished
Not ours: 2 of its 2 live pods name volcano, which no scheduler of ours (custom-scheduler; --scheduler-name) serves: they are never members of our gangs, nor counted above
Members (2):
  elsewhere-0  Pending  scheduler volcano (not ours)
  elsewhere-1  Pending  scheduler volcano (not ours)
Events (0, newest first):
  <none>
`},
		{name: "no name", args: []string{"get", "--scheduler-name", ""}, wantErr: "--scheduler-name names no scheduler"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv(SchedulerNamesEnv, tc.env)
			out, err := run(t, elsewhere, tc.args...)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error = %v, want one containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(out, tc.want) {
				t.Errorf("output:\n%s\nwant it to contain:\n%s", out, tc.want)
			}
		})
	}
}

// TestExplainDevices: a shortfall with a device kind's row says what the row counts, and what
// would unblock the gang in devices of its class.
func TestExplainDevices(t *testing.T) {
	edit := func(kube *kubefake.Clientset, pgs *pgfake.Clientset) {
		pg := testPG("demo", "gpus", 4, v1alpha1.PodGroupPreScheduling, scheduled(podgroup.ReasonGangInfeasible, "no room", time.Minute))
		pg.Status.Shortfall = &v1alpha1.PodGroupShortfall{Reason: v1alpha1.ShortfallTopologyDomain, Needed: 4, Placeable: 3, Unscheduled: 4, TopologyKey: "rack",
			Domains: []v1alpha1.DomainShortfall{{Value: "r1", Placeable: 3}, {Value: "r2", Placeable: 2}},
			Resources: []v1alpha1.ResourceShortfall{
				{Name: v1.ResourceCPU, Requested: resource.MustParse("4"), Free: resource.MustParse("40"), Member: resource.MustParse("1"), LargestFree: resource.MustParse("8")},
				{Name: "devices/gpu.example.com", Requested: resource.MustParse("4"), Free: resource.MustParse("5"), Member: resource.MustParse("1"), LargestFree: resource.MustParse("1")}}}
		if _, err := pgs.SchedulingV1alpha1().PodGroups("demo").Create(context.Background(), pg, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	out, err := run(t, edit, "explain", "gpus", "-n", "demo")
	if err != nil {
		t.Fatal(err)
	}
	want := `Short:    TopologyDomain: 4 more members must be placed at once; the free room fits 3 (4 unscheduled members exist)
          RESOURCE                 NEEDED  FREE  LARGEST MEMBER  LARGEST FREE ON A NODE
          cpu                      4       40    1               8
          devices/gpu.example.com  4       5     1               1
          (a devices/<class> row counts members: one is the devices one member claims)
Domains:  rack: r1 fits 3, r2 fits 2
Unblock:  needs 4 members, with their devices of class gpu.example.com, in one rack domain; the roomiest, rack=r1, fits 3
`
	if !strings.Contains(out, want) {
		t.Errorf("explain:\n%s\nwant it to contain:\n%s", out, want)
	}
}

// TestWatchEventsFlag: --output-watch-events goes with --watch and -o json or yaml only.
func TestWatchEventsFlag(t *testing.T) {
	for _, args := range [][]string{{"get", "--output-watch-events", "-o", "json"}, {"get", "-w", "--output-watch-events"}, {"get", "-w", "-o", "wide", "--output-watch-events"}} {
		if _, err := run(t, nil, args...); err == nil || !strings.Contains(err.Error(), "--output-watch-events goes with --watch and -o json or yaml") {
			t.Errorf("%q: error %v", args, err)
		}
	}
}

// TestLeaderWorkerSetMembers: a replica's PodGroup the scheduler made for a LeaderWorkerSet counts
// the replica's pods, which carry LWS's labels and no PodGroup label.
func TestLeaderWorkerSetMembers(t *testing.T) {
	out, err := run(t, func(kube *kubefake.Clientset, pgs *pgfake.Clientset) {
		pg := testPG("lws", "llm-0", 2, v1alpha1.PodGroupRunning, scheduled(podgroup.ReasonQuorumReached, "2 of minMember 2", time.Minute))
		pg.Labels = map[string]string{podgroup.LabelManagedBy: podgroup.ManagedBy, podgroup.LWSNameLabel: "llm", podgroup.LWSGroupIndexLabel: "0"}
		must(t, pgs.Tracker().Add(pg))
		for w, node := range []string{"n1", "n2"} {
			p := testPod("lws", "", fmt.Sprintf("llm-0-%d", w), node)
			p.Labels = map[string]string{podgroup.LWSNameLabel: "llm", podgroup.LWSGroupIndexLabel: "0", podgroup.LWSWorkerIndex: fmt.Sprint(w)}
			p.Annotations = map[string]string{podgroup.LWSSizeAnnotation: "2"}
			must(t, kube.Tracker().Add(p))
		}
	}, "get", "-n", "lws")
	if err != nil {
		t.Fatal(err)
	}
	fields := strings.Fields(strings.Split(strings.TrimSpace(out), "\n")[1])
	if fields[0] != "llm-0" || fields[2] != "2" || fields[3] != "2" {
		t.Errorf("kubectl gang get shows %v for the replica, want 2 live and 2 bound:\n%s", fields, out)
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
