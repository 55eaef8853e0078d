package integration

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/util/retry"
	"k8s.io/component-base/metrics/legacyregistry"
	st "k8s.io/kubernetes/pkg/scheduler/testing"
	"k8s.io/utils/ptr"

	"github.com/custom-scheduler/custom-scheduler/pkg/apis/scheduling/v1alpha1"
	"github.com/custom-scheduler/custom-scheduler/pkg/coscheduling/tree"
)

// The soak's knobs. SOAK_SEED replays a run's random choices; SOAK_OPS sets the number of ops.
const (
	soakDefaultOps = 130
	soakShortOps   = 30
	// soakTick is the soak's logical clock: every op and every 200 ms of a quiet phase is one tick,
	// and delayed actions (a kubelet's graceful stop, a pod GC pass) are due a number of ticks later,
	// so that the seed fixes the order of everything the test does.
	soakTick = 250 * time.Millisecond
	// soakGrace is how long a group may stay partially bound: members of a gang that reached its
	// quorum bind one by one, which takes a moment, and a bind that failed after the quorum is
	// retried at once. The window is measured and logged per run (about 150 ms, one poll, here); the
	// rest is margin for a slow machine.
	soakGrace = 2 * time.Second
	// soakPoll is the watcher's period.
	soakPoll = 150 * time.Millisecond
	// soakSettleTimeout bounds the wait for every gang to bind once the churn stopped.
	soakSettleTimeout = 60 * time.Second
	// soakRestartTicks is the least number of ticks between two scheduler restarts.
	soakRestartTicks = 80
	// soakMidBind: a group partially bound for less than this when the test disrupts it (or the
	// scheduler stops) may have been caught binding, and binds seen this soon after a disruption may
	// have been under way before it (a burst binds in well under a second; the margin is for a slow
	// machine).
	soakMidBind = 2 * time.Second

	// soakRacks: the nodes are spread over this many racks; a quarter of the gangs require one rack.
	soakRacks = 3
	// soakReservationTimeout is the soak profile's reservation.timeoutSeconds: no PodGroup may show a
	// reservation held for longer than it plus one recheck (10 s) and soakReservationSlack (the
	// status write is coalesced and may be failed by the fault proxy, and condition times are in
	// seconds).
	soakReservationTimeout = 10 * time.Second
	soakReservationSlack   = 10 * time.Second

	soakInitialNodes = 6
	soakMinNodes     = 3
	soakMaxNodes     = 9
	soakMaxGangs     = 8
	soakMaxPlain     = 6
	// soakPodGroupTimeout is every PodGroup's spec.scheduleTimeoutSeconds.
	soakPodGroupTimeout = 5

	// soakTrackedGauge is the plugin's count of groups it keeps state for.
	soakTrackedGauge = "custom_scheduler_coscheduling_tracked_pod_groups"
)

// TestCoschedulingLifecycleSoak runs random gang lifecycles against the real scheduler —
// jobs created, completed, restarted, resized and deleted, members replaced, PodGroups re-applied,
// nodes coming and going, other pods competing, high-priority gangs preempting lower ones (whole, their
// members replaced as a job controller would), the scheduler restarting, and the apiserver failing a
// share of the scheduler's binds, evictions and status writes and breaking its watches — and checks throughout
// that no gang is partially bound for longer than the bind window. The only excuse is the test's own
// doing: a group the test broke (a bound member deleted, minMember raised, the scheduler stopped
// mid-bind) is not judged until the scheduler binds a member after the disruption; from that bind on,
// the group must be whole again within the window, as any other. Afterwards every gang must bind,
// and the plugin must forget the groups once they are gone. Some nodes publish GPUs through DRA and
// some gangs ask one per member (a claim from a template, or a DRA-backed extended resource): no
// device may ever be allocated twice, and every bound member of a device gang must have its claim
// allocated on its node (lifecycle_soak_devices_test.go). Some jobs are of two roles, two gangs under
// a gang composite: no such job may have a group bound and fewer than both whole for longer than its
// window, beyond the test's own doing (lifecycle_soak_jobs_test.go).
//
// Every random choice comes from one seed, logged at the start: SOAK_SEED=<seed> replays the same
// sequence of operations, delayed actions and injected faults (timing, and so the scheduler's
// decisions, still vary).
func TestCoschedulingLifecycleSoak(t *testing.T) {
	seed := soakSeed(t)
	var w *soakWorld
	// Registered first so it runs last, after the dumps: every failure ends with what failed (the
	// dump above it is long, and a CI log may keep only its tail) and how to replay it.
	t.Cleanup(func() {
		if t.Failed() {
			if w != nil {
				t.Logf("what failed:\n%s", strings.Join(w.failures(), "\n"))
			}
			t.Logf("replay with SOAK_SEED=%d", seed)
		}
	})
	ops := soakOps(t)
	t.Logf("soak seed %d, %d ops (replay with SOAK_SEED=%d SOAK_OPS=%d)", seed, ops, seed, ops)

	w = newSoakWorld(t, seed)
	w.setUpDevices()
	ensurePriorityClasses(t)
	// Plays the kubelet for the pods the scheduler preempts (they would stay Terminating otherwise).
	kubeletDeletesPreempted(t, w.ns)
	for range soakInitialNodes {
		w.addNode()
	}
	proxy := startFaultProxy(t, seed, soakFaults)
	// Reservations come early and end soon, so the churn meets them: gangs that wait 2 s hold room,
	// two at a time, for at most 10 s.
	w.config = schedulerConfig(t, proxy.kubeconfig, soakProfiles(t))
	w.sched = startScheduler(t, w.config)
	w.schedUpSince = time.Now()
	w.lastRestartTick = w.tick
	// Absent until a plugin sets it, which counts as 0; other tests' groups may count already.
	baseline, _ := soakTrackedGroups(t)
	t.Logf("%s before the churn: %v", soakTrackedGauge, baseline)

	w.startWatcher()
	w.churn(ops)
	w.settle()
	w.finishEarly()
	w.stopWatcher()
	w.logf("longest partial episode that ended whole: %v (window %v); a job's: %v (window %v); faults injected %s; %d reservations made",
		w.longest.Round(time.Millisecond), soakGrace, w.longestJob.Round(time.Millisecond), soakJobGrace, proxy.counts(proxy.injected), soakReservations(t, w.ns))
	w.logf("devices: %s", w.devicesSummary())
	if w.violations > 0 {
		w.errorf("%d violation(s) seen during the run (each reported above)", w.violations)
	}
	if len(w.dev.boundSeen) == 0 {
		w.errorf("no member of a device gang was seen bound: the device check proves nothing")
	}
	if proxy.injectedOf("bind") == 0 || proxy.injectedOf("watch-cut") == 0 {
		w.errorf("no bind or watch fault was injected (%s): the run proves less than it says", proxy.counts(proxy.injected))
	}
	w.cleanUp()
	w.checkStateReleased(baseline)
}

// soakProfiles is coschedulingProfiles with reservations after 2 s, two gangs at a time, for 10 s.
func soakProfiles(t *testing.T) string {
	t.Helper()
	const at = "          podGroupBackoffSeconds: 1\n"
	if !strings.Contains(coschedulingProfiles, at) {
		t.Fatal("coschedulingProfiles sets no podGroupBackoffSeconds: 1")
	}
	return strings.Replace(coschedulingProfiles, at, at+"          reservation: {afterSeconds: 2, timeoutSeconds: 10, maxGangs: 2}\n", 1)
}

// soakReservations counts the Reserved events of the soak's PodGroups.
func soakReservations(t *testing.T, ns string) int {
	t.Helper()
	evs, err := client.CoreV1().Events(ns).List(context.Background(), metav1.ListOptions{FieldSelector: "reason=Reserved"})
	if err != nil {
		t.Logf("listing Reserved events: %v", err)
		return 0
	}
	return len(evs.Items)
}

// soakGang is the test's model of one job: its PodGroup and the member pods it currently owns.
type soakGang struct {
	name      string
	minMember int
	cpu       string
	// class is the members' PriorityClass ("" for none: priority 0). A high-priority gang that does not
	// fit preempts lower-priority pods, whole gangs among them.
	class string
	// required: the PodGroup asks for all its members in one rack (topologyPolicy.required).
	required bool
	// devices: how each member asks one GPU (soakClaimDevices, soakExtendedDevices), "" for none.
	devices string
	// pods are the members the test created and has not deleted, in creation order.
	pods    []string
	nextPod int
	// succeeded are members that finished successfully early (the job goes on without replacing
	// them): they keep counting toward the quorum of the run (the finished-member rule) until the job
	// restarts, completes or is deleted.
	succeeded []string
	// parent is the composite of the job the gang is a group of ("" for none, see soakJob).
	parent string
}

