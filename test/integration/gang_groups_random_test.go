package integration

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/custom-scheduler/custom-scheduler/pkg/apis/scheduling/v1alpha1"
	"github.com/custom-scheduler/custom-scheduler/pkg/coscheduling/tree"
)

// A randomized test of jobs of several roles: random trees (a gang composite at the root, leaves and
// gang or basic composites under it, at most three levels), random minimums and member shapes, made
// in a random order on nodes too small for all of them. Throughout, the tree invariant is watched: no
// group has between 1 and minMember-1 live members bound (watchWhole), and no gang composite with a
// member bound anywhere under it has fewer than minGroupCount children whole, beyond bindGrace. Then
// room for every job is added and every job must become whole. GANG_GROUPS_SEED replays a run.

// tnode is one group of a random job: a leaf PodGroup (members pods of cpu each) or a composite.
type tnode struct {
	name      string
	min       int // minMember of a leaf, minGroupCount of a gang composite (1 for a basic one)
	basic     bool
	children  []*tnode
	members   int
	cpu       int
	composite bool
}

// randomJob draws a job named name: a gang composite over 2 or 3 children, each a leaf or (at depth
// 2, one time in three) a composite of two leaves.
func randomJob(rng *rand.Rand, name string) *tnode {
	var build func(name string, depth int) *tnode
	build = func(name string, depth int) *tnode {
		if depth > 1 && (depth == 3 || rng.IntN(3) > 0) {
			quorum := 1 + rng.IntN(3)
			return &tnode{name: name, min: quorum, members: quorum + rng.IntN(2), cpu: 1 + rng.IntN(3)}
		}
		n := &tnode{name: name, composite: true}
		count := 2 + rng.IntN(2)
		if depth > 1 {
			count = 2
		}
		for i := range count {
			n.children = append(n.children, build(fmt.Sprintf("%s-%c", name, 'a'+i), depth+1))
		}
		if depth > 1 && rng.IntN(2) == 0 {
			n.basic, n.min = true, 1
		} else {
			n.min = 1 + rng.IntN(len(n.children))
		}
		return n
	}
	return build(name, 1)
}

func (n *tnode) String() string {
	if !n.composite {
		return fmt.Sprintf("%s[min %d, %d×%dcpu]", n.name, n.min, n.members, n.cpu)
	}
	kind := fmt.Sprintf("gang %d", n.min)
	if n.basic {
		kind = "basic"
	}
	parts := make([]string, len(n.children))
	for i, c := range n.children {
		parts[i] = c.String()
	}
	return fmt.Sprintf("%s(%s: %s)", n.name, kind, strings.Join(parts, ", "))
}

// walk calls f on n and every group under it, parents first.
func (n *tnode) walk(parent *tnode, f func(n, parent *tnode)) {
	f(n, parent)
	for _, c := range n.children {
		c.walk(n, f)
	}
}

// whole reports whether n is whole given each leaf's live bound members, and whether anything under
// it is bound.
func (n *tnode) whole(bound map[string]int) (whole, started bool) {
	if !n.composite {
		return bound[n.name] >= n.min, bound[n.name] > 0
	}
	count := 0
	for _, c := range n.children {
		w, s := c.whole(bound)
		if w {
			count++
		}
		started = started || s
	}
	return count >= n.min, started
}

// shortComposites names the gang composites under (and including) n that have a member bound under
// them and fewer than minGroupCount children whole.
func (n *tnode) shortComposites(bound map[string]int) []string {
	var out []string
	n.walk(nil, func(c, _ *tnode) {
		if !c.composite || c.basic {
			return
		}
		if w, s := c.whole(bound); s && !w {
			out = append(out, c.name)
		}
	})
	return out
}

// watchTrees polls the namespace's pods and fails the test if a gang composite of jobs stays short
// (shortComposites) for longer than bindGrace.
func watchTrees(t *testing.T, ns string, jobs []*tnode) {
	t.Helper()
	watchTreesWithin(t, ns, jobs, bindGrace)
}

