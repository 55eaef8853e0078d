package v1

import (
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// +kubebuilder:object:root=true

// LoadAwareArgs holds the arguments of the LoadAware plugin.
type LoadAwareArgs struct {
	metav1.TypeMeta `json:",inline"`

	// UsageThresholds are the Filter's limits, in percent of a node's allocatable (0-100): a node whose
	// estimated usage plus the pod's estimate would exceed one is rejected. 0 turns a resource's check
	// off. Defaults to cpu 80, memory 90.
	UsageThresholds *LoadAwareResources `json:"usageThresholds,omitempty"`
	// FilterMissingMetrics is what the Filter does with a node that has no fresh metrics sample while
	// the metrics API answers: Pass or Reject. During a metrics outage every node passes whatever this
	// says. Defaults to Pass.
	FilterMissingMetrics *string `json:"filterMissingMetrics,omitempty"`
	// ScoringStrategy is how the Score ranks nodes by estimated utilization. Defaults to LeastUtilized.
	ScoringStrategy *LoadAwareScoringStrategy `json:"scoringStrategy,omitempty"`
	// ResourceWeights weigh each resource's utilization in the Score (0-100; 0 leaves a resource out).
	// Defaults to cpu 1, memory 1.
	ResourceWeights *LoadAwareResources `json:"resourceWeights,omitempty"`
	// MetricsRefreshIntervalSeconds is how often NodeMetrics are fetched, in the background.
	// Defaults to 15.
	MetricsRefreshIntervalSeconds *int64 `json:"metricsRefreshIntervalSeconds,omitempty"`
	// MetricsStalenessSeconds is the age after which a node's sample counts as missing. It must be
	// larger than the refresh interval. Defaults to 180.
	MetricsStalenessSeconds *int64 `json:"metricsStalenessSeconds,omitempty"`
	// Estimation describes the usage assumed for pods whose usage the metrics cannot show yet.
	Estimation *LoadAwareEstimation `json:"estimation,omitempty"`
	// UsageAggregation is how the Filter and the Score each summarize a node's recent samples.
	// Defaults to latest for both (with durationSeconds 300, used once another type is chosen).
	UsageAggregation *LoadAwareUsageAggregation `json:"usageAggregation,omitempty"`
	// FilterDaemonSetPods subjects DaemonSet pods to the usage Filter. Defaults to false: DaemonSet
	// pods must run on every node, so they are never filtered by usage.
	FilterDaemonSetPods *bool `json:"filterDaemonSetPods,omitempty"`
}

// LoadAwareUsageAggregation holds the Filter's and the Score's aggregation of a node's samples.
type LoadAwareUsageAggregation struct {
	// Filter is the aggregation the Filter compares with the thresholds.
	Filter *LoadAwareAggregation `json:"filter,omitempty"`
	// Score is the aggregation the Score ranks nodes by.
	Score *LoadAwareAggregation `json:"score,omitempty"`
}

// LoadAwareAggregation summarizes a node's samples over a duration.
type LoadAwareAggregation struct {
	// Type is latest (the last sample), avg, p90, p95 or max of the samples within the duration.
	// Defaults to latest.
	Type *string `json:"type,omitempty"`
	// DurationSeconds is how far back samples count (ignored by latest; at least
	// metricsRefreshIntervalSeconds otherwise, at most 3600). Defaults to 300.
	DurationSeconds *int64 `json:"durationSeconds,omitempty"`
}

// LoadAwareResources holds one integer per resource the plugin measures.
type LoadAwareResources struct {
	CPU    *int64 `json:"cpu,omitempty"`
	Memory *int64 `json:"memory,omitempty"`
}

// LoadAwareScoringStrategy is the Score's strategy.
type LoadAwareScoringStrategy struct {
	// Type is LeastUtilized (prefer the least used node: spread by real load) or TargetUtilization
	// (prefer nodes up to the target: pack, then spread). Defaults to LeastUtilized.
	Type *string `json:"type,omitempty"`
	// TargetUtilizationPercent is the utilization TargetUtilization scores best (1-99). Defaults to 60.
	TargetUtilizationPercent *int64 `json:"targetUtilizationPercent,omitempty"`
	// DominantResource scores a node by its most utilized resource (among those with a positive
	// weight) instead of the weighted average, so a node hot on one resource alone is avoided.
	// Defaults to false.
	DominantResource *bool `json:"dominantResource,omitempty"`
}

// LoadAwareEstimation describes how the usage of a pod bound after its node's last sample is estimated.
type LoadAwareEstimation struct {
	// ScalingFactors are percentages (0-1000) of each container's limit, or of its request when it has
	// no limit. Defaults to cpu 85, memory 70.
	ScalingFactors *LoadAwareResources `json:"scalingFactors,omitempty"`
	// DefaultCPU is the estimate for a container with neither a cpu request nor a limit.
	// Defaults to 100m.
	DefaultCPU *resource.Quantity `json:"defaultCPU,omitempty"`
	// DefaultMemory is the estimate for a container with neither a memory request nor a limit.
	// Defaults to 200Mi.
	DefaultMemory *resource.Quantity `json:"defaultMemory,omitempty"`
	// WarmupSeconds: a pod's estimate is kept until it has been Running for one metrics window plus
	// this long (0-3600), so pods that pull images or run init containers keep counting until their
	// own usage can be in a sample. Defaults to 30.
	WarmupSeconds *int64 `json:"warmupSeconds,omitempty"`
}
