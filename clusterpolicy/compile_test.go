package clusterpolicy

import (
	"fmt"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/network-policy-api/apis/v1beta1"

	"github.com/nftguard/nftguard/engine"
	"github.com/nftguard/nftguard/fqdn"
	"github.com/nftguard/nftguard/internal/apitest"
	"github.com/nftguard/nftguard/internal/cnptest"
	"github.com/nftguard/nftguard/internal/podtest"
	"github.com/nftguard/nftguard/internal/tabletest"
	"github.com/nftguard/nftguard/policy"
)

// cluster is three namespaces of three pods each; x/a, x/b and y/a run on
// n1 (the node compiled for), the others elsewhere.
func cluster(pols ...*v1beta1.ClusterNetworkPolicy) Input {
	in := Input{NodeName: "n1", Policies: pols}
	for i, n := range []string{"x", "y", "z"} {
		in.Namespaces = append(in.Namespaces, apitest.Namespace(n, "ns", n))
		for j, p := range []string{"a", "b", "c"} {
			node := "n2"
			if (n == "x" && p != "c") || (n == "y" && p == "a") {
				node = "n1"
			}
			in.Pods = podtest.Append(in.Pods, apitest.Pod(n, p, fmt.Sprintf("10.0.%d.%d", i, j+1), apitest.OnNode(node),
				apitest.IPs(fmt.Sprintf("10.0.%d.%d", i, j+1), fmt.Sprintf("fd00::%d:%d", i, j+1)),
				apitest.WithLabels("pod", p), apitest.Port("web", int32(8000+10*i+j), corev1.ProtocolTCP), apitest.Port("dns", 53, corev1.ProtocolUDP)))
		}
	}
	in.Nodes = []*corev1.Node{
		mknode("n1", apitest.Labels("role", "worker"), "192.168.0.1", "2001:db8::1"),
		mknode("n2", apitest.Labels("role", "control"), "192.168.0.2", "203.0.113.2"),
	}
	return in
}

func TestNoPoliciesLeavesTheTableAlone(t *testing.T) {
	in := cluster()
	out := Compile(in)
	if len(out.Chains)+len(out.Sets)+len(out.Problems)+len(out.Warnings) != 0 ||
		len(out.Tiers.AdminEgress)+len(out.Tiers.AdminIngress)+len(out.Tiers.BaselineEgress)+len(out.Tiers.BaselineIngress) != 0 {
		t.Fatalf("no policies, output %+v", out)
	}
	plain := policy.Compile(policy.Input{NodeName: "n1", Namespaces: in.Namespaces, Pods: in.Pods})
	a, _ := engine.Render(engine.Table{Name: "nftguard"}, &engine.Desired{Chains: plain.Chains, Sets: plain.Sets})
	b, _ := engine.Render(engine.Table{Name: "nftguard"}, table(in, out))
	if a != b {
		t.Errorf("table without ClusterNetworkPolicies differs from the NetworkPolicy table:\n%s\n---\n%s", a, b)
	}
}

