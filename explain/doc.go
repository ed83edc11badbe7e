// Package explain decides, for one flow, whether Kubernetes NetworkPolicy
// and ClusterNetworkPolicy (policy.networking.k8s.io) allow it, and names
// the policy rule that decided.
//
// It is an independent reading of the NetworkPolicy and ClusterNetworkPolicy
// specifications that works on the API objects directly. Its purpose is to
// cross-check the policy compilers and the nftables rules they produce (the
// e2e tests compare its answers with real probes through the kernel), so it
// deliberately shares none of the compilers' semantics: not the selection
// of pods and namespaces (package selection), not the matching of peers
// and ports. It does share one thing on purpose: which objects count, in
// the form the API server stores them. For NetworkPolicy that is
// policy.Validate, the API server's rules for which objects exist at all,
// policy.FailClosedInvalid, the form an invalid one is enforced in (its
// pods isolated, no rules), and policy.PolicyTypes, the API server's
// defaulting of spec.policyTypes. For ClusterNetworkPolicy it is the compiler's
// classification, clusterpolicy.CheckAll: a policy whose placement (name,
// tier, priority, subject, number of rules) is invalid, or whose name an
// earlier policy has, is left out; an invalid rule fails closed where it
// stands and the policy stays; everything else is enforced as written. The
// kernel enforces that classification, so explain must say the same; a
// second reading of the CRD's rules would report a difference in input as
// a difference in meaning. Like the compilers it is pure: objects in, a
// verdict out.
//
// The semantics, per direction, in tiers (a later tier is reached only
// when no earlier one decided):
//
//   - Admin tier: the ClusterNetworkPolicies of tier Admin whose subject
//     holds the pod and that have rules for the direction, lowest priority
//     first; equal priorities by name (the API leaves their order open;
//     nftguard fixes it, and explain notes when a tie decided). Within a
//     policy, rules in written order; the first rule whose peer and
//     protocol match decides: Accept allows, Deny denies, Pass skips the
//     rest of the tier. Peers: namespaces, pods (never hostNetwork pods),
//     nodes (their InternalIP and ExternalIP addresses), networks (any
//     address, pods included); protocols: a TCP, UDP or SCTP port or range,
//     or a named port resolved on the destination pod for the flow's
//     protocol (a name two containers declare for different protocols
//     matches each on its own port); none means every protocol and port. A
//     rule that fails closed (invalid, or with a peer nftguard cannot
//     match: no field set, as a newer API version may write, or
//     domainNames outside an Accept rule) follows the API's
//     fail-closed rule: an Accept rule matches nothing, any other rule
//     (Deny, Pass, an unknown action) denies all traffic.
//   - NetworkPolicy tier: decides for a pod that a NetworkPolicy isolates
//     in the direction (below).
//   - Baseline tier: as the Admin tier, with the Baseline policies.
//   - Otherwise the flow is allowed.
//
// The NetworkPolicy tier:
//
//   - A pod is isolated for ingress (egress) when a NetworkPolicy of its
//     namespace selects it and has the Ingress (Egress) policy type; policy
//     types default to Ingress, plus Egress when the policy has egress rules.
//   - An isolated direction is allowed when any rule of any selecting policy
//     matches: one of its peers matches (podSelector and namespaceSelector
//     AND together inside one peer; ipBlock is the CIDR minus its excepts)
//     or it has no peers, and one of its ports matches or it has none.
//   - Ports: a number, a range up to endPort, or a name resolved on the
//     destination pod; the protocol defaults to TCP; a port entry without a
//     port matches every port of its protocol.
//   - Before any tier: a pod always reaches itself; traffic from a pod's
//     own node (an address of its Node other than an ExternalIP, or a
//     hostNetwork pod there) into the pod is always allowed, but the pod's
//     egress to its own node meets its egress tiers like any destination
//     (with a note naming the node); hostNetwork pods are never
//     isolated (nor subjects) nor selected by pod selectors (nor by
//     namespaces and pods peers); terminated pods are ignored; addresses
//     that are not pods are only matched by ipBlocks (and by networks and
//     nodes peers).
//   - IPv6 neighbour discovery (ICMPv6 types 135 and 136, asked about as
//     `--port icmpv6/135`) is allowed before any policy: on a bridge with
//     br_netfilter, pods resolve each other through the forward hook with
//     their own addresses, and an isolated pod would otherwise lose IPv6
//     to its neighbours. The table accepts these messages only with hop
//     limit 255 (RFC 4861 section 7.1), i.e. only from the pods' own link.
//     Any other ICMPv6 type is judged like other flows: only rules without
//     ports admit it. ICMP errors about an allowed flow pass as related
//     traffic of that flow, and link-local signalling (router and multicast
//     listener messages, DHCPv6) never meets policy, whose keys are pod
//     addresses.
//
// # Where things are
//
//	cluster.go  Input, Cluster, New: the objects indexed once, invalid ones
//	            reported; policyTypes defaulting
//	flow.go     Flow, Endpoint, ParsePort: what is asked, resolved against
//	            the cluster
//	eval.go     Explain, Result, Decision: the NetworkPolicy tier and the
//	            order of the tiers
//	cnp.go      the ClusterNetworkPolicies the compiler enforces, read with
//	            its own classification (clusterpolicy.CheckAll)
//	cnpeval.go  one ClusterNetworkPolicy tier for one side of a flow
//	domains.go  domainNames peers, judged by the answers a DomainAnswers
//	            (the node's table) says the pod holds
//	text.go     the verdict as explain prints it
package explain
