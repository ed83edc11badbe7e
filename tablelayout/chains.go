package tablelayout

import (
	"github.com/nftguard/nftguard/engine"
	"github.com/nftguard/nftguard/podchain"
)

// Names of the fixed chains, and of the NetworkPolicy dispatch maps they
// look pod addresses up in (see the package documentation).
const (
	ChainForward = "np_forward"
	ChainInput   = "np_input"
	ChainIngress = "np_ingress"
	MapIngress4  = "np_ingress4"
	MapIngress6  = "np_ingress6"
	MapEgress4   = "np_egress4"
	MapEgress6   = "np_egress6"
)

// Tiers are the rules another compiler (package clusterpolicy: the Admin
// and Baseline tiers of ClusterNetworkPolicy) places around the
// NetworkPolicy dispatch in the fixed chains, per direction:
//
//	np_forward: ..., AdminEgress, NetworkPolicy egress maps, BaselineEgress, goto np_ingress
//	np_input:   ..., Input, AdminEgress, NetworkPolicy egress maps, BaselineEgress
//	np_ingress: AdminIngress, NetworkPolicy ingress maps, BaselineIngress, accept
//
// A tier rule that lets a packet go on to the next tier returns (or does
// not match); one that decides ends in a verdict (egress Accept: goto
// np_ingress). NetworkPolicy pod chains never return, so the Baseline
// rules see only pods no NetworkPolicy isolates in that direction. The
// zero value adds nothing: the table is the NetworkPolicy table alone.
type Tiers struct {
	AdminEgress, BaselineEgress, AdminIngress, BaselineIngress []engine.Rule
	// Input are accepts of the input chain only, before the egress
	// tiers: traffic of local pods to a service of the node that no
	// policy judges (the DNS forwarder of domainNames rules, which
	// relays to the cluster DNS on the pods' behalf).
	Input []engine.Rule
}

// FixedChains are the chains every table has, however many pods and
// policies: the forward hook, the input hook (a local pod's egress to its
// own node), and the ingress dispatch after the egress check, with the
// tiers around the NetworkPolicy dispatch.
func FixedChains(t *Tiers) []engine.Chain {
	ingress := make([]engine.Rule, 0, 3+len(t.AdminIngress)+len(t.BaselineIngress))
	ingress = append(ingress, t.AdminIngress...)
	ingress = append(ingress,
		engine.Rule{Rule: "ip daddr vmap @" + MapIngress4},
		engine.Rule{Rule: "ip6 daddr vmap @" + MapIngress6})
	ingress = append(ingress, t.BaselineIngress...)
	ingress = append(ingress, engine.Rule{Rule: "accept"})
	return []engine.Chain{
		{
			Name: ChainForward, Type: "filter", Hook: "forward", Priority: 0, Policy: "accept",
			Comment: "NetworkPolicy: pod traffic routed or bridged through this node",
			Rules:   append(egressRules(t), engine.Rule{Rule: podchain.GotoChain(ChainIngress)}),
		},
		{
			Name: ChainInput, Type: "filter", Hook: "input", Priority: 0, Policy: "accept",
			Comment: "NetworkPolicy: local pods' egress to this node's own addresses",
			Rules:   inputRules(t),
		},
		{
			Name:    ChainIngress,
			Comment: "NetworkPolicy: ingress isolation of local pods",
			Rules:   ingress,
		},
	}
}

// egressRules start both hook chains: established and related traffic,
// neighbour discovery, then the source's egress tiers (Admin,
// NetworkPolicy, Baseline). The forward chain goes on to the
// destination's ingress isolation.
//
// The input chain has the same rules because a packet from a local pod to
// an address of the pod's own node (its InternalIP, a bridge or gateway
// address, a node-local DNS cache, a host-network pod, a Service that
// kube-proxy DNATs to one of these) is delivered locally and never crosses
// the forward hook: without them a pod isolated for egress, or denied its
// node by a ClusterNetworkPolicy, could still reach every service the node
// listens on. The same dispatch maps and pod chains decide, so there is no
// second copy of any policy. A pod chain that allows ends in "goto
// np_ingress", whose lookups are keyed by pod addresses a node address
// never is, so it ends in accept. Traffic from the node to its pods leaves
// through the output hook and stays always allowed (kubelet probes), and
// the pods' replies to it are established; linkRules keep an isolated
// pod's neighbour discovery with its node (the routed gateway, a bridge
// address) working.
func egressRules(t *Tiers) []engine.Rule {
	rules := make([]engine.Rule, 0, 5+len(linkRules)+len(t.AdminEgress)+len(t.BaselineEgress))
	rules = append(rules, engine.Rule{Rule: "ct state established,related accept"})
	rules = append(rules, linkRules...)
	rules = append(rules, t.AdminEgress...)
	rules = append(rules,
		engine.Rule{Rule: "ip saddr vmap @" + MapEgress4},
		engine.Rule{Rule: "ip6 saddr vmap @" + MapEgress6},
	)
	return append(rules, t.BaselineEgress...)
}

// inputRules are egressRules with t.Input after the first rule (which
// accepts established traffic).
func inputRules(t *Tiers) []engine.Rule {
	rules := egressRules(t)
	if len(t.Input) == 0 {
		return rules
	}
	out := make([]engine.Rule, 0, len(rules)+len(t.Input))
	out = append(out, rules[0])
	out = append(out, t.Input...)
	return append(out, rules[1:]...)
}

// DispatchMaps are the verdict maps from a local pod's address to its
// NetworkPolicy chain of each direction, IPv4 then IPv6; package policy
// fills them.
func DispatchMaps() (ingress, egress [2]engine.Set) {
	ingress = [2]engine.Set{
		{Name: MapIngress4, Type: "ipv4_addr", Map: "verdict", Comment: "local pods isolated for ingress"},
		{Name: MapIngress6, Type: "ipv6_addr", Map: "verdict", Comment: "local pods isolated for ingress"},
	}
	egress = [2]engine.Set{
		{Name: MapEgress4, Type: "ipv4_addr", Map: "verdict", Comment: "local pods isolated for egress"},
		{Name: MapEgress6, Type: "ipv6_addr", Map: "verdict", Comment: "local pods isolated for egress"},
	}
	return ingress, egress
}
