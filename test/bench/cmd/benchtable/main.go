// Command benchtable summarizes the data items that test/bench (scheduler_perf with custom-scheduler's
// plugins) writes into one Markdown report: throughput average/p50/p90 over the repetitions, the ratio
// to the default profile (Basic) of the same size from the same run and, for our gangs, to in-tree
// GangScheduling, peak memory, the saturation results and the per-plugin latencies.
//
// Usage: benchtable [-plugins Coscheduling,LoadAware,...] DIR...
//
// Every *.json below the directories is read. hack/bench.sh also writes status.tsv files (one line per
// workload process: "<testCase>/<workload>\t<exit code>\t<seconds>\t<CPU seconds>"), which are
// counted as runs and failures and give the CPU per 1,000 pods.
package main

import (
	"bufio"
	"encoding/json"
	"flag"
	"fmt"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
)

type dataItem struct {
	Data   map[string]float64 `json:"data"`
	Unit   string             `json:"unit"`
	Labels map[string]string  `json:"labels"`
}

type dataItems struct {
	DataItems []dataItem `json:"dataItems"`
}

// key is a scheduler_perf test case and workload, e.g. {"BasicCustom", "1000Nodes_5000Pods"}.
type key struct{ testCase, workload string }

type pluginKey struct {
	key
	plugin, point string
}

type result struct {
	throughput []map[string]float64 // one per run
	// byRep is the throughput Average per repetition (the "repN" directory a file is in), for paired
	// ratios between test cases of the same repetition.
	byRep      map[string]float64
	peakRSS    []float64
	heapMax    []float64
	saturation []map[string]float64
	// topology is the TopologyPlacement item of each Topology* run.
	topology []map[string]float64
	// gangs are the GangPlacement, GangQuorumLatency and NodesPerGang items of each Gangs* run, merged
	// (keys prefixed "quorum" and "nodes" for the last two).
	gangs   []map[string]float64
	gangRep map[string]int
	// topologySaturation is the TopologySaturation item of each TopologySaturation* run.
	topologySaturation []map[string]float64
	// preemptionWave is the PreemptionWave item of each PreemptionWave* run.
	preemptionWave []map[string]float64
	// starvation is the Starvation item of each Starvation* run.
	starvation []map[string]float64
	// batch is each run's scheduler_batch_attempts_total by result; writes is each run's apiserver
	// writes (every request but get/list/watch), setup included.
	batch   []map[string]float64
	writes  []float64
	runs    int
	failed  int
	seconds []float64
	// cpuByRep is the CPU seconds (user + system) of the workload's process tree per repetition.
	cpuByRep map[string]float64
}

