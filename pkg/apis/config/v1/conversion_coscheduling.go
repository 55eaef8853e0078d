package v1

import (
	"slices"

	"k8s.io/apimachinery/pkg/conversion"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"

	"github.com/custom-scheduler/custom-scheduler/pkg/apis/config"
)

func addCoschedulingConversions(s *runtime.Scheme) error {
	if err := s.AddConversionFunc((*CoschedulingArgs)(nil), (*config.CoschedulingArgs)(nil), func(a, b interface{}, scope conversion.Scope) error {
		return Convert_v1_CoschedulingArgs_To_config_CoschedulingArgs(a.(*CoschedulingArgs), b.(*config.CoschedulingArgs), scope)
	}); err != nil {
		return err
	}
	return s.AddConversionFunc((*config.CoschedulingArgs)(nil), (*CoschedulingArgs)(nil), func(a, b interface{}, scope conversion.Scope) error {
		return Convert_config_CoschedulingArgs_To_v1_CoschedulingArgs(a.(*config.CoschedulingArgs), b.(*CoschedulingArgs), scope)
	})
}

// Convert_v1_CoschedulingArgs_To_config_CoschedulingArgs converts defaulted v1 args to the internal type.
func Convert_v1_CoschedulingArgs_To_config_CoschedulingArgs(in *CoschedulingArgs, out *config.CoschedulingArgs, _ conversion.Scope) error { //nolint:revive,stylecheck
	out.PermitWaitingTimeSeconds = ptr.Deref(in.PermitWaitingTimeSeconds, 0)
	out.PodGroupBackoffSeconds = ptr.Deref(in.PodGroupBackoffSeconds, 0)
	out.DeviceCheckMilliseconds = ptr.Deref(in.DeviceCheckMilliseconds, 0)
	out.DefaultTopologyPolicy = config.TopologyPolicy{}
	if in.DefaultTopologyPolicy != nil {
		out.DefaultTopologyPolicy = config.TopologyPolicy{Required: in.DefaultTopologyPolicy.Required, Preferred: slices.Clone(in.DefaultTopologyPolicy.Preferred)}
	}
	out.Reservation = config.ReservationArgs{}
	if r := in.Reservation; r != nil {
		out.Reservation = config.ReservationArgs{AfterSeconds: ptr.Deref(r.AfterSeconds, 0), TimeoutSeconds: ptr.Deref(r.TimeoutSeconds, 0), MaxGangs: ptr.Deref(r.MaxGangs, 0)}
	}
	out.PlacementPlan = config.PlacementPlanArgs{}
	if pp := in.PlacementPlan; pp != nil {
		out.PlacementPlan = config.PlacementPlanArgs{Enabled: ptr.Deref(pp.Enabled, false), CandidateNodes: ptr.Deref(pp.CandidateNodes, 0)}
	}
	return nil
}

// Convert_config_CoschedulingArgs_To_v1_CoschedulingArgs converts internal args to v1.
func Convert_config_CoschedulingArgs_To_v1_CoschedulingArgs(in *config.CoschedulingArgs, out *CoschedulingArgs, _ conversion.Scope) error { //nolint:revive,stylecheck
	out.PermitWaitingTimeSeconds = ptr.To(in.PermitWaitingTimeSeconds)
	out.PodGroupBackoffSeconds = ptr.To(in.PodGroupBackoffSeconds)
	out.DeviceCheckMilliseconds = ptr.To(in.DeviceCheckMilliseconds)
	out.DefaultTopologyPolicy = nil
	if p := in.DefaultTopologyPolicy; p.Required != "" || len(p.Preferred) > 0 {
		out.DefaultTopologyPolicy = &TopologyPolicy{Required: p.Required, Preferred: slices.Clone(p.Preferred)}
	}
	r := in.Reservation
	out.Reservation = &ReservationArgs{AfterSeconds: ptr.To(r.AfterSeconds), TimeoutSeconds: ptr.To(r.TimeoutSeconds), MaxGangs: ptr.To(r.MaxGangs)}
	out.PlacementPlan = &PlacementPlanArgs{Enabled: ptr.To(in.PlacementPlan.Enabled), CandidateNodes: ptr.To(in.PlacementPlan.CandidateNodes)}
	return nil
}
