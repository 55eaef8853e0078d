package loadaware

import (
	"math"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"k8s.io/apimachinery/pkg/types"
)

// chunkBits sizes the chunks slots are allocated in: 256 slots of 128 bytes, 32 KiB per chunk.
const (
	chunkBits = 8
	chunkSize = 1 << chunkBits
	chunkMask = chunkSize - 1
)

// Bits of slot.overridden.
const (
	overrideCPU uint32 = 1 << iota
	overrideMem
)

// noLimit is a slot's limit when its threshold is off or its allocatable unknown: nothing is rejected.
const noLimit int64 = -1

// slot is the scheduling cycle's view of one node: fixed-size, updated in place with atomics by the
// refresher, the node informer and Reserve/Unreserve (all under store.mu), read without locks. The
// fields the Filter reads share the first cache line; a slot is two lines, so slots never share one.
type slot struct {
	// sampleTime is the latest sample's timestamp (unix nanoseconds); 0 when the node has none.
	sampleTime atomic.Int64
	// estCPU and estMem sum the estimates of the node's pods that the Filter's aggregation does not
	// show yet (see pendingPod.filter).
	estCPU, estMem atomic.Int64
	// filterCPU and filterMem are the Filter's aggregation of the node's samples.
	filterCPU, filterMem atomic.Int64
	// limitCPU and limitMem are the node's threshold times its allocatable (noLimit: no check).
	limitCPU atomic.Int64
	limitMem atomic.Int64
	// scoreCPU and scoreMem are the Score's aggregation of the node's samples.
	scoreCPU atomic.Int64
	scoreMem atomic.Int64
	// scoreEstCPU and scoreEstMem are estCPU and estMem for the Score's aggregation.
	scoreEstCPU, scoreEstMem atomic.Int64
	// name is the node this slot holds (nil when free).
	name atomic.Pointer[string]
	// overridden has overrideCPU and overrideMem set when the node's threshold for the resource comes
	// from its annotation, not the profile.
	overridden atomic.Uint32
	_          [28]byte
}

// room is how much more the node may take under its Filter thresholds, per resource (MaxInt64 for a
// resource without limit).
func (s *slot) room() (cpu, mem int64) {
	return room(s.limitCPU.Load(), s.filterCPU.Load()+s.estCPU.Load()),
		room(s.limitMem.Load(), s.filterMem.Load()+s.estMem.Load())
}

func room(limit, used int64) int64 {
	if limit < 0 {
		return math.MaxInt64
	}
	return limit - used
}

// slotMeta is what only writers of a slot need, guarded by store.mu, except ring and lastRaw: the
// refresher alone writes those, under store.ringMu, and reads them without locks.
type slotMeta struct {
	name string
	ring ring
	// lastRaw is the timestamp of the last sample taken in, as the metrics API gave it: the same
	// sample is not taken twice.
	lastRaw int64
	// nFilter and nScore are how many samples the Filter's and the Score's aggregations read at the
	// last refresh (see aggregation.unreflected).
	nFilter, nScore int
	// known: the node informer knows the node (its allocatable and thresholds are set).
	known              bool
	allocCPU, allocMem int64
	thrCPU, thrMem     int64
	pending            int
}

// pendingPod is a pod counted by estimate on a node.
type pendingPod struct {
	slot     int32
	estimate usage
	// readyAt is when the pod has been Running for the warm-up (unix nanoseconds): a sample whose
	// window starts then or later shows its usage. 0 while the pod is not Running.
	readyAt int64
	// filter and score are the parts of the estimate counted on the slot for the Filter's and the
	// Score's aggregations: the whole estimate until samples that show the pod come, then what the
	// aggregation does not show yet (aggregation.unreflected). They never grow; the pod stops being
	// counted when both are zero.
	filter, score usage
}

// sample is one NodeMetrics answer: usage measured over [timestamp-window, timestamp].
type sample struct {
	usage     usage
	timestamp time.Time
	window    time.Duration
}

