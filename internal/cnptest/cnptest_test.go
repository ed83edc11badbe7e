package cnptest

import (
	"reflect"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	cnp "sigs.k8s.io/network-policy-api/apis/v1beta1"
)

func TestBuilders(t *testing.T) {
	x := &metav1.LabelSelector{MatchLabels: map[string]string{"ns": "x"}}
	a := &metav1.LabelSelector{MatchLabels: map[string]string{"pod": "a"}}
	nets := cnp.ClusterNetworkPolicyEgressPeer{Networks: []cnp.CIDR{"10.0.0.0/8"}}
	for _, c := range []struct {
		name      string
		got, want any
	}{
		{"tcp", TCP(80), cnp.ClusterNetworkPolicyProtocol{TCP: &cnp.ClusterNetworkPolicyProtocolTCP{DestinationPort: &cnp.Port{Number: 80}}}},
		{"udp range", UDPRange(5000, 6000), cnp.ClusterNetworkPolicyProtocol{UDP: &cnp.ClusterNetworkPolicyProtocolUDP{DestinationPort: &cnp.Port{Range: &cnp.PortRange{Start: 5000, End: 6000}}}}},
		{"sctp", SCTP(9), cnp.ClusterNetworkPolicyProtocol{SCTP: &cnp.ClusterNetworkPolicyProtocolSCTP{DestinationPort: &cnp.Port{Number: 9}}}},
		{"named", NamedPort("web"), cnp.ClusterNetworkPolicyProtocol{DestinationNamedPort: "web"}},
		{"namespaces subject", NamespacesSubject(x), cnp.ClusterNetworkPolicySubject{Namespaces: x}},
		{"pods subject", PodsSubject(x, a), cnp.ClusterNetworkPolicySubject{Pods: &cnp.NamespacedPod{NamespaceSelector: *x, PodSelector: *a}}},
		{"peer namespaces", PeerNamespaces(x), cnp.ClusterNetworkPolicyEgressPeer{Namespaces: x}},
		{"namespaces subject of labels", NamespacesSubjectOf("ns", "x"), cnp.ClusterNetworkPolicySubject{Namespaces: x}},
		{"every namespace", NamespacesSubjectOf(), cnp.ClusterNetworkPolicySubject{Namespaces: &metav1.LabelSelector{MatchLabels: map[string]string{}}}},
		{"peer namespaces of labels", PeerNamespacesOf("ns", "x"), cnp.ClusterNetworkPolicyEgressPeer{Namespaces: x}},
		{"peer pods", PeerPods(x, a), cnp.ClusterNetworkPolicyEgressPeer{Pods: &cnp.NamespacedPod{NamespaceSelector: *x, PodSelector: *a}}},
		{"rule on any protocol", R("r", cnp.ClusterNetworkPolicyRuleActionDeny, PeerNamespaces(x)),
			Rule{Name: "r", Action: cnp.ClusterNetworkPolicyRuleActionDeny, Peers: []cnp.ClusterNetworkPolicyEgressPeer{{Namespaces: x}}}},
		{"rule on protocols", R("", cnp.ClusterNetworkPolicyRuleActionPass).On(TCP(1), NamedPort("dns")),
			Rule{Action: cnp.ClusterNetworkPolicyRuleActionPass, Protocols: []cnp.ClusterNetworkPolicyProtocol{TCP(1), NamedPort("dns")}}},
		// An ingress rule keeps the namespaces and pods of its peers and
		// drops what only egress has (networks); egress keeps all.
		{"policy splits rules by direction", Policy("p", cnp.AdminTier, 7, NamespacesSubject(x),
			[]Rule{R("in", cnp.ClusterNetworkPolicyRuleActionAccept, PeerNamespaces(x), PeerPods(x, a)).On(TCP(80))},
			[]Rule{R("out", cnp.ClusterNetworkPolicyRuleActionDeny, nets)}),
			&cnp.ClusterNetworkPolicy{ObjectMeta: metav1.ObjectMeta{Name: "p"}, Spec: cnp.ClusterNetworkPolicySpec{
				Tier: cnp.AdminTier, Priority: 7, Subject: cnp.ClusterNetworkPolicySubject{Namespaces: x},
				Ingress: []cnp.ClusterNetworkPolicyIngressRule{{Name: "in", Action: cnp.ClusterNetworkPolicyRuleActionAccept,
					From:      []cnp.ClusterNetworkPolicyIngressPeer{{Namespaces: x}, {Pods: &cnp.NamespacedPod{NamespaceSelector: *x, PodSelector: *a}}},
					Protocols: []cnp.ClusterNetworkPolicyProtocol{TCP(80)}}},
				Egress: []cnp.ClusterNetworkPolicyEgressRule{{Name: "out", Action: cnp.ClusterNetworkPolicyRuleActionDeny,
					To: []cnp.ClusterNetworkPolicyEgressPeer{nets}}},
			}}},
		{"policy without rules", Policy("e", cnp.BaselineTier, 0, PodsSubject(x, a), nil, nil),
			&cnp.ClusterNetworkPolicy{ObjectMeta: metav1.ObjectMeta{Name: "e"}, Spec: cnp.ClusterNetworkPolicySpec{
				Tier: cnp.BaselineTier, Subject: cnp.ClusterNetworkPolicySubject{Pods: &cnp.NamespacedPod{NamespaceSelector: *x, PodSelector: *a}}}}},
	} {
		if !reflect.DeepEqual(c.got, c.want) {
			t.Errorf("%s:\n got  %#v\n want %#v", c.name, c.got, c.want)
		}
	}
}
