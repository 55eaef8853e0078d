package chart

import (
	"bytes"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/grafana/grafana-foundation-sdk/go/cog"
	"github.com/grafana/grafana-foundation-sdk/go/cog/plugins"
	"github.com/grafana/grafana-foundation-sdk/go/dashboard"
	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/rulefmt"
	"github.com/prometheus/prometheus/promql/parser"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/yaml"
)

// promql parses PromQL as Prometheus does.
var promql = parser.NewParser(parser.Options{})

// query is one PromQL expression from the dashboard or the alerts, and where it is.
type query struct {
	where, expr string
}

func dashboardPath() string { return filepath.Join(chartDir(), "dashboards", "custom-scheduler.json") }

// grafanaVariable is a Grafana variable reference in a query: $name, ${name} or [[name]].
var grafanaVariable = regexp.MustCompile(`\$\{(\w+)(?::\w+)?\}|\$(\w+)|\[\[(\w+)\]\]`)

// grafanaValues are what Grafana substitutes for the dashboard's variables and its built-in ones.
var grafanaValues = map[string]string{
	"__rate_interval": "2m", "__interval": "30s", "__range": "1h",
	"job": "custom-scheduler", "profile": "custom-scheduler", "datasource": "prometheus",
}

// expandGrafana substitutes Grafana variables the way Grafana does before it sends a query; an
// unknown variable is an error.
func expandGrafana(expr string) (string, error) {
	var unknown []string
	out := grafanaVariable.ReplaceAllStringFunc(expr, func(m string) string {
		sub := grafanaVariable.FindStringSubmatch(m)
		name := sub[1] + sub[2] + sub[3]
		v, ok := grafanaValues[name]
		if !ok {
			unknown = append(unknown, m)
		}
		return v
	})
	if len(unknown) > 0 {
		return "", fmt.Errorf("unknown Grafana variables %v", unknown)
	}
	return out, nil
}

// labelValuesQuery is Grafana's label_values(selector, label) variable query.
var labelValuesQuery = regexp.MustCompile(`^label_values\((.*),\s*(\w+)\)$`)

// loadDashboard reads dashboard JSON into the Grafana schema (the foundation SDK's generated types,
// strictly: an unknown field or a wrong type anywhere, also in panel options and Prometheus queries,
// is an error).
func loadDashboard(data []byte) (*dashboard.Dashboard, error) {
	plugins.RegisterDefaultPlugins()
	var d dashboard.Dashboard
	err := d.UnmarshalJSONStrict(data)
	// The SDK returns its error list typed, so no errors is a non-nil error holding an empty list.
	if be, ok := err.(cog.BuildErrors); ok && len(be) == 0 {
		err = nil
	}
	if err != nil {
		return nil, err
	}
	return &d, nil
}

