package scheme_test

import (
	"cmp"
	"strings"
	"testing"

	"k8s.io/klog/v2/ktesting"
	"k8s.io/kubernetes/cmd/kube-scheduler/app/options"

	"github.com/custom-scheduler/custom-scheduler/pkg/apis/config"
)

// TestCoschedulingArgsDecoding decodes CoschedulingArgs the way the scheduler does: strictly,
// defaulted, converted to the internal type.
func TestCoschedulingArgsDecoding(t *testing.T) {
	const header = `apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
profiles:
  - schedulerName: custom-scheduler
    plugins:
      multiPoint:
        enabled:
          - name: Coscheduling
        disabled:
          - name: PrioritySort
    pluginConfig:
      - name: Coscheduling
        args:
`
	onByDefault := config.ReservationArgs{AfterSeconds: 30, TimeoutSeconds: 300, MaxGangs: 1}
	planOn := config.PlacementPlanArgs{Enabled: true, CandidateNodes: 4}
	tests := map[string]struct {
		args    string
		wantErr string
		want    config.CoschedulingArgs
	}{
		"defaults": {args: "          {}\n", want: config.CoschedulingArgs{PermitWaitingTimeSeconds: 60, PodGroupBackoffSeconds: 10, Reservation: onByDefault, PlacementPlan: planOn}},
		"the plan turned off": {args: "          placementPlan: {enabled: false}\n",
			want: config.CoschedulingArgs{PermitWaitingTimeSeconds: 60, PodGroupBackoffSeconds: 10, Reservation: onByDefault, PlacementPlan: config.PlacementPlanArgs{CandidateNodes: 4}}},
		"one candidate node": {args: "          placementPlan: {candidateNodes: 1}\n",
			want: config.CoschedulingArgs{PermitWaitingTimeSeconds: 60, PodGroupBackoffSeconds: 10, Reservation: onByDefault, PlacementPlan: config.PlacementPlanArgs{Enabled: true, CandidateNodes: 1}}},
		"unknown field in the plan": {args: "          placementPlan: {nodes: 2}\n", wantErr: `unknown field "placementPlan.nodes"`},
		"a default topology policy": {
			args: "          defaultTopologyPolicy: {required: topology.kubernetes.io/zone, preferred: [example.com/rack]}\n",
			want: config.CoschedulingArgs{PermitWaitingTimeSeconds: 60, PodGroupBackoffSeconds: 10, Reservation: onByDefault, PlacementPlan: planOn,
				DefaultTopologyPolicy: config.TopologyPolicy{Required: "topology.kubernetes.io/zone", Preferred: []string{"example.com/rack"}}},
		},
		"reservation turned off, the rest defaulted": {args: "          reservation: {maxGangs: 0}\n",
			want: config.CoschedulingArgs{PermitWaitingTimeSeconds: 60, PodGroupBackoffSeconds: 10, Reservation: config.ReservationArgs{AfterSeconds: 30, TimeoutSeconds: 300}, PlacementPlan: planOn}},
		"reservation bounds": {args: "          reservation: {afterSeconds: 5, timeoutSeconds: 60, maxGangs: 2}\n",
			want: config.CoschedulingArgs{PermitWaitingTimeSeconds: 60, PodGroupBackoffSeconds: 10, Reservation: config.ReservationArgs{AfterSeconds: 5, TimeoutSeconds: 60, MaxGangs: 2}, PlacementPlan: planOn}},
		"a device check of 50 ms": {args: "          deviceCheckMilliseconds: 50\n",
			want: config.CoschedulingArgs{PermitWaitingTimeSeconds: 60, PodGroupBackoffSeconds: 10, Reservation: onByDefault, PlacementPlan: planOn, DeviceCheckMilliseconds: 50}},
		"unknown field in the reservation": {args: "          reservation: {after: 5}\n", wantErr: `unknown field "reservation.after"`},
		"unknown field in the policy":      {args: "          defaultTopologyPolicy: {require: x}\n", wantErr: `unknown field "defaultTopologyPolicy.require"`},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			logger, _ := ktesting.NewTestContext(t)
			cfg, err := options.LoadConfigFromFile(logger, writeConfig(t, header+tc.args))
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error %v, want one containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			for _, pc := range cfg.Profiles[0].PluginConfig {
				if pc.Name != "Coscheduling" {
					continue
				}
				got, ok := pc.Args.(*config.CoschedulingArgs)
				if !ok {
					t.Fatalf("Coscheduling args decoded as %T", pc.Args)
				}
				if got.PermitWaitingTimeSeconds != tc.want.PermitWaitingTimeSeconds || got.PodGroupBackoffSeconds != tc.want.PodGroupBackoffSeconds ||
					got.DefaultTopologyPolicy.Required != tc.want.DefaultTopologyPolicy.Required ||
					strings.Join(got.DefaultTopologyPolicy.Preferred, ",") != strings.Join(tc.want.DefaultTopologyPolicy.Preferred, ",") ||
					got.Reservation != tc.want.Reservation || got.PlacementPlan != tc.want.PlacementPlan ||
					got.DeviceCheckMilliseconds != cmp.Or(tc.want.DeviceCheckMilliseconds, 2000) {
					t.Errorf("decoded %+v, want %+v", got, tc.want)
				}
				return
			}
			t.Fatal("no Coscheduling args in the decoded profile")
		})
	}
}