// watchTreesWithin is watchTrees with another window than bindGrace (say why where it is used). It
// logs the longest short episode seen.
func watchTreesWithin(t *testing.T, ns string, jobs []*tnode, bindGrace time.Duration) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	var (
		mu         sync.Mutex
		violations []string
		polls      int
		longest    time.Duration
		done       = make(chan struct{})
	)
	go func() {
		defer close(done)
		since := map[string]time.Time{}
		reported := map[string]bool{}
		tick := time.NewTicker(100 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			bound, err := boundPerLeaf(ctx, ns)
			if err != nil {
				continue
			}
			now := time.Now()
			short := map[string]bool{}
			for _, j := range jobs {
				for _, name := range j.shortComposites(bound) {
					short[name] = true
					if since[name].IsZero() {
						since[name] = now
					}
					if !reported[name] && now.Sub(since[name]) > bindGrace {
						reported[name] = true
						mu.Lock()
						violations = append(violations, fmt.Sprintf("gang composite %s has a member bound under it and fewer than its minGroupCount children whole for more than %v (bound per group: %v)", name, bindGrace, bound))
						mu.Unlock()
					}
				}
			}
			mu.Lock()
			for name := range since {
				longest = max(longest, now.Sub(since[name]))
				if !short[name] {
					delete(since, name)
					delete(reported, name)
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
		t.Logf("tree invariant in %s: %d polls, longest short episode %v (window %v)", ns, polls, longest.Round(time.Millisecond), bindGrace)
		for _, v := range violations {
			t.Errorf("tree invariant violated: %s", v)
		}
	})
}

// TestGangGroupsRandomized: three random jobs on three nodes of 4 CPU, their objects made in a random
// order; the tree invariant holds throughout; then two nodes of 64 CPU make room and every job becomes
// whole.
func TestGangGroupsRandomized(t *testing.T) {
	seed := envSeed(t, "GANG_GROUPS_SEED")
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("replay with GANG_GROUPS_SEED=%d", seed)
		}
	})
	rng := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))

	startScheduler(t, schedulerConfig(t, adminKubeconfig, shippedProfiles(t)))
	ns := testNamespace(t)
	cosNodes(t, ns+"-n", 3, "4")

	var jobs []*tnode
	var steps []func()
	for i := range 3 {
		job := randomJob(rng, fmt.Sprintf("j%d", i))
		jobs = append(jobs, job)
		t.Logf("job %s", job)
		steps = append(steps, jobSteps(t, ns, job, nil)...)
	}
	watchTrees(t, ns, jobs)
	rng.Shuffle(len(steps), func(i, j int) { steps[i], steps[j] = steps[j], steps[i] })
	for _, step := range steps {
		step()
	}
	time.Sleep(10 * time.Second) // the small nodes: whatever fits, whole by the tree's rules

	cosNodes(t, ns+"-big", 2, "64")
	waitJobsWhole(t, ns, jobs)
}

// jobSteps are the API calls that make job in ns, to be made in any order: each group (a composite
// with its policy annotations, a leaf watched whole from now on), with its parent and its required
// topology key (keys[name]; none when absent), and each member pod.
func jobSteps(t *testing.T, ns string, job *tnode, keys map[string]string) []func() {
	t.Helper()
	var steps []func()
	job.walk(nil, func(n, parent *tnode) {
		ann := map[string]string{}
		if parent != nil {
			ann[tree.AnnotationParent] = parent.name
		}
		switch {
		case n.composite && n.basic:
			ann[tree.AnnotationComposite] = "Basic"
		case n.composite:
			ann[tree.AnnotationMinGroupCount] = fmt.Sprint(n.min)
		}
		minMember := int64(1)
		if !n.composite {
			minMember = int64(n.min)
			watchWhole(t, ns, n.name, n.min, nil)
		}
		steps = append(steps, func() { createGroupWithPolicy(t, ns, n.name, minMember, ann, keys[n.name]) })
		for m := range n.members {
			steps = append(steps, func() { createPod(t, gangPod(ns, fmt.Sprintf("%s-%d", n.name, m), n.name, fmt.Sprint(n.cpu))) })
		}
	})
	return steps
}

// waitJobsWhole waits until every job is whole by its live bound members.
func waitJobsWhole(t *testing.T, ns string, jobs []*tnode) {
	t.Helper()
	for _, job := range jobs {
		waitFor(t, ns, "job "+job.name+" whole", func(ctx context.Context) (bool, error) {
			bound, err := boundPerLeaf(ctx, ns)
			if err != nil {
				return false, err
			}
			whole, _ := job.whole(bound)
			return whole, nil
		})
	}
}

// boundPerLeaf counts the live bound pods of ns per group, of either API: our PodGroup label, else
// the in-tree spec.schedulingGroup.
func boundPerLeaf(ctx context.Context, ns string) (map[string]int, error) {
	pods, err := client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	bound := map[string]int{}
	for i := range pods.Items {
		p := &pods.Items[i]
		group := p.Labels[v1alpha1.PodGroupLabel]
		if sg := p.Spec.SchedulingGroup; group == "" && sg != nil && sg.PodGroupName != nil {
			group = *sg.PodGroupName
		}
		if group != "" && liveAndBound(p) {
			bound[group]++
		}
	}
	return bound, nil
}