// TestTiersAroundNetworkPolicy checks where the tier rules sit in the fixed
// chains: the order that makes Admin, NetworkPolicy, Baseline, allow.
func TestTiersAroundNetworkPolicy(t *testing.T) {
	in := cluster(cnp("p", v1beta1.AdminTier, 1, func(s *v1beta1.ClusterNetworkPolicySpec) {
		s.Ingress = []v1beta1.ClusterNetworkPolicyIngressRule{ingress(deny, "", []v1beta1.ClusterNetworkPolicyIngressPeer{fromNS(sel("ns", "z"))})}
	}))
	out := compileChecked(t, in)
	d := table(in, out)
	rules := func(name string) []string { return tabletest.Rules(tabletest.Chain(t, d.Chains, name)) }
	egress := []string{
		"ct state established,related accept",
		"icmpv6 type nd-neighbor-solicit ip6 hoplimit 255 accept",
		"icmpv6 type nd-neighbor-advert ip6 hoplimit 255 accept",
		"icmpv6 type nd-router-solicit ip6 hoplimit 255 accept",
		"icmpv6 type mld-listener-report ip6 hoplimit 1 accept",
		"icmpv6 type mld-listener-done ip6 hoplimit 1 accept",
		"icmpv6 type mld2-listener-report ip6 hoplimit 1 accept",
		"ip6 daddr ff02::1:2 udp dport 547 accept",
		"ip saddr vmap @cnp_admin_egress4", "ip6 saddr vmap @cnp_admin_egress6",
		"ip saddr vmap @np_egress4", "ip6 saddr vmap @np_egress6",
		"ip saddr vmap @cnp_baseline_egress4", "ip6 saddr vmap @cnp_baseline_egress6",
	}
	eq(t, "np_forward", rules("np_forward"), append(egress, "goto np_ingress"))
	// A pod's egress to its own node meets the same tiers.
	eq(t, "np_input", rules("np_input"), egress)
	eq(t, "np_ingress", rules("np_ingress"), []string{
		"ip daddr vmap @cnp_admin_ingress4", "ip6 daddr vmap @cnp_admin_ingress6",
		"ip daddr vmap @np_ingress4", "ip6 daddr vmap @np_ingress6",
		"ip daddr vmap @cnp_baseline_ingress4", "ip6 daddr vmap @cnp_baseline_ingress6",
		"accept",
	})
	// The subject is every namespace: every local pod, and only those.
	eq(t, "admin ingress map", setElems(t, out, "cnp_admin_ingress4"), []string{
		"10.0.0.1 : jump cnp_ai_x_a", "10.0.0.2 : jump cnp_ai_x_b", "10.0.1.1 : jump cnp_ai_y_a"})
	eq(t, "admin ingress map 6", setElems(t, out, "cnp_admin_ingress6"), []string{
		"fd00::1 : jump cnp_ai_x_a", "fd00::1:1 : jump cnp_ai_y_a", "fd00::2 : jump cnp_ai_x_b"})
	for _, m := range []string{"cnp_admin_egress4", "cnp_baseline_ingress4", "cnp_baseline_egress6"} {
		if e := setElems(t, out, m); len(e) != 0 {
			t.Errorf("%s: %q, want empty (no rules of that slot)", m, e)
		}
	}
}

// TestActionsTiersDirections: every action in every tier and direction.
func TestActionsTiersDirections(t *testing.T) {
	for _, tier := range []v1beta1.Tier{v1beta1.AdminTier, v1beta1.BaselineTier} {
		for _, eg := range []bool{false, true} {
			for _, a := range []v1beta1.ClusterNetworkPolicyRuleAction{accept, deny, pass} {
				t.Run(fmt.Sprintf("%s/%v/%s", tier, eg, a), func(t *testing.T) {
					p := cnp("p", tier, 5, func(s *v1beta1.ClusterNetworkPolicySpec) {
						s.Subject = v1beta1.ClusterNetworkPolicySubject{Namespaces: sel("ns", "y")}
						if eg {
							s.Egress = append(s.Egress, egress(a, "r", []v1beta1.ClusterNetworkPolicyEgressPeer{cnptest.PeerNamespaces(sel("ns", "z"))}))
						} else {
							s.Ingress = append(s.Ingress, ingress(a, "r", []v1beta1.ClusterNetworkPolicyIngressPeer{fromNS(sel("ns", "z"))}))
						}
					})
					out := compileChecked(t, cluster(p))
					prefix, peer := "ai", "saddr"
					if eg {
						prefix, peer = "ae", "daddr"
					}
					if tier == v1beta1.BaselineTier {
						prefix = "b" + prefix[1:]
					}
					verdict := map[v1beta1.ClusterNetworkPolicyRuleAction]string{accept: "accept", deny: "drop", pass: "return"}[a]
					if eg && a == accept {
						verdict = "goto np_ingress"
					}
					eq(t, "chain", chainRules(t, out, "cnp_"+prefix+"_y_a"), []string{
						"ip " + peer + " 10.0.1.1 accept", "ip6 " + peer + " fd00::1:1 accept",
						"ip " + peer + " @SEL4 " + verdict,
						"ip6 " + peer + " @SEL6 " + verdict,
					})
					eq(t, "peers", peerElems(t, out, "cnp_"+prefix+"_y_a", 0), []string{"10.0.2.1", "10.0.2.2", "10.0.2.3"})
					if len(chainNames(out)) != 1 {
						t.Errorf("chains %v, want only y/a's (the only local pod of y)", chainNames(out))
					}
				})
			}
		}
	}
}

