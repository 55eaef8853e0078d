package devices

import (
	"slices"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2/ktesting"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework/preemption"

	"github.com/custom-scheduler/custom-scheduler/pkg/coscheduling/gangfit"
	"github.com/custom-scheduler/custom-scheduler/pkg/coscheduling/internal/gangtest"
)

// TestRefusedNodes: where the real filter refused a member, a node its check's allocator does not
// reach in time holds no member of its kind (not every one); a node the allocator answers for keeps
// its answer (devices freed since the refusal count). Other kinds, and other nodes, are counted as
// before by the check. A preemption search (gangfit.Shared.ForSearch) never counts a node it could
// not ask in time as holding members: it evicts only for devices the allocator counts freed. outOfTime runs the check on an allocator whose time is up; the member asks
// 2 GPUs in two requests (so that the allocator, not a count of free devices, answers), and n0 has 2
// free GPUs of 4, v holding the other 2.
func TestRefusedNodes(t *testing.T) {
	cases := []struct {
		name string
		// refused: by node, the members refused there ("b" is the gang's member, "other" a pod of
		// no kind of this check).
		refused   map[string][]string
		outOfTime bool
		feasible  bool
		// fits, victims: the preemption search's answer.
		fits    bool
		victims []string
	}{
		{name: "nothing refused, out of time: the check counts n0 as holding the member (the relaxation); a search would not",
			outOfTime: true, feasible: true, fits: true, victims: []string{"v"}},
		{name: "the member refused on n0, out of time: the check finds it short, the search evicts n0's holder",
			refused: map[string][]string{"n0": {"b-0"}}, outOfTime: true, fits: true, victims: []string{"v"}},
		{name: "the member refused on n0, the allocator answers: n0's two free GPUs hold it, nothing to evict",
			refused: map[string][]string{"n0": {"b-0"}}, feasible: true, fits: true},
		{name: "refused on another node, out of time: the check counts n0 as holding it",
			refused: map[string][]string{"n1": {"b-0"}}, outOfTime: true, feasible: true, fits: true, victims: []string{"v"}},
		{name: "a pod of another check refused on n0, out of time: not this kind",
			refused: map[string][]string{"n0": {"other"}}, outOfTime: true, feasible: true, fits: true, victims: []string{"v"}},
		{name: "nothing refused, the allocator answers: neither check nor search evicts",
			feasible: true, fits: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			logger, _ := ktesting.NewTestContext(t)
			d := newFakeDRA(map[string]int{"n0": 4})
			v := holding(d, "v", "n0", 0, 0, 1)
			gang := []*v1.Pod{twoRequests(d, asking(d, "b-0", "b", class, 1, 50))}
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
			src := newSource(d)
			if tc.outOfTime {
				src = src.WithCheckBudget(time.Nanosecond)
			}
			shared := (&gangfit.Shared{Devices: src}).WithRefused(refused)
			res, f := gangfit.Check(logger, "ns/b", gang, 1, nodes, nil, nil, nil, shared)
			f.Done()
			if res.Feasible != tc.feasible {
				t.Errorf("feasible = %v, want %v (%s)", res.Feasible, tc.feasible, res.Message)
			}
			pf := gangfit.New(logger, "ns/b", gang, 1, nodes, nil, nil, (&gangfit.Shared{Devices: src}).ForSearch(), true)
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

// twoRequests gives member p's claim (made by asking, of one device) a second request alike.
func twoRequests(d *fakeDRA, p *v1.Pod) *v1.Pod {
	c := d.claims[p.Namespace+"/"+p.Name+"-gpu"]
	second := c.Spec.Devices.Requests[0].DeepCopy()
	second.Name += "-2"
	c.Spec.Devices.Requests = append(c.Spec.Devices.Requests, *second)
	return p
}
