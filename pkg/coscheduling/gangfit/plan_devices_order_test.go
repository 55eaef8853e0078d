package gangfit

import (
	"fmt"
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2/ktesting"
	fwk "k8s.io/kube-scheduler/framework"
)

// TestPlanShapesDeviceMembersOfTwoSizes is the smallest case TestMixedShapesRandomized (test/integration)
// found: two members that each claim one device (by template), of 1500m and 2 CPU, and two nodes of
// one device each, of 1900m and 2400m. Exactly one placement exists: the 2-CPU member on the 2400m
// node, the 1500m one on the 1900m node. Whatever order the gang's members come in, the plan must
// find it.
//
// It fails today when the small member comes first (the big-first case passes): assign orders the
// members by dominant share, and the device is each member's dominant resource (1 of the cluster's
// 2 free devices, a share of 1/2, against 2/4.3 and 1.5/4.3 of the CPU), so both members have the
// same share and keep their order; the small one goes first-fit on the 2400m node and the big one
// finds no node. PlanPlacement then returns nil, the check admits the gang on its aggregate test
// ("First-fit decreasing could not place a mixed gang"), and the members go through full cycles, where
// the scores put the small one on the big node: in the integration test, such gangs are rejected 1 to
// 5 times (GangRejected, "retrying in a moment with it placed first") and some are not bound after 15 s.
func TestPlanShapesDeviceMembersOfTwoSizes(t *testing.T) {
	tmpl := "gpu"
	claimMember := func(name, cpu string) *v1.Pod {
		p := member(name, "g", cpu)
		p.Spec.ResourceClaims = []v1.PodResourceClaim{{Name: "gpu", ResourceClaimTemplateName: &tmpl}}
		return p
	}
	small, big := claimMember("small", "1500m"), claimMember("big", "2")
	for _, gang := range [][]*v1.Pod{{big, small}, {small, big}} {
		t.Run(fmt.Sprintf("%s listed first", gang[0].Name), func(t *testing.T) {
			logger, _ := ktesting.NewTestContext(t)
			nodes := []fwk.NodeInfo{node("n2400m", "2400m"), node("n1900m", "1900m")}
			d := &fakeDevices{kind: kindOf(gang), devices: map[string]int{"n2400m": 1, "n1900m": 1}}
			f := New(logger, "ns/g", gang, len(gang), nodes, nil, nil, &Shared{Devices: d}, false)
			defer f.Done()
			p := PlanPlacement(f, nil)
			if p == nil {
				t.Fatal("no plan, though exactly one placement exists (big on n2400m, small on n1900m)")
			}
			want := map[string]string{ShapeOf(big): "n2400m", ShapeOf(small): "n1900m"}
			for _, pn := range p.Nodes {
				if want[pn.Shape] != pn.Name || pn.Members != 1 {
					t.Errorf("plan %+v, want the big member on n2400m and the small one on n1900m", p.Nodes)
					break
				}
			}
		})
	}
}
