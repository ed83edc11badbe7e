package clusterpolicy

import (
	"strings"

	"github.com/nftguard/nftguard/internal/nftsafe"
)

// Generated names. As in package policy (policy/names.go, whose reasoning
// this follows), names are kernel state and made in this file only:
//
//	cnp_admin_ingress4/6, ...        the dispatch maps, one per tier,
//	                                 direction and family (slot.mapBase)
//	cnp_ai_NS_POD, cnp_ae_NS_POD,    a local pod's chain of one tier and
//	cnp_bi_NS_POD, cnp_be_NS_POD     direction (slot.ChainPrefix, named by
//	                                 podchain.Kind.ChainName)
//	cnp_POLICY_inN_KIND,             the sets of ingress / egress rule N of
//	cnp_POLICY_egN_KIND              a policy; KIND is net4/6, nodes4/6,
//	                                 the port sets tcp, udp or sctp, or
//	                                 pods4/6 and named4/6 for a selection
//	                                 whose shared name is taken
//	cnp_sel_HASH_4, cnp_sel_HASH_6   the pods of one selection, shared by
//	                                 every rule that selects them (made by
//	                                 package podchain, as policy's np_sel_)
//	cnp_named_HASH_4, _6             the egress named-port tuples of one
//	                                 selection and list of names, shared
//
// Unique: every name starts with "cnp_", clear of the NetworkPolicy
// objects ("np_"), the egress SNAT objects ("eg_") and nft keywords. Parts
// are joined with "_", which no Kubernetes name contains (NamePart turns
// anything else into "X" and a hash, which has none either), so a name
// splits back into its parts one way only. A shared selection set
// (cnp_sel_HASH_4) could only meet a rule's set of a policy named "sel"
// whose tag were 16 hex digits: tags are in/eg and a number. The maps have two "_", set and
// chain names three or more; chains and sets are separate name spaces.
// ClusterNetworkPolicies are cluster-scoped, so a policy name alone names
// its sets; two objects of one name (manifests only) are refused in
// Compile before they could share one.
//
// Bounded and safe: every part goes through nftsafe.NamePart and the whole
// through nftsafe.Name, exactly as policy's names.

// setName names a set of a policy's rule: the policy name, the direction's
// tag with the rule index, and the set's kind.
func setName(policy, tag, kind string) string {
	var b strings.Builder
	b.WriteString("cnp_")
	b.WriteString(nftsafe.NamePart(policy))
	b.WriteByte('_')
	b.WriteString(tag)
	b.WriteByte('_')
	b.WriteString(kind)
	return nftsafe.Name(b.String())
}
