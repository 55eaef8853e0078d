package gang

import (
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"

	resv "github.com/custom-scheduler/custom-scheduler/pkg/coscheduling/reservation"
)

// Whether a group short of room preempts or reserves as its job (see JobForPreemption and
// JobToReserve) or alone.

// PreemptAs is the job a member of a group found short of room preempts for, given the job its group
// would preempt as one (j, nil: none, see Gang.JobForPreemption). asJob (the group fits alone but not
// with the other groups its job needs): the job, or nothing (ok false) when there is none. Otherwise
// the job only when it preempts in parts (a group short alone in a job whose groups need domains of
// their own, such as replicas each in a rack, must not evict for a domain another group takes), else
// the group alone (nil).
func PreemptAs(asJob bool, j *JobPreemption) (job *JobPreemption, ok bool) {
	switch {
	case asJob:
		return j, j != nil
	case j != nil && len(j.Parts) > 0:
		return j, true
	}
	return nil, true
}

// ReservesAs reports whether a member of the group of key, found short of room (asJob: only with the
// other groups its job needs) and whose preemption does not help, reserves, given the job it would
// reserve for (job, nil: the group alone, see JobToReserve). It does not when short only with its job
// and the job cannot reserve as one (the group fits alone, and would hold its room waiting for the
// others), nor when it is a replica its job's room is not for (K of N): it neither moves nor keeps
// that room.
func ReservesAs(asJob bool, job *JobPreemption, key string) bool {
	switch {
	case asJob && job == nil:
		return false
	case job != nil && !job.Has(key):
		return false
	}
	return true
}

// LeftOut is the reservation step of the group of key when its job's room (job) is not for it (see
// ReservesAs, resv.LeftOut), under mu, on the gang gangFor returns; step applies it. Nothing when the
// group reserves alone or is one the room is for.
func LeftOut(mu sync.Locker, gangFor func() *Gang, job *JobPreemption, key string, now time.Time, step func(*Gang, resv.Input)) {
	if job == nil || job.Has(key) {
		return
	}
	mu.Lock()
	defer mu.Unlock()
	step(gangFor(), resv.Input{Event: resv.LeftOut, Now: now})
}

// MembersOr lists the live members a preemption or reservation for the job j places (the job's
// groups'), or own's for the group alone (j nil). Which nominations are room taken against it is the
// step's (see PreemptIn.claimed and ReserveIn.claimed).
func (j *JobPreemption) MembersOr(own func() []*v1.Pod) func() []*v1.Pod {
	if j == nil {
		return own
	}
	return func() []*v1.Pod { return j.Members }
}
