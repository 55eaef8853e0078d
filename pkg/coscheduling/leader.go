package coscheduling

import (
	"context"
	"time"

	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	"github.com/custom-scheduler/custom-scheduler/pkg/coscheduling/leader"
	"github.com/custom-scheduler/custom-scheduler/pkg/coscheduling/podgroup"
)

// Leadership. The PodGroup status updater must run in the replica that schedules, and only there,
// and it must start when that replica starts leading, so that a new leader brings every PodGroup's
// status up to date after a failover even if it has no gang to schedule. The scheduler does not tell
// plugins when it starts leading (see package leader for what it is read from); a scheduling cycle
// (which only the leader runs) is taken as proof as well.

// leaderPollInterval is how often a replica that does not lead checks whether it leads now.
const leaderPollInterval = time.Second

// awaitLeadership starts the background work once this process leads.
func (pl *Coscheduling) awaitLeadership(ctx context.Context) {
	if leader.Await(ctx, leaderPollInterval, pl.backgroundStarted) {
		klog.FromContext(ctx).V(2).Info("This scheduler leads: PodGroup status updates start", "profile", pl.profile)
		pl.startBackground()
	}
}

// startBackground starts the status updater (once).
func (pl *Coscheduling) startBackground() {
	if pl.status == nil {
		return
	}
	pl.startStatus.Do(func() {
		pl.status.Started.Store(true)
		go pl.status.Run(pl.ctx)
		go pl.adoptReservations(pl.ctx)
		if pl.lws != nil {
			go pl.lws.Run(pl.ctx)
		}
	})
}

func (pl *Coscheduling) backgroundStarted() bool {
	return pl.status != nil && pl.status.Started.Load()
}

// adoptReservations takes over, when this process starts leading, the reservations a previous leader
// left (see adoptReservationLocked), so that their timers run from now on whatever their gangs do: a
// gang whose members never reach PostFilter again (below minMember, held back) still has its
// reservation ended by its timeout, or as below minMember or stalled, and its nominations cleared.
func (pl *Coscheduling) adoptReservations(ctx context.Context) {
	// A process may lead before its pod informer has listed the pods: a reservation adopted from an
	// empty store would find no member nominated and be left alone (no timer would ever end it).
	if pl.podsSynced != nil && !cache.WaitForCacheSync(ctx.Done(), pl.podsSynced) {
		return
	}
	for _, pg := range pl.podGroups.List() {
		c := podgroup.HeldReservation(pg)
		if c == nil {
			continue
		}
		// The holder of its job's reservation (see gang.JobToReserve): the other groups' nominations
		// are read and held with its own.
		_, job := pl.jobToReserve(nil, pg)
		groups := job.HeldBy(podgroup.Key(pg.Namespace, pg.Name))
		members := pl.members.InGroupAnd(pg.Namespace, pg.Name, groups)
		pl.mu.Lock()
		d := pl.adoptReservationLocked(pl.gangForLocked(pg), c, members, groups, pl.clock.Now())
		pl.mu.Unlock()
		pl.finishReservation(ctx, pg.Namespace, pg.Name, pg, d, nil)
	}
}
