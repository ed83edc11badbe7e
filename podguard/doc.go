// Package podguard compiles the part of nftguard's table that makes a
// packet a pod's by where it enters the node, not by the address it
// carries: one guard chain per local pod, on the ingress hook of the pod's
// host-side interface, that lets only the pod's own addresses leave it.
//
// It is pure: the local pods (from the API) and the host's pod-facing
// interfaces (learned from the kernel by package podif) go in; chains, the
// pods' own link-local addresses (for the policy tiers' dispatch) and
// problems come out.
//
// # Why the ingress hook
//
// Every other chain of the table keys a packet to a pod by its address
// (np_egress4, cnp_admin_ingress6, the DNS redirect's sets, egress SNAT).
// That is right only if an address cannot be forged and every address a
// pod uses is a key. Neither holds by itself: a pod may send with any
// source (ordinary sockets bind link-local addresses; NET_RAW, which every
// container has by default, writes any header), and every pod has an
// fe80:: address that is no policy key.
//
// The inet family's ingress hook runs on one device, for every IPv4 and
// IPv6 packet it receives, before routing and before a bridge takes the
// frame (netfilter's ingress hook is called ahead of the device's
// rx_handler). On the host side of a pod's veth that is every packet the
// pod sends, in both topologies:
//
//   - routed (ptp, Calico style): the pod's /32 or /128 route points at
//     the veth, whose packets the node then routes (forward hook) or
//     delivers (input hook);
//   - bridged: the veth is a port of a Linux bridge; with br_netfilter the
//     inet hooks that follow see the bridge as the input device, never the
//     port, so no later hook of the inet family can tell which pod sent a
//     bridged packet. The ingress hook of the port can.
//
// So a chain per pod on its own interface checks the source once, where
// the pod cannot choose it, and every later address lookup can trust the
// address: a source that is not the pod's own never gets past the node's
// first hook, and the pod's link-local addresses become keys like its pod
// IPs (Output.LinkLocal, which the tiers' dispatch maps add).
//
// # The guard chain of a pod
//
//	chain pg_NS_POD {
//		type filter hook ingress device "vethXXXX" priority -500; policy accept;
//		ip saddr 10.0.1.5 accept                  the pod's IPv4 addresses
//		ip6 saddr fd00::105 accept                 its IPv6 addresses
//		ip6 saddr fe80::a8c1:abff:fe12:3456 accept its own link-local addresses
//		ip6 saddr :: icmpv6 type nd-neighbor-solicit accept    duplicate address detection
//		ip6 saddr :: icmpv6 type mld2-listener-report accept    (RFC 4862, 3810: sent
//		ip6 saddr :: icmpv6 type mld-listener-report accept      before any address)
//		counter drop comment "forged source: not an address of pod NS/POD"
//	}
//
// Only the pod's own addresses pass, in each family: those of
// status.podIPs, and the link-local addresses its interface holds in the
// pod's network namespace (what the kernel says, learned by package
// podif). Neighbour discovery, router solicitation, MLD and DHCPv6 are
// sent from the pod's own link-local address, or from the unspecified
// address before it has one, so they pass; the policy chains then let
// them through unjudged (package tablelayout, nd.go). Everything else is
// dropped, and counted; with --log-denied, logged.
//
// A link-local address that two local pods' interfaces hold is neither
// pod's: it is dropped on both interfaces and is no dispatch key (one key
// twice would be one pod's policy deciding for another). Host-network
// pods have no interface of their own and are not guarded.
//
// # Which interface is a pod's
//
// An interface is a pod's when its peer holds one of the pod's
// status.podIPs and no address of another local pod: the network plugin
// put the address there, and a pod without NET_ADMIN cannot add one. An
// interface whose peer holds addresses of two local pods is nobody's and
// drops every packet (a pod that adds another pod's address beside its
// own cuts itself off). A pod whose address two interfaces hold has no
// interface of its own: it is unattributed, and each of those interfaces
// drops every packet, because nothing says which one the network plugin
// made for it; only a pod with NET_ADMIN can bring that about, and what
// it gets is no traffic at all, never another pod's policy.
//
// An interface that holds no known pod's address but one of the node's
// pod ranges (Node.spec.podCIDRs) is a pod still starting, whose address
// the API does not know yet: what its peer holds in those ranges, and its
// link-local addresses, may leave it, and nothing else. Interfaces whose
// peer holds nothing of the pod ranges (a container outside Kubernetes)
// are left alone.
//
// A local pod with no interface of its own (a network plugin without veth
// peers, such as macvlan or ipvlan) is unattributed: its traffic is keyed
// by address as before, and Output.Unattributed names it so the agent can
// say so (log, metric, an Event on the Node). While a pod is, and the
// node's pod ranges are known, a prerouting chain (pg_fallback, priority
// -300) drops every packet that enters the node, loopback aside, with a
// source of those ranges that no local pod has: such a pod can still send
// with a neighbour's address, which only its interface could tell, but no
// longer with an unused one, and a pod starting on such a node is cut off
// until the API names its address.
//
// # Where things are
//
//	iface.go    Interface: a host-side interface and its peer's addresses
//	compile.go  Input, Output, Compile, Compiler: the binding of pods to
//	            interfaces, their guard chains, the fallback
package podguard
