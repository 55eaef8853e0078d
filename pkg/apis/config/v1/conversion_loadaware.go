package v1

import (
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/conversion"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"

	"github.com/custom-scheduler/custom-scheduler/pkg/apis/config"
)

func addLoadAwareConversions(s *runtime.Scheme) error {
	if err := s.AddConversionFunc((*LoadAwareArgs)(nil), (*config.LoadAwareArgs)(nil), func(a, b interface{}, scope conversion.Scope) error {
		return Convert_v1_LoadAwareArgs_To_config_LoadAwareArgs(a.(*LoadAwareArgs), b.(*config.LoadAwareArgs), scope)
	}); err != nil {
		return err
	}
	return s.AddConversionFunc((*config.LoadAwareArgs)(nil), (*LoadAwareArgs)(nil), func(a, b interface{}, scope conversion.Scope) error {
		return Convert_config_LoadAwareArgs_To_v1_LoadAwareArgs(a.(*config.LoadAwareArgs), b.(*LoadAwareArgs), scope)
	})
}

// Convert_v1_LoadAwareArgs_To_config_LoadAwareArgs converts defaulted v1 args to the internal type.
// Unset fields (args that were not defaulted) become zero values, which validation rejects where a
// zero makes no sense.
func Convert_v1_LoadAwareArgs_To_config_LoadAwareArgs(in *LoadAwareArgs, out *config.LoadAwareArgs, _ conversion.Scope) error { //nolint:revive,stylecheck
	out.UsageThresholds = resourcesToInternal(in.UsageThresholds)
	out.FilterMissingMetrics = config.LoadAwareMissingMetricsPolicy(ptr.Deref(in.FilterMissingMetrics, ""))
	out.ScoringStrategy = config.LoadAwareScoringStrategy{}
	if in.ScoringStrategy != nil {
		out.ScoringStrategy.Type = config.LoadAwareScoringStrategyType(ptr.Deref(in.ScoringStrategy.Type, ""))
		out.ScoringStrategy.TargetUtilizationPercent = ptr.Deref(in.ScoringStrategy.TargetUtilizationPercent, 0)
		out.ScoringStrategy.DominantResource = ptr.Deref(in.ScoringStrategy.DominantResource, false)
	}
	out.ResourceWeights = resourcesToInternal(in.ResourceWeights)
	out.MetricsRefreshIntervalSeconds = ptr.Deref(in.MetricsRefreshIntervalSeconds, 0)
	out.MetricsStalenessSeconds = ptr.Deref(in.MetricsStalenessSeconds, 0)
	out.Estimation = config.LoadAwareEstimation{}
	if in.Estimation != nil {
		out.Estimation.ScalingFactors = resourcesToInternal(in.Estimation.ScalingFactors)
		if in.Estimation.DefaultCPU != nil {
			out.Estimation.DefaultMilliCPU = in.Estimation.DefaultCPU.MilliValue()
		}
		if in.Estimation.DefaultMemory != nil {
			out.Estimation.DefaultMemoryBytes = in.Estimation.DefaultMemory.Value()
		}
		out.Estimation.WarmupSeconds = ptr.Deref(in.Estimation.WarmupSeconds, 0)
	}
	out.UsageAggregation = config.LoadAwareUsageAggregation{}
	if in.UsageAggregation != nil {
		out.UsageAggregation.Filter = aggregationToInternal(in.UsageAggregation.Filter)
		out.UsageAggregation.Score = aggregationToInternal(in.UsageAggregation.Score)
	}
	out.FilterDaemonSetPods = ptr.Deref(in.FilterDaemonSetPods, false)
	return nil
}

// Convert_config_LoadAwareArgs_To_v1_LoadAwareArgs converts internal args to v1.
func Convert_config_LoadAwareArgs_To_v1_LoadAwareArgs(in *config.LoadAwareArgs, out *LoadAwareArgs, _ conversion.Scope) error { //nolint:revive,stylecheck
	out.UsageThresholds = resourcesToV1(in.UsageThresholds)
	out.FilterMissingMetrics = ptr.To(string(in.FilterMissingMetrics))
	out.ScoringStrategy = &LoadAwareScoringStrategy{
		Type:                     ptr.To(string(in.ScoringStrategy.Type)),
		TargetUtilizationPercent: ptr.To(in.ScoringStrategy.TargetUtilizationPercent),
		DominantResource:         ptr.To(in.ScoringStrategy.DominantResource),
	}
	out.ResourceWeights = resourcesToV1(in.ResourceWeights)
	out.MetricsRefreshIntervalSeconds = ptr.To(in.MetricsRefreshIntervalSeconds)
	out.MetricsStalenessSeconds = ptr.To(in.MetricsStalenessSeconds)
	out.Estimation = &LoadAwareEstimation{
		ScalingFactors: resourcesToV1(in.Estimation.ScalingFactors),
		DefaultCPU:     resource.NewMilliQuantity(in.Estimation.DefaultMilliCPU, resource.DecimalSI),
		DefaultMemory:  resource.NewQuantity(in.Estimation.DefaultMemoryBytes, resource.BinarySI),
		WarmupSeconds:  ptr.To(in.Estimation.WarmupSeconds),
	}
	out.UsageAggregation = &LoadAwareUsageAggregation{
		Filter: aggregationToV1(in.UsageAggregation.Filter),
		Score:  aggregationToV1(in.UsageAggregation.Score),
	}
	out.FilterDaemonSetPods = ptr.To(in.FilterDaemonSetPods)
	return nil
}

func aggregationToInternal(in *LoadAwareAggregation) config.LoadAwareAggregation {
	if in == nil {
		return config.LoadAwareAggregation{}
	}
	return config.LoadAwareAggregation{
		Type:            config.LoadAwareAggregationType(ptr.Deref(in.Type, "")),
		DurationSeconds: ptr.Deref(in.DurationSeconds, 0),
	}
}

func aggregationToV1(in config.LoadAwareAggregation) *LoadAwareAggregation {
	return &LoadAwareAggregation{Type: ptr.To(string(in.Type)), DurationSeconds: ptr.To(in.DurationSeconds)}
}

func resourcesToInternal(in *LoadAwareResources) config.LoadAwareResources {
	if in == nil {
		return config.LoadAwareResources{}
	}
	return config.LoadAwareResources{CPU: ptr.Deref(in.CPU, 0), Memory: ptr.Deref(in.Memory, 0)}
}

func resourcesToV1(in config.LoadAwareResources) *LoadAwareResources {
	return &LoadAwareResources{CPU: ptr.To(in.CPU), Memory: ptr.To(in.Memory)}
}