// store holds one slot per node known from metrics, the node informer or a Reserve, and the estimates
// of pods the samples do not show yet. Writers serialize on mu; the scheduling cycle reads the index
// map and the slots without locks. Slots live in chunks that never move; an index map is replaced
// (copy on write) only when a node appears or its slot is freed, never on Reserve or a refresh of
// known nodes.
type store struct {
	agg aggregator

	// sampled counts slots with a sample: 0 means the plugin has nothing to say and costs nothing.
	sampled atomic.Int64
	// minRoomCPU and minRoomMem are lower bounds of every sampled slot's room: a pod whose estimate
	// fits under both passes every node, and PreFilter skips the Filter.
	minRoomCPU, minRoomMem atomic.Int64

	index  atomic.Pointer[map[string]int32]
	chunks atomic.Pointer[[]*[chunkSize]slot]
	// tight lists the slots with less room than the largest estimates PreFilter checked lately.
	tight atomic.Pointer[tightList]

	// counted mirrors len(pods), so pod events skip the lock when no pod is counted.
	counted atomic.Int64

	// peakCPU and peakMem are the largest estimates PreFilter checked against the nodes since the last
	// refresh: the tight list's margin follows them (the largest of two refresh intervals).
	peakCPU, peakMem         atomic.Int64
	prevPeakCPU, prevPeakMem int64 // the interval before; the refresher's

	// refreshMu serializes refreshes: the refresher aggregates rings outside mu.
	refreshMu sync.Mutex
	// ringMu guards the rings against the one reader outside the refresher, addPod (which tries it
	// under mu, for pods already Running): the refresher writes rings under ringMu alone, so taking
	// samples in never holds mu either.
	ringMu sync.RWMutex
	// ringsAhead: the rings hold samples a refresh took in but has not published yet (set under
	// ringMu, cleared under mu, by the refresher; addPod reads it holding both).
	ringsAhead atomic.Bool
	// ringsWritten, when set (tests), is called after a refresh wrote the rings, before it publishes.
	ringsWritten func()

	mu      sync.Mutex
	meta    []*slotMeta
	free    []int32
	freed   []int32 // freed in this refresh: reusable from the next one, once no cycle reads them
	pods    map[types.UID]*pendingPod
	ringCap int
	// defaultCPU and defaultMem are the profile's thresholds, for nodes without an override.
	defaultCPU, defaultMem int64
}

func newStore(agg aggregator, defaultCPU, defaultMem int64) *store {
	s := &store{agg: agg, pods: map[types.UID]*pendingPod{}, ringCap: agg.ringCapacity(),
		defaultCPU: defaultCPU, defaultMem: defaultMem}
	idx := map[string]int32{}
	s.index.Store(&idx)
	chunks := []*[chunkSize]slot{}
	s.chunks.Store(&chunks)
	s.minRoomCPU.Store(math.MaxInt64)
	s.minRoomMem.Store(math.MaxInt64)
	s.tight.Store(&tightList{})
	return s
}

// view is a scheduling cycle's handle on the store: the index map and chunks as of one moment.
type view struct {
	index  map[string]int32
	chunks []*[chunkSize]slot
}

func (s *store) view() view {
	return view{index: *s.index.Load(), chunks: *s.chunks.Load()}
}

// lookup returns the node's slot, or nil when the store knows nothing about it.
func (v view) lookup(name string) *slot {
	i, ok := v.index[name]
	if !ok {
		return nil
	}
	return &v.chunks[i>>chunkBits][i&chunkMask]
}

// slotAt returns slot i; writers only (under mu).
func (s *store) slotAt(i int32) *slot {
	return &(*s.chunks.Load())[i>>chunkBits][i&chunkMask]
}

