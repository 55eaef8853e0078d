package gangfit

import (
	"time"

	v1 "k8s.io/api/core/v1"
)

// Avoid are the domains ("key=value") a gang's choice steers away from while others fit.
type Avoid struct {
	// Busy: another gang's attempt gathers its quorum there (the snapshot does not show its members
	// still to come). A busy domain is taken only when no other domain of its level fits.
	Busy map[string]bool
	// Refused: the real filters refused this gang there in a recent attempt (a constraint the check
	// does not model: host ports, volumes, inter-pod affinity, devices), mapped to when that refusal
	// ends; every refusal lasts as long, so the soonest to end is the least recently refused. A
	// refused domain is taken only when no other domain of its level fits, the least recently refused
	// first; at a preferred level it is not taken at all: the gang falls back to the next level (a
	// wider domain, the required one, or anywhere), as it would if the domain had no room. Domains
	// pinned by bound members are never avoided.
	Refused map[string]time.Time
	// Nominated: the gang's members are nominated there (by its preemption's or its reservation's
	// plan). A nominated domain with room is chosen before others not refused; a stale nomination
	// (the room taken since) steers nothing.
	Nominated map[string]bool
}

// Nominated are the domains ("key=value") of p's levels that hold every node of nodes (the nodes
// a gang's members are nominated to; see Avoid.Nominated); nil for none.
func Nominated(p Policy, nodes []*v1.Node) map[string]bool {
	var out map[string]bool
	for key, value := range PinnedDomains(p, nodes) {
		if value != "" {
			if out == nil {
				out = map[string]bool{}
			}
			out[key+"="+value] = true
		}
	}
	return out
}
