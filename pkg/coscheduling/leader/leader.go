// Package leader tells whether the scheduler in this process leads: whether it runs its scheduling
// loop, so that work only the leader may do (the PodGroup status writer) starts with it.
//
// The scheduler command gives plugins no word of it: app.Run sets the leader elector's callbacks
// itself (overwriting any), the command's options reach only the plugin registry, and the lease's
// holder identity is the host name and a UUID drawn inside the command, which a plugin cannot learn,
// so the Lease object cannot tell this replica from another on the same host. What the command does
// publish in its own process is read instead: the component configuration on configz (is leader
// election on) and the leader elector's gauge leader_election_master_status, which is 1 from the
// moment this process holds the lease (the scheduler runs one elector).
package leader

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/component-base/configz"
	"k8s.io/component-base/metrics/legacyregistry"
)

// GaugeName is the leader elector's gauge, 1 while this process holds the lease.
const GaugeName = "leader_election_master_status"

// Leads reports whether the scheduler in this process runs its scheduling loop: at once without
// leader election, and with it once its elector holds the lease. It is false while the scheduler has
// not published its configuration yet (it is still starting). It gathers the metrics registry: call
// it seldom (a replica that does not lead polls about once a second, and stops once it leads).
func Leads() bool {
	le, ok := leaderElectionConfig()
	if !ok {
		return false
	}
	if !le.LeaderElect {
		return true
	}
	return gauge()
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

// gauge reports whether GaugeName is 1 in this process.
func gauge() bool {
	families, err := legacyregistry.DefaultGatherer.Gather()
	if err != nil {
		return false
	}
	for _, f := range families {
		if f.GetName() != GaugeName {
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

// Await polls every interval, from now, until this process leads or started reports that what waits
// for the lead has begun by other means (a scheduling cycle, which only the leader runs). It reports
// false when ctx ends first.
func Await(ctx context.Context, interval time.Duration, started func() bool) bool {
	return wait.PollUntilContextCancel(ctx, interval, true, func(context.Context) (bool, error) {
		return started() || Leads(), nil
	}) == nil
}
