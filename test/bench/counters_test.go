//go:build bench

package bench

import (
	"fmt"
	"sort"
	"strings"

	dto "github.com/prometheus/client_model/go"
	"k8s.io/component-base/metrics/legacyregistry"
	"k8s.io/kubernetes/test/utils/client-go/ktesting"
)

// batchAttempts counts the scheduler's batching outcomes by result (hint_used, hint_not_used, no_hint).
const batchAttempts = "scheduler_batch_attempts_total"

// counters are the counters written per workload, next to the latency histograms scheduler_perf
// collects: the apiserver's requests by verb and resource (what a workload costs the apiserver),
// and the scheduler's batching outcomes (how often 1.37's opportunistic batching reused a previous
// pod's Filter/Score results), with the label names that key each value.
var counters = map[string][]string{
	"apiserver_request_total":             {"verb", "resource", "subresource"},
	batchAttempts:                         {"result"},
	"scheduler_batch_cache_flushed_total": {"reason"},
	"scheduler_schedule_attempts_total":   {"result"},
	"scheduler_preemption_attempts_total": nil,
}

// writeCounters gathers the counters above from the process' registry (the in-process apiserver and
// scheduler share it) and writes each as a data item "Counter_<name>" whose keys are the label
// values joined by "/". apiserver reads (get, list, watch) are left out. It must run before
// scheduler_perf resets the registry at the end of the workload. It returns the scheduler's
// batching outcomes (result → count).
func writeCounters(testName string) (batch map[string]float64, err error) {
	families, err := legacyregistry.DefaultGatherer.Gather()
	if err != nil {
		return nil, fmt.Errorf("gathering metrics: %w", err)
	}
	for _, mf := range families {
		labels, ok := counters[mf.GetName()]
		if !ok {
			continue
		}
		data := map[string]float64{}
		for _, m := range mf.GetMetric() {
			key := counterKey(m, labels)
			if mf.GetName() == "apiserver_request_total" && isRead(key) {
				continue
			}
			if c := m.GetCounter(); c != nil {
				data[key] += c.GetValue()
			}
		}
		if mf.GetName() == batchAttempts {
			batch = data
		}
		if len(data) == 0 {
			continue
		}
		writeExtra(testName, map[string]any{"Metric": "Counter_" + mf.GetName()}, "count", data)
		keys := make([]string, 0, len(data))
		for k := range data {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		parts := make([]string, 0, len(keys))
		for _, k := range keys {
			parts = append(parts, fmt.Sprintf("%s=%.0f", k, data[k]))
		}
		fmt.Printf("bench counters: %s %s\n", mf.GetName(), strings.Join(parts, " "))
	}
	return batch, nil
}

// checkBatching fails a *CustomBatched case (our profile with PodTopologySpread's default constraints
// off) in which opportunistic batching never gave a node hint that was used: then a plugin of ours
// stopped batching (a Filter or Score plugin without fwk.SignPlugin, or a SignPod that refuses alike
// pods), which no other check would notice.
func checkBatching(tCtx ktesting.TContext, name string, batch map[string]float64) {
	if !strings.HasSuffix(testCaseName(name), "CustomBatched") {
		return
	}
	if batch["hint_used"] == 0 {
		tCtx.Errorf("%s: opportunistic batching used no node hint (%s: %v); our profile keeps it off", name, batchAttempts, batch)
	}
}

func counterKey(m *dto.Metric, labels []string) string {
	if len(labels) == 0 {
		return "total"
	}
	values := make([]string, len(labels))
	for i, l := range labels {
		for _, lp := range m.GetLabel() {
			if lp.GetName() == l {
				values[i] = lp.GetValue()
			}
		}
	}
	return strings.TrimSuffix(strings.Join(values, "/"), "/")
}

func isRead(key string) bool {
	verb, _, _ := strings.Cut(key, "/")
	switch verb {
	case "GET", "LIST", "WATCH", "WATCHLIST":
		return true
	}
	return false
}