func TestPeerKinds(t *testing.T) {
	p := cnp("p", v1beta1.AdminTier, 0, func(s *v1beta1.ClusterNetworkPolicySpec) {
		s.Subject = v1beta1.ClusterNetworkPolicySubject{Pods: &v1beta1.NamespacedPod{NamespaceSelector: *sel("ns", "x"), PodSelector: *sel("pod", "a")}}
		s.Ingress = []v1beta1.ClusterNetworkPolicyIngressRule{
			ingress(accept, "pods", []v1beta1.ClusterNetworkPolicyIngressPeer{fromPods(&metav1.LabelSelector{}, sel("pod", "b"))}),
		}
		s.Egress = []v1beta1.ClusterNetworkPolicyEgressRule{
			egress(deny, "nets", []v1beta1.ClusterNetworkPolicyEgressPeer{
				toNets("10.1.0.0/16", "10.1.2.0/24", "0.0.0.0/0"), toNets("2001:db8::/32", "fd00:1::/64"), toNets("192.0.2.0/24")}),
			egress(pass, "nodes", []v1beta1.ClusterNetworkPolicyEgressPeer{toNodes(sel("role", "control")), toNodes(sel("role", "worker"))}),
			egress(accept, "pods-and-ns", []v1beta1.ClusterNetworkPolicyEgressPeer{cnptest.PeerPods(sel("ns", "y"), sel("pod", "c")), cnptest.PeerNamespaces(sel("ns", "z"))}),
		}
	})
	out := compileChecked(t, cluster(p))
	eq(t, "egress chain", chainRules(t, out, "cnp_ae_x_a"), []string{
		"ip daddr 10.0.0.1 accept", "ip6 daddr fd00::1 accept",
		"ip daddr @cnp_p_eg0_net4 drop", "ip6 daddr @cnp_p_eg0_net6 drop",
		"ip daddr @cnp_p_eg1_nodes4 return", "ip6 daddr @cnp_p_eg1_nodes6 return",
		"ip daddr @SEL4 goto np_ingress", "ip6 daddr @SEL6 goto np_ingress",
	})
	eq(t, "nested networks", setElems(t, out, "cnp_p_eg0_net4"), []string{"0.0.0.0/0"})
	eq(t, "v6 networks", setElems(t, out, "cnp_p_eg0_net6"), []string{"2001:db8::/32", "fd00:1::/64"})
	eq(t, "nodes", setElems(t, out, "cnp_p_eg1_nodes4"), []string{"192.168.0.1", "192.168.0.2", "203.0.113.2"})
	eq(t, "nodes6", setElems(t, out, "cnp_p_eg1_nodes6"), []string{"2001:db8::1"})
	eq(t, "pods and namespaces", peerElems(t, out, "cnp_ae_x_a", 0), []string{"10.0.1.3", "10.0.2.1", "10.0.2.2", "10.0.2.3"})
	eq(t, "pods of every namespace", peerElems(t, out, "cnp_ai_x_a", 0), []string{"10.0.0.2", "10.0.1.2", "10.0.2.2"})
	if names := chainNames(out); strings.Join(names, ",") != "cnp_ae_x_a,cnp_ai_x_a" {
		t.Errorf("chains %v: want x/a's only", names)
	}
}

