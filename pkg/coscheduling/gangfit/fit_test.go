package gangfit

import (
	"fmt"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/klog/v2"
	"k8s.io/klog/v2/ktesting"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework"
	st "k8s.io/kubernetes/pkg/scheduler/testing"

	"github.com/custom-scheduler/custom-scheduler/pkg/apis/scheduling/v1alpha1"
)

func TestCheckFeasible(t *testing.T) {
	logger, _ := ktesting.NewTestContext(t)
	gang := func(n int, cpu string) []*v1.Pod {
		pods := make([]*v1.Pod, n)
		for i := range pods {
			pods[i] = member(fmt.Sprintf("m%d", i), "g", cpu)
		}
		return pods
	}
	tainted := node("tainted", "4")
	taintedNode := tainted.Node().DeepCopy()
	taintedNode.Spec.Taints = []v1.Taint{{Key: "dedicated", Value: "x", Effect: v1.TaintEffectNoSchedule}}
	tainted.SetNode(taintedNode)

	cases := []struct {
		name         string
		candidates   []*v1.Pod
		need         int
		nodes        []fwk.NodeInfo
		minResources v1.ResourceList
		wantFeasible bool
		wantMessage  string
	}{
		{
			name:       "one member per node fits",
			candidates: gang(4, "3"), need: 4,
			nodes:        []fwk.NodeInfo{node("a", "4"), node("b", "4"), node("c", "4"), node("d", "4")},
			wantFeasible: true,
		},
		{
			name:       "aggregate free CPU suffices but no node holds two members",
			candidates: gang(5, "3"), need: 5,
			// 16 free CPUs for 15 requested, but each node fits one 3-CPU member.
			nodes:       []fwk.NodeInfo{node("a", "4"), node("b", "4"), node("c", "4"), node("d", "4")},
			wantMessage: "fit only 4",
		},
		{
			name:       "several members per node",
			candidates: gang(8, "1"), need: 8,
			nodes:        []fwk.NodeInfo{node("a", "4"), node("b", "4")},
			wantFeasible: true,
		},
		{
			name:       "pods already on a node (reserved by another gang) count",
			candidates: gang(4, "3"), need: 4,
			nodes: []fwk.NodeInfo{node("a", "4"), node("b", "4"), node("c", "4"),
				nodeWith("d", "4", member("other", "rival", "2"))},
			wantMessage: "fit only 3",
		},
		{
			name:       "only the missing members are placed",
			candidates: gang(4, "3"), need: 2,
			nodes:        []fwk.NodeInfo{node("a", "4"), node("b", "4")},
			wantFeasible: true,
		},
		{
			name:       "a tainted node is not counted",
			candidates: gang(2, "3"), need: 2,
			nodes:       []fwk.NodeInfo{node("a", "4"), tainted},
			wantMessage: "fit only 1",
		},
		{
			name:       "fewer unscheduled members than needed",
			candidates: gang(2, "1"), need: 3,
			nodes:       []fwk.NodeInfo{node("a", "8")},
			wantMessage: "only 2 unscheduled members exist",
		},
		{
			name:       "minResources above the free total",
			candidates: gang(2, "1"), need: 2,
			nodes:        []fwk.NodeInfo{node("a", "4")},
			minResources: v1.ResourceList{v1.ResourceCPU: resource.MustParse("6")},
			wantMessage:  "minResources",
		},
		{
			name:         "mixed members packed first-fit decreasing",
			candidates:   []*v1.Pod{member("big", "g", "3"), member("s1", "g", "1"), member("s2", "g", "1"), member("s3", "g", "3")},
			need:         4,
			nodes:        []fwk.NodeInfo{node("a", "4"), node("b", "4")},
			wantFeasible: true,
		},
		{
			name:        "mixed members where one fits nowhere",
			candidates:  []*v1.Pod{member("huge", "g", "6"), member("s1", "g", "1")},
			need:        2,
			nodes:       []fwk.NodeInfo{node("a", "4"), node("b", "4")},
			wantMessage: "fits on no node",
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, _ := Check(logger, "ns/g", tc.candidates, tc.need, tc.nodes, tc.minResources, nil, nil, nil)
			if got.Feasible != tc.wantFeasible {
				t.Fatalf("feasible = %v (%q), want %v", got.Feasible, got.Message, tc.wantFeasible)
			}
			if !strings.Contains(got.Message, tc.wantMessage) {
				t.Errorf("message %q does not contain %q", got.Message, tc.wantMessage)
			}
		})
	}
}

