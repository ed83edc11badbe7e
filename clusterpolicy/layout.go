package clusterpolicy

import (
	"sigs.k8s.io/network-policy-api/apis/v1beta1"

	"github.com/nftguard/nftguard/engine"
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
}

// The slots, in the order of their maps in the output.
var slots = [4]slot{
	{admin: true, egress: false, tier: "Admin", field: "ingress", chainPrefix: "ai", mapBase: "cnp_admin_ingress", setTag: "in",
		local4: "ip daddr", local6: "ip6 daddr", peer4: "ip saddr", peer6: "ip6 saddr", accept: "accept"},
	{admin: true, egress: true, tier: "Admin", field: "egress", chainPrefix: "ae", mapBase: "cnp_admin_egress", setTag: "eg",
		local4: "ip saddr", local6: "ip6 saddr", peer4: "ip daddr", peer6: "ip6 daddr", accept: "goto " + policy.ChainIngress},
	{admin: false, egress: false, tier: "Baseline", field: "ingress", chainPrefix: "bi", mapBase: "cnp_baseline_ingress", setTag: "in",
		local4: "ip daddr", local6: "ip6 daddr", peer4: "ip saddr", peer6: "ip6 saddr", accept: "accept"},
	{admin: false, egress: true, tier: "Baseline", field: "egress", chainPrefix: "be", mapBase: "cnp_baseline_egress", setTag: "eg",
		local4: "ip saddr", local6: "ip6 saddr", peer4: "ip daddr", peer6: "ip6 daddr", accept: "goto " + policy.ChainIngress},
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
// fixed chain, which goes on with the next tier.
func (s *slot) verdict(a v1beta1.ClusterNetworkPolicyRuleAction) string {
	switch a {
	case v1beta1.ClusterNetworkPolicyRuleActionAccept:
		return s.accept
	case v1beta1.ClusterNetworkPolicyRuleActionPass:
		return "return"
	}
	return "drop"
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
