package gang

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/util/sets"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework"
)

// TestApply: PreFilter's answer for each kind of step outcome, the marks it leaves for PostFilter and
// Filter's answer per node in the same cycle.
func TestApply(t *testing.T) {
	type got struct {
		Nodes   []string // the result's node names (nil: no result)
		Code    fwk.Code
		Message string
		Marks   Marks
		Filter  map[string]string // Filter's message per node, "" when it passes
	}
	for _, tc := range []struct {
		name string
		out  PreFilterOut
		want got
	}{
		{name: "nothing narrowed: Filter is skipped", out: PreFilterOut{},
			want: got{Code: fwk.Skip, Filter: map[string]string{"n1": "", "n2": ""}}},
		{name: "refused", out: PreFilterOut{Reject: true, Message: "malformed"},
			want: got{Code: fwk.UnschedulableAndUnresolvable, Message: "malformed", Marks: Marks{Rejected: true}, Filter: map[string]string{"n1": "", "n2": ""}}},
		{name: "infeasible", out: PreFilterOut{Reject: true, Infeasible: true, Message: "fit only 2"},
			want: got{Code: fwk.UnschedulableAndUnresolvable, Message: "fit only 2", Marks: Marks{Rejected: true, Infeasible: true}, Filter: map[string]string{"n1": "", "n2": ""}}},
		{name: "infeasible only with its job", out: PreFilterOut{Reject: true, Infeasible: true, Tree: true, Message: "short"},
			want: got{Code: fwk.UnschedulableAndUnresolvable, Message: "short", Marks: Marks{Rejected: true, Infeasible: true, Tree: true}, Filter: map[string]string{"n1": "", "n2": ""}}},
		{name: "a domain", out: PreFilterOut{Nodes: sets.New("n1")},
			want: got{Nodes: []string{"n1"}, Filter: map[string]string{"n1": "", "n2": "node n2 is outside the topology domain chosen for PodGroup ns/g"}}},
		{name: "the plan's offer", out: PreFilterOut{Nodes: sets.New("n2", "n1"), Offered: true},
			want: got{Nodes: []string{"n1", "n2"}, Marks: Marks{Planned: true, Offered: []string{"n1", "n2"}}, Filter: map[string]string{"n1": "", "n2": ""}}},
		{name: "kept off held devices on every node", out: PreFilterOut{KeptOff: map[string]string{"n2": "held"}},
			want: got{Filter: map[string]string{"n1": "", "n2": "held"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			state := framework.NewCycleState()
			res, st := tc.out.Apply(state, "ns/g")
			g := got{Code: st.Code(), Message: st.Message(), Marks: MarksOf(state), Filter: map[string]string{}}
			if res != nil {
				g.Nodes = sets.List(res.NodeNames)
			}
			for _, n := range []string{"n1", "n2"} {
				g.Filter[n] = Filter(state, n).Message()
			}
			if diff := cmp.Diff(tc.want, g); diff != "" {
				t.Errorf("Apply (-want,+got):\n%s", diff)
			}
		})
	}
}
