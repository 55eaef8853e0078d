package integration

import (
	"context"
	"fmt"
	"sort"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"
	watchtools "k8s.io/client-go/tools/watch"

	"github.com/custom-scheduler/custom-scheduler/pkg/coscheduling/podgroup"
)

// watchGroupPods lists the group's pods and watches them from that list on. It returns the pods by
// name, the watch's events, and a stop function for the test's cleanup.
func watchGroupPods(t *testing.T, ns, group string) (map[string]*v1.Pod, <-chan watch.Event, func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	opts := groupListOptions(ns, group)
	list, err := client.CoreV1().Pods(ns).List(ctx, opts)
	if err != nil {
		cancel()
		t.Fatalf("listing the pods of %s/%s: %v", ns, group, err)
	}
	w, err := watchtools.NewRetryWatcherWithContext(ctx, list.ResourceVersion, &cache.ListWatch{
		WatchFuncWithContext: func(ctx context.Context, options metav1.ListOptions) (watch.Interface, error) {
			options.LabelSelector = opts.LabelSelector
			return client.CoreV1().Pods(ns).Watch(ctx, options)
		},
	})
	if err != nil {
		cancel()
		t.Fatalf("watching the pods of %s/%s: %v", ns, group, err)
	}
	pods := map[string]*v1.Pod{}
	for i := range list.Items {
		if inGroup(&list.Items[i], group) {
			pods[list.Items[i].Name] = &list.Items[i]
		}
	}
	return pods, w.ResultChan(), func() { cancel(); w.Stop() }
}

// ours reports whether a pod counts for our gangs: another scheduler's (the default scheduler's, in
// these tests) never does.
func ours(p *v1.Pod) bool { return p.Spec.SchedulerName != v1.DefaultSchedulerName }

// runEnds remembers, by pod UID, the succeeded members of runs that ended: by the finished-member rule a
// run is in progress while one of its live members is bound, and once none is, its succeeded members
// never count again (the pods that come next under the group are a new run, placed whole). The
// watchers observe every change they see; a run that ended and started again between two
// observations is not seen to end (the check is then lenient, never wrong the other way).
type runEnds map[types.UID]bool

// observe retires the succeeded members of every run of pods with no live member of ours bound.
func (r runEnds) observe(pods map[string]*v1.Pod) {
	bound := map[types.UID]bool{}
	for _, p := range pods {
		if ours(p) && liveAndBound(p) {
			bound[podgroup.Run(p)] = true
		}
	}
	for _, p := range pods {
		if p.Status.Phase == v1.PodSucceeded && !bound[podgroup.Run(p)] {
			r[p.UID] = true
		}
	}
}

// wholeCount is what the invariant counts of a group's pods: our live members bound, and, when some
// are, the members of their run that succeeded while it was in progress (the finished-member rule: a
// gang whose members finish one by one keeps its quorum, and a failed member's replacement joins the
// running and the succeeded ones; ended lists the succeeded members of runs that ended, which count
// no more). It also returns the live bound members' names.
func wholeCount(pods map[string]*v1.Pod, ended runEnds) (int, []string) {
	var bound []string
	succeeded := map[types.UID]int{}
	for name, p := range pods {
		switch {
		case !ours(p):
		case liveAndBound(p):
			bound = append(bound, name)
		case p.Status.Phase == v1.PodSucceeded && p.DeletionTimestamp == nil && p.Spec.NodeName != "" && !ended[p.UID]:
			succeeded[podgroup.Run(p)]++
		}
	}
	sort.Strings(bound)
	credit := 0
	for _, name := range bound {
		credit = max(credit, succeeded[podgroup.Run(pods[name])])
	}
	if len(bound) == 0 {
		return 0, nil
	}
	return len(bound) + credit, bound
}

// countTrue counts the true values.
func countTrue(m map[string]bool) int {
	n := 0
	for _, ok := range m {
		if ok {
			n++
		}
	}
	return n
}

// watchWhole watches the group's pods until the test ends and fails it if the group has between 1 and
// minMember-1 live members bound for longer than bindGrace, whatever made it so: a bind, an eviction,
// a failed bind, a deletion. Unlike watchNotPartial it forgives no cause but one: a change to a pod
// the test disrupted itself (excused(name) true; nil excuses nothing), which leaves the episode open
// without a deadline until the group is whole or empty again.
func watchWhole(t *testing.T, ns, group string, minMember int, excused func(name string) bool) {
	t.Helper()
	watchPartial(t, ns, group, minMember, false, excused, bindGrace)
}

// watchWholeWithin is watchWhole with a longer window for binding a quorum that was reached, for the
// one case where upstream takes longer to bind it (say why where it is used).
func watchWholeWithin(t *testing.T, ns, group string, minMember int, window time.Duration) {
	t.Helper()
	watchPartial(t, ns, group, minMember, false, nil, window)
}

