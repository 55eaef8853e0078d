package gang

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"k8s.io/apimachinery/pkg/util/sets"
	fwk "k8s.io/kube-scheduler/framework"
)

// The domains the real filters refused a gang in. The whole-gang check chooses a gang's topology
// domain on what it models (resources, taints, node affinity); a constraint it does not model (host
// ports, volumes, inter-pod anti-affinity, devices) can make every node of the chosen domain refuse a
// member, and the attempt fails. Without a memory of that, the next attempt's check chooses the same
// domain again, for ever. So the failure records the domain (OnNoNode), and the next checks avoid it
// while another domain fits (gangfit.Avoid.Refused), for RefusedDomainTTL.

// RefusedDomainTTL is how long a domain the filters refused a gang in is avoided by the gang's next
// attempts. What refuses it (pods holding a host port, a volume, a device, anti-affine pods) changes
// as pods come and go, in minutes rather than seconds: 5 minutes is 30 of the shipped 10-second
// back-offs, so the gang does not go back to a domain that refused it within a few attempts (each of
// which reserves members and rejects them), and still comes back to its tightest fit, or retries the
// domain at all, once what was in the way is likely gone. Avoiding a domain only steers the choice
// while another domain fits, so a value too long costs a looser fit, never a placement.
const RefusedDomainTTL = 5 * time.Minute

// Refusal is a domain the filters refused a gang's member in: it is avoided until Until; Why is what
// the filters said of its nodes (see DomainReasons), empty when unknown.
type Refusal struct {
	Until time.Time
	Why   string
}

// Refuse records that the filters refused the gang in domain ("key=value") at now, for why; it
// returns until when the domain is avoided.
func (g *Gang) Refuse(domain string, now time.Time, why string) time.Time {
	if g.Refused == nil {
		g.Refused = map[string]Refusal{}
	}
	until := now.Add(RefusedDomainTTL)
	g.Refused[domain] = Refusal{Until: until, Why: why}
	return until
}

// RefusedDomains forgets the refusals that ended by now and returns the others, each domain mapped to
// when its refusal ends (nil: none), for gangfit.Avoid.Refused.
func (g *Gang) RefusedDomains(now time.Time) map[string]time.Time {
	var out map[string]time.Time
	for d, r := range g.Refused {
		if !now.Before(r.Until) {
			delete(g.Refused, d)
			continue
		}
		if out == nil {
			out = make(map[string]time.Time, len(g.Refused))
		}
		out[d] = r.Until
	}
	if len(g.Refused) == 0 {
		g.Refused = nil
	}
	return out
}

// Bounds of DomainReasons' summary: the reasons it names, and the length of each.
const (
	maxDomainReasons   = 2
	maxDomainReasonLen = 120
)

// DomainReasons summarizes why the filters refused a member on a domain's nodes: the most common
// reasons of their statuses, counted in nodes, e.g. "3 node(s) didn't have free ports for the requested
// pod ports; 1 Insufficient cpu". At most maxDomainReasons reasons are named, each cut to
// maxDomainReasonLen, then how many others there were. Empty without statuses. It reads one status per
// node of the domain, once per failed attempt (PostFilter), never in Filter.
func DomainReasons(nodes sets.Set[string], m fwk.NodeToStatusReader) string {
	if m == nil || nodes.Len() == 0 {
		return ""
	}
	counts := map[string]int{}
	for n := range nodes {
		s := m.Get(n)
		if s == nil {
			continue
		}
		for _, r := range s.Reasons() {
			counts[r]++
		}
	}
	reasons := slices.SortedFunc(maps.Keys(counts), func(a, b string) int {
		if counts[a] != counts[b] {
			return counts[b] - counts[a]
		}
		return strings.Compare(a, b)
	})
	parts := make([]string, 0, maxDomainReasons+1)
	for i, r := range reasons {
		if i == maxDomainReasons {
			parts = append(parts, fmt.Sprintf("and %d other reason(s)", len(reasons)-i))
			break
		}
		parts = append(parts, fmt.Sprintf("%d %s", counts[r], truncate(r, maxDomainReasonLen)))
	}
	return strings.Join(parts, "; ")
}

// truncate cuts s to at most n bytes, on a rune boundary, marking the cut with "...".
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	cut := n - len("...")
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "..."
}
