package coscheduling

import (
	"sync"

	"k8s.io/component-base/metrics"
	"k8s.io/component-base/metrics/legacyregistry"

	"github.com/custom-scheduler/custom-scheduler/pkg/coscheduling/status"
)

const metricsSubsystem = "custom_scheduler_coscheduling"

// Rejection reasons, the bounded values of the rejections counter's reason label.
const (
	reasonMemberUnschedulable = "member_unschedulable"
	reasonTimeout             = "timeout"
	reasonInfeasible          = "infeasible"
	reasonMemberRejected      = "member_rejected"
)

// The plugin's metrics. Each is updated once per gang event (an attempt reaching its quorum, failing
// or waiting), never per node or per waiting pod.
var (
	timeToQuorum = metrics.NewHistogramVec(&metrics.HistogramOpts{
		Subsystem:      metricsSubsystem,
		Name:           "time_to_quorum_seconds",
		Help:           "Time from a gang attempt's first reserved member to the member that completed its quorum (minMember members reserved or bound).",
		Buckets:        metrics.ExponentialBuckets(0.01, 2, 16),
		StabilityLevel: metrics.ALPHA,
	}, []string{"profile"})
	gangTimeouts = metrics.NewCounterVec(&metrics.CounterOpts{
		Subsystem:      metricsSubsystem,
		Name:           "gang_timeouts_total",
		Help:           "Gang attempts whose reserved members waited at Permit longer than the group's schedule timeout and were all rejected.",
		StabilityLevel: metrics.ALPHA,
	}, []string{"profile"})
	gangRejections = metrics.NewCounterVec(&metrics.CounterOpts{
		Subsystem:      metricsSubsystem,
		Name:           "gang_rejections_total",
		Help:           "Gang attempts rejected as a whole, by reason (member_unschedulable, member_rejected, timeout, infeasible).",
		StabilityLevel: metrics.ALPHA,
	}, []string{"profile", "reason"})
	gangsWaiting = metrics.NewGaugeVec(&metrics.GaugeOpts{
		Subsystem:      metricsSubsystem,
		Name:           "gangs_waiting",
		Help:           "Pod groups with at least one member waiting at Permit for the rest of the quorum.",
		StabilityLevel: metrics.ALPHA,
	}, []string{"profile"})
	trackedGroups = metrics.NewGaugeVec(&metrics.GaugeOpts{
		Subsystem:      metricsSubsystem,
		Name:           "tracked_pod_groups",
		Help:           "Pod groups whose state the plugin holds in memory: groups with live pods, members reserved or bound, or a back-off. It follows the groups that exist, not every group ever seen.",
		StabilityLevel: metrics.ALPHA,
	}, []string{"profile"})
	preemptionAttempts = metrics.NewCounterVec(&metrics.CounterOpts{
		Subsystem:      metricsSubsystem,
		Name:           "preemption_attempts_total",
		Help:           "Preemption attempts by the plugin's PostFilter, by preemptor (gang: a gang that does not fit; pod: any other pod) and result (preempted, unschedulable, not_helpful, not_eligible, waiting, error).",
		StabilityLevel: metrics.ALPHA,
	}, []string{"profile", "preemptor", "result"})
	preemptionVictimPods = metrics.NewCounterVec(&metrics.CounterOpts{
		Subsystem:      metricsSubsystem,
		Name:           "preemption_victim_pods_total",
		Help:           "Pods preempted, by preemptor (gang, pod).",
		StabilityLevel: metrics.ALPHA,
	}, []string{"profile", "preemptor"})
	preemptionVictimGangs = metrics.NewCounterVec(&metrics.CounterOpts{
		Subsystem:      metricsSubsystem,
		Name:           "preemption_victim_gangs_total",
		Help:           "Gangs preempted (each whole), by preemptor (gang, pod).",
		StabilityLevel: metrics.ALPHA,
	}, []string{"profile", "preemptor"})
	preemptionEvictionRetries = metrics.NewCounterVec(&metrics.CounterOpts{
		Subsystem:      metricsSubsystem,
		Name:           "preemption_eviction_retries_total",
		Help:           "Retried evictions of gang members whose first eviction failed while other members of their gang were leaving (a victim gang is evicted whole).",
		StabilityLevel: metrics.ALPHA,
	}, []string{"profile"})
	reservedGangs = metrics.NewGaugeVec(&metrics.GaugeOpts{
		Subsystem:      metricsSubsystem,
		Name:           "reserved_gangs",
		Help:           "Gangs that hold a reservation: room freeing on the nodes their missing members will use is kept from pods of their priority or lower.",
		StabilityLevel: metrics.ALPHA,
	}, []string{"profile"})
	reservedCapacity = metrics.NewGaugeVec(&metrics.GaugeOpts{
		Subsystem:      metricsSubsystem,
		Name:           "reserved_capacity",
		Help:           "What the reservations hold in all, by resource (cpu in cores, memory in bytes).",
		StabilityLevel: metrics.ALPHA,
	}, []string{"profile", "resource"})
	oldestReservationStart = metrics.NewGaugeVec(&metrics.GaugeOpts{
		Subsystem:      metricsSubsystem,
		Name:           "oldest_reservation_start_seconds",
		Help:           "Start of the oldest reservation held, in seconds since the epoch (0: none).",
		StabilityLevel: metrics.ALPHA,
	}, []string{"profile"})
	reservationsEnded = metrics.NewCounterVec(&metrics.CounterOpts{
		Subsystem:      metricsSubsystem,
		Name:           "reservations_ended_total",
		Help:           "Reservations ended, by reason (quorumreached, reservationtimedout, noroom, podgroupdeleted, preempting, belowminmember, stalled).",
		StabilityLevel: metrics.ALPHA,
	}, []string{"profile", "reason"})
	placementPlanMembers = metrics.NewCounterVec(&metrics.CounterOpts{
		Subsystem:      metricsSubsystem,
		Name:           "placement_plan_members_total",
		Help:           "Gang members and the placement plan, by outcome: placed (reserved on a node the plan still had a place on) or fallback (none of the offered planned nodes fitted; retried without the plan).",
		StabilityLevel: metrics.ALPHA,
	}, []string{"profile", "outcome"})
)

var registerMetrics sync.Once

// RegisterMetrics registers the plugin's metrics into the legacy registry that the scheduler serves
// on /metrics. It is safe to call more than once.
func RegisterMetrics() {
	registerMetrics.Do(func() {
		legacyregistry.MustRegister(timeToQuorum, gangTimeouts, gangRejections, gangsWaiting, trackedGroups,
			preemptionAttempts, preemptionVictimPods, preemptionVictimGangs, preemptionEvictionRetries,
			reservedGangs, reservedCapacity, oldestReservationStart, reservationsEnded, placementPlanMembers)
	})
	status.RegisterMetrics()
}
