package flowlog

import (
	"net/netip"
	"reflect"
	"testing"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	cnp "sigs.k8s.io/network-policy-api/apis/v1beta1"

	"github.com/nftguard/nftguard/explain"
	"github.com/nftguard/nftguard/podset"
)

// Resolve names the ClusterNetworkPolicy rule that denied a record when
// the resolver knows the policies, in the record's direction only, and
// keeps the NetworkPolicy wording for everything else: flows no
// ClusterNetworkPolicy rule denied, ICMP (explain judges ports), and a
// resolver without the policies.
func TestResolveClusterDeny(t *testing.T) {
	pod := func(ns, name, ip string) *corev1.Pod {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{"pod": name}}}
		p.Spec.NodeName = "n1"
		p.Status.Phase = corev1.PodRunning
		p.Status.PodIPs = []corev1.PodIP{{IP: ip}}
		return p
	}
	sel := func(k, v string) *metav1.LabelSelector {
		return &metav1.LabelSelector{MatchLabels: map[string]string{k: v}}
	}
	pods := []*corev1.Pod{pod("x", "a", "10.0.0.1"), pod("x", "b", "10.0.0.2"), pod("y", "a", "10.0.1.1")}
	nss := []*corev1.Namespace{
		{ObjectMeta: metav1.ObjectMeta{Name: "x", Labels: map[string]string{"ns": "x"}}},
		{ObjectMeta: metav1.ObjectMeta{Name: "y", Labels: map[string]string{"ns": "y"}}},
	}
	nps := []*networkingv1.NetworkPolicy{{ObjectMeta: metav1.ObjectMeta{Namespace: "x", Name: "only-a"},
		Spec: networkingv1.NetworkPolicySpec{PodSelector: *sel("pod", "b"),
			Ingress: []networkingv1.NetworkPolicyIngressRule{{From: []networkingv1.NetworkPolicyPeer{{PodSelector: sel("pod", "a")}}}}}}}
	tcp := func(n int32) []cnp.ClusterNetworkPolicyProtocol {
		return []cnp.ClusterNetworkPolicyProtocol{{TCP: &cnp.ClusterNetworkPolicyProtocolTCP{DestinationPort: &cnp.Port{Number: n}}}}
	}
	cnps := []*cnp.ClusterNetworkPolicy{
		{ObjectMeta: metav1.ObjectMeta{Name: "guard"}, Spec: cnp.ClusterNetworkPolicySpec{Tier: cnp.AdminTier, Priority: 3,
			Subject: cnp.ClusterNetworkPolicySubject{Namespaces: sel("ns", "x")},
			Ingress: []cnp.ClusterNetworkPolicyIngressRule{
				{Name: "ok", Action: cnp.ClusterNetworkPolicyRuleActionPass, From: []cnp.ClusterNetworkPolicyIngressPeer{{Namespaces: sel("ns", "y")}}, Protocols: tcp(80)},
				{Name: "no \"ssh\"\n", Action: cnp.ClusterNetworkPolicyRuleActionDeny, From: []cnp.ClusterNetworkPolicyIngressPeer{{Namespaces: &metav1.LabelSelector{}}}, Protocols: tcp(22)},
			}}},
		{ObjectMeta: metav1.ObjectMeta{Name: "base"}, Spec: cnp.ClusterNetworkPolicySpec{Tier: cnp.BaselineTier, Priority: 0,
			Subject: cnp.ClusterNetworkPolicySubject{Namespaces: sel("ns", "y")},
			Egress: []cnp.ClusterNetworkPolicyEgressRule{{Action: cnp.ClusterNetworkPolicyRuleActionDeny,
				To: []cnp.ClusterNetworkPolicyEgressPeer{{Namespaces: sel("ns", "x")}}, Protocols: tcp(443)}}}},
		{ObjectMeta: metav1.ObjectMeta{Name: "names"}, Spec: cnp.ClusterNetworkPolicySpec{Tier: cnp.AdminTier, Priority: 1,
			Subject: cnp.ClusterNetworkPolicySubject{Namespaces: sel("ns", "y")},
			Egress: []cnp.ClusterNetworkPolicyEgressRule{
				{Name: "api", Action: cnp.ClusterNetworkPolicyRuleActionAccept, To: []cnp.ClusterNetworkPolicyEgressPeer{{DomainNames: []cnp.DomainName{"api.example.com"}}}},
				{Name: "rest", Action: cnp.ClusterNetworkPolicyRuleActionDeny, To: []cnp.ClusterNetworkPolicyEgressPeer{{Networks: []cnp.CIDR{"198.51.100.0/24"}}}},
			}}},
	}
	cl, probs := explain.New(explain.Input{NodeName: "n1", Namespaces: nss, Pods: podset.FromAPIList(pods), NetworkPolicies: nps, ClusterNetworkPolicies: cnps})
	if len(probs) > 0 {
		t.Fatal(probs)
	}
	withCNP := NewObjects(pods, nps).WithCluster(cl)
	rec := func(d Direction, src, dst string, proto uint8, port uint16) Record {
		return Record{Direction: d, Src: netip.MustParseAddr(src), Dst: netip.MustParseAddr(dst), Protocol: proto, SrcPort: 40000, DstPort: port}
	}
	for _, tt := range []struct {
		name     string
		res      Resolver
		rec      Record
		rule     *ClusterRule
		decision string
	}{
		{"Admin Deny, name quoted", withCNP, rec(Ingress, "10.0.1.1", "10.0.0.2", 6, 22),
			&ClusterRule{Policy: "guard", Tier: "Admin", Priority: 3, Direction: "ingress", Index: 1, Name: "no \"ssh\"\n"},
			`pod x/b: denied by ClusterNetworkPolicy guard (Admin, priority 3) rule ingress[1] "no \"ssh\"\n"`},
		{"Baseline Deny of egress", withCNP, rec(Egress, "10.0.1.1", "10.0.0.1", 6, 443),
			// y/a met the Admin tier's domainNames rule on the way.
			&ClusterRule{Policy: "base", Tier: "Baseline", Priority: 0, Direction: "egress", Index: 0,
				UnmatchedDomains: []DomainRule{{Policy: "names", Index: 0, Name: "api"}}},
			`pod y/a: denied by ClusterNetworkPolicy base (Baseline, priority 0) rule egress[0]; no DNS answer with this address for domainNames rule names egress[0] "api"`},
		{"a domainNames rule without an answer, then a Deny", withCNP, rec(Egress, "10.0.1.1", "198.51.100.7", 6, 443),
			&ClusterRule{Policy: "names", Tier: "Admin", Priority: 1, Direction: "egress", Index: 1, Name: "rest",
				UnmatchedDomains: []DomainRule{{Policy: "names", Index: 0, Name: "api"}}},
			`pod y/a: denied by ClusterNetworkPolicy names (Admin, priority 1) rule egress[1] "rest"; no DNS answer with this address for domainNames rule names egress[0] "api"`},
		{"Pass, then the NetworkPolicy denies", withCNP, rec(Ingress, "10.0.1.1", "10.0.0.2", 6, 80), nil,
			"pod x/b isolated for ingress by policy only-a; no rule allowed"},
		{"the other direction's Deny is not this record's", withCNP, rec(Egress, "10.0.1.1", "10.0.0.2", 6, 22), nil,
			"pod y/a isolated for egress by policies ; no rule allowed"},
		{"ICMP is not judged", withCNP, Record{Direction: Ingress, Src: netip.MustParseAddr("10.0.1.1"), Dst: netip.MustParseAddr("10.0.0.2"), Protocol: 1, HasICMP: true}, nil,
			"pod x/b isolated for ingress by policy only-a; no rule allowed"},
		{"without the policies", NewObjects(pods, nps), rec(Ingress, "10.0.1.1", "10.0.0.2", 6, 22), nil,
			"pod x/b isolated for ingress by policy only-a; no rule allowed"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			r := tt.rec
			Resolve(&r, tt.res)
			if !reflect.DeepEqual(r.ClusterRule, tt.rule) {
				t.Errorf("rule %+v, want %+v", r.ClusterRule, tt.rule)
			}
			if r.Decision != tt.decision {
				t.Errorf("decision %q, want %q", r.Decision, tt.decision)
			}
			if tt.rule != nil && len(r.Policies) != 0 {
				t.Errorf("policies %v with a ClusterNetworkPolicy decision", r.Policies)
			}
		})
	}
}
