package gangfit

import "github.com/custom-scheduler/custom-scheduler/pkg/coscheduling/internal/gangtest"

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
