package policy

import (
	"strings"

	"github.com/nftguard/nftguard/internal/nftsafe"
)

// Generated names. The names of chains and sets are part of the kernel
// state: renaming one replaces the object on the next sync, so they stay
// as they are, and this file is the one place that makes them.
//
//	np_forward, np_ingress            the fixed chains (package tablelayout)
//	np_ingress4/6, np_egress4/6       the dispatch maps (package tablelayout)
//	np_ing_NS_POD, np_egr_NS_POD      a local pod's ingress / egress chain
//	                                  (podchain.Kind.ChainPrefix, via ChainName)
//	np_pi_NS_POLICY, np_pe_NS_POLICY  a policy's ingress / egress chain
//	                                  (direction.policyPrefix); a policy
//	                                  sharing another's key (manifests
//	                                  only) keeps its rules in the pod
//	                                  chains instead
//	np_NS_POLICY_inN_KIND,            the sets of rule N of a policy's
//	np_NS_POLICY_egN_KIND             ingress / egress (direction.setTag);
//	                                  KIND is cidr4/6, the port sets tcp,
//	                                  udp or sctp, or pods4/6 and named4/6
//	                                  for a selection whose shared name is
//	                                  taken (see below)
//	np_sel_HASH_4, np_sel_HASH_6      the pods of one selection, shared by
//	                                  every rule that selects them (HASH:
//	                                  16 hex digits of the SHA-256 of the
//	                                  selection's canonical key; made by
//	                                  package podchain)
//	np_named_HASH_4, np_named_HASH_6  the egress named-port tuples of one
//	                                  selection and list of names, shared
//	                                  the same way
//
// Why they are unique. Every name starts with "np_", which keeps it clear
// of nft keywords (forward, ingress) and of the egress SNAT objects
// ("eg_"); chains and sets are separate name spaces in nft. The parts are
// joined with "_", a byte Kubernetes never allows in namespace, pod or
// policy names (DNS labels and subdomains: [a-z0-9.-]), so a joined name
// splits back into its parts in one way only: two objects with different
// keys never share a name. The fixed names have one "_", generated ones
// three or more; a shared selection set has three parts after "np" and a
// rule's set four, so they never meet. Two selections whose hashes
// collide do not share: the second keeps its rule's own pods4/6 name. Two objects with the same key (possible only in
// manifests, never from an API server) do share names: the first in key
// order (of two policies sharing a key, the first in input order) declares
// a set (see ruleScratch.collided) and pod chains follow the local pods'
// key order.
//
// Why they are bounded. The kernel refuses names over 256 bytes
// (NFT_NAME_MAXLEN); namespaces are at most 63 bytes but pod and policy
// names 253, so a name can be longer. nftsafe.Name cuts such a name to nftsafe.MaxName
// bytes: its first 183 bytes, to stay readable, then "_" and 16 hex digits
// of the SHA-256 of the whole name, to stay unique (a collision needs two
// names equal in their first 183 bytes and in 64 bits of their hash). A
// shortened name cannot equal a name that was not shortened: that would
// need a "_" 17 bytes before the end followed by 16 hex digits, and the
// last part of a generated name is a pod name of at most 253 bytes behind
// a namespace of at most 63 (for chains: the "_" would sit at byte 183,
// past where any namespace ends) or a KIND (for sets).
//
// Why they are safe. A name is only ever made of the fixed parts above and
// namespace, pod and policy names, each through nftsafe.NamePart: a name the
// API server would accept (a DNS name: no byte of it can be a space, quote,
// brace, "@" or anything else the nft rule syntax the names are used in,
// "jump NAME" and "@NAME", would read as syntax) stays as it is, and
// anything else, possible only in a hand-written manifest, becomes "X" and a
// hash of it: uppercase never occurs in a DNS name, so it cannot collide
// with one, and the object is still enforced under a name nft reads back.

// setName names a set of a rule from its parts: namespace, policy name,
// the direction's setTag with the rule's index, and the set's KIND.
func setName(parts []string) string {
	var b strings.Builder
	b.WriteString("np")
	for _, p := range parts {
		b.WriteByte('_')
		b.WriteString(nftsafe.NamePart(p))
	}
	return nftsafe.Name(b.String())
}