func main() {
	plugins := flag.String("plugins", "Coscheduling,LoadAware,GangScheduling,PodGroupPodsCount,TopologyPlacementGenerator", "plugins whose latencies are listed")
	flag.Parse()
	if flag.NArg() == 0 {
		fmt.Fprintln(os.Stderr, "usage: benchtable [-plugins a,b] DIR...")
		os.Exit(2)
	}
	wanted := map[string]bool{}
	for _, p := range strings.Split(*plugins, ",") {
		wanted[strings.TrimSpace(p)] = true
	}
	results := map[key]*result{}
	get := func(k key) *result {
		r := results[k]
		if r == nil {
			r = &result{}
			results[k] = r
		}
		return r
	}
	latency := map[pluginKey][]map[string]float64{}

	for _, dir := range flag.Args() {
		err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() {
				return err
			}
			switch {
			case d.Name() == "status.tsv":
				readStatus(path, get)
			case strings.HasSuffix(d.Name(), ".json"):
				var items dataItems
				data, err := os.ReadFile(path)
				if err != nil {
					return err
				}
				if err := json.Unmarshal(data, &items); err != nil {
					fmt.Fprintf(os.Stderr, "skipping %s: %v\n", path, err)
					return nil
				}
				for _, it := range items.DataItems {
					k, ok := parseName(it.Labels["Name"])
					if !ok {
						continue
					}
					switch m := it.Labels["Metric"]; {
					case m == "SchedulingThroughput":
						r := get(k)
						r.throughput = append(r.throughput, it.Data)
						if rep := repOf(path); rep != "" {
							if r.byRep == nil {
								r.byRep = map[string]float64{}
							}
							r.byRep[rep] = it.Data["Average"]
						}
					case m == "PeakRSS":
						get(k).peakRSS = append(get(k).peakRSS, it.Data["Max"])
					case m == "heap_memory_usage":
						get(k).heapMax = append(get(k).heapMax, it.Data["Max"])
					case m == "SaturationFeasibleBound":
						get(k).saturation = append(get(k).saturation, it.Data)
					case m == "TopologyPlacement":
						get(k).topology = append(get(k).topology, it.Data)
					case m == "GangPlacement" || m == "GangQuorumLatency" || m == "NodesPerGang":
						get(k).addGangItem(repOf(path), m, it.Data)
					case m == "TopologySaturation":
						get(k).topologySaturation = append(get(k).topologySaturation, it.Data)
					case m == "Counter_scheduler_batch_attempts_total":
						get(k).batch = append(get(k).batch, it.Data)
					case m == "Counter_apiserver_request_total":
						get(k).writes = append(get(k).writes, sum(it.Data))
					case m == "Starvation":
						get(k).starvation = append(get(k).starvation, it.Data)
					case m == "PreemptionWave":
						get(k).preemptionWave = append(get(k).preemptionWave, it.Data)
					case m == "scheduler_plugin_execution_duration_seconds" && wanted[it.Labels["plugin"]]:
						pk := pluginKey{k, it.Labels["plugin"], it.Labels["extension_point"]}
						d := map[string]float64{}
						for b, v := range it.Data {
							d[b] = toMicros(v, it.Unit)
						}
						latency[pk] = append(latency[pk], d)
					}
				}
			}
			return nil
		})
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
	}
	printReport(results, latency)
}

var repPattern = regexp.MustCompile(`(^|/)(rep[0-9]+)(/|$)`)

// repOf is the repetition a result file belongs to: its "repN" directory (hack/bench.sh's layout),
// with the result root in front so that separate runs stay apart.
func repOf(path string) string {
	loc := repPattern.FindStringSubmatchIndex(filepath.ToSlash(path))
	if loc == nil {
		return ""
	}
	return filepath.ToSlash(path)[:loc[5]]
}

// pairedRatio is a's throughput over b's, per repetition both ran in, as "mean× (min–max)"; it
// falls back to the ratio of the means when no repetition has both.
func pairedRatio(a, b *result) string {
	if a == nil || b == nil {
		return "–"
	}
	var rs []float64
	for rep, v := range a.byRep {
		if w, ok := b.byRep[rep]; ok && w > 0 {
			rs = append(rs, v/w)
		}
	}
	if len(rs) == 0 {
		return ratio(mean(bucket(a.throughput, "Average")), mean(bucket(b.throughput, "Average")))
	}
	if len(rs) == 1 {
		return fmt.Sprintf("%.2f×", rs[0])
	}
	lo, hi := minMax(rs)
	return fmt.Sprintf("%.2f× (%.2f–%.2f)", mean(rs), lo, hi)
}

// parseName turns scheduler_perf's Name label ("BenchmarkPerfScheduling/<tc>/<workload>/<ns>" or
// "<tc>/<workload>") into its test case and workload.
func parseName(name string) (key, bool) {
	name = strings.TrimPrefix(name, "BenchmarkPerfScheduling/")
	parts := strings.Split(name, "/")
	if len(parts) < 2 {
		return key{}, false
	}
	return key{parts[0], parts[1]}, true
}

