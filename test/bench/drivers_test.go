//go:build bench

package bench

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"
	perf "k8s.io/kubernetes/test/integration/scheduler_perf"
	"k8s.io/kubernetes/test/utils/client-go/ktesting"
)

const (
	// gangLabel is set by every gang pod template (ours and in-tree) to its gang's name.
	gangLabel = "bench-gang"
	// gangNamespace is where the gang workloads create their pods (createNamespaces prefix gang-ns).
	gangNamespace = "gang-ns-0"
	// ceilingSchedulerName is the schedulerName of the Ceiling workload's pods: no profile has it, so
	// the scheduler leaves them to the harness' binder.
	ceilingSchedulerName = "bench-ceiling"
)

// checkOutcome fails the benchmark when one of our workloads (test cases named *Custom) broke what it
// must keep, however fast or slow the run was: a gang left partially bound, a gang spread over racks
// against its required topology, or the gangs that fit not all bound before the workload's deadline
// (generous: minutes at the smoke size). For in-tree cases the same findings are only logged: upstream's
// behaviour is recorded, not gated on.
func checkOutcome(tCtx ktesting.TContext, name string, data map[string]float64) {
	var broken []string
	for _, k := range []string{"PartialGangs", "PartialLowGangs", "SpreadGangs"} {
		if data[k] > 0 {
			broken = append(broken, fmt.Sprintf("%s=%v", k, data[k]))
		}
	}
	if v, ok := data["Reached"]; ok && v == 0 {
		broken = append(broken, "the gangs that fit were not all bound before the deadline")
	}
	if len(broken) == 0 {
		return
	}
	if strings.Contains(name, "Custom") {
		tCtx.Errorf("%s: %s", name, strings.Join(broken, "; "))
		return
	}
	tCtx.Logf("%s (in-tree, not gated): %s", name, strings.Join(broken, "; "))
}

// startSaturationWatcher measures a saturation workload: gangs × podsPerGroup pods of gangs whose pods
// take 1/slotsPerNode of a node each, on initNodes nodes, so exactly
// feasible = initNodes*slotsPerNode/podsPerGroup gangs fit. It records the time from the first pod's
// creation until feasible gangs' pods are all bound, then waits settleSeconds and counts gangs bound
// in part (which must be 0). It gives up after deadlineSeconds. To end the workload (its barrier waits
// for every pod to be scheduled, and the infeasible gangs never are) it then creates one pre-bound
// placeholder pod per unbound pod; they carry no gang label and are created after the measurement.
func startSaturationWatcher(tCtx ktesting.TContext, w *perf.Workload) error {
	nodes := param(w, "initNodes", 0)
	gangs := param(w, "gangs", 0)
	size := param(w, "podsPerGroup", 0)
	slots := param(w, "slotsPerNode", 4)
	settle := time.Duration(param(w, "settleSeconds", 3)) * time.Second
	deadline := time.Duration(param(w, "deadlineSeconds", 300)) * time.Second
	if nodes <= 0 || gangs <= 0 || size <= 0 {
		return fmt.Errorf("saturation workload needs initNodes, gangs and podsPerGroup")
	}
	feasible := min(nodes*slots/size, gangs)
	wantBound := feasible * size
	name := tCtx.Name()

	ctx, cancel := context.WithCancel(tCtx)
	factory := informers.NewSharedInformerFactoryWithOptions(tCtx.Client(), 0, informers.WithNamespace(gangNamespace))
	podInformer := factory.Core().V1().Pods().Informer()

	var (
		mu         sync.Mutex
		start      time.Time
		reachedAt  time.Time
		lastBindAt time.Time
		bound      = map[string]int{}
		boundPods  = map[string]bool{}
	)
	observe := func(pod *v1.Pod, deleted bool) {
		if deleted {
			return
		}
		gang := pod.Labels[gangLabel]
		now := time.Now()
		mu.Lock()
		defer mu.Unlock()
		if start.IsZero() {
			start = now
		}
		if pod.Spec.NodeName == "" || boundPods[pod.Name] {
			return
		}
		boundPods[pod.Name] = true
		bound[gang]++
		lastBindAt = now
		if len(boundPods) == wantBound && reachedAt.IsZero() {
			reachedAt = now
		}
	}
	if _, err := podInformer.AddEventHandler(onGangPods(observe)); err != nil {
		cancel()
		return err
	}
	factory.Start(ctx.Done())

	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		ticker := time.NewTicker(100 * time.Millisecond)
		defer ticker.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-ticker.C:
			}
			mu.Lock()
			now := time.Now()
			done := (!reachedAt.IsZero() && now.Sub(reachedAt) >= settle) ||
				(!start.IsZero() && now.Sub(start) >= deadline)
			if !done {
				mu.Unlock()
				continue
			}
			full, partial := 0, 0
			for _, n := range bound {
				switch {
				case n >= size:
					full++
				case n > 0:
					partial++
				}
			}
			data := map[string]float64{
				"FeasibleGangs": float64(feasible),
				"DemandGangs":   float64(gangs),
				"BoundGangs":    float64(full),
				"PartialGangs":  float64(partial),
				"BoundPods":     float64(len(boundPods)),
				"Reached":       0,
			}
			if !reachedAt.IsZero() {
				secs := reachedAt.Sub(start).Seconds()
				data["Reached"] = 1
				data["Seconds"] = secs
				data["PodsPerSecond"] = float64(wantBound) / secs
			} else {
				data["Seconds"] = now.Sub(start).Seconds()
				data["LastBindSeconds"] = lastBindAt.Sub(start).Seconds()
			}
			missing := gangs*size - len(boundPods)
			mu.Unlock()
			writeExtra(name, map[string]any{"Metric": "SaturationFeasibleBound"}, "s", data)
			checkOutcome(tCtx, name, data)
			tCtx.Logf("saturation: %v", data)
			createPlaceholders(ctx, tCtx, gangNamespace, missing)
			return
		}
	}()
	tCtx.Cleanup(func() {
		cancel()
		wg.Wait()
		factory.Shutdown()
	})
	return nil
}

