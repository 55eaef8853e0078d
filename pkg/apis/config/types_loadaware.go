package config

import metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

// +kubebuilder:object:root=true

// LoadAwareArgs holds the arguments of the LoadAware plugin.
type LoadAwareArgs struct {
	metav1.TypeMeta

	// UsageThresholds are the Filter's limits, in percent of a node's allocatable: a node whose
	// estimated usage plus the pod's estimate would exceed one is rejected. 0 turns a resource's check off.
	UsageThresholds LoadAwareResources
	// FilterMissingMetrics is what the Filter does with a node that has no fresh metrics sample while
	// the metrics API answers: Pass or Reject. During a metrics outage every node passes.
	FilterMissingMetrics LoadAwareMissingMetricsPolicy
	// ScoringStrategy is how the Score ranks nodes by their estimated utilization.
	ScoringStrategy LoadAwareScoringStrategy
	// ResourceWeights weigh each resource's utilization in the Score. 0 leaves a resource out.
	ResourceWeights LoadAwareResources
	// MetricsRefreshIntervalSeconds is how often NodeMetrics are fetched (in the background).
	MetricsRefreshIntervalSeconds int64
	// MetricsStalenessSeconds is the age after which a node's sample counts as missing.
	MetricsStalenessSeconds int64
	// Estimation describes the usage assumed for pods whose usage the metrics cannot show yet.
	Estimation LoadAwareEstimation
	// UsageAggregation is how the Filter and the Score each summarize a node's recent samples.
	UsageAggregation LoadAwareUsageAggregation
	// FilterDaemonSetPods subjects DaemonSet pods to the usage Filter; by default they are exempt,
	// since they must run on every node.
	FilterDaemonSetPods bool
}

// LoadAwareAggregationType names how a node's samples over a duration are summarized.
type LoadAwareAggregationType string

const (
	// AggregationLatest uses the node's latest sample alone.
	AggregationLatest LoadAwareAggregationType = "latest"
	// AggregationAvg is the mean of the samples within the duration.
	AggregationAvg LoadAwareAggregationType = "avg"
	// AggregationP90 is the 90th percentile of the samples within the duration.
	AggregationP90 LoadAwareAggregationType = "p90"
	// AggregationP95 is the 95th percentile of the samples within the duration.
	AggregationP95 LoadAwareAggregationType = "p95"
	// AggregationMax is the largest sample within the duration.
	AggregationMax LoadAwareAggregationType = "max"
)

// LoadAwareAggregation is one summary of a node's recent samples.
type LoadAwareAggregation struct {
	Type LoadAwareAggregationType
	// DurationSeconds is how far back samples count (ignored by latest).
	DurationSeconds int64
}

// LoadAwareUsageAggregation holds the Filter's and the Score's aggregation.
type LoadAwareUsageAggregation struct {
	Filter LoadAwareAggregation
	Score  LoadAwareAggregation
}

// LoadAwareResources holds one integer per resource the plugin measures.
type LoadAwareResources struct {
	CPU    int64
	Memory int64
}

// LoadAwareMissingMetricsPolicy is the Filter's answer for a node without a fresh sample.
type LoadAwareMissingMetricsPolicy string

const (
	// LoadAwareMissingMetricsPass lets a node without fresh metrics pass the Filter.
	LoadAwareMissingMetricsPass LoadAwareMissingMetricsPolicy = "Pass"
	// LoadAwareMissingMetricsReject rejects a node without fresh metrics (while the metrics API answers).
	LoadAwareMissingMetricsReject LoadAwareMissingMetricsPolicy = "Reject"
)

// LoadAwareScoringStrategyType names a scoring strategy.
type LoadAwareScoringStrategyType string

const (
	// LeastUtilized prefers the node with the lowest estimated utilization (spreads by real load).
	LeastUtilized LoadAwareScoringStrategyType = "LeastUtilized"
	// TargetUtilization prefers nodes up to the target utilization (packs), then spreads above it.
	TargetUtilization LoadAwareScoringStrategyType = "TargetUtilization"
)

// LoadAwareScoringStrategy is the Score's strategy.
type LoadAwareScoringStrategy struct {
	Type LoadAwareScoringStrategyType
	// TargetUtilizationPercent is the utilization TargetUtilization scores best.
	TargetUtilizationPercent int64
	// DominantResource scores a node by its most utilized weighted resource instead of the weighted
	// average, so a node hot on one resource alone is avoided.
	DominantResource bool
}

// LoadAwareEstimation describes how a just-bound pod's usage is estimated.
type LoadAwareEstimation struct {
	// ScalingFactors are percentages applied to each container's limit, or to its request when it has
	// no limit.
	ScalingFactors LoadAwareResources
	// DefaultMilliCPU is the estimate for a container with neither a cpu request nor a limit.
	DefaultMilliCPU int64
	// DefaultMemoryBytes is the estimate for a container with neither a memory request nor a limit.
	DefaultMemoryBytes int64
	// WarmupSeconds is how long a pod must have been Running, before a sample's window starts, for the
	// sample to replace the pod's estimate.
	WarmupSeconds int64
}
