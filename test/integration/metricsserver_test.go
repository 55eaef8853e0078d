package integration

import (
	"context"
	"sync"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

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
