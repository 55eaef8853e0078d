package gang

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/custom-scheduler/custom-scheduler/pkg/apis/config"
	"github.com/custom-scheduler/custom-scheduler/pkg/apis/scheduling/v1alpha1"
	"github.com/custom-scheduler/custom-scheduler/pkg/coscheduling/gangfit"
	"github.com/custom-scheduler/custom-scheduler/pkg/coscheduling/internal/gangtest"
	"github.com/custom-scheduler/custom-scheduler/pkg/coscheduling/podgroup"
)

// TestAllowed: the nodes a member may use and those it is kept off, and Filter's answer per node.
func TestAllowed(t *testing.T) {
	domain := PreFilterOut{Nodes: sets.New("n1", "n2")}
	offered := PreFilterOut{Nodes: sets.New("n1"), Offered: true}
	keptOff := PreFilterOut{KeptOff: map[string]string{"n3": "devices held"}}
	cases := []struct {
		name string
		out  PreFilterOut
		node string
		// want is Filter's code and message; nilAllowed: no AllowedNodes at all.
		want       *fwk.Status
		nilAllowed bool
	}{
		{name: "not narrowed", out: PreFilterOut{}, nilAllowed: true},
		{name: "in the domain", out: domain, node: "n1"},
		{name: "outside the domain", out: domain, node: "n3",
			want: fwk.NewStatus(fwk.UnschedulableAndUnresolvable, "node n3 is outside the topology domain chosen for PodGroup ns/g")},
		{name: "offered", out: offered, node: "n1"},
		{name: "not offered", out: offered, node: "n2",
			want: fwk.NewStatus(fwk.UnschedulableAndUnresolvable, "node n2 is not among the planned nodes PodGroup ns/g offers this member")},
		{name: "kept off", out: keptOff, node: "n3", want: fwk.NewStatus(fwk.UnschedulableAndUnresolvable, "devices held")},
		{name: "not kept off, every node", out: keptOff, node: "n1"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			a := tc.out.Allowed("ns/g")
			if (a == nil) != tc.nilAllowed {
				t.Fatalf("Allowed = %+v, want nil: %v", a, tc.nilAllowed)
			}
			if a == nil {
				return
			}
			if a.Clone() != a {
				t.Error("Clone copied what never changes")
			}
			got := a.Filter(tc.node)
			if got.Code() != tc.want.Code() || got.Message() != tc.want.Message() {
				t.Errorf("Filter(%s) = %v, want %v", tc.node, got, tc.want)
			}
		})
	}
}

// TestPreFilterEvent: one PodGroup event per fresh check, GangInfeasible or DomainChosen.
func TestPreFilterEvent(t *testing.T) {
	chosen := &gangfit.Placement{Message: "rack=a"}
	cases := []struct {
		name                 string
		out                  PreFilterOut
		wantType, wantReason string
		wantMessage          string
	}{
		{name: "nothing", out: PreFilterOut{Checked: true}},
		{name: "infeasible, as before", out: PreFilterOut{Checked: true, Infeasible: true, Message: "no room"}},
		{name: "became infeasible", out: PreFilterOut{Checked: true, Infeasible: true, InfeasibleChanged: true, Message: "no room"},
			wantType: v1.EventTypeWarning, wantReason: podgroup.ReasonGangInfeasible, wantMessage: "no room"},
		{name: "from the cache", out: PreFilterOut{Infeasible: true, InfeasibleChanged: true, Message: "no room"}},
		{name: "domain chosen", out: PreFilterOut{Checked: true, DomainChosen: true, Placement: chosen},
			wantType: v1.EventTypeNormal, wantReason: podgroup.ReasonDomainChosen, wantMessage: "rack=a"},
	}
	for _, tc := range cases {
		typ, reason, msg := tc.out.Event()
		if typ != tc.wantType || reason != tc.wantReason || msg != tc.wantMessage {
			t.Errorf("%s: Event = %q, %q, %q; want %q, %q, %q", tc.name, typ, reason, msg, tc.wantType, tc.wantReason, tc.wantMessage)
		}
	}
}

// TestSignFragments: a member is signed with its group when a topology policy is in force (the
// spec's, its annotations', the default, or a malformed one) or a plan may place it; otherwise it is
// not signed.
func TestSignFragments(t *testing.T) {
	pg := gangtest.PodGroup("ns", "g", 2, t0)
	withSpec := pg.DeepCopy()
	withSpec.Spec.TopologyPolicy = &v1alpha1.TopologyPolicy{Required: "example.com/rack"}
	annotated := gangtest.Member("a", "g", "1")
	annotated.Annotations = map[string]string{gangfit.AnnotationTopologyRequired: "example.com/rack"}
	malformed := gangtest.Member("b", "g", "1")
	malformed.Annotations = map[string]string{gangfit.AnnotationTopologyRequired: "not a key"}
	group := []fwk.SignFragment{{Key: signFragmentGroup, Value: "ns/g"}}
	for _, tc := range []struct {
		name      string
		pg        *v1alpha1.PodGroup
		pod       *v1.Pod
		def       config.TopologyPolicy
		plannable bool
		want      []fwk.SignFragment
	}{
		{name: "no policy, no plan", pg: pg, pod: gangtest.Member("m", "g", "1")},
		{name: "the spec's policy", pg: withSpec, pod: gangtest.Member("m", "g", "1"), want: group},
		{name: "the annotations' policy", pg: pg, pod: annotated, want: group},
		{name: "the default policy", pg: pg, pod: gangtest.Member("m", "g", "1"), def: config.TopologyPolicy{Required: "topology.kubernetes.io/zone"}, want: group},
		{name: "a malformed policy", pg: pg, pod: malformed, want: group},
		{name: "a plan may place it", pg: pg, pod: gangtest.Member("m", "g", "1"), plannable: true, want: group},
	} {
		got := SignFragments("ns/g", tc.pg, tc.pod, tc.def, func(*v1.Pod) bool { return tc.plannable })
		if diff := cmp.Diff(tc.want, got); diff != "" {
			t.Errorf("%s: SignFragments (-want,+got):\n%s", tc.name, diff)
		}
	}
}
