// Package fqdn is the pure half of ClusterNetworkPolicy domainNames peers:
// the patterns of the API (a full domain, or "*." and a domain for one or
// more whole labels before it), the table the compiler hands the DNS
// forwarder (which local pod's answers feed which sets), and the elements
// an answer adds. It does no I/O: package dnsfwd relays the queries and
// commits the elements, package clusterpolicy builds the Table.
//
// Names are compared as their wire labels, without case (name.go): a
// pattern matches whole labels, however the name's text escapes them.
//
// An address matches a rule for a pod while an answer that pod received
// for a name matching one of the rule's patterns is within its TTL. The
// kernel enforces the TTL: the rule's sets (one per family, keyed by the
// pod's address and the destination, "POD . ADDR") are timeout sets, and
// each element is added with the answer's remaining TTL. Keying by the
// pod's own address is what keeps pod A's answers from opening anything
// for pod B.
//
// Table.Elements reads an answer as a resolver would: the one question's
// name must match a pattern of the pod's rule; the CNAME chain from it is
// followed (at most MaxChain hops, no loops) and only the A and AAAA
// records of its end, of the type asked, count, each living for the
// smallest TTL along its chain, within [MinTTL, MaxTTL]. Records not
// reached from the question are ignored: they are not the answer to what
// the pod asked. One answer adds at most MaxAddrsPerAnswer addresses.
//
// # Where things are
//
//	pattern.go  Pattern, ParsePattern, Matches: the API's names
//	name.go     Normalize: a name's wire labels in one canonical text, so
//	            that "evil\.example.test" (a '.' inside a label) is never
//	            under "*.example.test"
//	table.go    Rule, Subject, Table: what the compiler hands the forwarder
//	answer.go   Table.Elements: the elements one answer adds, and why
package fqdn
