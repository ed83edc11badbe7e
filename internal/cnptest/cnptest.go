// Package cnptest builds ClusterNetworkPolicies (policy.networking.k8s.io
// v1beta1) for tests: protocols, peers, subjects, and whole policies from
// rules written once for either direction. The compiler, explain and e2e
// tests share it so that a rule reads the same in all of them.
package cnptest

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	cnp "sigs.k8s.io/network-policy-api/apis/v1beta1"

	"github.com/nftguard/nftguard/internal/apitest"
)

// TCP is TCP to destination port n.
func TCP(n int32) cnp.ClusterNetworkPolicyProtocol {
	return cnp.ClusterNetworkPolicyProtocol{TCP: &cnp.ClusterNetworkPolicyProtocolTCP{DestinationPort: &cnp.Port{Number: n}}}
}

// UDPRange is UDP to destination ports a to b.
func UDPRange(a, b int32) cnp.ClusterNetworkPolicyProtocol {
	return cnp.ClusterNetworkPolicyProtocol{UDP: &cnp.ClusterNetworkPolicyProtocolUDP{DestinationPort: &cnp.Port{Range: &cnp.PortRange{Start: a, End: b}}}}
}

// SCTP is SCTP to destination port n.
func SCTP(n int32) cnp.ClusterNetworkPolicyProtocol {
	return cnp.ClusterNetworkPolicyProtocol{SCTP: &cnp.ClusterNetworkPolicyProtocolSCTP{DestinationPort: &cnp.Port{Number: n}}}
}

// NamedPort is the destination's container port of that name.
func NamedPort(name string) cnp.ClusterNetworkPolicyProtocol {
	return cnp.ClusterNetworkPolicyProtocol{DestinationNamedPort: name}
}

// NamespacesSubject is the pods of the namespaces s selects.
func NamespacesSubject(s *metav1.LabelSelector) cnp.ClusterNetworkPolicySubject {
	return cnp.ClusterNetworkPolicySubject{Namespaces: s}
}

// PodsSubject is the pods pod selects in the namespaces ns selects.
func PodsSubject(ns, pod *metav1.LabelSelector) cnp.ClusterNetworkPolicySubject {
	return cnp.ClusterNetworkPolicySubject{Pods: &cnp.NamespacedPod{NamespaceSelector: *ns, PodSelector: *pod}}
}

// PeerNamespaces is every pod of the namespaces s selects.
func PeerNamespaces(s *metav1.LabelSelector) cnp.ClusterNetworkPolicyEgressPeer {
	return cnp.ClusterNetworkPolicyEgressPeer{Namespaces: s}
}

// NamespacesSubjectOf is NamespacesSubject of the namespaces with these
// labels (key, value pairs; none: every namespace).
func NamespacesSubjectOf(kv ...string) cnp.ClusterNetworkPolicySubject {
	return NamespacesSubject(apitest.Selector(kv...))
}

// PeerNamespacesOf is PeerNamespaces of the namespaces with these labels
// (key, value pairs; none: every namespace).
func PeerNamespacesOf(kv ...string) cnp.ClusterNetworkPolicyEgressPeer {
	return PeerNamespaces(apitest.Selector(kv...))
}

// PeerPods is the pods pod selects in the namespaces ns selects.
func PeerPods(ns, pod *metav1.LabelSelector) cnp.ClusterNetworkPolicyEgressPeer {
	return cnp.ClusterNetworkPolicyEgressPeer{Pods: &cnp.NamespacedPod{NamespaceSelector: *ns, PodSelector: *pod}}
}

// Rule is a rule written for either direction; Policy splits it. Its
// peers are egress peers because those are a superset: an ingress rule
// keeps only their namespaces and pods.
type Rule struct {
	Name      string
	Action    cnp.ClusterNetworkPolicyRuleAction
	Peers     []cnp.ClusterNetworkPolicyEgressPeer
	Protocols []cnp.ClusterNetworkPolicyProtocol
}

// R is a rule on any protocol; On narrows it.
func R(name string, a cnp.ClusterNetworkPolicyRuleAction, peers ...cnp.ClusterNetworkPolicyEgressPeer) Rule {
	return Rule{Name: name, Action: a, Peers: peers}
}

// On is r on these protocols only.
func (r Rule) On(ps ...cnp.ClusterNetworkPolicyProtocol) Rule {
	r.Protocols = ps
	return r
}

// Policy is a ClusterNetworkPolicy of these ingress and egress rules.
func Policy(name string, tier cnp.Tier, prio int32, subj cnp.ClusterNetworkPolicySubject, ingress, egress []Rule) *cnp.ClusterNetworkPolicy {
	p := &cnp.ClusterNetworkPolicy{ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: cnp.ClusterNetworkPolicySpec{Tier: tier, Priority: prio, Subject: subj}}
	for _, r := range ingress {
		in := cnp.ClusterNetworkPolicyIngressRule{Name: r.Name, Action: r.Action, Protocols: r.Protocols}
		for _, pr := range r.Peers {
			in.From = append(in.From, cnp.ClusterNetworkPolicyIngressPeer{Namespaces: pr.Namespaces, Pods: pr.Pods})
		}
		p.Spec.Ingress = append(p.Spec.Ingress, in)
	}
	for _, r := range egress {
		p.Spec.Egress = append(p.Spec.Egress, cnp.ClusterNetworkPolicyEgressRule{Name: r.Name, Action: r.Action, To: r.Peers, Protocols: r.Protocols})
	}
	return p
}
