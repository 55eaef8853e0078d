package loadaware

import (
	"context"
	"fmt"
	"math/rand"
	"slices"
	"testing"
	"time"

	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework"

	"github.com/custom-scheduler/custom-scheduler/pkg/apis/config"
)

// TestAggregation feeds a node one sample per refresh (15s) and checks what the Filter and the
// Score see under each aggregation over 300s.
func TestAggregation(t *testing.T) {
	steady := slices.Repeat([]string{"2"}, 19)
	spike := append(slices.Clone(steady), "9500m")                       // 20 samples: the spike is 5% of them
	sustained := append(slices.Clone(steady), "9500m", "9500m", "9500m") // 45s high
	tests := []struct {
		kind    config.LoadAwareAggregationType
		samples []string // cpu per refresh, oldest first
		want    int64    // aggregated millicores
	}{
		{config.AggregationLatest, spike, 9500},
		{config.AggregationMax, spike, 9500},
		{config.AggregationAvg, spike, (19*2000 + 9500) / 20},
		{config.AggregationP95, spike, 2000}, // one spike is ignored
		{config.AggregationP90, spike, 2000},
		{config.AggregationP95, sustained, 9500}, // a sustained high is not
		{config.AggregationP90, sustained, 9500},
		{config.AggregationP95, []string{"1"}, 1000},
		{config.AggregationP95, []string{"1", "9"}, 9000}, // too few samples to call one a spike
		{config.AggregationP90, append(slices.Repeat([]string{"2"}, 9), "9"), 2000},
		// Samples older than the duration (300s) are left out: 30 samples, the 20 oldest high.
		{config.AggregationMax, append(slices.Repeat([]string{"9"}, 10), slices.Repeat([]string{"1"}, 21)...), 1000},
	}
	for _, tc := range tests {
		t.Run(fmt.Sprintf("%s of %v", tc.kind, tc.samples), func(t *testing.T) {
			for _, target := range []string{"filter", "score"} {
				pl := newTestPlugin(t, defaultArgs(t, func(a *config.LoadAwareArgs) {
					agg := config.LoadAwareAggregation{Type: tc.kind, DurationSeconds: 300}
					if target == "filter" {
						a.UsageAggregation.Filter = agg
					} else {
						a.UsageAggregation.Score = agg
					}
					a.MetricsStalenessSeconds = 3600
				}))
				for i, cpu := range tc.samples {
					if i > 0 {
						pl.clock.Step(15 * time.Second)
					}
					pl.lister.set(pl.clock.Now(), map[string][2]string{"n": {cpu, "1Gi"}})
					pl.refreshNow(t)
				}
				got, _ := pl.node("n")
				value := got.cpu
				if target == "score" {
					value = got.scoreCPU
				}
				if value != tc.want {
					t.Errorf("%s sees %dm, want %dm", target, value, tc.want)
				}
			}
		})
	}
}

// TestP95FilterIgnoresOneSpike: under p95 a node with one spike passes the Filter, a node with a
// sustained high does not.
func TestP95FilterIgnoresOneSpike(t *testing.T) {
	ctx := context.Background()
	pl := newTestPlugin(t, defaultArgs(t, func(a *config.LoadAwareArgs) {
		a.UsageAggregation.Filter = config.LoadAwareAggregation{Type: config.AggregationP95, DurationSeconds: 300}
	}))
	spiky, hot := nodeInfo("spiky", "10", "10Gi"), nodeInfo("hot", "10", "10Gi")
	pl.addNodes(spiky, hot)
	for i := 0; i < 20; i++ {
		pl.clock.Step(15 * time.Second)
		usages := map[string][2]string{"spiky": {"2", "1Gi"}, "hot": {"2", "1Gi"}}
		if i == 19 {
			usages["spiky"] = [2]string{"9900m", "1Gi"}
		}
		if i >= 17 {
			usages["hot"] = [2]string{"9900m", "1Gi"}
		}
		pl.lister.set(pl.clock.Now(), usages)
		pl.refreshNow(t)
	}
	pod := podWith("p", "100m", "")
	cs := framework.NewCycleState()
	_, s := pl.PreFilter(ctx, cs, pod, nil)
	if !s.IsSuccess() {
		t.Fatalf("PreFilter = %v, want the Filter to run (one node is hot)", s)
	}
	if got := pl.Filter(ctx, cs, pod, spiky); !got.IsSuccess() {
		t.Errorf("node with one spike: Filter = %v, want Success", got)
	}
	if got := pl.Filter(ctx, cs, pod, hot); got.Code() != fwk.UnschedulableAndUnresolvable {
		t.Errorf("node with a sustained high: Filter = %v, want UnschedulableAndUnresolvable", got)
	}
}

