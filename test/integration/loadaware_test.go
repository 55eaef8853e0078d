package integration

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"
	v1 "k8s.io/api/core/v1"
	"k8s.io/component-base/metrics/legacyregistry"
	"k8s.io/kubernetes/cmd/kube-scheduler/app"
	"k8s.io/kubernetes/cmd/kube-scheduler/app/options"
	st "k8s.io/kubernetes/pkg/scheduler/testing"

	"github.com/custom-scheduler/custom-scheduler/pkg/registry"
	"github.com/custom-scheduler/custom-scheduler/test/fakemetrics"
)

// loadAwareProfile is a profile with the default plugins plus LoadAware, refreshing metrics every
// second. args is extra YAML under the plugin's args, indented by ten spaces.
func loadAwareProfile(schedulerName, pluginsYAML, args string) string {
	return fmt.Sprintf(`  - schedulerName: %s
    plugins:
      multiPoint:
        enabled:
          - name: LoadAware
%s    pluginConfig:
      - name: LoadAware
        args:
          metricsRefreshIntervalSeconds: 1
%s`, schedulerName, pluginsYAML, args)
}

// loadAwareOnlyScores disables the default scorers that also spread pods by requests, so placement
// shows LoadAware's own decisions.
const loadAwareOnlyScores = `      score:
        disabled:
          - name: NodeResourcesFit
          - name: NodeResourcesBalancedAllocation
          - name: ImageLocality
`

// gaugeValue reads one of LoadAware's gauges for a profile from the in-process registry.
func gaugeValue(t *testing.T, name, profile string) (float64, bool) {
	t.Helper()
	families, err := legacyregistry.DefaultGatherer.Gather()
	if err != nil {
		t.Fatalf("gathering metrics: %v", err)
	}
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "profile" && l.GetValue() == profile {
					return m.GetGauge().GetValue(), true
				}
			}
		}
	}
	return 0, false
}

// waitForGauge waits until a LoadAware gauge of a profile has the wanted value.
func waitForGauge(t *testing.T, name, profile string, want float64) {
	t.Helper()
	waitFor(t, "", fmt.Sprintf("%s{profile=%q} to be %v", name, profile, want), func(context.Context) (bool, error) {
		got, ok := gaugeValue(t, name, profile)
		return ok && got == want, nil
	})
}

// waitForGaugeAtLeast waits until a LoadAware gauge of a profile reaches min. Other tests' pods and
// nodes may still be around, so counts are checked from below.
func waitForGaugeAtLeast(t *testing.T, name, profile string, min float64) {
	t.Helper()
	waitFor(t, "", fmt.Sprintf("%s{profile=%q} to reach %v", name, profile, min), func(context.Context) (bool, error) {
		got, ok := gaugeValue(t, name, profile)
		return ok && got >= min, nil
	})
}

// pinnedPod is a pod of ours that may only run on the node labelled loadaware=<node>, or anywhere
// when node is empty.
func pinnedPod(ns, name, scheduler, node, cpu string) *v1.Pod {
	p := st.MakePod().Namespace(ns).Name(name).SchedulerName(scheduler).Container("pause")
	if node != "" {
		p = p.NodeSelector(map[string]string{"loadaware": node})
	}
	if cpu != "" {
		p = p.Req(map[v1.ResourceName]string{v1.ResourceCPU: cpu, v1.ResourceMemory: "64Mi"})
	}
	return p.Obj()
}

func loadAwareNode(t *testing.T, name string) {
	t.Helper()
	createNode(t, name, "10", "32Gi", map[string]string{"loadaware": name})
}

