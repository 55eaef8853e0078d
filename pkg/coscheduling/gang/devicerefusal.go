package gang

import (
	"fmt"
	"slices"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	fwk "k8s.io/kube-scheduler/framework"
	pluginnames "k8s.io/kubernetes/pkg/scheduler/framework/plugins/names"
)

// The nodes whose devices the real filter refused a gang's member. The whole-gang check asks
// upstream's allocator how many members a node's devices hold, and counts a node it could not ask
// (out of its budget, see devices.DefaultCheckBudget) as holding them all: the check never refuses a
// gang the scheduler could place, and the real DynamicResources filter decides. Where that filter
// then refuses a member for devices ("cannot allocate all claims") on nodes the check counted, the
// attempt fails, and, without a memory of it, the next check admits the gang again, for ever, while
// lower-priority pods keep the devices. So the failure records those nodes (OnNoNodeDevices), and the
// gang's next checks (and reservation plans) give up the relaxation there for the refused member's
// kind (gangfit.Shared.WithRefused): where the allocator answers in time its answer stands (a device
// freed since counts), and where it does not the node holds none (see devices.Check.Copies). The
// check then finds the gang short, and its preemption looks for victims whose devices let it fit, as
// for a gang the check found short by itself (a preemption search never counts a node it could not
// ask in time: gangfit.Shared.ForSearch). A refusal holds while the node is as it was (its NodeInfo generation, which every
// pod added to it or removed from it changes; a claim deallocated, a slice published or a device
// taint does not) and for at most DeviceRefusalTTL. Nodes where the gang's own members were reserved
// are never recorded: its own members may be what took the devices there. A job's checks and
// reservations count the refusals of all its groups (JobRefusals).

// DeviceRefusalTTL bounds how long a node's refusal holds while the node does not change.
const DeviceRefusalTTL = 2 * time.Minute

// DevicesShortReason is the DynamicResources plugin's reason when a node's devices cannot hold a
// pod's claims.
const DevicesShortReason = "cannot allocate all claims"

// DeviceRefusal is a node whose devices the real filter refused members of a gang: while its NodeInfo
// generation is Generation, and until Until.
type DeviceRefusal struct {
	Generation int64
	Pods       []types.UID
	Until      time.Time
}

// DevicesShort are the nodes, of those list returns, where the member whose filter statuses are
// statuses was refused by the DynamicResources plugin for devices, each with its NodeInfo generation
// then (nil: none, or claims false: the member claims no device). It reads one status per node, once
// per failed attempt (PostFilter), never in Filter.
func DevicesShort(claims bool, statuses fwk.NodeToStatusReader, list func() ([]fwk.NodeInfo, error)) map[string]int64 {
	if !claims || statuses == nil {
		return nil
	}
	nodes, err := list()
	if err != nil {
		return nil
	}
	var out map[string]int64
	for _, ni := range nodes {
		if ni.Node() == nil {
			continue
		}
		s := statuses.Get(ni.Node().Name)
		if s == nil || s.Plugin() != pluginnames.DynamicResources || !slices.Contains(s.Reasons(), DevicesShortReason) {
			continue
		}
		if out == nil {
			out = map[string]int64{}
		}
		out[ni.Node().Name] = ni.GetGeneration()
	}
	return out
}

// OnNoNodeDevices is OnNoNode for a member the real filter refused for devices on the nodes of short
// (see DevicesShort): an attempt that fails there, not retried with this member first (its siblings
// may be in its way), records those nodes, less those its own members were reserved on, as refusing
// the member (see RefuseDevices), and says so.
func (g *Gang) OnNoNodeDevices(pod *v1.Pod, now time.Time, want, existing int, backoff time.Duration, statuses fwk.NodeToStatusReader, short map[string]int64) Result {
	var own sets.Set[string]
	if len(short) > 0 { // read before the failure forgets them
		own = sets.New(g.ReservedNodes()...)
	}
	r := g.OnNoNode(pod, now, want, existing, backoff, statuses)
	if !r.Failed() || r.Lead || len(short) == 0 {
		return r
	}
	if n := g.RefuseDevices(pod.UID, short, own, now); n > 0 {
		r.Message += fmt.Sprintf("; the DynamicResources plugin refused it on %d node(s) the check counted: its next checks count their devices only as the allocator answers in time, until those nodes change", n)
		g.SetOutcome(r.Reason, r.Message)
	}
	return r
}

