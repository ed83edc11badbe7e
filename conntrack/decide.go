package conntrack

import (
	"net/netip"
	"slices"
)

// Binding is what the rules need to know of one pod address's egress
// translation: the address it leaves with, and whether the translation is
// limited to some ports or networks (then a masquerade to a node address
// may be right for a given connection, and is kept). The egress compiler's
// own binding type converts to it at the caller, so this package knows
// nothing of how bindings are decided.
type Binding struct {
	To         netip.Addr
	Restricted bool
}

// entry is what the decision needs from one conntrack entry.
type entry struct {
	// Src is the original source: the pod, if this is pod traffic.
	Src netip.Addr
	// Dst is the reply source: where the packets really go, after any DNAT
	// (what the postrouting egress chain compares with its internal set).
	Dst netip.Addr
	// NAT is the reply destination: the address Src was translated to
	// (equal to Src when there was no source NAT).
	NAT netip.Addr
}

// verdict is the outcome for one entry, with the reason, so tests and
// debugging can tell which rule decided.
type verdict int

const (
	keepNoSNAT      verdict = iota // T == P
	keepNotPod                     // P is a node address or outside the cluster CIDRs
	keepInternal                   // D is never translated by the egress chain
	keepCurrent                    // P is bound to T now
	keepNodeAddress                // T is a node address and P has no unrestricted binding
	deleteMove                     // T is a node address and P now has an unrestricted binding
	deleteStale                    // T is an egress address P is no longer bound to
	deleteWasOurs                  // T is a node address P was bound to before and is no longer
)

var verdictNames = [...]string{"keep: no source NAT", "keep: not pod traffic", "keep: internal destination",
	"keep: current binding", "keep: node address", "delete: move to egress address", "delete: stale egress address",
	"delete: node address that was our translation"}

func (v verdict) String() string { return verdictNames[v] }

// remove says whether the entry must be deleted.
func (v verdict) remove() bool { return v >= deleteMove }

// env is what the entries are judged against.
type env struct {
	bindings map[netip.Addr]Binding
	local    map[netip.Addr]bool // the node's own addresses
	cluster  []netip.Prefix      // pod sources; empty: any source
	internal []netip.Prefix      // destinations never translated
	// previous are the addresses each P was bound to at the last cleaning
	// and at the syncs since whose cleaning did not run (WithPrevious): a
	// load-balancer address still on the node is a node address, but a
	// translation to it that P had then was ours.
	previous map[netip.Addr][]netip.Addr
}

func inAny(a netip.Addr, ps []netip.Prefix) bool {
	for _, p := range ps {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

// decide applies the rules of the package documentation to one entry. It is
// pure, so every rule is covered by table tests without a kernel.
func decide(e entry, v env) verdict {
	p, d, t := e.Src.Unmap(), e.Dst.Unmap(), e.NAT.Unmap()
	if !p.IsValid() || !t.IsValid() || p == t {
		return keepNoSNAT
	}
	if v.local[p] || (len(v.cluster) > 0 && !inAny(p, v.cluster)) {
		return keepNotPod
	}
	if v.local[d] || inAny(d, v.internal) {
		return keepInternal
	}
	b, bound := v.bindings[p]
	if bound && b.To.Unmap() == t {
		return keepCurrent
	}
	if v.local[t] {
		if slices.Contains(v.previous[p], t) {
			return deleteWasOurs
		}
		if bound && !b.Restricted {
			return deleteMove
		}
		return keepNodeAddress
	}
	return deleteStale
}