// slotOf returns the node's slot index, creating the slot if needed. Callers hold mu.
func (s *store) slotOf(name string) int32 {
	idx := *s.index.Load()
	if i, ok := idx[name]; ok {
		return i
	}
	var i int32
	if n := len(s.free); n > 0 {
		i, s.free = s.free[n-1], s.free[:n-1]
	} else {
		i = int32(len(s.meta))
		s.meta = append(s.meta, nil)
		chunks := *s.chunks.Load()
		if int(i>>chunkBits) == len(chunks) {
			next := make([]*[chunkSize]slot, len(chunks)+1)
			copy(next, chunks)
			next[len(chunks)] = new([chunkSize]slot)
			s.chunks.Store(&next)
		}
	}
	s.meta[i] = &slotMeta{name: name, ring: newRing(s.ringCap), thrCPU: s.defaultCPU, thrMem: s.defaultMem}
	sl := s.slotAt(i)
	// A reused slot starts clean (its estimates are 0: it was freed without pods).
	sl.sampleTime.Store(0)
	sl.filterCPU.Store(0)
	sl.filterMem.Store(0)
	sl.scoreCPU.Store(0)
	sl.scoreMem.Store(0)
	sl.scoreEstCPU.Store(0)
	sl.scoreEstMem.Store(0)
	sl.overridden.Store(0)
	sl.limitCPU.Store(noLimit)
	sl.limitMem.Store(noLimit)
	sl.name.Store(&s.meta[i].name)
	next := make(map[string]int32, len(idx)+1)
	for k, v := range idx {
		next[k] = v
	}
	next[name] = i
	s.index.Store(&next)
	return i
}

// freeSlot forgets slot i (no sample, no pending pod, unknown to the informer). Callers hold mu.
func (s *store) freeSlot(i int32) {
	m := s.meta[i]
	idx := *s.index.Load()
	next := make(map[string]int32, len(idx))
	for k, v := range idx {
		if k != m.name {
			next[k] = v
		}
	}
	s.index.Store(&next)
	s.meta[i] = nil
	sl := s.slotAt(i)
	sl.name.Store(nil)
	sl.sampleTime.Store(0)
	sl.limitCPU.Store(noLimit)
	sl.limitMem.Store(noLimit)
	s.freed = append(s.freed, i)
}

// setLimits recomputes a slot's limits from its node's allocatable and thresholds. Callers hold mu.
func (s *store) setLimits(i int32) {
	m, sl := s.meta[i], s.slotAt(i)
	cpu, mem := limit(m.allocCPU, m.thrCPU), limit(m.allocMem, m.thrMem)
	if sl.sampleTime.Load() != 0 {
		// Lower the bound before the room shrinks, so no cycle sees a smaller room with the old bound.
		s.lowerMinRoom(i, room(cpu, sl.filterCPU.Load()+sl.estCPU.Load()), room(mem, sl.filterMem.Load()+sl.estMem.Load()))
	}
	sl.limitCPU.Store(cpu)
	sl.limitMem.Store(mem)
}

func limit(allocatable, thresholdPercent int64) int64 {
	if allocatable <= 0 || thresholdPercent <= 0 {
		return noLimit
	}
	return allocatable * thresholdPercent / 100
}

// lowerMinRoom keeps minRoom a lower bound of every sampled slot's room, and the tight list holding
// every sampled slot with less room than its margin: writers call it with slot i's new room before
// they shrink it. Callers hold mu.
func (s *store) lowerMinRoom(i int32, cpu, mem int64) {
	if cpu < s.minRoomCPU.Load() {
		s.minRoomCPU.Store(cpu)
	}
	if mem < s.minRoomMem.Load() {
		s.minRoomMem.Store(mem)
	}
	t := s.tight.Load()
	if (cpu < t.marginCPU || mem < t.marginMem) && !slices.Contains(t.slots, i) {
		next := &tightList{marginCPU: t.marginCPU, marginMem: t.marginMem, slots: make([]int32, len(t.slots), len(t.slots)+1)}
		copy(next.slots, t.slots)
		next.slots = append(next.slots, i)
		s.tight.Store(next)
	}
}

// tightList lists the slots with less room than a margin (per resource), so that PreFilter looks at
// those alone for a pod whose estimate is within the margin: a node can only reject such a pod if its
// room is below the estimate, hence below the margin. It may also hold slots with more room, or
// freed ones. Replaced as a whole.
type tightList struct {
	marginCPU, marginMem int64
	slots                []int32
}

