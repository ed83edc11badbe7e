package policy

import "github.com/nftguard/nftguard/engine"

// linkRules are accepted in both hook chains before any pod's chain is
// consulted: the IPv6 neighbour discovery pods on one bridge need to reach
// each other at all on a bridged (br_netfilter) node.
//
// On a bridge with br_netfilter, neighbour solicitations and advertisements
// between pods cross the inet forward hook. Their addresses are the pods'
// own: a solicitation for address resolution carries the sender's address
// of the prompting packet (RFC 4861 section 7.2.2) and goes to the target's
// solicited-node group or, for unreachability detection, to its unicast
// address; the advertisement comes from the target's address and goes back
// to the solicitor's (7.2.4). So an egress-isolated pod could neither
// resolve nor answer its neighbours, and nothing could reach an
// ingress-isolated one, whatever the policy allowed. IPv4 needs no rule:
// ARP never reaches the inet hooks.
//
// Only neighbour solicitation (135) and advertisement (136) are accepted,
// and only with hop limit 255, which RFC 4861 section 7.1 requires of both
// (receivers discard anything else). In the forward hook a hop limit of 255
// means the packet was bridged on the link: a routed packet has its hop
// limit decremented before the hook, so no other node, external host or
// routed pod can use these rules. The rules carry no address restriction
// because the RFC gives none: sources and destinations are the pods' own
// global addresses (restricting them to fe80::/10 would break the very
// resolution above). What an on-link pod gains from a forged solicitation
// or advertisement is neighbour-cache spoofing, which is a link-layer
// matter that NetworkPolicy never covered (ARP is not filtered either); no
// transport data passes these rules.
//
// Deliberately not accepted here, because they never need it:
//   - Router solicitations, router advertisements and redirects: the router
//     of a pod is its node, whose own packets never cross the forward hook,
//     and RFC 4861 (4.2, 6.1.2, 8.1) makes advertisements and redirects come
//     from link-local addresses, which are never policy keys. A forged one
//     from a pod address gets no special treatment.
//   - Multicast listener reports and done messages (RFC 2710 section 3, RFC
//     3810 section 5): sent from link-local addresses to multicast groups,
//     they never match a pod-keyed verdict map, so policy never sees them.
//   - DHCPv6 (RFC 8415): clients talk from link-local addresses to
//     ff02::1:2 and are answered at their link-local address; not policy
//     keys either. DHCPv4 acquisition (0.0.0.0 to broadcast) matches no
//     key; renewals from a pod's own address are that pod's traffic, which
//     NetworkPolicy governs like any other (no change for IPv4).
//   - ICMP and ICMPv6 errors about an allowed flow: conntrack marks them
//     related, and the chain's first rule accepts them.
//
// In the input hook (a pod's packets to its own node) the same two
// messages are how an isolated pod resolves its gateway on the node and
// answers the node's unreachability probes, with its own global address as
// source; hop limit 255 there means the sender is on one of the node's
// links.
//
// The e2e tests send each of these packets between isolated pods.
var linkRules = []engine.Rule{
	{Rule: "icmpv6 type nd-neighbor-solicit ip6 hoplimit 255 accept", Comment: "IPv6 neighbour discovery on the link (RFC 4861)"},
	{Rule: "icmpv6 type nd-neighbor-advert ip6 hoplimit 255 accept", Comment: "IPv6 neighbour discovery on the link (RFC 4861)"},
}