// onGangPods is an informer handler that passes the gang pods (those labelled gangLabel) of every add,
// update and delete (tombstones unwrapped) to observe.
func onGangPods(observe func(pod *v1.Pod, deleted bool)) cache.ResourceEventHandler {
	call := func(obj any, deleted bool) {
		if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
			obj = tomb.Obj
		}
		if pod, ok := obj.(*v1.Pod); ok && pod.Labels[gangLabel] != "" {
			observe(pod, deleted)
		}
	}
	return cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { call(obj, false) },
		UpdateFunc: func(_, obj any) { call(obj, false) },
		DeleteFunc: func(obj any) { call(obj, true) },
	}
}

// highWaveNamespace is where a PreemptionWave workload creates its high-priority gangs (gang-ns-1);
// the low-priority wave is in gangNamespace.
const highWaveNamespace = "gang-ns-1"

// startPreemptionWaveWatcher measures a PreemptionWave workload: lowGangs gangs of podsPerGroup
// low-priority pods fill the cluster, then highGangs gangs of high-priority pods of the same shape
// arrive and must preempt. It records the time from the first high-priority pod until every
// high-priority pod is bound, the low-priority pods deleted meanwhile (evicted) per high-priority gang
// admitted, and, settleSeconds later, the low-priority gangs left with some but not all of their pods
// bound and live (must be 0). It gives up after deadlineSeconds, creating placeholders for the
// high-priority pods never bound so that the workload's barrier is met.
func startPreemptionWaveWatcher(tCtx ktesting.TContext, w *perf.Workload) error {
	lowGangs := param(w, "lowGangs", 0)
	highGangs := param(w, "highGangs", 0)
	size := param(w, "podsPerGroup", 0)
	settle := time.Duration(param(w, "settleSeconds", 3)) * time.Second
	deadline := time.Duration(param(w, "deadlineSeconds", 300)) * time.Second
	if lowGangs <= 0 || highGangs <= 0 || size <= 0 {
		return fmt.Errorf("preemption wave workload needs lowGangs, highGangs and podsPerGroup")
	}
	wantHigh := highGangs * size
	name := tCtx.Name()

	ctx, cancel := context.WithCancel(tCtx)
	factory := informers.NewSharedInformerFactory(tCtx.Client(), 0)
	podInformer := factory.Core().V1().Pods().Informer()
	var (
		mu        sync.Mutex
		start     time.Time
		reachedAt time.Time
		highBound = map[string]string{} // pod → gang
		lowLive   = map[string]map[string]bool{}
		evicted   int
	)
	observe := func(pod *v1.Pod, deleted bool) {
		gang := pod.Labels[gangLabel]
		now := time.Now()
		mu.Lock()
		defer mu.Unlock()
		switch pod.Namespace {
		case highWaveNamespace:
			if start.IsZero() {
				start = now
			}
			if pod.Spec.NodeName != "" && !deleted {
				highBound[pod.Name] = gang
				if len(highBound) == wantHigh && reachedAt.IsZero() {
					reachedAt = now
				}
			}
		case gangNamespace:
			if deleted && !reachedAt.IsZero() {
				// Every high-priority gang is bound: no preemption is left to make, and pods deleted
				// now are the harness tearing the workload down.
				return
			}
			live := !deleted && pod.Spec.NodeName != "" && pod.DeletionTimestamp == nil
			if lowLive[gang] == nil {
				lowLive[gang] = map[string]bool{}
			}
			if live {
				lowLive[gang][pod.Name] = true
			} else {
				delete(lowLive[gang], pod.Name)
			}
			if deleted {
				evicted++
			}
		}
	}
	if _, err := podInformer.AddEventHandler(onGangPods(observe)); err != nil {
		cancel()
		return err
	}
	factory.Start(ctx.Done())

	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		// Until every high-priority pod is bound (or the deadline), then settleSeconds more to count
		// partial low-priority gangs. The workload may end meanwhile (its barrier is met once the
		// high-priority pods are bound): the result is still reported, from the cleanup's wait.
		_ = wait.PollUntilContextCancel(ctx, 100*time.Millisecond, false, func(context.Context) (bool, error) {
			mu.Lock()
			defer mu.Unlock()
			return !reachedAt.IsZero() || (!start.IsZero() && time.Since(start) >= deadline), nil
		})
		select {
		case <-ctx.Done():
		case <-time.After(settle):
		}
		mu.Lock()
		gangs := map[string]int{}
		for _, g := range highBound {
			gangs[g]++
		}
		admitted := 0
		for _, n := range gangs {
			if n >= size {
				admitted++
			}
		}
		partial := 0
		for _, pods := range lowLive {
			if n := len(pods); n > 0 && n < size {
				partial++
			}
		}
		data := map[string]float64{
			"HighGangs":          float64(highGangs),
			"AdmittedGangs":      float64(admitted),
			"EvictedPods":        float64(evicted),
			"PartialLowGangs":    float64(partial),
			"LowGangs":           float64(lowGangs),
			"Reached":            0,
			"Seconds":            time.Since(start).Seconds(),
			"EvictedPerAdmitted": 0,
		}
		if !reachedAt.IsZero() {
			data["Reached"] = 1
			data["Seconds"] = reachedAt.Sub(start).Seconds()
		}
		if admitted > 0 {
			data["EvictedPerAdmitted"] = float64(evicted) / float64(admitted)
		}
		missing := wantHigh - len(highBound)
		mu.Unlock()
		writeExtra(name, map[string]any{"Metric": "PreemptionWave"}, "s", data)
		checkOutcome(tCtx, name, data)
		tCtx.Logf("preemption wave: %v", data)
		if missing > 0 {
			createPlaceholders(ctx, tCtx, highWaveNamespace, missing)
		}
	}()
	tCtx.Cleanup(func() {
		cancel()
		wg.Wait()
		factory.Shutdown()
	})
	return nil
}

