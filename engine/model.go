package engine

import (
	"context"
	"fmt"

	"golang.org/x/sys/unix"
)

// Table names the one table an Engine owns. Its family is inet: the rule
// compiler (engine/nftsyntax) speaks inet only, so a table of another
// family could be created but never hold a rule.
type Table struct {
	Name string
}

func (t Table) String() string { return "inet " + t.Name }

// family checks the table's name and returns its netlink family number.
func (t Table) family() (byte, error) {
	if t.Name == "" {
		return 0, fmt.Errorf("table has no name")
	}
	if err := checkTableName(t); err != nil {
		return 0, err
	}
	return unix.NFPROTO_INET, nil
}

// Desired is the whole content of the table. Chains, rules, sets and
// elements are values: the caller never sees kernel handles.
type Desired struct {
	Chains []Chain
	Sets   []Set
}

// Chain is a regular chain (Hook == "") or a base chain.
type Chain struct {
	Name string
	Type string // "filter", "nat", "route" (base chains)
	Hook string // "ingress", "prerouting", "input", "forward", "output", "postrouting"
	// Device is the network device an "ingress" hook is on (required
	// there, refused elsewhere). The kernel binds the chain to the
	// device's name: a device of that name created later is hooked too.
	Device   string
	Priority int32
	Policy   string // "accept" (default) or "drop" (base chains)
	Rules    []Rule
	Comment  string
}

// Rule is one rule in nft syntax, e.g. "ip daddr @allowed tcp dport 80 accept".
type Rule struct {
	Rule    string
	Comment string
}

// Set is a named set (Map == ""), map or verdict map (Map == "verdict").
type Set struct {
	Name     string
	Type     string // key type, e.g. "ipv4_addr . inet_service"
	Map      string // value type of a map, "verdict" for a verdict map
	Interval bool
	// Timeout declares the set `flags timeout`: its elements are dynamic,
	// added by Engine.AddTimed outside of Sync (a DNS forwarder adds one
	// per answer), each expiring in the kernel after its own timeout.
	// Sync creates such a set and deletes it when it is no longer desired,
	// but never adds, reads back, compares or deletes its elements: they
	// are not the caller's desired state, and a restart keeps them. A
	// Timeout set has no Elements and is neither a map nor an interval set.
	Timeout  bool
	Elements []Element
	Comment  string
}

// Element is a set element (Key) or map entry (Key : Value) in nft syntax,
// e.g. {Key: "10.0.0.0/8"} or {Key: "10.1.2.3", Value: "jump pod-a"}.
type Element struct {
	Key   string
	Value string
}

// Interface is what callers program against; Engine talks to the kernel,
// Fake keeps the table in memory for unit tests.
type Interface interface {
	// Sync makes the table equal d in one atomic transaction.
	Sync(ctx context.Context, d *Desired) (Stats, error)
	// Delete removes the table in one transaction.
	Delete(ctx context.Context) error
}
