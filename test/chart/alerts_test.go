package chart

import (
	"strings"
	"testing"
	"time"

	"github.com/prometheus/prometheus/promql/promqltest"
)

// TestAlertExpressions evaluates each alert expression with Prometheus' own engine over series shaped
// like two replicas' (instance "leader" holds the lease, "follower" does not): it returns the expected
// series when the alert should fire, and nothing when the cluster is healthy. (The `for:` durations
// are Prometheus' part and not evaluated here.)
func TestAlertExpressions(t *testing.T) {
	r := mustRender(t, nil, monitoringAPIs...)
	exprs := map[string]string{}
	for _, q := range alertQueries(t, r.find("PrometheusRule", releaseName)) {
		exprs[strings.TrimPrefix(q.where, "alert ")] = q.expr
	}
	// Both replicas are scraped; "leader" holds the lease.
	const replicas = `
  up{job="custom-scheduler", instance="leader"} 1x60
  up{job="custom-scheduler", instance="follower"} 1x60
  leader_election_master_status{job="custom-scheduler", instance="leader", name="kube-scheduler"} 1x60
  leader_election_master_status{job="custom-scheduler", instance="follower", name="kube-scheduler"} 0x60`
	const p = `job="custom-scheduler", profile="custom-scheduler"`
	cases := []struct {
		alert, name, series string
		// at is when the expression is evaluated; want its result lines (none: no alert).
		at   string
		want string
	}{
		{"CustomSchedulerDown", "no replica up", `
  up{job="custom-scheduler", instance="leader"} 0x60
  up{job="custom-scheduler", instance="follower"} 0x60`, "30m", `{} 1`},
		{"CustomSchedulerDown", "healthy", replicas, "30m", ""},
		{"CustomSchedulerReservationHeldTooLong", "a reservation held since the start", `
  custom_scheduler_coscheduling_oldest_reservation_start_seconds{` + p + `, instance="leader"} 1x60
  custom_scheduler_coscheduling_oldest_reservation_start_seconds{` + p + `, instance="follower"} 0x60`, "30m", `{profile="custom-scheduler"} 1799`},
		{"CustomSchedulerReservationHeldTooLong", "a reservation held 10 minutes", `
  custom_scheduler_coscheduling_oldest_reservation_start_seconds{` + p + `, instance="leader"} 1200x60`, "30m", ""},
		{"CustomSchedulerReservationHeldTooLong", "none held", `
  custom_scheduler_coscheduling_oldest_reservation_start_seconds{` + p + `, instance="leader"} 0x60
  custom_scheduler_coscheduling_oldest_reservation_start_seconds{` + p + `, instance="follower"} 0x60`, "30m", ""},
		{"CustomSchedulerNoLeader", "no replica holds the lease", `
  leader_election_master_status{job="custom-scheduler", instance="leader", name="kube-scheduler"} 0x60
  leader_election_master_status{job="custom-scheduler", instance="follower", name="kube-scheduler"} 0x60`, "30m", `{} 0`},
		{"CustomSchedulerNoLeader", "healthy", replicas, "30m", ""},
		{"CustomSchedulerGangWaiting", "a gang waits", replicas + `
  custom_scheduler_coscheduling_gangs_waiting{` + p + `, instance="leader"} 2x60
  custom_scheduler_coscheduling_gangs_waiting{` + p + `, instance="follower"} 0x60`, "30m", `{profile="custom-scheduler"} 2`},
		{"CustomSchedulerGangWaiting", "healthy", replicas + `
  custom_scheduler_coscheduling_gangs_waiting{` + p + `, instance="leader"} 0x60`, "30m", ""},
		{"CustomSchedulerGangBelowQuorum", "a gang below quorum", replicas + `
  custom_scheduler_coscheduling_gangs_below_quorum{` + p + `, instance="leader"} 1x60`, "30m", `{profile="custom-scheduler"} 1`},
		{"CustomSchedulerGangBelowQuorum", "healthy", replicas + `
  custom_scheduler_coscheduling_gangs_below_quorum{` + p + `, instance="leader"} 0x60`, "30m", ""},
		{"CustomSchedulerGangTimeouts", "gangs keep timing out", replicas + `
  custom_scheduler_coscheduling_gang_timeouts_total{` + p + `, instance="leader"} 0+1x60`, "40m", `{profile="custom-scheduler"} 30`},
		{"CustomSchedulerGangTimeouts", "one timeout", replicas + `
  custom_scheduler_coscheduling_gang_timeouts_total{` + p + `, instance="leader"} 0x20 1x40`, "40m", ""},
		{"CustomSchedulerLoadAwareMetricsUnavailable", "the leader's fetches fail", replicas + `
  custom_scheduler_loadaware_metrics_api_available{` + p + `, instance="leader"} 0x60
  custom_scheduler_loadaware_metrics_api_available{` + p + `, instance="follower"} 1x60`, "30m",
			`custom_scheduler_loadaware_metrics_api_available{` + p + `, instance="leader"} 0`},
		{"CustomSchedulerLoadAwareMetricsUnavailable", "healthy leader, idle follower", replicas + `
  custom_scheduler_loadaware_metrics_api_available{` + p + `, instance="leader"} 1x60
  custom_scheduler_loadaware_metrics_api_available{` + p + `, instance="follower"} 0x60`, "30m", ""},
		{"CustomSchedulerLoadAwareMetricsStale", "nodes without fresh samples", replicas + `
  custom_scheduler_loadaware_nodes_without_fresh_metrics{` + p + `, instance="leader"} 3x60`, "30m",
			`custom_scheduler_loadaware_nodes_without_fresh_metrics{` + p + `, instance="leader"} 3`},
		{"CustomSchedulerLoadAwareMetricsStale", "healthy", replicas + `
  custom_scheduler_loadaware_nodes_without_fresh_metrics{` + p + `, instance="leader"} 0x60
  custom_scheduler_loadaware_nodes_without_fresh_metrics{` + p + `, instance="follower"} 5x60`, "30m", ""},
		{"CustomSchedulerLoadAwareFetchErrors", "most fetches fail", replicas + `
  custom_scheduler_loadaware_metrics_fetches_total{` + p + `, instance="leader", result="error"} 0+3x60
  custom_scheduler_loadaware_metrics_fetches_total{` + p + `, instance="leader", result="success"} 0+1x60`, "30m", `{profile="custom-scheduler"} 0.75`},
		{"CustomSchedulerLoadAwareFetchErrors", "a few fail", replicas + `
  custom_scheduler_loadaware_metrics_fetches_total{` + p + `, instance="leader", result="error"} 0+1x60
  custom_scheduler_loadaware_metrics_fetches_total{` + p + `, instance="leader", result="success"} 0+3x60`, "30m", ""},
		{"CustomSchedulerUnschedulablePodsGrowing", "the leader's queue grows", replicas + `
  scheduler_pending_pods{job="custom-scheduler", instance="leader", queue="unschedulable"} 0+1x60
  scheduler_pending_pods{job="custom-scheduler", instance="follower", queue="unschedulable"} 0x60`, "50m", `{} 50`},
		{"CustomSchedulerUnschedulablePodsGrowing", "many but steady", replicas + `
  scheduler_pending_pods{job="custom-scheduler", instance="leader", queue="unschedulable"} 50x60`, "50m", ""},
		{"CustomSchedulerUnschedulablePodsGrowing", "only the follower's idle queue grows", replicas + `
  scheduler_pending_pods{job="custom-scheduler", instance="leader", queue="unschedulable"} 0x60
  scheduler_pending_pods{job="custom-scheduler", instance="follower", queue="unschedulable"} 0+1x60`, "50m", ""},
	}
	engine := promqltest.NewTestEngine(t, false, 5*time.Minute, promqltest.DefaultMaxSamplesPerQuery)
	for _, tc := range cases {
		t.Run(tc.alert+"/"+tc.name, func(t *testing.T) {
			expr, ok := exprs[tc.alert]
			if !ok {
				t.Fatalf("no alert %s", tc.alert)
			}
			script := "load 1m" + tc.series + "\n\neval instant at " + tc.at + " " + expr + "\n"
			if tc.want != "" {
				script += "  " + tc.want + "\n"
			}
			promqltest.RunTest(t, script, engine)
		})
	}
}
