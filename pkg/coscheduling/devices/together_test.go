package devices

import (
	"slices"
	"testing"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2/ktesting"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/custom-scheduler/custom-scheduler/pkg/coscheduling/gangfit"
	"github.com/custom-scheduler/custom-scheduler/pkg/coscheduling/internal/gangtest"
)

// The parts of issue #47's fix, each on its own: what a node's devices hold with some of its holders
// gone (ReleasedBy), and members of several kinds fitting a node together (FitTogether).

// TestReleasedBy: what a node's devices hold with only some of its holders gone.
func TestReleasedBy(t *testing.T) {
	logger, _ := ktesting.NewTestContext(t)
	d := &fakeDRA{claims: map[string]*resourceapi.ResourceClaim{}, classes: map[string]*resourceapi.DeviceClass{class: gpuClass("")},
		slices: []*resourceapi.ResourceSlice{slice("n0", "a", "a", "a", "a"), slice("n1", "a")}}
	p, q := holding(d, "p", "n0", 0, 0, 1), holding(d, "q", "n0", 0, 2, 3)
	shared := held("both", []string{"n1/gpu-0"}, "r", "s")
	d.claims["ns/both"] = shared
	r, s := gangtest.Running("r", "", "n1", "1", 0), gangtest.Running("s", "", "n1", "1", 0)
	members := []*v1.Pod{asking(d, "m0", "g", class, 2, 100), asking(d, "m1", "g", class, 2, 100)}
	check := newSource(d).ForCheck(logger, members).(*Check)
	nodes := []fwk.NodeInfo{nodeInfo("n0", nil), nodeInfo("n1", nil)}
	rel := check.Released([]*v1.Pod{p, q, r, s}, nodes, 2)
	if got := rel["n0"].Copies; !slices.Equal(got, []int{2}) {
		t.Fatalf("n0 with both holders gone holds %v, want [2]", got)
	}
	for _, tc := range []struct {
		node    string
		holders []types.UID
		want    []int
	}{
		{"n0", []types.UID{"p"}, []int{1}},
		{"n0", []types.UID{"q"}, []int{1}},
		{"n0", []types.UID{"p", "q"}, []int{2}},
		{"n0", []types.UID{"x"}, nil},
		{"n1", []types.UID{"r"}, nil}, // the claim stays reserved by s
		{"n1", []types.UID{"r", "s"}, []int{0}},
	} {
		if got := check.ReleasedBy(tc.node, tc.holders, 2); !slices.Equal(got, tc.want) {
			t.Errorf("%s with %v gone holds %v, want %v", tc.node, tc.holders, got, tc.want)
		}
	}
}

// TestFitTogether: the allocator's answer for members of several kinds on one node, member after
// member, the nominated pods first.
func TestFitTogether(t *testing.T) {
	logger, _ := ktesting.NewTestContext(t)
	const other = "gpu-too"
	d := newFakeDRA(map[string]int{"n0": 3})
	d.classes[other] = classNamed(other, "")
	gang := []*v1.Pod{asking(d, "m0", "g", class, 1, 100), asking(d, "m1", "g", other, 1, 100)}
	nom := asking(d, "a-0", "a", class, 1, 100)
	nom.Status.NominatedNodeName = "n0"
	ni := nodeInfo("n0", nil)
	for _, tc := range []struct {
		counts  []int
		claimed []*v1.Pod
		want    bool
	}{
		{[]int{1, 1}, nil, true},
		{[]int{2, 1}, nil, true},
		{[]int{2, 2}, nil, false},
		{[]int{0, 3}, nil, true},
		{[]int{1, 1}, []*v1.Pod{nom}, true},
		{[]int{2, 1}, []*v1.Pod{nom}, false},
	} {
		src := gangfit.DeviceSource(newSource(d))
		if tc.claimed != nil {
			src = newSource(d).Claiming(tc.claimed)
		}
		check := src.ForCheck(logger, gang).(*Check)
		if got := check.FitTogether(ni, tc.counts, nil); got != tc.want {
			t.Errorf("counts %v (nominated %d): fit together %v, want %v", tc.counts, len(tc.claimed), got, tc.want)
		}
	}
}
