package coscheduling

import (
	"testing"
	"time"

	"github.com/custom-scheduler/custom-scheduler/pkg/apis/config"
)

// TestReservationQueue: which other gangs count as holding a reservation, and which go before a
// gang: a gang that waited long enough, holds none and is not known never to fit, of higher priority
// or of the same and waiting longer.
func TestReservationQueue(t *testing.T) {
	args := defaultArgs()
	args.Reservation = config.ReservationArgs{AfterSeconds: 30, TimeoutSeconds: 300, MaxGangs: 1}
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	now := t0.Add(2 * time.Minute)
	self := reservation{waitingSince: t0.Add(time.Minute), prio: 10}
	cases := []struct {
		name       string
		others     []reservation
		wantOthers int
		wantAhead  bool
	}{
		{name: "alone"},
		{name: "one holding a reservation", others: []reservation{{active: true, prio: 0}}, wantOthers: 1},
		{name: "one that waited longer", others: []reservation{{waitingSince: t0, prio: 10}}, wantAhead: true},
		{name: "one that came later", others: []reservation{{waitingSince: t0.Add(90 * time.Second), prio: 10}}},
		{name: "one of higher priority that came later", others: []reservation{{waitingSince: t0.Add(90 * time.Second), prio: 20}}, wantAhead: true},
		{name: "one of lower priority that waited longer", others: []reservation{{waitingSince: t0, prio: 5}}},
		{name: "one that never fits goes before no one", others: []reservation{{waitingSince: t0, prio: 10, unfit: true}}},
		{name: "one that has not waited long enough", others: []reservation{{waitingSince: now.Add(-10 * time.Second), prio: 20}}},
		{name: "one not waiting", others: []reservation{{prio: 20}}},
		{name: "several", others: []reservation{{active: true}, {active: true}, {waitingSince: t0, prio: 10}}, wantOthers: 2, wantAhead: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			env := newTestEnv(t, args, nil, nil)
			g := newGang("ns", "self")
			g.reserve = self
			env.pl.gangs[g.key()] = g
			for i, r := range tc.others {
				o := newGang("ns", string(rune('a'+i)))
				o.reserve = r
				env.pl.gangs[o.key()] = o
			}
			env.pl.mu.Lock()
			others, ahead := env.pl.reservationQueueLocked(g, now)
			env.pl.mu.Unlock()
			if others != tc.wantOthers || ahead != tc.wantAhead {
				t.Errorf("reservationQueueLocked = %d, %v, want %d, %v", others, ahead, tc.wantOthers, tc.wantAhead)
			}
		})
	}
}
