package gangfit

import (
	"fmt"
	"math"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/noderesources"
	st "k8s.io/kubernetes/pkg/scheduler/testing"
)

const (
	rsGPU  = v1.ResourceName("example.com/gpu")
	rsFPGA = v1.ResourceName("example.com/fpga")
	rsNIC  = v1.ResourceName("example.com/nic")
	gi     = int64(1) << 30
)

var rsAllow = cmp.AllowUnexported(resources{}, podRequest{}, namedAmount{})

// rsOf is a resources value; no scalar arguments leave scalar nil.
func rsOf(milliCPU, memory, ephemeral int64, scalar ...int64) resources {
	return resources{milliCPU: milliCPU, memory: memory, ephemeral: ephemeral, scalar: scalar}
}

// rsNode is a node with the given capacity (110 pod slots unless set) and pods on it.
func rsNode(name string, capacity map[v1.ResourceName]string, pods ...*v1.Pod) *framework.NodeInfo {
	c := map[v1.ResourceName]string{v1.ResourcePods: "110"}
	for k, v := range capacity {
		c[k] = v
	}
	ni := framework.NewNodeInfo(pods...)
	ni.SetNode(st.MakeNode().Name(name).Capacity(c).Obj())
	return ni
}

// rsPod is a pod of namespace "ns" (UID = name) with one container requesting req (none when empty).
func rsPod(name string, req map[v1.ResourceName]string) *v1.Pod {
	return st.MakePod().Namespace("ns").Name(name).UID(name).Req(req).Obj()
}

func TestResourcesArithmetic(t *testing.T) {
	cases := []struct {
		name       string
		r, o       resources
		wantAdd    resources
		wantFits   bool // r fits into o
		wantEqual  bool
		wantCopies int // copies of r in o, limit 10
	}{
		{name: "no scalars stay nil", r: rsOf(1000, 2, 3), o: rsOf(4000, 20, 30),
			wantAdd: rsOf(5000, 22, 33), wantFits: true, wantCopies: 4},
		{name: "equal amounts fit once", r: rsOf(1000, gi, 1, 2), o: rsOf(1000, gi, 1, 2),
			wantAdd: rsOf(2000, 2*gi, 2, 4), wantFits: true, wantEqual: true, wantCopies: 1},
		{name: "cpu over", r: rsOf(1001, 0, 0), o: rsOf(1000, gi, 0), wantAdd: rsOf(2001, gi, 0)},
		{name: "memory over", r: rsOf(0, 2*gi, 0), o: rsOf(4000, gi, 0), wantAdd: rsOf(4000, 3*gi, 0)},
		{name: "ephemeral over", r: rsOf(0, 0, 5), o: rsOf(4000, gi, 4), wantAdd: rsOf(4000, gi, 9)},
		{name: "scalar over", r: rsOf(0, 0, 0, 0, 3), o: rsOf(4000, gi, 0, 5, 2), wantAdd: rsOf(4000, gi, 0, 5, 5)},
		{name: "scalar beyond the free slice is none", r: rsOf(100, 0, 0, 0, 1), o: rsOf(4000, gi, 0, 5),
			wantAdd: rsOf(4100, gi, 0, 5, 1)},
		{name: "a zero scalar beyond the free slice fits", r: rsOf(1000, 0, 0, 0, 0), o: rsOf(4000, gi, 0, 5),
			wantAdd: rsOf(5000, gi, 0, 5, 0), wantFits: true, wantCopies: 4},
		{name: "nil scalar equals zeros", r: rsOf(1, 2, 3), o: rsOf(1, 2, 3, 0, 0),
			wantAdd: rsOf(2, 4, 6, 0, 0), wantFits: true, wantEqual: true, wantCopies: 1},
		{name: "a scalar only the other has", r: rsOf(1, 2, 3), o: rsOf(1, 2, 3, 0, 4),
			wantAdd: rsOf(2, 4, 6, 0, 4), wantFits: true, wantCopies: 1},
		{name: "same scalars at other indexes differ", r: rsOf(0, 0, 0, 1), o: rsOf(0, 0, 0, 0, 1),
			wantAdd: rsOf(0, 0, 0, 1, 1)},
		{name: "copies bound by memory", r: rsOf(100, gi, 0), o: rsOf(10000, 3*gi+1, 0),
			wantAdd: rsOf(10100, 4*gi+1, 0), wantFits: true, wantCopies: 3},
		{name: "copies bound by a scalar", r: rsOf(100, 0, 0, 0, 2), o: rsOf(10000, 0, 0, 9, 5),
			wantAdd: rsOf(10100, 0, 0, 9, 7), wantFits: true, wantCopies: 2},
		{name: "copies one below the limit", r: rsOf(1000, 0, 0), o: rsOf(9500, 0, 0),
			wantAdd: rsOf(10500, 0, 0), wantFits: true, wantCopies: 9},
		{name: "copies capped by the limit", r: rsOf(100, 0, 0), o: rsOf(100000, 0, 0),
			wantAdd: rsOf(100100, 0, 0), wantFits: true, wantCopies: 10},
		{name: "copies ignore zero request dimensions", r: rsOf(1000, 0, 0), o: rsOf(2500, -5, -5),
			wantAdd: rsOf(3500, -5, -5), wantCopies: 2,
			// As NodeResourcesFit, which skips zero requests: a dimension the request does not ask
			// for is not compared, even when its free amount is negative.
			wantFits: true},
		{name: "negative free cpu: no copies", r: rsOf(1000, 0, 0), o: rsOf(-3000, gi, 0),
			wantAdd: rsOf(-2000, gi, 0), wantCopies: 0},
		{name: "negative free above one request: no copies", r: rsOf(1000, 0, 0), o: rsOf(-500, gi, 0),
			wantAdd: rsOf(500, gi, 0), wantCopies: 0},
		{name: "an all-zero request: the limit", r: rsOf(0, 0, 0), o: rsOf(0, 0, 0),
			wantAdd: rsOf(0, 0, 0), wantFits: true, wantEqual: true, wantCopies: 10},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if diff := cmp.Diff(tc.wantAdd, tc.r.add(tc.o), rsAllow); diff != "" {
				t.Errorf("add (-want,+got):\n%s", diff)
			}
			if got := tc.r.fits(tc.o); got != tc.wantFits {
				t.Errorf("fits = %v, want %v", got, tc.wantFits)
			}
			if got, back := tc.r.equal(tc.o), tc.o.equal(tc.r); got != tc.wantEqual || back != tc.wantEqual {
				t.Errorf("equal = %v, reversed %v, want %v", got, back, tc.wantEqual)
			}
			if got := tc.r.copies(tc.o, 10); got != tc.wantCopies {
				t.Errorf("copies = %d, want %d", got, tc.wantCopies)
			}
		})
	}
}