func TestProtocols(t *testing.T) {
	p := cnp("p", v1beta1.BaselineTier, 0, func(s *v1beta1.ClusterNetworkPolicySpec) {
		s.Subject = v1beta1.ClusterNetworkPolicySubject{Namespaces: sel("ns", "x")}
		z := []v1beta1.ClusterNetworkPolicyIngressPeer{fromNS(sel("ns", "z"))}
		s.Ingress = []v1beta1.ClusterNetworkPolicyIngressRule{
			ingress(deny, "numbers", z, cnptest.TCP(80), cnptest.UDPRange(1000, 2000), cnptest.SCTP(9)),
			ingress(accept, "named", z, cnptest.NamedPort("web"), cnptest.NamedPort("dns"), cnptest.NamedPort("none")),
			ingress(pass, "all", z),
		}
		s.Egress = []v1beta1.ClusterNetworkPolicyEgressRule{
			egress(accept, "named", []v1beta1.ClusterNetworkPolicyEgressPeer{cnptest.PeerPods(sel("ns", "y"), sel("pod", "b"))}, cnptest.NamedPort("web"), cnptest.TCP(443)),
		}
	})
	out := compileChecked(t, cluster(p))
	eq(t, "x/a ingress", chainRules(t, out, "cnp_bi_x_a"), []string{
		"ip saddr 10.0.0.1 accept", "ip6 saddr fd00::1 accept",
		"ip saddr @SEL4 tcp dport 80 drop", "ip saddr @SEL4 udp dport 1000-2000 drop", "ip saddr @SEL4 sctp dport 9 drop",
		"ip6 saddr @SEL6 tcp dport 80 drop", "ip6 saddr @SEL6 udp dport 1000-2000 drop", "ip6 saddr @SEL6 sctp dport 9 drop",
		// Named ports resolve on the chain's pod: x/a's web is 8000.
		"ip saddr @SEL4 tcp dport 8000 accept", "ip saddr @SEL4 udp dport 53 accept",
		"ip6 saddr @SEL6 tcp dport 8000 accept", "ip6 saddr @SEL6 udp dport 53 accept",
		"ip saddr @SEL4 return", "ip6 saddr @SEL6 return",
	})
	if r := chainRules(t, out, "cnp_bi_x_b"); !strings.Contains(strings.Join(r, "\n"), "tcp dport 8001 accept") {
		t.Errorf("x/b's named port web (8001) not resolved on x/b: %q", r)
	}
	eq(t, "x/a egress", chainRules(t, out, "cnp_be_x_a"), []string{
		"ip daddr 10.0.0.1 accept", "ip6 daddr fd00::1 accept",
		"ip daddr @SEL4 tcp dport 443 goto np_ingress", "ip6 daddr @SEL6 tcp dport 443 goto np_ingress",
		"ip daddr . meta l4proto . th dport @NAMED4 goto np_ingress",
		"ip6 daddr . meta l4proto . th dport @NAMED6 goto np_ingress",
	})
	// y/b's web is 8011 (the lookups after the two peer-set ones).
	eq(t, "egress named", peerElems(t, out, "cnp_be_x_a", 2), []string{"10.0.1.2 . tcp . 8011"})
	eq(t, "egress named 6", peerElems(t, out, "cnp_be_x_a", 3), []string{"fd00::1:2 . tcp . 8011"})
}

