package metrics

import (
	"testing"
	"time"

	"k8s.io/component-base/metrics/testutil"
)

func TestReservationSeries(t *testing.T) {
	noErr := func(name string, v float64, err error) {
		t.Helper()
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
	}
	Register()
	InitReservations("p", []string{"QuorumReached", "NoRoom"})
	for _, reason := range []string{"quorumreached", "noroom"} {
		v, err := testutil.GetCounterMetricValue(ReservationsEnded.WithLabelValues("p", reason))
		noErr(reason, v, err)
		if v != 0 {
			t.Errorf("reservations_ended_total{%s} = %v at the start, want 0", reason, v)
		}
	}
	since := time.Unix(1700000000, 0)
	Reservations("p", 2, 2500, 1<<30, since)
	ReservationEnded("p", "NoRoom")
	for _, c := range []struct {
		name string
		get  func() (float64, error)
		want float64
	}{
		{"reserved gangs", func() (float64, error) { return testutil.GetGaugeMetricValue(ReservedGangs.WithLabelValues("p")) }, 2},
		{"reserved CPU (cores)", func() (float64, error) {
			return testutil.GetGaugeMetricValue(ReservedCapacity.WithLabelValues("p", "cpu"))
		}, 2.5},
		{"reserved memory", func() (float64, error) {
			return testutil.GetGaugeMetricValue(ReservedCapacity.WithLabelValues("p", "memory"))
		}, 1 << 30},
		{"oldest start", func() (float64, error) {
			return testutil.GetGaugeMetricValue(OldestReservationStart.WithLabelValues("p"))
		}, 1700000000},
		{"ended, no room (lower case)", func() (float64, error) {
			return testutil.GetCounterMetricValue(ReservationsEnded.WithLabelValues("p", "noroom"))
		}, 1},
	} {
		v, err := c.get()
		noErr(c.name, v, err)
		if v != c.want {
			t.Errorf("%s = %v, want %v", c.name, v, c.want)
		}
	}
	Reservations("p", 0, 0, 0, time.Time{})
	if v, err := testutil.GetGaugeMetricValue(OldestReservationStart.WithLabelValues("p")); err != nil || v != 0 {
		t.Errorf("oldest start with none held = %v (%v), want 0", v, err)
	}
}