func TestResourcesInPlace(t *testing.T) {
	cases := []struct {
		name               string
		r, free            resources
		wantSub            resources // free after r.subFrom
		start, o           resources
		wantAddC, wantSubC resources // start after addClamped(o), then after subClamped(o)
	}{
		{name: "all dimensions", r: rsOf(1000, gi, 2, 1, 0), free: rsOf(4000, 4*gi, 10, 3, 1),
			wantSub: rsOf(3000, 3*gi, 8, 2, 1),
			start:   rsOf(1, 1, 1), o: rsOf(10, 20, 30),
			wantAddC: rsOf(11, 21, 31), wantSubC: rsOf(1, 1, 1)},
		{name: "no scalars in the request", r: rsOf(500, 0, 0), free: rsOf(400, 0, 0, 7),
			wantSub: rsOf(-100, 0, 0, 7),
			start:   rsOf(0, 0, 0), o: rsOf(-5, 3, -1),
			wantAddC: rsOf(0, 3, 0), wantSubC: rsOf(0, 0, 0)},
		{name: "scalar slice grows, negative parts ignored", r: rsOf(0, 0, 0, 0, 4), free: rsOf(0, 0, 0, 1, 2),
			wantSub: rsOf(0, 0, 0, 1, -2),
			start:   rsOf(5, 5, 5), o: rsOf(1, -1, 1, 2, -1, 3),
			wantAddC: rsOf(6, 5, 6, 2, 0, 3), wantSubC: rsOf(5, 5, 5, 0, 0, 0)},
		{name: "longer total keeps its tail", r: rsOf(0, 0, 0), free: rsOf(0, 0, 0),
			wantSub: rsOf(0, 0, 0),
			start:   rsOf(0, 0, 0, 1, 1, 1), o: rsOf(0, 0, 0, 5),
			wantAddC: rsOf(0, 0, 0, 6, 1, 1), wantSubC: rsOf(0, 0, 0, 1, 1, 1)},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			free := tc.free.clone()
			tc.r.subFrom(&free)
			if diff := cmp.Diff(tc.wantSub, free, rsAllow); diff != "" {
				t.Errorf("subFrom (-want,+got):\n%s", diff)
			}
			tc.r.addTo(&free)
			if diff := cmp.Diff(tc.free, free, rsAllow); diff != "" {
				t.Errorf("addTo after subFrom (-want,+got):\n%s", diff)
			}
			got := tc.start.clone()
			got.addClamped(tc.o)
			if diff := cmp.Diff(tc.wantAddC, got, rsAllow); diff != "" {
				t.Errorf("addClamped (-want,+got):\n%s", diff)
			}
			got.subClamped(tc.o)
			if diff := cmp.Diff(tc.wantSubC, got, rsAllow); diff != "" {
				t.Errorf("subClamped (-want,+got):\n%s", diff)
			}
			// clone is a copy: changing it leaves the original alone.
			c := tc.free.clone()
			if diff := cmp.Diff(tc.free, c, rsAllow); diff != "" {
				t.Errorf("clone (-want,+got):\n%s", diff)
			}
			if len(c.scalar) > 0 {
				c.scalar[0]++
				if tc.free.scalar[0] == c.scalar[0] {
					t.Error("clone shares the scalar array")
				}
			}
		})
	}
}

