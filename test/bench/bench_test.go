//go:build bench

// Package bench runs upstream scheduler_perf (k8s.io/kubernetes/test/integration/scheduler_perf) with
// custom-scheduler's plugins registered, side by side with the default profile and the in-tree
// GangScheduling plugin. It is behind the `bench` build tag: the test binary links an apiserver and a
// scheduler and takes minutes to build, so `go test ./...` must not build it. hack/bench.sh builds
// and runs it; see docs/benchmarks.md.
//
// Workload configs are in config/performance-config.yaml. The harness adds what scheduler_perf's
// ops cannot express:
//   - the PodGroup CRD (installed before Coscheduling starts, which waits for its PodGroup cache);
//   - a metrics.k8s.io/v1beta1 server behind an APIService, so LoadAware scores real samples;
//   - for Saturation*: a watcher that measures the time until every feasible gang is bound and counts
//     partially bound gangs;
//   - for PreemptionWave*: a watcher that measures the time until every high-priority gang is bound,
//     the pods evicted per admitted gang and low-priority gangs left partially bound;
//   - for Ceiling: a binder that binds pods with no scheduling work, the apiserver's binding rate;
//   - the process' peak RSS per workload;
//   - counters: the apiserver's writes by verb and resource, the scheduler's batching outcomes.
//
// Extra results go as JSON files next to scheduler_perf's data items (-data-items-dir).
package bench

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/runtime"
	_ "k8s.io/component-base/logs/json/register"
	fwk "k8s.io/kube-scheduler/framework"
	schedframework "k8s.io/kubernetes/pkg/scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/names"
	frameworkruntime "k8s.io/kubernetes/pkg/scheduler/framework/runtime"
	"k8s.io/kubernetes/pkg/scheduler/metrics"
	perf "k8s.io/kubernetes/test/integration/scheduler_perf"
	"k8s.io/kubernetes/test/utils/client-go/ktesting"
	"sigs.k8s.io/yaml"

	"github.com/custom-scheduler/custom-scheduler/pkg/registry"
)

var (
	configFile  = flag.String("bench-config", "config/performance-config.yaml", "scheduler_perf test cases")
	crdFile     = flag.String("bench-crd", "../../manifests/crds/scheduling.x-k8s.io_podgroups.yaml", "PodGroup CRD installed before Coscheduling starts")
	noMetrics   = flag.Bool("bench-no-metrics-server", false, "do not serve metrics.k8s.io: LoadAware runs in its neutral mode (no samples)")
	extraPrefix = "bench-extra"
)

// Names of the plugins the harness wraps.
const (
	coschedulingName = "Coscheduling"
	loadAwareName    = "LoadAware"
)

func TestMain(m *testing.M) {
	if err := perf.InitTests(); err != nil {
		fmt.Fprintf(os.Stderr, "%v\n", err)
		os.Exit(1)
	}
	// Collect scheduler_plugin_execution_duration_seconds for our plugins and for the in-tree
	// workload-aware plugins, which upstream's list does not have.
	perf.PluginNames = append(perf.PluginNames, names.GangScheduling, names.PodGroupPodsCount)
	for _, p := range registry.Plugins() {
		perf.PluginNames = append(perf.PluginNames, p.Name)
	}
	os.Exit(m.Run())
}