// title is a gang class as a data key prefix: "small" → "Small".
func title(class string) string { return strings.ToUpper(class[:1]) + class[1:] }

// createPlaceholders creates n pods already bound to a node, without requests, so that the
// workload's barrier (every pod created in the namespace scheduled) is met.
func createPlaceholders(ctx context.Context, tCtx ktesting.TContext, namespace string, n int) {
	nodes, err := tCtx.Client().CoreV1().Nodes().List(ctx, metav1.ListOptions{Limit: 1})
	if err != nil || len(nodes.Items) == 0 {
		tCtx.Logf("saturation: no node for placeholders: %v", err)
		return
	}
	node := nodes.Items[0].Name
	var next atomic.Int64
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := next.Add(1); i <= int64(n); i = next.Add(1) {
				pod := &v1.Pod{
					ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("placeholder-%d", i), Labels: map[string]string{"bench-placeholder": "true"}},
					Spec: v1.PodSpec{
						NodeName:      node,
						SchedulerName: ceilingSchedulerName,
						Containers:    []v1.Container{{Name: "pause", Image: "registry.k8s.io/pause:3.10.1"}},
					},
				}
				if _, err := tCtx.Client().CoreV1().Pods(namespace).Create(ctx, pod, metav1.CreateOptions{}); err != nil && ctx.Err() == nil {
					tCtx.Logf("saturation: creating a placeholder: %v", err)
				}
			}
		}()
	}
	wg.Wait()
}

