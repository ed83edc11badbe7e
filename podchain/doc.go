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
//   - A kind of chain (Dir): a tier in one direction, with its name
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
//   - Sets: a set name declared twice (two objects of one key, possible in
//     manifests only) keeps the first declarer's set and the second rule is
//     not remembered; pod selections' addresses are computed once per
//     compile and shared by every set of the same selections.
//   - The memo (Cycle, Memo): a rule is taken from the previous compile when
//     its policy object, its peer selections, its sets' names and what else
//     it read are unchanged; a rule compiled again to the same rule and sets
//     is the previous one, so the chains that hold it are kept too.
//
// # Where things are
//
//	chain.go     Dir (a kind of pod chain) and the one chain builder, with
//	             the chain memo
//	rule.go      Rule (a compiled policy rule), Action, Join
//	end.go       End: how drops are written when the node logs
//	dispatch.go  Dispatch (the verdict maps, first pod keeps an address)
//	             and DropSharedLocal
//	sets.go      set declaration with name-collision tracking, shared
//	             peer addresses (PeerAddrs), egress named-port tuples
//	memo.go      Memo and Cycle: what one compile keeps for the next, and
//	             the rule memo
package podchain
