// Package conntrack clears conntrack entries that carry an egress source
// translation which is no longer right, so that the next packet of such a
// connection is translated again by the current table.
//
// Why: the kernel evaluates NAT rules only for the first packet of a
// connection and keeps the binding in the conntrack entry. Changing
// nftguard's egress map therefore changes nothing for connections that are
// already tracked: a long-lived UDP flow (DNS, QUIC, syslog, …) would keep
// leaving with the old address for as long as it stays active. Deleting the
// entry makes the next packet a "new" connection that meets the current
// rules.
//
// The package is stateless: it compares what the kernel holds with the
// bindings the table was just synced to ([Binding]s, which the caller
// converts from compose.Result.EgressBindings with
// compose.ConntrackBindings), so the one-shot `nftguard apply` and the agent
// can both call it after every successful sync. It talks netlink only
// (github.com/ti-mo/conntrack over NETLINK_NETFILTER, addresses over
// NETLINK_ROUTE); no conntrack binary is needed.
//
// # Rules
//
// Every entry of the conntrack table (IPv4 and IPv6) is read. An entry with
// original source P whose reply destination T differs from P was
// source-NATed to T. P is the pod, T the address it leaves with.
//
//   - T == P: no source NAT; kept.
//   - P is an address of the node itself, or (with [WithCIDRs]) P is outside
//     the cluster CIDRs: not pod traffic; kept.
//   - The real destination D (the reply source, i.e. after any DNAT) is an
//     address of the node, or (with [WithCIDRs]) lies in a cluster or service
//     CIDR: nftguard's egress chain never translates such traffic, so the
//     translation is not ours and would not become ours; kept. Without this,
//     a pod's connection through a masqueraded Service (hairpin, NodePort)
//     would be cut on every sync and re-balanced to another backend.
//   - P is bound to T now: the translation is right; kept.
//   - With [WithPrevious], T is an address of the node that P was bound to
//     at the last cleaning (or at a sync since that was not cleaned for)
//     and is not now: a load-balancer address the node
//     still holds, which was our translation (annotation removed, Service
//     deleted, pod held); deleted.
//   - T is an address of the node itself (read from the namespace over
//     netlink: that is a masquerade, or an SNAT by another tool): deleted only
//     if P now has an unrestricted binding — the connection predates the
//     Service and must move to its address. Kept otherwise: with no binding
//     the other tool's translation is what P gets anyway, and with a
//     restricted binding (ports, networks) we cannot tell from the entry
//     whether this connection would match.
//   - T is neither: an egress address P is no longer bound to (annotation
//     removed, Service deleted, load-balancer IP changed, pod moved to
//     another Service, pod address reused). Deleted.
//
// Known limits, all of which err on the side of keeping a connection:
// an entry already bound to the right address is not re-examined against a
// changed port or network restriction; without [WithPrevious] (the one-shot
// commands, an agent's first cleaning) an old load-balancer address that is
// still assigned to the node counts as a node address; an entry is deleted by
// its original tuple, so a connection re-created with the same tuple between
// the dump and the delete is deleted too (it is simply tracked again on its
// next packet).
//
// # Where things are
//
//	conntrack.go  ClearStale: dump the entries, read the node's addresses,
//	              delete the stale ones; Stats, WithCIDRs, WithPrevious
//	decide.go     Binding, the input; decide: the rules above, one entry
//	              at a time (pure)
package conntrack
