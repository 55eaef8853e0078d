package coscheduling

import (
	"context"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/klog/v2"

	"github.com/custom-scheduler/custom-scheduler/pkg/coscheduling/leader"
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
	err := wait.PollUntilContextCancel(ctx, leaderPollInterval, true, func(context.Context) (bool, error) {
		return pl.backgroundStarted() || leader.Leads(), nil
	})
	if err == nil {
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
	})
}

func (pl *Coscheduling) backgroundStarted() bool {
	return pl.status != nil && pl.status.Started.Load()
}
