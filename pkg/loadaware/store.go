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
