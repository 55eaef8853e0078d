package metrics

import (
	"strings"
	"time"
)

// Reservations sets the reservation gauges of profile: how many gangs hold a reservation, the CPU
// (milli) and memory (bytes) they hold, and the start of the oldest (zero: none, and the gauge is 0).
func Reservations(profile string, gangs int, milliCPU, memory int64, oldest time.Time) {
	ReservedGangs.WithLabelValues(profile).Set(float64(gangs))
	ReservedCapacity.WithLabelValues(profile, "cpu").Set(float64(milliCPU) / 1000)
	ReservedCapacity.WithLabelValues(profile, "memory").Set(float64(memory))
	start := 0.0
	if !oldest.IsZero() {
		start = float64(oldest.Unix())
	}
	OldestReservationStart.WithLabelValues(profile).Set(start)
}

// ReservationEnded counts a reservation of profile that ended for reason (a reservation.Reason, the
// label in lower case).
func ReservationEnded(profile, reason string) {
	ReservationsEnded.WithLabelValues(profile, endLabel(reason)).Inc()
}

// endLabel is reservations_ended_total's reason label: the reason in lower case.
func endLabel(reason string) string { return strings.ToLower(reason) }

// InitReservations makes profile's reservation series exist from the start, at zero (dashboards and
// alerts read them before any reservation was made): the gauges, and the ends for every reason.
func InitReservations(profile string, reasons []string) {
	Reservations(profile, 0, 0, 0, time.Time{})
	for _, reason := range reasons {
		ReservationsEnded.WithLabelValues(profile, endLabel(reason)).Add(0)
	}
}