// TestLoadAwareFilterAndScore: a hot node is filtered with a reason users can read, the cooler of the
// remaining nodes is preferred, and a rejected pod is scheduled once its node cools down.
func TestLoadAwareFilterAndScore(t *testing.T) {
	ms := useMetricsServer(t)
	ns := testNamespace(t)
	for _, n := range []string{"la-hot", "la-warm", "la-cool"} {
		loadAwareNode(t, n)
	}
	ms.SetNode("la-hot", fakemetrics.NodeUsage{CPU: "9500m", Memory: "4Gi"})
	ms.SetNode("la-warm", fakemetrics.NodeUsage{CPU: "6", Memory: "4Gi"})
	ms.SetNode("la-cool", fakemetrics.NodeUsage{CPU: "2", Memory: "4Gi"})
	startScheduler(t, schedulerConfig(t, adminKubeconfig, loadAwareProfile(schedulerName, "", "          metricsStalenessSeconds: 30\n")))
	waitForFetches(t, schedulerName)

	t.Run("a hot node is filtered and the event says why", func(t *testing.T) {
		pod := createPod(t, pinnedPod(ns, "on-hot", schedulerName, "la-hot", "100m"))
		message := waitForPodUnschedulable(t, ns, pod.Name)
		const want = "node cpu usage (measured, plus estimates for new pods and this one) exceeds the LoadAware threshold of 80 percent"
		if !strings.Contains(message, want) {
			t.Errorf("PodScheduled message %q does not say why (want %q)", message, want)
		}
		event := waitForEvent(t, ns, pod.Name, "FailedScheduling", schedulerName)
		if !strings.Contains(event.Message, want) {
			t.Errorf("FailedScheduling event %q does not say why (want %q)", event.Message, want)
		}
	})

	t.Run("the cooler node is preferred", func(t *testing.T) {
		pod := createPod(t, pinnedPod(ns, "anywhere", schedulerName, "", "100m"))
		if node := waitForPodBound(t, ns, pod.Name); node != "la-cool" {
			t.Fatalf("pod bound to %q, want la-cool (20%% cpu; la-warm is at 60%%, la-hot is filtered)", node)
		}
	})

	t.Run("a rejected pod is retried when its node cools down", func(t *testing.T) {
		start := time.Now()
		ms.SetNode("la-hot", fakemetrics.NodeUsage{CPU: "1", Memory: "4Gi"})
		if node := waitForPodBound(t, ns, "on-hot"); node != "la-hot" {
			t.Fatalf("pod bound to %q, want la-hot", node)
		}
		// Far below podMaxInUnschedulablePodsDuration (5m): the refresher requeued the pod.
		t.Logf("rejected pod bound %v after its node cooled down", time.Since(start).Round(100*time.Millisecond))
	})
}

// TestLoadAwareBurstSpreads creates 20 pods at once while metrics do not move (the sample stays
// where it was when the burst began). Without estimates every pod would go to the node that looks
// coolest; with them each placed pod counts on its node and the burst spreads by estimated load.
func TestLoadAwareBurstSpreads(t *testing.T) {
	ms := useMetricsServer(t)
	ns := testNamespace(t)
	loadAwareNode(t, "la-burst-a")
	loadAwareNode(t, "la-burst-b")
	sampled := time.Now()
	ms.SetNode("la-burst-a", fakemetrics.NodeUsage{CPU: "1", Memory: "4Gi", Timestamp: sampled})
	ms.SetNode("la-burst-b", fakemetrics.NodeUsage{CPU: "4", Memory: "4Gi", Timestamp: sampled})
	startScheduler(t, schedulerConfig(t, adminKubeconfig, loadAwareProfile(schedulerName, loadAwareOnlyScores,
		"          metricsStalenessSeconds: 300\n          resourceWeights: {cpu: 1, memory: 0}\n")))
	waitForFetches(t, schedulerName)

	const pods = 20
	for i := 0; i < pods; i++ {
		createPod(t, pinnedPod(ns, fmt.Sprintf("burst-%02d", i), schedulerName, "", "500m"))
	}
	counts := map[string]int{}
	for i := 0; i < pods; i++ {
		counts[waitForPodBound(t, ns, fmt.Sprintf("burst-%02d", i))]++
	}
	t.Logf("placement: %v", counts)
	// Each pod is estimated at 85% of its 500m request. Balancing 1 + 0.425a = 4 + 0.425b with
	// a + b = 20 gives a ≈ 13.5, b ≈ 6.5.
	a, b := counts["la-burst-a"], counts["la-burst-b"]
	if b < 4 || a <= b {
		t.Errorf("burst placed %d pods on la-burst-a (10%% cpu) and %d on la-burst-b (40%%); want them spread by estimate (about 13-14 and 6-7)", a, b)
	}
	// The gauge is updated by the refresher, at most a second later.
	waitForGaugeAtLeast(t, "custom_scheduler_loadaware_pending_estimates", schedulerName, pods)
}