// TestEvaluationOrder: priorities low first, equal priorities by name,
// rules in written order; Admin and Baseline apart.
func TestEvaluationOrder(t *testing.T) {
	rule := func(name string) func(*v1beta1.ClusterNetworkPolicySpec) {
		return func(s *v1beta1.ClusterNetworkPolicySpec) {
			s.Subject = v1beta1.ClusterNetworkPolicySubject{Pods: &v1beta1.NamespacedPod{NamespaceSelector: *sel("ns", "y"), PodSelector: metav1.LabelSelector{}}}
			z := []v1beta1.ClusterNetworkPolicyIngressPeer{fromNS(sel("ns", "z"))}
			s.Ingress = []v1beta1.ClusterNetworkPolicyIngressRule{ingress(deny, name+"-1", z, cnptest.TCP(1)), ingress(pass, name+"-2", z, cnptest.TCP(2))}
		}
	}
	in := cluster(
		cnp("d", v1beta1.AdminTier, 20, rule("d")),
		cnp("c", v1beta1.AdminTier, 10, rule("c")),
		cnp("b", v1beta1.AdminTier, 10, rule("b")),
		cnp("a", v1beta1.BaselineTier, 0, rule("a")),
		cnp("e", v1beta1.AdminTier, 1000, rule("e")),
	)
	out := compileChecked(t, in)
	var got []string
	for _, c := range out.Chains {
		if c.Name == "cnp_ai_y_a" {
			for _, r := range c.Rules[2:] {
				if strings.HasPrefix(r.Rule, "ip ") {
					got = append(got, r.Comment)
				}
			}
		}
	}
	eq(t, "admin order", got, []string{
		"cnp b ingress[0] Deny b-1", "cnp b ingress[1] Pass b-2",
		"cnp c ingress[0] Deny c-1", "cnp c ingress[1] Pass c-2",
		"cnp d ingress[0] Deny d-1", "cnp d ingress[1] Pass d-2",
		"cnp e ingress[0] Deny e-1", "cnp e ingress[1] Pass e-2",
	})
	eq(t, "baseline", chainRules(t, out, "cnp_bi_y_a"), []string{
		"ip saddr 10.0.1.1 accept", "ip6 saddr fd00::1:1 accept",
		"ip saddr @SEL4 tcp dport 1 drop", "ip6 saddr @SEL6 tcp dport 1 drop",
		"ip saddr @SEL4 tcp dport 2 return", "ip6 saddr @SEL6 tcp dport 2 return",
	})
	// The input order does not matter.
	rev := cluster()
	for i := len(in.Policies) - 1; i >= 0; i-- {
		rev.Policies = append(rev.Policies, in.Policies[i])
	}
	a, _ := engine.Render(engine.Table{Name: "nftguard"}, table(in, out))
	b, _ := engine.Render(engine.Table{Name: "nftguard"}, table(rev, Compile(rev)))
	if a != b {
		t.Error("the table depends on the input order of the policies")
	}
}

// TestFailClosedPeers: a peer with no field set (a newer API's peer kind)
// makes an Accept rule match nothing and a Deny or Pass rule drop
// everything, and so do domainNames peers outside an Accept rule, with a
// warning naming the rule; in an Accept rule they are enforced.
func TestFailClosedPeers(t *testing.T) {
	p := cnp("p", v1beta1.AdminTier, 0, func(s *v1beta1.ClusterNetworkPolicySpec) {
		s.Subject = v1beta1.ClusterNetworkPolicySubject{Namespaces: sel("ns", "y")}
		unknown := []v1beta1.ClusterNetworkPolicyEgressPeer{cnptest.PeerNamespaces(sel("ns", "z")), {}}
		domain := []v1beta1.ClusterNetworkPolicyEgressPeer{{DomainNames: []v1beta1.DomainName{"example.com"}}}
		s.Egress = []v1beta1.ClusterNetworkPolicyEgressRule{
			egress(accept, "a-unknown", unknown),
			egress(accept, "a-domain", domain),
			egress(deny, "d-unknown", unknown, cnptest.TCP(80)),
			egress(pass, "p-domain", domain),
			egress(deny, "after", []v1beta1.ClusterNetworkPolicyEgressPeer{cnptest.PeerNamespaces(sel("ns", "z"))}),
		}
		s.Ingress = []v1beta1.ClusterNetworkPolicyIngressRule{
			ingress(pass, "i-unknown", []v1beta1.ClusterNetworkPolicyIngressPeer{{}}),
		}
	})
	out := compileChecked(t, cluster(p))
	dns := domainSetBase([]fqdn.Pattern{{Domain: "example.com"}})
	eq(t, "egress", chainRules(t, out, "cnp_ae_y_a"), []string{
		"ip daddr 10.0.1.1 accept", "ip6 daddr fd00::1:1 accept",
		"ip saddr . ip daddr @" + dns + "_4 goto np_ingress", "ip6 saddr . ip6 daddr @" + dns + "_6 goto np_ingress", // a-domain
		"drop", "drop", // d-unknown: deny-all, whatever its ports; p-domain: deny-all
		"ip daddr @SEL4 drop", "ip6 daddr @SEL6 drop",
	})
	eq(t, "ingress", chainRules(t, out, "cnp_ai_y_a"), []string{"ip saddr 10.0.1.1 accept", "ip6 saddr fd00::1:1 accept", "drop"})
	var fields []string
	for _, w := range out.Warnings {
		fields = append(fields, w.Field)
	}
	eq(t, "warnings", sorted(fields), sorted([]string{
		"spec.egress[0].to[1]", "spec.egress[2].to[1]", "spec.egress[3].to[0].domainNames", "spec.ingress[0].from[0]"}))
	if len(out.Problems) != 0 {
		t.Errorf("problems %v, want none (valid objects)", out.Problems)
	}
}

