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
	// "ipv4_addr . ipv4_addr" and "ipv6_addr . ipv6_addr").
	Set4, Set6 string
}

// Table is everything the forwarder needs, rebuilt by each compile and
// swapped whole: it is never changed after it is built.
type Table struct {
	// Pods maps each local subject pod's addresses (both families) to
	// the rules that select it, in the order the pod's chain checks
	// them. A pod with no entry is not a subject: its queries are
	// never redirected, and the forwarder refuses them.
	Pods map[netip.Addr][]*Rule
	// Servers are the cluster DNS addresses: the pods' queries to them
	// are redirected to the forwarder, which relays them to the same
	// family's first Server and trusts only its answers.
	Servers []netip.Addr
}

// Subject reports whether pod is a subject pod of some domain rule.
func (t *Table) Subject(pod netip.Addr) bool {
	return t != nil && len(t.Pods[pod]) > 0
}
