// Package clusterpolicy compiles ClusterNetworkPolicies
// (policy.networking.k8s.io, sigs.k8s.io/network-policy-api v0.3.0,
// v1beta1) into the Admin and Baseline tiers of nftguard's desired table
// for one node, around the NetworkPolicy part that package policy makes.
// The two tiers are siblings: both plug into the table's skeleton, package
// tablelayout (the fixed chains, Tiers, the shared log-denied chains), and
// both build their pod chains with package podchain; this package does not
// import package policy.
//
// It is pure: Namespaces, Pods, Nodes and ClusterNetworkPolicies go in;
// chains, sets, the tier dispatch rules (tablelayout.Tiers) and problems come
// out. Selection of pods and namespaces is package selection's, shared
// with policy, so the two compilers never disagree about a selector.
//
// # Evaluation order
//
// Per direction: Admin tier → NetworkPolicy → Baseline tier → allow.
// Within a tier, policies by priority (0 first), equal priorities by name
// (the API leaves their order open; by name it is the same on every node
// and in explain), rules in written order; the first matching rule
// decides. Accept ends the direction (an egress Accept still goes on to
// the destination's ingress check), Deny drops (a timeout for the client,
// never a reject), Pass skips the rest of the tier.
//
// # Table layout
//
// The fixed chains of package tablelayout carry the tiers (see
// tablelayout.Tiers):
//
//	np_forward   ct established,related accept; neighbour discovery;
//	             ip saddr vmap @cnp_admin_egress4 (and 6)      Admin
//	             ip saddr vmap @np_egress4 (and 6)             NetworkPolicy
//	             ip saddr vmap @cnp_baseline_egress4 (and 6)   Baseline
//	             goto np_ingress
//	np_input     the same up to the Baseline lookups, without the goto:
//	             a local pod's egress to its own node's addresses
//	np_ingress   ip daddr vmap @cnp_admin_ingress4 (and 6)
//	             ip daddr vmap @np_ingress4 (and 6)
//	             ip daddr vmap @cnp_baseline_ingress4 (and 6)
//	             accept
//
// The maps send a local pod's address (jump) to its chain of that tier
// and direction, in O(1) however many pods and policies:
//
//	cnp_ai_NS_POD, cnp_ae_NS_POD   Admin ingress / egress of a local pod
//	cnp_bi_NS_POD, cnp_be_NS_POD   Baseline ingress / egress
//
// A pod chain holds the rules of every policy of its tier whose subject
// selects the pod, in evaluation order, after "pod to itself" accepts (a
// pod cannot block itself, also through a hairpin). A rule's verdict is
// Accept: accept (ingress) or goto np_ingress (egress); Deny: drop (with
// --log-denied: counter drop, or counter goto np_denied_ingress/egress for
// namespaces that opt in, see layout.go); Pass: return. A packet no rule
// matches falls off the chain and returns, like Pass, to the fixed chain, which goes on with the next tier. Because
// NetworkPolicy pod chains never return (they end in drop, or accept /
// goto np_ingress), the Baseline lookup is reached only for pods no
// NetworkPolicy isolates in that direction, and the NetworkPolicy lookup
// only after an Admin Pass or no Admin match: exactly the order above. A
// jump from np_ingress returns to np_ingress even when np_ingress was
// reached by goto from an egress chain, so ingress tiers work the same for
// every path.
//
// Peers become named sets: pods and namespaces peers the selected pods'
// addresses, one set per distinct selection and family shared by every
// rule of every policy that selects the same pods (cnp_sel_HASH_4);
// networks interval sets per rule (net4/net6, nested prefixes folded),
// nodes peers the selected Nodes' InternalIP and ExternalIP addresses
// (nodes4/nodes6). Numbered ports are one match per protocol: inline when
// the protocol's ports are one range (tcp dport 80, udp dport 1000-2000),
// else an interval set of the rule (tcp dport @cnp_POLICY_in0_tcp);
// destinationNamedPort resolves per destination pod and per protocol the
// name is declared with: inline in the local pod's ingress chain, and as
// a set of address . protocol . port for egress, one per distinct
// selection and name (cnp_named_HASH_4), shared like the peer sets. An empty
// protocols list matches every protocol, ICMP included.
// Names: names.go. Without a valid ClusterNetworkPolicy none of this
// exists and the table is byte for byte the NetworkPolicy table.
//
// # Invalid and unreadable objects (fail closed)
//
// Manifests reach the compiler without the API server's CRD schema and
// CEL rules, so Validate's checks mirror them. Two classes:
//
//   - Placement (metadata.name, tier, priority, subject, more than 25
//     rules): without it no one knows whom the policy protects or where
//     its rules go. The policy is left out and reported as a Problem;
//     everything else stays enforced. Inventing a placement (e.g. deny all
//     for every pod) would cut traffic no policy asked to cut.
//   - A rule (action, peers, CIDRs, ports, protocols, rule name): the rule
//     fails closed where it stands, as the API prescribes for a peer of an
//     unknown kind, and is reported as a Problem. An Accept rule matches
//     nothing; a Deny or Pass rule (or one whose action is unknown) drops
//     everything of its direction. Rules before it still decide first, so
//     an invalid Deny never turns into an allow and a policy never becomes
//     more open than written. A network is read as the CRD's CEL rule
//     isCIDR(self) && cidr(self) == cidr(self).masked() reads it: no
//     leading zeros, no bits beyond the prefix length, and no IPv4-mapped
//     IPv6 address (::ffff:10.77.1.0/120 would otherwise be an IPv6 set
//     that no IPv4 packet matches, a Deny that denies nothing). The rule
//     was always refused by the API server, so no stored object has one.
//
// Valid rules this compiler cannot enforce as written fail closed the same
// way, with a Warning naming the rule: peers with no known field (a newer
// API version) and domainNames peers outside Accept rules (the API
// supports them only there). domainNames in an Accept rule: dns.go.
//
// Two objects of one name (possible only in manifests) would share set
// names: the first in input order counts, the other is a Problem. Local
// pods sharing a key or an address are handled and reported exactly as
// policy handles them, by the same code (package podchain): the first in
// key order keeps its chains and map keys; package compose reports a pod
// both tiers name once.
//
// # State
//
// Like NetworkPolicy, both directions are stateful: np_forward accepts
// established and related packets before any tier, so replies to an
// accepted connection pass. A policy change applies to new connections
// only: a Deny added while a connection is established does not cut it
// (conntrack still knows it), exactly as for a NetworkPolicy change; the
// connection ends when it closes or its conntrack entry expires.
//
// # Where things are
//
//	compile.go      Input, Output, Compile: policies in evaluation order,
//	                subjects, pod chains and dispatch maps
//	layout.go       the four slots (tier × direction) as kinds of pod chain
//	                of package podchain, the maps and the Tiers rules
//	rules.go        one rule → peer and port matches and their sets
//	validate.go     the CRD's schema and CEL rules, and fail-closed marking
//	check.go        Check, CheckAll: that classification, exported so that
//	                explain follows exactly what the kernel enforces
//	dns.go          domainNames: the timeout sets per list of names, the
//	                forwarder's table, the redirect of subject (and
//	                starting) pods' DNS to the forwarder and its input
//	                accept
//	names.go        every generated name
//	incremental.go  Compiler and its memo; a pod chain from compiled rules
//
// The pod chains themselves (hairpin accepts, verdicts, how drops are
// written when the node logs), the dispatch maps, set declaration and the
// rule and chain memo are package podchain's, shared with policy.
//
// Tests: golden tables in testdata/ (go test ./clusterpolicy/ -run Golden
// -update rewrites them), the incremental Compiler against Compile over
// random event sequences, the kernel round trip (kernel_test.go), and real
// packets in e2e/cnp_kernel_test.go.
package clusterpolicy
