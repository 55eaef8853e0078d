package loadaware

import (
	"slices"
	"sort"
	"time"

	"github.com/custom-scheduler/custom-scheduler/pkg/apis/config"
)

// maxRingCapacity bounds the samples kept per node: 512 × 32 bytes. A duration longer than
// 512 refresh intervals aggregates over the latest 512 samples.
const maxRingCapacity = 512

// ringSample is one sample in a node's history (unix nanoseconds, millicores, bytes): usage
// measured over [start, ts]. Within a ring both times never decrease from one sample to the next.
type ringSample struct {
	ts, start int64
	cpu, mem  int64
}

// ring is a node's recent samples, oldest overwritten first. Only the refresher writes it (see
// slotMeta).
type ring struct {
	buf     []ringSample
	head, n int
}

func newRing(capacity int) ring { return ring{buf: make([]ringSample, capacity)} }

func (r *ring) push(s ringSample) {
	r.buf[r.head] = s
	r.head = (r.head + 1) % len(r.buf)
	if r.n < len(r.buf) {
		r.n++
	}
}

func (r *ring) reset() { r.head, r.n = 0, 0 }

// at returns the k-th newest sample (0: the latest).
func (r *ring) at(k int) ringSample {
	return r.buf[(r.head-1-k+2*len(r.buf))%len(r.buf)]
}

func (r *ring) latest() ringSample { return r.at(0) }

// aggregation summarizes a node's samples within a duration before now.
type aggregation struct {
	kind config.LoadAwareAggregationType
	// duration in nanoseconds.
	duration int64
	// percentile for p90 and p95.
	percentile int
}

func newAggregation(a config.LoadAwareAggregation) aggregation {
	agg := aggregation{kind: a.Type, duration: (time.Duration(a.DurationSeconds) * time.Second).Nanoseconds()}
	switch a.Type {
	case config.AggregationP90:
		agg.percentile = 90
	case config.AggregationP95:
		agg.percentile = 95
	}
	return agg
}

// apply returns the aggregated cpu and memory of the samples taken within the duration before now
// (the latest sample always counts), and n, how many samples that is (1 for latest). Percentiles
// are nearest-rank: the ⌈p·n/100⌉-th smallest of the n samples, so the single highest sample stops
// deciding p95 from 20 samples on (p90: from 10). scratch is reused between calls.
func (a aggregation) apply(r *ring, now int64, scratch *[]int64) (cpu, mem int64, n int) {
	latest := r.latest()
	if a.kind == config.AggregationLatest || a.kind == "" || r.n == 1 {
		return latest.cpu, latest.mem, 1
	}
	return a.over(r, now, scratch)
}

// over aggregates the samples within the duration (at least two in the ring).
func (a aggregation) over(r *ring, now int64, scratch *[]int64) (cpu, mem int64, n int) {
	n = 1
	for n < r.n && r.at(n).ts >= now-a.duration {
		n++
	}
	switch a.kind {
	case config.AggregationAvg:
		var sc, sm int64
		for k := 0; k < n; k++ {
			s := r.at(k)
			sc += s.cpu
			sm += s.mem
		}
		return sc / int64(n), sm / int64(n), n
	case config.AggregationMax:
		for k := 0; k < n; k++ {
			s := r.at(k)
			cpu, mem = max(cpu, s.cpu), max(mem, s.mem)
		}
		return cpu, mem, n
	}
	rank := (a.percentile*n+99)/100 - 1
	vals := (*scratch)[:0]
	for k := 0; k < n; k++ {
		vals = append(vals, r.at(k).cpu)
	}
	slices.Sort(vals)
	cpu = vals[rank]
	vals = vals[:0]
	for k := 0; k < n; k++ {
		vals = append(vals, r.at(k).mem)
	}
	slices.Sort(vals)
	mem = vals[rank]
	*scratch = vals
	return cpu, mem, n
}

// unreflected is the part of a pod's estimate, num/den, that the aggregation of the ring's n newest
// samples (n as apply returned it) does not show yet, for a pod whose usage a sample shows when the
// sample's window starts at readyAt or later (see pendingPod.readyAt). The samples that show it are
// the newest ones; with k of the n:
//   - latest and max show the pod from the first such sample on (k ≥ 1);
//   - a percentile shows it once those samples reach its rank (k > n − ⌈p·n/100⌉): for p95 of 20
//     samples, from the second one on; fewer are ignored as a spike, like any other high sample;
//   - avg shows k/n of it: (n−k)/n is left to the estimate.
//
// This assumes a sample that shows the pod is at least as high as one that does not, which is what
// the estimate stands for.
func (a aggregation) unreflected(r *ring, n int, readyAt int64) (num, den int64) {
	n = min(n, r.n)
	if n <= 0 {
		return 1, 1
	}
	k := sort.Search(n, func(j int) bool { return r.at(j).start < readyAt })
	switch a.kind {
	case config.AggregationAvg:
		return int64(n - k), int64(n)
	case config.AggregationP90, config.AggregationP95:
		if k > n-(a.percentile*n+99)/100 {
			return 0, 1
		}
		return 1, 1
	}
	if k >= 1 {
		return 0, 1
	}
	return 1, 1
}

// aggregator holds the Filter's and the Score's aggregations and their shared scratch space (the
// refresher's alone; refreshes are serialized by store.refreshMu).
type aggregator struct {
	filter, score aggregation
	capacity      int
	scratch       []int64
}

func newAggregator(a config.LoadAwareUsageAggregation, refreshSeconds int64) aggregator {
	agg := aggregator{filter: newAggregation(a.Filter), score: newAggregation(a.Score), capacity: 1}
	for _, x := range []config.LoadAwareAggregation{a.Filter, a.Score} {
		if x.Type == config.AggregationLatest || x.Type == "" || refreshSeconds <= 0 {
			continue
		}
		// One sample per refresh, plus one for the sample at the window's start.
		agg.capacity = max(agg.capacity, int((x.DurationSeconds+refreshSeconds-1)/refreshSeconds)+1)
	}
	agg.capacity = min(agg.capacity, maxRingCapacity)
	return agg
}

func (a aggregator) ringCapacity() int { return a.capacity }

// window is the longest duration an aggregation reads (0 when both read the latest sample only).
// A pointer receiver: pod events call it while the refresher writes scratch, and a copy of the
// aggregator would read scratch too.
func (a *aggregator) window() time.Duration {
	var d int64
	for _, x := range []aggregation{a.filter, a.score} {
		if x.kind != config.AggregationLatest && x.kind != "" {
			d = max(d, x.duration)
		}
	}
	return time.Duration(d)
}
