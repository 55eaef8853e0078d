package v1

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/utils/ptr"

	"github.com/custom-scheduler/custom-scheduler/pkg/apis/config"
)

func TestSetDefaultsLoadAwareArgs(t *testing.T) {
	defaulted := config.LoadAwareArgs{
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
	tests := map[string]struct {
		in   *LoadAwareArgs
		want func(*config.LoadAwareArgs)
	}{
		"empty args get every default": {in: &LoadAwareArgs{}},
		"one resource set keeps the other's default": {
			in:   &LoadAwareArgs{UsageThresholds: &LoadAwareResources{CPU: ptr.To[int64](50)}},
			want: func(a *config.LoadAwareArgs) { a.UsageThresholds.CPU = 50 },
		},
		"0 stays 0 (off)": {
			in:   &LoadAwareArgs{UsageThresholds: &LoadAwareResources{Memory: ptr.To[int64](0)}},
			want: func(a *config.LoadAwareArgs) { a.UsageThresholds.Memory = 0 },
		},
		"strategy type set keeps the default target": {
			in:   &LoadAwareArgs{ScoringStrategy: &LoadAwareScoringStrategy{Type: ptr.To("TargetUtilization")}},
			want: func(a *config.LoadAwareArgs) { a.ScoringStrategy.Type = config.TargetUtilization },
		},
		"aggregation type set keeps the default duration": {
			in:   &LoadAwareArgs{UsageAggregation: &LoadAwareUsageAggregation{Filter: &LoadAwareAggregation{Type: ptr.To("p95")}}},
			want: func(a *config.LoadAwareArgs) { a.UsageAggregation.Filter.Type = config.AggregationP95 },
		},
		"new switches convert": {
			in: &LoadAwareArgs{
				FilterDaemonSetPods: ptr.To(true),
				ScoringStrategy:     &LoadAwareScoringStrategy{DominantResource: ptr.To(true)},
				Estimation:          &LoadAwareEstimation{WarmupSeconds: ptr.To[int64](0)},
			},
			want: func(a *config.LoadAwareArgs) {
				a.FilterDaemonSetPods = true
				a.ScoringStrategy.DominantResource = true
				a.Estimation.WarmupSeconds = 0
			},
		},
		"quantities convert to millicores and bytes": {
			in: &LoadAwareArgs{Estimation: &LoadAwareEstimation{DefaultCPU: ptr.To(resource.MustParse("0.5")), DefaultMemory: ptr.To(resource.MustParse("1Gi"))}},
			want: func(a *config.LoadAwareArgs) {
				a.Estimation.DefaultMilliCPU = 500
				a.Estimation.DefaultMemoryBytes = 1 << 30
			},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			SetDefaults_LoadAwareArgs(tc.in)
			got := config.LoadAwareArgs{}
			if err := Convert_v1_LoadAwareArgs_To_config_LoadAwareArgs(tc.in, &got, nil); err != nil {
				t.Fatal(err)
			}
			want := defaulted
			if tc.want != nil {
				tc.want(&want)
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("defaulted args (-want,+got):\n%s", diff)
			}
			// And back: internal → v1 → internal is lossless.
			back := LoadAwareArgs{}
			if err := Convert_config_LoadAwareArgs_To_v1_LoadAwareArgs(&got, &back, nil); err != nil {
				t.Fatal(err)
			}
			again := config.LoadAwareArgs{}
			if err := Convert_v1_LoadAwareArgs_To_config_LoadAwareArgs(&back, &again, nil); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(got, again); diff != "" {
				t.Errorf("round trip (-want,+got):\n%s", diff)
			}
		})
	}
}