// startBinder binds every pod whose schedulerName is bench-ceiling, round-robin over the nodes, with
// binders parallel workers (default 16) and no scheduling work at all: the rate at which the same
// apiserver accepts bindings, measured by scheduler_perf's own throughput collector.
func startBinder(tCtx ktesting.TContext, w *perf.Workload) error {
	workers := param(w, "binders", 16)
	ctx, cancel := context.WithCancel(tCtx)
	factory := informers.NewSharedInformerFactory(tCtx.Client(), 0)
	nodeLister := factory.Core().V1().Nodes().Lister()
	podInformer := factory.Core().V1().Pods().Informer()
	queue := make(chan *v1.Pod, 1<<17)
	if _, err := podInformer.AddEventHandler(cache.FilteringResourceEventHandler{
		FilterFunc: func(obj any) bool {
			pod, ok := obj.(*v1.Pod)
			return ok && pod.Spec.SchedulerName == ceilingSchedulerName && pod.Spec.NodeName == ""
		},
		Handler: cache.ResourceEventHandlerFuncs{AddFunc: func(obj any) {
			select {
			case queue <- obj.(*v1.Pod):
			case <-ctx.Done():
			}
		}},
	}); err != nil {
		cancel()
		return err
	}
	factory.Start(ctx.Done())
	factory.WaitForCacheSync(ctx.Done())

	var (
		next   atomic.Uint64
		errors atomic.Int64
		wg     sync.WaitGroup
	)
	var nodeNames []string
	var nodesOnce sync.Mutex
	pickNode := func() string {
		nodesOnce.Lock()
		defer nodesOnce.Unlock()
		if len(nodeNames) == 0 {
			nodes, _ := nodeLister.List(labels.Everything())
			for _, n := range nodes {
				nodeNames = append(nodeNames, n.Name)
			}
			if len(nodeNames) == 0 {
				return ""
			}
		}
		return nodeNames[next.Add(1)%uint64(len(nodeNames))]
	}
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-ctx.Done():
					return
				case pod := <-queue:
					binding := &v1.Binding{
						ObjectMeta: metav1.ObjectMeta{Namespace: pod.Namespace, Name: pod.Name, UID: pod.UID},
						Target:     v1.ObjectReference{Kind: "Node", Name: pickNode()},
					}
					if err := tCtx.Client().CoreV1().Pods(pod.Namespace).Bind(ctx, binding, metav1.CreateOptions{}); err != nil && ctx.Err() == nil {
						if errors.Add(1) <= 5 {
							tCtx.Logf("ceiling: binding %s/%s: %v", pod.Namespace, pod.Name, err)
						}
					}
				}
			}
		}()
	}
	tCtx.Cleanup(func() {
		cancel()
		wg.Wait()
		factory.Shutdown()
		if n := errors.Load(); n > 0 {
			tCtx.Logf("ceiling: %d bindings failed", n)
		}
	})
	return nil
}

// nodesPerRack is the rack size of config/templates/node-racked.yaml (node-<i> is in rack-<i/40>).
const nodesPerRack = 40

// gangRacks records, per gang, how many of its pods were bound in each rack.
type gangRacks struct {
	// rackOf is the rack of node-<i>, as the workload's node template labels it.
	rackOf func(i int) int
	pods   map[string]map[int]int
}

