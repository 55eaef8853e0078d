package loadaware

import (
	"sync"
	"sync/atomic"
	"time"

	"k8s.io/apimachinery/pkg/types"
)

// sample is one NodeMetrics answer: usage measured over [timestamp-window, timestamp].
type sample struct {
	usage     usage
	timestamp time.Time
	window    time.Duration
}

// covers reports whether a pod that started at t is part of this sample: the whole window lies after
// it, so the pod's usage is in the measured average.
func (s *sample) covers(t time.Time) bool {
	return !t.After(s.timestamp.Add(-s.window))
}

// nodeLoad is what the scheduling cycle reads for a node: immutable, replaced as a whole.
type nodeLoad struct {
	// sampleTime is the timestamp of the node's last sample, for staleness.
	sampleTime time.Time
	// usage is the sampled usage plus the estimates of pods the sample does not cover yet.
	usage usage
	// pending is how many pods are estimated on top of the sample.
	pending int
}

// pendingPod is a pod bound (or assumed) to a node that its metrics do not cover yet.
type pendingPod struct {
	since    time.Time
	estimate usage
}

// nodeEntry is the store's record of one node. sample and pending are guarded by store.mu; view is
// read without locks by the scheduling cycle.
type nodeEntry struct {
	sample  *sample
	pending map[types.UID]pendingPod
	view    atomic.Pointer[nodeLoad]
}

func (e *nodeEntry) publish() {
	load := &nodeLoad{pending: len(e.pending)}
	if e.sample != nil {
		load.sampleTime = e.sample.timestamp
		load.usage = e.sample.usage
	}
	for _, p := range e.pending {
		load.usage = load.usage.add(p.estimate)
	}
	e.view.Store(load)
}

// store caches per-node samples and the estimates of pods bound after them. Writers (the metrics
// refresher, Reserve/Unreserve and pod events) serialize on mu; readers in the scheduling cycle load
// the node map and each node's view atomically, so Filter and Score take no lock and allocate nothing.
type store struct {
	mu sync.Mutex
	// nodes is replaced (copy on write) when nodes come or go; entries are shared between copies.
	nodes atomic.Pointer[map[string]*nodeEntry]
	// podNode indexes pending pods by UID.
	podNode map[types.UID]string
}

func newStore() *store {
	s := &store{podNode: map[types.UID]string{}}
	empty := map[string]*nodeEntry{}
	s.nodes.Store(&empty)
	return s
}

// snapshot returns the current node map; callers must not modify it.
func (s *store) snapshot() map[string]*nodeEntry {
	return *s.nodes.Load()
}

// load returns a node's current view, or nil when the store knows nothing about it.
func load(nodes map[string]*nodeEntry, name string) *nodeLoad {
	e, ok := nodes[name]
	if !ok {
		return nil
	}
	return e.view.Load()
}

// refreshResult summarizes a setSamples call for the refresher.
type refreshResult struct {
	// fresh holds the nodes with a sample newer than the staleness limit.
	fresh map[string]bool
	// pending is how many pods are counted by estimate.
	pending int
	// cooled lists nodes whose load went down (or that got a fresh sample they lacked): pods the
	// Filter rejected may fit there now.
	cooled []string
	// expired is how many nodes lost their last sample to staleness in this call.
	expired int
}

// setSamples records a round of samples (nil after a failed fetch). Estimates the new samples cover
// are dropped, as are samples and estimates older than staleBefore (their node counts as unmeasured
// then anyway); nodes with neither left are forgotten.
func (s *store) setSamples(samples map[string]sample, staleBefore time.Time) refreshResult {
	s.mu.Lock()
	defer s.mu.Unlock()
	old := s.snapshot()
	next := make(map[string]*nodeEntry, max(len(samples), len(old)))
	for name, e := range old {
		next[name] = e
	}
	for name, smp := range samples {
		e, ok := next[name]
		if !ok {
			e = &nodeEntry{}
			next[name] = e
		}
		if e.sample == nil || smp.timestamp.After(e.sample.timestamp) {
			smp := smp
			e.sample = &smp
		}
	}
	result := refreshResult{fresh: make(map[string]bool, len(next))}
	for name, e := range next {
		for uid, p := range e.pending {
			if (e.sample != nil && e.sample.covers(p.since)) || p.since.Before(staleBefore) {
				delete(e.pending, uid)
				delete(s.podNode, uid)
			}
		}
		if e.sample != nil && e.sample.timestamp.Before(staleBefore) {
			e.sample = nil
			result.expired++
		}
		if e.sample == nil && len(e.pending) == 0 {
			delete(next, name)
			continue
		}
		before := e.view.Load()
		e.publish()
		if e.sample == nil {
			continue
		}
		result.fresh[name] = true
		after := e.view.Load()
		if before == nil || before.sampleTime.Before(staleBefore) ||
			after.usage.MilliCPU < before.usage.MilliCPU || after.usage.Memory < before.usage.Memory {
			result.cooled = append(result.cooled, name)
		}
	}
	result.pending = len(s.podNode)
	s.nodes.Store(&next)
	return result
}

// addPending records the estimate of a pod bound or assumed to node since the given time. It does
// nothing when the pod is already recorded, or when the node's sample already covers it.
func (s *store) addPending(uid types.UID, node string, since time.Time, estimate usage) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.podNode[uid]; ok {
		return
	}
	nodes := s.snapshot()
	e, ok := nodes[node]
	if !ok {
		e = &nodeEntry{}
		next := make(map[string]*nodeEntry, len(nodes)+1)
		for name, other := range nodes {
			next[name] = other
		}
		next[node] = e
		s.nodes.Store(&next)
	} else if e.sample != nil && e.sample.covers(since) {
		return
	}
	if e.pending == nil {
		e.pending = map[types.UID]pendingPod{}
	}
	e.pending[uid] = pendingPod{since: since, estimate: estimate}
	s.podNode[uid] = node
	e.publish()
}

// tracked reports whether a pod has a pending estimate.
func (s *store) tracked(uid types.UID) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	_, ok := s.podNode[uid]
	return ok
}

// removePending forgets a pod's estimate (unreserved, deleted or finished).
func (s *store) removePending(uid types.UID) {
	s.mu.Lock()
	defer s.mu.Unlock()
	node, ok := s.podNode[uid]
	if !ok {
		return
	}
	delete(s.podNode, uid)
	if e, ok := s.snapshot()[node]; ok {
		delete(e.pending, uid)
		e.publish()
	}
}
