package loadaware

import (
	"context"
	"fmt"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
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
	result := pl.store.setSamples(samples, staleBefore)
	// The state is published after the cache, so whoever sees "available" sees the samples too.
	pl.setAPIState(logger, state, err)
	pendingEstimates.WithLabelValues(pl.profile).Set(float64(result.pending))
	pl.updateNodesWithoutFreshMetrics(result.fresh)
	// A node whose sample expired passes the Filter from now on, unless unmeasured nodes are rejected
	// while the API answers.
	expiredPass := result.expired > 0 && (!pl.rejectMissing || state != apiAvailable)
	if len(result.cooled) > 0 || expiredPass {
		pl.requeue(logger, result.cooled, expiredPass)
	}
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

// updateNodesWithoutFreshMetrics sets the gauge of nodes known to the scheduler without a fresh sample.
func (pl *LoadAware) updateNodesWithoutFreshMetrics(fresh map[string]bool) {
	if pl.handle == nil || pl.handle.SharedInformerFactory() == nil {
		return
	}
	nodes, err := pl.handle.SharedInformerFactory().Core().V1().Nodes().Lister().List(labels.Everything())
	if err != nil {
		return
	}
	missing := 0
	for _, n := range nodes {
		if !fresh[n.Name] {
			missing++
		}
	}
	nodesWithoutFreshMetrics.WithLabelValues(pl.profile).Set(float64(missing))
}

// registerPodHandlers keeps the estimates of pods bound by anyone (another profile, another scheduler,
// a controller setting nodeName) and drops them when pods go away.
func (pl *LoadAware) registerPodHandlers() error {
	if pl.handle == nil || pl.handle.SharedInformerFactory() == nil {
		return nil
	}
	// Make sure the node informer exists for the gauge of nodes without metrics.
	pl.handle.SharedInformerFactory().Core().V1().Nodes().Informer()
	_, err := pl.handle.SharedInformerFactory().Core().V1().Pods().Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    pl.onPodUpsert,
		UpdateFunc: func(_, obj interface{}) { pl.onPodUpsert(obj) },
		DeleteFunc: pl.onPodDelete,
	})
	if err != nil {
		return fmt.Errorf("adding the LoadAware pod event handler: %w", err)
	}
	return nil
}

func (pl *LoadAware) onPodUpsert(obj interface{}) {
	pod, ok := obj.(*v1.Pod)
	if !ok || pod.Spec.NodeName == "" {
		return
	}
	pl.rejected.remove(pod.UID)
	if pod.Status.Phase == v1.PodSucceeded || pod.Status.Phase == v1.PodFailed {
		pl.store.removePending(pod.UID)
		return
	}
	since := boundTime(pod)
	// Most updates are about pods bound long ago, which every fresh sample covers.
	if since.Before(pl.clock.Now().Add(-pl.staleness)) || pl.store.tracked(pod.UID) {
		return
	}
	pl.store.addPending(pod.UID, pod.Spec.NodeName, since, pl.est.estimate(pod))
}

func (pl *LoadAware) onPodDelete(obj interface{}) {
	if tombstone, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = tombstone.Obj
	}
	pod, ok := obj.(*v1.Pod)
	if !ok {
		return
	}
	pl.rejected.remove(pod.UID)
	pl.store.removePending(pod.UID)
}

// boundTime is when a pod was bound: its PodScheduled condition's transition (set by the binding),
// else its creation (pods created with spec.nodeName).
func boundTime(pod *v1.Pod) time.Time {
	for i := range pod.Status.Conditions {
		c := &pod.Status.Conditions[i]
		if c.Type == v1.PodScheduled && c.Status == v1.ConditionTrue && !c.LastTransitionTime.IsZero() {
			return c.LastTransitionTime.Time
		}
	}
	return pod.CreationTimestamp.Time
}
