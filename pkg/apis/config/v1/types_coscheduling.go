package v1

import metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

// +kubebuilder:object:root=true

// CoschedulingArgs holds the arguments of the Coscheduling plugin.
type CoschedulingArgs struct {
	metav1.TypeMeta `json:",inline"`

	// PermitWaitingTimeSeconds is how long members of a gang wait at Permit for the rest of the quorum
	// when the PodGroup does not set spec.scheduleTimeoutSeconds. Defaults to 60.
	PermitWaitingTimeSeconds *int64 `json:"permitWaitingTimeSeconds,omitempty"`
	// PodGroupBackoffSeconds is how long a gang that failed (timed out or was rejected) stays out of
	// the scheduling cycle before its members are tried again. Defaults to 10.
	PodGroupBackoffSeconds *int64 `json:"podGroupBackoffSeconds,omitempty"`
	// DeviceCheckMilliseconds bounds the time the whole-gang check gives upstream's DRA allocator in
	// one check, every node together (default 2000, at most 10000: the DynamicResources filter's own
	// limit per node). A node not reached in time counts as holding the members; where the
	// DynamicResources filter then refuses them, the gang's next checks and preemptions count that
	// node's devices as taken.
	DeviceCheckMilliseconds *int64 `json:"deviceCheckMilliseconds,omitempty"`
	// DefaultTopologyPolicy applies to gangs whose PodGroup (spec.topologyPolicy) and members
	// (annotations) set no topology policy. Unset: none.
	DefaultTopologyPolicy *TopologyPolicy `json:"defaultTopologyPolicy,omitempty"`
	// Reservation: a gang that waited too long for room holds the room that frees on the nodes its
	// missing members will use, against pods of its priority or lower (which still go where they fit
	// beside it). On by default.
	Reservation *ReservationArgs `json:"reservation,omitempty"`
	// PlacementPlan: once per gang attempt, the members still missing from the quorum are placed on
	// the free capacity the whole-gang check read, and each member's cycle runs the Filter and Score
	// plugins on a few planned nodes instead of on every node. On by default.
	PlacementPlan *PlacementPlanArgs `json:"placementPlan,omitempty"`
}

// PlacementPlanArgs configure the placement plan.
type PlacementPlanArgs struct {
	// Enabled turns the plan on. Off, every member searches every node as a plain pod does.
	// Defaults to true.
	Enabled *bool `json:"enabled,omitempty"`
	// CandidateNodes is how many planned nodes (those the plan still sends members to, tightest
	// first) a member is offered; the profile's Score plugins choose among them. Defaults to 4.
	CandidateNodes *int32 `json:"candidateNodes,omitempty"`
}

// ReservationArgs bound reservations.
type ReservationArgs struct {
	// AfterSeconds is how long a gang finds no room before it reserves. Defaults to 30.
	AfterSeconds *int64 `json:"afterSeconds,omitempty"`
	// TimeoutSeconds is how long a reservation lasts at most; then it ends and the gang waits
	// behind the others. Defaults to 300.
	TimeoutSeconds *int64 `json:"timeoutSeconds,omitempty"`
	// MaxGangs is how many gangs may hold a reservation at once; 0 turns reservation off.
	// Defaults to 1.
	MaxGangs *int32 `json:"maxGangs,omitempty"`
}

// TopologyPolicy is a gang's topology policy.
type TopologyPolicy struct {
	// Required is a node label key: all members in one domain of it, or none placed.
	Required string `json:"required,omitempty"`
	// Preferred are node label keys, narrowest first, tried in order before the required one.
	Preferred []string `json:"preferred,omitempty"`
}
