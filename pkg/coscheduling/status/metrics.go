package status

import (
	"sync"

	"k8s.io/component-base/metrics"
	"k8s.io/component-base/metrics/legacyregistry"
)

// metricsSubsystem is the Coscheduling plugin's, whose metrics these are.
const metricsSubsystem = "custom_scheduler_coscheduling"

var (
	gangsBelowQuorum = metrics.NewGaugeVec(&metrics.GaugeOpts{
		Subsystem:      metricsSubsystem,
		Name:           "gangs_below_quorum",
		Help:           "Pod groups with some but fewer than minMember live members bound for longer than their schedule timeout (counted by the leading replica).",
		StabilityLevel: metrics.ALPHA,
	}, []string{"profile"})
	statusUpdates = metrics.NewCounterVec(&metrics.CounterOpts{
		Subsystem:      metricsSubsystem,
		Name:           "podgroup_status_updates_total",
		Help:           "PodGroup status patches sent by the background status updater, by result (success, error).",
		StabilityLevel: metrics.ALPHA,
	}, []string{"profile", "result"})
)

var registerMetrics sync.Once

// RegisterMetrics registers the status writer's metrics into the legacy registry that the scheduler
// serves on /metrics. It is safe to call more than once.
func RegisterMetrics() {
	registerMetrics.Do(func() { legacyregistry.MustRegister(gangsBelowQuorum, statusUpdates) })
}