// watchNotPartial is watchWhole for tests that fail or delete members themselves (a Job's workers, a
// preemption's victims): only a bind can start a partial episode, and only reaching minMember (or 0)
// ends it. Fewer live members through a failure or a deletion is the test's (or a kubelet's) doing.
func watchNotPartial(t *testing.T, ns, group string, minMember int) {
	t.Helper()
	watchPartial(t, ns, group, minMember, true, nil, bindGrace)
}

// watchPartial is the watchers' loop: an episode of 1..minMember-1 live members bound starts with the
// change that makes it (with bindsOnly, only with a bind), and fails the test once it lasts longer than
// bindGrace, unless excused said so of the pod that started it.
func watchPartial(t *testing.T, ns, group string, minMember int, bindsOnly bool, excused func(name string) bool, bindGrace time.Duration) {
	t.Helper()
	pods, events, stop := watchGroupPods(t, ns, group)
	ended := runEnds{}
	ended.observe(pods)
	count := func() int { n, _ := wholeCount(pods, ended); return n }
	var (
		violations []string
		since      time.Time // start of the partial episode; zero: none
		cause      string
		excusedEp  bool
		reported   bool
		longest    time.Duration
		done       = make(chan struct{})
	)
	end := func(now time.Time) {
		if !since.IsZero() && !excusedEp {
			longest = max(longest, now.Sub(since))
		}
		since, reported, excusedEp = time.Time{}, false, false
	}
	check := func(now time.Time) {
		if !since.IsZero() && !excusedEp && !reported && now.Sub(since) > bindGrace {
			reported = true
			n, bound := wholeCount(pods, ended)
			violations = append(violations, fmt.Sprintf("%s left %d of minMember %d live members bound (with the run's succeeded ones) %v, still so after %v",
				cause, n, minMember, bound, bindGrace))
		}
	}
	go func() {
		defer close(done)
		tick := time.NewTicker(100 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case now := <-tick.C:
				check(now)
			case ev, ok := <-events:
				if !ok {
					check(time.Now())
					return
				}
				pod, isPod := ev.Object.(*v1.Pod)
				if !isPod || !inGroup(pod, group) {
					continue
				}
				before := count()
				prev := pods[pod.Name]
				was := prev != nil && ours(prev) && liveAndBound(prev)
				if ev.Type == watch.Deleted {
					delete(pods, pod.Name)
				} else {
					pods[pod.Name] = pod
				}
				ended.observe(pods)
				if count() == before {
					continue
				}
				now := time.Now()
				switch n := count(); {
				case n == 0 || n >= minMember:
					end(now)
				case since.IsZero() && (!bindsOnly || (!was && ev.Type != watch.Deleted && ours(pod) && liveAndBound(pod))):
					since = now
					verb := "binding"
					if n < before {
						verb = "losing"
					}
					cause = fmt.Sprintf("%s %s (node %s)", verb, pod.Name, pod.Spec.NodeName)
					excusedEp = excused != nil && excused(pod.Name)
				}
			}
		}
	}()
	t.Cleanup(func() {
		stop()
		<-done
		if longest > 0 {
			t.Logf("%s/%s: longest partial episode %v (window %v)", ns, group, longest.Round(time.Millisecond), bindGrace)
		}
		for _, v := range violations {
			t.Errorf("%s/%s partially bound: %s", ns, group, v)
		}
	})
}

// watchOneDomain fails the test if the group's live bound members are ever seen in more than one
// domain of the node label key (a required topology domain split), polling until the test ends.
func watchOneDomain(t *testing.T, ns, group, key string) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	var split string
	go func() {
		defer close(done)
		domainOf := map[string]string{}
		_ = wait.PollUntilContextCancel(ctx, 100*time.Millisecond, true, func(ctx context.Context) (bool, error) {
			pods, err := groupPods(ctx, ns, group)
			if err != nil {
				return false, nil
			}
			seen := map[string][]string{}
			for _, p := range pods {
				if !liveAndBound(&p) {
					continue
				}
				d, ok := domainOf[p.Spec.NodeName]
				if !ok {
					n, err := client.CoreV1().Nodes().Get(ctx, p.Spec.NodeName, metav1.GetOptions{})
					if err != nil {
						return false, nil
					}
					d = n.Labels[key]
					domainOf[p.Spec.NodeName] = d
				}
				seen[d] = append(seen[d], p.Name)
			}
			if len(seen) > 1 && split == "" {
				split = fmt.Sprint(seen)
			}
			return false, nil
		})
	}()
	t.Cleanup(func() {
		cancel()
		<-done
		if split != "" {
			t.Errorf("%s/%s was bound in more than one %s domain: %s", ns, group, key, split)
		}
	})
}
