package loadaware

import (
	"math"
	"sync/atomic"
	"time"
)

// A refresh of the store: a round of samples taken in, the aggregations recomputed outside the lock, the
// estimates of pods cut to what the samples do not show yet.

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
