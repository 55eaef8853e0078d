package gang

import (
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/custom-scheduler/custom-scheduler/pkg/coscheduling/gangfit"
	"github.com/custom-scheduler/custom-scheduler/pkg/coscheduling/internal/gangtest"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework"
)

// draRefused is the DynamicResources plugin's status on a node whose devices cannot hold a pod's claims.
func draRefused() *fwk.Status {
	return fwk.NewStatus(fwk.UnschedulableAndUnresolvable, DevicesShortReason).WithPlugin("DynamicResources")
}

func nodeInfos(names ...string) []fwk.NodeInfo {
	out := make([]fwk.NodeInfo, len(names))
	for i, n := range names {
		ni := framework.NewNodeInfo()
		ni.SetNode(&v1.Node{ObjectMeta: metav1.ObjectMeta{Name: n}})
		out[i] = ni
	}
	return out
}

// TestDevicesShort: only the DynamicResources plugin's "cannot allocate all claims" counts, each node
// with its generation; a member that claims no device reads nothing.
func TestDevicesShort(t *testing.T) {
	nodes := nodeInfos("a", "b", "c", "d")
	m := framework.NewNodeToStatus(map[string]*fwk.Status{
		"a": draRefused(),
		"b": fwk.NewStatus(fwk.Unschedulable, "Insufficient cpu").WithPlugin("NodeResourcesFit"),
		"c": fwk.NewStatus(fwk.UnschedulableAndUnresolvable, "resourceclaim not available on the node").WithPlugin("DynamicResources"),
		"d": draRefused(),
	}, fwk.NewStatus(fwk.UnschedulableAndUnresolvable))
	list := func() ([]fwk.NodeInfo, error) { return nodes, nil }
	want := map[string]int64{"a": nodes[0].GetGeneration(), "d": nodes[3].GetGeneration()}
	if got := DevicesShort(true, m, list); !maps.Equal(got, want) {
		t.Errorf("DevicesShort = %v, want %v", got, want)
	}
	if got := DevicesShort(false, m, list); got != nil {
		t.Errorf("a member that claims no device: DevicesShort = %v, want nil", got)
	}
	if got := DevicesShort(true, nil, list); got != nil {
		t.Errorf("no statuses: DevicesShort = %v, want nil", got)
	}
}

// TestOnNoNodeDevices: a failed attempt records the nodes whose devices refused the member, less
// those its own members were reserved on, and says so; an attempt that goes on, or is retried with
// the member first, records nothing.
func TestOnNoNodeDevices(t *testing.T) {
	now := t0.Add(time.Second)
	short := map[string]int64{"n1": 3, "n2": 5, "node-a": 7}
	cases := []struct {
		name     string
		gang     func() *Gang
		existing int
		failed   bool
		want     map[string]int64 // node: generation recorded
	}{
		{name: "first member refused on every device node: all recorded", gang: func() *Gang { return New("ns", "g", "") },
			existing: 3, failed: true, want: map[string]int64{"n1": 3, "n2": 5, "node-a": 7}},
		{name: "a sibling reserved on node-a (led already): node-a not recorded", gang: func() *Gang {
			g := withWaiting([]string{"a"})
			g.LedBy = map[types.UID]struct{}{pod("x").UID: {}}
			return g
		}, existing: 3, failed: true, want: map[string]int64{"n1": 3, "n2": 5}},
		{name: "the member leads a retry: nothing recorded", gang: func() *Gang { return withWaiting([]string{"a"}) },
			existing: 3, failed: true},
		{name: "others can still make the quorum: nothing recorded", gang: func() *Gang { return New("ns", "g", "") },
			existing: 5},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := tc.gang()
			g.Attempt = gathering
			r := g.OnNoNodeDevices(pod("x"), now, 3, tc.existing, backoff, nil, short)
			if r.Failed() != tc.failed {
				t.Fatalf("failed %v, want %v", r.Failed(), tc.failed)
			}
			got := map[string]int64{}
			for n, rf := range g.RefusedDevices {
				got[n] = rf.Generation
				if !slices.Equal(rf.Pods, []types.UID{pod("x").UID}) || !rf.Until.Equal(now.Add(DeviceRefusalTTL)) {
					t.Errorf("%s: refusal %+v, want member x until %v", n, rf, now.Add(DeviceRefusalTTL))
				}
			}
			if len(tc.want) == 0 {
				tc.want = map[string]int64{}
			}
			if !maps.Equal(got, tc.want) {
				t.Errorf("recorded %v, want %v", got, tc.want)
			}
			said := strings.Contains(r.Message, "the DynamicResources plugin refused it on 2 node(s) the check counted") ||
				strings.Contains(r.Message, "the DynamicResources plugin refused it on 3 node(s) the check counted")
			if said != (len(tc.want) > 0) {
				t.Errorf("message %q: says the refusal %v, want %v", r.Message, said, len(tc.want) > 0)
			}
		})
	}
}

