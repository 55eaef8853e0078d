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
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework"
	st "k8s.io/kubernetes/pkg/scheduler/testing"

	"github.com/custom-scheduler/custom-scheduler/pkg/apis/scheduling/v1alpha1"
)

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
	if !passed(s) || res == nil {
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
		if res, s := env.pl.PreFilter(ctx, framework.NewCycleState(), gang[0], nodes); !passed(s) || res == nil {
			b.Fatal(s)
		}
	}
}

// TestFilterKeepsTheGangInItsDomain: kube-scheduler tries a member's nominated node (and the batching
// hint) before the PreFilterResult, so Filter rejects every node outside the nodes PreFilter allowed,
// with a reason that names the gang; a member PreFilter does not narrow skips Filter.
func TestFilterKeepsTheGangInItsDomain(t *testing.T) {
	ctx := context.Background()
	pg := makePG("ns", "g", 3, time.Time{})
	pg.Spec.TopologyPolicy = &v1alpha1.TopologyPolicy{Required: rackKey}
	env := newTestEnv(t, defaultArgs(), []*v1alpha1.PodGroup{pg}, nil)
	gang := gangOf(3, "3")
	// The first member carries a nomination from an earlier preemption or reservation, in another rack.
	gang[0].Status.NominatedNodeName = "r1-0"
	enqueue(t, env, gang...)
	nodes := rackedCluster()
	byName := map[string]fwk.NodeInfo{}
	for _, n := range nodes {
		byName[n.Node().Name] = n
	}

	state := framework.NewCycleState()
	res, s := env.pl.PreFilter(ctx, state, gang[0], nodes)
	if !s.IsSuccess() || res == nil || res.NodeNames.Has("r1-0") {
		t.Fatalf("PreFilter = %v, %v; want rack r3's nodes", res, s)
	}
	st := env.pl.Filter(ctx, state, gang[0], byName["r1-0"])
	if st.Code() != fwk.UnschedulableAndUnresolvable || !strings.Contains(st.Message(), "node r1-0 is outside the topology domain chosen for PodGroup ns/g") {
		t.Errorf("Filter(nominated node outside the domain) = %v, want it rejected with the gang's domain as the reason", st)
	}
	for name := range res.NodeNames {
		if st := env.pl.Filter(ctx, state, gang[0], byName[name]); !st.IsSuccess() {
			t.Errorf("Filter(%s, in the domain) = %v", name, st)
		}
	}
	// A clone of the cycle (the framework clones it for preemption's dry runs) keeps the nodes.
	if st := env.pl.Filter(ctx, state.Clone(), gang[0], byName["r1-0"]); st.IsSuccess() {
		t.Error("Filter on a cloned cycle state let a node outside the domain through")
	}

	t.Run("a member not narrowed skips Filter", func(t *testing.T) {
		env := newTestEnv(t, defaultArgs(), []*v1alpha1.PodGroup{makePG("ns", "g", 2, time.Time{})}, nil)
		pods := []*v1.Pod{member("a", "g", "1"), member("b", "g", "1")}
		pods[0].Spec.TopologySpreadConstraints = []v1.TopologySpreadConstraint{{MaxSkew: 1, TopologyKey: rackKey, WhenUnsatisfiable: v1.DoNotSchedule}}
		enqueue(t, env, pods...)
		state := framework.NewCycleState()
		res, s := env.pl.PreFilter(ctx, state, pods[0], nodes)
		if !s.IsSkip() || !res.AllNodes() {
			t.Errorf("PreFilter = %v, %v; want Skip (every node)", res, s)
		}
		if st := env.pl.Filter(ctx, state, pods[0], byName["r1-0"]); !st.IsSuccess() {
			t.Errorf("Filter without allowed nodes = %v", st)
		}
	})
}

// BenchmarkFilter is Filter's cost per node for a member whose nodes PreFilter narrowed (a node in its
// domain, and one outside, as a nominated node is), and for a cycle PreFilter did not narrow (the
// framework skips Filter then; this is the cost if it did not).
func BenchmarkFilter(b *testing.B) {
	ctx := context.Background()
	pg := makePG("ns", "g", 3, time.Time{})
	pg.Spec.TopologyPolicy = &v1alpha1.TopologyPolicy{Required: rackKey}
	env := newTestEnv(b, defaultArgs(), []*v1alpha1.PodGroup{pg}, nil)
	gang := gangOf(3, "3")
	enqueue(b, env, gang...)
	nodes := rackedCluster()
	state := framework.NewCycleState()
	res, s := env.pl.PreFilter(ctx, state, gang[0], nodes)
	if !s.IsSuccess() || res == nil {
		b.Fatalf("PreFilter = %v, %v", res, s)
	}
	var in, out fwk.NodeInfo
	for _, n := range nodes {
		if res.NodeNames.Has(n.Node().Name) {
			in = n
		} else {
			out = n
		}
	}
	b.Run("InDomain", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if st := env.pl.Filter(ctx, state, gang[0], in); !st.IsSuccess() {
				b.Fatal(st)
			}
		}
	})
	b.Run("OutsideDomain", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if st := env.pl.Filter(ctx, state, gang[0], out); st.IsSuccess() {
				b.Fatal("let through")
			}
		}
	})
	plain := framework.NewCycleState()
	b.Run("NotNarrowed", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if st := env.pl.Filter(ctx, plain, gang[0], in); !st.IsSuccess() {
				b.Fatal(st)
			}
		}
	})
}