func TestShortfallAndShare(t *testing.T) {
	names := scalarNames{"nvidia.com/gpu", rsFPGA}
	cases := []struct {
		name       string
		want, have resources
		wantMsg    string
		wantShare  float64 // dominantShare(want, have)
	}{
		{name: "nothing short", want: rsOf(1000, gi, 1, 1), have: rsOf(1000, gi, 1, 1), wantShare: 1},
		{name: "cpu", want: rsOf(6000, 0, 0), have: rsOf(4000, gi, 0), wantMsg: "cpu 6000m > 4000m", wantShare: 1.5},
		{name: "memory dominates the share", want: rsOf(1000, 3*gi, 0), have: rsOf(4000, 2*gi, 0),
			wantMsg: "memory 3221225472 > 2147483648", wantShare: 1.5},
		{name: "every kind, sorted", want: rsOf(6000, 2*gi, 10, 3, 1), have: rsOf(4000, gi, 5, 1),
			wantMsg: "cpu 6000m > 4000m, ephemeral-storage 10 > 5, example.com/fpga 1 > 0, memory 2147483648 > 1073741824, nvidia.com/gpu 3 > 1",
			// An extended resource the cluster has none of free makes the member infinitely large.
			wantShare: math.Inf(1)},
		{name: "an extended resource by name", want: rsOf(0, 0, 0, 0, 2), have: rsOf(0, 0, 0, 5, 1),
			wantMsg: "example.com/fpga 2 > 1", wantShare: 2},
		{name: "no free cpu: share by memory", want: rsOf(1000, gi, 0), have: rsOf(0, 4*gi, 0),
			wantMsg: "cpu 1000m > 0m", wantShare: 0.25},
		{name: "no free memory: share by cpu", want: rsOf(1000, gi, 0), have: rsOf(4000, 0, 0),
			wantMsg: "memory 1073741824 > 0", wantShare: 0.25},
		{name: "extended resources count in the share", want: rsOf(0, 0, 0, 4), have: rsOf(1000, gi, 0, 4), wantShare: 1},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := shortfall(tc.want, tc.have, names); got != tc.wantMsg {
				t.Errorf("shortfall = %q, want %q", got, tc.wantMsg)
			}
			if got := dominantShare(tc.want, tc.have); got != tc.wantShare {
				t.Errorf("dominantShare = %v, want %v", got, tc.wantShare)
			}
		})
	}
}

