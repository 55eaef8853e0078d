package tree

import "testing"

// TestDomainAboveRequiredFirst: a basic composite with preferred keys above a gang composite with a
// required key: the required key is the job's domain, never dropped for the outer preferred one.
func TestDomainAboveRequiredFirst(t *testing.T) {
	const ns = "ns"
	leaf := &Branch{Node: Node{Namespace: ns, Name: "prefill", Gang: true, Min: 2, Parent: "serve"}}
	serve := &Branch{Node: Node{Namespace: ns, Name: "serve", Composite: true, Gang: true, Min: 1, Parent: "fleet", Domain: "example.com/block"},
		Children: []*Branch{leaf}}
	fleet := &Branch{Node: Node{Namespace: ns, Name: "fleet", Composite: true, Min: 1, Preferred: []string{"example.com/zone"}},
		Children: []*Branch{serve}}
	c, ok := fleet.DomainAbove(ns + "/prefill")
	if !ok || c.Domain != "example.com/block" {
		t.Errorf("DomainAbove = %s (required %q, preferred %v); want serve's required block", c.Name, c.Domain, c.Preferred)
	}
}

// TestDomainsBelow: below the job's domain, the composites with a required key of their own, and
// apart those with preferred keys only, outermost first; none above the job's domain.
func TestDomainsBelow(t *testing.T) {
	const ns = "ns"
	lead := &Branch{Node: Node{Namespace: ns, Name: "lead", Gang: true, Min: 1, Parent: "rep"}}
	rep := &Branch{Node: Node{Namespace: ns, Name: "rep", Composite: true, Gang: true, Min: 1, Parent: "half", Preferred: []string{"example.com/rack"}},
		Children: []*Branch{lead}}
	half := &Branch{Node: Node{Namespace: ns, Name: "half", Composite: true, Gang: true, Min: 1, Parent: "job", Domain: "example.com/block", Preferred: []string{"example.com/rack"}},
		Children: []*Branch{rep}}
	job := &Branch{Node: Node{Namespace: ns, Name: "job", Composite: true, Gang: true, Min: 1, Parent: "fleet", Domain: "example.com/zone"},
		Children: []*Branch{half}}
	fleet := &Branch{Node: Node{Namespace: ns, Name: "fleet", Composite: true, Min: 1, Preferred: []string{"example.com/region"}},
		Children: []*Branch{job}}
	names := func(bs []*Branch) (out []string) {
		for _, b := range bs {
			out = append(out, b.Name)
		}
		return out
	}
	outer, _ := fleet.DomainAbove(ns + "/lead")
	if got := names(fleet.DomainsBelow(outer, ns+"/lead")); len(got) != 1 || got[0] != "half" {
		t.Errorf("DomainsBelow(%s) = %v, want [half]", outer.Name, got)
	}
	if got := names(fleet.PreferringBelow(outer, ns+"/lead")); len(got) != 1 || got[0] != "rep" {
		t.Errorf("PreferringBelow(%s) = %v, want [rep] (half's preferred keys are read with its required one; fleet is above the job's domain)", outer.Name, got)
	}
}