// TestDeviceRefusals: a refusal holds while its node keeps its generation, within the TTL; a node
// changed, gone or past the TTL is forgotten. A second member refused on the same unchanged node joins
// the first and renews the node's TTL; a changed node starts afresh.
func TestDeviceRefusals(t *testing.T) {
	g := New("ns", "g", "")
	g.RefuseDevices("x", map[string]int64{"n1": 1, "n2": 1, "n3": 1, "n4": 1}, nil, t0)
	g.RefuseDevices("y", map[string]int64{"n1": 1, "n2": 2}, sets.New("n3"), t0.Add(time.Second))
	gens := map[string]int64{"n1": 1, "n2": 2, "n3": 9}
	gen := func(n string) (int64, bool) { v, ok := gens[n]; return v, ok }
	valid := func(now time.Time) map[string][]types.UID { return ValidRefusals(g.DeviceRefusals(now), gen) }
	want := map[string][]types.UID{"n1": {"x", "y"}, "n2": {"y"}}
	if got := valid(t0.Add(DeviceRefusalTTL - time.Millisecond)); !maps.EqualFunc(got, want, slices.Equal) {
		t.Errorf("refusals = %v, want %v (n3 changed, n4 gone)", got, want)
	}
	if got := valid(t0.Add(DeviceRefusalTTL)); !maps.EqualFunc(got, want, slices.Equal) {
		t.Errorf("at x's TTL: %v, want %v (both nodes refused again a second later)", got, want)
	}
	if got := g.DeviceRefusals(t0.Add(DeviceRefusalTTL + time.Second)); got != nil || g.RefusedDevices != nil {
		t.Errorf("past every TTL: %v (%v), want none", got, g.RefusedDevices)
	}
}

// TestJobRefusals: a job's check or preemption counts the refusals of all its groups, its own
// included once, each valid on the nodes as they are now.
func TestJobRefusals(t *testing.T) {
	nodes := nodeInfos("n1", "n2")
	gen := func(i int) int64 { return nodes[i].GetGeneration() }
	a, b, c := New("ns", "a", ""), New("ns", "b", ""), New("ns", "c", "")
	a.RefuseDevices("a-0", map[string]int64{"n1": gen(0)}, nil, t0)
	b.RefuseDevices("b-0", map[string]int64{"n1": gen(0), "n2": gen(1) + 1}, nil, t0) // n2 changed since
	c.RefuseDevices("c-0", map[string]int64{"n2": gen(1)}, nil, t0)
	gangs := map[string]*Gang{b.Key(): b, c.Key(): c} // a is not in the map yet
	got := JobRefusals(a, gangs, []string{a.Key(), b.Key()}, t0, nodes)
	want := map[string][]types.UID{"n1": {"a-0", "b-0"}}
	if !maps.EqualFunc(got, want, slices.Equal) {
		t.Errorf("JobRefusals = %v, want %v (c is not of the job; b's n2 changed)", got, want)
	}
	if got := JobRefusals(c, gangs, nil, t0, nodes); !maps.EqualFunc(got, map[string][]types.UID{"n2": {"c-0"}}, slices.Equal) {
		t.Errorf("a flat gang's own: %v", got)
	}
}