func TestRequestConversion(t *testing.T) {
	q := resource.MustParse
	cases := []struct {
		name      string
		rl        v1.ResourceList
		want      podRequest
		names     scalarNames // tracked
		wantRes   resources   // want.resources(names)
		wantNames scalarNames // names.withRequest(want)
	}{
		{name: "nil list", want: podRequest{}, names: scalarNames{rsGPU}, wantRes: rsOf(0, 0, 0), wantNames: scalarNames{rsGPU}},
		{name: "base resources", rl: v1.ResourceList{v1.ResourceCPU: q("1500m"), v1.ResourceMemory: q("1Gi"), v1.ResourceEphemeralStorage: q("2Gi")},
			want: podRequest{milliCPU: 1500, memory: gi, ephemeral: 2 * gi}, wantRes: rsOf(1500, gi, 2*gi)},
		{name: "pods and zero amounts dropped", rl: v1.ResourceList{v1.ResourcePods: q("3"), v1.ResourceCPU: q("1"), rsGPU: q("0")},
			want: podRequest{milliCPU: 1000}, wantRes: rsOf(1000, 0, 0)},
		{name: "scalars sorted by name", rl: v1.ResourceList{"z.io/b": q("2"), "a.io/a": q("1"), "hugepages-2Mi": q("4Mi"), "m.io/m": q("3")},
			want:    podRequest{scalar: []namedAmount{{"a.io/a", 1}, {"hugepages-2Mi", 4 << 20}, {"m.io/m", 3}, {"z.io/b", 2}}},
			names:   scalarNames{"m.io/m", "a.io/a"},
			wantRes: rsOf(0, 0, 0, 3, 1), wantNames: scalarNames{"m.io/m", "a.io/a", "hugepages-2Mi", "z.io/b"}},
		{name: "names not tracked: no scalar slice", rl: v1.ResourceList{rsGPU: q("2")},
			want: podRequest{scalar: []namedAmount{{rsGPU, 2}}}, names: scalarNames{rsFPGA},
			wantRes: rsOf(0, 0, 0), wantNames: scalarNames{rsFPGA, rsGPU}},
		{name: "tracked scalars at their indexes", rl: v1.ResourceList{rsGPU: q("2"), rsFPGA: q("1")},
			want: podRequest{scalar: []namedAmount{{rsFPGA, 1}, {rsGPU, 2}}}, names: scalarNames{rsGPU, rsNIC, rsFPGA},
			wantRes: rsOf(0, 0, 0, 2, 0, 1), wantNames: scalarNames{rsGPU, rsNIC, rsFPGA}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := requestFromList(tc.rl)
			if diff := cmp.Diff(tc.want, got, rsAllow); diff != "" {
				t.Errorf("requestFromList (-want,+got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.wantRes, got.resources(tc.names), rsAllow); diff != "" {
				t.Errorf("resources (-want,+got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.wantRes, resourcesFromList(tc.rl, tc.names), rsAllow); diff != "" {
				t.Errorf("resourcesFromList (-want,+got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.wantNames, slices.Clone(tc.names).withRequest(got)); diff != "" {
				t.Errorf("withRequest (-want,+got):\n%s", diff)
			}
			// with adds the same names, in the map's order.
			with := slices.Clone(tc.names).with(tc.rl)
			if diff := cmp.Diff(tc.names, with[:len(tc.names)]); diff != "" {
				t.Errorf("with changed the names held (-want,+got):\n%s", diff)
			}
			slices.Sort(with[len(tc.names):])
			if diff := cmp.Diff(tc.wantNames, with); diff != "" {
				t.Errorf("with (-want,+got):\n%s", diff)
			}
			for i, n := range tc.wantNames {
				if got := tc.wantNames.index(n); got != i {
					t.Errorf("index(%s) = %d, want %d", n, got, i)
				}
			}
			if got := tc.wantNames.index("not/tracked"); got != -1 {
				t.Errorf("index of an untracked name = %d, want -1", got)
			}
		})
	}
}

// TestPodRequestList: a pod's request is what NodeResourcesFit counts: the larger of the containers'
// sum (with sidecars) and the largest init container (with the sidecars started before it), plus the
// overhead. Each case is also checked against noderesources.Fits: the pod fits a node with exactly its
// request free, and no node with one unit less of any resource it asks for.
func TestPodRequestList(t *testing.T) {
	type req = map[v1.ResourceName]string
	cases := []struct {
		name string
		pod  *v1.Pod
		want podRequest
	}{
		{name: "containers summed", pod: st.MakePod().Req(req{v1.ResourceCPU: "1", v1.ResourceMemory: "1Gi"}).
			Req(req{v1.ResourceCPU: "2", v1.ResourceMemory: "1Gi", rsGPU: "1"}).Obj(),
			want: podRequest{milliCPU: 3000, memory: 2 * gi, scalar: []namedAmount{{rsGPU, 1}}}},
		{name: "largest init container, per resource", pod: st.MakePod().Req(req{v1.ResourceCPU: "1", v1.ResourceMemory: "2Gi"}).
			InitReq(req{v1.ResourceCPU: "3", v1.ResourceMemory: "1Gi"}).
			InitReq(req{v1.ResourceCPU: "2", rsGPU: "2"}).Obj(),
			want: podRequest{milliCPU: 3000, memory: 2 * gi, scalar: []namedAmount{{rsGPU, 2}}}},
		{name: "init container below the containers' sum", pod: st.MakePod().Req(req{v1.ResourceCPU: "2"}).
			Req(req{v1.ResourceCPU: "2"}).InitReq(req{v1.ResourceCPU: "3"}).Obj(),
			want: podRequest{milliCPU: 4000}},
		{name: "overhead on top", pod: st.MakePod().Req(req{v1.ResourceCPU: "1"}).
			InitReq(req{v1.ResourceCPU: "3"}).
			Overhead(v1.ResourceList{v1.ResourceCPU: resource.MustParse("500m"), v1.ResourceMemory: resource.MustParse("100Mi")}).Obj(),
			want: podRequest{milliCPU: 3500, memory: 100 << 20}},
		{name: "sidecars add to both", pod: st.MakePod().SidecarReq(req{v1.ResourceCPU: "1"}).
			InitReq(req{v1.ResourceCPU: "3", v1.ResourceEphemeralStorage: "1Gi"}).
			Req(req{v1.ResourceCPU: "2"}).Obj(),
			want: podRequest{milliCPU: 4000, ephemeral: gi}},
		{name: "pod-level resources replace the containers' cpu and memory", pod: st.MakePod().
			Req(req{v1.ResourceCPU: "1", rsGPU: "1"}).
			PodLevelResourceRequests(req{v1.ResourceCPU: "4", v1.ResourceMemory: "1Gi"}).Obj(),
			want: podRequest{milliCPU: 4000, memory: gi, scalar: []namedAmount{{rsGPU, 1}}}},
	}
	opts := noderesources.ResourceRequestsOptions{EnablePodLevelResources: true}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, newPodRequest(tc.pod), rsAllow); diff != "" {
				t.Fatalf("request (-want,+got):\n%s", diff)
			}
			alloc := func(dim v1.ResourceName) *framework.NodeInfo {
				rl := v1.ResourceList{v1.ResourcePods: resource.MustParse("110")}
				set := func(name v1.ResourceName, v int64, milli bool) {
					if name == dim {
						v--
					}
					if milli {
						rl[name] = *resource.NewMilliQuantity(v, resource.DecimalSI)
					} else {
						rl[name] = *resource.NewQuantity(v, resource.BinarySI)
					}
				}
				set(v1.ResourceCPU, tc.want.milliCPU, true)
				set(v1.ResourceMemory, tc.want.memory, false)
				set(v1.ResourceEphemeralStorage, tc.want.ephemeral, false)
				for _, s := range tc.want.scalar {
					set(s.name, s.value, false)
				}
				ni := framework.NewNodeInfo()
				ni.SetNode(&v1.Node{Status: v1.NodeStatus{Capacity: rl, Allocatable: rl}})
				return ni
			}
			if ins := noderesources.Fits(tc.pod, alloc(""), nil, opts); len(ins) != 0 {
				t.Errorf("NodeResourcesFit: the pod does not fit its own request: %+v", ins)
			}
			dims := map[v1.ResourceName]int64{v1.ResourceCPU: tc.want.milliCPU, v1.ResourceMemory: tc.want.memory, v1.ResourceEphemeralStorage: tc.want.ephemeral}
			for _, s := range tc.want.scalar {
				dims[s.name] = s.value
			}
			for dim, v := range dims {
				if v == 0 {
					continue
				}
				ins := noderesources.Fits(tc.pod, alloc(dim), nil, opts)
				if len(ins) != 1 || ins[0].ResourceName != dim {
					t.Errorf("NodeResourcesFit with one unit of %s less: %+v, want that resource short", dim, ins)
				}
			}
		})
	}
}