// endRun forgets the succeeded members of a run none of whose live members is bound (liveBound 0):
// it has ended (its members were evicted, or lost with their node), its succeeded members count no
// more, and the next run needs minMember members of its own, as the scheduler counts it. A job whose
// members all succeeded is done and keeps them. It returns the members forgotten.
func (g *soakGang) endRun(liveBound int) []string {
	if liveBound > 0 || len(g.succeeded) == 0 || (len(g.pods) == 0 && len(g.succeeded) >= g.minMember) {
		return nil
	}
	ended := g.succeeded
	g.succeeded = nil
	return ended
}

// soakPending is an action due later: a kubelet finishing a graceful stop, a pod GC pass.
type soakPending struct {
	dueTick int
	what    string
	run     func()
}

// soakFaults are the faults injected in front of the soak's scheduler: binds and status writes
// failing, watches broken mid-stream (the informers resume or relist) or refused.
var soakFaults = []faultRule{
	{name: "bind", method: http.MethodPost, match: podPath("binding"), rate: 0.1, failFirst: 1},
	{name: "pod-status", method: http.MethodPatch, match: podPath("status"), rate: 0.1},
	{name: "podgroup-status", method: http.MethodPatch, match: podGroupStatus, rate: 0.2},
	{name: "pod-delete", method: http.MethodDelete, match: podPath(""), rate: 0.2},
	{name: "watch-cut", method: http.MethodGet, match: isWatch, rate: 0.3, cutWithin: 10 * time.Second, failFirst: 1},
	{name: "watch-fail", method: http.MethodGet, match: isWatch, rate: 0.05},
}

// soakGroupState is the watcher's record of one group.
type soakGroupState struct {
	// disrupted names the op that may have left the group partially bound on purpose; it is cleared
	// once the group has 0 or at least minMember live members bound again, or once the scheduler binds
	// a member more than soakMidBind after disruptedAt.
	disrupted   string
	disruptedAt time.Time
	// before are the group's pods when it was disrupted: only their binds may have been under way.
	before map[string]bool
	// bound are the live bound members of the last snapshot, to see binds.
	bound map[string]bool
	// partialSince is when the current undisrupted partial episode was first seen (zero: none).
	partialSince time.Time
	// firstSeen is the group as the episode's first snapshot showed it.
	firstSeen string
	// reported: this episode was reported as a violation already.
	reported bool
	// lastDisruption is the last op that disrupted the group, kept for reports.
	lastDisruption string
	// splitReported, oldReported: a split required domain, a reservation held too long, was
	// reported for the group already.
	splitReported, oldReported bool
	// ended are the succeeded members of the group's runs that ended (see runEnds).
	ended runEnds
}

// soakWorld holds everything the soak drives and watches.
type soakWorld struct {
	t     *testing.T
	seed  uint64
	rng   *rand.Rand
	ns    string
	dyn   dynamic.Interface
	start time.Time

	config          string
	sched           *runningScheduler
	lastRestartTick int
	needStart       bool
	// tick is the logical clock (see soakTick).
	tick int

	gangs     []*soakGang
	nextGang  int
	jobs      []*soakJob
	plain     []string
	nextPlain int
	nodes     []string
	nextNode  int
	nextRoom  int
	// rackOf is each node's rack (rackLabel): the soak's nodes are spread over soakRacks racks.
	rackOf map[string]string
	// settling: the churn is over; members are created ungated.
	settling bool
	// schedUpSince is when the running scheduler started (zero while none runs), for the
	// reservation-age check.
	schedUpSince time.Time
	pending      []soakPending
	op           int
	// opCounts counts the ops run, by kind, for the summary.
	opCounts map[string]int

	// dev is the DRA set-up (lifecycle_soak_devices_test.go): GPUs published on some nodes, the
	// classes and claim template the device gangs ask, and what the device check saw.
	dev soakDevices

	// mu serializes the test's changes with the watcher's observations: a snapshot is taken either
	// entirely before or entirely after an op, so a mark is never cleared from a view older than the
	// op that set it. It guards groups and violations.
	mu         sync.Mutex
	groups     map[string]*soakGroupState
	violations int
	// longest is the longest partial episode that ended with the group whole: the bind window seen;
	// longestJob a job's (see soakJob).
	longest, longestJob time.Duration

	stopWatch context.CancelFunc
	watchDone chan struct{}

	// failed collects every failure's message, repeated at the end of the log (see failf).
	failMu sync.Mutex
	failed []string
}

func newSoakWorld(t *testing.T, seed uint64) *soakWorld {
	w := &soakWorld{
		t:        t,
		seed:     seed,
		rng:      rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)),
		ns:       testNamespace(t),
		dyn:      dynamicClient(t),
		start:    time.Now(),
		groups:   map[string]*soakGroupState{},
		opCounts: map[string]int{},
		rackOf:   map[string]string{},
	}
	// No namespace controller runs here, so PodGroups outlive the namespace unless deleted.
	t.Cleanup(func() {
		_ = w.dyn.Resource(podGroupGVR).Namespace(w.ns).DeleteCollection(context.Background(), metav1.DeleteOptions{}, metav1.ListOptions{})
	})
	return w
}

func soakSeed(t *testing.T) uint64 {
	if s := os.Getenv("SOAK_SEED"); s != "" {
		seed, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			t.Fatalf("SOAK_SEED=%q is not a seed: %v", s, err)
		}
		return seed
	}
	return uint64(time.Now().UnixNano())
}

func soakOps(t *testing.T) int {
	if s := os.Getenv("SOAK_OPS"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 {
			t.Fatalf("SOAK_OPS=%q is not a number of ops", s)
		}
		return n
	}
	if testing.Short() {
		return soakShortOps
	}
	return soakDefaultOps
}

// --- reporting ---

func (w *soakWorld) elapsed() string { return fmt.Sprintf("+%.1fs", time.Since(w.start).Seconds()) }

func (w *soakWorld) logf(format string, args ...any) {
	w.t.Helper()
	w.t.Logf(w.elapsed()+" "+format, args...)
}

func (w *soakWorld) errorf(format string, args ...any) {
	w.t.Helper()
	w.failf(format+" (replay with SOAK_SEED=%d)", append(args, w.seed)...)
}

func (w *soakWorld) fatalf(format string, args ...any) {
	w.t.Helper()
	msg := fmt.Sprintf(format+" (replay with SOAK_SEED=%d)", append(args, w.seed)...)
	w.record(msg)
	w.t.Fatal(msg)
}

// failf reports a failure and keeps its message for the digest at the end of the log.
func (w *soakWorld) failf(format string, args ...any) {
	w.t.Helper()
	msg := fmt.Sprintf(format, args...)
	w.record(msg)
	w.t.Error(msg)
}

func (w *soakWorld) record(msg string) {
	w.failMu.Lock()
	defer w.failMu.Unlock()
	w.failed = append(w.failed, msg)
}

// failures returns the messages of the failures reported so far.
func (w *soakWorld) failures() []string {
	w.failMu.Lock()
	defer w.failMu.Unlock()
	return slices.Clone(w.failed)
}

// --- the churn ---

// soakOp is one kind of random operation and how often it is chosen. run returns what it did, one
// short line for the replay trace.
type soakOp struct {
	name   string
	weight int
	run    func() string
}

func (w *soakWorld) ops() []soakOp {
	return []soakOp{
		{"create gang", 4, w.createGang},
		{"create job", 2, w.createJob},
		{"complete gang", 2, w.completeGang},
		{"restart gang", 3, w.restartGang},
		{"replace member", 3, w.replaceMember},
		{"recreate podgroup", 1, w.recreatePodGroup},
		{"edit minMember", 2, w.editMinMember},
		{"delete pending member", 2, w.deletePendingMember},
		{"delete gang", 1, w.deleteGang},
		{"member succeeds early", 3, w.succeedMember},
		{"other scheduler's pod in a gang", 2, w.foreignMember},
		{"create plain pod", 2, w.createPlain},
		{"delete plain pod", 2, w.deletePlain},
		{"add node", 1, w.addNodeOp},
		{"delete node", 1, w.deleteNode},
		{"restart scheduler", 1, w.restartScheduler},
	}
}

