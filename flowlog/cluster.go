package flowlog

import (
	"fmt"
	"strconv"

	"golang.org/x/sys/unix"
	corev1 "k8s.io/api/core/v1"

	"github.com/nftguard/nftguard/explain"
)

// ClusterNetworkPolicy Deny rules log through the same shared chains as
// NetworkPolicy (see clusterpolicy/layout.go), under the same prefix, so a
// record alone does not say which tier dropped it. A Resolver that also
// knows the ClusterNetworkPolicies (a ClusterDenier) answers that by
// evaluating the record's flow with package explain, the independent
// evaluator of Admin → NetworkPolicy → Baseline: when explain says an
// Admin or Baseline rule denied the flow in the record's direction, the
// record names that rule; otherwise it names the NetworkPolicies that
// isolate the pod, as before.
//
// Why evaluate rather than carry the rule's identity in the kernel record:
// the prefix must stay free of tenant text (tablelayout/logdenied.go) and the
// log must stay in the two shared chains for its per-node bound, so the
// rule that jumped there is not in the record. explain over the table's
// own input gives the same answer the table gives; it cannot judge ICMP
// (no ports) or a later fragment, whose records keep the NetworkPolicy
// wording.

// ClusterRule names the ClusterNetworkPolicy rule that denied a packet.
type ClusterRule struct {
	Policy    string `json:"policy"`
	Tier      string `json:"tier"` // Admin or Baseline
	Priority  int32  `json:"priority"`
	Direction string `json:"direction"` // ingress or egress
	Index     int    `json:"index"`     // in spec.ingress or spec.egress
	Name      string `json:"name,omitempty"`
	// UnmatchedDomains are the Accept rules with domainNames peers the
	// flow met before this rule: none held a DNS answer of the pod's with
	// the destination (the pod did not resolve one of their names to it
	// through the cluster DNS, or the answer had expired).
	UnmatchedDomains []DomainRule `json:"unmatchedDomainRules,omitempty"`
}

// DomainRule names a rule with domainNames peers.
type DomainRule struct {
	Policy string `json:"policy"`
	Index  int    `json:"index"` // in spec.egress
	Name   string `json:"name,omitempty"`
}

// String is the decision in words. The rule name is free text of the
// policy's author: quoted, so no control character reaches a terminal.
func (c *ClusterRule) String() string {
	s := "denied by ClusterNetworkPolicy " + c.Policy + " (" + c.Tier + ", priority " + strconv.Itoa(int(c.Priority)) +
		") rule " + c.Direction + "[" + strconv.Itoa(c.Index) + "]"
	if c.Name != "" {
		s += " " + strconv.Quote(c.Name)
	}
	for i, d := range c.UnmatchedDomains {
		if i == 0 {
			s += "; no DNS answer with this address for domainNames rule "
		} else {
			s += ", "
		}
		s += d.Policy + " egress[" + strconv.Itoa(d.Index) + "]"
		if d.Name != "" {
			s += " " + strconv.Quote(d.Name)
		}
	}
	return s
}

// ClusterDenier is a Resolver that also knows the ClusterNetworkPolicies.
type ClusterDenier interface {
	// ClusterDeny names the ClusterNetworkPolicy rule that denied the
	// record's flow in its direction, or nil when none did.
	ClusterDeny(r *Record) *ClusterRule
}

// ClusterDeny evaluates a record's flow on c and names the Admin or
// Baseline rule that denied it in the record's direction, or nil: when no
// such rule did, or the flow is not one explain judges (not TCP, UDP or
// SCTP, or without a destination port).
func ClusterDeny(c *explain.Cluster, r *Record) *ClusterRule {
	if c == nil || r.DstPort == 0 {
		return nil
	}
	var proto corev1.Protocol
	switch r.Protocol {
	case unix.IPPROTO_TCP:
		proto = corev1.ProtocolTCP
	case unix.IPPROTO_UDP:
		proto = corev1.ProtocolUDP
	case unix.IPPROTO_SCTP:
		proto = corev1.ProtocolSCTP
	default:
		return nil
	}
	res, err := c.Explain(explain.Flow{From: r.Src.String(), To: r.Dst.String(), Protocol: proto, Port: int32(r.DstPort)})
	if err != nil {
		return nil
	}
	d := res.Ingress
	if r.Direction == Egress {
		d = res.Egress
	}
	if d.Allowed || d.ClusterRule == nil || (d.Tier != explain.TierAdmin && d.Tier != explain.TierBaseline) {
		return nil
	}
	cr := d.ClusterRule
	out := &ClusterRule{Policy: cr.Policy, Tier: cr.Tier, Priority: cr.Priority, Direction: cr.Direction, Index: cr.Index, Name: cr.Name}
	for _, m := range d.UnmatchedDomains {
		out.UnmatchedDomains = append(out.UnmatchedDomains, DomainRule{Policy: m.Policy, Index: m.Index, Name: m.Name})
	}
	return out
}

// clusterDecision names the ClusterNetworkPolicy rule of r, if res knows
// one.
func clusterDecision(r *Record, res Resolver) bool {
	cd, ok := res.(ClusterDenier)
	if !ok {
		return false
	}
	cr := cd.ClusterDeny(r)
	if cr == nil {
		return false
	}
	r.ClusterRule = cr
	r.Decision = fmt.Sprintf("pod %s: %s", r.Pod, cr)
	return true
}