// widenTight makes the tight list's margin cover a pod's estimate, rebuilding the list over every
// slot. PreFilter calls it after a full scan for a pod larger than the margin; each refresh sets the
// margin back to the largest estimates checked in its last two intervals.
func (s *store) widenTight(e usage) {
	s.mu.Lock()
	defer s.mu.Unlock()
	t := s.tight.Load()
	if e.MilliCPU <= t.marginCPU && e.Memory <= t.marginMem {
		return
	}
	next := &tightList{marginCPU: max(t.marginCPU, e.MilliCPU), marginMem: max(t.marginMem, e.Memory)}
	for i, m := range s.meta {
		if m == nil {
			continue
		}
		sl := s.slotAt(int32(i))
		if sl.sampleTime.Load() == 0 {
			continue
		}
		if cpu, mem := sl.room(); cpu < next.marginCPU || mem < next.marginMem {
			next.slots = append(next.slots, int32(i))
		}
	}
	s.tight.Store(next)
}

// setNode records a node's allocatable and thresholds, from the node informer. It returns the node's
// slot and whether its room grew (pods the Filter rejected may fit there now).
func (s *store) setNode(name string, allocCPU, allocMem, thrCPU, thrMem int64) (i int32, grew bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	i = s.slotOf(name)
	m := s.meta[i]
	m.known = true
	if m.allocCPU == allocCPU && m.allocMem == allocMem && m.thrCPU == thrCPU && m.thrMem == thrMem {
		return i, false
	}
	sl := s.slotAt(i)
	beforeCPU, beforeMem := sl.room()
	m.allocCPU, m.allocMem, m.thrCPU, m.thrMem = allocCPU, allocMem, thrCPU, thrMem
	var overridden uint32
	if thrCPU != s.defaultCPU {
		overridden |= overrideCPU
	}
	if thrMem != s.defaultMem {
		overridden |= overrideMem
	}
	sl.overridden.Store(overridden)
	s.setLimits(i)
	cpu, mem := sl.room()
	return i, cpu > beforeCPU || mem > beforeMem
}

// deleteNode forgets what the informer said about a node; its slot goes once nothing else holds it.
func (s *store) deleteNode(name string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	i, ok := (*s.index.Load())[name]
	if !ok {
		return
	}
	m := s.meta[i]
	m.known, m.allocCPU, m.allocMem = false, 0, 0
	s.setLimits(i)
	// A slot with a sample is freed by the refresh that finds it stale.
	if m.pending == 0 && s.slotAt(i).sampleTime.Load() == 0 {
		s.freeSlot(i)
	}
}

