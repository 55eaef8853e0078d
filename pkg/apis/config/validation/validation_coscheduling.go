// Package validation validates custom-scheduler's plugin args. Each plugin calls its validator from
// New, so bad args stop the scheduler at startup with the plugin's and the field's name.
package validation

import (
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/custom-scheduler/custom-scheduler/pkg/apis/config"
)

// maxPermitWaitingTimeSeconds is the framework's own cap on a Permit wait (15 minutes).
const maxPermitWaitingTimeSeconds = 15 * 60

// maxDeviceCheckMilliseconds is the DynamicResources filter's own time limit per node (10 s).
const maxDeviceCheckMilliseconds = 10_000

// ValidateCoschedulingArgs validates CoschedulingArgs.
func ValidateCoschedulingArgs(path *field.Path, args *config.CoschedulingArgs) error {
	var errs field.ErrorList
	if args.PermitWaitingTimeSeconds <= 0 || args.PermitWaitingTimeSeconds > maxPermitWaitingTimeSeconds {
		errs = append(errs, field.Invalid(path.Child("permitWaitingTimeSeconds"), args.PermitWaitingTimeSeconds,
			"must be between 1 and 900 (the framework caps a Permit wait at 15 minutes)"))
	}
	if args.PodGroupBackoffSeconds < 0 {
		errs = append(errs, field.Invalid(path.Child("podGroupBackoffSeconds"), args.PodGroupBackoffSeconds, "must not be negative"))
	}
	if args.DeviceCheckMilliseconds < 0 || args.DeviceCheckMilliseconds > maxDeviceCheckMilliseconds {
		errs = append(errs, field.Invalid(path.Child("deviceCheckMilliseconds"), args.DeviceCheckMilliseconds,
			"must be between 0 and 10000 (0 or unset: 2000; at most the DynamicResources filter's own limit per node)"))
	}
	rp := path.Child("reservation")
	if r := args.Reservation; r.AfterSeconds < 0 {
		errs = append(errs, field.Invalid(rp.Child("afterSeconds"), r.AfterSeconds, "must not be negative"))
	}
	if r := args.Reservation; r.MaxGangs > 0 && r.TimeoutSeconds <= 0 {
		errs = append(errs, field.Invalid(rp.Child("timeoutSeconds"), r.TimeoutSeconds, "must be positive while reservation is on (maxGangs > 0)"))
	}
	if r := args.Reservation; r.MaxGangs < 0 {
		errs = append(errs, field.Invalid(rp.Child("maxGangs"), r.MaxGangs, "must not be negative (0 turns reservation off)"))
	}
	if pp := args.PlacementPlan; pp.Enabled && pp.CandidateNodes < 1 {
		errs = append(errs, field.Invalid(path.Child("placementPlan", "candidateNodes"), pp.CandidateNodes, "must be at least 1 while the plan is enabled"))
	}
	tp := path.Child("defaultTopologyPolicy")
	if r := args.DefaultTopologyPolicy.Required; r != "" {
		errs = append(errs, validateLabelKey(tp.Child("required"), r)...)
	}
	for i, k := range args.DefaultTopologyPolicy.Preferred {
		errs = append(errs, validateLabelKey(tp.Child("preferred").Index(i), k)...)
	}
	return errs.ToAggregate()
}

// validateLabelKey checks that key can name a node label.
func validateLabelKey(path *field.Path, key string) field.ErrorList {
	var errs field.ErrorList
	for _, msg := range validation.IsQualifiedName(key) {
		errs = append(errs, field.Invalid(path, key, "must be a node label key: "+msg))
	}
	return errs
}
