package integration

import (
	"context"
	"fmt"
	"io"
	"log"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"

	"github.com/custom-scheduler/custom-scheduler/pkg/coscheduling/podgroup"
)

// faultRule fails a share of the requests of one kind before they reach the apiserver.
type faultRule struct {
	name   string
	method string
	// match tells the request of this kind.
	match func(r *http.Request) bool
	rate  float64
	// cutWithin, when set, lets the request through and cuts its response after a random time up to
	// it (a watch that breaks), instead of failing it with a 500.
	cutWithin time.Duration
	// failFirst: the first requests of this kind always fail, so a run cannot pass without the fault.
	failFirst int
	// delay, when set, lets every request of this kind through after this long instead of failing it
	// (a slow apiserver); rate and failFirst are not read.
	delay time.Duration
}

// faultProxy is a loopback proxy in front of the apiserver that fails requests at random, from a
// seed, with a 500 the client sees as an API error. The scheduler under test talks to it over plain
// HTTP; the proxy forwards as the admin user.
type faultProxy struct {
	kubeconfig string
	mu         sync.Mutex
	rng        *rand.Rand
	rules      []faultRule
	injected   map[string]int
	passed     map[string]int
	// watches cancels the watches under way, by request (see cutWatches).
	watches map[*http.Request]context.CancelFunc
}

// faultSeed is FAULT_SEED, else the clock's; tests print it so that a failure can be replayed.
func faultSeed(t *testing.T) uint64 {
	t.Helper()
	return envSeed(t, "FAULT_SEED")
}

// envSeed is the seed the environment variable name gives, else the clock's, logged with how to
// replay it.
func envSeed(t *testing.T, name string) uint64 {
	t.Helper()
	seed := uint64(time.Now().UnixNano())
	if s := os.Getenv(name); s != "" {
		v, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			t.Fatalf("%s=%q is not a seed: %v", name, s, err)
		}
		seed = v
	}
	t.Logf("seed %d (replay with %s=%d)", seed, name, seed)
	return seed
}

func startFaultProxy(t *testing.T, seed uint64, rules []faultRule) *faultProxy {
	t.Helper()
	target, err := url.Parse(restConfig.Host)
	if err != nil {
		t.Fatal(err)
	}
	rt, err := rest.TransportFor(restConfig)
	if err != nil {
		t.Fatal(err)
	}
	p := &faultProxy{rng: rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)), rules: rules, injected: map[string]int{}, passed: map[string]int{},
		watches: map[*http.Request]context.CancelFunc{}}
	rp := &httputil.ReverseProxy{
		Rewrite:       func(r *httputil.ProxyRequest) { r.SetURL(target); r.Out.Host = target.Host },
		Transport:     rt,
		FlushInterval: -1,
		// A cut watch is the point, not news.
		ErrorLog: log.New(io.Discard, "", 0),
	}
	handler := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rule, cut := p.fail(r)
		if cut > 0 {
			ctx, cancel := context.WithTimeout(r.Context(), cut)
			defer cancel()
			rp.ServeHTTP(w, r.WithContext(ctx))
			return
		}
		if rule == "" && isWatch(r) {
			ctx, cancel := context.WithCancel(r.Context())
			p.mu.Lock()
			p.watches[r] = cancel
			p.mu.Unlock()
			defer func() {
				p.mu.Lock()
				delete(p.watches, r)
				p.mu.Unlock()
				cancel()
			}()
			rp.ServeHTTP(w, r.WithContext(ctx))
			return
		}
		if rule != "" {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusInternalServerError)
			fmt.Fprintf(w, `{"kind":"Status","apiVersion":"v1","status":"Failure","message":"injected fault (%s)","reason":"InternalError","code":500}`, rule)
			return
		}
		rp.ServeHTTP(w, r)
	})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: handler, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() {
		_ = srv.Close()
		t.Logf("faults injected %v, passed %v", p.counts(p.injected), p.counts(p.passed))
	})
	p.kubeconfig = filepath.Join(t.TempDir(), "proxy.kubeconfig")
	cfg := fmt.Sprintf(`apiVersion: v1
kind: Config
clusters:
- name: proxy
  cluster:
    server: http://%s
users:
- name: proxy
  user: {}
contexts:
- name: proxy
  context: {cluster: proxy, user: proxy}
current-context: proxy
`, ln.Addr().String())
	if err := os.WriteFile(p.kubeconfig, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// fail decides whether to fail the request, and names its rule; cut > 0 says to cut its response
// after that long instead. Each rule that matches the request rolls in turn.
func (p *faultProxy) fail(r *http.Request) (rule string, cut time.Duration) {
	for _, fr := range p.rules {
		if r.Method != fr.method || !fr.match(r) {
			continue
		}
		if fr.delay > 0 {
			p.mu.Lock()
			p.injected[fr.name]++
			p.mu.Unlock()
			time.Sleep(fr.delay)
			continue
		}
		p.mu.Lock()
		hit := p.rng.Float64() < fr.rate || p.injected[fr.name]+p.passed[fr.name] < fr.failFirst
		if !hit {
			// The next rule that matches may still inject its own fault.
			p.passed[fr.name]++
			p.mu.Unlock()
			continue
		}
		p.injected[fr.name]++
		if fr.cutWithin > 0 {
			cut = time.Duration(1 + p.rng.Int64N(int64(fr.cutWithin)))
		}
		p.mu.Unlock()
		return fr.name, cut
	}
	return "", 0
}

// setRate changes a rule's rate.
func (p *faultProxy) setRate(rule string, rate float64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for i := range p.rules {
		if p.rules[i].name == rule {
			p.rules[i].rate = rate
		}
	}
}

// cutWatches ends the watches under way that match.
func (p *faultProxy) cutWatches(match func(*http.Request) bool) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := 0
	for r, cancel := range p.watches {
		if match(r) {
			cancel()
			n++
		}
	}
	return n
}

