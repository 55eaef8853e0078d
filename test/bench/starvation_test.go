//go:build bench

package bench

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	perf "k8s.io/kubernetes/test/integration/scheduler_perf"
	"k8s.io/kubernetes/test/utils/client-go/ktesting"
	"k8s.io/utils/ptr"
)

// startStarvationDriver drives a Starvation workload: a stream of short plain pods (smallPerSecond
// pods of 1 CPU a second, each deleted smallLifetimeMillis after it is bound, as a kubelet would once
// it finished) keeps the initNodes nodes busy, and gangs large gangs of gangSize 1-CPU members arrive
// every gangIntervalSeconds, from warmupSeconds on; each is deleted gangLifetimeSeconds after it is
// placed whole (its job ends). It records each gang's time from arrival to all its members bound
// (p50, p99, max), how many were placed before runSeconds ended, and the small pods bound per second
// over the run. The workload's sleep op lasts runSeconds; the driver stops the stream before it ends.
// Custom cases use our PodGroups and scheduler; InTree cases the in-tree PodGroup (GenericWorkload)
// and the default scheduler.
func startStarvationDriver(tCtx ktesting.TContext, w *perf.Workload) error {
	run := time.Duration(param(w, "runSeconds", 60)) * time.Second
	rate := param(w, "smallPerSecond", 10)
	lifetime := time.Duration(param(w, "smallLifetimeMillis", 4000)) * time.Millisecond
	gangs := param(w, "gangs", 1)
	size := param(w, "gangSize", 8)
	interval := time.Duration(param(w, "gangIntervalSeconds", 10)) * time.Second
	warmup := time.Duration(param(w, "warmupSeconds", 5)) * time.Second
	gangLifetime := time.Duration(param(w, "gangLifetimeSeconds", 10)) * time.Second
	param(w, "initNodes", 0)
	name := tCtx.Name()
	inTree := strings.Contains(testCaseName(name), "InTree")
	scheduler := "custom-scheduler"
	if inTree {
		scheduler = v1.DefaultSchedulerName
	}
	client := tCtx.Client()
	dyn, err := dynamic.NewForConfig(tCtx.RESTConfig())
	if err != nil {
		return err
	}

	ctx, cancel := context.WithCancel(tCtx)
	factory := informers.NewSharedInformerFactoryWithOptions(client, 0, informers.WithNamespace(gangNamespace))
	podInformer := factory.Core().V1().Pods().Informer()
	var (
		mu         sync.Mutex
		start      = time.Now()
		smallBound = map[string]time.Time{}
		arrived    = map[string]time.Time{}
		bound      = map[string]map[string]bool{}
		placedAt   = map[string]time.Time{}
	)
	deleteLater := func(names []string, after time.Duration) {
		time.AfterFunc(after, func() {
			for _, n := range names {
				_ = client.CoreV1().Pods(gangNamespace).Delete(context.Background(), n, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)})
			}
		})
	}
	observe := func(_, obj any) {
		pod, ok := obj.(*v1.Pod)
		if !ok || pod.Spec.NodeName == "" {
			return
		}
		now := time.Now()
		mu.Lock()
		defer mu.Unlock()
		if gang := pod.Labels[gangLabel]; gang != "" {
			if bound[gang] == nil {
				bound[gang] = map[string]bool{}
			}
			bound[gang][pod.Name] = true
			if len(bound[gang]) == size && placedAt[gang].IsZero() {
				placedAt[gang] = now
				var names []string
				for n := range bound[gang] {
					names = append(names, n)
				}
				deleteLater(names, gangLifetime)
			}
			return
		}
		if _, seen := smallBound[pod.Name]; !seen && strings.HasPrefix(pod.Name, "small-") {
			smallBound[pod.Name] = now
			deleteLater([]string{pod.Name}, lifetime)
		}
	}
	if _, err := podInformer.AddEventHandler(cache.ResourceEventHandlerFuncs{AddFunc: func(obj any) { observe(nil, obj) }, UpdateFunc: observe}); err != nil {
		cancel()
		return err
	}
	factory.Start(ctx.Done())

	var wg sync.WaitGroup
	wg.Add(2)
	go func() { // the stream of small pods
		defer wg.Done()
		tick := time.NewTicker(time.Second / time.Duration(max(rate, 1)))
		defer tick.Stop()
		for i := 0; ; i++ {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			if time.Since(start) >= run-2*time.Second {
				return
			}
			p := benchPod(fmt.Sprintf("small-%d", i), scheduler, nil)
			_, _ = client.CoreV1().Pods(gangNamespace).Create(ctx, p, metav1.CreateOptions{})
		}
	}()
	go func() { // the gangs
		defer wg.Done()
		select {
		case <-ctx.Done():
			return
		case <-time.After(warmup):
		}
		for g := range gangs {
			gang := fmt.Sprintf("big-%d", g)
			if err := createBenchGang(ctx, dyn, client, gang, size, scheduler, inTree); err != nil {
				tCtx.Errorf("starvation: creating gang %s: %v", gang, err)
				return
			}
			mu.Lock()
			arrived[gang] = time.Now()
			mu.Unlock()
			select {
			case <-ctx.Done():
				return
			case <-time.After(interval):
			}
		}
	}()
	time.AfterFunc(run-time.Second, func() {
		mu.Lock()
		var waits []float64
		starved := 0
		for gang, at := range arrived {
			if p := placedAt[gang]; !p.IsZero() {
				waits = append(waits, p.Sub(at).Seconds())
			} else {
				starved++
			}
		}
		sort.Float64s(waits)
		small := float64(len(smallBound)) / time.Since(start).Seconds()
		mu.Unlock()
		data := map[string]float64{
			"Gangs":               float64(gangs),
			"Arrived":             float64(len(arrived)),
			"Placed":              float64(len(waits)),
			"Starved":             float64(starved),
			"SmallPodsPerSecond":  small,
			"Reached":             0,
			"PlacementSecondsP50": percentile(waits, 50),
			"PlacementSecondsP99": percentile(waits, 99),
			"PlacementSecondsMax": percentile(waits, 100),
		}
		if starved == 0 && len(arrived) == gangs {
			data["Reached"] = 1
		}
		writeExtra(name, map[string]any{"Metric": "Starvation"}, "s", data)
		checkOutcome(tCtx, name, data)
		tCtx.Logf("starvation: %v", data)
	})
	tCtx.Cleanup(func() {
		cancel()
		wg.Wait()
		factory.Shutdown()
	})
	return nil
}