func TestRequestCacheVersions(t *testing.T) {
	setCPU := func(p *v1.Pod, cpu string) {
		p.Spec.Containers[0].Resources.Requests[v1.ResourceCPU] = resource.MustParse(cpu)
	}
	cases := []struct {
		name   string
		shared *Shared // its cache is used; nil: no cache
		// second is asked after the first request; it may change the pod object in place or return another.
		second     func(s *Shared, p *v1.Pod) *v1.Pod
		wantSecond int64
	}{
		{name: "same object: cached", shared: &Shared{},
			second:     func(_ *Shared, p *v1.Pod) *v1.Pod { setCPU(p, "5"); return p },
			wantSecond: 2000},
		{name: "new object: recomputed", shared: &Shared{},
			second:     func(_ *Shared, p *v1.Pod) *v1.Pod { q := p.DeepCopy(); setCPU(q, "4"); return q },
			wantSecond: 4000},
		{name: "forgotten: recomputed", shared: &Shared{},
			second: func(s *Shared, p *v1.Pod) *v1.Pod {
				setCPU(p, "5")
				s.requests.forget(p.UID)
				if _, ok := s.requests.m.Load(p.UID); ok {
					t.Error("entry kept after forget")
				}
				return p
			},
			wantSecond: 5000},
		{name: "Shared.Forget forgets", shared: &Shared{},
			second:     func(s *Shared, p *v1.Pod) *v1.Pod { setCPU(p, "5"); s.Forget(p.UID); return p },
			wantSecond: 5000},
		{name: "another pod: its own entry", shared: &Shared{},
			second: func(_ *Shared, _ *v1.Pod) *v1.Pod {
				return rsPod("other", map[v1.ResourceName]string{v1.ResourceCPU: "3"})
			},
			wantSecond: 3000},
		{name: "nil cache: computed every time",
			second:     func(_ *Shared, p *v1.Pod) *v1.Pod { setCPU(p, "5"); return p },
			wantSecond: 5000},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := tc.shared.requestCache()
			if (c == nil) != (tc.shared == nil) {
				t.Fatalf("requestCache() = %p for Shared %p", c, tc.shared)
			}
			p := rsPod("m0", map[v1.ResourceName]string{v1.ResourceCPU: "2"})
			if got := c.of(p).milliCPU; got != 2000 {
				t.Fatalf("first request %dm, want 2000m", got)
			}
			q := tc.second(tc.shared, p)
			if got := c.of(q).milliCPU; got != tc.wantSecond {
				t.Errorf("second request %dm, want %dm", got, tc.wantSecond)
			}
			if c == nil {
				return
			}
			if v, ok := c.m.Load(q.UID); !ok || v.(*requestEntry).pod != q || v.(*requestEntry).req.milliCPU != tc.wantSecond {
				t.Errorf("entry for %s: %+v (stored %v), want the object asked last", q.UID, v, ok)
			}
		})
	}
}

