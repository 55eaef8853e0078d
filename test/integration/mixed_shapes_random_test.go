package integration

// A randomized test of gangs whose members have different shapes (TestMixedShapeGangs runs fixed
// ones): each run draws a few gangs of 2 to 4 shapes (a CPU size, and with or without one device
// from a ResourceClaimTemplate), builds nodes on which exactly one placement of each gang exists, and
// hides it by the nodes' names and the order in which nodes and members are made. Each gang must be
// bound whole, every member on a node built for its shape, at its first attempt and within
// mixedGangDeadline; no group is ever seen partly bound (watchWhole). MIXED_SHAPES_SEED replays a run.
//
// Why exactly one placement exists (up to swapping members of one shape). Every member gets its own
// node, built for its shape: free CPU the member's request plus a slack, and one device when the
// member asks one (none otherwise). Each slack is less than the smallest request of the gang and less
// than the smallest difference between two of its distinct CPU sizes. Take the largest CPU size c:
// its members fit only on nodes built for c (a node built for c' < c has less than c' + (c - c') = c
// free); no node holds two of them (2c > c + slack), nor one of them and any other member (the slack
// is less than the smallest request); so the m members of size c take the m nodes built for c one
// each, and the ones asking a device take the nodes with one. Those nodes are then full, and the rest
// of the gang is on the rest of the nodes by the same argument. A member placed anywhere else (a small
// launcher on a big worker's node, a CPU-only member on a device node) leaves some member no node, so
// the gang is placed only if every member is planned before any is reserved, the scarce shapes first.
//
// Found by it (fixed): the plan's first-fit decreasing ordered members by dominant share alone, which
// for members claiming a device is often the device, the same for every such member whatever its CPU;
// tied members kept the gang's order and a small one took a big one's node, so the gang was not
// planned and was rejected and retried. Members are now ordered by all their shares, largest first
// (gangfit.TestPlanShapesDeviceMembersOfTwoSizes is the smallest case).

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/custom-scheduler/custom-scheduler/pkg/coscheduling/podgroup"
)

const (
	// mixedGangDeadline bounds how long a gang may take from its last member's creation to being bound
	// whole: a placement at the first attempt takes a second or two; a rejected attempt costs the
	// shipped podGroupBackoffSeconds (10 s), so one retry still ends within it and is counted.
	mixedGangDeadline = 15 * time.Second
	// mixedMaxAttempts is how many gang attempts (the first plus each rejection) a gang that fits may
	// take: the plan gives every member a node before any is reserved, so one.
	mixedMaxAttempts = 1
	// mixedCPUStep is the grid of the drawn CPU sizes (500m to 6 CPU) and mixedSlackStep the grid of
	// the slacks.
	mixedCPUStep   = 250
	mixedSlackStep = 50
)

// mixedShape is one member shape of a gang: a CPU request, one device or none, and how many members.
type mixedShape struct {
	milliCPU int64
	device   bool
	count    int
}

func (s mixedShape) String() string {
	dev := ""
	if s.device {
		dev = "+gpu"
	}
	return fmt.Sprintf("%d×%dm%s", s.count, s.milliCPU, dev)
}

// mixedMember is a member of a drawn gang and mixedNode a node built for a member: the shape's index.
type mixedMember struct {
	name  string
	shape int
}

type mixedNode struct {
	name     string
	shape    int
	milliCPU int64
}

// mixedGang is a drawn gang: its shapes, its members and their nodes (in creation order).
type mixedGang struct {
	name    string
	shapes  []mixedShape
	members []mixedMember
	nodes   []mixedNode
}

func (g *mixedGang) String() string {
	parts := make([]string, len(g.shapes))
	for i, s := range g.shapes {
		parts[i] = s.String()
	}
	nodes := make([]string, len(g.nodes))
	for i, n := range g.nodes {
		nodes[i] = fmt.Sprintf("%s=%dm(for %s)", n.name, n.milliCPU, g.shapeName(n.shape))
	}
	return fmt.Sprintf("%s: %s; nodes %s", g.name, strings.Join(parts, ", "), strings.Join(nodes, " "))
}

// shapeName names shape i without its count, e.g. 2500m+gpu.
func (g *mixedGang) shapeName(i int) string {
	s := g.shapes[i]
	s.count = 1
	return strings.TrimPrefix(s.String(), "1×")
}

