package devices

import (
	"time"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"

	"github.com/custom-scheduler/custom-scheduler/pkg/coscheduling/gangfit"
)

// Devices the real filter refused. The check's model stays a relaxation where it cannot tell: a node
// the allocator did not reach within the check's budget counts as holding every member. When an
// attempt then fails because the DynamicResources plugin could not allocate a member's claims on
// nodes the model counted, the gang remembers those nodes (see gang.DeviceRefusals), and its next
// checks give up the relaxation there for that member's kind (its claims' shape): the node holds
// what the allocator says (free devices the model counts without it, or devices freed since, still
// count), and none where the allocator runs out of time. The check then finds the gang short, and its
// preemption search, which gives up the relaxation everywhere (all), looks for victims whose devices
// let it fit; what victims free is counted by the allocator over the state without them (Released).

// DefaultCheckBudget bounds the allocator's time in one check (every node's Copies together) unless
// the profile sets another (CoschedulingArgs.DeviceCheckMilliseconds). The real plugin gives each
// node's Filter 10 s.
const DefaultCheckBudget = 2 * time.Second

var _ gangfit.RefusingDevices = &Source{}

// Refusing implements gangfit.RefusingDevices: a source like s whose checks count, on each node of
// refused, no member of the kind of the members the real filter refused there, nor, with all, any
// member on a node, where the allocator does not answer in time.
func (s *Source) Refusing(refused map[string][]types.UID, all bool) gangfit.DeviceSource {
	if s == nil || len(refused) == 0 && !all {
		return s
	}
	c := *s
	c.refused, c.strict = refused, all
	return &c
}

// WithCheckBudget returns a source like s whose checks give the allocator budget in all (s itself
// for a nil source or a budget that is not positive).
func (s *Source) WithCheckBudget(budget time.Duration) *Source {
	if s == nil || budget <= 0 {
		return s
	}
	c := *s
	c.budget = budget
	return &c
}

// refusedKinds are, by node, the kinds of the members refused there (kindOf: a member's kind; a
// member of no kind, or unmodelled, refuses nothing the model counts). Pure.
func refusedKinds(refused map[string][]types.UID, kindOf map[types.UID]int) map[string]sets.Set[int] {
	var out map[string]sets.Set[int]
	for node, uids := range refused {
		for _, uid := range uids {
			k, ok := kindOf[uid]
			if !ok {
				continue
			}
			if out == nil {
				out = map[string]sets.Set[int]{}
			}
			if out[node] == nil {
				out[node] = sets.New[int]()
			}
			out[node].Insert(k)
		}
	}
	return out
}
