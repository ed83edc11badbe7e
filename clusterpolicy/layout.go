package clusterpolicy

import (
	"strings"

	"github.com/nftguard/nftguard/engine"
	"github.com/nftguard/nftguard/podchain"
	"github.com/nftguard/nftguard/tablelayout"
)

// slot is one tier in one direction: a kind of pod chain of package
// podchain, with what the tiers add (the maps and the lookups of the
// local pod in the fixed chains). The slots are the elements of the
// package variable slots: the memo knows a kind by its address.
type slot struct {
	podchain.Kind
	admin   bool
	tier    string // "Admin" or "Baseline", for comments
	field   string // "ingress" or "egress", as in the API
	mapBase string // cnp_admin_egress4, see names.go
	setTag  string // "in" or "eg": cnp_POLICY_eg0_pods4
	local4  string // the local pod's address in a packet
	local6  string
}

// newSlot makes the slot of a tier and direction.
func newSlot(admin, egress bool) slot {
	s := slot{admin: admin, tier: "Baseline", field: "ingress", setTag: "in", local4: "ip daddr", local6: "ip6 daddr"}
	s.Kind = podchain.Kind{Egress: egress,
		Peer4: "ip saddr", Peer6: "ip6 saddr", Accept: "accept", Denied: tablelayout.ChainDeniedIngress}
	tierTag, dirTag, mapTier := "b", "i", "baseline"
	if admin {
		s.tier, tierTag, mapTier = "Admin", "a", "admin"
	}
	if egress {
		s.field, s.setTag, s.local4, s.local6, dirTag = "egress", "eg", "ip saddr", "ip6 saddr", "e"
		s.Peer4, s.Peer6, s.Accept, s.Denied = "ip daddr", "ip6 daddr", podchain.GotoChain(tablelayout.ChainIngress), tablelayout.ChainDeniedEgress
	}
	s.ChainPrefix = "cnp_" + tierTag + dirTag
	s.Field = s.tier + " tier " + s.field
	s.mapBase = "cnp_" + mapTier + "_" + s.field
	return s
}

// The slots, in the order of their maps in the output.
var slots = [4]slot{newSlot(true, false), newSlot(true, true), newSlot(false, false), newSlot(false, true)}

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

// Logging of denied packets. With Input.LogDenied set, a pod
// chain's drops (Deny rules, and rules that fail closed) are those of
// package policy's isolated pod chains (see tablelayout/logdenied.go):
//
//	... counter goto np_denied_ingress   pods of namespaces that opt in
//	... counter drop                     every other pod
//
// (podchain.End) so a packet a ClusterNetworkPolicy denies is logged by the same shared,
// rate-limited chains (one token bucket per node and direction, however
// many tiers and pods drop), and counted in the pod's chain, where the
// chain's name tells the agent the tier, direction and namespace
// (DeniedChain). The rule's comment names the policy and rule; a reader of
// a record recovers them by evaluating the flow (package explain), since
// the log prefix names only the direction, never tenant text. Without
// LogDenied a Deny is a plain drop and the table is what it was before.

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

// newMaps are the dispatch maps, one per slot and family, from a local
// pod's address to its chain of that slot.
func newMaps() []podchain.KindMaps {
	m := make([]podchain.KindMaps, len(slots))
	for i := range slots {
		s := &slots[i]
		c := s.tier + " tier " + s.field + ": local pods a ClusterNetworkPolicy selects"
		m[i] = podchain.KindMaps{Kind: &s.Kind, Maps: [2]engine.Set{
			{Name: s.mapBase + "4", Type: "ipv4_addr", Map: "verdict", Comment: c},
			{Name: s.mapBase + "6", Type: "ipv6_addr", Map: "verdict", Comment: c},
		}}
	}
	return m
}

// tiers are the rules that look the maps up, for the fixed chains of
// package tablelayout.
func tiers() tablelayout.Tiers {
	lookup := func(i int) []engine.Rule {
		s := &slots[i]
		return []engine.Rule{
			{Rule: s.local4 + " vmap @" + s.mapBase + "4"},
			{Rule: s.local6 + " vmap @" + s.mapBase + "6"},
		}
	}
	return tablelayout.Tiers{
		AdminIngress:    lookup(slotIndex(true, false)),
		AdminEgress:     lookup(slotIndex(true, true)),
		BaselineIngress: lookup(slotIndex(false, false)),
		BaselineEgress:  lookup(slotIndex(false, true)),
	}
}
