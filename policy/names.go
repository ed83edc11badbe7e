package policy

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"
)

// Generated names. The names of chains and sets are part of the kernel
// state: renaming one replaces the object on the next sync, so they stay
// as they are, and this file is the one place that makes them.
//
//	np_forward, np_ingress            the fixed chains (layout.go)
//	np_ingress4/6, np_egress4/6       the dispatch maps (layout.go)
//	np_ing_NS_POD, np_egr_NS_POD      a local pod's ingress / egress chain
//	                                  (direction.chainPrefix)
//	np_NS_POLICY_inN_KIND,            the sets of rule N of a policy's
//	np_NS_POLICY_egN_KIND             ingress / egress (direction.setTag);
//	                                  KIND is pods4/6, cidr4/6 or named4/6
//
// Why they are unique. Every name starts with "np_", which keeps it clear
// of nft keywords (forward, ingress) and of the egress SNAT objects
// ("eg_"); chains and sets are separate name spaces in nft. The parts are
// joined with "_", a byte Kubernetes never allows in namespace, pod or
// policy names (DNS labels and subdomains: [a-z0-9.-]), so a joined name
// splits back into its parts in one way only: two objects with different
// keys never share a name. The fixed names have one "_", generated ones
// three or more. Two objects with the same key (possible only in
// manifests, never from an API server) do share names: the first in key
// order declares a set (see ruleScratch.collided) and pod chains follow
// the local pods' key order.
//
// Why they are bounded. The kernel refuses names over 256 bytes
// (NFT_NAME_MAXLEN); namespaces are at most 63 bytes but pod and policy
// names 253, so a name can be longer. shorten cuts such a name to maxName
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
// namespace, pod and policy names, which the API server has validated as
// DNS names: no byte of them can be a space, quote, brace, "@" or anything
// else the nft rule syntax the names are used in ("jump NAME", "@NAME")
// would read as syntax. Objects read from manifests (apply, render) are
// not validated for their names by anything in this package: there the
// operator's own files are trusted.

// maxName keeps chain and set names well inside the kernel's 256-byte limit;
// longer names are shortened with a hash that keeps them unique.
const maxName = 200

// objName names a per-pod chain: prefix is the direction's chainPrefix.
func objName(prefix, ns, name string) string {
	return shorten("np_" + prefix + "_" + ns + "_" + name)
}

// setName names a set of a rule from its parts: namespace, policy name,
// the direction's setTag with the rule's index, and the set's KIND.
func setName(parts []string) string {
	return shorten("np_" + strings.Join(parts, "_"))
}

func shorten(s string) string {
	if len(s) <= maxName {
		return s
	}
	h := sha256.Sum256([]byte(s))
	return s[:maxName-17] + "_" + hex.EncodeToString(h[:8])
}
