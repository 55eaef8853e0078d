package main

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"

	"github.com/custom-scheduler/custom-scheduler/pkg/apis/scheduling/v1alpha1"
)

// TestPlaygroundGPUs runs the playground as `make run PLAYGROUND_FLAGS=--gpus` does (real apiserver,
// controller manager with the resourceclaim controller, kwok, the custom-scheduler binary with the
// shipped configuration) and checks the GPU gangs of examples/gpus: gpu-train (claims from a
// ResourceClaimTemplate) and gpu-finetune (the DRA-backed extended resource) are bound whole, each
// member with 2 allocated devices, never part of a gang bound for longer than a quorum's binding
// takes; gpu-too-big binds nothing and its PodGroup's shortfall has the device row.
//
// It starts a whole cluster (about a minute), so it runs only when asked: `make test-playground` sets
// PLAYGROUND_ASSETS (a folder with kube-apiserver, etcd, kube-controller-manager and kwok, from
// hack/envtest-assets.sh --all) and CUSTOM_SCHEDULER_BINARY (default bin/custom-scheduler).
func TestPlaygroundGPUs(t *testing.T) {
	play := startPlayground(t, options{nodeCount: 4, gpus: true}, 5*time.Minute)
	ctx, clientset, pgClient := play.ctx, play.clientset, play.pgClient

	gangs := map[string]int{"gpu-train": 4, "gpu-finetune": 4}
	watcher := watchPartial(ctx, t, clientset, "demo", gangs)

	play.waitReady()

	// Both gangs bound whole, every member with 2 devices allocated to its claim.
	var pods *corev1.PodList
	bound := map[string]int{}
	err := wait.PollUntilContextTimeout(ctx, time.Second, time.Minute, true, func(ctx context.Context) (bool, error) {
		var err error
		pods, err = clientset.CoreV1().Pods("demo").List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, nil
		}
		bound = map[string]int{}
		for _, p := range pods.Items {
			if g, ok := p.Labels[v1alpha1.PodGroupLabel]; ok && p.Spec.NodeName != "" {
				bound[g]++
			}
		}
		return bound["gpu-train"] == 4 && bound["gpu-finetune"] == 4, nil
	})
	if err != nil {
		t.Fatalf("GPU gangs not bound whole within a minute: bound %v", bound)
	}
	devices := podDevices(ctx, clientset)
	for _, p := range pods.Items {
		g := p.Labels[v1alpha1.PodGroupLabel]
		if _, ok := gangs[g]; !ok {
			continue
		}
		if d := devices["demo/"+p.Name]; len(d) != 2 {
			t.Errorf("member %s of %s on %s has devices %v, want 2", p.Name, g, p.Spec.NodeName, d)
		}
		if g == "gpu-finetune" && p.Status.ExtendedResourceClaimStatus == nil {
			t.Errorf("member %s of gpu-finetune bound without status.extendedResourceClaimStatus", p.Name)
		}
	}
	if bound["gpu-too-big"] != 0 {
		t.Errorf("gpu-too-big has %d members bound, want none (5 × 8 GPUs on 4 nodes of 8)", bound["gpu-too-big"])
	}

	// gpu-too-big: infeasible, and its shortfall counts the device kind.
	var shortfall *v1alpha1.PodGroupShortfall
	if err := wait.PollUntilContextTimeout(ctx, time.Second, time.Minute, true, func(ctx context.Context) (bool, error) {
		pg, err := pgClient.SchedulingV1alpha1().PodGroups("demo").Get(ctx, "gpu-too-big", metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		shortfall = pg.Status.Shortfall
		return shortfall != nil, nil
	}); err != nil {
		t.Fatalf("gpu-too-big has no status.shortfall: %v", err)
	}
	row := ""
	for _, r := range shortfall.Resources {
		if string(r.Name) == "devices/"+gpuExtended {
			row = fmt.Sprintf("requested=%s free=%s member=%s largestFree=%s on %q", r.Requested.String(), r.Free.String(), r.Member.String(), r.LargestFree.String(), r.LargestFreeNode)
			if r.DeviceClass != gpuExtended || r.Unit != v1alpha1.ShortfallUnitMembers || r.Requested.Value() != 5 {
				t.Errorf("gpu-too-big's device row: class %q unit %q requested %s, want %s, %s, 5 members", r.DeviceClass, r.Unit, r.Requested.String(), gpuExtended, v1alpha1.ShortfallUnitMembers)
			}
		}
	}
	if row == "" {
		t.Errorf("gpu-too-big's shortfall %+v has no row devices/%s", shortfall, gpuExtended)
	} else {
		t.Logf("gpu-too-big shortfall %s, device row: %s", shortfall.Reason, row)
	}

	play.stop()
	if n := watcher.violations(); len(n) > 0 {
		t.Errorf("part of a gang stayed bound: %s", strings.Join(n, "; "))
	}
}

// partialWatch records, per gang, how long between 1 and minMember-1 of its members were bound at
// once; more than maxPartial is a violation (binding a quorum takes milliseconds).
type partialWatch struct {
	mu    sync.Mutex
	since map[string]time.Time
	bad   []string
}

const maxPartial = 10 * time.Second

func watchPartial(ctx context.Context, t *testing.T, clientset kubernetes.Interface, ns string, gangs map[string]int) *partialWatch {
	t.Helper()
	pw := &partialWatch{since: map[string]time.Time{}}
	go func() {
		boundPods := map[string]map[string]bool{}
		for g := range gangs {
			boundPods[g] = map[string]bool{}
		}
		for ctx.Err() == nil {
			w, err := clientset.CoreV1().Pods(ns).Watch(ctx, metav1.ListOptions{})
			if err != nil {
				time.Sleep(200 * time.Millisecond)
				continue
			}
			tick := time.NewTicker(time.Second)
		loop:
			for {
				select {
				case ev, ok := <-w.ResultChan():
					if !ok {
						break loop
					}
					p, isPod := ev.Object.(*corev1.Pod)
					if !isPod {
						continue
					}
					g, inGang := p.Labels[v1alpha1.PodGroupLabel]
					if _, watched := gangs[g]; !inGang || !watched {
						continue
					}
					live := ev.Type != watch.Deleted && p.DeletionTimestamp == nil && p.Spec.NodeName != "" &&
						p.Status.Phase != corev1.PodSucceeded && p.Status.Phase != corev1.PodFailed
					if live {
						boundPods[g][p.Name] = true
					} else {
						delete(boundPods[g], p.Name)
					}
					pw.observe(g, len(boundPods[g]), gangs[g], time.Now())
				case now := <-tick.C:
					for g := range gangs {
						pw.observe(g, len(boundPods[g]), gangs[g], now)
					}
				case <-ctx.Done():
					w.Stop()
					tick.Stop()
					return
				}
			}
			tick.Stop()
		}
	}()
	return pw
}

func (pw *partialWatch) observe(gang string, bound, minMember int, now time.Time) {
	pw.mu.Lock()
	defer pw.mu.Unlock()
	if bound == 0 || bound >= minMember {
		delete(pw.since, gang)
		return
	}
	start, ok := pw.since[gang]
	if !ok {
		pw.since[gang] = now
		return
	}
	if now.Sub(start) > maxPartial {
		pw.bad = append(pw.bad, fmt.Sprintf("%s: %d of %d bound for %v", gang, bound, minMember, now.Sub(start).Round(time.Second)))
		delete(pw.since, gang)
	}
}

func (pw *partialWatch) violations() []string {
	pw.mu.Lock()
	defer pw.mu.Unlock()
	return append([]string(nil), pw.bad...)
}