// setReady records when a counted pod became ready (see pendingPod.readyAt); false when the pod is
// not counted.
func (s *store) setReady(uid types.UID, readyAt int64) bool {
	if s.counted.Load() == 0 {
		return false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	p, ok := s.pods[uid]
	if ok {
		p.readyAt = readyAt
	}
	return ok
}

// addPod counts a pod's estimate on a node, or updates when it became ready (readyAt, see
// pendingPod). A pod already counted keeps its estimate and node; a Running pod whose usage the
// node's aggregations show already is not counted, and one they show in part counts the rest.
func (s *store) addPod(uid types.UID, node string, estimate usage, readyAt int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if p, ok := s.pods[uid]; ok {
		p.readyAt = readyAt
		return
	}
	p := &pendingPod{estimate: estimate, readyAt: readyAt, filter: estimate, score: estimate}
	// A pod already Running may be shown by the samples in part or in full. The rings say, unless a
	// refresh is writing them (never wait for that under mu: Reserve would wait too) or has written
	// samples whose loads it has not published: then the whole estimate counts, and the refresh's
	// publish cuts it (counted twice for a moment rather than not at all).
	if readyAt != 0 {
		if i, ok := (*s.index.Load())[node]; ok && s.ringMu.TryRLock() {
			if !s.ringsAhead.Load() {
				p.filter, p.score = s.parts(s.meta[i], p)
			}
			s.ringMu.RUnlock()
			if p.filter == (usage{}) && p.score == (usage{}) {
				return
			}
		}
	}
	i := s.slotOf(node)
	p.slot = i
	s.pods[uid] = p
	s.counted.Store(int64(len(s.pods)))
	s.meta[i].pending++
	sl := s.slotAt(i)
	if sl.sampleTime.Load() != 0 {
		cpu, mem := sl.room()
		s.lowerMinRoom(i, cpu-p.filter.MilliCPU, mem-p.filter.Memory)
	}
	sl.estCPU.Add(p.filter.MilliCPU)
	sl.estMem.Add(p.filter.Memory)
	sl.scoreEstCPU.Add(p.score.MilliCPU)
	sl.scoreEstMem.Add(p.score.Memory)
}

// parts is what of a ready pod's estimate the node's Filter and Score aggregations do not show
// yet, no more than the parts counted now. Callers hold mu, and read the ring: they are the
// refresher or hold ringMu.
func (s *store) parts(m *slotMeta, p *pendingPod) (filter, score usage) {
	if p.readyAt == 0 {
		return p.filter, p.score
	}
	part := func(a aggregation, n int, counted usage) usage {
		num, den := a.unreflected(&m.ring, n, p.readyAt)
		return usage{
			MilliCPU: min(counted.MilliCPU, share(p.estimate.MilliCPU, num, den)),
			Memory:   min(counted.Memory, share(p.estimate.Memory, num, den)),
		}
	}
	return part(s.agg.filter, m.nFilter, p.filter), part(s.agg.score, m.nScore, p.score)
}

// share is v·num/den (0 ≤ num ≤ den) without overflowing for any v.
func share(v, num, den int64) int64 {
	return v/den*num + v%den*num/den
}

// setPartsLocked changes the parts of a pod's estimate counted on its slot. Callers hold mu.
func (s *store) setPartsLocked(p *pendingPod, filter, score usage) {
	sl := s.slotAt(p.slot)
	sl.estCPU.Add(filter.MilliCPU - p.filter.MilliCPU)
	sl.estMem.Add(filter.Memory - p.filter.Memory)
	sl.scoreEstCPU.Add(score.MilliCPU - p.score.MilliCPU)
	sl.scoreEstMem.Add(score.Memory - p.score.Memory)
	p.filter, p.score = filter, score
}

// pendingCount is how many pods are counted by estimate.
func (s *store) pendingCount() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.pods)
}

// tracked reports whether a pod is counted by estimate.
func (s *store) tracked(uid types.UID) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	_, ok := s.pods[uid]
	return ok
}

