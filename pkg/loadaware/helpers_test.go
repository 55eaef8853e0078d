package loadaware

import (
	"context"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework"
	st "k8s.io/kubernetes/pkg/scheduler/testing"
	metricsv1beta1 "k8s.io/metrics/pkg/apis/metrics/v1beta1"
	testingclock "k8s.io/utils/clock/testing"

	"github.com/custom-scheduler/custom-scheduler/pkg/apis/config"
	configv1 "github.com/custom-scheduler/custom-scheduler/pkg/apis/config/v1"
)

// epoch is the fake clock's start.
var epoch = time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)

// defaultArgs returns the v1-defaulted args converted to the internal type, changed by mods.
func defaultArgs(t testing.TB, mods ...func(*config.LoadAwareArgs)) *config.LoadAwareArgs {
	t.Helper()
	in := &configv1.LoadAwareArgs{}
	configv1.SetDefaults_LoadAwareArgs(in)
	out := &config.LoadAwareArgs{}
	if err := configv1.Convert_v1_LoadAwareArgs_To_config_LoadAwareArgs(in, out, nil); err != nil {
		t.Fatal(err)
	}
	for _, m := range mods {
		m(out)
	}
	return out
}

// fakeLister serves canned NodeMetrics.
type fakeLister struct {
	items []metricsv1beta1.NodeMetrics
	err   error
	calls int
}

func (f *fakeLister) ListNodeMetrics(context.Context) ([]metricsv1beta1.NodeMetrics, error) {
	f.calls++
	return f.items, f.err
}

// set replaces the served metrics: node name → cpu, memory quantities, sampled at ts.
func (f *fakeLister) set(ts time.Time, usages map[string][2]string) {
	f.items = nil
	for name, u := range usages {
		f.items = append(f.items, metricsv1beta1.NodeMetrics{
			ObjectMeta: metav1.ObjectMeta{Name: name},
			Timestamp:  metav1.NewTime(ts),
			Window:     metav1.Duration{Duration: 15 * time.Second},
			Usage: v1.ResourceList{
				v1.ResourceCPU:    resource.MustParse(u[0]),
				v1.ResourceMemory: resource.MustParse(u[1]),
			},
		})
	}
}

type testPlugin struct {
	*LoadAware
	clock  *testingclock.FakeClock
	lister *fakeLister
}

func newTestPlugin(t testing.TB, args *config.LoadAwareArgs) *testPlugin {
	t.Helper()
	clk := testingclock.NewFakeClock(epoch)
	lister := &fakeLister{}
	return &testPlugin{LoadAware: newPlugin(nil, args, clk, lister), clock: clk, lister: lister}
}

func (p *testPlugin) refreshNow(t testing.TB) {
	t.Helper()
	p.refresh(context.Background())
}

// addNodes tells the plugin about nodes, as the node informer does.
func (p *testPlugin) addNodes(nodes ...fwk.NodeInfo) {
	for _, n := range nodes {
		p.onNodeUpsert(klog.Background(), n.Node())
	}
}

// nodeState is what the store holds for a node, for assertions.
type nodeState struct {
	sampled          bool
	cpu, mem         int64 // Filter aggregation plus estimates
	scoreCPU, estCPU int64
	scoreEstCPU      int64
	pending          int
}

func (p *testPlugin) node(name string) (nodeState, bool) {
	sl := p.store.view().lookup(name)
	if sl == nil {
		return nodeState{}, false
	}
	p.store.mu.Lock()
	defer p.store.mu.Unlock()
	pending := 0
	if i, ok := (*p.store.index.Load())[name]; ok && p.store.meta[i] != nil {
		pending = p.store.meta[i].pending
	}
	return nodeState{
		sampled:     sl.sampleTime.Load() != 0,
		cpu:         sl.filterCPU.Load() + sl.estCPU.Load(),
		mem:         sl.filterMem.Load() + sl.estMem.Load(),
		scoreCPU:    sl.scoreCPU.Load(),
		estCPU:      sl.estCPU.Load(),
		pending:     pending,
		scoreEstCPU: sl.scoreEstCPU.Load(),
	}, true
}

// nodeInfo is a node with the given allocatable cpu and memory.
func nodeInfo(name, cpu, memory string) fwk.NodeInfo {
	res := map[v1.ResourceName]string{}
	if cpu != "" {
		res[v1.ResourceCPU] = cpu
	}
	if memory != "" {
		res[v1.ResourceMemory] = memory
	}
	ni := framework.NewNodeInfo()
	ni.SetNode(st.MakeNode().Name(name).Capacity(res).Obj())
	return ni
}

// podWith is a pod with one container requesting cpu and memory (empty: unset).
func podWith(uid, cpu, memory string) *v1.Pod {
	req := v1.ResourceList{}
	if cpu != "" {
		req[v1.ResourceCPU] = resource.MustParse(cpu)
	}
	if memory != "" {
		req[v1.ResourceMemory] = resource.MustParse(memory)
	}
	p := st.MakePod().Namespace("ns").Name(uid).UID(uid).Obj()
	p.Spec.Containers = []v1.Container{{Name: "c", Resources: v1.ResourceRequirements{Requests: req}}}
	return p
}

func uid(s string) types.UID { return types.UID(s) }

func metav1Time(t time.Time) metav1.Time { return metav1.NewTime(t) }

// running marks a pod Running with its one container started at since.
func running(p *v1.Pod, since time.Time) *v1.Pod {
	p.Status.Phase = v1.PodRunning
	p.Status.ContainerStatuses = []v1.ContainerStatus{{Name: "c", State: v1.ContainerState{Running: &v1.ContainerStateRunning{StartedAt: metav1.NewTime(since)}}}}
	return p
}