// churn runs n random operations: bursts of 15 to 30 ops, each followed by a quiet phase of 30 to
// 45 ticks (6 to 9 seconds) in which only the kubelets' pending stops happen. During a burst room
// comes and goes quickly, which hides a gang left partially bound; a quiet phase lets such a gang
// show.
func (w *soakWorld) churn(n int) {
	ops := w.ops()
	total := 0
	for _, op := range ops {
		total += op.weight
	}
	burst := 15 + w.rng.IntN(16)
	for w.op < n {
		w.runPending()
		if burst == 0 {
			quiet := 30 + w.rng.IntN(16)
			burst = 15 + w.rng.IntN(16)
			w.logf("quiet for %d ticks", quiet)
			w.quiet(quiet)
			continue
		}
		burst--
		r := w.rng.IntN(total)
		var op soakOp
		for _, op = range ops {
			if r < op.weight {
				break
			}
			r -= op.weight
		}
		pause := time.Duration(100+w.rng.IntN(500)) * time.Millisecond
		w.step(op)
		if w.needStart {
			// Outside the lock: the watcher keeps looking while the new scheduler syncs and binds.
			w.needStart = false
			w.sched = startScheduler(w.t, w.config)
			w.mu.Lock()
			w.schedUpSince = time.Now()
			w.mu.Unlock()
			w.lastRestartTick = w.tick
			w.logf("   scheduler started again")
		}
		time.Sleep(pause)
	}
	w.logf("churn done after %d ops: %v", w.op, w.opCounts)
}

// quiet lets the given number of 200 ms ticks pass without ops; the pending actions still run when
// due.
func (w *soakWorld) quiet(ticks int) {
	for range ticks {
		time.Sleep(200 * time.Millisecond)
		w.mu.Lock()
		w.tick++
		if w.tick%5 == 0 {
			w.reconcile()
		}
		w.mu.Unlock()
		w.runPending()
	}
}

// step runs one op while the watcher waits.
func (w *soakWorld) step(op soakOp) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.reconcile()
	w.op++
	w.tick++
	w.opCounts[op.name]++
	n := w.op
	w.logf("#%d %s: %s", n, op.name, op.run())
}

// reconcile plays the gangs' job controllers: a member the test still owns that is gone or
// terminating was preempted by the scheduler (the test removes the members it deletes itself from
// its model), and is replaced by a new member. Callers hold mu.
func (w *soakWorld) reconcile() {
	for _, g := range w.gangs {
		if len(g.pods) == 0 {
			continue
		}
		live := map[string]bool{}
		for _, p := range w.listGroup(g.name) {
			if soakLive(&p) {
				live[p.Name] = true
			}
		}
		var lost []string
		for _, name := range g.pods {
			if !live[name] {
				lost = append(lost, name)
			}
		}
		if len(lost) == 0 {
			continue
		}
		g.pods = slices.DeleteFunc(g.pods, func(n string) bool { return !live[n] })
		w.logf("   controller: %s lost %v to preemption, new pods %v", g.name, lost, w.addMembers(g, len(lost)))
	}
}

// runPending runs the delayed actions that are due.
func (w *soakWorld) runPending() {
	w.mu.Lock()
	defer w.mu.Unlock()
	// An action may schedule others (a delayed replacement created gated schedules its ungate): they
	// are added to w.pending while the due ones run, and kept.
	due := w.pending
	w.pending = nil
	var later []soakPending
	for _, p := range due {
		if p.dueTick > w.tick {
			later = append(later, p)
			continue
		}
		p.run()
		w.logf("   (delayed) %s", p.what)
	}
	w.pending = append(later, w.pending...)
}

// later runs an action d from now on the logical clock (see soakTick).
func (w *soakWorld) later(d time.Duration, what string, run func()) {
	w.pending = append(w.pending, soakPending{dueTick: w.tick + max(1, int(d/soakTick)), what: what, run: run})
}

// disrupt marks a group as made partial on purpose by the test: it is not judged until it is whole
// or empty again, or until the scheduler binds a member after the disruption (see observe). A group
// already partially bound for longer than soakMidBind without cause stays judged: the test does not
// excuse what it did not do. Callers hold mu and call it before the change.
func (w *soakWorld) disrupt(group, why string) {
	s := w.groupState(group)
	s.lastDisruption = fmt.Sprintf("#%d %s at %s", w.op, why, w.elapsed())
	if d := time.Since(s.partialSince); s.disrupted == "" && !s.partialSince.IsZero() && (s.reported || d > soakMidBind) {
		w.logf("   (%s has been partially bound for %v with no disruption; %s does not excuse it)", group, d.Round(100*time.Millisecond), why)
		return
	}
	s.disrupted, s.disruptedAt, s.partialSince, s.reported = why, time.Now(), time.Time{}, false
	w.disruptJob(group, why)
	s.before = map[string]bool{}
	if g := w.gangByName(group); g != nil {
		for _, name := range g.pods {
			s.before[name] = true
		}
	}
}

func (w *soakWorld) groupState(group string) *soakGroupState {
	s := w.groups[group]
	if s == nil {
		s = &soakGroupState{}
		w.groups[group] = s
	}
	return s
}

// pickGang chooses a gang at random, or nil when there is none.
func (w *soakWorld) pickGang() *soakGang {
	if len(w.gangs) == 0 {
		return nil
	}
	return w.gangs[w.rng.IntN(len(w.gangs))]
}

func (w *soakWorld) gangByName(name string) *soakGang {
	for _, g := range w.gangs {
		if g.name == name {
			return g
		}
	}
	return nil
}

// createGang models a user submitting a job: a PodGroup and minMember or minMember+1 workers of 1, 2
// or 3 CPUs (3-CPU workers need a nearly empty 4-CPU node, which keeps room scarce), the PodGroup
// first or, sometimes, the workers first (they wait for it, holding nothing).
func (w *soakWorld) createGang() string {
	if len(w.gangs) >= soakMaxGangs {
		return "at the gang limit, so instead: delete gang: " + w.deleteGang()
	}
	g := &soakGang{name: fmt.Sprintf("g%d", w.nextGang), minMember: 2 + w.rng.IntN(4), cpu: strconv.Itoa(1 + w.rng.IntN(3))}
	switch w.rng.IntN(4) {
	case 0:
		g.class = lowPriority
	case 1:
		g.class = highPriority
	}
	g.required = w.rng.IntN(4) == 0
	if w.rng.IntN(2) == 0 {
		// Half the gangs ask GPUs, by claim template and by extended resource in turn (so both are
		// seen in every run with two device gangs).
		g.devices = []string{soakClaimDevices, soakExtendedDevices}[w.dev.gangs%2]
		w.dev.gangs++
	}
	w.nextGang++
	n := g.minMember + w.rng.IntN(2)
	podsFirst := w.rng.IntN(3) == 0
	if !podsFirst {
		w.createPodGroupOf(g)
	}
	names := w.addMembers(g, n)
	if podsFirst {
		w.createPodGroupOf(g)
	}
	w.gangs = append(w.gangs, g)
	return fmt.Sprintf("%s minMember=%d cpu=%s class=%q required=%v devices=%q pods=%v podsFirst=%v", g.name, g.minMember, g.cpu, g.class, g.required, g.devices, names, podsFirst)
}

// createPodGroupOf creates g's PodGroup: its minMember, the soak's schedule timeout, and for a gang
// that requires one rack, that topology policy.
func (w *soakWorld) createPodGroupOf(g *soakGang) {
	spec := map[string]any{"minMember": int64(g.minMember), "scheduleTimeoutSeconds": int64(soakPodGroupTimeout)}
	if g.required {
		spec["topologyPolicy"] = map[string]any{"required": rackLabel}
	}
	meta := map[string]any{"name": g.name, "namespace": w.ns}
	if g.parent != "" {
		meta["annotations"] = map[string]any{tree.AnnotationParent: g.parent}
	}
	pg := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": v1alpha1.SchemeGroupVersion.String(),
		"kind":       "PodGroup",
		"metadata":   meta,
		"spec":       spec,
	}}
	if _, err := w.dyn.Resource(podGroupGVR).Namespace(w.ns).Create(context.Background(), pg, metav1.CreateOptions{}); err != nil {
		w.fatalf("creating PodGroup %s: %v", g.name, err)
	}
}