// randomMixedGang draws a gang named name of 2 to 4 distinct shapes (with devices only when devices
// is set; now and then two shapes of one CPU size, one with a device and one without), 1 to 3 members
// each, and one node per member as the file's comment says, named <prefix><k> in a shuffled order.
func randomMixedGang(rng *rand.Rand, name, prefix string, devices bool) *mixedGang {
	g := &mixedGang{name: name}
	k := 2 + rng.IntN(3)
	for len(g.shapes) < k {
		s := mixedShape{milliCPU: mixedCPUStep * (2 + rng.Int64N(23)), device: devices && rng.IntN(2) == 0, count: 1 + rng.IntN(3)}
		if devices && len(g.shapes) > 0 && rng.IntN(4) == 0 {
			// The same CPU size as an earlier shape, the other way round for the device.
			prev := g.shapes[rng.IntN(len(g.shapes))]
			s.milliCPU, s.device = prev.milliCPU, !prev.device
		}
		if !slices.ContainsFunc(g.shapes, func(o mixedShape) bool { return o.milliCPU == s.milliCPU && o.device == s.device }) {
			g.shapes = append(g.shapes, s)
		}
	}
	// The slack bound: less than the smallest request and than the smallest gap between CPU sizes.
	sizes := make([]int64, 0, k)
	for _, s := range g.shapes {
		sizes = append(sizes, s.milliCPU)
	}
	slices.Sort(sizes)
	sizes = slices.Compact(sizes)
	bound := sizes[0]
	for i := 1; i < len(sizes); i++ {
		bound = min(bound, sizes[i]-sizes[i-1])
	}
	for si, s := range g.shapes {
		for range s.count {
			g.members = append(g.members, mixedMember{shape: si})
			slack := mixedSlackStep * rng.Int64N((bound+mixedSlackStep-1)/mixedSlackStep)
			g.nodes = append(g.nodes, mixedNode{shape: si, milliCPU: s.milliCPU + slack})
		}
	}
	rng.Shuffle(len(g.members), func(i, j int) { g.members[i], g.members[j] = g.members[j], g.members[i] })
	rng.Shuffle(len(g.nodes), func(i, j int) { g.nodes[i], g.nodes[j] = g.nodes[j], g.nodes[i] })
	for i := range g.members {
		g.members[i].name = fmt.Sprintf("%s-m%d", name, i)
	}
	for i := range g.nodes {
		g.nodes[i].name = fmt.Sprintf("%s%d", prefix, i)
	}
	return g
}

// mixedCounts are the in-process scheduler's counters a gang's run is measured by.
type mixedCounts struct {
	rejections, unschedulable, planPlaced, planFallback float64
}

func readMixedCounts(t *testing.T) mixedCounts {
	t.Helper()
	var c mixedCounts
	for _, v := range coschedulingCounters(t, "custom_scheduler_coscheduling_gang_rejections_total") {
		c.rejections += v
	}
	for key, v := range coschedulingCounters(t, "scheduler_schedule_attempts_total") {
		if strings.Contains(key, "result=unschedulable") {
			c.unschedulable += v
		}
	}
	plan := coschedulingCounters(t, "custom_scheduler_coscheduling_placement_plan_members_total")
	c.planPlaced, c.planFallback = plan["outcome="+planPlaced], plan["outcome="+planFallback]
	return c
}

func (c mixedCounts) sub(o mixedCounts) mixedCounts {
	return mixedCounts{c.rejections - o.rejections, c.unschedulable - o.unschedulable, c.planPlaced - o.planPlaced, c.planFallback - o.planFallback}
}

// The outcome labels of the plan's counter (as the plugin's planPlaced and planFallback).
const (
	planPlaced   = "placed"
	planFallback = "fallback"
)

// gangEvents counts the group's GangRejected events and its members' FailedScheduling events (each
// with its repeats), and quotes the last few of them.
func gangEvents(ns, group string, members []mixedMember) (rejected, failed int, quoted string) {
	evs, err := client.CoreV1().Events(ns).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		return 0, 0, err.Error()
	}
	isMember := map[string]bool{}
	for _, m := range members {
		isMember[m.name] = true
	}
	var lines []string
	for _, e := range evs.Items {
		n := max(int(e.Count), 1)
		if e.Series != nil {
			n = max(n, int(e.Series.Count))
		}
		switch {
		case e.InvolvedObject.Kind == "PodGroup" && e.InvolvedObject.Name == group && e.Reason == podgroup.ReasonGangRejected:
			rejected += n
		case e.InvolvedObject.Kind == "Pod" && isMember[e.InvolvedObject.Name] && e.Reason == "FailedScheduling":
			failed += n
		default:
			continue
		}
		lines = append(lines, fmt.Sprintf("%s %s ×%d: %s", e.InvolvedObject.Name, e.Reason, n, e.Message))
	}
	if len(lines) > 8 {
		lines = append(lines[:8], fmt.Sprintf("and %d more", len(lines)-8))
	}
	return rejected, failed, strings.Join(lines, "\n  ")
}

