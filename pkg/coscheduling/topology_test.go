package coscheduling

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/klog/v2"
	"k8s.io/klog/v2/ktesting"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework"
	st "k8s.io/kubernetes/pkg/scheduler/testing"

	"github.com/custom-scheduler/custom-scheduler/pkg/apis/config"
	"github.com/custom-scheduler/custom-scheduler/pkg/apis/scheduling/v1alpha1"
)

const (
	zoneKey  = "topology.kubernetes.io/zone"
	blockKey = "example.com/block"
	rackKey  = "example.com/rack"
)

// rackedNode is a 4-CPU node in a zone, block and rack ("" leaves a label off).
func rackedNode(name, zone, block, rack string, pods ...*v1.Pod) fwk.NodeInfo {
	labels := map[string]string{}
	for k, v := range map[string]string{zoneKey: zone, blockKey: block, rackKey: rack} {
		if v != "" {
			labels[k] = v
		}
	}
	n := st.MakeNode().Name(name).Capacity(map[v1.ResourceName]string{v1.ResourceCPU: "4", v1.ResourceMemory: "8Gi", v1.ResourcePods: "110"}).Obj()
	n.Labels = labels
	ni := framework.NewNodeInfo(pods...)
	ni.SetNode(n)
	return ni
}

// cluster: zone z1 = block b1 (rack r1: 2 nodes, rack r2: 4 nodes) + block b2 (rack r3: 3 nodes);
// one node without labels.
func rackedCluster() []fwk.NodeInfo {
	var nodes []fwk.NodeInfo
	add := func(n int, block, rack string) {
		for i := range n {
			nodes = append(nodes, rackedNode(fmt.Sprintf("%s-%d", rack, i), "z1", block, rack))
		}
	}
	add(2, "b1", "r1")
	add(4, "b1", "r2")
	add(3, "b2", "r3")
	nodes = append(nodes, rackedNode("bare", "", "", ""))
	return nodes
}

func gangOf(n int, cpu string) []*v1.Pod {
	pods := make([]*v1.Pod, n)
	for i := range pods {
		pods[i] = member(fmt.Sprintf("m%d", i), "g", cpu)
	}
	return pods
}