// BenchmarkCheckFeasible is the gang check on a large cluster: 5000 nodes, 200 identical members.
func BenchmarkCheckFeasible(b *testing.B) {
	logger := klog.Background()
	nodes := make([]fwk.NodeInfo, 5000)
	for i := range nodes {
		nodes[i] = node(fmt.Sprintf("n%d", i), "8")
	}
	members := make([]*v1.Pod, 200)
	for i := range members {
		members[i] = member(fmt.Sprintf("m%d", i), "g", "3")
	}
	b.ResetTimer()
	for b.Loop() {
		if res, _ := Check(logger, "ns/g", members, len(members), nodes, nil, nil, nil, nil); !res.Feasible {
			b.Fatal(res.Message)
		}
	}
}

// BenchmarkCheckFeasibleRealistic is the gang check with pods as a cluster has them: every member
// carries the default not-ready/unreachable tolerations and asks for an extended resource, on 5000
// nodes with that resource; 200 members. Afresh computes everything, as the first check does;
// Shared/Changed=N is the check PreFilter makes when N nodes changed since the previous one (a
// previous 200-member gang bound on about 70 nodes), with the free capacity and requests shared.
func BenchmarkCheckFeasibleRealistic(b *testing.B) {
	logger := klog.Background()
	const gpu = v1.ResourceName("example.com/gpu")
	nodes := make([]fwk.NodeInfo, 5000)
	nodeObjs := make([]*v1.Node, len(nodes))
	for i := range nodes {
		nodeObjs[i] = st.MakeNode().Name(fmt.Sprintf("n%d", i)).Capacity(map[v1.ResourceName]string{
			v1.ResourceCPU: "8", v1.ResourceMemory: "32Gi", v1.ResourcePods: "110", gpu: "4"}).Obj()
		ni := framework.NewNodeInfo()
		ni.SetNode(nodeObjs[i])
		nodes[i] = ni
	}
	seconds := int64(300)
	members := make([]*v1.Pod, 200)
	for i := range members {
		p := st.MakePod().SchedulerName("test").Namespace("ns").Name(fmt.Sprintf("m%d", i)).UID(fmt.Sprintf("m%d", i)).Label(v1alpha1.PodGroupLabel, "g").
			Req(map[v1.ResourceName]string{v1.ResourceCPU: "3", v1.ResourceMemory: "4Gi", gpu: "1"}).Obj()
		p.Spec.Tolerations = []v1.Toleration{
			{Key: v1.TaintNodeNotReady, Operator: v1.TolerationOpExists, Effect: v1.TaintEffectNoExecute, TolerationSeconds: &seconds},
			{Key: v1.TaintNodeUnreachable, Operator: v1.TolerationOpExists, Effect: v1.TaintEffectNoExecute, TolerationSeconds: &seconds},
		}
		members[i] = p
	}
	check := func(b *testing.B, shared *Shared) {
		res, f := Check(logger, "ns/g", members, len(members), nodes, nil, nil, nil, shared)
		f.Done()
		if !res.Feasible {
			b.Fatal(res.Message)
		}
	}
	b.Run("Afresh", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			check(b, nil)
		}
	})
	for _, changed := range []int{0, 70} {
		b.Run(fmt.Sprintf("Shared/Changed=%d", changed), func(b *testing.B) {
			var shared Shared
			check(b, &shared)
			next := 0
			b.ReportAllocs()
			for b.Loop() {
				b.StopTimer()
				for range changed {
					nodes[next].(*framework.NodeInfo).SetNode(nodeObjs[next])
					next = (next + 1) % len(nodes)
				}
				b.StartTimer()
				check(b, &shared)
			}
		})
	}
}
