package gangfit

import (
	v1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"
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

// choosePlacementOn runs ChoosePlacement for the whole gang on nodes (rackedCluster when nil).
func choosePlacementOn(logger klog.Logger, nodes []fwk.NodeInfo, gang []*v1.Pod, p Policy, pinned map[string]string, busy map[string]bool) (Placement, bool) {
	return choosePlacementAvoiding(logger, nodes, gang, p, pinned, Avoid{Busy: busy})
}

// choosePlacementAvoiding is choosePlacementOn with every domain to avoid (or prefer).
func choosePlacementAvoiding(logger klog.Logger, nodes []fwk.NodeInfo, gang []*v1.Pod, p Policy, pinned map[string]string, avoid Avoid) (Placement, bool) {
	if nodes == nil {
		nodes = rackedCluster()
	}
	f := New(logger, "ns/g", gang, len(gang), nodes, nil, nil, nil, false)
	defer f.Done()
	return ChoosePlacementAvoiding(f, p, pinned, avoid)
}
