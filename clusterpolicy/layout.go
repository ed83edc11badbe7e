package clusterpolicy

import (
	"strings"

	"sigs.k8s.io/network-policy-api/apis/v1beta1"

	"github.com/nftguard/nftguard/engine"
	"github.com/nftguard/nftguard/podset"
	"github.com/nftguard/nftguard/policy"
)

// slot is one tier in one direction: everything that differs between the
// four kinds of pod chain, so that one builder makes them all.
type slot struct {
	admin, egress bool
	tier          string // "Admin" or "Baseline", for comments
	field         string // "ingress" or "egress", as in the API
	chainPrefix   string // cnp_ae_NS_POD, see names.go
	mapBase       string // cnp_admin_egress4, see names.go
	setTag        string // "in" or "eg": cnp_POLICY_eg0_pods4
	local4        string // the local pod's address in a packet
	local6        string
	peer4         string // the peer's address
	peer6         string
	accept        string // the verdict of Accept
	denied        string // policy's shared denied chain of this direction
}

// The slots, in the order of their maps in the output.
var slots = [4]slot{
	{admin: true, egress: false, tier: "Admin", field: "ingress", chainPrefix: "ai", mapBase: "cnp_admin_ingress", setTag: "in",
		local4: "ip daddr", local6: "ip6 daddr", peer4: "ip saddr", peer6: "ip6 saddr", accept: "accept", denied: policy.ChainDeniedIngress},
	{admin: true, egress: true, tier: "Admin", field: "egress", chainPrefix: "ae", mapBase: "cnp_admin_egress", setTag: "eg",
		local4: "ip saddr", local6: "ip6 saddr", peer4: "ip daddr", peer6: "ip6 daddr", accept: "goto " + policy.ChainIngress, denied: policy.ChainDeniedEgress},
	{admin: false, egress: false, tier: "Baseline", field: "ingress", chainPrefix: "bi", mapBase: "cnp_baseline_ingress", setTag: "in",
		local4: "ip daddr", local6: "ip6 daddr", peer4: "ip saddr", peer6: "ip6 saddr", accept: "accept", denied: policy.ChainDeniedIngress},
	{admin: false, egress: true, tier: "Baseline", field: "egress", chainPrefix: "be", mapBase: "cnp_baseline_egress", setTag: "eg",
		local4: "ip saddr", local6: "ip6 saddr", peer4: "ip daddr", peer6: "ip6 daddr", accept: "goto " + policy.ChainIngress, denied: policy.ChainDeniedEgress},
}

// slotIndex is the index in slots of a tier and direction.
func slotIndex(admin, egress bool) int {
	i := 0
	if !admin {
		i = 2
	}
	if egress {
		i++
	}
	return i
}

// verdict is what a matching rule of action a does in slot s: Accept ends
// the direction (egress goes on to the destination's ingress check), Deny
// drops (a timeout for the client, never a reject), Pass returns to the
// fixed chain, which goes on with the next tier. How a Deny drops is end.
func (s *slot) verdict(a v1beta1.ClusterNetworkPolicyRuleAction, end chainEnd) string {
	switch a {
	case v1beta1.ClusterNetworkPolicyRuleActionAccept:
		return s.accept
	case v1beta1.ClusterNetworkPolicyRuleActionPass:
		return "return"
	}
	return s.drop(end)
}

// Logging of denied packets. With Input.LogDenied set, a pod
// chain's drops (Deny rules, and rules that fail closed) are those of
// package policy's isolated pod chains (see policy/logdenied.go):
//
//	... counter goto np_denied_ingress   pods of namespaces that opt in
//	... counter drop                     every other pod
//
// so a packet a ClusterNetworkPolicy denies is logged by the same shared,
// rate-limited chains (one token bucket per node and direction, however
// many tiers and pods drop), and counted in the pod's chain, where the
// chain's name tells the agent the tier, direction and namespace
// (DeniedChain). The rule's comment names the policy and rule; a reader of
// a record recovers them by evaluating the flow (package explain), since
// the log prefix names only the direction, never tenant text. Without
// LogDenied a Deny is a plain drop and the table is what it was before.

// chainEnd is how a pod chain's drops are written.
type chainEnd uint8

const (
	endPlain   chainEnd = iota // drop (the node does not log)
	endCounted                 // counter drop (the namespace did not opt in)
	endLogged                  // counter goto the shared denied chain
)

// drop is the verdict of a rule that denies, as end writes it.
func (s *slot) drop(end chainEnd) string {
	switch end {
	case endCounted:
		return "counter drop"
	case endLogged:
		return "counter goto " + s.denied
	}
	return "drop"
}

// loggedNamespaces returns the namespaces whose pods log denied packets,
// nil when the node does not log: the rule of policy's compiler, so a pod
// logs in every tier or in none.
func loggedNamespaces(in *Input) map[string]bool {
	if in.LogDenied == nil {
		return nil
	}
	m := map[string]bool{}
	for _, ns := range in.Namespaces {
		if ns != nil && ns.Annotations[policy.AnnotationLogDenied] == "true" {
			m[ns.Name] = true
		}
	}
	return m
}

// endOf is how the chains of pod p end.
func (c *compiler) endOf(p *podset.Pod) chainEnd {
	switch {
	case c.logged == nil:
		return endPlain
	case c.logged[p.Namespace]:
		return endLogged
	}
	return endCounted
}

// DeniedChain reports whether chain is a local pod's chain of a tier
// (cnp_ai_NS_POD and so on, see names.go) and, if so, which namespace's,
// tier's and direction's. The namespace is as nftsafe.NamePart wrote it,
// as in policy.DeniedChain. With logging on, every counter in such a chain
// is on a rule that drops: Deny rules and rules that fail closed.
func DeniedChain(chain string) (namespace string, admin, egress, ok bool) {
	rest, found := strings.CutPrefix(chain, "cnp_")
	if !found || len(rest) < 3 || rest[2] != '_' {
		return "", false, false, false
	}
	switch rest[:2] {
	case "ai":
		admin = true
	case "ae":
		admin, egress = true, true
	case "bi":
	case "be":
		egress = true
	default:
		return "", false, false, false
	}
	ns, _, found := strings.Cut(rest[3:], "_")
	if !found || ns == "" {
		return "", false, false, false
	}
	return ns, admin, egress, true
}

// maps are the dispatch maps, one per slot and family, from a local pod's
// address to its chain of that slot.
func newMaps() [4][2]engine.Set {
	var m [4][2]engine.Set
	for i := range slots {
		s := &slots[i]
		c := s.tier + " tier " + s.field + ": local pods a ClusterNetworkPolicy selects"
		m[i][0] = engine.Set{Name: s.mapBase + "4", Type: "ipv4_addr", Map: "verdict", Comment: c}
		m[i][1] = engine.Set{Name: s.mapBase + "6", Type: "ipv6_addr", Map: "verdict", Comment: c}
	}
	return m
}

// tiers are the rules that look the maps up, for policy's fixed chains.
func tiers() policy.Tiers {
	lookup := func(i int) []engine.Rule {
		s := &slots[i]
		return []engine.Rule{
			{Rule: s.local4 + " vmap @" + s.mapBase + "4"},
			{Rule: s.local6 + " vmap @" + s.mapBase + "6"},
		}
	}
	return policy.Tiers{
		AdminIngress:    lookup(slotIndex(true, false)),
		AdminEgress:     lookup(slotIndex(true, true)),
		BaselineIngress: lookup(slotIndex(false, false)),
		BaselineEgress:  lookup(slotIndex(false, true)),
	}
}
