package v1

import (
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/utils/ptr"
)

// Defaults of LoadAwareArgs.
const (
	DefaultLoadAwareCPUThresholdPercent      int64 = 80
	DefaultLoadAwareMemoryThresholdPercent   int64 = 90
	DefaultLoadAwareFilterMissingMetrics           = "Pass"
	DefaultLoadAwareScoringStrategy                = "LeastUtilized"
	DefaultLoadAwareTargetUtilizationPercent int64 = 60
	DefaultLoadAwareCPUWeight                int64 = 1
	DefaultLoadAwareMemoryWeight             int64 = 1
	DefaultLoadAwareRefreshIntervalSeconds   int64 = 15
	DefaultLoadAwareStalenessSeconds         int64 = 180
	DefaultLoadAwareCPUScalingPercent        int64 = 85
	DefaultLoadAwareMemoryScalingPercent     int64 = 70
	DefaultLoadAwareCPU                            = "100m"
	DefaultLoadAwareMemory                         = "200Mi"
	DefaultLoadAwareWarmupSeconds            int64 = 30
	DefaultLoadAwareAggregation                    = "latest"
	DefaultLoadAwareAggregationSeconds       int64 = 300
	DefaultLoadAwareFilterDaemonSetPods            = false
	DefaultLoadAwareDominantResource               = false
)

// SetDefaults_LoadAwareArgs fills the unset fields of LoadAwareArgs. Per-resource fields are defaulted
// one by one, so setting only `cpu` keeps memory's default.
func SetDefaults_LoadAwareArgs(obj *LoadAwareArgs) { //nolint:revive,stylecheck // scheme naming convention
	if obj.UsageThresholds == nil {
		obj.UsageThresholds = &LoadAwareResources{}
	}
	defaultResources(obj.UsageThresholds, DefaultLoadAwareCPUThresholdPercent, DefaultLoadAwareMemoryThresholdPercent)
	if obj.FilterMissingMetrics == nil {
		obj.FilterMissingMetrics = ptr.To(DefaultLoadAwareFilterMissingMetrics)
	}
	if obj.ScoringStrategy == nil {
		obj.ScoringStrategy = &LoadAwareScoringStrategy{}
	}
	if obj.ScoringStrategy.Type == nil {
		obj.ScoringStrategy.Type = ptr.To(DefaultLoadAwareScoringStrategy)
	}
	if obj.ScoringStrategy.TargetUtilizationPercent == nil {
		obj.ScoringStrategy.TargetUtilizationPercent = ptr.To(DefaultLoadAwareTargetUtilizationPercent)
	}
	if obj.ScoringStrategy.DominantResource == nil {
		obj.ScoringStrategy.DominantResource = ptr.To(DefaultLoadAwareDominantResource)
	}
	if obj.ResourceWeights == nil {
		obj.ResourceWeights = &LoadAwareResources{}
	}
	defaultResources(obj.ResourceWeights, DefaultLoadAwareCPUWeight, DefaultLoadAwareMemoryWeight)
	if obj.MetricsRefreshIntervalSeconds == nil {
		obj.MetricsRefreshIntervalSeconds = ptr.To(DefaultLoadAwareRefreshIntervalSeconds)
	}
	if obj.MetricsStalenessSeconds == nil {
		obj.MetricsStalenessSeconds = ptr.To(DefaultLoadAwareStalenessSeconds)
	}
	if obj.Estimation == nil {
		obj.Estimation = &LoadAwareEstimation{}
	}
	if obj.Estimation.ScalingFactors == nil {
		obj.Estimation.ScalingFactors = &LoadAwareResources{}
	}
	defaultResources(obj.Estimation.ScalingFactors, DefaultLoadAwareCPUScalingPercent, DefaultLoadAwareMemoryScalingPercent)
	if obj.Estimation.DefaultCPU == nil {
		q := resource.MustParse(DefaultLoadAwareCPU)
		obj.Estimation.DefaultCPU = &q
	}
	if obj.Estimation.DefaultMemory == nil {
		q := resource.MustParse(DefaultLoadAwareMemory)
		obj.Estimation.DefaultMemory = &q
	}
	if obj.Estimation.WarmupSeconds == nil {
		obj.Estimation.WarmupSeconds = ptr.To(DefaultLoadAwareWarmupSeconds)
	}
	if obj.UsageAggregation == nil {
		obj.UsageAggregation = &LoadAwareUsageAggregation{}
	}
	if obj.UsageAggregation.Filter == nil {
		obj.UsageAggregation.Filter = &LoadAwareAggregation{}
	}
	defaultAggregation(obj.UsageAggregation.Filter)
	if obj.UsageAggregation.Score == nil {
		obj.UsageAggregation.Score = &LoadAwareAggregation{}
	}
	defaultAggregation(obj.UsageAggregation.Score)
	if obj.FilterDaemonSetPods == nil {
		obj.FilterDaemonSetPods = ptr.To(DefaultLoadAwareFilterDaemonSetPods)
	}
}

func defaultAggregation(a *LoadAwareAggregation) {
	if a.Type == nil {
		a.Type = ptr.To(DefaultLoadAwareAggregation)
	}
	if a.DurationSeconds == nil {
		a.DurationSeconds = ptr.To(DefaultLoadAwareAggregationSeconds)
	}
}

func defaultResources(r *LoadAwareResources, cpu, memory int64) {
	if r.CPU == nil {
		r.CPU = ptr.To(cpu)
	}
	if r.Memory == nil {
		r.Memory = ptr.To(memory)
	}
}
