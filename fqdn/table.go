package fqdn

import "net/netip"

// Rule is one egress rule with domainNames peers, as it applies to its
// subject pods on this node: answers to a question that matches one of
// Patterns add "POD . ADDR" to Set4 (A records) or Set6 (AAAA records).
type Rule struct {
	// Policy and Index name the rule (ClusterNetworkPolicy name, index
	// in spec.egress) for metrics, explain and logs.
	Policy string
	Index  int
	// Patterns are the rule's domainNames, parsed.
	Patterns []Pattern
	// Set4 and Set6 are the rule's timeout sets in the table (type
	// "ipv4_addr . ipv4_addr" and "ipv6_addr . ipv6_addr"). An empty
	// name leaves that family out.
	Set4, Set6 string
}

// Subject is one local pod that some domain rule selects.
type Subject struct {
	// Namespace is the pod's: the forwarder shares its limits fairly
	// between namespaces first, then between the pods of each.
	Namespace string
	// Addrs are the pod's IPv4 ([0]) and IPv6 ([1]) addresses; the zero
	// Addr where it has none. A set's key pairs addresses of one family,
	// so an A answer to a query the pod sent over IPv6 is keyed by its
	// IPv4 address, and a family the pod has no address of adds nothing.
	Addrs [2]netip.Addr
	// Rules select the pod, in the order the pod's chain checks them.
	Rules []*Rule
}

// Addr is the pod's address of addr's family (the zero Addr if none).
func (s *Subject) Addr(v6 bool) netip.Addr {
	if v6 {
		return s.Addrs[1]
	}
	return s.Addrs[0]
}

// Table is everything the forwarder needs, rebuilt by each compile and
// swapped whole: it is never changed after it is built.
type Table struct {
	// Pods maps each address of each local subject pod (both families
	// point to the same Subject) to it. An address with no entry is not
	// a subject's: its queries are never redirected, and the forwarder
	// refuses them.
	Pods map[netip.Addr]*Subject
	// Servers are the cluster DNS servers (address and port, normally
	// 53): the pods' UDP and TCP queries to them are redirected to the
	// forwarder, which relays each to the first Server of the query's
	// family (the other family's if there is none) and trusts only its
	// answers.
	Servers []netip.AddrPort
	// Ranges are this node's pod ranges. Queries from an address in them
	// that is no subject's are redirected too while no pod has it (a pod
	// starting before its address reaches the agent): the forwarder
	// waits for a table that names it, and relays the queries of one
	// that is no subject without adding anything.
	Ranges []netip.Prefix
	// Known are the addresses of this node's pods that the agent knows
	// (subjects or not): an address of Ranges not in Known is a pod
	// starting.
	Known map[netip.Addr]bool
	// Sets are every domain rule's timeout sets in the table, also those
	// no local pod is a subject of now: their elements stay in the
	// kernel until they expire.
	Sets []string
}

// Redirects reports whether the table's redirect sends anyone's DNS to
// the forwarder: a subject's, or a starting pod's of Ranges (a node with
// domainNames rules and no subject yet still redirects those).
func (t *Table) Redirects() bool {
	return t != nil && (len(t.Pods) > 0 || len(t.Ranges) > 0)
}

// Pending reports whether addr is an address of this node's pod ranges
// that no pod the agent knows has.
func (t *Table) Pending(addr netip.Addr) bool {
	addr = addr.Unmap()
	if t == nil || t.Lookup(addr) != nil || t.Known[addr] {
		return false
	}
	for _, r := range t.Ranges {
		if r.Contains(addr) {
			return true
		}
	}
	return false
}

// Lookup is the subject pod that addr (a query's source) belongs to, or
// nil. IPv4-mapped IPv6 sources are looked up as IPv4.
func (t *Table) Lookup(addr netip.Addr) *Subject {
	if t == nil {
		return nil
	}
	s := t.Pods[addr.Unmap()]
	if s == nil || len(s.Rules) == 0 {
		return nil
	}
	return s
}

// Server is the server to relay a query that arrived over IPv6 (v6) or
// IPv4 to: the first of that family, else the first of the other.
func (t *Table) Server(v6 bool) (netip.AddrPort, bool) {
	if t == nil {
		return netip.AddrPort{}, false
	}
	for _, s := range t.Servers {
		if s.Addr().Unmap().Is6() == v6 {
			return s, true
		}
	}
	if len(t.Servers) > 0 {
		return t.Servers[0], true
	}
	return netip.AddrPort{}, false
}

// Wants reports whether an answer to name (as the query has it) can add
// anything for the pod at addr: whether a pattern of one of its rules
// matches the name. The forwarder parses only such answers.
func (t *Table) Wants(addr netip.Addr, name string) bool {
	s := t.Lookup(addr)
	if s == nil {
		return false
	}
	name = Normalize(name)
	for _, r := range s.Rules {
		for _, p := range r.Patterns {
			if p.Matches(name) {
				return true
			}
		}
	}
	return false
}