func TestChoosePlacement(t *testing.T) {
	logger, _ := ktesting.NewTestContext(t)
	cases := []struct {
		name      string
		gang      []*v1.Pod
		policy    topologyPolicy
		nodes     []fwk.NodeInfo
		pinned    map[string]string
		busy      map[string]bool
		wantOK    bool
		wantKey   string
		wantValue string
		wantLevel string
		wantMsg   string
	}{
		{name: "required rack: the tightest rack that fits", gang: gangOf(2, "3"), policy: topologyPolicy{required: rackKey},
			wantOK: true, wantKey: rackKey, wantValue: "r1", wantLevel: levelRequired},
		{name: "best fit keeps the big rack for a bigger gang", gang: gangOf(3, "3"), policy: topologyPolicy{required: rackKey},
			wantOK: true, wantKey: rackKey, wantValue: "r3", wantLevel: levelRequired},
		{name: "only the big rack fits", gang: gangOf(4, "3"), policy: topologyPolicy{required: rackKey},
			wantOK: true, wantKey: rackKey, wantValue: "r2", wantLevel: levelRequired},
		{name: "required and no rack fits, though the cluster has room", gang: gangOf(5, "3"), policy: topologyPolicy{required: rackKey},
			wantMsg: "no example.com/rack domain has room for 5 members; the best fits 4"},
		{name: "preferred falls back to the block", gang: gangOf(5, "3"), policy: topologyPolicy{preferred: []string{rackKey, blockKey}},
			wantOK: true, wantKey: blockKey, wantValue: "b1", wantLevel: levelPreferred, wantMsg: "preferred level 2 of 2"},
		{name: "preferred rack within a required zone", gang: gangOf(7, "3"), policy: topologyPolicy{required: zoneKey, preferred: []string{rackKey, blockKey}},
			wantOK: true, wantKey: zoneKey, wantValue: "z1", wantLevel: levelRequired, wantMsg: "no example.com/block domain has room for 7 members; the best fits 6"},
		{name: "preferred and nothing fits: anywhere", gang: gangOf(10, "3"), policy: topologyPolicy{preferred: []string{rackKey}},
			wantOK: true, wantLevel: levelAnywhere, wantMsg: "the best fits 4"},
		{name: "nodes without the label are in no domain", gang: gangOf(1, "3"), policy: topologyPolicy{required: "example.com/pod"},
			wantMsg: "no node has the label example.com/pod"},
		{name: "bound members pin the domain, though another rack fits tighter", gang: gangOf(1, "3"), policy: topologyPolicy{required: rackKey},
			pinned: map[string]string{rackKey: "r2"}, wantOK: true, wantKey: rackKey, wantValue: "r2", wantLevel: levelRequired},
		{name: "bound members in several racks cannot satisfy a required rack", gang: gangOf(1, "3"), policy: topologyPolicy{required: rackKey},
			pinned: map[string]string{rackKey: ""}, wantMsg: "not in one example.com/rack domain"},
		{name: "ties go to the first domain by name", gang: gangOf(1, "3"), policy: topologyPolicy{required: rackKey},
			nodes:  []fwk.NodeInfo{rackedNode("b", "", "", "rb"), rackedNode("a", "", "", "ra")},
			wantOK: true, wantKey: rackKey, wantValue: "ra", wantLevel: levelRequired},
		{name: "a rack another gang's attempt is filling is passed over when another fits", gang: gangOf(2, "3"), policy: topologyPolicy{required: rackKey},
			busy: map[string]bool{rackKey + "=r1": true}, wantOK: true, wantKey: rackKey, wantValue: "r3", wantLevel: levelRequired},
		{name: "a busy rack is still chosen when it is the only one that fits", gang: gangOf(4, "3"), policy: topologyPolicy{required: rackKey},
			busy: map[string]bool{rackKey + "=r2": true}, wantOK: true, wantKey: rackKey, wantValue: "r2", wantLevel: levelRequired},
		{name: "reserved pods on a rack's nodes count", gang: gangOf(2, "3"), policy: topologyPolicy{required: rackKey},
			nodes: []fwk.NodeInfo{rackedNode("a0", "", "", "ra", member("x", "other", "2")), rackedNode("a1", "", "", "ra"),
				rackedNode("b0", "", "", "rb"), rackedNode("b1", "", "", "rb"), rackedNode("b2", "", "", "rb")},
			wantOK: true, wantKey: rackKey, wantValue: "rb", wantLevel: levelRequired},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			nodes := tc.nodes
			if nodes == nil {
				nodes = rackedCluster()
			}
			f := newGangFit(logger, "ns/g", tc.gang, len(tc.gang), nodes, nil, nil, nil, false)
			got, ok := choosePlacement(f, tc.policy, tc.pinned, tc.busy)
			if ok != tc.wantOK {
				t.Fatalf("ok = %v (%q), want %v", ok, got.message, tc.wantOK)
			}
			if ok && (got.key != tc.wantKey || got.value != tc.wantValue || got.level != tc.wantLevel) {
				t.Errorf("placement %s=%s (%s), want %s=%s (%s)", got.key, got.value, got.level, tc.wantKey, tc.wantValue, tc.wantLevel)
			}
			if !strings.Contains(got.message, tc.wantMsg) {
				t.Errorf("message %q does not contain %q", got.message, tc.wantMsg)
			}
			if ok && got.key != "" {
				for _, ni := range nodes {
					if v, has := ni.Node().Labels[got.key]; has && v == got.value != got.nodes.Has(ni.Node().Name) {
						t.Errorf("node %s in the domain: %v, want %v", ni.Node().Name, got.nodes.Has(ni.Node().Name), v == got.value)
					}
				}
			}
		})
	}
}

func TestTopologyPolicyFor(t *testing.T) {
	withSpec := makePG("ns", "g", 2, time.Time{})
	withSpec.Spec.TopologyPolicy = &v1alpha1.TopologyPolicy{Required: rackKey}
	plain := makePG("ns", "g", 2, time.Time{})
	annotated := member("m", "g", "1")
	annotated.Annotations = map[string]string{AnnotationTopologyRequired: zoneKey, AnnotationTopologyPreferred: rackKey + ", " + blockKey}
	bad := member("m", "g", "1")
	bad.Annotations = map[string]string{AnnotationTopologyPreferred: "example.com/rack,not a key"}
	def := config.TopologyPolicy{Preferred: []string{blockKey}}

	cases := []struct {
		name    string
		pg      *v1alpha1.PodGroup
		pod     *v1.Pod
		want    topologyPolicy
		wantErr string
	}{
		{name: "the PodGroup's spec wins", pg: withSpec, pod: annotated, want: topologyPolicy{required: rackKey, source: "spec"}},
		{name: "the members' annotations", pg: plain, pod: annotated, want: topologyPolicy{required: zoneKey, preferred: []string{rackKey, blockKey}, source: "annotation"}},
		{name: "the profile's default", pg: plain, pod: member("m", "g", "1"), want: topologyPolicy{preferred: []string{blockKey}, source: "default"}},
		{name: "a malformed annotation is an error", pg: plain, pod: bad, wantErr: `"not a key" is not a label key`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := topologyPolicyFor(tc.pg, tc.pod, def)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error %v, want one containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got.required != tc.want.required || strings.Join(got.preferred, ",") != strings.Join(tc.want.preferred, ",") || got.source != tc.want.source {
				t.Errorf("policy %+v, want %+v", got, tc.want)
			}
		})
	}
}

