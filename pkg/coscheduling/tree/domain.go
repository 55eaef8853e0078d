package tree

// The domains of a job: the composite whose domain holds the job (DomainAbove), and the composites
// below it with a domain of their own, required (DomainsBelow) or preferred (PreferringBelow).

// DomainsBelow are the composites between outer (see DomainAbove) and the leaf keyed leaf that have a
// required Domain of their own, outermost first: each holds the groups under it in one domain of its
// key, within outer's.
func (b *Branch) DomainsBelow(outer *Branch, leaf string) []*Branch {
	return b.below(outer, leaf, func(c *Branch) bool { return c.Domain != "" })
}

// PreferringBelow are the composites between outer (see DomainAbove) and the leaf keyed leaf that
// have preferred keys and no required Domain, outermost first: each keeps the groups under it in one
// domain of the first of its keys where they fit, within outer's (and the required ones' below it,
// see DomainsBelow), else anywhere there.
func (b *Branch) PreferringBelow(outer *Branch, leaf string) []*Branch {
	return b.below(outer, leaf, func(c *Branch) bool { return c.Domain == "" && len(c.Preferred) > 0 })
}

// below are the composites between outer and the leaf keyed leaf that take, outermost first.
func (b *Branch) below(outer *Branch, leaf string, take func(*Branch) bool) []*Branch {
	var out []*Branch
	below := false
	for _, c := range b.pathTo(leaf) {
		if below && take(c) {
			out = append(out, c)
		}
		below = below || c == outer
	}
	return out
}

// DomainAbove is the outermost composite above the leaf keyed leaf with a Domain, else the outermost
// with Preferred keys (false: none): a required key is never dropped for a preferred one. Its Leaves
// are the groups that share its domain.
func (b *Branch) DomainAbove(leaf string) (*Branch, bool) {
	path := b.pathTo(leaf)
	for _, c := range path {
		if c.Domain != "" {
			return c, true
		}
	}
	for _, c := range path {
		if len(c.Preferred) > 0 {
			return c, true
		}
	}
	return nil, false
}