func TestNodeFree(t *testing.T) {
	cpu := func(c string) map[v1.ResourceName]string { return map[v1.ResourceName]string{v1.ResourceCPU: c} }
	cases := []struct {
		name      string
		ni        *framework.NodeInfo
		names     scalarNames
		wantFree  resources
		wantSlots int
	}{
		{name: "allocatable minus requested",
			ni: rsNode("n", map[v1.ResourceName]string{v1.ResourceCPU: "4", v1.ResourceMemory: "8Gi", v1.ResourceEphemeralStorage: "10Gi"},
				rsPod("a", map[v1.ResourceName]string{v1.ResourceCPU: "1500m", v1.ResourceMemory: "1Gi", v1.ResourceEphemeralStorage: "2Gi"})),
			wantFree: rsOf(2500, 7*gi, 8*gi), wantSlots: 109},
		{name: "slots: allowed pods minus pods", ni: rsNode("n", map[v1.ResourceName]string{v1.ResourceCPU: "4", v1.ResourcePods: "3"}, rsPod("a", nil), rsPod("b", nil)),
			wantFree: rsOf(4000, 0, 0), wantSlots: 1},
		{name: "more pods than slots", ni: rsNode("n", map[v1.ResourceName]string{v1.ResourcePods: "1"}, rsPod("a", nil), rsPod("b", nil)),
			wantFree: rsOf(0, 0, 0), wantSlots: -1},
		{name: "extended resources in the check's order", ni: rsNode("n", map[v1.ResourceName]string{v1.ResourceCPU: "4", rsGPU: "4", rsFPGA: "1"},
			rsPod("a", map[v1.ResourceName]string{v1.ResourceCPU: "1", rsGPU: "1"})),
			names: scalarNames{rsGPU, rsNIC, rsFPGA}, wantFree: rsOf(3000, 0, 0, 3, 0, 1), wantSlots: 109},
		{name: "overcommitted: negative free", ni: rsNode("n", map[v1.ResourceName]string{v1.ResourceCPU: "2", rsGPU: "1"},
			rsPod("a", cpu("3")), rsPod("b", map[v1.ResourceName]string{rsGPU: "2"})),
			names: scalarNames{rsGPU}, wantFree: rsOf(-1000, 0, 0, -1), wantSlots: 108},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			backing := make([]int64, len(tc.names)+1)
			got := nodeFree(tc.ni, tc.names, backing[1:])
			if diff := cmp.Diff(tc.wantFree, got.free, rsAllow); diff != "" {
				t.Errorf("free (-want,+got):\n%s", diff)
			}
			if got.slots != tc.wantSlots || got.node != tc.ni.Node() {
				t.Errorf("slots %d node %p, want %d %p", got.slots, got.node, tc.wantSlots, tc.ni.Node())
			}
			if len(tc.names) > 0 && &got.free.scalar[0] != &backing[1] {
				t.Error("extended resources are not in the slice given")
			}
		})
	}
}