func readStatus(path string, get func(key) *result) {
	f, err := os.Open(path)
	if err != nil {
		return
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	for s.Scan() {
		fields := strings.Split(s.Text(), "\t")
		if len(fields) < 2 {
			continue
		}
		k, ok := parseName(fields[0])
		if !ok {
			continue
		}
		r := get(k)
		r.runs++
		if fields[1] != "0" {
			r.failed++
		}
		if len(fields) > 2 {
			if v, err := strconv.ParseFloat(fields[2], 64); err == nil {
				r.seconds = append(r.seconds, v)
			}
		}
		if len(fields) > 3 && fields[1] == "0" {
			if v, err := strconv.ParseFloat(fields[3], 64); err == nil && v > 0 {
				if r.cpuByRep == nil {
					r.cpuByRep = map[string]float64{}
				}
				r.cpuByRep[repOf(path)] = v
			}
		}
	}
}

func toMicros(v float64, unit string) float64 {
	switch unit {
	case "s":
		return v * 1e6
	case "ms":
		return v * 1e3
	default:
		return v
	}
}

func mean(vs []float64) float64 {
	if len(vs) == 0 {
		return math.NaN()
	}
	s := 0.0
	for _, v := range vs {
		s += v
	}
	return s / float64(len(vs))
}

func bucket(ms []map[string]float64, b string) []float64 {
	var out []float64
	for _, m := range ms {
		if v, ok := m[b]; ok {
			out = append(out, v)
		}
	}
	return out
}

func minMax(vs []float64) (float64, float64) {
	lo, hi := math.Inf(1), math.Inf(-1)
	for _, v := range vs {
		lo, hi = math.Min(lo, v), math.Max(hi, v)
	}
	return lo, hi
}

func f1(v float64) string {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return "–"
	}
	return strconv.FormatFloat(v, 'f', 1, 64)
}

func ratio(a, b float64) string {
	if math.IsNaN(a) || math.IsNaN(b) || b == 0 {
		return "–"
	}
	return fmt.Sprintf("%.2f×", a/b)
}

// batchedSuffix marks the cases run with PodTopologySpread's default constraints off; each is compared
// with the Basic and in-tree cases of the same kind.
const batchedSuffix = "Batched"

// basicOf names the default-profile case a test case is compared with ("" for that case itself).
func basicOf(tc string) string {
	base, suffix := splitBatched(tc)
	if base == "Basic" {
		return ""
	}
	return "Basic" + suffix
}

// inTreeOf names the in-tree counterpart of one of our gang test cases.
func inTreeOf(tc string) string {
	base, suffix := splitBatched(tc)
	base = strings.TrimSuffix(base, noPlanSuffix)
	if strings.HasSuffix(base, "Custom") && base != "BasicCustom" {
		return strings.TrimSuffix(base, "Custom") + "InTree" + suffix
	}
	return ""
}

// noPlanSuffix marks our gang cases run with the placement plan off.
const noPlanSuffix = "NoPlan"

func splitBatched(tc string) (base, suffix string) {
	if b, ok := strings.CutSuffix(tc, batchedSuffix); ok {
		return b, batchedSuffix
	}
	return tc, ""
}

// order sorts the workloads by size (node count), then the test cases in the config's order.
var caseOrder = []string{"Basic", "BasicCustom", "BasicCoscheduling", "BasicLoadAware", "BasicLoadAwareP95", "BasicLoadAwareAvg", "GangsSmallInTree", "GangsSmallCustom", "GangsSmallCustomNoPlan", "BasicBatched", "BasicCustomBatched", "GangsSmallInTreeBatched", "GangsSmallCustomBatched", "GangsLargeInTree", "GangsLargeCustom", "GangsLargeCustomNoPlan", "GangGroupsInTree", "GangGroupsCustom", "DeviceGangsInTree", "DeviceGangsCustom", "DeviceGangsExtendedInTree", "DeviceGangsExtendedCustom", "TopologyInTree", "TopologyCustom", "TopologyCustomNoPlan", "TopologySaturationInTree", "TopologySaturationCustom", "TopologySaturationMixedInTree", "TopologySaturationMixedCustom", "SaturationInTree", "SaturationCustom", "PreemptionWaveInTree", "PreemptionWaveCustom", "StarvationInTree", "StarvationCustom", "StarvationNoReservation", "Ceiling"}

func caseRank(tc string) int {
	for i, c := range caseOrder {
		if c == tc {
			return i
		}
	}
	return len(caseOrder)
}

func nodes(workload string) int {
	n, _ := strconv.Atoi(strings.SplitN(workload, "Nodes", 2)[0])
	return n
}

