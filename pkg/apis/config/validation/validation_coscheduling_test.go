package validation

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/custom-scheduler/custom-scheduler/pkg/apis/config"
)

func TestValidateCoschedulingArgs(t *testing.T) {
	cases := map[string]struct {
		args config.CoschedulingArgs
		want []string
	}{
		"defaults":              {args: config.CoschedulingArgs{PermitWaitingTimeSeconds: 60, PodGroupBackoffSeconds: 10}},
		"no back-off":           {args: config.CoschedulingArgs{PermitWaitingTimeSeconds: 1, PodGroupBackoffSeconds: 0}},
		"the framework's cap":   {args: config.CoschedulingArgs{PermitWaitingTimeSeconds: 900}},
		"zero wait":             {args: config.CoschedulingArgs{PermitWaitingTimeSeconds: 0}, want: []string{"args.permitWaitingTimeSeconds"}},
		"wait beyond the cap":   {args: config.CoschedulingArgs{PermitWaitingTimeSeconds: 901}, want: []string{"args.permitWaitingTimeSeconds"}},
		"negative back-off":     {args: config.CoschedulingArgs{PermitWaitingTimeSeconds: 60, PodGroupBackoffSeconds: -1}, want: []string{"args.podGroupBackoffSeconds"}},
		"both fields are named": {args: config.CoschedulingArgs{PermitWaitingTimeSeconds: -5, PodGroupBackoffSeconds: -1}, want: []string{"args.permitWaitingTimeSeconds", "args.podGroupBackoffSeconds"}},
		"a default topology policy": {args: config.CoschedulingArgs{PermitWaitingTimeSeconds: 60,
			DefaultTopologyPolicy: config.TopologyPolicy{Required: "topology.kubernetes.io/zone", Preferred: []string{"example.com/rack"}}}},
		"topology keys that are not label keys": {args: config.CoschedulingArgs{PermitWaitingTimeSeconds: 60,
			DefaultTopologyPolicy: config.TopologyPolicy{Required: "not a key", Preferred: []string{"example.com/rack", "-bad"}}},
			want: []string{"args.defaultTopologyPolicy.required", "args.defaultTopologyPolicy.preferred[1]"}},
		"reservation on":  {args: config.CoschedulingArgs{PermitWaitingTimeSeconds: 60, Reservation: config.ReservationArgs{AfterSeconds: 30, TimeoutSeconds: 300, MaxGangs: 1}}},
		"reservation off": {args: config.CoschedulingArgs{PermitWaitingTimeSeconds: 60, Reservation: config.ReservationArgs{MaxGangs: 0}}},
		"reservation at the first failure": {args: config.CoschedulingArgs{PermitWaitingTimeSeconds: 60,
			Reservation: config.ReservationArgs{AfterSeconds: 0, TimeoutSeconds: 1, MaxGangs: 3}}},
		"bad reservation bounds": {args: config.CoschedulingArgs{PermitWaitingTimeSeconds: 60, Reservation: config.ReservationArgs{AfterSeconds: -1, TimeoutSeconds: 0, MaxGangs: 1}},
			want: []string{"args.reservation.afterSeconds", "args.reservation.timeoutSeconds"}},
		"the plan with no candidate node": {args: config.CoschedulingArgs{PermitWaitingTimeSeconds: 60, PlacementPlan: config.PlacementPlanArgs{Enabled: true}},
			want: []string{"args.placementPlan.candidateNodes"}},
		"the plan off needs no candidates":       {args: config.CoschedulingArgs{PermitWaitingTimeSeconds: 60, PlacementPlan: config.PlacementPlanArgs{}}},
		"a device check of 50 ms":                {args: config.CoschedulingArgs{PermitWaitingTimeSeconds: 60, DeviceCheckMilliseconds: 50}},
		"the device check at the filter's limit": {args: config.CoschedulingArgs{PermitWaitingTimeSeconds: 60, DeviceCheckMilliseconds: 10_000}},
		"a negative device check": {args: config.CoschedulingArgs{PermitWaitingTimeSeconds: 60, DeviceCheckMilliseconds: -1},
			want: []string{"args.deviceCheckMilliseconds"}},
		"a device check past the filter's limit": {args: config.CoschedulingArgs{PermitWaitingTimeSeconds: 60, DeviceCheckMilliseconds: 10_001},
			want: []string{"args.deviceCheckMilliseconds"}},
		"negative maxGangs": {args: config.CoschedulingArgs{PermitWaitingTimeSeconds: 60, Reservation: config.ReservationArgs{TimeoutSeconds: 10, MaxGangs: -1}},
			want: []string{"args.reservation.maxGangs"}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			err := ValidateCoschedulingArgs(field.NewPath("args"), &tc.args)
			if len(tc.want) == 0 {
				if err != nil {
					t.Fatalf("unexpected error: %v", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("no error, want one naming %v", tc.want)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not name %s", err, w)
				}
			}
		})
	}
}