// removePod stops counting a pod's estimate (unreserved, deleted, finished).
func (s *store) removePod(uid types.UID) {
	if s.counted.Load() == 0 {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.removeLocked(uid)
}

func (s *store) removeLocked(uid types.UID) {
	p, ok := s.pods[uid]
	if !ok {
		return
	}
	delete(s.pods, uid)
	s.counted.Store(int64(len(s.pods)))
	s.setPartsLocked(p, usage{}, usage{})
	s.meta[p.slot].pending--
}

// refreshResult summarizes a setSamples call for the refresher.
type refreshResult struct {
	// pending is how many pods are counted by estimate.
	pending int
	// known is how many nodes the informer knows; unmeasured is how many of them have no fresh
	// sample.
	known, unmeasured int
	// cooled lists slots whose Filter load went down (or that got a sample they lacked): pods the
	// Filter rejected may fit there now.
	cooled []int32
	// expired is how many nodes lost their last sample to staleness in this call.
	expired int
	// future is how many samples had a timestamp after now (taken as of now).
	future int
	// firstSample: the store had no sample before this call and has one now.
	firstSample bool
}

// setSamples records a round of samples (nil after a failed fetch) at now: each new sample enters its
// node's history, each node's Filter and Score aggregations are recomputed, the estimates of pods
// are cut to what the aggregations do not show yet (and dropped once they show all of it), and nodes
// whose latest sample is older than staleBefore lose their history (they count as unmeasured).
//
// It holds mu only to take the samples in and to publish the result: the aggregations, the costly
// part (a percentile sorts each node's window), are computed without it, so Reserve, PreFilter and
// the informers never wait for them.
func (s *store) setSamples(samples map[string]sample, now, staleBefore time.Time) refreshResult {
	s.refreshMu.Lock()
	defer s.refreshMu.Unlock()
	staleNanos, nowNanos := staleBefore.UnixNano(), now.UnixNano()

	// 1. Under mu: find the samples' slots and list the nodes to aggregate.
	type update struct {
		i                                        int32
		m                                        *slotMeta
		known                                    bool
		sampleTime                               int64
		filterCPU, filterMem, scoreCPU, scoreMem int64
		nFilter, nScore                          int
	}
	type incoming struct {
		m   *slotMeta
		smp sample
	}
	result := refreshResult{}
	s.mu.Lock()
	// Slots freed by the previous refresh are no longer read by any scheduling cycle.
	s.free = append(s.free, s.freed...)
	s.freed = s.freed[:0]
	in := make([]incoming, 0, len(samples))
	for name, smp := range samples {
		if !smp.timestamp.Before(staleBefore) {
			in = append(in, incoming{m: s.meta[s.slotOf(name)], smp: smp})
		}
	}
	result.firstSample = s.sampled.Load() == 0
	updates := make([]update, 0, len(s.meta))
	for i, m := range s.meta {
		if m != nil {
			updates = append(updates, update{i: int32(i), m: m, known: m.known})
		}
	}
	s.mu.Unlock()

	// 1b. Under ringMu only: take the samples into the rings, forget stale ones.
	s.ringMu.Lock()
	for _, x := range in {
		m, smp := x.m, x.smp
		raw := smp.timestamp.UnixNano()
		if raw == m.lastRaw {
			continue // the same sample again
		}
		ts, start := raw, smp.timestamp.Add(-smp.window).UnixNano()
		if raw > nowNanos {
			// A provider whose clock runs ahead: taken as of now, or the node would keep this
			// sample until the clock caught up.
			result.future++
			ts, start = nowNanos, nowNanos-smp.window.Nanoseconds()
		}
		if m.ring.n > 0 {
			latest := m.ring.latest()
			if raw < m.lastRaw && m.lastRaw <= latest.ts {
				continue // older than the latest sample (which was not from the future)
			}
			ts, start = max(ts, latest.ts), max(start, latest.start)
		}
		m.ring.push(ringSample{ts: ts, start: start, cpu: smp.usage.MilliCPU, mem: smp.usage.Memory})
		m.lastRaw = raw
		s.ringsAhead.Store(true)
	}
	for k := range updates {
		u := &updates[k]
		if u.known {
			result.known++
		}
		if u.m.ring.n > 0 && u.m.ring.latest().ts < staleNanos {
			u.m.ring.reset()
			result.expired++
		}
		if u.m.ring.n == 0 && u.known {
			result.unmeasured++
		}
	}
	s.ringMu.Unlock()
	if s.ringsWritten != nil {
		s.ringsWritten()
	}

	// 2. Without locks: aggregate. Only this refresh writes rings, and it is done writing.
	for k := range updates {
		u := &updates[k]
		if u.m.ring.n == 0 {
			continue
		}
		u.sampleTime = u.m.ring.latest().ts
		u.filterCPU, u.filterMem, u.nFilter = s.agg.filter.apply(&u.m.ring, nowNanos, &s.agg.scratch)
		u.scoreCPU, u.scoreMem, u.nScore = s.agg.score.apply(&u.m.ring, nowNanos, &s.agg.scratch)
	}

	// 3. Under mu: publish. New loads are published first and estimates cut after, so a cycle in
	// between counts a pod twice rather than not at all; minRoom stays a lower bound throughout.
	s.mu.Lock()
	defer s.mu.Unlock()
	defer s.ringsAhead.Store(false)
	type load struct {
		fresh    bool
		cpu, mem int64
	}
	before := make([]load, len(updates))
	for k := range updates {
		u := &updates[k]
		if s.meta[u.i] != u.m {
			// Freed meanwhile (a node deleted with no sample left): its index is not reused before
			// the next refresh.
			u.m = nil
			continue
		}
		sl := s.slotAt(u.i)
		if t := sl.sampleTime.Load(); t != 0 && t >= staleNanos {
			before[k] = load{fresh: true, cpu: sl.filterCPU.Load() + sl.estCPU.Load(), mem: sl.filterMem.Load() + sl.estMem.Load()}
		}
		if u.sampleTime != 0 {
			s.lowerMinRoom(u.i, room(sl.limitCPU.Load(), u.filterCPU+sl.estCPU.Load()), room(sl.limitMem.Load(), u.filterMem+sl.estMem.Load()))
		}
		u.m.nFilter, u.m.nScore = u.nFilter, u.nScore
		sl.filterCPU.Store(u.filterCPU)
		sl.filterMem.Store(u.filterMem)
		sl.scoreCPU.Store(u.scoreCPU)
		sl.scoreMem.Store(u.scoreMem)
		sl.sampleTime.Store(u.sampleTime)
	}
	// A pod ready before the horizon is in every fresh sample of every aggregation's window.
	horizon := staleNanos - s.agg.window().Nanoseconds()
	for uid, p := range s.pods {
		if p.readyAt == 0 {
			continue
		}
		if p.readyAt < horizon {
			s.removeLocked(uid)
			continue
		}
		filter, score := s.parts(s.meta[p.slot], p)
		if filter == (usage{}) && score == (usage{}) {
			s.removeLocked(uid)
			continue
		}
		s.setPartsLocked(p, filter, score)
	}

	// The tight list's margin follows the largest estimates PreFilter checked in the last two
	// intervals, so one large pod does not widen it for good.
	peakCPU, peakMem := s.peakCPU.Swap(0), s.peakMem.Swap(0)
	tight := &tightList{marginCPU: max(peakCPU, s.prevPeakCPU), marginMem: max(peakMem, s.prevPeakMem)}
	s.prevPeakCPU, s.prevPeakMem = peakCPU, peakMem
	minCPU, minMem := int64(math.MaxInt64), int64(math.MaxInt64)
	var sampled int64
	for k, u := range updates {
		if u.m == nil {
			continue
		}
		sl := s.slotAt(u.i)
		if u.sampleTime == 0 {
			if u.m.pending == 0 && !u.m.known {
				s.freeSlot(u.i)
			}
			continue
		}
		sampled++
		cpu, mem := sl.room()
		minCPU, minMem = min(minCPU, cpu), min(minMem, mem)
		if cpu < tight.marginCPU || mem < tight.marginMem {
			tight.slots = append(tight.slots, u.i)
		}
		b := before[k]
		if !b.fresh || sl.filterCPU.Load()+sl.estCPU.Load() < b.cpu || sl.filterMem.Load()+sl.estMem.Load() < b.mem {
			result.cooled = append(result.cooled, u.i)
		}
	}
	s.tight.Store(tight)
	s.minRoomCPU.Store(minCPU)
	s.minRoomMem.Store(minMem)
	s.sampled.Store(sampled)
	result.firstSample = result.firstSample && sampled > 0
	result.pending = len(s.pods)
	return result
}

// notePeak records an estimate PreFilter checked against the nodes (see store.peakCPU).
func (s *store) notePeak(e usage) {
	atomicMax(&s.peakCPU, e.MilliCPU)
	atomicMax(&s.peakMem, e.Memory)
}

func atomicMax(a *atomic.Int64, v int64) {
	for {
		old := a.Load()
		if v <= old || a.CompareAndSwap(old, v) {
			return
		}
	}
}
