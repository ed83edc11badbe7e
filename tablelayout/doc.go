// Package tablelayout is the skeleton of nftguard's filter table that both
// policy tiers plug into as equals: package policy (NetworkPolicy) and
// package clusterpolicy (the Admin and Baseline tiers of
// ClusterNetworkPolicy). It owns what every table has however many pods and
// policies there are, and the names the tiers and the readers of the table
// share; it compiles no policy, and imports neither tier.
//
// It is pure: it returns chains, sets and rule text of engine.Desired and
// talks to no kernel. Chain names, set names and rule text are part of the
// product (the goldens of policy and clusterpolicy pin them byte for byte),
// so they do not change with the package they live in.
//
// # The fixed chains
//
//	chain np_forward   hook forward: established/related accept (ICMP errors
//	                   about allowed flows are related), the link rules
//	                   (nd.go), Admin egress, ip saddr vmap @np_egress4 /
//	                   ip6 saddr vmap @np_egress6, Baseline egress, then
//	                   goto np_ingress
//	chain np_input     hook input: the same rules up to Baseline egress
//	                   (no goto), with Tiers.Input after the first rule: a
//	                   local pod's egress to an address of its own node
//	chain np_ingress   Admin ingress, ip daddr vmap @np_ingress4 / ip6 daddr
//	                   vmap @np_ingress6, Baseline ingress, then accept
//
// The NetworkPolicy dispatch maps (np_ingress4/6, np_egress4/6) are named
// here because the fixed chains look them up; package policy fills them
// (DispatchMaps). The tiers' own lookups and chains come in through [Tiers]:
// FixedChains with the zero Tiers is the NetworkPolicy table alone.
//
// # Logging of denied packets
//
// With a [LogDenied] configuration, pods of namespaces annotated
// AnnotationLogDenied end their chains in one of two shared chains
// (np_denied_ingress, np_denied_egress: DeniedChains) that log with a
// direction-only prefix (LogPrefixIngress, LogPrefixEgress) under one
// per-node rate limit, then drop. Both tiers' pod chains end in them, and
// package flowlog tells a record's direction by the prefix; the reasons
// are at the top of logdenied.go.
//
// # Where things are
//
//	chains.go     the fixed chains and their names, the NetworkPolicy
//	              dispatch maps' names (DispatchMaps), Tiers and
//	              FixedChains
//	logdenied.go  LogDenied and its defaults, AnnotationLogDenied, the shared
//	              np_denied_* chains, their log prefixes and rule comments
//	nd.go         the link rules: IPv6 neighbour discovery, router
//	              solicitation, MLD and DHCPv6 accepted before any pod chain,
//	              and why each is safe (LinkRules)
package tablelayout