// TestInvalidObjects: what the CRD schema and CEL rules refuse is a
// problem naming the field. A policy whose placement is invalid is left
// out; an invalid rule fails closed where it stands.
func TestInvalidObjects(t *testing.T) {
	z := []v1beta1.ClusterNetworkPolicyEgressPeer{cnptest.PeerNamespaces(sel("ns", "z"))}
	cases := []struct {
		name    string
		f       func(*v1beta1.ClusterNetworkPolicySpec)
		field   string
		leftOut bool
		rules   []string // y/a's admin egress chain after the self rules, when not left out
	}{
		{"tier", func(s *v1beta1.ClusterNetworkPolicySpec) { s.Tier = "Developer" }, "spec.tier", true, nil},
		{"priority", func(s *v1beta1.ClusterNetworkPolicySpec) { s.Priority = 1001 }, "spec.priority", true, nil},
		{"negative-priority", func(s *v1beta1.ClusterNetworkPolicySpec) { s.Priority = -1 }, "spec.priority", true, nil},
		{"no-subject", func(s *v1beta1.ClusterNetworkPolicySpec) { s.Subject = v1beta1.ClusterNetworkPolicySubject{} }, "spec.subject", true, nil},
		{"two-subjects", func(s *v1beta1.ClusterNetworkPolicySpec) {
			s.Subject.Pods = &v1beta1.NamespacedPod{}
		}, "spec.subject", true, nil},
		{"bad-subject-selector", func(s *v1beta1.ClusterNetworkPolicySpec) {
			s.Subject.Namespaces = &metav1.LabelSelector{MatchLabels: map[string]string{"a b": "c"}}
		}, "spec.subject.namespaces", true, nil},
		{"too-many-rules", func(s *v1beta1.ClusterNetworkPolicySpec) {
			for len(s.Egress) <= maxRules {
				s.Egress = append(s.Egress, egress(deny, "", z))
			}
		}, "spec.egress", true, nil},
		{"action", func(s *v1beta1.ClusterNetworkPolicySpec) { s.Egress[0].Action = "Allow" }, "spec.egress[0].action", false, []string{"drop"}},
		{"bad-cidr-deny", func(s *v1beta1.ClusterNetworkPolicySpec) {
			s.Egress[0].To = append(s.Egress[0].To, toNets("10.0.0.1/8"))
		}, "spec.egress[0].to[1].networks[0]", false, []string{"drop"}},
		// An IPv4 network written as IPv4-mapped IPv6 would compile to an
		// IPv6 set: a Deny that never denies IPv4. The API refuses it; a
		// Deny fails closed, an Accept matches nothing.
		{"ipv4-mapped-deny", func(s *v1beta1.ClusterNetworkPolicySpec) {
			s.Egress[0].To = []v1beta1.ClusterNetworkPolicyEgressPeer{toNets("::ffff:10.77.1.0/120")}
		}, "spec.egress[0].to[0].networks[0]", false, []string{"drop"}},
		{"ipv4-mapped-accept", func(s *v1beta1.ClusterNetworkPolicySpec) {
			s.Egress[0].Action = accept
			s.Egress[0].To = []v1beta1.ClusterNetworkPolicyEgressPeer{toNets("10.0.0.0/8", "::ffff:10.77.1.0/120")}
		}, "spec.egress[0].to[0].networks[1]", false, []string{}},
		{"bad-cidr-accept", func(s *v1beta1.ClusterNetworkPolicySpec) {
			s.Egress[0].Action = accept
			s.Egress[0].To = append(s.Egress[0].To, toNets("garbage"))
		}, "spec.egress[0].to[1].networks[0]", false, []string{}},
		{"two-peer-fields", func(s *v1beta1.ClusterNetworkPolicySpec) {
			s.Egress[0].To[0].Networks = []v1beta1.CIDR{"10.0.0.0/8"}
		}, "spec.egress[0].to[0]", false, []string{"drop"}},
		{"no-peers", func(s *v1beta1.ClusterNetworkPolicySpec) { s.Egress[0].To = nil }, "spec.egress[0].to", false, []string{"drop"}},
		{"port-range", func(s *v1beta1.ClusterNetworkPolicySpec) {
			s.Egress[0].Protocols = []v1beta1.ClusterNetworkPolicyProtocol{cnptest.UDPRange(2000, 1000)}
		}, "spec.egress[0].protocols[0].udp.destinationPort.range", false, []string{"drop"}},
		{"port-number", func(s *v1beta1.ClusterNetworkPolicySpec) {
			s.Egress[0].Protocols = []v1beta1.ClusterNetworkPolicyProtocol{cnptest.TCP(70000)}
		}, "spec.egress[0].protocols[0].tcp.destinationPort.number", false, []string{"drop"}},
		{"no-port", func(s *v1beta1.ClusterNetworkPolicySpec) {
			s.Egress[0].Protocols = []v1beta1.ClusterNetworkPolicyProtocol{{SCTP: &v1beta1.ClusterNetworkPolicyProtocolSCTP{}}}
		}, "spec.egress[0].protocols[0].sctp.destinationPort", false, []string{"drop"}},
		{"two-protocols", func(s *v1beta1.ClusterNetworkPolicySpec) {
			pr := cnptest.TCP(80)
			pr.DestinationNamedPort = "web"
			s.Egress[0].Protocols = []v1beta1.ClusterNetworkPolicyProtocol{pr}
		}, "spec.egress[0].protocols[0]", false, []string{"drop"}},
		{"named-port-with-networks", func(s *v1beta1.ClusterNetworkPolicySpec) {
			s.Egress[0].To = []v1beta1.ClusterNetworkPolicyEgressPeer{toNets("10.0.0.0/8")}
			s.Egress[0].Protocols = []v1beta1.ClusterNetworkPolicyProtocol{cnptest.NamedPort("web")}
		}, "spec.egress[0].protocols[0].destinationNamedPort", false, []string{"drop"}},
		{"rule-name", func(s *v1beta1.ClusterNetworkPolicySpec) { s.Egress[0].Name = strings.Repeat("n", 101) }, "spec.egress[0].name", false, []string{"drop"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p := cnp("p", v1beta1.AdminTier, 0, func(s *v1beta1.ClusterNetworkPolicySpec) {
				s.Subject = v1beta1.ClusterNetworkPolicySubject{Namespaces: sel("ns", "y")}
				s.Egress = []v1beta1.ClusterNetworkPolicyEgressRule{egress(deny, "r", append([]v1beta1.ClusterNetworkPolicyEgressPeer(nil), z...))}
				tc.f(s)
			})
			other := cnp("other", v1beta1.BaselineTier, 0, func(s *v1beta1.ClusterNetworkPolicySpec) {
				s.Egress = []v1beta1.ClusterNetworkPolicyEgressRule{egress(deny, "r", z)}
			})
			out := compileChecked(t, cluster(p, other))
			found := false
			for _, pr := range out.Problems {
				if pr.Field == tc.field && pr.Name == "p" && pr.Kind == "ClusterNetworkPolicy" && pr.APIVersion == APIVersion {
					found = true
				}
			}
			if !found {
				t.Errorf("problems %v: want one for field %s", out.Problems, tc.field)
			}
			// The valid policy is enforced either way.
			if r := chainRules(t, out, "cnp_be_y_a"); len(r) != 4 {
				t.Errorf("the other policy's chain: %q", r)
			}
			if tc.leftOut {
				for _, c := range out.Chains {
					if strings.HasPrefix(c.Name, "cnp_a") {
						t.Errorf("left-out policy has chain %s", c.Name)
					}
				}
				return
			}
			eq(t, "fail closed", chainRules(t, out, "cnp_ae_y_a")[2:], tc.rules)
		})
	}
}

