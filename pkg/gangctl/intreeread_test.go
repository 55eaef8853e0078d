package gangctl

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	schedulingv1beta1 "k8s.io/api/scheduling/v1beta1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	kubefake "k8s.io/client-go/kubernetes/fake"
	clienttesting "k8s.io/client-go/testing"

	"github.com/custom-scheduler/custom-scheduler/pkg/apis/scheduling/v1alpha1"
	pgfake "github.com/custom-scheduler/custom-scheduler/pkg/generated/clientset/versioned/fake"
)

// inTreeAPIResources is what discovery says of an apiserver that serves the in-tree groups.
var inTreeAPIResources = []*metav1.APIResourceList{
	{GroupVersion: "scheduling.k8s.io/v1beta1", APIResources: []metav1.APIResource{{Name: "podgroups", Namespaced: true, Kind: "PodGroup"}}},
	{GroupVersion: "scheduling.k8s.io/v1alpha3", APIResources: []metav1.APIResource{{Name: "compositepodgroups", Namespaced: true, Kind: "CompositePodGroup"}}},
}

// runInTree runs kubectl gang against fake clients holding inTreeJob's objects in namespace jobs,
// discovery listing the in-tree APIs when served; it returns the output and what went to stderr.
func runInTree(t *testing.T, served bool, edit func(*kubefake.Clientset), args ...string) (string, string, error) {
	t.Helper()
	g, pods := inTreeJob()
	kube, pgs := kubefake.NewClientset(), pgfake.NewSimpleClientset()
	ctx := context.Background()
	for i := range g.pgs {
		pg := g.pgs[i]
		if name, ok := strings.CutPrefix(pg.Name, "podgroups.scheduling.k8s.io/"); ok {
			continue // created below as the in-tree objects they were read from
		} else if _, err := pgs.SchedulingV1alpha1().PodGroups(pg.Namespace).Create(ctx, &pg, metav1.CreateOptions{}); err != nil {
			t.Fatal(name, err)
		}
	}
	for _, in := range []*schedulingv1beta1.PodGroup{
		inTreePG("jobs", "prefill", 2, "serve", unschedulable("GangInfeasible: PodGroup jobs/podgroups.scheduling.k8s.io/prefill needs 2 more members placed at once")),
		inTreePG("jobs", "decode", 4, "serve"),
	} {
		if _, err := kube.SchedulingV1beta1().PodGroups("jobs").Create(ctx, in, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	for i := range g.composites {
		if _, err := kube.SchedulingV1alpha3().CompositePodGroups("jobs").Create(ctx, &g.composites[i], metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	for _, ps := range pods {
		for _, p := range ps {
			if _, err := kube.CoreV1().Pods("jobs").Create(ctx, p, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
		}
	}
	if _, err := kube.CoreV1().Events("jobs").Create(ctx, &v1.Event{ObjectMeta: metav1.ObjectMeta{Namespace: "jobs", Name: "e1"},
		InvolvedObject: v1.ObjectReference{Kind: "PodGroup", Name: "prefill", UID: "jobs-it-prefill"}, Type: v1.EventTypeWarning,
		Reason: "GangInfeasible", Message: "does not fit", LastTimestamp: ago(60e9), Count: 1}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if served {
		kube.Resources = inTreeAPIResources
	}
	if edit != nil {
		edit(kube)
	}
	conn := func(*genericclioptions.ConfigFlags) (Clients, string, error) {
		return Clients{Kube: kube, PodGroups: pgs}, "jobs", nil
	}
	var out, errOut bytes.Buffer
	cmd := NewCommand(&out, func() time.Time { return testNow }, conn)
	cmd.SetArgs(args)
	cmd.SetErr(&errOut)
	err := cmd.ExecuteContext(ctx)
	return out.String(), errOut.String(), err
}

// TestInTreeCommands: get and explain show in-tree PodGroups and CompositePodGroups where they are
// served, their trees resolved as the scheduler resolves them and the blocking child named; where
// they are not, exactly what they showed before.
func TestInTreeCommands(t *testing.T) {
	tree := `NAME                                        PHASE          LIVE  BOUND  WAITING  GATED  MIN  AGE  WAITING FOR
compositepodgroups.scheduling.k8s.io/serve  Pending        2     1      -        -      2    10m  1 of minGroupCount 2 groups whole; short: podgroups.scheduling.k8s.io/prefill 0/2
├─ podgroups.scheduling.k8s.io/decode       Running        4     4      0        0      4    10m  running
└─ podgroups.scheduling.k8s.io/prefill      PreScheduling  2     0      0        0      2    10m  room
`
	job := `Job:      compositepodgroups.scheduling.k8s.io/serve, not whole: a group is whole with minMember members bound, a gang composite with minGroupCount whole children
          compositepodgroups.scheduling.k8s.io/serve  Pending        1/2 groups  1 of minGroupCount 2 groups whole; short: podgroups.scheduling.k8s.io/prefill 0/2
          ├─ podgroups.scheduling.k8s.io/decode       Running        4/4         running
          └─ podgroups.scheduling.k8s.io/prefill      PreScheduling  0/2         room
Blocked:  compositepodgroups.scheduling.k8s.io/serve: 1 of minGroupCount 2 groups whole; it needs 1 more
          podgroups.scheduling.k8s.io/prefill: 0 of minMember 2 members bound, waiting for Room (room)
            why: PodGroup jobs/podgroups.scheduling.k8s.io/prefill needs 2 more members placed at once
`
	forbidden := func(kube *kubefake.Clientset) {
		kube.PrependReactor("list", "compositepodgroups", func(clienttesting.Action) (bool, runtime.Object, error) {
			return true, nil, apierrors.NewForbidden(schema.GroupResource{Group: "scheduling.k8s.io", Resource: "compositepodgroups"}, "", nil)
		})
	}
	cases := []struct {
		name     string
		served   bool
		edit     func(*kubefake.Clientset)
		args     []string
		want     string
		contains bool
		wantErr  string
		stderr   string
	}{
		{name: "the list: ours, then the in-tree job under its composite", served: true, args: []string{"get"},
			want: `NAME                                        PHASE          LIVE  BOUND  WAITING  GATED  MIN  AGE  WAITING FOR
compositepodgroups.scheduling.k8s.io/serve  Pending        2     1      -        -      2    10m  1 of minGroupCount 2 groups whole; short: podgroups.scheduling.k8s.io/prefill 0/2
├─ podgroups.scheduling.k8s.io/decode       Running        4     4      0        0      4    10m  running
└─ podgroups.scheduling.k8s.io/prefill      PreScheduling  2     0      0        0      2    10m  room
prefill                                     Running        0     0      0        0      1    10m  0 of 1 members exist
`},
		{name: "not served: ours only, nothing said", args: []string{"get"}, want: `NAME     PHASE    LIVE  BOUND  WAITING  GATED  MIN  AGE  WAITING FOR
prefill  Running  0     0      0        0      1    10m  0 of 1 members exist
`},
		{name: "a bare name of ours is ours", served: true, args: []string{"get", "prefill"}, want: `NAME     PHASE    LIVE  BOUND  WAITING  GATED  MIN  AGE  WAITING FOR
prefill  Running  0     0      0        0      1    10m  0 of 1 members exist
`},
		{name: "an in-tree child by its spelling: its job's tree", served: true, args: []string{"get", "podgroups.scheduling.k8s.io/prefill"}, want: tree},
		{name: "an in-tree child by a bare name no group of ours has", served: true, args: []string{"get", "decode"}, want: tree},
		{name: "the composite by its bare name", served: true, args: []string{"get", "serve"}, want: tree},
		{name: "not served: a bare in-tree name is not found", args: []string{"get", "decode"}, wantErr: `PodGroup "decode" not found in namespace jobs`},
		{name: "absent in both", served: true, args: []string{"explain", "absent"}, wantErr: `PodGroup "absent" not found in namespace jobs`},
		{name: "in-tree groups are not watched", served: true, args: []string{"get", "decode", "--watch"},
			wantErr: "podgroups.scheduling.k8s.io/decode is an in-tree group: --watch follows PodGroups of scheduling.x-k8s.io only"},
		{name: "the kind in wide", served: true, args: []string{"get", "serve", "-o", "wide"}, contains: true,
			want: "podgroups.scheduling.k8s.io/prefill      PreScheduling  2     0      0        0      2    10m  room                                                                                GangInfeasible  <none>  <none>       PodGroup.scheduling.k8s.io\n"},
		{name: "explain an in-tree group: its status is derived", served: true, args: []string{"explain", "decode"}, contains: true,
			want: "Status:   in-tree (scheduling.k8s.io/v1beta1), with no status of ours"},
		{name: "explain the whole child: its job and the child that blocks", served: true, args: []string{"explain", "decode"}, contains: true, want: job},
		{name: "explain the composite", served: true, args: []string{"explain", "compositepodgroups.scheduling.k8s.io/serve"}, contains: true,
			want: `CompositePodGroup jobs/compositepodgroups.scheduling.k8s.io/serve (gang composite): Pending, 1 of minGroupCount 2 groups whole; short: podgroups.scheduling.k8s.io/prefill 0/2 (age 10m)
Groups:   1 of its 2 children whole, of minGroupCount 2
Upstream: CompositePodGroupInitiallyScheduled=False, Unschedulable (for 60s): prefill: GangInfeasible
Why:      Unschedulable (for 60s): prefill: GangInfeasible
` + job},
		{name: "explain an in-tree group: its conditions, its events", served: true, args: []string{"explain", "podgroups.scheduling.k8s.io/prefill"}, contains: true,
			want: `Upstream: PodGroupInitiallyScheduled=False, Unschedulable (for 60s): GangInfeasible: PodGroup jobs/podgroups.scheduling.k8s.io/prefill needs 2 more members placed at once
Why:      GangInfeasible (for 60s): PodGroup jobs/podgroups.scheduling.k8s.io/prefill needs 2 more members placed at once
`},
		{name: "explain an in-tree group's events", served: true, args: []string{"explain", "podgroups.scheduling.k8s.io/prefill"}, contains: true,
			want: "Warning  GangInfeasible  podgroups.scheduling.k8s.io/prefill  does not fit\n"},
		{name: "composites the user may not read: left out, said on stderr", served: true, edit: forbidden, args: []string{"get"}, contains: true,
			want:   "podgroups.scheduling.k8s.io/decode   Running ",
			stderr: "Warning: not allowed to list compositepodgroups.scheduling.k8s.io in namespace jobs: they are not shown\n"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			out, stderr, err := runInTree(t, tc.served, tc.edit, tc.args...)
			if tc.wantErr != "" {
				if err == nil || err.Error() != tc.wantErr {
					t.Fatalf("error %v, want %s", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			// Cells are compared, not their padding.
			got, want := padding.ReplaceAllString(out, " | "), padding.ReplaceAllString(tc.want, " | ")
			if tc.contains && !strings.Contains(got, want) || !tc.contains && got != want {
				t.Errorf("output:\n%s\nwant (contains %v):\n%s", out, tc.contains, tc.want)
			}
			if stderr != tc.stderr {
				t.Errorf("stderr %q, want %q", stderr, tc.stderr)
			}
		})
	}
}

// TestInTreeJSON: -o json names an in-tree group's kind and API, says its status is derived, and
// carries its tree and its own conditions.
func TestInTreeJSON(t *testing.T) {
	out, _, err := runInTree(t, true, nil, "get", "decode", "-o", "json")
	if err != nil {
		t.Fatal(err)
	}
	var s Summary
	if err := json.Unmarshal([]byte(out), &s); err != nil {
		t.Fatalf("not JSON: %v\n%s", err, out)
	}
	if s.Name != "podgroups.scheduling.k8s.io/decode" || s.Kind != KindPodGroup || s.APIVersion != "scheduling.k8s.io/v1beta1" || !s.Derived ||
		s.Tree == nil || s.Tree.Name != "compositepodgroups.scheduling.k8s.io/serve" || len(s.Blockers) != 2 || s.Blockers[1].Name != "podgroups.scheduling.k8s.io/prefill" {
		t.Errorf("summary: %s", out)
	}
	out, _, err = runInTree(t, true, nil, "get", "-o", "json")
	if err != nil {
		t.Fatal(err)
	}
	var list struct{ Items []Summary }
	if err := json.Unmarshal([]byte(out), &list); err != nil {
		t.Fatalf("not JSON: %v\n%s", err, out)
	}
	var kinds []string
	for _, it := range list.Items {
		kinds = append(kinds, it.APIVersion+" "+it.Kind)
	}
	want := "scheduling.k8s.io/v1alpha3 CompositePodGroup,scheduling.k8s.io/v1beta1 PodGroup,scheduling.k8s.io/v1beta1 PodGroup," + v1alpha1.SchemeGroupVersion.String() + " PodGroup"
	if got := strings.Join(kinds, ","); got != want {
		t.Errorf("kinds %s, want %s", got, want)
	}
}