// TestAggregationBoundsRandomized: over random sample histories (seeded, replayable with the seed in
// the failure), every aggregation lies between the window's minimum and maximum, latest is the last
// sample, and avg <= max, p90 <= p95 <= max.
func TestAggregationBoundsRandomized(t *testing.T) {
	const seed = 20260112
	rng := rand.New(rand.NewSource(seed))
	kinds := []config.LoadAwareAggregationType{config.AggregationLatest, config.AggregationAvg, config.AggregationP90, config.AggregationP95, config.AggregationMax}
	for iter := 0; iter < 500; iter++ {
		capacity := 1 + rng.Intn(40)
		duration := int64(1+rng.Intn(60)) * int64(time.Second)
		r := newRing(capacity)
		now := int64(0)
		pushes := 1 + rng.Intn(80)
		for k := 0; k < pushes; k++ {
			now += int64(1+rng.Intn(5)) * int64(time.Second)
			r.push(ringSample{ts: now, cpu: rng.Int63n(100000), mem: rng.Int63n(1 << 40)})
		}
		// The samples in the window, as the aggregation must see them.
		var cpus []int64
		for k := 0; k < r.n; k++ {
			if s := r.at(k); k == 0 || s.ts >= now-duration {
				cpus = append(cpus, s.cpu)
			} else {
				break
			}
		}
		lo, hi := slices.Min(cpus), slices.Max(cpus)
		got := map[config.LoadAwareAggregationType]int64{}
		var scratch []int64
		for _, kind := range kinds {
			a := aggregation{kind: kind, duration: duration}
			if kind == config.AggregationP90 {
				a.percentile = 90
			} else if kind == config.AggregationP95 {
				a.percentile = 95
			}
			cpu, _, _ := a.apply(&r, now, &scratch)
			if cpu < lo || cpu > hi {
				t.Fatalf("seed %d iteration %d: %s = %d outside [%d, %d] of %v", seed, iter, kind, cpu, lo, hi, cpus)
			}
			got[kind] = cpu
		}
		if got[config.AggregationLatest] != r.latest().cpu || got[config.AggregationMax] != hi ||
			got[config.AggregationAvg] > hi || got[config.AggregationP90] > got[config.AggregationP95] {
			t.Fatalf("seed %d iteration %d: aggregations %v of %v", seed, iter, got, cpus)
		}
		if len(cpus) >= 20 && got[config.AggregationP95] > slices.Max(slices.Delete(slices.Clone(cpus), slices.Index(cpus, hi), slices.Index(cpus, hi)+1)) {
			t.Fatalf("seed %d iteration %d: p95 %d is decided by the single highest sample of %v", seed, iter, got[config.AggregationP95], cpus)
		}
	}
}

func TestRingCapacity(t *testing.T) {
	tests := []struct {
		filter, score config.LoadAwareAggregation
		refresh       int64
		want          int
	}{
		{config.LoadAwareAggregation{Type: config.AggregationLatest, DurationSeconds: 300}, config.LoadAwareAggregation{Type: config.AggregationLatest, DurationSeconds: 300}, 15, 1},
		{config.LoadAwareAggregation{Type: config.AggregationP95, DurationSeconds: 300}, config.LoadAwareAggregation{Type: config.AggregationLatest}, 15, 21},
		{config.LoadAwareAggregation{Type: config.AggregationAvg, DurationSeconds: 60}, config.LoadAwareAggregation{Type: config.AggregationMax, DurationSeconds: 3600}, 1, maxRingCapacity},
	}
	for _, tc := range tests {
		if got := newAggregator(config.LoadAwareUsageAggregation{Filter: tc.filter, Score: tc.score}, tc.refresh).ringCapacity(); got != tc.want {
			t.Errorf("ring capacity for %+v/%+v at %ds = %d, want %d", tc.filter, tc.score, tc.refresh, got, tc.want)
		}
	}
}
