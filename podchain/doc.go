// Package podchain is the machinery both policy tiers compile into: per-pod
// chains, the verdict maps that dispatch a local pod's address to them,
// the named sets of peer addresses, and the memo that lets a compile reuse
// what the previous one derived from unchanged objects.
//
// Package policy (NetworkPolicy) and package clusterpolicy (the Admin and
// Baseline tiers of ClusterNetworkPolicy) differ in what a policy says and
// in where their chains sit in the table; everything below is theirs in
// common, written once, so that a fix lands in both:
//
//   - A kind of chain (Kind): a tier in one direction, with its name
//     prefix, how a peer is matched, the verdicts of Accept, Deny and Pass,
//     and whether an unmatched packet is dropped (NetworkPolicy isolates)
//     or returns to the next tier. One builder makes every pod chain: the
//     "pod to itself" accepts first (a pod can reach itself, also through a
//     hairpin), then the rules of the policies selecting the pod in
//     evaluation order.
//   - How drops are written when the node logs denied packets (End): plain,
//     counted, or counted and sent to the shared rate-limited chain, so a
//     pod logs in every tier or in none.
//   - Dispatch: the first local pod in key order keeps an address two pods
//     list, and the other is reported the same way by both tiers; of pods
//     sharing a namespace and name the first keeps its chains
//     (DropSharedLocal).
//   - Sets: the pods of a selection are one set per family named for the
//     selection (PeerSets), and the egress named-port tuples of a
//     selection and a list of names one set per family (NamedSets), shared
//     by every rule of every policy that selects them; a set name declared
//     twice (two objects of one key, possible in
//     manifests only) keeps the first declarer's set and the second rule is
//     not remembered; pod selections' addresses are computed once per
//     compile and shared by every set of the same selections.
//   - Ports (ports.go): numbered ports are one match per protocol, inline
//     for one range, else an interval set of the rule; named ports are
//     resolved through an index of the rule's names, so resolving them on
//     a pod costs the pod's ports.
//   - The memo (Cycle, Memo): a rule is taken from the previous compile when
//     its policy object, its peer selections, its sets' names and what else
//     it read are unchanged; a rule compiled again to the same rule and sets
//     is the previous one, so the chains that hold it are kept too.
//
// # Where things are
//
//	chain.go     Kind (a kind of pod chain, known by its address) and the
//	             one chain builder, with the chain memo
//	rule.go      Rule (a compiled policy rule), Action, Join, the jump and
//	             goto verdicts
//	end.go       End: how drops are written when the node logs
//	dispatch.go  Dispatch (the verdict maps of each Kind, KindMaps; the
//	             first pod keeps an address) and DropSharedLocal
//	sets.go      set declaration with name-collision tracking, shared
//	             peer addresses and sets (PeerSets), egress
//	             named-port tuples
//	policychain.go  a policy's chain: its rules once, jumped to from the
//	             chain of each pod it selects (NetworkPolicy)
//	ports.go     port matches and port sets (PortMatches), the named-port
//	             index (NamedPorts)
//	memo.go      Memo and Cycle: what one compile keeps for the next, and
//	             the rule memo
//
// # Cost of one object
//
// What one policy rule costs, in rules and set elements (a budget
// estimator must match this):
//
//   - NetworkPolicy: once, in the policy's chain of that direction
//     (np_pi_/np_pe_): peers × ports + named rules as below, without the
//     ingress named ports; in the chain of each local pod the policy
//     selects: one jump (none when every rule's ports are ingress named
//     ports), plus, per rule with ingress named ports, peers × the
//     distinct ports the names resolve to on that pod.
//   - ClusterNetworkPolicy (at most 25 rules, 25 peers and 25 protocols
//     by the CRD): in the chain of each local pod the policy selects (one
//     chain per pod, tier and direction; a Deny's verdict depends on the
//     pod's namespace when the node logs, so the rules stay per pod):
//     peers × ports + named rules, where peers is 1 without
//     peers, else one per family that has addresses of pods and one per
//     family that has ipBlocks / networks / nodes (at most 4; for a
//     ClusterNetworkPolicy with pods and namespaces peers and networks and
//     nodes peers, at most 6); ports is 1 without ports, else one per
//     protocol among its numbered and protocol-only ports (at most 3),
//     plus, for ingress named ports, one per distinct port the name
//     resolves to on that pod (at most the pod's named ports); named is,
//     for egress named ports, one per family that has a resolved tuple (at
//     most 2). A rule that fails closed is one rule (Deny, Pass) or none
//     (Accept).
//   - Once per rule, whatever the pods: a port set per protocol with more
//     than one range (one element per merged range, at most the rule's
//     ports of that protocol); an ipBlock / network set per family (one
//     element per range left after excepts, at most 2 × (blocks + excepts));
//     a nodes set (the selected Nodes' addresses).
//   - Once per distinct selection, however many rules and policies use it:
//     a set per family of the selected pods' addresses (none for a rule
//     whose ports are all egress named ports); and once per distinct
//     selection and list of egress port names: a set per family of
//     address . protocol . port tuples (for each selected pod, its
//     addresses × the names it declares).
//   - Per local pod and kind of chain that some policy selects it for: its
//     addresses as dispatch-map elements and as "pod to itself" rules, and
//     for NetworkPolicy "ct state invalid drop" and the final drop.
//
// So ports cost elements, not rules, a selection costs its pods once, and
// a NetworkPolicy's rules cost the node once. What stays a product is the
// selection relation itself: one jump per local pod and policy selecting
// it (a ClusterNetworkPolicy's bounded rules per local pod it selects),
// the pods a distinct selection selects, and a distinct selection's
// named-port tuples (its pods' addresses × the names they declare).
package podchain
