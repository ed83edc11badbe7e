package tablelayout

import (
	"slices"

	"github.com/nftguard/nftguard/engine"
)

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
// A pod's link-local addresses are policy keys (package podguard learns
// them from the pod's interface, and only they and the pod IPs may leave
// it), so the link-local messages a pod needs to work are accepted here
// too, before its chains; everything else from or to a link-local address
// meets policy like any other traffic:
//   - Router solicitations (RFC 4861 6.3.7), hop limit 255 like neighbour
//     discovery: a pod asks its node for a router.
//   - Multicast listener reports and done messages (RFC 2710 section 3,
//     RFC 3810 section 5), which the RFCs send with hop limit 1 from the
//     link-local or the unspecified address: the node's multicast snooping
//     and the pod's own duplicate address detection depend on them.
//   - DHCPv6 (RFC 8415) client messages to All_DHCP_Relay_Agents_and_Servers
//     (ff02::1:2) on UDP 547; answers come from the node (the output hook,
//     not filtered) or are replies conntrack knows.
//
// Router advertisements and redirects come from routers; a pod's node
// sends them from its own output hook, never filtered. One from a pod is
// that pod's egress and meets its policy (an isolated pod cannot become a
// rogue router). DHCPv4 acquisition (0.0.0.0 to broadcast) never leaves a
// guarded pod: the unspecified IPv4 source is not its own. ICMP and ICMPv6
// errors about an allowed flow: conntrack marks them related, and the
// chain's first rule accepts them.
//
// In the input hook (a pod's packets to its own node) the same two
// messages are how an isolated pod resolves its gateway on the node and
// answers the node's unreachability probes, with its own global address as
// source; hop limit 255 there means the sender is on one of the node's
// links.
//
// The e2e tests send each of these packets between isolated pods.
//
// LinkRules returns them (a copy: the slice is not to be changed).
func LinkRules() []engine.Rule { return slices.Clone(linkRules) }

var linkRules = []engine.Rule{
	{Rule: "icmpv6 type nd-neighbor-solicit ip6 hoplimit 255 accept", Comment: "IPv6 neighbour discovery on the link (RFC 4861)"},
	{Rule: "icmpv6 type nd-neighbor-advert ip6 hoplimit 255 accept", Comment: "IPv6 neighbour discovery on the link (RFC 4861)"},
	{Rule: "icmpv6 type nd-router-solicit ip6 hoplimit 255 accept", Comment: "IPv6 router solicitation on the link (RFC 4861)"},
	{Rule: "icmpv6 type mld-listener-report ip6 hoplimit 1 accept", Comment: "multicast listener report on the link (RFC 2710)"},
	{Rule: "icmpv6 type mld-listener-done ip6 hoplimit 1 accept", Comment: "multicast listener done on the link (RFC 2710)"},
	{Rule: "icmpv6 type mld2-listener-report ip6 hoplimit 1 accept", Comment: "multicast listener report on the link (RFC 3810)"},
	{Rule: "ip6 daddr ff02::1:2 udp dport 547 accept", Comment: "DHCPv6 to the link's relays and servers (RFC 8415)"},
}
