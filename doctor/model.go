package doctor

import (
	"fmt"

	"github.com/nftguard/nftguard/engine/nftwire"
)

// Ruleset is everything doctor read from one network namespace.
type Ruleset struct {
	Tables []*Table
	// Legacy lists the iptables-legacy (x_tables) tables of the namespace.
	Legacy []LegacyTable
	// LegacyErr says why the legacy tables could not be read, if so.
	LegacyErr string
}

// Table is one nftables table.
type Table struct {
	Family string // "ip", "ip6", "inet", "arp", "bridge", "netdev"
	Name   string
	Flags  uint32
	Chains []*Chain
	Sets   []*Set
}

func (t *Table) String() string { return t.Family + " " + t.Name }

// Chain is a regular chain (Hook == "") or a base chain.
type Chain struct {
	Name     string
	Type     string // "filter", "nat", "route"
	Hook     string // "forward", "postrouting", ...
	Priority int32
	Policy   string // "accept" or "drop" (base chains)
	Rules    []*Rule
}

// Rule is one rule with its expressions decoded one by one, so that an
// expression nobody knows is recorded instead of silently dropped.
type Rule struct {
	Handle   uint64
	Exprs    []Expr
	UserData []byte
	// Raw is the NFTA_RULE_EXPRESSIONS attribute as the kernel sent it.
	Raw []byte
	// Text is the rule in nft syntax, or a best-effort description.
	Text string
}

// Expr is one expression of a rule.
type Expr struct {
	Name string
	// Value is the decoded expression; nil when Name is unknown to the
	// decoder or its data could not be decoded (Err says why).
	Value nftwire.Expr
	Err   string
}

// Set is a named (or anonymous) set, map or verdict map.
type Set struct {
	Name     string
	Flags    uint32
	KeyType  uint32
	KeyLen   uint32
	DataType uint32
	DataLen  uint32
	UserData []byte
	// Elements are the raw element attributes, for comparing two tables.
	Elements [][]byte
}

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
