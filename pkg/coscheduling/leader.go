package coscheduling

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/component-base/configz"
	"k8s.io/component-base/metrics/legacyregistry"
	"k8s.io/klog/v2"
)

// Leadership. The PodGroup status updater must run in the replica that schedules, and only there,
// and it must start when that replica starts leading, so that a new leader brings every PodGroup's
// status up to date after a failover even if it has no gang to schedule. The scheduler does not tell
// plugins when it starts leading, so the plugin reads the two things the scheduler publishes in its
// own process: the component configuration on configz (is leader election on) and the leader
// elector's gauge leader_election_master_status, which is 1 from the moment this process holds the
// lease (the scheduler runs one elector, named "kube-scheduler" whatever the lease's name). A scheduling cycle (which only the leader runs) is taken
// as proof as well.

// leaderPollInterval is how often a replica that does not lead checks whether it leads now.
const leaderPollInterval = time.Second

// awaitLeadership starts the background work once this process leads.
func (pl *Coscheduling) awaitLeadership(ctx context.Context) {
	err := wait.PollUntilContextCancel(ctx, leaderPollInterval, true, func(context.Context) (bool, error) {
		return pl.backgroundStarted() || schedulerLeads(), nil
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
	})
}

func (pl *Coscheduling) backgroundStarted() bool {
	return pl.status != nil && pl.status.Started.Load()
}

// schedulerLeads reports whether the scheduler in this process runs its scheduling loop: it does at
// once without leader election, and with it once its elector holds the lease.
func schedulerLeads() bool {
	le, ok := leaderElectionConfig()
	if !ok {
		// The scheduler has not published its configuration yet: it is still starting.
		return false
	}
	if !le.LeaderElect {
		return true
	}
	return leaderGauge()
}

type leaderElection struct {
	LeaderElect bool `json:"leaderElect"`
}

// leaderElectionConfig reads the leader election settings from the configuration the scheduler
// publishes on configz ("componentconfig"), through configz's own handler.
func leaderElectionConfig() (leaderElection, bool) {
	var m capturingMux
	configz.InstallHandler(&m)
	if m.handler == nil {
		return leaderElection{}, false
	}
	rec := httptest.NewRecorder()
	m.handler.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/configz", nil))
	var cfg struct {
		ComponentConfig *struct {
			LeaderElection leaderElection `json:"leaderElection"`
		} `json:"componentconfig"`
	}
	if rec.Code != http.StatusOK || json.Unmarshal(rec.Body.Bytes(), &cfg) != nil || cfg.ComponentConfig == nil {
		return leaderElection{}, false
	}
	return cfg.ComponentConfig.LeaderElection, true
}

type capturingMux struct{ handler http.Handler }

func (m *capturingMux) Handle(_ string, h http.Handler) { m.handler = h }

// leaderGauge reports whether leader_election_master_status is 1 in this process.
func leaderGauge() bool {
	families, err := legacyregistry.DefaultGatherer.Gather()
	if err != nil {
		return false
	}
	for _, f := range families {
		if f.GetName() != "leader_election_master_status" {
			continue
		}
		for _, m := range f.GetMetric() {
			if m.GetGauge().GetValue() == 1 {
				return true
			}
		}
	}
	return false
}