func (p *faultProxy) counts(m map[string]int) string {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []string
	for k, v := range m {
		out = append(out, fmt.Sprintf("%s=%d", k, v))
	}
	sort.Strings(out)
	return strings.Join(out, " ")
}

func (p *faultProxy) injectedOf(rule string) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.injected[rule]
}

// podPath matches a pod's own path, or one of its subresources when sub is set.
func podPath(sub string) func(*http.Request) bool {
	return func(r *http.Request) bool {
		parts := strings.Split(strings.Trim(r.URL.Path, "/"), "/")
		// api/v1/namespaces/NS/pods/NAME[/SUB]
		if len(parts) < 6 || parts[0] != "api" || parts[4] != "pods" {
			return false
		}
		if sub == "" {
			return len(parts) == 6
		}
		return len(parts) == 7 && parts[6] == sub
	}
}

// The faults of the preemption test: a share of the scheduler's pod deletes, binds and status writes fail.
var preemptionFaults = []faultRule{
	{name: "pod-delete", method: http.MethodDelete, match: podPath(""), rate: 0.3, failFirst: 1},
	{name: "bind", method: http.MethodPost, match: podPath("binding"), rate: 0.2, failFirst: 1},
	{name: "pod-status", method: http.MethodPatch, match: podPath("status"), rate: 0.1},
	{name: "podgroup-status", method: http.MethodPatch, match: podGroupStatus, rate: 0.2},
}

func podGroupStatus(r *http.Request) bool {
	return strings.Contains(r.URL.Path, "/podgroups/") && strings.HasSuffix(r.URL.Path, "/status")
}

// isWatch matches a watch request (of any resource).
func isWatch(r *http.Request) bool { return r.URL.Query().Get("watch") == "true" }

