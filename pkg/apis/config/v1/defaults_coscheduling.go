package v1

import "k8s.io/utils/ptr"

const (
	// DefaultPermitWaitingTimeSeconds is the default Permit wait of a gang.
	DefaultPermitWaitingTimeSeconds int64 = 60
	// DefaultPodGroupBackoffSeconds is the default back-off of a failed gang.
	DefaultPodGroupBackoffSeconds int64 = 10
)

// SetDefaults_CoschedulingArgs fills the unset fields of CoschedulingArgs.
func SetDefaults_CoschedulingArgs(obj *CoschedulingArgs) { //nolint:revive,stylecheck // scheme naming convention
	if obj.PermitWaitingTimeSeconds == nil {
		obj.PermitWaitingTimeSeconds = ptr.To(DefaultPermitWaitingTimeSeconds)
	}
	if obj.PodGroupBackoffSeconds == nil {
		obj.PodGroupBackoffSeconds = ptr.To(DefaultPodGroupBackoffSeconds)
	}
}
