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
	// Estimation describes the usage assumed for pods bound after a node's last sample.
	Estimation LoadAwareEstimation
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
}