// dashboardQueries are every PromQL expression of the dashboard: panel targets and variable queries,
// with Grafana's variables substituted.
func dashboardQueries(t *testing.T) []query {
	t.Helper()
	var raw struct {
		Panels []struct {
			Title   string `json:"title"`
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
		Templating struct {
			List []struct {
				Name  string `json:"name"`
				Type  string `json:"type"`
				Query any    `json:"query"`
			} `json:"list"`
		} `json:"templating"`
	}
	data, err := os.ReadFile(dashboardPath())
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(data, &raw); err != nil {
		t.Fatal(err)
	}
	var queries []query
	add := func(where, expr string) {
		expanded, err := expandGrafana(expr)
		if err != nil {
			t.Errorf("%s: %v", where, err)
			return
		}
		queries = append(queries, query{where: where, expr: expanded})
	}
	for _, p := range raw.Panels {
		for i, target := range p.Targets {
			add(fmt.Sprintf("panel %q target %d", p.Title, i), target.Expr)
		}
	}
	for _, v := range raw.Templating.List {
		if v.Type != "query" {
			continue
		}
		var q string
		switch vq := v.Query.(type) {
		case string:
			q = vq
		case map[string]any:
			q, _ = vq["query"].(string)
		}
		if m := labelValuesQuery.FindStringSubmatch(q); m != nil {
			q = m[1]
		}
		add(fmt.Sprintf("variable %q", v.Name), q)
	}
	return queries
}

// alertQueries are the expressions of the rendered PrometheusRule.
func alertQueries(t *testing.T, rule *unstructured.Unstructured) []query {
	t.Helper()
	var pr monitoringv1.PrometheusRule
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(rule.Object, &pr); err != nil {
		t.Fatal(err)
	}
	var queries []query
	for _, g := range pr.Spec.Groups {
		for _, r := range g.Rules {
			queries = append(queries, query{where: "alert " + r.Alert, expr: r.Expr.String()})
		}
	}
	return queries
}

// strictInto decodes an object into a typed API struct, refusing unknown fields.
func strictInto(t *testing.T, obj *unstructured.Unstructured, into any) {
	t.Helper()
	data, err := json.Marshal(obj.Object)
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.UnmarshalStrict(data, into); err != nil {
		t.Errorf("%s %s does not match prometheus-operator's types: %v", obj.GetKind(), obj.GetName(), err)
	}
}

// TestDashboardSchema: the dashboard loads into Grafana's schema, and every query parses as PromQL.
func TestDashboardSchema(t *testing.T) {
	data, err := os.ReadFile(dashboardPath())
	if err != nil {
		t.Fatal(err)
	}
	d, err := loadDashboard(data)
	if err != nil {
		t.Fatalf("the dashboard does not load into the Grafana schema: %v", err)
	}
	// The check bites: a misspelt field in a Prometheus query is refused.
	if _, err := loadDashboard(bytes.Replace(data, []byte(`"legendFormat"`), []byte(`"legendFromat"`), 1)); err == nil {
		t.Error("a dashboard with a misspelt query field loaded")
	}
	if d.Uid == nil || *d.Uid != "custom-scheduler" || len(d.Panels) == 0 {
		t.Fatalf("dashboard uid %v with %d panels", d.Uid, len(d.Panels))
	}
	queries := dashboardQueries(t)
	if len(queries) < 20 {
		t.Fatalf("only %d queries in the dashboard", len(queries))
	}
	for _, q := range queries {
		if _, err := promql.ParseExpr(q.expr); err != nil {
			t.Errorf("%s: %q does not parse: %v", q.where, q.expr, err)
		}
	}
}

// TestAlertsAndServiceMonitor: the rendered PrometheusRule and ServiceMonitor match prometheus-operator's
// types; the rule groups pass Prometheus' own rule-file validation (expressions, durations, label and
// annotation templates); the expected alerts are there.
func TestAlertsAndServiceMonitor(t *testing.T) {
	r := mustRender(t, map[string]any{"prometheusRule": map[string]any{"additionalAlertLabels": map[string]any{"team": "platform"}}}, monitoringAPIs...)
	sm, rule := r.find("ServiceMonitor", releaseName), r.find("PrometheusRule", releaseName)
	if sm == nil || rule == nil {
		t.Fatal("no ServiceMonitor or PrometheusRule rendered")
	}
	strictInto(t, sm, &monitoringv1.ServiceMonitor{})
	strictInto(t, rule, &monitoringv1.PrometheusRule{})

	spec, _, _ := unstructured.NestedMap(rule.Object, "spec")
	groups, err := yaml.Marshal(spec)
	if err != nil {
		t.Fatal(err)
	}
	rgs, errs := rulefmt.Parse(groups, false, model.UTF8Validation, promql, slog.New(slog.DiscardHandler))
	for _, err := range errs {
		t.Errorf("rule validation: %v", err)
	}
	if rgs == nil {
		t.FailNow()
	}
	alerts := map[string]bool{}
	for _, g := range rgs.Groups {
		for _, rule := range g.Rules {
			alerts[rule.Alert] = true
			if rule.Labels["severity"] == "" || rule.Labels["team"] != "platform" || rule.Annotations["summary"] == "" || rule.Annotations["description"] == "" {
				t.Errorf("alert %s: labels %v, annotations %v", rule.Alert, rule.Labels, rule.Annotations)
			}
			if !strings.Contains(rule.Expr, `job="custom-scheduler"`) {
				t.Errorf("alert %s does not select job=\"custom-scheduler\": %s", rule.Alert, rule.Expr)
			}
		}
	}
	for _, want := range []string{"CustomSchedulerDown", "CustomSchedulerNoLeader", "CustomSchedulerGangWaiting", "CustomSchedulerGangBelowQuorum",
		"CustomSchedulerLoadAwareMetricsUnavailable", "CustomSchedulerLoadAwareMetricsStale", "CustomSchedulerLoadAwareFetchErrors", "CustomSchedulerUnschedulablePodsGrowing"} {
		if !alerts[want] {
			t.Errorf("no alert %s", want)
		}
	}
}

// prometheusTargetLabels are labels Prometheus attaches to every scraped series (the job, the
// target, and with a ServiceMonitor its Kubernetes metadata); they are not on /metrics.
var prometheusTargetLabels = map[string]bool{"job": true, "instance": true, "namespace": true, "pod": true, "service": true, "endpoint": true, "container": true}

// prometheusSeries are series Prometheus makes itself for every target.
var prometheusSeries = map[string]bool{"up": true}

// exposition is what a live /metrics serves: every sample name with the label names seen on it.
type exposition map[string]map[string]bool

// checkQuery parses expr and reports every metric it selects that /metrics does not serve, every
// label matcher or grouping label that no series of the metrics involved carries.
func checkQuery(expo exposition, q query) []string {
	expr, err := promql.ParseExpr(q.expr)
	if err != nil {
		return []string{fmt.Sprintf("%s: does not parse: %v", q.where, err)}
	}
	var problems []string
	labelKnown := func(names []string, label string) bool {
		if prometheusTargetLabels[label] || label == model.MetricNameLabel {
			return true
		}
		for _, n := range names {
			if expo[n][label] {
				return true
			}
		}
		return false
	}
	parser.Inspect(expr, func(node parser.Node, _ []parser.Node) error {
		switch n := node.(type) {
		case *parser.VectorSelector:
			name := n.Name
			if name == "" {
				problems = append(problems, fmt.Sprintf("%s: a selector without a metric name: %s", q.where, n))
				return nil
			}
			if prometheusSeries[name] {
				return nil
			}
			if _, ok := expo[name]; !ok {
				problems = append(problems, fmt.Sprintf("%s: metric %s is not on /metrics", q.where, name))
				return nil
			}
			for _, m := range n.LabelMatchers {
				if !labelKnown([]string{name}, m.Name) {
					problems = append(problems, fmt.Sprintf("%s: %s has no label %q", q.where, name, m.Name))
				}
			}
		case *parser.AggregateExpr:
			names := metricNames(n.Expr)
			for _, l := range n.Grouping {
				if !labelKnown(names, l) {
					problems = append(problems, fmt.Sprintf("%s: grouping by %q, which none of %v has", q.where, l, names))
				}
			}
		}
		return nil
	})
	return problems
}

// metricNames are the metrics an expression selects.
func metricNames(expr parser.Node) []string {
	var names []string
	parser.Inspect(expr, func(node parser.Node, _ []parser.Node) error {
		if vs, ok := node.(*parser.VectorSelector); ok {
			names = append(names, vs.Name)
		}
		return nil
	})
	return names
}

// TestCheckQuery: the metric-name check of dashboard and alert queries finds what it should.
func TestCheckQuery(t *testing.T) {
	expo := exposition{
		"scheduler_pending_pods": {"queue": true},
		"custom_scheduler_coscheduling_time_to_quorum_seconds_bucket": {"profile": true, "le": true},
	}
	cases := map[string]struct {
		expr string
		want []string
	}{
		"known metric and labels": {expr: `sum by (queue) (scheduler_pending_pods{job="x", queue="active"})`},
		"histogram bucket":        {expr: `histogram_quantile(0.9, sum by (le) (rate(custom_scheduler_coscheduling_time_to_quorum_seconds_bucket{profile="p"}[5m])))`},
		"up is Prometheus' own":   {expr: `absent(up{job="x"} == 1)`},
		"unknown metric":          {expr: `rate(scheduler_schedule_attempts_totl[5m])`, want: []string{"metric scheduler_schedule_attempts_totl is not on /metrics"}},
		"unknown label matcher":   {expr: `scheduler_pending_pods{queu="active"}`, want: []string{`has no label "queu"`}},
		"unknown grouping label":  {expr: `sum by (reason) (scheduler_pending_pods)`, want: []string{`grouping by "reason"`}},
		"does not parse":          {expr: `sum(scheduler_pending_pods`, want: []string{"does not parse"}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got := checkQuery(expo, query{where: name, expr: tc.expr})
			if len(got) != len(tc.want) {
				t.Fatalf("problems %q, want %d like %q", got, len(tc.want), tc.want)
			}
			for i, w := range tc.want {
				if !strings.Contains(got[i], w) {
					t.Errorf("problem %q does not contain %q", got[i], w)
				}
			}
		})
	}
}
