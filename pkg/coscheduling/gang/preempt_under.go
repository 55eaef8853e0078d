package gang

import (
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/custom-scheduler/custom-scheduler/pkg/coscheduling/podgroup"
)

// PreemptUnder runs a gang's preemption (Preempt) as DecideUnder runs PreFilter's step: under mu, on
// the gang gangFor returns, an earlier member's answer of this attempt is reused (CachedPreemption
// under k, its Counted read there); otherwise the step runs with mu released, reading the gang's
// split under mu (SplitForPreemption) and the snapshot's nodes (nodes) only then, and its answer is
// remembered for the gang's next members (RememberPreemption). cached reports a reused answer.
func PreemptUnder(mu sync.Locker, gangFor func() *Gang, k PreemptKey, ttl time.Duration, in PreemptIn, nodes func() ([]fwk.NodeInfo, error)) (out PreemptOut, cached bool) {
	mu.Lock()
	k.Counted = len(gangFor().Members)
	out, cached = gangFor().CachedPreemption(k, ttl)
	mu.Unlock()
	if cached {
		return out, true
	}
	out = PreemptOut{Result: PreemptError}
	var err error
	if in.Nodes, err = nodes(); err != nil {
		out.Err = err
	} else {
		in.Split = func() ([]*v1.Pod, int, []string) {
			mu.Lock()
			defer mu.Unlock()
			return gangFor().SplitForPreemption(in.Members, podgroup.MinMember(in.PodGroup))
		}
		out = Preempt(in)
	}
	mu.Lock()
	gangFor().RememberPreemption(k, out)
	mu.Unlock()
	return out, false
}