// RefuseDevices records that the real filter found no devices for member uid on the nodes of short
// (each with its NodeInfo generation), less those of own; it returns how many it recorded. The
// gang's cached check is dropped: its next one counts them.
func (g *Gang) RefuseDevices(uid types.UID, short map[string]int64, own sets.Set[string], now time.Time) int {
	n := 0
	for node, gen := range short {
		if own.Has(node) {
			continue
		}
		if g.RefusedDevices == nil {
			g.RefusedDevices = map[string]DeviceRefusal{}
		}
		r := g.RefusedDevices[node]
		if r.Generation != gen {
			r = DeviceRefusal{Generation: gen}
		}
		if !slices.Contains(r.Pods, uid) {
			r.Pods = append(r.Pods, uid)
		}
		r.Until = now.Add(DeviceRefusalTTL)
		g.RefusedDevices[node] = r
		n++
	}
	if n > 0 {
		g.Feasibility, g.CacheKey = nil, FeasibilityKey{}
	}
	return n
}

// DeviceRefusals forgets the refusals that ended by now and returns a copy of the others (nil:
// none), to be read against the nodes (see ValidRefusals) outside the plugin's lock.
func (g *Gang) DeviceRefusals(now time.Time) map[string]DeviceRefusal {
	var out map[string]DeviceRefusal
	for node, r := range g.RefusedDevices {
		if !now.Before(r.Until) {
			delete(g.RefusedDevices, node)
			continue
		}
		if out == nil {
			out = make(map[string]DeviceRefusal, len(g.RefusedDevices))
		}
		r.Pods = slices.Clone(r.Pods)
		out[node] = r
	}
	if len(g.RefusedDevices) == 0 {
		g.RefusedDevices = nil
	}
	return out
}

// ValidRefusals are the refusals of nodes that have not changed since (generation: a node's NodeInfo
// generation now; false: the node is gone): by node, the members refused there (nil: none), for
// gangfit.Shared.WithRefused. A changed node's refusal is replaced when the filter refuses there
// again (RefuseDevices), or ends. Pure.
func ValidRefusals(refusals map[string]DeviceRefusal, generation func(node string) (int64, bool)) map[string][]types.UID {
	var out map[string][]types.UID
	for node, r := range refusals {
		if gen, ok := generation(node); !ok || gen != r.Generation {
			continue
		}
		if out == nil {
			out = make(map[string][]types.UID, len(refusals))
		}
		out[node] = r.Pods
	}
	return out
}

// JobRefusals are the valid refusals (see ValidRefusals) of own (nil: none) and of the other gangs of
// keys, merged by node (nil: none), at now, for a check or a job's reservation over nodes; read under
// the plugin's lock.
func JobRefusals(own *Gang, gangs map[string]*Gang, keys []string, now time.Time, nodes []fwk.NodeInfo) map[string][]types.UID {
	var out map[string][]types.UID
	gen := Generations(nodes)
	of := []*Gang{own}
	for _, k := range keys {
		if g := gangs[k]; g != own {
			of = append(of, g)
		}
	}
	for _, g := range of {
		if g == nil || g.RefusedDevices == nil {
			continue
		}
		for node, uids := range ValidRefusals(g.DeviceRefusals(now), gen) {
			if out == nil {
				out = map[string][]types.UID{}
			}
			out[node] = append(out[node], uids...)
		}
	}
	return out
}

// Generations reads nodes' NodeInfo generations from a list (for DeviceRefusals); O(nodes) once, and
// only when the gang has refusals.
func Generations(nodes []fwk.NodeInfo) func(string) (int64, bool) {
	var byName map[string]int64
	return func(node string) (int64, bool) {
		if byName == nil {
			byName = make(map[string]int64, len(nodes))
			for _, ni := range nodes {
				if ni.Node() != nil {
					byName[ni.Node().Name] = ni.GetGeneration()
				}
			}
		}
		gen, ok := byName[node]
		return gen, ok
	}
}