func sortedKeys(results map[key]*result) []key {
	keys := make([]key, 0, len(results))
	for k := range results {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		a, b := keys[i], keys[j]
		if nodes(a.workload) != nodes(b.workload) {
			return nodes(a.workload) < nodes(b.workload)
		}
		if caseRank(a.testCase) != caseRank(b.testCase) {
			return caseRank(a.testCase) < caseRank(b.testCase)
		}
		return a.workload < b.workload
	})
	return keys
}

func printReport(results map[key]*result, latency map[pluginKey][]map[string]float64) {
	fmt.Println("Throughput in pods/s: mean over runs of scheduler_perf's SchedulingThroughput Average, Perc50 and Perc90 (min–max of the Average in brackets).")
	fmt.Println("vs Basic: against the default profile with the same nodes and pods (BasicBatched for the *Batched cases), paired by repetition (mean, min–max). vs in-tree: our gangs against in-tree GangScheduling, same shapes.")
	fmt.Println("Peak RSS: the benchmark process (in-process apiserver + scheduler + driver; etcd excluded); heap: Go heap in use, max.")
	fmt.Println()
	fmt.Println("| Workload | Test case | Runs | Avg pods/s | p50 | p90 | vs Basic | vs in-tree | Peak RSS MB | Heap max MB | Notes |")
	fmt.Println("|---|---|---|---|---|---|---|---|---|---|---|")
	for _, k := range sortedKeys(results) {
		r := results[k]
		avgs := bucket(r.throughput, "Average")
		lo, hi := minMax(avgs)
		avg := mean(avgs)
		avgText := f1(avg)
		if len(avgs) > 1 {
			avgText += fmt.Sprintf(" (%s–%s)", f1(lo), f1(hi))
		}
		vsBasic := "–"
		if b := basicOf(k.testCase); b != "" {
			vsBasic = pairedRatio(r, results[key{b, k.workload}])
		}
		vsInTree := "–"
		if it := inTreeOf(k.testCase); it != "" {
			vsInTree = pairedRatio(r, results[key{it, k.workload}])
		}
		runs := len(r.throughput)
		if r.runs > runs {
			runs = r.runs
		}
		var notes []string
		if r.failed > 0 {
			notes = append(notes, fmt.Sprintf("%d/%d runs failed", r.failed, r.runs))
		}
		if note := countersNote(r, podsOf(k.workload)); note != "" {
			notes = append(notes, note)
		}
		if len(r.topology) > 0 {
			notes = append(notes, topologyNote(r.topology))
		}
		if len(r.topologySaturation) > 0 {
			notes = append(notes, topologySaturationNote(r.topologySaturation))
			vsBasic = "–"
		}
		if len(r.gangs) > 0 {
			notes = append(notes, gangsNote(r.gangs))
		}
		if len(r.preemptionWave) > 0 {
			notes = append(notes, preemptionWaveNote(r.preemptionWave))
			vsBasic = "–"
		}
		if len(r.starvation) > 0 {
			notes = append(notes, starvationNote(r.starvation))
			vsBasic = "–"
		}
		if len(r.saturation) > 0 {
			notes = append(notes, saturationNote(r.saturation))
			// The throughput of a saturation run includes the settle time and the infeasible
			// remainder; the saturation note is the measurement.
			vsBasic = "–"
		}
		fmt.Printf("| %s | %s | %d | %s | %s | %s | %s | %s | %s | %s | %s |\n",
			k.workload, k.testCase, runs, avgText,
			f1(mean(bucket(r.throughput, "Perc50"))), f1(mean(bucket(r.throughput, "Perc90"))),
			vsBasic, vsInTree, f1(maxOf(r.peakRSS)), f1(maxOf(r.heapMax)), strings.Join(notes, "; "))
	}

	printCPU(results)

	if len(latency) == 0 {
		return
	}
	fmt.Println()
	fmt.Println("Per-plugin latency (scheduler_plugin_execution_duration_seconds, sampled by the scheduler), µs, mean over runs:")
	fmt.Println()
	fmt.Println("| Workload | Test case | Plugin | Extension point | Avg µs | p50 µs | p90 µs | p99 µs |")
	fmt.Println("|---|---|---|---|---|---|---|---|")
	pks := make([]pluginKey, 0, len(latency))
	for pk := range latency {
		pks = append(pks, pk)
	}
	sort.Slice(pks, func(i, j int) bool {
		a, b := pks[i], pks[j]
		if a.key != b.key {
			if nodes(a.workload) != nodes(b.workload) {
				return nodes(a.workload) < nodes(b.workload)
			}
			if caseRank(a.testCase) != caseRank(b.testCase) {
				return caseRank(a.testCase) < caseRank(b.testCase)
			}
			return a.workload < b.workload
		}
		if a.plugin != b.plugin {
			return a.plugin < b.plugin
		}
		return a.point < b.point
	})
	for _, pk := range pks {
		ds := latency[pk]
		fmt.Printf("| %s | %s | %s | %s | %s | %s | %s | %s |\n", pk.workload, pk.testCase, pk.plugin, pk.point,
			f1(mean(bucket(ds, "Average"))), f1(mean(bucket(ds, "Perc50"))), f1(mean(bucket(ds, "Perc90"))), f1(mean(bucket(ds, "Perc99"))))
	}
}

