package devices

import (
	"slices"
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2/ktesting"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework/preemption"

	"github.com/custom-scheduler/custom-scheduler/pkg/coscheduling/gangfit"
	"github.com/custom-scheduler/custom-scheduler/pkg/coscheduling/internal/gangtest"
)

// TestRefusedNodes: a node where the real filter refused a member counts no member of its kind, for
// the check and for the preemption search; what the search's victims free there is the allocator's
// count without them. Other kinds, and other nodes, are counted as before.
func TestRefusedNodes(t *testing.T) {
	cases := []struct {
		name string
		// refused: by node, the members refused there ("b" is the gang's member, "other" a pod of
		// no kind of this check).
		refused  map[string][]string
		feasible bool
		// fits, victims: the preemption search's answer.
		fits    bool
		victims []string
	}{
		{name: "nothing refused: the two free devices of n0 hold the member; nothing to evict",
			feasible: true, fits: true},
		{name: "the member refused on n0: the check finds it short, the search evicts n0's holder",
			refused: map[string][]string{"n0": {"b-0"}}, fits: true, victims: []string{"v"}},
		{name: "refused on another node: n0 holds it",
			refused: map[string][]string{"n1": {"b-0"}}, feasible: true, fits: true},
		{name: "a pod of another check refused on n0: not this kind",
			refused: map[string][]string{"n0": {"other"}}, feasible: true, fits: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			logger, _ := ktesting.NewTestContext(t)
			d := newFakeDRA(map[string]int{"n0": 4})
			v := holding(d, "v", "n0", 0, 0, 1)
			gang := []*v1.Pod{asking(d, "b-0", "b", class, 2, 50)}
			nodes := []fwk.NodeInfo{gangtest.CPUNode("n0", "64", v)}
			var refused map[string][]types.UID
			for node, pods := range tc.refused {
				if refused == nil {
					refused = map[string][]types.UID{}
				}
				for _, p := range pods {
					uid := types.UID("other")
					if p == "b-0" {
						uid = gang[0].UID
					}
					refused[node] = append(refused[node], uid)
				}
			}
			shared := (&gangfit.Shared{Devices: newSource(d)}).WithRefused(refused)
			res, f := gangfit.Check(logger, "ns/b", gang, 1, nodes, nil, nil, nil, shared)
			f.Done()
			if res.Feasible != tc.feasible {
				t.Errorf("feasible = %v, want %v (%s)", res.Feasible, tc.feasible, res.Message)
			}
			pf := gangfit.New(logger, "ns/b", gang, 1, nodes, nil, nil, shared, true)
			defer pf.Done()
			plan := gangfit.PlanPreemption(pf, nodes, gangfit.Policy{}, nil, 50, "ns/b", preemption.PodTerminatingByPreemption, nil)
			if plan.Fits != tc.fits {
				t.Fatalf("fits = %v, want %v", plan.Fits, tc.fits)
			}
			if got := podNames(plan.Victims); !slices.Equal(got, tc.victims) {
				t.Errorf("victims %v, want %v", got, tc.victims)
			}
		})
	}
}
