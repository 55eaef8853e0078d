package validation

import (
	"strings"
	"testing"

	"github.com/custom-scheduler/custom-scheduler/pkg/apis/config"
)

func validLoadAwareArgs() *config.LoadAwareArgs {
	return &config.LoadAwareArgs{
		UsageThresholds:               config.LoadAwareResources{CPU: 80, Memory: 90},
		FilterMissingMetrics:          config.LoadAwareMissingMetricsPass,
		ScoringStrategy:               config.LoadAwareScoringStrategy{Type: config.LeastUtilized, TargetUtilizationPercent: 60},
		ResourceWeights:               config.LoadAwareResources{CPU: 1, Memory: 1},
		MetricsRefreshIntervalSeconds: 15,
		MetricsStalenessSeconds:       180,
		Estimation: config.LoadAwareEstimation{
			ScalingFactors:     config.LoadAwareResources{CPU: 85, Memory: 70},
			DefaultMilliCPU:    100,
			DefaultMemoryBytes: 200 << 20,
			WarmupSeconds:      30,
		},
		UsageAggregation: config.LoadAwareUsageAggregation{
			Filter: config.LoadAwareAggregation{Type: config.AggregationLatest, DurationSeconds: 300},
			Score:  config.LoadAwareAggregation{Type: config.AggregationLatest, DurationSeconds: 300},
		},
	}
}

func TestValidateLoadAwareArgs(t *testing.T) {
	tests := map[string]struct {
		mod  func(*config.LoadAwareArgs)
		want []string // fields the error must name; none: valid
	}{
		"defaults are valid": {mod: func(*config.LoadAwareArgs) {}},
		"thresholds 0 and 100 are valid": {mod: func(a *config.LoadAwareArgs) {
			a.UsageThresholds = config.LoadAwareResources{CPU: 0, Memory: 100}
		}},
		"threshold above 100": {mod: func(a *config.LoadAwareArgs) { a.UsageThresholds.CPU = 150 }, want: []string{"usageThresholds.cpu"}},
		"negative threshold":  {mod: func(a *config.LoadAwareArgs) { a.UsageThresholds.Memory = -1 }, want: []string{"usageThresholds.memory"}},
		"unknown missing-metrics policy": {mod: func(a *config.LoadAwareArgs) { a.FilterMissingMetrics = "Ignore" },
			want: []string{"filterMissingMetrics", `"Pass"`, `"Reject"`}},
		"unknown strategy": {mod: func(a *config.LoadAwareArgs) { a.ScoringStrategy.Type = "MostUtilized" },
			want: []string{"scoringStrategy.type", `"LeastUtilized"`, `"TargetUtilization"`}},
		"target of 100 with TargetUtilization": {mod: func(a *config.LoadAwareArgs) {
			a.ScoringStrategy = config.LoadAwareScoringStrategy{Type: config.TargetUtilization, TargetUtilizationPercent: 100}
		}, want: []string{"scoringStrategy.targetUtilizationPercent"}},
		"target ignored with LeastUtilized": {mod: func(a *config.LoadAwareArgs) { a.ScoringStrategy.TargetUtilizationPercent = 0 }},
		"negative weight":                   {mod: func(a *config.LoadAwareArgs) { a.ResourceWeights.CPU = -1 }, want: []string{"resourceWeights.cpu"}},
		"all weights 0": {mod: func(a *config.LoadAwareArgs) { a.ResourceWeights = config.LoadAwareResources{} },
			want: []string{"resourceWeights"}},
		"refresh interval 0":          {mod: func(a *config.LoadAwareArgs) { a.MetricsRefreshIntervalSeconds = 0 }, want: []string{"metricsRefreshIntervalSeconds"}},
		"staleness not above refresh": {mod: func(a *config.LoadAwareArgs) { a.MetricsStalenessSeconds = 15 }, want: []string{"metricsStalenessSeconds"}},
		"scaling factor above 1000":   {mod: func(a *config.LoadAwareArgs) { a.Estimation.ScalingFactors.CPU = 1001 }, want: []string{"estimation.scalingFactors.cpu"}},
		"negative default memory":     {mod: func(a *config.LoadAwareArgs) { a.Estimation.DefaultMemoryBytes = -1 }, want: []string{"estimation.defaultMemory"}},
		"negative warm-up":            {mod: func(a *config.LoadAwareArgs) { a.Estimation.WarmupSeconds = -1 }, want: []string{"estimation.warmupSeconds"}},
		"warm-up above an hour":       {mod: func(a *config.LoadAwareArgs) { a.Estimation.WarmupSeconds = 3601 }, want: []string{"estimation.warmupSeconds"}},
		"unknown aggregation": {mod: func(a *config.LoadAwareArgs) { a.UsageAggregation.Filter.Type = "p50" },
			want: []string{"usageAggregation.filter.type", `"latest"`, `"p95"`}},
		"latest ignores the duration": {mod: func(a *config.LoadAwareArgs) { a.UsageAggregation.Score.DurationSeconds = 0 }},
		"p95 over a valid duration": {mod: func(a *config.LoadAwareArgs) {
			a.UsageAggregation.Filter = config.LoadAwareAggregation{Type: config.AggregationP95, DurationSeconds: 3600}
		}},
		"aggregation shorter than the refresh interval": {mod: func(a *config.LoadAwareArgs) {
			a.UsageAggregation.Score = config.LoadAwareAggregation{Type: config.AggregationAvg, DurationSeconds: 10}
		}, want: []string{"usageAggregation.score.durationSeconds"}},
		"aggregation longer than an hour": {mod: func(a *config.LoadAwareArgs) {
			a.UsageAggregation.Filter = config.LoadAwareAggregation{Type: config.AggregationMax, DurationSeconds: 3601}
		}, want: []string{"usageAggregation.filter.durationSeconds"}},
		"several errors are all listed": {mod: func(a *config.LoadAwareArgs) { a.UsageThresholds.CPU = 101; a.MetricsRefreshIntervalSeconds = -5 }, want: []string{"usageThresholds.cpu", "metricsRefreshIntervalSeconds"}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			args := validLoadAwareArgs()
			tc.mod(args)
			err := ValidateLoadAwareArgs(nil, args)
			if len(tc.want) == 0 {
				if err != nil {
					t.Fatalf("unexpected error: %v", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("no error, want one naming %v", tc.want)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not mention %q", err, w)
				}
			}
		})
	}
}
