package gangfit

import (
	"slices"
	"sync"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	fwk "k8s.io/kube-scheduler/framework"
)

// What the whole-gang checks share between them, so that a check costs one comparison per node and
// one lookup per member instead of a recount of the cluster and of every member's containers.

// maxTrackedScalars bounds the extended resources the shared free capacity tracks; past it, the table
// starts again from the resources of the check at hand.
const maxTrackedScalars = 16

// freeCapacity is the free capacity of the snapshot's nodes, kept between checks. The scheduler's
// snapshot keeps one NodeInfo per node and bumps its generation on every change (a pod added or
// removed, the node updated), so an entry is recomputed only when its NodeInfo is another one or has
// another generation. It is used by the scheduling cycle (PreFilter, PostFilter), one check at a time:
// a check holds the lock from acquire to release and reads the entries; a check that changes free
// capacity (claimed room, preemption's simulation) works on a copy.
type freeCapacity struct {
	mu sync.Mutex
	// names are the extended resources tracked, a superset of every check's since the last reset.
	names   scalarNames
	infos   []fwk.NodeInfo
	gens    []int64
	free    []freeNode
	backing []int64
	// totals is the non-negative free capacity summed over the entries.
	totals resources
}

// acquire locks c and returns the free capacity of nodes, tracking at least the extended resources
// of want, the names it tracks (the index of every resources value of the check), and the free
// capacity summed over the nodes. ok is false (and c unlocked) when some NodeInfo has no node: the
// caller computes afresh. The caller must call c.mu.Unlock when done reading.
func (c *freeCapacity) acquire(nodes []fwk.NodeInfo, want scalarNames) (free []freeNode, names scalarNames, totals resources, ok bool) {
	c.mu.Lock()
	rebuild := len(c.infos) != len(nodes)
	for _, n := range want {
		if c.names.index(n) < 0 {
			if len(c.names) >= maxTrackedScalars {
				c.names = slices.Clone(want)
				rebuild = true
				break
			}
			c.names = append(c.names, n)
			rebuild = true
		}
	}
	stride := len(c.names)
	if rebuild {
		c.infos = make([]fwk.NodeInfo, len(nodes))
		c.gens = make([]int64, len(nodes))
		c.free = make([]freeNode, len(nodes))
		c.backing = make([]int64, len(nodes)*stride)
		c.totals = resources{}
		if stride > 0 {
			c.totals.scalar = make([]int64, stride)
		}
	}
	for i, ni := range nodes {
		gen := ni.GetGeneration()
		if !rebuild && c.infos[i] == ni && c.gens[i] == gen {
			continue
		}
		if ni.Node() == nil {
			c.infos = nil // rebuild next time
			c.mu.Unlock()
			return nil, nil, resources{}, false
		}
		if c.infos[i] != nil {
			c.totals.subClamped(c.free[i].free)
		}
		c.free[i] = nodeFree(ni, c.names, c.backing[i*stride:(i+1)*stride])
		c.totals.addClamped(c.free[i].free)
		c.infos[i], c.gens[i] = ni, gen
	}
	return c.free, c.names, c.totals, true
}

// subClamped subtracts the non-negative part of o from r, in place (the inverse of addClamped).
func (r *resources) subClamped(o resources) {
	r.milliCPU -= max(o.milliCPU, 0)
	r.memory -= max(o.memory, 0)
	r.ephemeral -= max(o.ephemeral, 0)
	for i, v := range o.scalar {
		r.scalar[i] -= max(v, 0)
	}
}

// podRequest is what a pod needs on a node (see podRequestList), in a form converted to a check's
// resources without a map.
type podRequest struct {
	milliCPU, memory, ephemeral int64
	scalar                      []namedAmount
}

type namedAmount struct {
	name  v1.ResourceName
	value int64
}

func newPodRequest(pod *v1.Pod) podRequest { return requestFromList(podRequestList(pod)) }

