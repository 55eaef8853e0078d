package podgroup

import (
	"testing"

	"github.com/custom-scheduler/custom-scheduler/pkg/apis/scheduling/v1alpha1"
)

func TestPhase(t *testing.T) {
	cases := []struct {
		name string
		c    Counts
		want v1alpha1.PodGroupPhase
	}{
		{"no members", Counts{}, v1alpha1.PodGroupPending},
		{"too few", Counts{Live: 2}, v1alpha1.PodGroupPending},
		{"enough, none placed", Counts{Live: 3}, v1alpha1.PodGroupPreScheduling},
		{"one bound", Counts{Live: 3, Scheduled: 1}, v1alpha1.PodGroupScheduling},
		{"waiting at Permit", Counts{Live: 3, Waiting: true}, v1alpha1.PodGroupScheduling},
		{"bound, not running", Counts{Live: 3, Scheduled: 3}, v1alpha1.PodGroupScheduled},
		{"running", Counts{Live: 3, Scheduled: 3, Running: 3}, v1alpha1.PodGroupRunning},
		{"running with the run's succeeded", Counts{Live: 1, Scheduled: 1, Running: 1, Credit: 2}, v1alpha1.PodGroupRunning},
		{"succeeded", Counts{Credit: 3}, v1alpha1.PodGroupFinished},
		{"failed", Counts{Live: 1, Scheduled: 1, Running: 1, Failed: 2}, v1alpha1.PodGroupFailed},
	}
	for _, tc := range cases {
		if got := Phase(tc.c, 3); got != tc.want {
			t.Errorf("%s: Phase(%+v, 3) = %s, want %s", tc.name, tc.c, got, tc.want)
		}
	}
}
