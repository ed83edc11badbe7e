// Package policy compiles Kubernetes NetworkPolicies (networking.k8s.io/v1)
// into the policy part of nftguard's desired nftables table for one node.
//
// It is pure: Namespaces, Pods and NetworkPolicies go in, chains and sets of
// engine.Desired come out, plus a list of problems for objects that could not
// be compiled. Nothing here talks to the kernel or to an API server.
//
// # Table layout
//
// The table's skeleton is package tablelayout's, shared as equals with the
// ClusterNetworkPolicy tiers (package clusterpolicy): the fixed chains below
// (np_forward, np_input, np_ingress), Tiers, the log-denied chains and the
// link rules. This package fills the NetworkPolicy slot of it, emits the
// fixed chains (and, with LogDenied, the shared np_denied_* chains) as
// tablelayout builds them, and adds the pod and policy chains.
//
// Only pods on this node are isolated; their IPs are the keys of four verdict
// maps that send a packet to the pod's own chain in O(1):
//
//	chain np_forward         hook forward: established/related accept (ICMP
//	                         errors about allowed flows are related), then
//	                         IPv6 neighbour solicitation/advertisement with
//	                         hop limit 255 accept, then
//	                         ip saddr vmap @np_egress4 / ip6 saddr vmap @np_egress6,
//	                         then goto np_ingress
//	chain np_input           hook input: the same rules as np_forward up to
//	                         the egress maps (no goto): a local pod's
//	                         egress to an address of its own node
//	chain np_ingress         ip daddr vmap @np_ingress4 / ip6 daddr vmap @np_ingress6,
//	                         then accept
//	chain np_egr_NS_POD      a jump to the egress chain of every policy that
//	                         selects the pod, then the last rule, which drops
//	chain np_ing_NS_POD      a jump to the ingress chain of every policy that
//	                         selects the pod, its named ports resolved on the
//	                         pod, then the last rule, which drops
//	chain np_pe_NS_POLICY    a policy's egress rules, once for all the pods
//	                         it selects; a match goes on to the ingress check
//	chain np_pi_NS_POLICY    a policy's ingress rules; a match accepts
//
// ClusterNetworkPolicy tiers (package clusterpolicy) hook in through
// Input.Tiers: their lookups go into the fixed chains around the
// NetworkPolicy lookups, Admin before and Baseline after, in both np_forward
// (egress) and np_ingress (ingress); see tablelayout.Tiers. Without them
// the fixed chains are exactly as above.
//
// Peers selected by pod and namespace selectors become named sets of pod
// addresses, one per distinct selection and IP family (np_sel_HASH_4),
// shared by every rule of every policy that selects the same pods: the
// same selection is never copied. ipBlocks become interval sets per rule
// with the except ranges already cut out. Numbered ports are one match
// per protocol: inline when the protocol's ports are one range (tcp dport
// 80, tcp dport 80-90), else a lookup in an interval set of the rule
// (tcp dport @np_NS_POLICY_in0_tcp), so a rule costs at most three port
// matches however many ports it lists. Named ports are resolved per
// destination pod: inline in the pod's own ingress chain, and as a set of
// address . protocol . port tuples for egress (one per distinct selection
// and list of names, np_named_HASH_4, shared like the peer sets), so one
// name may map to different numbers on different pods. The cost of one policy, precisely,
// is in package podchain's documentation.
//
// Neighbour discovery is accepted before any pod's chain because on a bridge
// with br_netfilter pods resolve each other's IPv6 addresses through the
// forward hook, with their own (policy-keyed) addresses: without it an
// isolated pod loses IPv6 to its neighbours whatever the policy allows. RFC
// 4861 section 7.1 makes hop limit 255 mandatory for these messages, and a
// routed packet's hop limit is decremented before the forward hook, so only
// packets bridged on the pods' link match; the RFC allows the pods' global
// addresses as source and destination, so the rules restrict no address.
// Router advertisements, redirects, multicast listener reports and DHCPv6
// come from link-local addresses, which are never policy keys, so they need
// no rule; a forged one from a pod address gets no special treatment. The
// reasoning in full is at tablelayout.LinkRules (tablelayout/nd.go).
//
// A pod's egress to an address of its own node (its InternalIP, a bridge
// or gateway address, a node-local DNS cache, a host-network pod, a Service
// DNATed to one of these) is delivered locally and never crosses the
// forward hook, so np_input sends it through the same egress dispatch:
// egress isolation and ClusterNetworkPolicy Deny rules hold on the pod's
// own node as on any other. Traffic from the node to its pods (the
// kubelet's probes) leaves through the output hook, which the table does
// not hook, so it is always allowed, as Kubernetes requires; the pods'
// replies are established. A pod reaching itself through the node (a
// hairpin) is accepted explicitly.
//
// # ipBlocks that an API server stored before its strict validation
//
// Since Kubernetes 1.36 the API server refuses, when a policy is created,
// ipBlocks with leading zeros, an IPv4-mapped IPv6 address
// (::ffff:10.77.1.0/120) or bits beyond the prefix length (10.77.1.10/16),
// but it keeps serving the policies it stored before. The compiler reads
// those values as Kubernetes components read them (ParseIPBlockCIDR, in
// ranges.go): decimal octets, the bits masked, the IPv4 network a mapped
// one stands for. Refusing them here would drop a policy the cluster
// enforces, and with it its pods' isolation; reading a mapped network as
// IPv6 would make an except that excepts nothing. Manifests are refused
// such values as the API server refuses them on create, by the manifest
// reader, before they reach the compiler (the reader keeps them in their
// fail-closed form). A policy that no API server would accept (Validate)
// is reported and enforced in its fail-closed form (FailClosedInvalid):
// its pods stay isolated and none of its rules is installed, every pod of
// its namespace when its podSelector cannot be trusted, both directions
// when its policyTypes names one that cannot be read. A mistake in a
// policy must not open the pods it was written to isolate.
//
// # Where things are
//
//	compile.go      Input, Output, Compile and Compiler.Compile: the whole
//	                table from the parts below
//	chains.go       the two directions (ingress, egress) as kinds of pod
//	                chain of package podchain, and a local pod's chain from
//	                the rules of the policies selecting it
//	rules.go        one policy rule → peer, port and named-port matches and
//	                the sets they name
//	names.go        every generated chain and set name, and why the names
//	                are unique, bounded and safe
//	incremental.go  Compiler and its memo: what one compile keeps for the
//	                next
//	logdenied.go    the comments of an isolated pod chain's final drop
//	                (its counters, while the node logs), and DeniedChain
//	                (chain name -> namespace); the log-denied chains and
//	                their configuration are package tablelayout's
//	validate.go     Validate: the API server's rules for a NetworkPolicy
//	isolation.go    IsolatingPolicies: the policies that isolate a pod in a
//	                direction, as denied-packet readers (flowlog) name them
//	failclosed.go   FailClosed (over budget) and FailClosedInvalid (invalid):
//	                a policy enforced without its rules
//	ranges.go       ipBlock reading (ParseIPBlockCIDR) and arithmetic
//
// Which pods and namespaces a selector selects, named ports, and the
// per-namespace pod index that makes an event cheap are package selection's,
// shared with every compiler that selects pods. The per-pod chain builder,
// the dispatch maps (the first local pod in key order keeps an address or
// a name two pods share; the others are problems), set declaration and
// the rule and chain memo are package podchain's, shared with
// clusterpolicy.
//
// Tests: testdata/ holds golden tables (go test ./policy/ -run Golden
// -update rewrites them; review the diff), random.sum pins thousands of
// random clusters the same way, and the incremental Compiler is compared
// with Compile over random event sequences.
package policy