// addMembers creates n new members of g, as a job controller would.
func (w *soakWorld) addMembers(g *soakGang, n int) []string {
	var names []string
	for range n {
		name := fmt.Sprintf("%s-%d", g.name, g.nextPod)
		g.nextPod++
		pod := gangPod(w.ns, name, g.name, g.cpu)
		pod.Spec.PriorityClassName = g.class
		w.withDevices(pod, g)
		if !w.settling && w.rng.IntN(5) == 0 {
			// Created gated (as Kueue's admission gate or a job framework does): not a member until
			// the gate goes, a moment later.
			pod.Spec.SchedulingGates = []v1.PodSchedulingGate{{Name: "custom-scheduler.test/soak"}}
			gated := name
			w.later(time.Duration(1+w.rng.IntN(4))*time.Second, "ungate "+gated, func() { w.ungate(gated) })
			name += "(gated)"
		}
		createPod(w.t, pod)
		g.pods = append(g.pods, pod.Name)
		names = append(names, name)
	}
	return names
}

// completeGang models a job whose workers all finish: the kubelet reports every bound member
// Succeeded, then the pods are removed. The PodGroup stays (a later restart may reuse it).
func (w *soakWorld) completeGang() string {
	g := w.pickGang()
	if g == nil {
		return "no gang"
	}
	if len(g.pods) == 0 {
		return g.name + " has no pods"
	}
	w.disrupt(g.name, "complete")
	pods := w.listGroup(g.name)
	succeeded := 0
	for _, p := range pods {
		if p.Spec.NodeName != "" && p.DeletionTimestamp == nil {
			w.setPhase(p.Name, v1.PodSucceeded)
			succeeded++
		}
	}
	for _, p := range pods {
		w.deletePod(p.Name, true)
	}
	g.pods, g.succeeded = nil, nil
	return fmt.Sprintf("%s: %d bound members Succeeded, %d pods deleted", g.name, succeeded, len(pods))
}

// restartGang models a training operator restarting a job: it deletes every worker — some
// gracefully, so a bound one stays Terminating until its kubelet stops it, each after its own 4 to
// 20 seconds (kubelets take up to the termination grace period, 30s by default), some at once — and
// creates as many new workers under the same PodGroup. The old workers' room thus frees one by one.
func (w *soakWorld) restartGang() string {
	g := w.pickGang()
	if g == nil {
		return "no gang"
	}
	n := len(g.pods)
	if n == 0 {
		n = g.minMember + w.rng.IntN(2)
	}
	stopAfter := make([]time.Duration, len(g.pods)) // 0: force-deleted at once
	for i := range stopAfter {
		if w.rng.IntN(3) > 0 {
			stopAfter[i] = time.Duration(4000+w.rng.IntN(16000)) * time.Millisecond
		}
	}

	w.disrupt(g.name, "restart")
	// The operator deletes every pod of the job, the ones that succeeded too: the new pods are a
	// new run.
	for _, name := range g.succeeded {
		w.deletePod(name, true)
	}
	g.succeeded = nil
	var graceful, forced []string
	for i, name := range g.pods {
		if stopAfter[i] == 0 {
			w.deletePod(name, true)
			forced = append(forced, name)
			continue
		}
		w.deletePod(name, false)
		graceful = append(graceful, fmt.Sprintf("%s(%.1fs)", name, stopAfter[i].Seconds()))
		w.later(stopAfter[i], fmt.Sprintf("kubelet stopped %s of restarted %s: force-deleted", name, g.name), func() {
			w.deletePod(name, true)
		})
	}
	g.pods = nil
	names := w.addMembers(g, n)
	return fmt.Sprintf("%s: graceful %v, forced %v, new pods %v", g.name, graceful, forced, names)
}

// replaceMember models one worker lost (evicted, or failed) and its controller creating a
// replacement: a bound member when there is one, force-deleted or first reported Failed.
func (w *soakWorld) replaceMember() string {
	g := w.pickGang()
	if g == nil {
		return "no gang"
	}
	if len(g.pods) == 0 {
		return g.name + " has no pods"
	}
	r := w.rng.IntN(1 << 20)
	fail := w.rng.IntN(2) == 0

	w.disrupt(g.name, "replace")
	var bound []string
	for _, p := range w.listGroup(g.name) {
		if soakLive(&p) && p.Spec.NodeName != "" && slices.Contains(g.pods, p.Name) {
			bound = append(bound, p.Name)
		}
	}
	victim, how := g.pods[r%len(g.pods)], "force-deleted unbound"
	if len(bound) > 0 {
		victim, how = bound[r%len(bound)], "force-deleted bound"
	}
	if fail && len(bound) > 0 {
		// A terminal pod is deleted at once, graceful or not.
		w.setPhase(victim, v1.PodFailed)
		w.deletePod(victim, false)
		how = "failed and deleted bound"
	} else {
		w.deletePod(victim, true)
	}
	g.pods = slices.DeleteFunc(g.pods, func(n string) bool { return n == victim })
	names := w.addMembers(g, 1)
	return fmt.Sprintf("%s: %s %s, new pod %v", g.name, how, victim, names)
}

// succeedMember models the workers of a job finishing at different times (an indexed Job whose
// indices complete early): one or two bound members of a whole gang report Succeeded and are not
// replaced. The gang keeps its quorum with them (the finished-member rule): a member that fails later
// is replaced and placed with the running and the succeeded ones.
func (w *soakWorld) succeedMember() string {
	g := w.pickGang()
	if g == nil {
		return "no gang"
	}
	var bound []string
	for _, p := range w.listGroup(g.name) {
		if soakLive(&p) && ours(&p) && p.Spec.NodeName != "" && slices.Contains(g.pods, p.Name) {
			bound = append(bound, p.Name)
		}
	}
	g.endRun(len(bound))
	if len(bound)+len(g.succeeded) < g.minMember || len(bound) < 2 {
		return fmt.Sprintf("%s is not whole (%d of minMember %d bound, %d succeeded)", g.name, len(bound), g.minMember, len(g.succeeded))
	}
	// (Its count stays: one live member bound less, one of the run succeeded more. One stays
	// running.)
	n := min(1+w.rng.IntN(2), len(bound)-1)
	var done []string
	for _, i := range w.rng.Perm(len(bound))[:n] {
		name := bound[i]
		w.setPhase(name, v1.PodSucceeded)
		g.pods = slices.DeleteFunc(g.pods, func(x string) bool { return x == name })
		g.succeeded = append(g.succeeded, name)
		done = append(done, name)
	}
	return fmt.Sprintf("%s: %v Succeeded (%d succeeded in the run)", g.name, done, len(g.succeeded))
}

// foreignMember models a pod of the group that the default scheduler placed (or one created with its
// node set): bound to a random node, taking its room, never a member of ours. Its workload deletes it
// 3 to 10 seconds later.
func (w *soakWorld) foreignMember() string {
	g := w.pickGang()
	if g == nil || len(w.nodes) == 0 {
		return "no gang"
	}
	name := fmt.Sprintf("%s-theirs-%d", g.name, g.nextPod)
	g.nextPod++
	node := w.nodes[w.rng.IntN(len(w.nodes))]
	pod := gangPod(w.ns, name, g.name, "1")
	pod.Spec.SchedulerName, pod.Spec.NodeName = v1.DefaultSchedulerName, node
	createPod(w.t, pod)
	d := time.Duration(3+w.rng.IntN(8)) * time.Second
	w.later(d, "delete "+name, func() { w.deletePod(name, true) })
	return fmt.Sprintf("%s: %s on %s for %v", g.name, name, node, d)
}

// recreatePodGroup models a user deleting and re-applying the PodGroup manifest while the job's
// pods stay.
func (w *soakWorld) recreatePodGroup() string {
	g := w.pickGang()
	if g == nil {
		return "no gang"
	}
	w.disrupt(g.name, "recreate podgroup")
	w.deletePodGroup(g.name)
	w.createPodGroupOf(g)
	return fmt.Sprintf("%s (minMember=%d)", g.name, g.minMember)
}

// editMinMember models an operator resizing a job's quorum (elastic training): minMember one up or
// one down, never below 1.
func (w *soakWorld) editMinMember() string {
	g := w.pickGangPreferReserving()
	if g == nil {
		return "no gang"
	}
	up := w.rng.IntN(2) == 0
	if g.minMember <= 1 {
		up = true
	}
	old := g.minMember
	if up {
		// More members are needed now: the bound ones may fall short of the new quorum.
		w.disrupt(g.name, "minMember raised")
		g.minMember++
	} else {
		g.minMember--
	}
	patch := fmt.Sprintf(`{"spec":{"minMember":%d}}`, g.minMember)
	if _, err := w.dyn.Resource(podGroupGVR).Namespace(w.ns).Patch(context.Background(), g.name, types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
		w.fatalf("patching PodGroup %s: %v", g.name, err)
	}
	return fmt.Sprintf("%s minMember %d -> %d (%d pods)", g.name, old, g.minMember, len(g.pods))
}

