package validation

import (
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/custom-scheduler/custom-scheduler/pkg/apis/config"
)

const (
	// maxLoadAwareWeight bounds a resource weight, like the in-tree scoring strategies do.
	maxLoadAwareWeight = 100
	// maxLoadAwareScalingPercent bounds an estimation factor (percent of a limit or request).
	maxLoadAwareScalingPercent = 1000
	// maxLoadAwareRefreshSeconds bounds the refresh interval: an hour-old sample says little.
	maxLoadAwareRefreshSeconds = 3600
	// maxLoadAwareAggregationSeconds bounds an aggregation's duration (Crane's max over an hour).
	maxLoadAwareAggregationSeconds = 3600
	// maxLoadAwareWarmupSeconds bounds the estimation warm-up.
	maxLoadAwareWarmupSeconds = 3600
)

// ValidateLoadAwareArgs validates LoadAwareArgs.
func ValidateLoadAwareArgs(path *field.Path, args *config.LoadAwareArgs) error {
	var errs field.ErrorList

	thresholds := path.Child("usageThresholds")
	errs = append(errs, validateLoadAwareRange(thresholds.Child("cpu"), args.UsageThresholds.CPU, 0, 100, "must be a percentage between 0 (off) and 100")...)
	errs = append(errs, validateLoadAwareRange(thresholds.Child("memory"), args.UsageThresholds.Memory, 0, 100, "must be a percentage between 0 (off) and 100")...)

	switch args.FilterMissingMetrics {
	case config.LoadAwareMissingMetricsPass, config.LoadAwareMissingMetricsReject:
	default:
		errs = append(errs, field.NotSupported(path.Child("filterMissingMetrics"), args.FilterMissingMetrics,
			[]config.LoadAwareMissingMetricsPolicy{config.LoadAwareMissingMetricsPass, config.LoadAwareMissingMetricsReject}))
	}

	strategy := path.Child("scoringStrategy")
	switch args.ScoringStrategy.Type {
	case config.LeastUtilized:
	case config.TargetUtilization:
		errs = append(errs, validateLoadAwareRange(strategy.Child("targetUtilizationPercent"), args.ScoringStrategy.TargetUtilizationPercent, 1, 99, "must be a percentage between 1 and 99")...)
	default:
		errs = append(errs, field.NotSupported(strategy.Child("type"), args.ScoringStrategy.Type,
			[]config.LoadAwareScoringStrategyType{config.LeastUtilized, config.TargetUtilization}))
	}

	weights := path.Child("resourceWeights")
	errs = append(errs, validateLoadAwareRange(weights.Child("cpu"), args.ResourceWeights.CPU, 0, maxLoadAwareWeight, "must be between 0 and 100")...)
	errs = append(errs, validateLoadAwareRange(weights.Child("memory"), args.ResourceWeights.Memory, 0, maxLoadAwareWeight, "must be between 0 and 100")...)
	if args.ResourceWeights.CPU == 0 && args.ResourceWeights.Memory == 0 {
		errs = append(errs, field.Invalid(weights, "0", "at least one resource needs a positive weight"))
	}

	refresh := path.Child("metricsRefreshIntervalSeconds")
	errs = append(errs, validateLoadAwareRange(refresh, args.MetricsRefreshIntervalSeconds, 1, maxLoadAwareRefreshSeconds, "must be between 1 and 3600")...)
	if args.MetricsStalenessSeconds <= args.MetricsRefreshIntervalSeconds {
		errs = append(errs, field.Invalid(path.Child("metricsStalenessSeconds"), args.MetricsStalenessSeconds,
			"must be larger than metricsRefreshIntervalSeconds, or every sample would count as stale before the next refresh"))
	}

	estimation := path.Child("estimation")
	factors := estimation.Child("scalingFactors")
	errs = append(errs, validateLoadAwareRange(factors.Child("cpu"), args.Estimation.ScalingFactors.CPU, 0, maxLoadAwareScalingPercent, "must be a percentage between 0 and 1000")...)
	errs = append(errs, validateLoadAwareRange(factors.Child("memory"), args.Estimation.ScalingFactors.Memory, 0, maxLoadAwareScalingPercent, "must be a percentage between 0 and 1000")...)
	if args.Estimation.DefaultMilliCPU < 0 {
		errs = append(errs, field.Invalid(estimation.Child("defaultCPU"), args.Estimation.DefaultMilliCPU, "must not be negative"))
	}
	if args.Estimation.DefaultMemoryBytes < 0 {
		errs = append(errs, field.Invalid(estimation.Child("defaultMemory"), args.Estimation.DefaultMemoryBytes, "must not be negative"))
	}
	errs = append(errs, validateLoadAwareRange(estimation.Child("warmupSeconds"), args.Estimation.WarmupSeconds, 0, maxLoadAwareWarmupSeconds, "must be between 0 and 3600")...)

	aggregation := path.Child("usageAggregation")
	errs = append(errs, validateLoadAwareAggregation(aggregation.Child("filter"), args.UsageAggregation.Filter, args.MetricsRefreshIntervalSeconds)...)
	errs = append(errs, validateLoadAwareAggregation(aggregation.Child("score"), args.UsageAggregation.Score, args.MetricsRefreshIntervalSeconds)...)
	return errs.ToAggregate()
}

// LoadAwareAggregationTypes lists the supported aggregations.
var LoadAwareAggregationTypes = []config.LoadAwareAggregationType{
	config.AggregationLatest, config.AggregationAvg, config.AggregationP90, config.AggregationP95, config.AggregationMax,
}

func validateLoadAwareAggregation(path *field.Path, a config.LoadAwareAggregation, refreshSeconds int64) field.ErrorList {
	switch a.Type {
	case config.AggregationLatest:
		return nil
	case config.AggregationAvg, config.AggregationP90, config.AggregationP95, config.AggregationMax:
		if a.DurationSeconds < refreshSeconds || a.DurationSeconds > maxLoadAwareAggregationSeconds {
			return field.ErrorList{field.Invalid(path.Child("durationSeconds"), a.DurationSeconds,
				"must be between metricsRefreshIntervalSeconds (one sample per refresh) and 3600")}
		}
		return nil
	default:
		return field.ErrorList{field.NotSupported(path.Child("type"), a.Type, LoadAwareAggregationTypes)}
	}
}

func validateLoadAwareRange(path *field.Path, value, lo, hi int64, msg string) field.ErrorList {
	if value < lo || value > hi {
		return field.ErrorList{field.Invalid(path, value, msg)}
	}
	return nil
}
