package doctor

import (
	"fmt"

	"github.com/nftguard/nftguard/engine"
)

// ReadOptions say what to read besides tables, chains, rules and sets.
type ReadOptions struct {
	// ElementsOf names tables ("inet nftguard") whose set elements are
	// read too, for comparing them.
	ElementsOf []string
}

// Read dumps the whole nftables ruleset of the namespace at path (the
// current one when ""), and its iptables-legacy tables. It only sends dump
// requests and reads files: it never changes anything.
func Read(path string, opts ReadOptions) (*Ruleset, error) {
	tables, err := engine.List(path, engine.ListOptions{ElementsOf: opts.ElementsOf})
	if err != nil {
		return nil, fmt.Errorf("read ruleset: %w", err)
	}
	for _, t := range tables {
		for _, c := range t.Chains {
			for _, r := range c.Rules {
				if r.Text == "" {
					r.Text = describe(t.Family, r.Exprs)
				}
			}
		}
	}
	rs := &Ruleset{Tables: tables}
	legacy, lerr := readLegacy(path)
	rs.Legacy = legacy
	if lerr != nil {
		rs.LegacyErr = lerr.Error()
	}
	return rs, nil
}