// TestLoadAwareMetricsOutage: when the metrics API errors or hangs, scheduling goes on: after the
// staleness limit every node passes the Filter and scores neutral, and the state is exposed.
func TestLoadAwareMetricsOutage(t *testing.T) {
	ms := useMetricsServer(t)
	ns := testNamespace(t)
	loadAwareNode(t, "la-outage")
	ms.SetNode("la-outage", fakemetrics.NodeUsage{CPU: "9900m", Memory: "4Gi"})
	sched := startScheduler(t, schedulerConfig(t, adminKubeconfig, loadAwareProfile(schedulerName, "", "          metricsStalenessSeconds: 3\n")))
	const available = "custom_scheduler_loadaware_metrics_api_available"
	waitForFetches(t, schedulerName)

	for _, tc := range []struct {
		name string
		mode fakemetrics.FailMode
	}{
		{"the metrics API errors", fakemetrics.Error},
		{"the metrics API hangs", fakemetrics.Slow},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ms.SetFailMode(fakemetrics.OK)
			waitForGauge(t, available, schedulerName, 1)
			pod := createPod(t, pinnedPod(ns, fmt.Sprintf("outage-%d", tc.mode), schedulerName, "la-outage", "100m"))
			waitForPodUnschedulable(t, ns, pod.Name)

			ms.SetFailMode(tc.mode)
			waitForGauge(t, available, schedulerName, 0)
			// Once the last sample is older than 3s, the node passes and the waiting pod is retried.
			if node := waitForPodBound(t, ns, pod.Name); node != "la-outage" {
				t.Fatalf("pod bound to %q, want la-outage", node)
			}
			fresh := createPod(t, pinnedPod(ns, fmt.Sprintf("during-outage-%d", tc.mode), schedulerName, "la-outage", "100m"))
			waitForPodBound(t, ns, fresh.Name)
		})
	}
	// Several failed refreshes per outage, one log line per state change.
	if n := strings.Count(sched.log.String(), "metrics.k8s.io is unavailable"); n != 2 {
		t.Errorf("logged the outage %d times, want once per outage (2)", n)
	}
}

// TestLoadAwareStaleMetrics: a node whose sample is older than metricsStalenessSeconds passes by
// default and is rejected, with a reason, by a profile with filterMissingMetrics: Reject (two other
// nodes have fresh samples: with fewer than half of the nodes sampled, Reject is suspended, see
// TestLoadAwareRejectFloor).
func TestLoadAwareStaleMetrics(t *testing.T) {
	ms := useMetricsServer(t)
	ns := testNamespace(t)
	loadAwareNode(t, "la-stale")
	ms.SetNode("la-stale", fakemetrics.NodeUsage{CPU: "1", Memory: "4Gi", Timestamp: time.Now().Add(-time.Hour)})
	for _, n := range []string{"la-stale-fresh-1", "la-stale-fresh-2"} {
		loadAwareNode(t, n)
		ms.SetNode(n, fakemetrics.NodeUsage{CPU: "1", Memory: "4Gi"})
	}
	const strict = "custom-scheduler-strict"
	profiles := loadAwareProfile(schedulerName, "", "          metricsStalenessSeconds: 30\n") +
		loadAwareProfile(strict, "", "          metricsStalenessSeconds: 30\n          filterMissingMetrics: Reject\n")
	startScheduler(t, schedulerConfig(t, adminKubeconfig, profiles))
	waitForFetches(t, strict)
	waitForGaugeAtLeast(t, "custom_scheduler_loadaware_nodes_without_fresh_metrics", strict, 1)

	t.Run("passes by default", func(t *testing.T) {
		pod := createPod(t, pinnedPod(ns, "stale-pass", schedulerName, "la-stale", "100m"))
		waitForPodBound(t, ns, pod.Name)
	})
	t.Run("is rejected with filterMissingMetrics: Reject", func(t *testing.T) {
		pod := createPod(t, pinnedPod(ns, "stale-reject", strict, "la-stale", "100m"))
		message := waitForPodUnschedulable(t, ns, pod.Name)
		if !strings.Contains(message, "no fresh metrics.k8s.io sample") {
			t.Errorf("PodScheduled message %q does not say the node has no fresh metrics", message)
		}
	})
	t.Run("and scheduled once a fresh sample arrives", func(t *testing.T) {
		ms.SetNode("la-stale", fakemetrics.NodeUsage{CPU: "1", Memory: "4Gi"})
		waitForPodBound(t, ns, "stale-reject")
	})
}

