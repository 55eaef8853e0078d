package gang

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
	internalcache "k8s.io/kubernetes/pkg/scheduler/backend/cache"
	st "k8s.io/kubernetes/pkg/scheduler/testing"

	"github.com/custom-scheduler/custom-scheduler/pkg/coscheduling/devices"
	"github.com/custom-scheduler/custom-scheduler/pkg/coscheduling/internal/gangtest"
)

// HeldDevicesAgainst gathers the pods whose devices a pod must leave, by node: a reservation's
// members, and every other nominated pod that claims devices (issue #47 (b): a gang's preemption
// nominates its members, and a lone pod must not take the devices it freed for them). (Moved from the
// plugin with the rule; the pod itself is taken out by Without, since the held set is shared by the
// pods of one priority and group.)
func TestHeldDevicesAgainst(t *testing.T) {
	gpu := func(p *v1.Pod) *v1.Pod {
		p.Spec.Containers[0].Resources.Requests["example.com/gpu"] = resource.MustParse("1")
		return p
	}
	nominated := func(p *v1.Pod, node string) *v1.Pod {
		p.Status.NominatedNodeName = node
		return p
	}
	since := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	r0, r1 := gpu(gangtest.Member("r0", "res", "1")), gpu(gangtest.Member("r1", "res", "1"))
	reservation := HeldRoom{Namespace: "ns", Name: "res", Since: since, Node: map[types.UID]string{"r0": "n0", "r1": "n1"}}
	members := func(ns, name string) []*v1.Pod {
		if name == "res" {
			return []*v1.Pod{r0, r1}
		}
		return nil
	}
	lone := gpu(gangtest.Member("lone", "", "1"))
	for _, tc := range []struct {
		name      string
		held      []HeldRoom
		nominated []*v1.Pod
		want      map[string][]string
		whose     map[string]string
	}{
		{name: "a reservation's members", held: []HeldRoom{reservation},
			want:  map[string][]string{"n0": {"r0"}, "n1": {"r1"}},
			whose: map[string]string{"n0": "PodGroup ns/res (a reservation since 2026-01-01T00:00:00Z)"}},
		{name: "a preemption's nominated members",
			nominated: []*v1.Pod{nominated(gpu(gangtest.Member("hi-0", "hi", "1")), "n0"), nominated(gpu(gangtest.Member("hi-1", "hi", "1")), "n0")},
			want:      map[string][]string{"n0": {"hi-0", "hi-1"}},
			whose:     map[string]string{"n0": "PodGroup ns/hi (nominated there)"}},
		{name: "a nominated pod without devices is no held pod",
			nominated: []*v1.Pod{nominated(gangtest.Member("cpu", "", "1"), "n0")}},
		{name: "a reservation's member also nominated counts once, beside another gang's",
			held:      []HeldRoom{reservation},
			nominated: []*v1.Pod{nominated(r0, "n0"), nominated(gpu(gangtest.Member("hi-0", "hi", "1")), "n0")},
			want:      map[string][]string{"n0": {"r0", "hi-0"}, "n1": {"r1"}},
			whose:     map[string]string{"n0": "PodGroup ns/res"}},
		{name: "the pod itself is no held pod", nominated: []*v1.Pod{nominated(lone, "n0")}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := HeldDevicesAgainst(tc.held, members, tc.nominated, devices.MayClaim).Without(lone.UID)
			waiting, whose := h.Waiting, h.Whose
			got := map[string][]string{}
			for n, ps := range waiting {
				for _, p := range ps {
					got[n] = append(got[n], p.Name)
				}
			}
			if fmt.Sprint(got) != fmt.Sprint(nonNil(tc.want)) {
				t.Errorf("held %v, want %v", got, tc.want)
			}
			for n, w := range tc.whose {
				if !strings.HasPrefix(whose[n], w) {
					t.Errorf("node %s held for %q, want %q", n, whose[n], w)
				}
			}
			if slices.ContainsFunc(waiting["n0"], func(p *v1.Pod) bool { return p.UID == lone.UID }) {
				t.Error("the pod is held against itself")
			}
		})
	}
}

func nonNil(m map[string][]string) map[string][]string {
	if m == nil {
		return map[string][]string{}
	}
	return m
}

// TestHeldCache: the held devices are computed once per version, priority and group.
func TestHeldCache(t *testing.T) {
	var c HeldCache
	computed := 0
	compute := func() HeldDevices { computed++; return HeldDevices{} }
	for _, step := range []struct {
		version [2]uint64
		prio    int32
		own     string
		want    int
	}{
		{version: [2]uint64{1, 1}, prio: 0, want: 1},
		{version: [2]uint64{1, 1}, prio: 0, want: 1},
		{version: [2]uint64{1, 1}, prio: 10, want: 2},
		{version: [2]uint64{1, 1}, prio: 0, own: "ns/g", want: 3},
		{version: [2]uint64{1, 2}, prio: 0, want: 4}, // a nomination moved
		{version: [2]uint64{2, 2}, prio: 0, want: 5}, // a reservation moved
		{version: [2]uint64{2, 2}, prio: 0, want: 5},
	} {
		c.Of(step.version, step.prio, step.own, compute)
		if computed != step.want {
			t.Fatalf("after %+v: computed %d times, want %d", step, computed, step.want)
		}
	}
}

