package loadaware

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"k8s.io/kubernetes/pkg/scheduler/framework"

	"github.com/custom-scheduler/custom-scheduler/pkg/apis/config"
)

// BenchmarkReserveDuringRefresh times Reserve+Unreserve while the refresher records rounds of
// samples without pause, at 5000 nodes with the Filter and the Score on p95 over an hour at a 15s
// refresh (241 samples per node): the configuration where a refresh costs the most. Pairs come one
// every 100µs, as scheduling cycles would, and each one's latency counts from when it was due, so the
// pairs due while one waited count their wait too (a plain loop would have one pair per refresh wait). It reports the pairs' p50, p99, p99.9 and max latency and how many refreshes
// ran meanwhile; ns/op counts the pacing and means nothing. Run it alone with -benchtime=30000x (3s):
// the refresher needs the second core.
func BenchmarkReserveDuringRefresh(b *testing.B) {
	const nodes = 5000
	const refresh = 15 * time.Second
	p95Hour := config.LoadAwareAggregation{Type: config.AggregationP95, DurationSeconds: 3600}
	pl := newTestPlugin(b, defaultArgs(b, func(a *config.LoadAwareArgs) {
		a.MetricsRefreshIntervalSeconds = int64(refresh / time.Second)
		a.MetricsStalenessSeconds = 3 * 3600
		a.UsageAggregation.Filter = p95Hour
		a.UsageAggregation.Score = p95Hour
	}))
	names := make([]string, nodes)
	for i := range names {
		names[i] = fmt.Sprintf("node-%05d", i)
		pl.addNodes(nodeInfo(names[i], "16", "64Gi"))
	}
	samples := make(map[string]sample, nodes)
	now := epoch
	round := func(k int) {
		for i, name := range names {
			samples[name] = sample{
				usage:     usage{MilliCPU: int64(1000 + (i*37+k*101)%5000), Memory: int64(2048+(i*53+k*71)%8192) << 20},
				timestamp: now,
				window:    refresh,
			}
		}
		pl.store.setSamples(samples, now, now.Add(-3*time.Hour))
		now = now.Add(refresh)
	}
	// Fill every node's hour of history.
	for k := 0; k < 241; k++ {
		round(k)
	}

	ctx := context.Background()
	cs := framework.NewCycleState()
	pod := podWith("incoming", "1", "1Gi")
	pl.PreFilter(ctx, cs, pod, nil)

	var stop atomic.Bool
	var refreshes atomic.Int64
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for k := 241; !stop.Load(); k++ {
			round(k)
			refreshes.Add(1)
		}
	}()

	const every = 100 * time.Microsecond
	lat := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	begin := time.Now()
	for i := 0; i < b.N; i++ {
		node := names[i%nodes]
		next := begin.Add(time.Duration(i) * every)
		for time.Now().Before(next) {
		}
		pl.Reserve(ctx, cs, pod, node)
		pl.Unreserve(ctx, cs, pod, node)
		// From when the pair was due: pairs due while one waited have waited too.
		lat = append(lat, time.Since(next))
	}
	b.StopTimer()
	stop.Store(true)
	wg.Wait()

	slices.Sort(lat)
	at := func(q float64) float64 { return float64(lat[int(q*float64(len(lat)-1))].Nanoseconds()) }
	b.ReportMetric(at(0.50), "p50-ns")
	b.ReportMetric(at(0.99), "p99-ns")
	b.ReportMetric(at(0.999), "p99.9-ns")
	b.ReportMetric(float64(lat[len(lat)-1].Nanoseconds()), "max-ns")
	b.ReportMetric(float64(refreshes.Load()), "refreshes")
}