// TestDuplicateNames: two objects of one name (manifests only): the first
// in input order counts, the other is a problem.
func TestDuplicateNames(t *testing.T) {
	mk := func(prio int32) *v1beta1.ClusterNetworkPolicy {
		return cnp("p", v1beta1.AdminTier, prio, func(s *v1beta1.ClusterNetworkPolicySpec) {
			s.Ingress = []v1beta1.ClusterNetworkPolicyIngressRule{ingress(deny, "", []v1beta1.ClusterNetworkPolicyIngressPeer{fromNS(sel("ns", "z"))})}
		})
	}
	out := compileChecked(t, cluster(mk(5), mk(1)))
	if len(out.Problems) != 1 || !strings.Contains(out.Problems[0].Reason, "same name") {
		t.Errorf("problems %v", out.Problems)
	}
}

// TestLocalPodsOnly: pods elsewhere, terminated pods and hostNetwork pods
// get no chain and no map entry.
func TestLocalPodsOnly(t *testing.T) {
	in := cluster(cnp("p", v1beta1.AdminTier, 0, func(s *v1beta1.ClusterNetworkPolicySpec) {
		s.Ingress = []v1beta1.ClusterNetworkPolicyIngressRule{ingress(deny, "", []v1beta1.ClusterNetworkPolicyIngressPeer{fromNS(sel("ns", "z"))})}
	}))
	done := apitest.Pod("x", "done", "10.0.9.1")
	done.Status.Phase = corev1.PodSucceeded
	host := apitest.Pod("x", "host", "10.0.9.2")
	host.Spec.HostNetwork = true
	in.Pods = podtest.Append(in.Pods, done, host)
	out := compileChecked(t, in)
	eq(t, "chains", chainNames(out), []string{"cnp_ai_x_a", "cnp_ai_x_b", "cnp_ai_y_a"})
}