// deletePendingMember models a member that is not placed yet going away (an operator scaling the job
// down, a user deleting it), preferring a gang that waits for room or holds a reservation: the gang may
// fall below minMember while it reserves. Its job controller creates a replacement a few seconds later.
func (w *soakWorld) deletePendingMember() string {
	g := w.pickGangPreferReserving()
	if g == nil {
		return "no gang"
	}
	var pending []string
	for _, p := range w.listGroup(g.name) {
		if soakLive(&p) && p.Spec.NodeName == "" && slices.Contains(g.pods, p.Name) {
			pending = append(pending, p.Name)
		}
	}
	if len(pending) == 0 {
		return g.name + " has no pending member"
	}
	name := pending[w.rng.IntN(len(pending))]
	// Not bound is not out of a quorum: a member reserved, of a gang whose quorum was reached and is
	// binding, leaves it short when it goes (seen: g4 3 of 4 bound until the replacement came).
	w.disrupt(g.name, "pending member deleted")
	w.deletePod(name, true)
	g.pods = slices.DeleteFunc(g.pods, func(n string) bool { return n == name })
	d := time.Duration(2+w.rng.IntN(4)) * time.Second
	w.later(d, "replace "+name+" of "+g.name, func() {
		if w.gangByName(g.name) == g {
			w.logf("   (delayed) %s replaced by %v", name, w.addMembers(g, 1))
		}
	})
	return fmt.Sprintf("%s: %s (replaced in %v)", g.name, name, d)
}

// pickGangPreferReserving picks, half the time, a gang whose PodGroup says it holds a reservation or
// waits for room (Reserved condition present), else any gang.
func (w *soakWorld) pickGangPreferReserving() *soakGang {
	if w.rng.IntN(2) == 0 {
		pgs, err := w.dyn.Resource(podGroupGVR).Namespace(w.ns).List(context.Background(), metav1.ListOptions{})
		if err == nil {
			var reserving []*soakGang
			for _, pg := range pgs.Items {
				if _, ok := reservedSince(&pg); ok {
					if g := w.gangByName(pg.GetName()); g != nil {
						reserving = append(reserving, g)
					}
				}
			}
			if len(reserving) > 0 {
				return reserving[w.rng.IntN(len(reserving))]
			}
		}
	}
	return w.pickGang()
}

// reservedSince reports when a PodGroup's Reserved condition turned True, if it is True.
func reservedSince(pg *unstructured.Unstructured) (time.Time, bool) {
	conds, _, _ := unstructured.NestedSlice(pg.Object, "status", "conditions")
	for _, c := range conds {
		m, _ := c.(map[string]any)
		if m["type"] != "Reserved" || m["status"] != "True" {
			continue
		}
		at, err := time.Parse(time.RFC3339, fmt.Sprint(m["lastTransitionTime"]))
		return at, err == nil
	}
	return time.Time{}, false
}

// ungate removes a pod's scheduling gates (a pod gone meanwhile is fine).
func (w *soakWorld) ungate(name string) {
	patch := []byte(`{"spec":{"schedulingGates":null}}`)
	if _, err := client.CoreV1().Pods(w.ns).Patch(context.Background(), name, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil && !apierrors.IsNotFound(err) {
		w.fatalf("ungating %s: %v", name, err)
	}
}

// deleteGang models a user deleting a job: its PodGroup and its pods go, in either order.
func (w *soakWorld) deleteGang() string {
	g := w.pickGang()
	if g == nil {
		return "no gang"
	}
	if g.parent != "" {
		if j := w.jobByName(g.parent); j != nil {
			return w.deleteJob(j)
		}
	}
	groupFirst := w.rng.IntN(2) == 0
	w.disrupt(g.name, "delete")
	if groupFirst {
		w.deletePodGroup(g.name)
	}
	pods := w.listGroup(g.name)
	for _, p := range pods {
		w.deletePod(p.Name, true)
	}
	if !groupFirst {
		w.deletePodGroup(g.name)
	}
	w.gangs = slices.DeleteFunc(w.gangs, func(x *soakGang) bool { return x == g })
	return fmt.Sprintf("%s (%d pods, PodGroup first: %v)", g.name, len(pods), groupFirst)
}

// createPlain models other workloads competing for the same room: a 1-CPU pod of this scheduler
// with no group.
func (w *soakWorld) createPlain() string {
	if len(w.plain) >= soakMaxPlain {
		return "at the limit, so instead: delete plain pod: " + w.deletePlain()
	}
	return w.addPlain()
}

func (w *soakWorld) addPlain() string {
	name := fmt.Sprintf("plain-%d", w.nextPlain)
	w.nextPlain++
	createPod(w.t, st.MakePod().Namespace(w.ns).Name(name).SchedulerName(schedulerName).
		Req(map[v1.ResourceName]string{v1.ResourceCPU: "1", v1.ResourceMemory: "100Mi"}).Container("pause").Obj())
	w.plain = append(w.plain, name)
	return name
}

func (w *soakWorld) deletePlain() string {
	if len(w.plain) == 0 {
		return "no plain pod"
	}
	i := w.rng.IntN(len(w.plain))
	name := w.plain[i]
	w.deletePod(name, true)
	w.plain = slices.Delete(w.plain, i, i+1)
	return name
}

// addNodeOp models the cluster autoscaler adding a 4-CPU node, with 0, 2 or 4 GPUs.
func (w *soakWorld) addNodeOp() string {
	if len(w.nodes) >= soakMaxNodes {
		return "at the node limit, so instead: delete node: " + w.deleteNode()
	}
	return w.addNode()
}

func (w *soakWorld) addNode() string {
	name := fmt.Sprintf("soak-%d", w.nextNode)
	rack := fmt.Sprintf("soak-r%d", w.nextNode%soakRacks)
	w.nextNode++
	createNode(w.t, name, "4", "16Gi", map[string]string{rackLabel: rack})
	w.rackOf[name] = rack
	w.nodes = append(w.nodes, name)
	gpus := 2 * w.rng.IntN(3)
	w.publishDevices(name, gpus)
	return fmt.Sprintf("%s (%d GPUs)", name, gpus)
}

// deleteNode models a node removed (scale-down or failure). No node lifecycle controller or pod GC
// runs here, so the test removes the node's pods as they would, and their controllers replace them.
// A member reserved on the node may still bind to it after it is gone: a pod GC pass a few seconds
// later catches those.
func (w *soakWorld) deleteNode() string {
	if len(w.nodes) <= soakMinNodes {
		return "at the node minimum, so instead: add node: " + w.addNode()
	}
	i := w.rng.IntN(len(w.nodes))
	name := w.nodes[i]
	w.nodes = slices.Delete(w.nodes, i, i+1)
	if err := client.CoreV1().Nodes().Delete(context.Background(), name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
		w.fatalf("deleting node %s: %v", name, err)
	}
	w.unpublishDevices(name)
	evicted := w.evictGhosts()
	w.later(3*time.Second, "pod GC after deleting "+name, func() {
		if evicted := w.evictGhosts(); len(evicted) > 0 {
			w.logf("   pod GC: %v", evicted)
		}
	})
	return fmt.Sprintf("%s, its pods removed and replaced: %v", name, evicted)
}

// evictGhosts force-deletes the pods bound to nodes that no longer exist, as pod GC would, marks
// their groups disrupted and has their controllers replace the ones they own.
func (w *soakWorld) evictGhosts() []string {
	ctx := context.Background()
	nodes, err := client.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		w.fatalf("listing nodes: %v", err)
	}
	exists := map[string]bool{}
	for _, n := range nodes.Items {
		exists[n.Name] = true
	}
	pods, err := client.CoreV1().Pods(w.ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		w.fatalf("listing pods: %v", err)
	}
	var evicted []string
	for _, p := range pods.Items {
		if p.Spec.NodeName == "" || exists[p.Spec.NodeName] {
			continue
		}
		group := p.Labels[v1alpha1.PodGroupLabel]
		if group != "" {
			w.disrupt(group, "node deleted")
		}
		w.deletePod(p.Name, true)
		evicted = append(evicted, p.Name+"@"+p.Spec.NodeName)
		if g := w.gangByName(group); g != nil && slices.Contains(g.pods, p.Name) {
			g.pods = slices.DeleteFunc(g.pods, func(n string) bool { return n == p.Name })
			w.addMembers(g, 1)
		} else if g != nil && slices.Contains(g.succeeded, p.Name) {
			// A succeeded member removed with its node counts no more; the job does not rerun it.
			g.succeeded = slices.DeleteFunc(g.succeeded, func(n string) bool { return n == p.Name })
		} else if i := slices.Index(w.plain, p.Name); i >= 0 {
			w.plain = slices.Delete(w.plain, i, i+1)
			w.addPlain()
		}
	}
	return evicted
}

