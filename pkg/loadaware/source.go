package loadaware

import (
	"context"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/klog/v2"
	metricsv1beta1 "k8s.io/metrics/pkg/apis/metrics/v1beta1"
	metricsclient "k8s.io/metrics/pkg/client/clientset/versioned"
)

// States of the metrics API, as last seen by the refresher.
const (
	apiUnknown int32 = iota
	apiAvailable
	apiUnavailable
)

// maxRequestTimeout caps one NodeMetrics request; the refresh interval caps it further.
const maxRequestTimeout = 10 * time.Second

// nodeMetricsLister fetches every node's metrics.
type nodeMetricsLister interface {
	ListNodeMetrics(ctx context.Context) ([]metricsv1beta1.NodeMetrics, error)
}

// clientLister reads metrics.k8s.io/v1beta1 NodeMetrics through the apiserver (metrics-server or any
// other provider behind the APIService).
type clientLister struct {
	client metricsclient.Interface
}

func newClientLister(cfg *rest.Config) (*clientLister, error) {
	cfg = rest.CopyConfig(cfg)
	// metrics.k8s.io providers are not required to speak protobuf.
	cfg.ContentType = runtimeJSON
	cfg.AcceptContentTypes = runtimeJSON
	// One list per refresh interval: a small budget of its own, apart from the scheduler's.
	cfg.RateLimiter = nil
	cfg.QPS, cfg.Burst = 5, 10
	c, err := metricsclient.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	return &clientLister{client: c}, nil
}

const runtimeJSON = "application/json"

func (c *clientLister) ListNodeMetrics(ctx context.Context) ([]metricsv1beta1.NodeMetrics, error) {
	list, err := c.client.MetricsV1beta1().NodeMetricses().List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	return list.Items, nil
}

// run refreshes the cache at once and then on every tick, until ctx ends.
func (pl *LoadAware) run(ctx context.Context) {
	logger := klog.FromContext(ctx).WithValues("plugin", Name, "profile", pl.profile)
	ctx = klog.NewContext(ctx, logger)
	logger.V(2).Info("Starting the metrics refresher", "interval", pl.refreshInterval, "staleness", pl.staleness)
	ticker := pl.clock.NewTicker(pl.refreshInterval)
	defer ticker.Stop()
	for {
		pl.refresh(ctx)
		select {
		case <-ctx.Done():
			logger.V(2).Info("Stopped the metrics refresher")
			return
		case <-ticker.C():
		}
	}
}

// refresh fetches NodeMetrics once, with a timeout, and updates the cache, the API state, the
// gauges, and requeues rejected pods whose estimate now fits a node that cooled down. An error
// leaves the cached samples in place until they go stale.
func (pl *LoadAware) refresh(ctx context.Context) {
	logger := klog.FromContext(ctx)
	start := pl.clock.Now()
	reqCtx, cancel := context.WithTimeout(ctx, pl.requestTimeout)
	items, err := pl.source.ListNodeMetrics(reqCtx)
	cancel()
	metricsFetchDuration.WithLabelValues(pl.profile).Observe(pl.clock.Since(start).Seconds())
	if ctx.Err() != nil {
		return
	}
	now := pl.clock.Now()
	staleBefore := now.Add(-pl.staleness)
	var samples map[string]sample
	state := apiAvailable
	if err != nil {
		metricsFetches.WithLabelValues(pl.profile, "error").Inc()
		state = apiUnavailable
	} else {
		metricsFetches.WithLabelValues(pl.profile, "success").Inc()
		samples = make(map[string]sample, len(items))
		for i := range items {
			m := &items[i]
			samples[m.Name] = sample{
				usage:     usage{MilliCPU: m.Usage.Cpu().MilliValue(), Memory: m.Usage.Memory().Value()},
				timestamp: m.Timestamp.Time,
				window:    m.Window.Duration,
			}
		}
	}
	result := pl.store.setSamples(samples, now, staleBefore)
	// The state is published after the cache, so whoever sees "available" sees the samples too.
	pl.setAPIState(logger, state, err)
	if result.firstSample {
		// Pods bound while no node had a sample were not counted (nothing is, then): count them now.
		pl.resyncPods(logger)
		result.pending = pl.store.pendingCount()
	}
	pendingEstimates.WithLabelValues(pl.profile).Set(float64(result.pending))
	nodesWithoutFreshMetrics.WithLabelValues(pl.profile).Set(float64(result.unmeasured))
	rejecting := pl.rejectMissing && state == apiAvailable && rejectInForce(result.known, result.unmeasured)
	wasRejecting := pl.rejecting.Swap(rejecting)
	if pl.rejectMissing && rejecting != wasRejecting && state == apiAvailable {
		if rejecting {
			logger.Info("Enough nodes have a fresh metrics sample: LoadAware rejects the nodes without one (filterMissingMetrics=Reject)", "nodes", result.known, "withoutSample", result.unmeasured)
		} else {
			logger.Info("Fewer than half of the nodes have a fresh metrics sample: LoadAware treats it as a metrics outage and passes the nodes without one until half of them have one (filterMissingMetrics=Reject is suspended)", "nodes", result.known, "withoutSample", result.unmeasured)
		}
	}
	if result.future > 0 {
		logger.V(2).Info("Metrics samples with a timestamp in the future: taken as of now", "samples", result.future)
	}
	// A node whose sample expired passes the Filter from now on, unless unmeasured nodes are still
	// rejected; every node without a sample does once rejection stops.
	anyPasses := !rejecting && (result.expired > 0 || wasRejecting)
	if len(result.cooled) > 0 || anyPasses {
		pl.requeue(logger, result.cooled, anyPasses)
	}
}

// rejectFloorPercent is the share of the known nodes that must have a fresh sample for
// filterMissingMetrics=Reject to reject the others: below it, the metrics source is taken to be
// broken (an empty answer, a stuck provider), not the nodes, and they pass as in an outage.
const rejectFloorPercent = 50

// rejectInForce decides whether nodes without a fresh sample are rejected (with
// filterMissingMetrics=Reject and the API answering): only while at least rejectFloorPercent of the
// nodes the informer knows have one.
func rejectInForce(known, unmeasured int) bool {
	return known > 0 && (known-unmeasured)*100 >= known*rejectFloorPercent
}

// setAPIState records the metrics API's state and logs only when it changes.
func (pl *LoadAware) setAPIState(logger klog.Logger, state int32, err error) {
	old := pl.apiState.Swap(state)
	if state == apiAvailable {
		metricsAPIAvailable.WithLabelValues(pl.profile).Set(1)
	} else {
		metricsAPIAvailable.WithLabelValues(pl.profile).Set(0)
	}
	if old == state {
		return
	}
	switch state {
	case apiAvailable:
		logger.Info("metrics.k8s.io is available: LoadAware filters and scores by node usage")
	case apiUnavailable:
		logger.Error(err, "metrics.k8s.io is unavailable: LoadAware passes nodes without a fresh sample and scores them neutral until it answers again")
	}
}
