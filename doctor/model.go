package doctor

import (
	"fmt"

	"github.com/nftguard/nftguard/engine"
)

// Ruleset is everything doctor read from one network namespace.
type Ruleset struct {
	Tables []*Table
	// Legacy lists the iptables-legacy (x_tables) tables of the namespace.
	Legacy []LegacyTable
	// LegacyErr says why the legacy tables could not be read, if so.
	LegacyErr string
}

// The nftables objects are the engine's: doctor reads them with
// engine.List, through the codec the engine reads its own table with, so
// that a chain, set, hook or expression is decoded one way only.
type (
	// Table is one nftables table.
	Table = engine.ListedTable
	// Chain is a regular chain (Hook == "") or a base chain.
	Chain = engine.ListedChain
	// Rule is one rule; Read fills in the Text the engine's renderer
	// cannot write with describe's.
	Rule = engine.ListedRule
	// Expr is one expression of a rule.
	Expr = engine.ListedExpr
	// Set is a named (or anonymous) set, map or verdict map.
	Set = engine.ListedSet
)

// LegacyTable is an iptables-legacy table of one family.
type LegacyTable struct {
	Family string // "ip" or "ip6"
	Name   string // "filter", "nat", ...
	// Rules counts entries beyond the built-in chains' policies, i.e. rules
	// and user-defined chains; -1 when unknown.
	Rules int
}

// Severity ranks findings.
type Severity int

// The severities, in increasing order.
const (
	Info Severity = iota
	Warning
	Error
)

func (s Severity) String() string {
	switch s {
	case Warning:
		return "warning"
	case Error:
		return "error"
	}
	return "info"
}

// MarshalText makes a severity a word in JSON.
func (s Severity) MarshalText() ([]byte, error) { return []byte(s.String()), nil }

// Finding is one result of the check.
type Finding struct {
	Severity Severity `json:"severity"`
	Check    string   `json:"check"` // e.g. "features", "hooks", "iptables", "rendering", "nftguard"
	Table    string   `json:"table,omitempty"`
	Chain    string   `json:"chain,omitempty"`
	Handle   uint64   `json:"handle,omitempty"`
	Rule     string   `json:"rule,omitempty"` // the rule's text
	Message  string   `json:"message"`
	Details  []string `json:"details,omitempty"`
	Advice   string   `json:"advice,omitempty"`
}

func (f Finding) String() string {
	where := f.Table
	if f.Chain != "" {
		where += " chain " + f.Chain
	}
	if f.Handle != 0 {
		where += fmt.Sprintf(" handle %d", f.Handle)
	}
	s := fmt.Sprintf("%-7s [%s]", f.Severity, f.Check)
	if where != "" {
		s += " " + where
	}
	s += ": " + f.Message
	for _, d := range f.Details {
		s += "\n        - " + d
	}
	if f.Rule != "" {
		s += "\n        rule: " + f.Rule
	}
	if f.Advice != "" {
		s += "\n        fix:  " + f.Advice
	}
	return s
}