// restartScheduler models the scheduler process restarting (upgrade, crash): the running one stops,
// and a new one with the same configuration starts after this op (outside the watcher's lock).
// Binding is not atomic: a gang whose members were binding when the process stopped may be left
// partially bound; such groups are marked disrupted (the new scheduler should complete them). A group
// already partially bound for a while before the stop was stuck, not binding: it stays watched.
func (w *soakWorld) restartScheduler() string {
	if since := w.tick - w.lastRestartTick; since < soakRestartTicks {
		return fmt.Sprintf("skipped, last restart %d ticks ago", since)
	}
	stopAt := time.Now()
	w.sched.stop()
	w.schedUpSince = time.Time{}
	// A bind request already sent may still land.
	time.Sleep(500 * time.Millisecond)
	var midBind []string
	views, err := w.snapshot(context.Background())
	if err != nil {
		w.fatalf("listing the namespace: %v", err)
	}
	for name, v := range views {
		if !v.partial() {
			continue
		}
		if s := w.groupState(name); s.disrupted == "" && !s.partialSince.IsZero() && stopAt.Sub(s.partialSince) > soakMidBind {
			w.logf("   %s has been partially bound since +%.1fs: not excused by the restart", name, s.partialSince.Sub(w.start).Seconds())
			continue
		}
		w.disrupt(name, "scheduler stopped mid-bind")
		midBind = append(midBind, fmt.Sprintf("%s(%d/%d)", name, v.liveBound(), v.minMember))
	}
	sort.Strings(midBind)
	w.needStart = true
	return fmt.Sprintf("stopped; groups caught mid-bind: %v", midBind)
}

// --- API helpers ---

func (w *soakWorld) listGroup(group string) []v1.Pod {
	pods, err := client.CoreV1().Pods(w.ns).List(context.Background(), metav1.ListOptions{LabelSelector: v1alpha1.PodGroupLabel + "=" + group})
	if err != nil {
		w.fatalf("listing the pods of %s: %v", group, err)
	}
	return pods.Items
}

// deletePod deletes a pod, at once when force, else gracefully (a bound, unfinished pod then stays
// Terminating, as no kubelet confirms its stop). A pod already gone is fine.
func (w *soakWorld) deletePod(name string, force bool) {
	opts := metav1.DeleteOptions{}
	if force {
		opts.GracePeriodSeconds = ptr.To[int64](0)
	}
	if err := client.CoreV1().Pods(w.ns).Delete(context.Background(), name, opts); err != nil && !apierrors.IsNotFound(err) {
		w.fatalf("deleting pod %s: %v", name, err)
	}
}

// setPhase plays the kubelet reporting a pod's phase.
func (w *soakWorld) setPhase(name string, phase v1.PodPhase) {
	ctx := context.Background()
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		pod, err := client.CoreV1().Pods(w.ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		pod.Status.Phase = phase
		_, err = client.CoreV1().Pods(w.ns).UpdateStatus(ctx, pod, metav1.UpdateOptions{})
		return err
	})
	if err != nil && !apierrors.IsNotFound(err) {
		w.fatalf("setting pod %s %s: %v", name, phase, err)
	}
}

// deletePodGroup deletes a PodGroup and waits until it is gone.
func (w *soakWorld) deletePodGroup(name string) {
	ctx := context.Background()
	pgs := w.dyn.Resource(podGroupGVR).Namespace(w.ns)
	if err := pgs.Delete(ctx, name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
		w.fatalf("deleting PodGroup %s: %v", name, err)
	}
	err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, 10*time.Second, true, func(ctx context.Context) (bool, error) {
		_, err := pgs.Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return true, nil
		}
		return false, err
	})
	if err != nil {
		w.fatalf("waiting for PodGroup %s to be gone: %v", name, err)
	}
}

// --- the watcher ---

// soakLive reports whether a pod is a live member: it exists, is not being deleted and has not
// finished.
func soakLive(p *v1.Pod) bool {
	return p.DeletionTimestamp == nil && p.Status.Phase != v1.PodSucceeded && p.Status.Phase != v1.PodFailed
}

// soakGroupView is one group as the apiserver shows it.
type soakGroupView struct {
	// minMember is the PodGroup's spec.minMember, 0 when the PodGroup does not exist.
	minMember int
	pods      []v1.Pod
	// required: the PodGroup requires one rack; reserved: its Reserved condition is True, since
	// reservedAt.
	required   bool
	reserved   bool
	reservedAt time.Time
	// ended are the group's succeeded members of runs that ended, kept across snapshots (the
	// group's soakGroupState.ended; nil: none known, and none retired).
	ended runEnds
}

// liveBound counts our live bound members (another scheduler's pods are none).
func (v *soakGroupView) liveBound() int {
	n := 0
	for i := range v.pods {
		if soakLive(&v.pods[i]) && ours(&v.pods[i]) && v.pods[i].Spec.NodeName != "" {
			n++
		}
	}
	return n
}

// whole is what the quorum counts: our live bound members and, while some are, the members of their
// run that succeeded while it was in progress (the finished-member rule; see wholeCount). It first
// retires into v.ended the succeeded members of the runs this view shows ended.
func (v *soakGroupView) whole() int {
	pods := make(map[string]*v1.Pod, len(v.pods))
	for i := range v.pods {
		pods[v.pods[i].Name] = &v.pods[i]
	}
	if v.ended != nil {
		v.ended.observe(pods)
	}
	n, _ := wholeCount(pods, v.ended)
	return n
}

// boundNames are our live bound members.
func (v *soakGroupView) boundNames() map[string]bool {
	out := map[string]bool{}
	for i := range v.pods {
		if soakLive(&v.pods[i]) && ours(&v.pods[i]) && v.pods[i].Spec.NodeName != "" {
			out[v.pods[i].Name] = true
		}
	}
	return out
}

func (v *soakGroupView) live() int {
	n := 0
	for i := range v.pods {
		if soakLive(&v.pods[i]) && ours(&v.pods[i]) {
			n++
		}
	}
	return n
}

// partial: the PodGroup exists and 1..minMember-1 of our live members are bound, counting the
// succeeded members of their run in progress (see whole).
func (v *soakGroupView) partial() bool {
	n := v.liveBound()
	return v.minMember > 0 && n > 0 && v.whole() < v.minMember
}

// String lists the members: name@node for bound ones, with their state when not live.
func (v *soakGroupView) String() string {
	var parts []string
	for i := range v.pods {
		p := &v.pods[i]
		s := p.Name
		if p.Spec.NodeName != "" {
			s += "@" + p.Spec.NodeName
		}
		switch {
		case !ours(p):
			s += "(" + p.Spec.SchedulerName + ")"
		case p.DeletionTimestamp != nil:
			s += "(terminating)"
		case p.Status.Phase == v1.PodSucceeded || p.Status.Phase == v1.PodFailed:
			s += "(" + string(p.Status.Phase) + ")"
		}
		parts = append(parts, s)
	}
	sort.Strings(parts)
	return fmt.Sprintf("%d of %d live members bound (%d with the run's succeeded), minMember %d: [%s]", v.liveBound(), v.live(), v.whole(), v.minMember, strings.Join(parts, " "))
}