// percentile is the p-th percentile (nearest rank) of sorted values, 0 for none.
func percentile(sorted []float64, p int) float64 {
	if len(sorted) == 0 {
		return 0
	}
	i := (p*len(sorted) + 99) / 100
	return sorted[min(max(i, 1), len(sorted))-1]
}

// benchPod is a pod of 1 CPU for the scheduler named, in the gang namespace.
func benchPod(name, scheduler string, labels map[string]string) *v1.Pod {
	return &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels},
		Spec: v1.PodSpec{
			SchedulerName: scheduler,
			Containers: []v1.Container{{Name: "pause", Image: "registry.k8s.io/pause:3.10.1", Resources: v1.ResourceRequirements{
				Requests: v1.ResourceList{v1.ResourceCPU: resource.MustParse("1"), v1.ResourceMemory: resource.MustParse("100Mi")},
			}}},
		},
	}
}

// createBenchGang creates a PodGroup of size and its members: ours (scheduling.x-k8s.io) or the
// in-tree one (scheduling.k8s.io/v1beta1, gang.minCount, pod.spec.schedulingGroup).
func createBenchGang(ctx context.Context, dyn dynamic.Interface, client kubernetes.Interface, gang string, size int, scheduler string, inTree bool) error {
	gvr := schema.GroupVersionResource{Group: "scheduling.x-k8s.io", Version: "v1alpha1", Resource: "podgroups"}
	spec := map[string]any{"minMember": int64(size)}
	if inTree {
		gvr = schema.GroupVersionResource{Group: "scheduling.k8s.io", Version: "v1beta1", Resource: "podgroups"}
		spec = map[string]any{"schedulingPolicy": map[string]any{"gang": map[string]any{"minCount": int64(size)}}}
	}
	pg := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": gvr.GroupVersion().String(), "kind": "PodGroup",
		"metadata": map[string]any{"name": gang, "namespace": gangNamespace}, "spec": spec,
	}}
	if _, err := dyn.Resource(gvr).Namespace(gangNamespace).Create(ctx, pg, metav1.CreateOptions{}); err != nil {
		return err
	}
	for i := range size {
		p := benchPod(fmt.Sprintf("%s-%d", gang, i), scheduler, map[string]string{"bench": "gang", gangLabel: gang})
		if inTree {
			p.Spec.SchedulingGroup = &v1.PodSchedulingGroup{PodGroupName: ptr.To(gang)}
		} else {
			p.Labels["scheduling.x-k8s.io/pod-group"] = gang
		}
		if _, err := client.CoreV1().Pods(gangNamespace).Create(ctx, p, metav1.CreateOptions{}); err != nil {
			return err
		}
	}
	return nil
}