func maxOf(vs []float64) float64 {
	if len(vs) == 0 {
		return math.NaN()
	}
	_, hi := minMax(vs)
	return hi
}

// topologyNote summarizes where the gangs of Topology* runs landed.
func topologyNote(runs []map[string]float64) string {
	var whole, partial, spread float64
	for _, r := range runs {
		whole += r["BoundGangs"]
		partial = max(partial, r["PartialGangs"])
		spread = max(spread, r["SpreadGangs"])
	}
	return fmt.Sprintf("gangs bound whole %.0f per run, partially bound max %.0f, spread over racks max %.0f", whole/float64(len(runs)), partial, spread)
}

// addGangItem merges one of a Gangs* run's items into the run's map (one per repetition, in order).
func (r *result) addGangItem(rep, metric string, data map[string]float64) {
	prefix := map[string]string{"GangQuorumLatency": "quorum", "NodesPerGang": "nodes"}[metric]
	if r.gangRep == nil {
		r.gangRep = map[string]int{}
	}
	i, ok := r.gangRep[rep]
	if !ok {
		i = len(r.gangs)
		r.gangRep[rep] = i
		r.gangs = append(r.gangs, map[string]float64{})
	}
	for k, v := range data {
		r.gangs[i][prefix+k] = v
	}
}

// gangsNote summarizes where gangs went: nodes per gang, nodes left empty, the time from a gang's
// last member created to its quorum bound, and gangs left partial.
func gangsNote(runs []map[string]float64) string {
	var nodes, empty, q50, qmax, partial []float64
	for _, r := range runs {
		nodes = append(nodes, r["nodesAverage"])
		empty = append(empty, r["EmptyNodes"])
		q50 = append(q50, r["quorumPerc50"])
		qmax = append(qmax, r["quorumMax"])
		partial = append(partial, r["PartialGangs"])
	}
	return fmt.Sprintf("nodes per gang %.1f, empty nodes left %.0f, last member created → quorum bound p50 %.2f s (max %.2f s), partial gangs max %.0f",
		mean(nodes), mean(empty), mean(q50), maxOf(qmax), maxOf(partial))
}

// topologySaturationNote summarizes how many gangs fit when racks fill up, per gang class.
func topologySaturationNote(runs []map[string]float64) string {
	var parts []string
	n := float64(len(runs))
	for _, class := range []string{"Small", "Big", "Fill", "Mid", "Large"} {
		if _, ok := runs[0][class+"Gangs"]; !ok {
			continue
		}
		var bound float64
		for _, r := range runs {
			bound += r[class+"Bound"]
		}
		parts = append(parts, fmt.Sprintf("%.1f of %.0f %s", bound/n, runs[0][class+"Gangs"], strings.ToLower(class)))
	}
	var cpu, partial, spread float64
	for _, r := range runs {
		cpu += r["CPUUsedPercent"]
		partial = max(partial, r["PartialGangs"])
		spread = max(spread, r["SpreadGangs"])
	}
	return fmt.Sprintf("bound whole per run: %s gangs, %.0f%% of CPU used; partially bound max %.0f, spread over racks max %.0f",
		strings.Join(parts, ", "), cpu/n, partial, spread)
}

