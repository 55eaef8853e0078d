package integration

import (
	"context"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/custom-scheduler/custom-scheduler/pkg/apis/scheduling/v1alpha1"
)

// Random jobs with topology (TestGangGroupsRandomized's trees, each composite given a required key at
// random: the top a block, a composite below it a rack) on racked nodes too small for all of them.
// Throughout, besides the tree invariant, no composite with a required key ever has live members bound
// under it in two domains of its key. Then a block of large nodes makes room and every job must become
// whole. GANG_GROUPS_SEED replays a run.

// domainsOf draws each composite's required key: the top's a block two times in three, a composite
// below it a rack two times in three.
func domainsOf(rng *rand.Rand, job *tnode) map[string]string {
	keys := map[string]string{}
	job.walk(nil, func(n, parent *tnode) {
		switch {
		case !n.composite || rng.IntN(3) == 0:
		case parent == nil:
			keys[n.name] = blockLabel
		default:
			keys[n.name] = rackLabel
		}
	})
	return keys
}

// leavesUnder are the names of the PodGroups under n.
func (n *tnode) leavesUnder() []string {
	var out []string
	n.walk(nil, func(c, _ *tnode) {
		if !c.composite {
			out = append(out, c.name)
		}
	})
	return out
}

// watchDomains polls the namespace's pods and fails the test if a composite with a required key
// (keys, by composite name) has live members bound under it on nodes of two domains of that key
// (labels: each node's labels), at any poll.
func watchDomains(t *testing.T, ns string, jobs []*tnode, keys map[string]string, labels map[string]map[string]string) {
	t.Helper()
	under := map[string][]string{}
	for _, j := range jobs {
		j.walk(nil, func(n, _ *tnode) {
			if keys[n.name] != "" {
				under[n.name] = n.leavesUnder()
			}
		})
	}
	ctx, cancel := context.WithCancel(context.Background())
	var (
		mu         sync.Mutex
		violations = map[string]string{}
		polls      int
		done       = make(chan struct{})
	)
	go func() {
		defer close(done)
		tick := time.NewTicker(100 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			pods, err := client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: v1alpha1.PodGroupLabel})
			if err != nil {
				continue
			}
			domains := map[string]map[string]bool{} // group -> domains of its bound members, per key
			for i := range pods.Items {
				p := &pods.Items[i]
				if !liveAndBound(p) {
					continue
				}
				g := p.Labels[v1alpha1.PodGroupLabel]
				if domains[g] == nil {
					domains[g] = map[string]bool{}
				}
				for _, key := range []string{blockLabel, rackLabel} {
					domains[g][key+"="+labels[p.Spec.NodeName][key]] = true
				}
			}
			mu.Lock()
			for c, leaves := range under {
				seen := map[string]bool{}
				for _, l := range leaves {
					for d := range domains[l] {
						if strings.HasPrefix(d, keys[c]+"=") {
							seen[d] = true
						}
					}
				}
				if len(seen) > 1 && violations[c] == "" {
					violations[c] = fmt.Sprintf("composite %s (required %s) has members bound in %v", c, keys[c], slices.Sorted(maps.Keys(seen)))
				}
			}
			polls++
			mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		cancel()
		<-done
		mu.Lock()
		defer mu.Unlock()
		t.Logf("domain invariant in %s: %d polls, %d composites with a required key", ns, polls, len(under))
		for _, v := range violations {
			t.Errorf("a required domain split: %s", v)
		}
	})
}

// TestGangGroupsRandomizedDomains: three random jobs with random required keys on two blocks of 4-CPU
// nodes (three racks of two); the tree and domain invariants hold throughout; then a block of two
// racks of 64-CPU nodes makes room and every job becomes whole.
func TestGangGroupsRandomizedDomains(t *testing.T) {
	seed := envSeed(t, "GANG_GROUPS_SEED")
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("replay with GANG_GROUPS_SEED=%d", seed)
		}
	})
	rng := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))

	startScheduler(t, schedulerConfig(t, adminKubeconfig, shippedProfiles(t)))
	ns := testNamespace(t)
	labels := map[string]map[string]string{}
	racked := func(block, rack string, n int, cpu string) {
		for i := range n {
			name := fmt.Sprintf("%s-%s-%d", ns, rack, i)
			labels[name] = map[string]string{blockLabel: block, rackLabel: rack}
			createNode(t, name, cpu, "8Gi", labels[name])
		}
	}
	racked("b1", "r1a", 2, "4")
	racked("b1", "r1b", 2, "4")
	racked("b2", "r2a", 2, "4")

	var jobs []*tnode
	keys := map[string]string{}
	var steps []func()
	for i := range 3 {
		job := randomJob(rng, fmt.Sprintf("j%d", i))
		jobs = append(jobs, job)
		jk := domainsOf(rng, job)
		maps.Copy(keys, jk)
		t.Logf("job %s, required keys %v", job, jk)
		steps = append(steps, jobSteps(t, ns, job, jk)...)
	}
	watchTrees(t, ns, jobs)
	watchDomains(t, ns, jobs, keys, labels)
	rng.Shuffle(len(steps), func(i, j int) { steps[i], steps[j] = steps[j], steps[i] })
	for _, step := range steps {
		step()
	}
	time.Sleep(10 * time.Second) // the small nodes: whatever fits, whole by the tree's rules

	racked("b3", "r3a", 2, "64")
	racked("b3", "r3b", 2, "64")
	waitJobsWhole(t, ns, jobs)
}
