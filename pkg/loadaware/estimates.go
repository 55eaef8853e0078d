package loadaware

import "k8s.io/apimachinery/pkg/types"

// Pods placed and not yet seen in the samples: their estimates, split between the Filter's and the
// Score's loads, counted on their node until the samples show them.

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