// snapshot lists the namespace's gang pods and PodGroups, by group.
func (w *soakWorld) snapshot(ctx context.Context) (map[string]*soakGroupView, error) {
	pods, err := client.CoreV1().Pods(w.ns).List(ctx, metav1.ListOptions{LabelSelector: v1alpha1.PodGroupLabel})
	if err != nil {
		return nil, err
	}
	pgs, err := w.dyn.Resource(podGroupGVR).Namespace(w.ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	views := map[string]*soakGroupView{}
	view := func(name string) *soakGroupView {
		if views[name] == nil {
			views[name] = &soakGroupView{}
		}
		return views[name]
	}
	for _, pg := range pgs.Items {
		m, _, _ := unstructured.NestedInt64(pg.Object, "spec", "minMember")
		v := view(pg.GetName())
		v.minMember = int(max(m, 1))
		req, _, _ := unstructured.NestedString(pg.Object, "spec", "topologyPolicy", "required")
		v.required = req != ""
		v.reservedAt, v.reserved = reservedSince(&pg)
	}
	for _, p := range pods.Items {
		v := view(p.Labels[v1alpha1.PodGroupLabel])
		v.pods = append(v.pods, p)
	}
	return views, nil
}

func (w *soakWorld) startWatcher() {
	ctx, cancel := context.WithCancel(context.Background())
	w.stopWatch, w.watchDone = cancel, make(chan struct{})
	go func() {
		defer close(w.watchDone)
		ticker := time.NewTicker(soakPoll)
		defer ticker.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-ticker.C:
				w.observe(ctx)
			}
		}
	}()
	w.t.Cleanup(w.stopWatcher)
}

func (w *soakWorld) stopWatcher() {
	if w.stopWatch != nil {
		w.stopWatch()
		<-w.watchDone
		w.stopWatch = nil
	}
}

// observe checks the invariant on one snapshot: no group is partially bound for longer than soakGrace,
// except a group the test disrupted, until the scheduler binds a member of it (see disrupt). It runs
// on the watcher's goroutine, so it reports with Errorf.
func (w *soakWorld) observe(ctx context.Context) {
	w.mu.Lock()
	defer w.mu.Unlock()
	views, err := w.snapshot(ctx)
	if err != nil {
		if ctx.Err() == nil {
			w.t.Logf("%s watcher: %v", w.elapsed(), err)
		}
		return
	}
	now := time.Now()
	for name, v := range views {
		s := w.groupState(name)
		if s.ended == nil {
			s.ended = runEnds{}
		}
		v.ended = s.ended
		w.checkPromises(name, v, s, now)
		cur := v.boundNames()
		// judgedBind: a bind seen now that cannot have been under way at the group's disruption (a
		// pod created since, or any pod soakMidBind after it).
		judgedBind := false
		for n := range cur {
			if !s.bound[n] && (!s.before[n] || now.Sub(s.disruptedAt) > soakMidBind) {
				judgedBind = true
			}
		}
		s.bound = cur
		switch {
		case v.minMember == 0:
			// No PodGroup, no quorum to judge against.
			s.partialSince = time.Time{}
		case !v.partial():
			if d := now.Sub(s.partialSince); !s.partialSince.IsZero() {
				if !s.reported && v.whole() >= v.minMember {
					w.longest = max(w.longest, d)
				}
				if s.reported || d > time.Second {
					// Reported episodes, and near misses worth knowing about when tuning the grace.
					w.t.Logf("%s watcher: %s is whole or empty again after %v partially bound: %v", w.elapsed(), name, d.Round(100*time.Millisecond), v)
				}
			}
			*s = soakGroupState{lastDisruption: s.lastDisruption, bound: cur, splitReported: s.splitReported, oldReported: s.oldReported}
		case s.disrupted != "":
			// The test broke the group. Once the scheduler binds a member of it (not one whose bind
			// was under way at the disruption), the group is judged as any other: whatever it binds
			// must make it whole within the window.
			if judgedBind {
				s.partialSince, s.firstSeen = now, fmt.Sprintf("%v, a member bound %v after %q", v, now.Sub(s.disruptedAt).Round(100*time.Millisecond), s.disrupted)
				w.t.Logf("%s watcher: %s binds again after %q; judged from here: %v", w.elapsed(), name, s.disrupted, v)
				s.disrupted = ""
			}
		case s.partialSince.IsZero():
			s.partialSince, s.firstSeen = now, v.String()
		case !s.reported && now.Sub(s.partialSince) > soakGrace:
			s.reported = true
			w.violations++
			w.failf("%s VIOLATION: group %s partially bound for %v without a disruption by the test: now %v; first seen partial at +%.1fs: %s; last disrupted by op %s (replay with SOAK_SEED=%d)",
				w.elapsed(), name, now.Sub(s.partialSince).Round(100*time.Millisecond), v, s.partialSince.Sub(w.start).Seconds(), s.firstSeen, s.lastDisruption, w.seed)
		}
	}
	for name := range w.groups {
		if views[name] == nil {
			delete(w.groups, name)
		}
	}
	w.observeJobs(views, now)
	w.checkDevices(ctx, views)
}

// addRacks adds the racks of v's live bound members (ours) to racks, with the members in each.
func (w *soakWorld) addRacks(racks map[string][]string, v *soakGroupView) {
	for i := range v.pods {
		if p := &v.pods[i]; soakLive(p) && ours(p) && p.Spec.NodeName != "" {
			racks[w.rackOf[p.Spec.NodeName]] = append(racks[w.rackOf[p.Spec.NodeName]], p.Name)
		}
	}
}

// checkPromises checks, at each observation, the promises a gang's changes must not break: a gang
// that requires one rack has its live bound members in one rack, and no reservation is held for
// longer than its timeout plus a recheck (once the running scheduler has had a moment to adopt what a
// previous one left). Callers hold mu.
func (w *soakWorld) checkPromises(name string, v *soakGroupView, s *soakGroupState, now time.Time) {
	if v.required && !s.splitReported {
		racks := map[string][]string{}
		w.addRacks(racks, v)
		if len(racks) > 1 {
			s.splitReported = true
			w.violations++
			w.failf("%s VIOLATION: group %s requires one rack and is bound in %d: %v (replay with SOAK_SEED=%d)", w.elapsed(), name, len(racks), racks, w.seed)
		}
	}
	limit := soakReservationTimeout + reservationRecheckBound + soakReservationSlack
	if v.reserved && !s.oldReported && !w.schedUpSince.IsZero() && now.Sub(w.schedUpSince) > soakReservationSlack && now.Sub(v.reservedAt) > limit {
		s.oldReported = true
		w.violations++
		w.failf("%s VIOLATION: group %s shows a reservation held since %v, %v ago: past its timeout of %v plus a recheck (replay with SOAK_SEED=%d)",
			w.elapsed(), name, v.reservedAt.Format(time.RFC3339), now.Sub(v.reservedAt).Round(time.Second), soakReservationTimeout, w.seed)
	}
}

// --- after the churn ---

// settle stops disturbing the cluster and makes room, then waits until every gang is bound: the
// kubelets finish their pending stops, the plain pods go, gangs left below their quorum get the
// missing members (so every gang is feasible), and nodes are added to hold every unbound member.
func (w *soakWorld) settle() {
	w.makeRoom()
	w.waitSettled("settle")
}

// finishEarly plays, once every gang is bound, the end of an indexed Job whose workers finish at
// different times: in every gang with three live members bound, one succeeds and another fails, and
// the failed one's replacement must be placed with the running and the succeeded members (the
// finished-member rule), within the settle timeout, while the watcher keeps judging. A gang with two
// is left alone: with both finished its run has ended (no live member bound), and a replacement would
// be a new run that needs minMember members of its own.
func (w *soakWorld) finishEarly() {
	w.mu.Lock()
	var did []string
	for _, g := range w.gangs {
		var bound []string
		for _, p := range w.listGroup(g.name) {
			if soakLive(&p) && ours(&p) && p.Spec.NodeName != "" && slices.Contains(g.pods, p.Name) {
				bound = append(bound, p.Name)
			}
		}
		if len(bound) < 3 {
			continue
		}
		done, failed := bound[0], bound[1]
		w.setPhase(done, v1.PodSucceeded)
		g.succeeded = append(g.succeeded, done)
		w.disrupt(g.name, "a member failed after another succeeded")
		w.setPhase(failed, v1.PodFailed)
		w.deletePod(failed, false)
		g.pods = slices.DeleteFunc(g.pods, func(n string) bool { return n == done || n == failed })
		did = append(did, fmt.Sprintf("%s: %s Succeeded, %s Failed, replaced by %v", g.name, done, failed, w.addMembers(g, 1)))
	}
	w.mu.Unlock()
	w.logf("finish early: %s", strings.Join(did, "; "))
	w.waitSettled("finish early")
}

