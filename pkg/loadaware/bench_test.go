package loadaware

import (
	"context"
	"fmt"
	"testing"
	"time"

	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework"
)

// benchCluster is a plugin whose cache holds n nodes with metrics (every tenth one also with a few
// pending estimates), and the matching NodeInfos.
func benchCluster(b *testing.B, n int) (*testPlugin, []fwk.NodeInfo) {
	b.Helper()
	pl := newTestPlugin(b, defaultArgs(b))
	usages := make(map[string][2]string, n)
	nodes := make([]fwk.NodeInfo, n)
	for i := 0; i < n; i++ {
		name := fmt.Sprintf("node-%05d", i)
		usages[name] = [2]string{fmt.Sprintf("%dm", 1000+(i*37)%5000), fmt.Sprintf("%dMi", 2048+(i*53)%8192)}
		nodes[i] = nodeInfo(name, "16", "64Gi")
	}
	pl.addNodes(nodes...)
	pl.lister.set(epoch, usages)
	pl.refreshNow(b)
	ctx := context.Background()
	for i := 0; i < n; i += 10 {
		for j := 0; j < 3; j++ {
			p := podWith(fmt.Sprintf("pending-%d-%d", i, j), "500m", "512Mi")
			pl.Reserve(ctx, framework.NewCycleState(), p, nodes[i].Node().Name)
		}
	}
	return pl, nodes
}

// The benchmarks report per scheduling cycle over all nodes: allocs/op of Filter and Score is the
// total for n nodes, so 0 means none per node.
func BenchmarkLoadAware(b *testing.B) {
	for _, n := range []int{1000, 5000} {
		pl, nodes := benchCluster(b, n)
		ctx := context.Background()
		pod := podWith("incoming", "1", "1Gi")

		b.Run(fmt.Sprintf("PreFilter/nodes=%d", n), func(b *testing.B) {
			b.ReportAllocs()
			for i := 0; i < b.N; i++ {
				pl.PreFilter(ctx, framework.NewCycleState(), pod, nodes)
			}
		})
		b.Run(fmt.Sprintf("Filter/nodes=%d", n), func(b *testing.B) {
			cs := framework.NewCycleState()
			pl.PreFilter(ctx, cs, pod, nodes)
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				for _, ni := range nodes {
					if s := pl.Filter(ctx, cs, pod, ni); !s.IsSuccess() {
						b.Fatal(s)
					}
				}
			}
		})
		b.Run(fmt.Sprintf("PreScore/nodes=%d", n), func(b *testing.B) {
			b.ReportAllocs()
			for i := 0; i < b.N; i++ {
				pl.PreScore(ctx, framework.NewCycleState(), pod, nodes)
			}
		})
		b.Run(fmt.Sprintf("Score/nodes=%d", n), func(b *testing.B) {
			cs := framework.NewCycleState()
			pl.PreScore(ctx, cs, pod, nodes)
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				for _, ni := range nodes {
					if _, s := pl.Score(ctx, cs, pod, ni); !s.IsSuccess() {
						b.Fatal(s)
					}
				}
			}
		})
		b.Run(fmt.Sprintf("NormalizeScore/nodes=%d", n), func(b *testing.B) {
			cs := framework.NewCycleState()
			pl.PreScore(ctx, cs, pod, nodes)
			raw := make(fwk.NodeScoreList, len(nodes))
			for i, ni := range nodes {
				s, _ := pl.Score(ctx, cs, pod, ni)
				raw[i] = fwk.NodeScore{Name: ni.Node().Name, Score: s}
			}
			scores := make(fwk.NodeScoreList, len(raw))
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				copy(scores, raw)
				pl.NormalizeScore(ctx, cs, pod, scores)
			}
		})
		b.Run(fmt.Sprintf("ReserveUnreserve/nodes=%d", n), func(b *testing.B) {
			cs := framework.NewCycleState()
			pl.PreFilter(ctx, cs, pod, nodes)
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				pl.Reserve(ctx, cs, pod, nodes[i%n].Node().Name)
				pl.Unreserve(ctx, cs, pod, nodes[i%n].Node().Name)
			}
		})
		b.Run(fmt.Sprintf("Refresh/nodes=%d", n), func(b *testing.B) {
			b.ReportAllocs()
			for i := 0; i < b.N; i++ {
				pl.refreshNow(b)
			}
		})
	}
}

// BenchmarkLoadAwareHotNodes: 1% of the nodes are over the cpu threshold, so PreFilter builds the set
// of rejected nodes and the Filter looks each node up in it.
func BenchmarkLoadAwareHotNodes(b *testing.B) {
	for _, n := range []int{1000, 5000} {
		pl, nodes := benchCluster(b, n)
		hot := make(map[string][2]string, n)
		for i, ni := range nodes {
			cpu := "2"
			if i%100 == 0 {
				cpu = "15"
			}
			hot[ni.Node().Name] = [2]string{cpu, "4Gi"}
		}
		pl.clock.Step(time.Second)
		pl.lister.set(pl.clock.Now(), hot)
		pl.refreshNow(b)
		ctx := context.Background()
		pod := podWith("incoming", "1", "1Gi")
		b.Run(fmt.Sprintf("PreFilter/nodes=%d", n), func(b *testing.B) {
			b.ReportAllocs()
			for i := 0; i < b.N; i++ {
				pl.PreFilter(ctx, framework.NewCycleState(), pod, nodes)
			}
		})
		b.Run(fmt.Sprintf("Filter/nodes=%d", n), func(b *testing.B) {
			cs := framework.NewCycleState()
			if _, s := pl.PreFilter(ctx, cs, pod, nodes); !s.IsSuccess() {
				b.Fatal(s)
			}
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				for _, ni := range nodes {
					pl.Filter(ctx, cs, pod, ni)
				}
			}
		})
	}
}

// BenchmarkLoadAwareNoMetrics is a cluster without any sample: every extension point returns at once.
func BenchmarkLoadAwareNoMetrics(b *testing.B) {
	pl := newTestPlugin(b, defaultArgs(b))
	ctx := context.Background()
	pod := podWith("incoming", "1", "1Gi")
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		cs := framework.NewCycleState()
		pl.PreFilter(ctx, cs, pod, nil)
		pl.PreScore(ctx, cs, pod, nil)
		pl.Reserve(ctx, cs, pod, "n")
	}
}