// racksOf returns the rack layout of a workload's node template: config/templates/node-racked.yaml
// (racks of nodesPerRack), or node-racked-mixed.yaml when the workload sets bigNodes (bigNodes nodes in
// racks of bigRack, then racks of smallRack).
func racksOf(w *perf.Workload) gangRacks {
	rackOf := func(i int) int { return i / nodesPerRack }
	if bigNodes := param(w, "bigNodes", 0); bigNodes > 0 {
		bigRack, smallRack := max(param(w, "bigRack", 1), 1), max(param(w, "smallRack", 1), 1)
		rackOf = func(i int) int {
			if i < bigNodes {
				return i / bigRack
			}
			return (bigNodes+bigRack-1)/bigRack + (i-bigNodes)/smallRack
		}
	}
	return gangRacks{rackOf: rackOf, pods: map[string]map[int]int{}}
}

// add records a pod of gang bound to nodeName (node-<i>); it returns false for a node that is not one
// of the workload's.
func (g gangRacks) add(gang, nodeName string) bool {
	var index int
	if _, err := fmt.Sscanf(nodeName, "node-%d", &index); err != nil {
		return false
	}
	if g.pods[gang] == nil {
		g.pods[gang] = map[int]int{}
	}
	g.pods[gang][g.rackOf(index)]++
	return true
}

// count returns how many pods of the gang were bound, and in how many racks.
func (g gangRacks) count(gang string) (pods, racks int) {
	for _, n := range g.pods[gang] {
		pods += n
	}
	return pods, len(g.pods[gang])
}

// startTopologyWatcher records, for a Topology* workload, where each gang's pods were bound: when the
// workload ends, how many gangs are bound whole, in part, and across more than one rack (which a
// required rack must never allow). The rack is derived from the node's name (node-<i>).
func startTopologyWatcher(tCtx ktesting.TContext, w *perf.Workload) error {
	size := param(w, "podsPerGroup", 0)
	if size <= 0 {
		return fmt.Errorf("topology workload needs podsPerGroup")
	}
	name := tCtx.Name()
	ctx, cancel := context.WithCancel(tCtx)
	factory := informers.NewSharedInformerFactoryWithOptions(tCtx.Client(), 0, informers.WithNamespace(gangNamespace))
	podInformer := factory.Core().V1().Pods().Informer()
	var (
		mu    sync.Mutex
		racks = racksOf(w)
		seen  = map[string]bool{}
	)
	observe := func(pod *v1.Pod, deleted bool) {
		if deleted || pod.Spec.NodeName == "" {
			return
		}
		mu.Lock()
		defer mu.Unlock()
		if !seen[pod.Name] && racks.add(pod.Labels[gangLabel], pod.Spec.NodeName) {
			seen[pod.Name] = true
		}
	}
	if _, err := podInformer.AddEventHandler(onGangPods(observe)); err != nil {
		cancel()
		return err
	}
	factory.Start(ctx.Done())
	tCtx.Cleanup(func() {
		mu.Lock()
		whole, partial, spread := 0, 0, 0
		for gang := range racks.pods {
			n, inRacks := racks.count(gang)
			if n >= size {
				whole++
			} else if n > 0 {
				partial++
			}
			if inRacks > 1 {
				spread++
			}
		}
		mu.Unlock()
		data := map[string]float64{"BoundGangs": float64(whole), "PartialGangs": float64(partial), "SpreadGangs": float64(spread)}
		writeExtra(name, map[string]any{"Metric": "TopologyPlacement"}, "gangs", data)
		checkOutcome(tCtx, name, data)
		tCtx.Logf("topology placement: %v", data)
		cancel()
		factory.Shutdown()
	})
	return nil
}

// gangClasses are the gang name prefixes of the topology saturation workloads; a workload sets
// <prefix>Gangs and <prefix>Size for those it creates.
var gangClasses = []string{"small", "big", "fill", "mid", "large"}

