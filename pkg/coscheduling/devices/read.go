package devices

import (
	"context"
	"fmt"
	"sync"
	"time"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/dynamic-resource-allocation/structured"
	fwk "k8s.io/kube-scheduler/framework"
)

// Reading the DRA state. A scheduling cycle reads it at most once, outside the plugin's lock
// (ForCycle), and every device question of that cycle (the whole-gang check, the held devices a pod
// is kept off) is answered over that one read: the allocated devices (allocations in flight
// included, the read tried again on a conflict as upstream's PreFilter does), the ResourceSlices with
// their device taints, the DeviceClasses, and one allocator over them.

// View is the DRA state one read saw, with the allocator built over it. Read only once built.
type View struct {
	allocator  structured.Allocator
	allocated  *structured.AllocatedState
	slices     []*resourceapi.ResourceSlice
	sliceNodes sets.Set[string]
	nodeless   bool
	err        error
}

// cycleRead is a cycle's one read, made when first asked.
type cycleRead struct {
	once sync.Once
	v    View
}

// ForCycle returns a source like s whose device questions all answer over one read of the DRA state,
// made when the first of them is asked (a cycle that asks none reads nothing); nil for a nil source.
// A source that counts freed devices (Freeing) reads its own.
func (s *Source) ForCycle() *Source {
	if s == nil || s.dra == nil {
		return s
	}
	c := *s
	c.read = &cycleRead{}
	return &c
}

// state is the source's read of the DRA state: the cycle's (ForCycle), or a fresh one.
func (s *Source) state() View {
	if s.read != nil && s.freed.Len() == 0 {
		s.read.once.Do(func() { s.read.v = s.readState() })
		return s.read.v
	}
	return s.readState()
}

// allocatedStateRetry bounds how long gatherAllocatedState tries again (upstream's PreFilter: 5 s).
const allocatedStateRetry = time.Second

// gatherAllocatedState reads the allocated devices (allocations in flight included) as the
// DynamicResources plugin's PreFilter does: the tracker refuses a read during which an allocation
// moved from in flight to its cache (a conflict that would miss its devices), and the read is tried
// again until one succeeds or allocatedStateRetry passes (upstream tells the conflict by an unexported
// error; the tracker returns no other). Conflicts are rare and resolve within microseconds.
func gatherAllocatedState(t fwk.ResourceClaimTracker) (*structured.AllocatedState, error) {
	var state *structured.AllocatedState
	var last error
	err := wait.PollUntilContextTimeout(context.Background(), time.Microsecond, allocatedStateRetry, true, func(context.Context) (bool, error) {
		state, last = t.GatherAllocatedState()
		return last == nil && state != nil, nil
	})
	if err != nil {
		if last == nil {
			last = fmt.Errorf("no allocated state: %w", err)
		}
		return nil, last
	}
	return state, nil
}

// readState builds one allocator over the allocated devices (allocations in flight included, less
// those Freeing frees), the slices (device taints applied) and the classes, as the DynamicResources
// plugin's PreFilter does.
func (s *Source) readState() View {
	state, err := gatherAllocatedState(s.dra.ResourceClaims())
	if err != nil {
		return View{err: fmt.Errorf("gathering allocated devices: %w", err)}
	}
	if s.freed.Len() > 0 {
		claims, err := s.dra.ResourceClaims().List()
		if err != nil {
			return View{err: fmt.Errorf("listing ResourceClaims: %w", err)}
		}
		state = freedState(state, claims, s.freed, s.features.ConsumableCapacity)
	}
	slicesList, err := s.dra.ResourceSlices().ListWithDeviceTaintRules()
	if err != nil {
		return View{err: fmt.Errorf("listing ResourceSlices: %w", err)}
	}
	nodes, nodeless := sets.New[string](), false
	for _, sl := range slicesList {
		if sl.Spec.NodeName != nil && *sl.Spec.NodeName != "" {
			nodes.Insert(*sl.Spec.NodeName)
		} else {
			nodeless = true
		}
	}
	a, err := structured.NewAllocator(context.Background(), s.features, *state, s.dra.DeviceClasses(), slicesList, s.cel)
	if err != nil {
		return View{err: fmt.Errorf("building the allocator: %w", err)}
	}
	return View{allocator: a, allocated: state, slices: slicesList, sliceNodes: nodes, nodeless: nodeless}
}
