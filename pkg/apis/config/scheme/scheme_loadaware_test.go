package scheme_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"k8s.io/klog/v2/ktesting"
	"k8s.io/kubernetes/cmd/kube-scheduler/app/options"
	schedconfig "k8s.io/kubernetes/pkg/scheduler/apis/config"

	"github.com/custom-scheduler/custom-scheduler/pkg/apis/config"
	_ "github.com/custom-scheduler/custom-scheduler/pkg/apis/config/scheme"
)

// TestLoadAwareArgsDecoding decodes LoadAwareArgs the way the scheduler does: strictly, defaulted,
// converted to the internal type.
func TestLoadAwareArgsDecoding(t *testing.T) {
	const header = `apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
profiles:
  - schedulerName: custom-scheduler
    plugins:
      multiPoint:
        enabled:
          - name: LoadAware
    pluginConfig:
      - name: LoadAware
        args:
`
	tests := map[string]struct {
		args    string
		wantErr string
		check   func(*testing.T, *config.LoadAwareArgs)
	}{
		"partial args are defaulted": {
			args: "          usageThresholds: {cpu: 70}\n          scoringStrategy: {type: TargetUtilization}\n",
			check: func(t *testing.T, a *config.LoadAwareArgs) {
				if a.UsageThresholds.CPU != 70 || a.UsageThresholds.Memory != 90 || a.ScoringStrategy.TargetUtilizationPercent != 60 ||
					a.MetricsRefreshIntervalSeconds != 15 || a.Estimation.DefaultMemoryBytes != 200<<20 {
					t.Errorf("decoded args %+v", a)
				}
			},
		},
		"new args decode": {
			args: "          usageAggregation: {filter: {type: p95}, score: {type: max, durationSeconds: 3600}}\n" +
				"          scoringStrategy: {dominantResource: true}\n          filterDaemonSetPods: true\n          estimation: {warmupSeconds: 0}\n",
			check: func(t *testing.T, a *config.LoadAwareArgs) {
				want := config.LoadAwareUsageAggregation{
					Filter: config.LoadAwareAggregation{Type: config.AggregationP95, DurationSeconds: 300},
					Score:  config.LoadAwareAggregation{Type: config.AggregationMax, DurationSeconds: 3600},
				}
				if a.UsageAggregation != want || !a.ScoringStrategy.DominantResource || !a.FilterDaemonSetPods ||
					a.Estimation.WarmupSeconds != 0 || a.ScoringStrategy.Type != config.LeastUtilized {
					t.Errorf("decoded args %+v", a)
				}
			},
		},
		"unknown field":    {args: "          usageThreshold: {cpu: 70}\n", wantErr: `unknown field "usageThreshold"`},
		"unknown resource": {args: "          usageThresholds: {gpu: 70}\n", wantErr: `unknown field "usageThresholds.gpu"`},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			logger, _ := ktesting.NewTestContext(t)
			path := filepath.Join(t.TempDir(), "config.yaml")
			if err := os.WriteFile(path, []byte(header+tc.args), 0o600); err != nil {
				t.Fatal(err)
			}
			cfg, err := options.LoadConfigFromFile(logger, path)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error %v, want one containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			for _, pc := range cfg.Profiles[0].PluginConfig {
				if pc.Name == "LoadAware" {
					args, ok := pc.Args.(*config.LoadAwareArgs)
					if !ok {
						t.Fatalf("LoadAware args decoded as %T", pc.Args)
					}
					tc.check(t, args)
					return
				}
			}
			t.Fatal("no LoadAware pluginConfig after decoding")
		})
	}
}

// TestLoadAwareExampleProfile keeps examples/loadaware-profile.yaml loadable and its args equal to
// the defaults it claims to spell out.
func TestLoadAwareExampleProfile(t *testing.T) {
	logger, _ := ktesting.NewTestContext(t)
	cfg, err := options.LoadConfigFromFile(logger, filepath.Join("..", "..", "..", "..", "examples", "loadaware-profile.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	defaults, err := options.LoadConfigFromFile(logger, writeConfig(t, `apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
profiles:
  - schedulerName: custom-scheduler
    pluginConfig:
      - name: LoadAware
`))
	if err != nil {
		t.Fatal(err)
	}
	got, want := loadAwareArgs(t, cfg), loadAwareArgs(t, defaults)
	if *got != *want {
		t.Errorf("example args %+v differ from the defaults %+v", got, want)
	}
}

func writeConfig(t *testing.T, content string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "config.yaml")
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func loadAwareArgs(t *testing.T, cfg *schedconfig.KubeSchedulerConfiguration) *config.LoadAwareArgs {
	t.Helper()
	for _, pc := range cfg.Profiles[0].PluginConfig {
		if pc.Name == "LoadAware" {
			if args, ok := pc.Args.(*config.LoadAwareArgs); ok {
				return args
			}
			t.Fatalf("LoadAware args decoded as %T", pc.Args)
		}
	}
	t.Fatal("no LoadAware pluginConfig")
	return nil
}