// startTopologySaturationWatcher measures a TopologySaturation* workload: gangs of 1-CPU pods in
// classes (e.g. smallGangs of smallSize, then bigGangs of bigSize), each gang required in one rack,
// more than the racks hold. Once every pod exists and no pod was bound for settleSeconds (or after deadlineSeconds), it
// records the gangs bound whole by size, the gangs bound in part or spread over racks (both must be
// 0) and the share of the cluster's CPU used, then creates pre-bound placeholders for the pods left
// pending so that the workload's barrier is met.
func startTopologySaturationWatcher(tCtx ktesting.TContext, w *perf.Workload) error {
	nodes := param(w, "initNodes", 0)
	settle := time.Duration(param(w, "settleSeconds", 10)) * time.Second
	deadline := time.Duration(param(w, "deadlineSeconds", 300)) * time.Second
	sizes := map[string]int{}
	counts := map[string]int{}
	total := 0
	for _, c := range gangClasses {
		if g, n := param(w, c+"Gangs", 0), param(w, c+"Size", 0); g > 0 && n > 0 {
			sizes[c], counts[c] = n, g
			total += g * n
		}
	}
	if nodes <= 0 || total <= 0 {
		return fmt.Errorf("topology saturation workload needs initNodes and <class>Gangs, <class>Size for classes %v", gangClasses)
	}
	name := tCtx.Name()
	ctx, cancel := context.WithCancel(tCtx)
	// All namespaces: a workload in waves puts each wave in its own namespace (gang-ns-<i>), so that
	// the barrier after the last wave counts that wave's pods only.
	factory := informers.NewSharedInformerFactory(tCtx.Client(), 0)
	podInformer := factory.Core().V1().Pods().Informer()
	var (
		mu        sync.Mutex
		start     time.Time
		lastBind  time.Time
		created   = map[string]bool{}
		boundPods = map[string]bool{}
		racks     = racksOf(w)
	)
	observe := func(pod *v1.Pod, deleted bool) {
		if deleted {
			return
		}
		mu.Lock()
		defer mu.Unlock()
		now := time.Now()
		if start.IsZero() {
			start = now
		}
		key := pod.Namespace + "/" + pod.Name
		created[key] = true
		if pod.Spec.NodeName == "" || boundPods[key] || !racks.add(pod.Labels[gangLabel], pod.Spec.NodeName) {
			return
		}
		boundPods[key] = true
		lastBind = now
	}
	if _, err := podInformer.AddEventHandler(onGangPods(observe)); err != nil {
		cancel()
		return err
	}
	factory.Start(ctx.Done())

	// record writes the measurement once: when binding stopped, or when the workload ended first
	// (every gang fitted). It returns the number of pods left pending.
	var once sync.Once
	record := func() (missing map[string]int) {
		once.Do(func() {
			mu.Lock()
			defer mu.Unlock()
			data := map[string]float64{"PartialGangs": 0, "SpreadGangs": 0, "BoundPods": float64(len(boundPods)),
				"CPUUsedPercent": 100 * float64(len(boundPods)) / float64(nodes*4), "Seconds": lastBind.Sub(start).Seconds()}
			for c, g := range counts {
				data[title(c)+"Gangs"], data[title(c)+"Bound"] = float64(g), 0
			}
			for gang := range racks.pods {
				n, inRacks := racks.count(gang)
				class, _, _ := strings.Cut(gang, "-")
				size, key := sizes[class], title(class)+"Bound"
				switch {
				case n >= size:
					data[key]++
				case n > 0:
					data["PartialGangs"]++
				}
				if inRacks > 1 {
					data["SpreadGangs"]++
				}
			}
			missing = map[string]int{}
			for key := range created {
				if !boundPods[key] {
					ns, _, _ := strings.Cut(key, "/")
					missing[ns]++
				}
			}
			writeExtra(name, map[string]any{"Metric": "TopologySaturation"}, "gangs", data)
			checkOutcome(tCtx, name, data)
			tCtx.Logf("topology saturation: %v", data)
		})
		return missing
	}

	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		err := wait.PollUntilContextCancel(ctx, 200*time.Millisecond, false, func(context.Context) (bool, error) {
			mu.Lock()
			defer mu.Unlock()
			last := start
			if lastBind.After(last) {
				last = lastBind
			}
			idle := len(created) == total && time.Since(last) >= settle
			return !start.IsZero() && (idle || time.Since(start) >= deadline), nil
		})
		if err == nil {
			for ns, n := range record() {
				createPlaceholders(ctx, tCtx, ns, n)
			}
		}
	}()
	tCtx.Cleanup(func() {
		cancel()
		wg.Wait()
		factory.Shutdown()
		record()
	})
	return nil
}

