package gang

import (
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/custom-scheduler/custom-scheduler/pkg/coscheduling/gangfit"
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