// preemptionWaveNote summarizes how a wave of high-priority gangs preempted its way in.
func preemptionWaveNote(runs []map[string]float64) string {
	reached, partial := 0, 0.0
	for _, r := range runs {
		if r["Reached"] == 1 {
			reached++
		}
		partial = math.Max(partial, r["PartialLowGangs"])
	}
	secs := bucket(runs, "Seconds")
	lo, hi := minMax(secs)
	return fmt.Sprintf("all %d high-priority gangs bound in %d/%d runs, %ss (%s–%s) to bind them; %s pods evicted per admitted gang; low-priority gangs left partial max %d",
		int(runs[0]["HighGangs"]), reached, len(runs), f1(mean(secs)), f1(lo), f1(hi), f1(mean(bucket(runs, "EvictedPerAdmitted"))), int(partial))
}

// starvationNote summarizes how the large gangs fared against the stream of small pods.
func starvationNote(runs []map[string]float64) string {
	placed, arrived, starved := 0.0, 0.0, 0.0
	for _, r := range runs {
		placed += r["Placed"]
		arrived += r["Arrived"]
		starved += r["Starved"]
	}
	return fmt.Sprintf("%d of %d large gangs placed (%d starved) over %d runs; time to placement p50 %ss, p99 %ss, max %ss; small pods bound %s/s",
		int(placed), int(arrived), int(starved), len(runs), f1(mean(bucket(runs, "PlacementSecondsP50"))), f1(mean(bucket(runs, "PlacementSecondsP99"))),
		f1(maxOf(bucket(runs, "PlacementSecondsMax"))), f1(mean(bucket(runs, "SmallPodsPerSecond"))))
}

func saturationNote(runs []map[string]float64) string {
	secs := bucket(runs, "Seconds")
	rate := bucket(runs, "PodsPerSecond")
	reached, partial := 0, 0.0
	for _, r := range runs {
		if r["Reached"] == 1 {
			reached++
		}
		partial = math.Max(partial, r["PartialGangs"])
	}
	first := runs[0]
	return fmt.Sprintf("all %d feasible of %d gangs bound in %d/%d runs, %ss to bind them (%s pods/s), bound gangs %s, partially bound gangs max %d",
		int(first["FeasibleGangs"]), int(first["DemandGangs"]), reached, len(runs), f1(mean(secs)), f1(mean(rate)),
		f1(mean(bucket(runs, "BoundGangs"))), int(partial))
}

var podsPattern = regexp.MustCompile(`_([0-9]+)Pods`)

// podsOf is the number of pods a workload creates, from its name ("1000Nodes_5000Pods"); 0 if the
// name does not say.
func podsOf(workload string) int {
	m := podsPattern.FindStringSubmatch(workload)
	if m == nil {
		return 0
	}
	n, _ := strconv.Atoi(m[1])
	return n
}

// countersNote gives the apiserver writes per pod (setup included) and the share of scheduling attempts
// that used an opportunistic-batching hint, as means over the runs that recorded them.
func countersNote(r *result, pods int) string {
	var parts []string
	if len(r.writes) > 0 && pods > 0 {
		parts = append(parts, fmt.Sprintf("%.2f apiserver writes per pod", mean(r.writes)/float64(pods)))
	}
	if len(r.batch) > 0 {
		var shares []float64
		for _, b := range r.batch {
			if total := sum(b); total > 0 {
				shares = append(shares, b["hint_used"]/total)
			}
		}
		if len(shares) > 0 {
			parts = append(parts, fmt.Sprintf("batching hint used for %.0f%% of attempts", 100*mean(shares)))
		}
	}
	return strings.Join(parts, ", ")
}

// sum adds up a data item's values.
func sum(data map[string]float64) float64 {
	total := 0.0
	for _, v := range data {
		total += v
	}
	return total
}

// spread formats values as "mean (min–max)", or "–".
func spread(vs []float64, format func(float64) string) string {
	switch len(vs) {
	case 0:
		return "–"
	case 1:
		return format(vs[0])
	}
	lo, hi := minMax(vs)
	return fmt.Sprintf("%s (%s–%s)", format(mean(vs)), format(lo), format(hi))
}