// TestMixedShapesRandomized: 3 to 5 random mixed-shape gangs, one after another, each on its own
// nodes (made all at once, in a shuffled order) on which exactly one placement of it exists, with the
// shipped profile. Each is bound whole at its first attempt, every member on a node built for its
// shape, within mixedGangDeadline; none is ever partly bound.
func TestMixedShapesRandomized(t *testing.T) {
	seed := envSeed(t, "MIXED_SHAPES_SEED")
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("replay with MIXED_SHAPES_SEED=%d", seed)
		}
	})
	rng := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	devices := os.Getenv("MIXED_SHAPES_DEVICES") != "0"
	t.Logf("seed %d: shapes with devices: %v (MIXED_SHAPES_DEVICES=0 draws CPU-only shapes)", seed, devices)
	if devices {
		needControllerManager(t) // the resourceclaim controller makes the members' claims
	}
	ns := testNamespace(t)
	e := newDRAEnv(t, ns, false)
	e.claimTemplate(t, "gpu")

	gangs := make([]*mixedGang, 3+rng.IntN(3))
	type madeNode struct {
		g *mixedGang
		n mixedNode
	}
	var nodes []madeNode
	for i := range gangs {
		gangs[i] = randomMixedGang(rng, fmt.Sprintf("g%d", i), fmt.Sprintf("%s-g%d-n", ns, i), devices)
		t.Logf("seed %d: gang %s", seed, gangs[i])
		for _, n := range gangs[i].nodes {
			nodes = append(nodes, madeNode{gangs[i], n})
		}
	}
	rng.Shuffle(len(nodes), func(i, j int) { nodes[i], nodes[j] = nodes[j], nodes[i] })
	for _, mn := range nodes {
		devices := 0
		if mn.g.shapes[mn.n.shape].device {
			devices = 1
		}
		e.node(t, mn.n.name, fmt.Sprintf("%dm", mn.n.milliCPU), mn.g.name, devices, nil)
	}
	startScheduler(t, schedulerConfig(t, adminKubeconfig, shippedProfiles(t)))

	start := time.Now()
	for _, g := range gangs {
		if !runMixedGang(t, seed, e, g) {
			break // a gang left unplaced holds nothing, but the next would wait behind it for the same time
		}
	}
	t.Logf("seed %d: %d gangs in %v", seed, len(gangs), time.Since(start).Round(time.Millisecond))
}

// runMixedGang makes g's PodGroup and members (minMember all of them) and checks that it is bound
// whole within mixedGangDeadline, at its first attempt, every member on a node built for its shape.
// It reports whether the gang was bound.
func runMixedGang(t *testing.T, seed uint64, e draEnv, g *mixedGang) bool {
	t.Helper()
	ns := e.ns
	shapeOfNode := map[string]int{}
	for _, n := range g.nodes {
		shapeOfNode[n.name] = n.shape
	}
	before := readMixedCounts(t)
	watchWhole(t, ns, g.name, len(g.members), nil)
	createPodGroup(t, ns, g.name, int64(len(g.members)), 0)
	for _, m := range g.members {
		s := g.shapes[m.shape]
		cpu := fmt.Sprintf("%dm", s.milliCPU)
		p := e.pod(m.name, g.name, cpu, g.name)
		if s.device {
			p = e.claimPod(m.name, g.name, cpu, g.name, "gpu")
		}
		createPod(t, p)
	}
	start := time.Now()
	var bound map[string]string
	for {
		pods, err := groupPods(context.Background(), ns, g.name)
		if err != nil {
			t.Fatalf("seed %d: listing the pods of %s: %v", seed, g.name, err)
		}
		bound = map[string]string{}
		for i := range pods {
			if liveAndBound(&pods[i]) {
				bound[pods[i].Name] = pods[i].Spec.NodeName
			}
		}
		if len(bound) == len(g.members) || time.Since(start) > mixedGangDeadline {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	took := time.Since(start)
	c := readMixedCounts(t).sub(before)
	attempts := 1 + int(c.rejections)
	rejected, failed, quoted := gangEvents(ns, g.name, g.members)
	measured := fmt.Sprintf("%d attempt(s) (%d GangRejected events), %d unschedulable cycles (%d FailedScheduling events), plan placed %d members and fell back %d times",
		attempts, rejected, int(c.unschedulable), failed, int(c.planPlaced), int(c.planFallback))
	if len(bound) < len(g.members) {
		var conds []string
		for _, cond := range getPodGroup(t, ns, g.name).Status.Conditions {
			conds = append(conds, fmt.Sprintf("%s=%s reason=%s message=%q", cond.Type, cond.Status, cond.Reason, cond.Message))
		}
		t.Errorf("seed %d: gang %s: %d of %d members bound after %v (%v); %s; conditions:\n  %s\nevents:\n  %s",
			seed, g, len(bound), len(g.members), mixedGangDeadline, bound, measured, strings.Join(conds, "\n  "), quoted)
		return false
	}
	t.Logf("seed %d: gang %s bound whole in %v: %s", seed, g.name, took.Round(time.Millisecond), measured)
	for _, m := range g.members {
		node := bound[m.name]
		if got, ok := shapeOfNode[node]; !ok || got != m.shape {
			t.Errorf("seed %d: gang %s: member %s (%s) is on %s, not on a node built for its shape (the gang's one placement)",
				seed, g, m.name, g.shapeName(m.shape), node)
		}
	}
	if attempts > mixedMaxAttempts {
		t.Errorf("seed %d: gang %s was bound whole only after %d attempts, want at most %d: %s\nevents:\n  %s",
			seed, g, attempts, mixedMaxAttempts, measured, quoted)
	}
	return true
}
