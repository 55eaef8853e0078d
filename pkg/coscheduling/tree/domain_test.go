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