// TestPreFilterPlacesTheGangInOneDomain checks that every member of an attempt gets its gang's
// domain as its PreFilterResult, that an impossible required domain holds nothing, and that members
// with a policy are signed with their group.
func TestPreFilterPlacesTheGangInOneDomain(t *testing.T) {
	ctx := context.Background()
	pg := makePG("ns", "g", 3, time.Time{})
	pg.Spec.TopologyPolicy = &v1alpha1.TopologyPolicy{Required: rackKey}
	env := newTestEnv(t, defaultArgs(), []*v1alpha1.PodGroup{pg}, nil)
	gang := gangOf(3, "3")
	enqueue(t, env, gang...)
	nodes := rackedCluster()

	res, s := env.pl.PreFilter(ctx, framework.NewCycleState(), gang[0], nodes)
	if !s.IsSuccess() || res == nil {
		t.Fatalf("PreFilter = %v, %v; want the rack's nodes", res, s)
	}
	if got, want := sets.List(res.NodeNames), []string{"r3-0", "r3-1", "r3-2"}; strings.Join(got, ",") != strings.Join(want, ",") {
		t.Fatalf("PreFilterResult nodes %v, want rack r3 %v", got, want)
	}
	reserveAndPermit(t, env, gang[0])
	res2, _ := env.pl.PreFilter(ctx, framework.NewCycleState(), gang[1], nodes)
	if res2 == nil || !res2.NodeNames.Equal(res.NodeNames) {
		t.Errorf("the second member got %v, want its gang's rack", res2)
	}
	if frags, _ := env.pl.SignPod(ctx, gang[1]); len(frags) != 1 || frags[0].Value != "ns/g" {
		t.Errorf("SignPod = %v, want the group's fragment", frags)
	}
	if frags, _ := env.pl.SignPod(ctx, st.MakePod().Namespace("ns").Name("plain").Obj()); len(frags) != 0 {
		t.Errorf("SignPod(plain) = %v, want none", frags)
	}

	t.Run("a required domain that no rack has holds nothing", func(t *testing.T) {
		big := makePG("ns", "big", 5, time.Time{})
		big.Spec.TopologyPolicy = &v1alpha1.TopologyPolicy{Required: rackKey}
		env := newTestEnv(t, defaultArgs(), []*v1alpha1.PodGroup{big}, nil)
		gang := make([]*v1.Pod, 5)
		for i := range gang {
			gang[i] = member(fmt.Sprintf("b%d", i), "big", "3")
		}
		enqueue(t, env, gang...)
		_, s := env.pl.PreFilter(ctx, framework.NewCycleState(), gang[0], rackedCluster())
		if s.Code() != fwk.UnschedulableAndUnresolvable || !strings.Contains(s.Message(), "no example.com/rack domain has room for 5 members; the best fits 4") {
			t.Errorf("PreFilter = %v, want refused with the rack numbers", s)
		}
	})
}

// BenchmarkPreFilterTopology is the first member's PreFilter of a 64-member gang with a required rack
// at 5000 nodes in racks of 40: the whole-gang check and the domain choice. The members are realistic
// pods: the default tolerations every pod gets and an extended resource.
func BenchmarkPreFilterTopology(b *testing.B) {
	nodes := make([]fwk.NodeInfo, 5000)
	for i := range nodes {
		ni := framework.NewNodeInfo()
		ni.SetNode(st.MakeNode().Name(fmt.Sprintf("n%d", i)).Label(rackKey, fmt.Sprintf("r%03d", i/40)).
			Capacity(map[v1.ResourceName]string{v1.ResourceCPU: "8", v1.ResourceMemory: "32Gi", v1.ResourcePods: "110", "example.com/gpu": "8"}).Obj())
		nodes[i] = ni
	}
	pg := makePG("ns", "g", 64, time.Now())
	pg.Spec.TopologyPolicy = &v1alpha1.TopologyPolicy{Required: rackKey}
	gang := make([]*v1.Pod, 64)
	for i := range gang {
		gang[i] = st.MakePod().SchedulerName("test").Namespace("ns").Name(fmt.Sprintf("m%d", i)).UID(fmt.Sprintf("m%d", i)).Label(v1alpha1.PodGroupLabel, "g").
			Req(map[v1.ResourceName]string{v1.ResourceCPU: "4", v1.ResourceMemory: "8Gi", "example.com/gpu": "4"}).
			Toleration(v1.TaintNodeNotReady).Toleration(v1.TaintNodeUnreachable).Obj()
	}
	env := newTestEnv(b, defaultArgs(), []*v1alpha1.PodGroup{pg}, gang)
	ctx := klog.NewContext(context.Background(), klog.Background())
	b.ReportAllocs()
	for b.Loop() {
		env.pl.epoch.Add(1) // invalidate the cached result: the check and the choice run
		if res, s := env.pl.PreFilter(ctx, framework.NewCycleState(), gang[0], nodes); !s.IsSuccess() || res == nil {
			b.Fatal(s)
		}
	}
}