// TestCheckCarriesRefusals: the check a member's step asks for carries its gang's refusals (the
// node still as it was), and none once the node changed.
func TestCheckCarriesRefusals(t *testing.T) {
	g := New("ns", "g", "uid")
	members := gangtest.GangOf(2, "4")
	nodes := gangtest.RackedCluster()
	node := nodes[0].Node().Name
	g.RefuseDevices(members[0].UID, map[string]int64{node: nodes[0].GetGeneration()}, nil, t0)
	decide := func(nodes []fwk.NodeInfo) *Job {
		t.Helper()
		out := g.Decide(PreFilterIn{Now: t0.Add(time.Second), Logger: klog.Background(), Member: members[0], Want: 2, UID: g.PodGroupUID,
			Nodes: nodes, CacheTTL: 2 * time.Second, Members: func() []*v1.Pod { return members }, Claimed: func(int32) []*v1.Pod { return nil },
			Gangs: map[string]*Gang{g.Key(): g}, Fit: &gangfit.Shared{}})
		if out.Job == nil {
			t.Fatalf("stage %v: no check asked for", out.Stage)
		}
		return out.Job
	}
	if got, want := decide(nodes).RefusedDevices, map[string][]types.UID{node: {members[0].UID}}; !maps.EqualFunc(got, want, slices.Equal) {
		t.Errorf("the check's refusals %v, want %v", got, want)
	}
	changed := slices.Clone(nodes)
	ni := nodes[0].Snapshot().(*framework.NodeInfo)
	ni.AddPod(gangtest.Running("new", "", node, "1", 0))
	changed[0] = ni
	if got := decide(changed).RefusedDevices; got != nil {
		t.Errorf("a pod added to %s since: the check's refusals %v, want none", node, got)
	}
}

// refusingSource records the refusals a reservation's device model is given.
type refusingSource struct {
	gangfit.DeviceSource
	got map[string][]types.UID
}

func (r *refusingSource) Refusing(m map[string][]types.UID, _ bool) gangfit.DeviceSource {
	r.got = m
	return r
}

// TestReservationRefusing: a reservation's plan counts the gang's refusals valid on the nodes now, or
// its job's.
func TestReservationRefusing(t *testing.T) {
	nodes := nodeInfos("n1", "n2")
	refusals := map[string]DeviceRefusal{
		"n1": {Generation: nodes[0].GetGeneration(), Pods: []types.UID{"x"}},
		"n2": {Generation: nodes[1].GetGeneration() + 1, Pods: []types.UID{"x"}}, // changed since
	}
	src := &refusingSource{}
	in := ReserveIn{Devices: src, Nodes: func() ([]fwk.NodeInfo, error) { return nodes, nil }}
	if got := in.refusing(refusals); got != src || !maps.EqualFunc(src.got, map[string][]types.UID{"n1": {"x"}}, slices.Equal) {
		t.Errorf("a gang's reservation is given %v, want n1's refusal", src.got)
	}
	src.got = nil
	in.Job = &JobPreemption{RefusedDevices: map[string][]types.UID{"n2": {"y"}}}
	if in.refusing(nil); !maps.EqualFunc(src.got, in.Job.RefusedDevices, slices.Equal) {
		t.Errorf("a job's reservation is given %v, want the job's %v", src.got, in.Job.RefusedDevices)
	}
	src.got = nil
	if got := (ReserveIn{Devices: src}).refusing(nil); got != src || src.got != nil {
		t.Errorf("nothing refused: the source is wrapped (%v)", src.got)
	}
}
