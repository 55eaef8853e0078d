// Package metrics holds the Coscheduling plugin's metrics (custom_scheduler_coscheduling_*). Each is
// updated once per gang event (an attempt reaching its quorum, failing or waiting), never per node or
// per waiting pod.
package metrics

import (
	"sync"

	k8smetrics "k8s.io/component-base/metrics"
	"k8s.io/component-base/metrics/legacyregistry"

	"github.com/custom-scheduler/custom-scheduler/pkg/coscheduling/status"
)

const metricsSubsystem = "custom_scheduler_coscheduling"

// Rejection reasons, the bounded values of the rejections counter's reason label.
const (
	ReasonMemberUnschedulable = "member_unschedulable"
	ReasonTimeout             = "timeout"
	ReasonInfeasible          = "infeasible"
	ReasonMemberRejected      = "member_rejected"
)

// LeftReason is the reason of an attempt that failed as a member left it: the attempt timed out, or a
// member was rejected.
func LeftReason(timedOut bool) string {
	if timedOut {
		return ReasonTimeout
	}
	return ReasonMemberRejected
}

// The plugin's metrics, each with its label names.
var (
	TimeToQuorum = k8smetrics.NewHistogramVec(&k8smetrics.HistogramOpts{
		Subsystem:      metricsSubsystem,
		Name:           "time_to_quorum_seconds",
		Help:           "Time from a gang attempt's first reserved member to the member that completed its quorum (minMember members reserved or bound).",
		Buckets:        k8smetrics.ExponentialBuckets(0.01, 2, 16),
		StabilityLevel: k8smetrics.ALPHA,
	}, []string{"profile"})
	GangTimeouts = k8smetrics.NewCounterVec(&k8smetrics.CounterOpts{
		Subsystem:      metricsSubsystem,
		Name:           "gang_timeouts_total",
		Help:           "Gang attempts whose reserved members waited at Permit longer than the group's schedule timeout and were all rejected.",
		StabilityLevel: k8smetrics.ALPHA,
	}, []string{"profile"})
	GangRejections = k8smetrics.NewCounterVec(&k8smetrics.CounterOpts{
		Subsystem:      metricsSubsystem,
		Name:           "gang_rejections_total",
		Help:           "Gang attempts rejected as a whole, by reason (member_unschedulable, member_rejected, timeout, infeasible).",
		StabilityLevel: k8smetrics.ALPHA,
	}, []string{"profile", "reason"})
	GangsWaiting = k8smetrics.NewGaugeVec(&k8smetrics.GaugeOpts{
		Subsystem:      metricsSubsystem,
		Name:           "gangs_waiting",
		Help:           "Pod groups with at least one member waiting at Permit for the rest of the quorum.",
		StabilityLevel: k8smetrics.ALPHA,
	}, []string{"profile"})
	TrackedGroups = k8smetrics.NewGaugeVec(&k8smetrics.GaugeOpts{
		Subsystem:      metricsSubsystem,
		Name:           "tracked_pod_groups",
		Help:           "Pod groups whose state the plugin holds in memory: groups with live pods, members reserved or bound, or a back-off. It follows the groups that exist, not every group ever seen.",
		StabilityLevel: k8smetrics.ALPHA,
	}, []string{"profile"})
	PreemptionAttempts = k8smetrics.NewCounterVec(&k8smetrics.CounterOpts{
		Subsystem:      metricsSubsystem,
		Name:           "preemption_attempts_total",
		Help:           "Preemption attempts by the plugin's PostFilter, by preemptor (gang: a gang that does not fit; pod: any other pod) and result (preempted, unschedulable, not_helpful, not_eligible, waiting, error).",
		StabilityLevel: k8smetrics.ALPHA,
	}, []string{"profile", "preemptor", "result"})
	PreemptionVictimPods = k8smetrics.NewCounterVec(&k8smetrics.CounterOpts{
		Subsystem:      metricsSubsystem,
		Name:           "preemption_victim_pods_total",
		Help:           "Pods preempted, by preemptor (gang, pod).",
		StabilityLevel: k8smetrics.ALPHA,
	}, []string{"profile", "preemptor"})
	PreemptionVictimGangs = k8smetrics.NewCounterVec(&k8smetrics.CounterOpts{
		Subsystem:      metricsSubsystem,
		Name:           "preemption_victim_gangs_total",
		Help:           "Gangs preempted (each whole), by preemptor (gang, pod).",
		StabilityLevel: k8smetrics.ALPHA,
	}, []string{"profile", "preemptor"})
	PreemptionEvictionRetries = k8smetrics.NewCounterVec(&k8smetrics.CounterOpts{
		Subsystem:      metricsSubsystem,
		Name:           "preemption_eviction_retries_total",
		Help:           "Retried evictions of gang members whose first eviction failed while other members of their gang were leaving (a victim gang is evicted whole).",
		StabilityLevel: k8smetrics.ALPHA,
	}, []string{"profile"})
	ReservedGangs = k8smetrics.NewGaugeVec(&k8smetrics.GaugeOpts{
		Subsystem:      metricsSubsystem,
		Name:           "reserved_gangs",
		Help:           "Gangs that hold a reservation: room freeing on the nodes their missing members will use is kept from pods of their priority or lower.",
		StabilityLevel: k8smetrics.ALPHA,
	}, []string{"profile"})
	ReservedCapacity = k8smetrics.NewGaugeVec(&k8smetrics.GaugeOpts{
		Subsystem:      metricsSubsystem,
		Name:           "reserved_capacity",
		Help:           "What the reservations hold in all, by resource (cpu in cores, memory in bytes).",
		StabilityLevel: k8smetrics.ALPHA,
	}, []string{"profile", "resource"})
	OldestReservationStart = k8smetrics.NewGaugeVec(&k8smetrics.GaugeOpts{
		Subsystem:      metricsSubsystem,
		Name:           "oldest_reservation_start_seconds",
		Help:           "Start of the oldest reservation held, in seconds since the epoch (0: none).",
		StabilityLevel: k8smetrics.ALPHA,
	}, []string{"profile"})
	ReservationsEnded = k8smetrics.NewCounterVec(&k8smetrics.CounterOpts{
		Subsystem:      metricsSubsystem,
		Name:           "reservations_ended_total",
		Help:           "Reservations ended, by reason (quorumreached, reservationtimedout, noroom, podgroupdeleted, preempting, belowminmember, stalled).",
		StabilityLevel: k8smetrics.ALPHA,
	}, []string{"profile", "reason"})
	PlacementPlanMembers = k8smetrics.NewCounterVec(&k8smetrics.CounterOpts{
		Subsystem:      metricsSubsystem,
		Name:           "placement_plan_members_total",
		Help:           "Gang members and the placement plan, by outcome: placed (reserved on a node the plan still had a place on) or fallback (none of the offered planned nodes fitted; retried without the plan).",
		StabilityLevel: k8smetrics.ALPHA,
	}, []string{"profile", "outcome"})
)

var registered sync.Once

// Register registers the plugin's metrics into the legacy registry that the scheduler serves
// on /k8smetrics. It is safe to call more than once.
func Register() {
	registered.Do(func() {
		legacyregistry.MustRegister(TimeToQuorum, GangTimeouts, GangRejections, GangsWaiting, TrackedGroups,
			PreemptionAttempts, PreemptionVictimPods, PreemptionVictimGangs, PreemptionEvictionRetries,
			ReservedGangs, ReservedCapacity, OldestReservationStart, ReservationsEnded, PlacementPlanMembers)
	})
	status.RegisterMetrics()
}
