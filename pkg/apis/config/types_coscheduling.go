package config

import metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

// +kubebuilder:object:root=true

// CoschedulingArgs holds the arguments of the Coscheduling plugin.
type CoschedulingArgs struct {
	metav1.TypeMeta

	// PermitWaitingTimeSeconds is how long members of a gang wait at Permit for the rest of the quorum
	// when the PodGroup does not set spec.scheduleTimeoutSeconds.
	PermitWaitingTimeSeconds int64
	// PodGroupBackoffSeconds is how long a gang that failed (timed out or was rejected) stays out of
	// the scheduling cycle before its members are tried again.
	PodGroupBackoffSeconds int64
	// DefaultTopologyPolicy applies to gangs whose PodGroup and members set no topology policy.
	DefaultTopologyPolicy TopologyPolicy
	// Reservation bounds the room a gang that waited too long holds against smaller pods.
	Reservation ReservationArgs
	// PlacementPlan narrows each member's cycle to the nodes its attempt's plan has room on.
	PlacementPlan PlacementPlanArgs
	// DeviceCheckMilliseconds bounds the time the whole-gang check gives upstream's DRA allocator in
	// one check, every node together (0: 2000). A node not reached in time counts as holding the members;
	// where the DynamicResources filter then refuses them, the gang's next checks and preemptions
	// count that node's devices as taken.
	DeviceCheckMilliseconds int64
}

// PlacementPlanArgs: when Enabled, an attempt's missing members are placed once, on the capacity the
// whole-gang check read, and each member's cycle is offered the first CandidateNodes planned nodes that
// still have room instead of every node.
type PlacementPlanArgs struct {
	Enabled        bool
	CandidateNodes int32
}

// ReservationArgs bound reservations: a gang that found no room for AfterSeconds holds the room that
// frees on the nodes it will use, for at most TimeoutSeconds; at most MaxGangs gangs at once (0: off).
type ReservationArgs struct {
	AfterSeconds   int64
	TimeoutSeconds int64
	MaxGangs       int32
}

// TopologyPolicy is a gang's topology policy: a required node label key and preferred ones,
// narrowest first.
type TopologyPolicy struct {
	Required  string
	Preferred []string
}
