package coscheduling

import (
	"math/rand/v2"
	"os"
	"strconv"
	"testing"
	"time"

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

// runSeeded runs rounds of a randomized test, round r with its own generator from the seed (SEED=<n>
// replays one run; otherwise the time), until a round fails; then it prints the seed to replay.
func runSeeded(t *testing.T, rounds int, round func(t *testing.T, rng *rand.Rand, round int) bool) {
	t.Helper()
	seed := uint64(time.Now().UnixNano())
	if s := os.Getenv("SEED"); s != "" {
		var err error
		if seed, err = strconv.ParseUint(s, 10, 64); err != nil {
			t.Fatal(err)
		}
	}
	defer func() {
		if t.Failed() {
			t.Logf("replay with SEED=%d", seed)
		}
	}()
	for r := range rounds {
		if !round(t, rand.New(rand.NewPCG(seed, uint64(r))), r) {
			return
		}
	}
}

// passed reports whether an extension point let the pod on: success, or (PreFilter) Skip, which
// PreFilter returns for a member whose nodes it does not narrow (its Filter has nothing to check).
func passed(s *fwk.Status) bool { return s.IsSuccess() || s.IsSkip() }