func BenchmarkPerfScheduling(b *testing.B) {
	config, err := withPluginMetrics(*configFile, b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	perf.RunBenchmarkPerfScheduling(b, config, "custom-scheduler", outOfTreeRegistry(),
		perf.WithPreRunFn(preRun),
		perf.WithPrepareFn(prepare),
	)
}

// withPluginMetrics writes a copy of the config file in which every test case without its own
// metricsCollectorConfig gets scheduler_perf's default one, with perf.PluginNames as it is now.
// Appending to perf.PluginNames alone does not work: the default config captured the slice when the
// package was initialized.
func withPluginMetrics(file, dir string) (string, error) {
	data, err := os.ReadFile(file)
	if err != nil {
		return "", err
	}
	var cases []map[string]any
	if err := yaml.Unmarshal(data, &cases); err != nil {
		return "", fmt.Errorf("%s: %w", file, err)
	}
	lv := func(label string, values []string) map[string]any {
		return map[string]any{"label": label, "values": values}
	}
	results := []string{metrics.ScheduledResult, metrics.UnschedulableResult, metrics.ErrorResult}
	events := schedframework.AllClusterEventLabels()
	collector := map[string]any{"metrics": map[string]any{
		"scheduler_framework_extension_point_duration_seconds": []any{lv("extension_point", metrics.ExtensionPoints)},
		"scheduler_scheduling_attempt_duration_seconds":        []any{lv("result", results)},
		"scheduler_pod_scheduling_duration_seconds":            nil,
		"scheduler_plugin_execution_duration_seconds": []any{
			lv("plugin", perf.PluginNames), lv("extension_point", metrics.ExtensionPoints)},
		"scheduler_queueing_hint_execution_duration_seconds": []any{lv("plugin", perf.PluginNames), lv("event", events)},
		"scheduler_event_handling_duration_seconds":          []any{lv("event", events)},
		"scheduler_podgroup_scheduling_attempt_duration_seconds": []any{
			lv("result", append([]string{metrics.WaitingOnPreemptionResult}, results...))},
		"scheduler_podgroup_scheduling_algorithm_duration_seconds": nil,
	}}
	for _, tc := range cases {
		if _, ok := tc["metricsCollectorConfig"]; !ok {
			tc["metricsCollectorConfig"] = collector
		}
	}
	out, err := yaml.Marshal(cases)
	if err != nil {
		return "", err
	}
	path := filepath.Join(dir, filepath.Base(file))
	return path, os.WriteFile(path, out, 0o600)
}

// outOfTreeRegistry is registry.Plugins(), each plugin by its own name, with the set-up it needs in a
// bare test apiserver done before its factory runs.
func outOfTreeRegistry() frameworkruntime.Registry {
	r := frameworkruntime.Registry{}
	for _, p := range registry.Plugins() {
		factory := p.Factory
		switch p.Name {
		case coschedulingName:
			r[p.Name] = func(ctx context.Context, args runtime.Object, h fwk.Handle) (fwk.Plugin, error) {
				if err := installCRD(ctx, h.KubeConfig(), *crdFile); err != nil {
					return nil, fmt.Errorf("bench: installing the PodGroup CRD: %w", err)
				}
				return factory(ctx, args, h)
			}
		case loadAwareName:
			r[p.Name] = func(ctx context.Context, args runtime.Object, h fwk.Handle) (fwk.Plugin, error) {
				if !*noMetrics {
					if err := serveNodeMetrics(ctx, h); err != nil {
						return nil, fmt.Errorf("bench: serving metrics.k8s.io: %w", err)
					}
				}
				return factory(ctx, args, h)
			}
		default:
			r[p.Name] = factory
		}
	}
	return r
}

// current is the workload being run (one at a time: scheduler_perf runs workloads sequentially).
var current struct {
	sync.Mutex
	w *perf.Workload
}

// preRun runs before etcd, the apiserver and the scheduler start: it resets the peak RSS so that the
// peak reported for this workload is its own, and remembers the workload for prepare.
func preRun(tCtx ktesting.TContext, w *perf.Workload) (func(), error) {
	resetPeakRSS()
	current.Lock()
	current.w = w
	current.Unlock()
	name := tCtx.Name()
	return func() {
		writeExtra(name, map[string]any{"Metric": "PeakRSS"}, "MB", map[string]float64{"Max": float64(peakRSSKiB()) / 1024})
	}, nil
}

// prepare runs once the apiserver and scheduler are up, before the workload's ops.
func prepare(tCtx ktesting.TContext) error {
	current.Lock()
	w := current.w
	current.Unlock()
	// Registered after scheduler_perf's own clean-up, so it runs before that resets the registry.
	name := tCtx.Name()
	tCtx.TB().Cleanup(func() {
		batch, err := writeCounters(name)
		if err != nil {
			tCtx.Errorf("%s: %v", name, err)
			return
		}
		checkBatching(tCtx, name, batch)
	})
	switch tc := testCaseName(tCtx.Name()); {
	case strings.HasPrefix(tc, "Starvation"):
		return startStarvationDriver(tCtx, w)
	case strings.HasPrefix(tc, "Saturation"):
		return startSaturationWatcher(tCtx, w)
	case strings.HasPrefix(tc, "PreemptionWave"):
		return startPreemptionWaveWatcher(tCtx, w)
	case strings.HasPrefix(tc, "Ceiling"):
		return startBinder(tCtx, w)
	case strings.HasPrefix(tc, "TopologySaturation"):
		return startTopologySaturationWatcher(tCtx, w)
	case strings.HasPrefix(tc, "Topology"):
		return startTopologyWatcher(tCtx, w)
	case strings.HasPrefix(tc, "GangsSmall"), strings.HasPrefix(tc, "GangsLarge"), strings.HasPrefix(tc, "DeviceGangs"):
		return startGangWatcher(tCtx, w)
	}
	return nil
}

// testCaseName is the scheduler_perf test case from a benchmark name
// "BenchmarkPerfScheduling/<testCase>/<workload>".
func testCaseName(name string) string {
	parts := strings.Split(name, "/")
	if len(parts) < 3 {
		return ""
	}
	return parts[len(parts)-2]
}

// param reads an integer workload parameter (and marks it used for scheduler_perf's check).
func param(w *perf.Workload, key string, def int) int {
	if w == nil {
		return def
	}
	v, err := w.GetParam(key)
	if err != nil {
		return def
	}
	return v
}

// writeExtra writes one data item, in scheduler_perf's format, to -data-items-dir.
func writeExtra(testName string, labels map[string]any, unit string, data map[string]float64) {
	dir := dataItemsDir()
	l := map[string]string{}
	for k, v := range labels {
		l[k] = fmt.Sprint(v)
	}
	// The same Name label scheduler_perf gives its items: "<testCase>/<workload>".
	l["Name"] = strings.TrimPrefix(testName, "BenchmarkPerfScheduling/")
	item := map[string]any{"data": data, "unit": unit, "labels": l}
	out, err := json.MarshalIndent(map[string]any{"version": "v1", "dataItems": []any{item}}, "", "  ")
	if err != nil {
		return
	}
	file := fmt.Sprintf("%s_%s_%s_%d.json", extraPrefix, regexp.MustCompile(`[^A-Za-z0-9_-]`).ReplaceAllString(l["Name"], "_"),
		l["Metric"], time.Now().UnixNano())
	_ = os.MkdirAll(dir, 0o750)
	_ = os.WriteFile(filepath.Join(dir, file), out, 0o644)
}

func dataItemsDir() string {
	if f := flag.Lookup("data-items-dir"); f != nil && f.Value.String() != "" {
		return f.Value.String()
	}
	return "."
}

// resetPeakRSS resets the kernel's VmHWM of this process (Linux: "5" to clear_refs).
func resetPeakRSS() {
	_ = os.WriteFile("/proc/self/clear_refs", []byte("5"), 0o200)
}

// peakRSSKiB is this process' VmHWM; it covers the in-process apiserver, the scheduler and the
// test driver (etcd is a separate process).
func peakRSSKiB() int64 {
	data, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(data), "\n") {
		if strings.HasPrefix(line, "VmHWM:") {
			f := strings.Fields(line)
			if len(f) >= 2 {
				v, _ := strconv.ParseInt(f[1], 10, 64)
				return v
			}
		}
	}
	return 0
}
