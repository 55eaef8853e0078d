package v1

import "k8s.io/utils/ptr"

const (
	// DefaultPermitWaitingTimeSeconds is the default Permit wait of a gang.
	DefaultPermitWaitingTimeSeconds int64 = 60
	// DefaultPodGroupBackoffSeconds is the default back-off of a failed gang.
	DefaultPodGroupBackoffSeconds int64 = 10
	// DefaultReservationAfterSeconds is how long a gang waits for room before it reserves.
	DefaultReservationAfterSeconds int64 = 30
	// DefaultReservationTimeoutSeconds is how long a reservation lasts at most.
	DefaultReservationTimeoutSeconds int64 = 300
	// DefaultReservationMaxGangs is how many gangs may hold a reservation at once.
	DefaultReservationMaxGangs int32 = 1
	// DefaultPlacementPlanCandidateNodes is how many planned nodes a member is offered.
	DefaultPlacementPlanCandidateNodes int32 = 4
	// DefaultDeviceCheckMilliseconds is the DRA allocator's time in one whole-gang check.
	DefaultDeviceCheckMilliseconds int64 = 2000
)

// SetDefaults_CoschedulingArgs fills the unset fields of CoschedulingArgs.
func SetDefaults_CoschedulingArgs(obj *CoschedulingArgs) { //nolint:revive,stylecheck // scheme naming convention
	if obj.PermitWaitingTimeSeconds == nil {
		obj.PermitWaitingTimeSeconds = ptr.To(DefaultPermitWaitingTimeSeconds)
	}
	if obj.PodGroupBackoffSeconds == nil {
		obj.PodGroupBackoffSeconds = ptr.To(DefaultPodGroupBackoffSeconds)
	}
	if obj.DeviceCheckMilliseconds == nil {
		obj.DeviceCheckMilliseconds = ptr.To(DefaultDeviceCheckMilliseconds)
	}
	if obj.Reservation == nil {
		obj.Reservation = &ReservationArgs{}
	}
	r := obj.Reservation
	if r.AfterSeconds == nil {
		r.AfterSeconds = ptr.To(DefaultReservationAfterSeconds)
	}
	if r.TimeoutSeconds == nil {
		r.TimeoutSeconds = ptr.To(DefaultReservationTimeoutSeconds)
	}
	if r.MaxGangs == nil {
		r.MaxGangs = ptr.To(DefaultReservationMaxGangs)
	}
	if obj.PlacementPlan == nil {
		obj.PlacementPlan = &PlacementPlanArgs{}
	}
	if pp := obj.PlacementPlan; pp.Enabled == nil {
		pp.Enabled = ptr.To(true)
	}
	if pp := obj.PlacementPlan; pp.CandidateNodes == nil {
		pp.CandidateNodes = ptr.To(DefaultPlacementPlanCandidateNodes)
	}
}
