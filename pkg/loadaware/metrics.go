package loadaware

import (
	"sync"

	"k8s.io/component-base/metrics"
	"k8s.io/component-base/metrics/legacyregistry"
)

const metricsSubsystem = "custom_scheduler_loadaware"

// The plugin's metrics. Every one is updated from the background refresher or once per pod, never
// per node in the scheduling cycle.
var (
	metricsAPIAvailable = metrics.NewGaugeVec(&metrics.GaugeOpts{
		Subsystem:      metricsSubsystem,
		Name:           "metrics_api_available",
		Help:           "Whether the last NodeMetrics fetch from metrics.k8s.io succeeded (1) or failed (0). While 0, LoadAware passes every node whose sample is stale and scores it neutral.",
		StabilityLevel: metrics.ALPHA,
	}, []string{"profile"})
	metricsFetches = metrics.NewCounterVec(&metrics.CounterOpts{
		Subsystem:      metricsSubsystem,
		Name:           "metrics_fetches_total",
		Help:           "NodeMetrics fetches from metrics.k8s.io, by result (success, error).",
		StabilityLevel: metrics.ALPHA,
	}, []string{"profile", "result"})
	metricsFetchDuration = metrics.NewHistogramVec(&metrics.HistogramOpts{
		Subsystem:      metricsSubsystem,
		Name:           "metrics_fetch_duration_seconds",
		Help:           "Latency of NodeMetrics fetches from metrics.k8s.io.",
		Buckets:        metrics.ExponentialBuckets(0.005, 2, 12),
		StabilityLevel: metrics.ALPHA,
	}, []string{"profile"})
	nodesWithoutFreshMetrics = metrics.NewGaugeVec(&metrics.GaugeOpts{
		Subsystem:      metricsSubsystem,
		Name:           "nodes_without_fresh_metrics",
		Help:           "Nodes known to the scheduler that have no metrics sample newer than metricsStalenessSeconds; the Filter treats them per filterMissingMetrics and the Score as neutral.",
		StabilityLevel: metrics.ALPHA,
	}, []string{"profile"})
	pendingEstimates = metrics.NewGaugeVec(&metrics.GaugeOpts{
		Subsystem:      metricsSubsystem,
		Name:           "pending_estimates",
		Help:           "Pods counted by estimate because the usage aggregations do not show them yet, or show them only in part (not Running, Running for less than a metrics window plus the warm-up, or too few samples since).",
		StabilityLevel: metrics.ALPHA,
	}, []string{"profile"})
	filterRejectedPods = metrics.NewCounterVec(&metrics.CounterOpts{
		Subsystem:      metricsSubsystem,
		Name:           "filter_rejections_total",
		Help:           "Scheduling attempts in which the LoadAware Filter rejected at least one node, by reason (usage over a threshold, or missing metrics with filterMissingMetrics=Reject).",
		StabilityLevel: metrics.ALPHA,
	}, []string{"profile", "reason"})
	requeuedPods = metrics.NewCounterVec(&metrics.CounterOpts{
		Subsystem:      metricsSubsystem,
		Name:           "requeued_pods_total",
		Help:           "Pods the LoadAware Filter had rejected that were moved back to the active queue after node usage dropped.",
		StabilityLevel: metrics.ALPHA,
	}, []string{"profile"})
)

var registerMetrics sync.Once

func register() {
	registerMetrics.Do(func() {
		legacyregistry.MustRegister(metricsAPIAvailable, metricsFetches, metricsFetchDuration,
			nodesWithoutFreshMetrics, pendingEstimates, filterRejectedPods, requeuedPods)
	})
}