// TestHostileNames: names, labels and rule names built to break the
// renderer compile to a table the kernel takes (compileChecked runs
// nftcheck.Check).
func TestHostileNames(t *testing.T) {
	evil := []string{"a\"; flush ruleset; \"", strings.Repeat("x", 300), "UPPER_case", "a b\nc", "@set", "{}", "é"}
	var pols []*v1beta1.ClusterNetworkPolicy
	for i, e := range evil {
		pols = append(pols, cnp(e, v1beta1.AdminTier, int32(i), func(s *v1beta1.ClusterNetworkPolicySpec) {
			s.Ingress = []v1beta1.ClusterNetworkPolicyIngressRule{ingress(deny, e, []v1beta1.ClusterNetworkPolicyIngressPeer{fromNS(sel("ns", "z"))}, cnptest.NamedPort(e))}
			s.Egress = []v1beta1.ClusterNetworkPolicyEgressRule{egress(pass, e, []v1beta1.ClusterNetworkPolicyEgressPeer{cnptest.PeerPods(&metav1.LabelSelector{}, &metav1.LabelSelector{})}, cnptest.NamedPort("web"))}
		}))
	}
	in := cluster(pols...)
	for _, e := range evil {
		in.Pods = podtest.Append(in.Pods, apitest.Pod(e, e, "10.9.9.9", apitest.Port(e, 1, corev1.ProtocolTCP)))
	}
	out := compileChecked(t, in)
	if len(out.Chains) == 0 {
		t.Fatal("nothing compiled")
	}
}