// TestGangPreemptionUnderFaults preempts gangs while the apiserver fails a share of the scheduler's
// deletes, binds and status writes: no gang, victim or preemptor, is ever partially bound beyond the
// bind window, and the preemptors end up whole.
func TestGangPreemptionUnderFaults(t *testing.T) {
	ensurePriorityClasses(t)
	proxy := startFaultProxy(t, faultSeed(t), preemptionFaults)
	startScheduler(t, schedulerConfig(t, proxy.kubeconfig, shippedProfiles(t)))
	ns := testNamespace(t)
	caseNodes(t, "fx", 4)
	kubeletDeletesPreempted(t, ns)

	// Four low-priority gangs of 4 fill the four 4-CPU nodes.
	for k := range 4 {
		group := fmt.Sprintf("lo%d", k)
		watchWhole(t, ns, group, 4, nil)
		runGang(t, ns, group, 4, "1", lowPriority, "fx", nil)
	}
	for k := range 4 {
		waitForBoundMembers(t, ns, fmt.Sprintf("lo%d", k), 4)
	}
	// Two high-priority gangs of 4 take the room of two of them.
	for k := range 2 {
		group := fmt.Sprintf("hi%d", k)
		watchWhole(t, ns, group, 4, nil)
		runGang(t, ns, group, 4, "1", highPriority, "fx", nil)
	}
	for k := range 2 {
		waitForBoundMembers(t, ns, fmt.Sprintf("hi%d", k), 4)
	}
	// Every victim gang settles whole or gone (the watchers fail a partial episode longer than the
	// bind window on the way).
	gone := 0
	for k := range 4 {
		group := fmt.Sprintf("lo%d", k)
		n := 0
		waitFor(t, ns, fmt.Sprintf("victim gang %s whole or gone", group), func(ctx context.Context) (bool, error) {
			var err error
			n, err = groupLiveBound(ctx, ns, group)
			return n == 0 || n == 4, err
		})
		if n == 0 {
			gone++
		}
	}
	if gone < 2 {
		t.Errorf("%d low-priority gangs were evicted, want at least 2 for the high-priority gangs' room", gone)
	}
	if proxy.injectedOf("pod-delete") == 0 || proxy.injectedOf("bind") == 0 {
		t.Errorf("no delete or bind fault was injected (%s): the test proves nothing", proxy.counts(proxy.injected))
	}
}

// isPodGroupWatch matches a watch of PodGroups.
func isPodGroupWatch(r *http.Request) bool {
	return isWatch(r) && strings.HasSuffix(r.URL.Path, "/podgroups")
}

// TestPodGroupRecreatedWhileWatchIsDown: a PodGroup deleted and created again while the scheduler's
// PodGroup watch is down reaches the scheduler as one update to another UID (the relist). The old
// PodGroup's attempt must end then: its waiting members are rejected at once (not at the deadline)
// and the gang is placed afresh under the new PodGroup.
func TestPodGroupRecreatedWhileWatchIsDown(t *testing.T) {
	proxy := startFaultProxy(t, faultSeed(t), []faultRule{
		{name: "podgroup-watch", method: http.MethodGet, match: isPodGroupWatch, rate: 0},
	})
	startScheduler(t, schedulerConfig(t, proxy.kubeconfig, shippedProfiles(t)))
	ns := testNamespace(t)
	caseNodes(t, "rl", 2)
	watchWhole(t, ns, "re", 3, nil)
	createPodGroup(t, ns, "re", 3, 30)
	createHeldMembers(t, ns, "re", 3, 1, "1")
	waitForMembersWaiting(t, ns, "re", 2)

	// The watch goes down and stays down while the PodGroup is replaced; the informer relists.
	proxy.setRate("podgroup-watch", 1)
	if n := proxy.cutWatches(isPodGroupWatch); n == 0 {
		t.Fatal("no PodGroup watch was under way to cut")
	}
	pgs := dynamicClient(t).Resource(podGroupGVR).Namespace(ns)
	if err := pgs.Delete(context.Background(), "re", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	createPodGroup(t, ns, "re", 3, 30)
	proxy.setRate("podgroup-watch", 0)

	ev := waitForEvent(t, ns, "re-0", podgroup.ReasonGangRejected, schedulerName)
	if !strings.Contains(ev.Message, "was deleted") {
		t.Errorf("GangRejected event %q does not say the PodGroup was deleted", ev.Message)
	}
	release(t, ns, "re-2")
	waitForBoundMembers(t, ns, "re", 3)
}