// waitSettled waits until every gang is bound (see unsettled), and reports what is not.
func (w *soakWorld) waitSettled(phase string) {
	start := time.Now()
	var last map[string]*soakGroupView
	err := wait.PollUntilContextTimeout(context.Background(), 500*time.Millisecond, soakSettleTimeout, true, func(ctx context.Context) (bool, error) {
		w.mu.Lock()
		w.reconcile()
		w.mu.Unlock()
		views, err := w.snapshot(ctx)
		if err != nil {
			return false, nil
		}
		last = views
		return len(w.unsettled(views)) == 0, nil
	})
	if last == nil {
		w.errorf("could not list the namespace while settling: %v", err)
		return
	}
	if err == nil {
		var bound []string
		for _, g := range w.gangs {
			v := last[g.name]
			bound = append(bound, fmt.Sprintf("%s %d(+%d succeeded)/%d", g.name, v.liveBound(), v.whole()-v.liveBound(), v.minMember))
		}
		w.logf("%s: every gang bound after %v (live bound/minMember: %s)", phase, time.Since(start).Round(100*time.Millisecond), strings.Join(bound, ", "))
		return
	}
	for _, problem := range w.unsettled(last) {
		w.errorf("after %v of %s: %s", soakSettleTimeout, phase, problem)
	}
}

// makeRoom is settle's part under the watcher's lock.
func (w *soakWorld) makeRoom() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.settling = true
	w.runPendingLocked()
	w.reconcile()
	for _, name := range w.plain {
		w.deletePod(name, true)
	}
	w.plain = nil
	if evicted := w.evictGhosts(); len(evicted) > 0 {
		w.logf("settle: pod GC %v", evicted)
	}
	before, err := w.snapshot(context.Background())
	if err != nil {
		w.fatalf("listing the namespace: %v", err)
	}
	for _, g := range w.gangs {
		// The members of the run that succeeded count (the finished-member rule): a gang is given only
		// the replacements it needs with them, and must bind so. A run none of whose live members is
		// bound any more (they were evicted, or lost with their node) has ended: its succeeded members
		// count no more, and the next run needs minMember members of its own (a job whose members all
		// succeeded is done, and stays so).
		if v := before[g.name]; v != nil {
			if ended := g.endRun(v.liveBound()); ended != nil {
				w.logf("settle: %s's run ended with none of its members bound: its succeeded %v count no more", g.name, ended)
			}
		}
		if missing := g.minMember - len(g.pods) - len(g.succeeded); missing > 0 {
			w.logf("settle: %s has %d of minMember %d pods and %d succeeded, adding %v", g.name, len(g.pods), g.minMember, len(g.succeeded), w.addMembers(g, missing))
		}
	}
	views, err := w.snapshot(context.Background())
	if err != nil {
		w.fatalf("listing the namespace: %v", err)
	}
	unbound := 0
	for _, v := range views {
		for i := range v.pods {
			if soakLive(&v.pods[i]) && ours(&v.pods[i]) && v.pods[i].Spec.NodeName == "" {
				unbound++
			}
		}
	}
	// Members ask for at most 3 CPUs and one GPU: a 16-CPU node with soakRoomDevices GPUs per 5
	// unbound members, and one more for the fragments, hold them all wherever the scheduler spreads
	// them, in each rack (a gang that requires one rack may be pinned to any by its bound members).
	var added []string
	for r := range soakRacks {
		rack := fmt.Sprintf("soak-r%d", r)
		for range unbound/5 + 1 {
			name := fmt.Sprintf("soak-room-%d", w.nextRoom)
			w.nextRoom++
			createNode(w.t, name, "16", "64Gi", map[string]string{rackLabel: rack})
			w.rackOf[name] = rack
			w.publishDevices(name, soakRoomDevices)
			added = append(added, name)
		}
	}
	w.logf("settle: %d gangs, %d unbound live members; added nodes %v", len(w.gangs), unbound, added)
}

// runPendingLocked runs every delayed action now; callers hold mu.
func (w *soakWorld) runPendingLocked() {
	// Until none is left: an action run early may schedule others.
	for len(w.pending) > 0 {
		due := w.pending
		w.pending = nil
		for _, p := range due {
			p.run()
			w.logf("   (delayed, run early) %s", p.what)
		}
	}
}

// unsettled describes each gang that is not fully bound and each group that is partially bound.
func (w *soakWorld) unsettled(views map[string]*soakGroupView) []string {
	var problems []string
	for _, g := range w.gangs {
		v := views[g.name]
		switch {
		case v == nil || v.minMember == 0:
			problems = append(problems, fmt.Sprintf("gang %s: its PodGroup is missing", g.name))
		case len(g.pods) == 0 && len(g.succeeded) >= v.minMember:
			// Every member finished: a job done.
		case v.whole() < v.minMember:
			problems = append(problems, fmt.Sprintf("gang %s did not bind: %v%s", g.name, v, soakWhyPending(v)))
		}
	}
	for name, v := range views {
		if w.gangByName(name) == nil && v.partial() {
			problems = append(problems, fmt.Sprintf("group %s is partially bound: %v", name, v))
		}
	}
	sort.Strings(problems)
	return problems
}

// soakWhyPending quotes the scheduler's PodScheduled message of the group's unbound live members.
func soakWhyPending(v *soakGroupView) string {
	var b strings.Builder
	for i := range v.pods {
		p := &v.pods[i]
		if !soakLive(p) || p.Spec.NodeName != "" {
			continue
		}
		for _, c := range p.Status.Conditions {
			if c.Type == v1.PodScheduled && c.Status == v1.ConditionFalse {
				msg := c.Message
				if len(msg) > 200 {
					msg = msg[:200] + "..."
				}
				fmt.Fprintf(&b, "\n    %s: %s: %s", p.Name, c.Reason, msg)
			}
		}
	}
	return b.String()
}

// cleanUp deletes every gang of the namespace (pods and PodGroups) and waits until they are gone.
func (w *soakWorld) cleanUp() {
	ctx := context.Background()
	if err := w.dyn.Resource(podGroupGVR).Namespace(w.ns).DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{}); err != nil {
		w.fatalf("deleting the PodGroups: %v", err)
	}
	if err := client.CoreV1().Pods(w.ns).DeleteCollection(ctx, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)}, metav1.ListOptions{}); err != nil {
		w.fatalf("deleting the pods: %v", err)
	}
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, waitTimeout, true, func(ctx context.Context) (bool, error) {
		pods, err := client.CoreV1().Pods(w.ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		pgs, err := w.dyn.Resource(podGroupGVR).Namespace(w.ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		return len(pods.Items) == 0 && len(pgs.Items) == 0, nil
	})
	if err != nil {
		w.fatalf("waiting for the namespace's pods and PodGroups to be gone: %v", err)
	}
	w.gangs, w.plain, w.jobs = nil, nil, nil
	w.logf("cleanup: every pod and PodGroup of %s is gone", w.ns)
}

// checkStateReleased checks that the plugin dropped the state of the groups that are gone: its
// tracked-groups gauge returns to at most its value before the churn. A plugin that does not export
// the gauge skips the check.
func (w *soakWorld) checkStateReleased(baseline float64) {
	if _, ok := soakTrackedGroups(w.t); !ok {
		w.t.Logf("%s is not exported by this build: skipping the state-release check", soakTrackedGauge)
		return
	}
	var got float64
	err := wait.PollUntilContextTimeout(context.Background(), 500*time.Millisecond, waitTimeout, true, func(context.Context) (bool, error) {
		got, _ = soakTrackedGroups(w.t)
		return got <= baseline, nil
	})
	if err != nil {
		w.errorf("%s = %v %v after every group of the namespace was deleted, want at most %v (its value before the churn)", soakTrackedGauge, got, waitTimeout, baseline)
		return
	}
	w.logf("cleanup: %s = %v (baseline %v)", soakTrackedGauge, got, baseline)
}

// soakTrackedGroups reads the plugin's tracked-groups gauge for our profile from the in-process
// registry; ok is false when no such metric is exported.
func soakTrackedGroups(t *testing.T) (value float64, ok bool) {
	t.Helper()
	families, err := legacyregistry.DefaultGatherer.Gather()
	if err != nil {
		t.Fatalf("gathering metrics: %v", err)
	}
	for _, f := range families {
		if f.GetName() != soakTrackedGauge {
			continue
		}
		ok = true
		for _, m := range f.GetMetric() {
			profile := schedulerName
			for _, l := range m.GetLabel() {
				if l.GetName() == "profile" {
					profile = l.GetValue()
				}
			}
			if profile == schedulerName {
				value += m.GetGauge().GetValue()
			}
		}
	}
	return value, ok
}
