package integration

import (
	"context"
	"fmt"
	"sync"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/component-base/metrics/legacyregistry"

	"github.com/custom-scheduler/custom-scheduler/test/fakemetrics"
)

var (
	metricsServerOnce sync.Once
	metricsServer     *fakemetrics.Server
	metricsServerErr  error
)

// useMetricsServer returns the package's metrics.k8s.io server (registered through an APIService on
// first use) and resets it (no nodes, healthy) for the calling test.
func useMetricsServer(t *testing.T) *fakemetrics.Server {
	t.Helper()
	metricsServerOnce.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
		defer cancel()
		metricsServer, metricsServerErr = fakemetrics.Start(ctx, restConfig, metav1.NamespaceDefault, "test-metrics-server")
	})
	if metricsServerErr != nil {
		t.Fatalf("starting the metrics.k8s.io test server: %v", metricsServerErr)
	}
	metricsServer.Reset()
	t.Cleanup(metricsServer.Reset)
	return metricsServer
}

// waitForFetches waits until the profile's LoadAware, in the scheduler just started, has fetched node
// metrics and stored them: its successful-fetch counter grows by two from this call (a refresh stores
// its samples before the next one counts). Unlike the metrics-available gauge, which the scheduler of
// an earlier test may have left at 1 in the shared registry, this cannot hold before the scheduler
// runs (schedulers of earlier tests are stopped).
func waitForFetches(t *testing.T, profile string) {
	t.Helper()
	fetches := func() float64 {
		families, err := legacyregistry.DefaultGatherer.Gather()
		if err != nil {
			t.Fatalf("gathering metrics: %v", err)
		}
		for _, f := range families {
			if f.GetName() != "custom_scheduler_loadaware_metrics_fetches_total" {
				continue
			}
			for _, m := range f.GetMetric() {
				labels := map[string]string{}
				for _, l := range m.GetLabel() {
					labels[l.GetName()] = l.GetValue()
				}
				if labels["profile"] == profile && labels["result"] == "success" {
					return m.GetCounter().GetValue()
				}
			}
		}
		return 0
	}
	n := fetches()
	waitFor(t, "", fmt.Sprintf("LoadAware of profile %q to fetch node metrics twice", profile), func(context.Context) (bool, error) {
		return fetches() >= n+2, nil
	})
}