// startGangWatcher measures a Gangs* workload (gangs of podsPerGroup pods, minMember podsPerGroup, on
// initNodes identical nodes): for each gang, the time from its last member's creation (as this
// watcher's informer sees it) until the member that completes its quorum is bound; the nodes each gang
// uses; and, once the workload ends, the nodes no gang pod is on (whole nodes left for a next gang:
// the fragmentation a placement leaves). Gangs bound in part at the end are counted (must be 0).
func startGangWatcher(tCtx ktesting.TContext, w *perf.Workload) error {
	size := param(w, "podsPerGroup", 0)
	nodes := param(w, "initNodes", 0)
	if size <= 0 {
		return fmt.Errorf("gang workload needs podsPerGroup")
	}
	name := tCtx.Name()
	ctx, cancel := context.WithCancel(tCtx)
	factory := informers.NewSharedInformerFactoryWithOptions(tCtx.Client(), 0, informers.WithNamespace(gangNamespace))
	podInformer := factory.Core().V1().Pods().Informer()
	type gangSeen struct {
		created     int
		lastCreated time.Time
		bound       int
		quorum      time.Duration
		nodes       map[string]bool
	}
	var (
		mu        sync.Mutex
		gangs     = map[string]*gangSeen{}
		seen      = map[string]bool{}
		boundSeen = map[string]bool{}
		used      = map[string]bool{}
	)
	observe := func(pod *v1.Pod, deleted bool) {
		if deleted {
			return
		}
		now := time.Now()
		mu.Lock()
		defer mu.Unlock()
		g := gangs[pod.Labels[gangLabel]]
		if g == nil {
			g = &gangSeen{nodes: map[string]bool{}}
			gangs[pod.Labels[gangLabel]] = g
		}
		if !seen[pod.Name] {
			seen[pod.Name] = true
			g.created++
			g.lastCreated = now
		}
		if pod.Spec.NodeName != "" && !boundSeen[pod.Name] {
			boundSeen[pod.Name] = true
			g.bound++
			g.nodes[pod.Spec.NodeName] = true
			used[pod.Spec.NodeName] = true
			if g.bound == size && g.created == size {
				g.quorum = now.Sub(g.lastCreated)
			}
		}
	}
	if _, err := podInformer.AddEventHandler(onGangPods(observe)); err != nil {
		cancel()
		return err
	}
	factory.Start(ctx.Done())
	tCtx.Cleanup(func() {
		mu.Lock()
		var quorum, perGang []float64
		partial := 0
		for _, g := range gangs {
			if g.bound >= size {
				quorum = append(quorum, g.quorum.Seconds())
				perGang = append(perGang, float64(len(g.nodes)))
			} else if g.bound > 0 {
				partial++
			}
		}
		empty := nodes - len(used)
		mu.Unlock()
		if len(quorum) > 0 {
			writeExtra(name, map[string]any{"Metric": "GangQuorumLatency"}, "s", summary(quorum))
			writeExtra(name, map[string]any{"Metric": "NodesPerGang"}, "nodes", summary(perGang))
		}
		data := map[string]float64{"PartialGangs": float64(partial), "EmptyNodes": float64(empty)}
		writeExtra(name, map[string]any{"Metric": "GangPlacement"}, "count", data)
		checkOutcome(tCtx, name, data)
		tCtx.Logf("gang placement: %v; quorum after the last member (s): %v; nodes per gang: %v", data, summary(quorum), summary(perGang))
		cancel()
		factory.Shutdown()
	})
	return nil
}

// summary is the mean, median and max of vs, in scheduler_perf's data item keys.
func summary(vs []float64) map[string]float64 {
	if len(vs) == 0 {
		return map[string]float64{}
	}
	s := slices.Clone(vs)
	slices.Sort(s)
	var sum float64
	for _, v := range s {
		sum += v
	}
	return map[string]float64{"Average": sum / float64(len(s)), "Perc50": s[len(s)/2], "Perc90": s[len(s)*9/10], "Max": s[len(s)-1]}
}