// TestFreeCapacityAcquire: the shared table is rebuilt when the node count or the tracked names
// change, an entry is recomputed only when its NodeInfo is another one or has another generation, and
// the totals always match the entries.
func TestFreeCapacityAcquire(t *testing.T) {
	cluster := func() []fwk.NodeInfo {
		return []fwk.NodeInfo{
			rsNode("n0", map[v1.ResourceName]string{v1.ResourceCPU: "4", rsGPU: "2", rsFPGA: "1"}),
			rsNode("n1", map[v1.ResourceName]string{v1.ResourceCPU: "4", rsGPU: "1"}, rsPod("p", map[v1.ResourceName]string{v1.ResourceCPU: "1"})),
		}
	}
	two := rsPod("two", map[v1.ResourceName]string{v1.ResourceCPU: "2"})
	many := func(from, to int) scalarNames {
		var n scalarNames
		for i := from; i < to; i++ {
			n = append(n, v1.ResourceName(fmt.Sprintf("example.com/x%d", i)))
		}
		return n
	}
	type change func(nodes []fwk.NodeInfo) []fwk.NodeInfo
	cases := []struct {
		name        string
		prime       scalarNames // names of the first acquire
		changes     []change    // each followed by an acquire of want
		want        scalarNames
		wantOK      bool
		wantNames   scalarNames
		wantRebuild bool // by the last acquire
		wantCPU     []int64
		wantScalar  [][]int64
		wantTotals  resources
	}{
		{name: "unchanged", prime: scalarNames{rsGPU}, changes: []change{nil}, want: scalarNames{rsGPU},
			wantOK: true, wantNames: scalarNames{rsGPU}, wantCPU: []int64{4000, 3000}, wantScalar: [][]int64{{2}, {1}},
			wantTotals: rsOf(7000, 0, 0, 3)},
		{name: "a pod added: its node recomputed",
			changes: []change{func(n []fwk.NodeInfo) []fwk.NodeInfo { n[0].(*framework.NodeInfo).AddPod(two); return n }},
			wantOK:  true, wantCPU: []int64{2000, 3000}, wantTotals: rsOf(5000, 0, 0)},
		{name: "same NodeInfo and generation: entry kept, though stale",
			changes: []change{func(n []fwk.NodeInfo) []fwk.NodeInfo {
				ni := n[0].(*framework.NodeInfo)
				gen := ni.Generation
				ni.AddPod(two)
				ni.Generation = gen
				return n
			}},
			wantOK: true, wantCPU: []int64{4000, 3000}, wantTotals: rsOf(7000, 0, 0)},
		{name: "another NodeInfo of the same generation: recomputed",
			changes: []change{func(n []fwk.NodeInfo) []fwk.NodeInfo {
				old := n[0].(*framework.NodeInfo)
				ni := old.SnapshotConcrete()
				ni.AddPod(two)
				ni.Generation = old.Generation
				n[0] = ni
				return n
			}},
			wantOK: true, wantCPU: []int64{2000, 3000}, wantTotals: rsOf(5000, 0, 0)},
		{name: "overcommitted, then freed: totals follow, clamped",
			changes: []change{
				func(n []fwk.NodeInfo) []fwk.NodeInfo {
					n[1].(*framework.NodeInfo).AddPod(rsPod("big", map[v1.ResourceName]string{v1.ResourceCPU: "6"}))
					return n
				},
				func(n []fwk.NodeInfo) []fwk.NodeInfo {
					ni := n[1].(*framework.NodeInfo)
					if err := ni.RemovePod(klog.Background(), ni.GetPods()[1].GetPod()); err != nil {
						panic(err)
					}
					n[0].(*framework.NodeInfo).AddPod(two)
					return n
				},
			},
			wantOK: true, wantCPU: []int64{2000, 3000}, wantTotals: rsOf(5000, 0, 0)},
		{name: "a node added: rebuilt",
			changes: []change{func(n []fwk.NodeInfo) []fwk.NodeInfo {
				return append(n, rsNode("n2", map[v1.ResourceName]string{v1.ResourceCPU: "8"}))
			}},
			wantOK: true, wantRebuild: true, wantCPU: []int64{4000, 3000, 8000}, wantTotals: rsOf(15000, 0, 0)},
		{name: "a node removed: rebuilt", changes: []change{func(n []fwk.NodeInfo) []fwk.NodeInfo { return n[1:] }},
			wantOK: true, wantRebuild: true, wantCPU: []int64{3000}, wantTotals: rsOf(3000, 0, 0)},
		{name: "a new extended resource: tracked too, rebuilt", prime: scalarNames{rsGPU}, changes: []change{nil}, want: scalarNames{rsFPGA},
			wantOK: true, wantRebuild: true, wantNames: scalarNames{rsGPU, rsFPGA}, wantCPU: []int64{4000, 3000},
			wantScalar: [][]int64{{2, 1}, {1, 0}}, wantTotals: rsOf(7000, 0, 0, 3, 1)},
		{name: "the 16th resource is added", prime: many(0, 15), changes: []change{nil}, want: many(15, 16),
			wantOK: true, wantRebuild: true, wantNames: many(0, 16), wantCPU: []int64{4000, 3000},
			wantTotals: rsOf(7000, 0, 0, make([]int64, 16)...)},
		{name: "past maxTrackedScalars: the check's names only", prime: many(0, 16), changes: []change{nil}, want: scalarNames{rsGPU},
			wantOK: true, wantRebuild: true, wantNames: scalarNames{rsGPU}, wantCPU: []int64{4000, 3000},
			wantScalar: [][]int64{{2}, {1}}, wantTotals: rsOf(7000, 0, 0, 3)},
		{name: "a NodeInfo without node: refused",
			changes: []change{func(n []fwk.NodeInfo) []fwk.NodeInfo { n[1] = framework.NewNodeInfo(); return n }}},
		{name: "after a refusal: rebuilt",
			changes: []change{
				func(n []fwk.NodeInfo) []fwk.NodeInfo { return []fwk.NodeInfo{n[0], framework.NewNodeInfo()} },
				func(n []fwk.NodeInfo) []fwk.NodeInfo { return cluster() },
			},
			wantOK: true, wantRebuild: true, wantCPU: []int64{4000, 3000}, wantTotals: rsOf(7000, 0, 0)},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var c freeCapacity
			nodes := cluster()
			prev, _, _, ok := c.acquire(nodes, tc.prime)
			if !ok {
				t.Fatal("first acquire refused")
			}
			c.mu.Unlock()
			var (
				got    []freeNode
				names  scalarNames
				totals resources
			)
			for i, ch := range tc.changes {
				if ch != nil {
					nodes = ch(nodes)
				}
				if i > 0 {
					prev = got
				}
				got, names, totals, ok = c.acquire(nodes, tc.want)
				held := !c.mu.TryLock()
				if !held {
					c.mu.Unlock()
				}
				if held != ok {
					t.Fatalf("acquire %d: ok = %v but lock held = %v", i, ok, held)
				}
				if ok {
					c.mu.Unlock() // as the callers do
				}
			}
			if ok != tc.wantOK {
				t.Fatalf("ok = %v, want %v", ok, tc.wantOK)
			}
			if !ok {
				if got != nil || names != nil || c.infos != nil {
					t.Errorf("a refusal returned %v %v and kept infos %v", got, names, c.infos)
				}
				return
			}
			if diff := cmp.Diff(tc.wantNames, names); diff != "" {
				t.Errorf("names (-want,+got):\n%s", diff)
			}
			rebuilt := len(prev) == 0 || len(got) == 0 || &prev[0] != &got[0]
			if rebuilt != tc.wantRebuild {
				t.Errorf("rebuilt = %v, want %v", rebuilt, tc.wantRebuild)
			}
			var cpus []int64
			var scalars [][]int64
			var sum resources
			if len(names) > 0 {
				sum.scalar = make([]int64, len(names))
			}
			for i, fn := range got {
				cpus = append(cpus, fn.free.milliCPU)
				scalars = append(scalars, fn.free.scalar)
				sum.addClamped(fn.free)
				if fn.node != nodes[i].Node() {
					t.Errorf("entry %d is node %s, want %s", i, fn.node.Name, nodes[i].Node().Name)
				}
				if stride := len(names); stride > 0 && &fn.free.scalar[0] != &c.backing[i*stride] {
					t.Errorf("entry %d's extended resources are not in the shared array", i)
				}
			}
			if diff := cmp.Diff(tc.wantCPU, cpus); diff != "" {
				t.Errorf("free cpu (-want,+got):\n%s", diff)
			}
			if tc.wantScalar != nil {
				if diff := cmp.Diff(tc.wantScalar, scalars); diff != "" {
					t.Errorf("free extended resources (-want,+got):\n%s", diff)
				}
			}
			if diff := cmp.Diff(tc.wantTotals, totals, rsAllow); diff != "" {
				t.Errorf("totals (-want,+got):\n%s", diff)
			}
			if !sum.equal(totals) {
				t.Errorf("totals %+v do not match the entries' sum %+v", totals, sum)
			}
		})
	}
}