// TestHeldDevicesWithout: the held set shared by the pods of one priority and group leaves out the pod
// asking (it never leaves room for itself) without changing the shared set, and names, per node kept
// off, for whom.
func TestHeldDevicesWithout(t *testing.T) {
	a, b, c := gangtest.Member("a", "res", "1"), gangtest.Member("b", "res", "1"), gangtest.Member("c", "res", "1")
	h := HeldDevices{Waiting: map[string][]*v1.Pod{"n0": {a, b}, "n1": {c}}, Whose: map[string]string{"n0": "PodGroup ns/res", "n1": "PodGroup ns/res"}}
	names := func(h HeldDevices) string {
		var out []string
		for _, n := range []string{"n0", "n1"} {
			for _, p := range h.Waiting[n] {
				out = append(out, n+":"+p.Name)
			}
		}
		return strings.Join(out, " ")
	}
	for _, tc := range []struct {
		uid  types.UID
		want string
	}{
		{uid: "x", want: "n0:a n0:b n1:c"},
		{uid: a.UID, want: "n0:b n1:c"},
		{uid: c.UID, want: "n0:a n0:b"},
	} {
		if got := names(h.Without(tc.uid)); got != tc.want {
			t.Errorf("without %s: %s, want %s", tc.uid, got, tc.want)
		}
	}
	if got := names(h); got != "n0:a n0:b n1:c" {
		t.Errorf("the shared set changed: %s", got)
	}
	if h.Without(c.UID).Empty() || !(HeldDevices{}).Empty() {
		t.Error("Empty is wrong")
	}
	why := h.KeptOffNodes(sets.New("n1"))
	if len(why) != 1 || why["n1"] != "devices on the node are held for PodGroup ns/res" {
		t.Errorf("kept off %v", why)
	}
	if h.KeptOffNodes(nil) != nil {
		t.Error("no node kept off, yet a reason")
	}
}

// fakeFit keeps a pod off the nodes of off (or fails), and records the nodes it was asked about and
// which of them the snapshot has.
type fakeFit struct {
	off   []string
	err   error
	asked []string
}

func (f *fakeFit) KeptOff(_ klog.Logger, _ *v1.Pod, held map[string][]*v1.Pod, node func(string) fwk.NodeInfo) (sets.Set[string], error) {
	for n := range held {
		f.asked = append(f.asked, fmt.Sprintf("%s:%v", n, node(n) != nil))
	}
	slices.Sort(f.asked)
	return sets.New(f.off...), f.err
}

// TestHeldDevicesKeptOff: a pod is kept off the held nodes where the device fit says its devices do
// not fit, each with for whom; its own hold is left out, nothing held asks the fit nothing, and a
// failed comparison keeps it off nothing.
func TestHeldDevicesKeptOff(t *testing.T) {
	a, b := gangtest.Member("a", "res", "1"), gangtest.Member("b", "res", "1")
	h := HeldDevices{Waiting: map[string][]*v1.Pod{"n0": {a}, "n1": {b}}, Whose: map[string]string{"n0": "PodGroup ns/res", "n1": "PodGroup ns/res"}}
	infos := internalcache.NewSnapshot(nil, []*v1.Node{st.MakeNode().Name("n0").Obj()}).NodeInfos()
	type got struct {
		KeptOff map[string]string
		Asked   []string // the held nodes the fit was asked about, and whether the snapshot has each
	}
	for _, tc := range []struct {
		name string
		h    HeldDevices
		pod  *v1.Pod
		fit  fakeFit
		want got
	}{
		{name: "kept off where its devices do not fit", h: h, pod: gangtest.Member("x", "", "1"), fit: fakeFit{off: []string{"n1"}},
			want: got{KeptOff: map[string]string{"n1": "devices on the node are held for PodGroup ns/res"}, Asked: []string{"n0:true", "n1:false"}}},
		{name: "they fit everywhere", h: h, pod: gangtest.Member("x", "", "1"),
			want: got{Asked: []string{"n0:true", "n1:false"}}},
		{name: "its own hold left out", h: h, pod: a, fit: fakeFit{off: []string{"n1"}},
			want: got{KeptOff: map[string]string{"n1": "devices on the node are held for PodGroup ns/res"}, Asked: []string{"n1:false"}}},
		{name: "nothing held", h: HeldDevices{}, pod: gangtest.Member("x", "", "1"), fit: fakeFit{off: []string{"n1"}}},
		{name: "the comparison failed", h: h, pod: gangtest.Member("x", "", "1"), fit: fakeFit{off: []string{"n1"}, err: fmt.Errorf("no claims")},
			want: got{Asked: []string{"n0:true", "n1:false"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fit := tc.fit
			g := got{KeptOff: tc.h.KeptOff(klog.Background(), tc.pod, &fit, infos)}
			g.Asked = fit.asked
			if diff := cmp.Diff(tc.want, g); diff != "" {
				t.Errorf("KeptOff (-want,+got):\n%s", diff)
			}
		})
	}
}