// TestLoadAwareBadArgsStopStartup sets the scheduler up from configurations with bad LoadAware args:
// each must fail before scheduling starts, naming the plugin and the field.
func TestLoadAwareBadArgsStopStartup(t *testing.T) {
	cases := map[string]struct {
		args string
		want []string
	}{
		"threshold above 100":         {"          usageThresholds: {cpu: 150}\n", []string{`"LoadAware"`, "usageThresholds.cpu"}},
		"unknown strategy":            {"          scoringStrategy: {type: MostUtilized}\n", []string{`"LoadAware"`, "scoringStrategy.type"}},
		"staleness below the refresh": {"          metricsStalenessSeconds: 1\n", []string{`"LoadAware"`, "metricsStalenessSeconds"}},
		"unknown field":               {"          usageThreshold: {cpu: 50}\n", []string{`unknown field "usageThreshold"`}},
		"unknown aggregation":         {"          usageAggregation: {filter: {type: p99}}\n", []string{`"LoadAware"`, "usageAggregation.filter.type"}},
		"aggregation shorter than the refresh": {"          usageAggregation: {score: {type: avg, durationSeconds: 0}}\n",
			[]string{`"LoadAware"`, "usageAggregation.score.durationSeconds"}},
		"negative warm-up":          {"          estimation: {warmupSeconds: -1}\n", []string{`"LoadAware"`, "estimation.warmupSeconds"}},
		"unknown field in new args": {"          usageAggregation: {filter: {kind: p95}}\n", []string{`unknown field "usageAggregation.filter.kind"`}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			err := schedulerSetupError(t, schedulerConfig(t, adminKubeconfig, loadAwareProfile(schedulerName, "", tc.args)))
			if err == nil {
				t.Fatal("the scheduler was set up, want an error")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not name %s", err, w)
				}
			}
		})
	}
}

// schedulerSetupError runs the scheduler command's flag parsing and set-up (config loading, profile
// and plugin construction) in this process, and returns its error; a scheduler that sets up is
// never run.
func schedulerSetupError(t *testing.T, configFile string) error {
	t.Helper()
	inProcessMu.Lock()
	defer inProcessMu.Unlock()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	opts := options.NewOptionsWithComponentGlobalsRegistry(newComponentGlobalsRegistry(t))
	fs := pflag.NewFlagSet("custom-scheduler", pflag.ContinueOnError)
	for _, f := range opts.Flags.FlagSets {
		fs.AddFlagSet(f)
	}
	if err := fs.Parse([]string{"--config=" + configFile, "--secure-port=0"}); err != nil {
		return err
	}
	if err := opts.ComponentGlobalsRegistry.Set(); err != nil {
		return err
	}
	_, _, err := app.Setup(ctx, opts, registry.Options()...)
	return err
}
