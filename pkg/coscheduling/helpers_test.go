package coscheduling

import (
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/custom-scheduler/custom-scheduler/pkg/coscheduling/internal/gangtest"
)

// Builders shared with the other package's tests (see internal/gangtest).
var (
	member        = gangtest.Member
	node          = gangtest.Node
	nodeWith      = gangtest.NodeWith
	running       = gangtest.Running
	cpuNode       = gangtest.CPUNode
	highGang      = gangtest.HighGang
	gangOf        = gangtest.GangOf
	rackedNode    = gangtest.RackedNode
	rackedCluster = gangtest.RackedCluster
	makePG        = gangtest.PodGroup
)

const (
	zoneKey  = gangtest.ZoneKey
	blockKey = gangtest.BlockKey
	rackKey  = gangtest.RackKey
)

// runSeeded runs rounds of a randomized test (see gangtest.RunSeeded).
var runSeeded = gangtest.RunSeeded

// passed reports whether an extension point let the pod on: success, or (PreFilter) Skip, which
// PreFilter returns for a member whose nodes it does not narrow (its Filter has nothing to check).
func passed(s *fwk.Status) bool { return s.IsSuccess() || s.IsSkip() }

// stateSize is how much per-group and per-pod state the plugin holds (groups, gated pods, queue
// stamps), for tests that check it is freed.
func (pl *Coscheduling) stateSize() (groups, gated, stamps int) {
	pl.mu.RLock()
	groups, gated = pl.gangs.Len(), pl.heldBack.Len()
	pl.mu.RUnlock()
	return groups, gated, pl.stamps.Len()
}