func f2(v float64) string { return strconv.FormatFloat(v, 'f', 2, 64) }

// printCPU lists the CPU spent per 1,000 pods: the whole process tree (in-process apiserver and
// scheduler, the driver, etcd), and that less the Ceiling run of the same size and repetition, which
// creates and binds the same pods with no scheduling: what is left is the scheduler's work. Unlike
// pods/s, a slower or busier machine changes it little.
func printCPU(results map[key]*result) {
	var rows []string
	for _, k := range sortedKeys(results) {
		r, pods := results[k], podsOf(k.workload)
		if len(r.cpuByRep) == 0 || pods == 0 {
			continue
		}
		per := func(cpu float64) float64 { return cpu * 1000 / float64(pods) }
		var total, beyond []float64
		ceiling := ceilingFor(results, k.workload)
		for rep, cpu := range r.cpuByRep {
			total = append(total, per(cpu))
			if c, ok := ceiling.cpuOf(rep); ok && k.testCase != "Ceiling" {
				beyond = append(beyond, per(cpu-c))
			}
		}
		// against is the total CPU of r over other's and the scheduler CPU of r over other's, paired by
		// repetition.
		against := func(other *result) string {
			if other == nil {
				return "–"
			}
			var totals, rs []float64
			for rep, cpu := range r.cpuByRep {
				o, okO := other.cpuOf(rep)
				if !okO || o <= 0 {
					continue
				}
				totals = append(totals, cpu/o)
				if c, okC := ceiling.cpuOf(rep); okC && o-c > 0 {
					rs = append(rs, (cpu-c)/(o-c))
				}
			}
			ratio := func(v float64) string { return f2(v) + "×" }
			return spread(totals, ratio) + " / " + spread(rs, ratio)
		}
		vsBasic, vsInTree := "–", "–"
		if b := basicOf(k.testCase); b != "" && k.testCase != "Ceiling" {
			vsBasic = against(results[key{b, k.workload}])
		}
		if it := inTreeOf(k.testCase); it != "" {
			vsInTree = against(results[key{it, k.workload}])
		}
		rows = append(rows, fmt.Sprintf("| %s | %s | %d | %s | %s | %s | %s |", k.workload, k.testCase, len(r.cpuByRep),
			spread(total, f2), spread(beyond, f2), vsBasic, vsInTree))
	}
	if len(rows) == 0 {
		return
	}
	fmt.Println()
	fmt.Println("CPU-seconds per 1,000 pods (user + system, mean (min–max) over repetitions). Total: the benchmark's process tree (apiserver, scheduler, driver, etcd). Scheduler: total less the Ceiling run of the same size and repetition (same pods created and bound, no scheduling). vs Basic, vs in-tree: total CPU / scheduler CPU over the default profile's, or over in-tree GangScheduling's for our gangs, paired by repetition (above 1: more CPU than the other). The machine's speed drifts between repetitions, so the paired total ratio is the steadiest figure; the scheduler's share is a difference of two noisy totals.")
	fmt.Println()
	fmt.Println("| Workload | Test case | Runs | Total CPU-s/1k pods | Scheduler CPU-s/1k pods | vs Basic | vs in-tree |")
	fmt.Println("|---|---|---|---|---|---|---|")
	for _, row := range rows {
		fmt.Println(row)
	}
}

// ceilingFor is the Ceiling run with the same nodes and pods as workload (its name may differ, e.g.
// 1000Nodes_1000Gangs_5000Pods and 1000Nodes_5000Pods).
func ceilingFor(results map[key]*result, workload string) *result {
	if r := results[key{"Ceiling", workload}]; r != nil {
		return r
	}
	for k, r := range results {
		if k.testCase == "Ceiling" && nodes(k.workload) == nodes(workload) && podsOf(k.workload) == podsOf(workload) {
			return r
		}
	}
	return nil
}

func (r *result) cpuOf(rep string) (float64, bool) {
	if r == nil {
		return 0, false
	}
	v, ok := r.cpuByRep[rep]
	return v, ok
}