// requestFromList converts a resource list (pod slots are counted separately, zero amounts dropped).
func requestFromList(rl v1.ResourceList) podRequest {
	var r podRequest
	for name, q := range rl {
		switch name {
		case v1.ResourceCPU:
			r.milliCPU = q.MilliValue()
		case v1.ResourceMemory:
			r.memory = q.Value()
		case v1.ResourceEphemeralStorage:
			r.ephemeral = q.Value()
		case v1.ResourcePods:
		default:
			if v := q.Value(); v != 0 {
				r.scalar = append(r.scalar, namedAmount{name: name, value: v})
			}
		}
	}
	slices.SortFunc(r.scalar, func(a, b namedAmount) int {
		switch {
		case a.name < b.name:
			return -1
		case a.name > b.name:
			return 1
		}
		return 0
	})
	return r
}

// resources converts r, keeping the extended resources among names.
func (r podRequest) resources(names scalarNames) resources {
	out := resources{milliCPU: r.milliCPU, memory: r.memory, ephemeral: r.ephemeral}
	for _, s := range r.scalar {
		i := names.index(s.name)
		if i < 0 {
			continue
		}
		if out.scalar == nil {
			out.scalar = make([]int64, len(names))
		}
		out.scalar[i] = s.value
	}
	return out
}

// withRequest adds the extended resources of r that n does not hold yet.
func (n scalarNames) withRequest(r podRequest) scalarNames {
	for _, s := range r.scalar {
		if n.index(s.name) < 0 {
			n = append(n, s.name)
		}
	}
	return n
}

// requestCache remembers each gang member's request, computed once per version of the pod object
// the informer holds (an update, e.g. an in-place resize, is a new object). Entries are dropped when
// the pod is deleted or stops being live. A nil cache computes every request.
type requestCache struct {
	m sync.Map // types.UID → requestEntry
}

type requestEntry struct {
	pod *v1.Pod
	req podRequest
}

func (c *requestCache) of(pod *v1.Pod) podRequest {
	if c == nil {
		return newPodRequest(pod)
	}
	if v, ok := c.m.Load(pod.UID); ok {
		if e := v.(*requestEntry); e.pod == pod {
			return e.req
		}
	}
	e := &requestEntry{pod: pod, req: newPodRequest(pod)}
	c.m.Store(pod.UID, e)
	return e.req
}

func (c *requestCache) forget(uid types.UID) {
	c.m.Delete(uid)
}

// Forget drops what s remembers of the pod (its request), once it is deleted.
func (s *Shared) Forget(uid types.UID) {
	s.own().requests.forget(uid)
}

// WithDevices returns the checks' shared tables of s with the device model d instead of s's (one
// scheduling cycle's read of the DRA state, see package devices).
func (s *Shared) WithDevices(d DeviceSource) *Shared {
	if s == nil {
		return &Shared{Devices: d}
	}
	return &Shared{Devices: d, tables: s.own(), refused: s.refused, search: s.search}
}

// WithRefused returns the checks' shared tables of s whose device model gives up the out-of-time
// relaxation, on each node of refused, for the kinds of the members the real filter refused there (s
// itself when refused is empty): a gang's next checks and reservation plans after an attempt whose
// members the DynamicResources plugin found no devices for where the model counted them (see
// RefusingDevices).
func (s *Shared) WithRefused(refused map[string][]types.UID) *Shared {
	if len(refused) == 0 {
		return s
	}
	if s == nil {
		return &Shared{refused: refused}
	}
	return &Shared{Devices: s.Devices, tables: s.own(), refused: refused, search: s.search}
}

// ForSearch returns the checks' shared tables of s for a preemption search: its device model counts a
// node its allocator did not reach in time as holding no member (not every one), so that no victim is
// chosen on a guess (see RefusingDevices).
func (s *Shared) ForSearch() *Shared {
	if s == nil {
		return &Shared{search: true}
	}
	return &Shared{Devices: s.Devices, tables: s.own(), refused: s.refused, search: true}
}

// Private returns s's device model without its shared tables, for checks over a part of the nodes
// (the shared capacity table is kept for the whole snapshot's node list).
func (s *Shared) Private() *Shared {
	if s == nil {
		return nil
	}
	return &Shared{Devices: s.Devices, refused: s.refused, search: s.search}
}

// own is the Shared whose tables s uses.
func (s *Shared) own() *Shared {
	if s.tables != nil {
		return s.tables
	}
	return s
}
