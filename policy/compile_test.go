package policy

import (
	"fmt"
	"reflect"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/nftguard/nftguard/engine"
	"github.com/nftguard/nftguard/internal/apitest"
	"github.com/nftguard/nftguard/internal/nftsafe"
	"github.com/nftguard/nftguard/internal/podtest"
	"github.com/nftguard/nftguard/internal/tabletest"
	"github.com/nftguard/nftguard/npset"
	"github.com/nftguard/nftguard/tablelayout"
)

// --- builders -------------------------------------------------------------

func tcp(p int) networkingv1.NetworkPolicyPort {
	v := intstr.FromInt32(int32(p))
	return networkingv1.NetworkPolicyPort{Port: &v}
}

func protoPort(proto corev1.Protocol, p intstr.IntOrString) networkingv1.NetworkPolicyPort {
	return networkingv1.NetworkPolicyPort{Protocol: &proto, Port: &p}
}

func netpol(namespace, name string, podSel metav1.LabelSelector, f func(*networkingv1.NetworkPolicySpec)) *networkingv1.NetworkPolicy {
	np := &networkingv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name}}
	np.Spec.PodSelector = podSel
	if f != nil {
		f(&np.Spec)
	}
	return np
}

// --- helpers over the output ---------------------------------------------

// compileChecked compiles and checks that the output loads (see
// tabletest.Loads): a rule nft would not accept fails the test here,
// without a kernel.
func compileChecked(t *testing.T, in Input) Output {
	t.Helper()
	out := Compile(in)
	tabletest.Loads(t, &engine.Desired{Chains: out.Chains, Sets: out.Sets})
	return out
}

// The readers of the output are tabletest's, shared with clusterpolicy.
// chain is a pod chain with its jumps to policies' chains replaced by
// their rules: what the pod's packets meet, in order.
func chain(t *testing.T, out Output, name string) engine.Chain {
	t.Helper()
	c := tabletest.Chain(t, out.Chains, name)
	var rules []engine.Rule
	for _, r := range c.Rules {
		if target, ok := strings.CutPrefix(r.Rule, "jump "); ok && (strings.HasPrefix(target, "np_pi_") || strings.HasPrefix(target, "np_pe_")) {
			rules = append(rules, tabletest.Chain(t, out.Chains, target).Rules...)
			continue
		}
		rules = append(rules, r)
	}
	c.Rules = rules
	return c
}

func hasChain(out Output, name string) bool {
	for _, c := range out.Chains {
		if c.Name == name {
			return true
		}
	}
	return false
}

func chainNames(out Output) []string { return tabletest.ChainNames(out.Chains) }

func set(t *testing.T, out Output, name string) engine.Set {
	t.Helper()
	return tabletest.Set(t, out.Sets, name)
}

func keys(s engine.Set) []string { return tabletest.Elements(s) }

// lookedUp is the set the first rule of chain ch that starts with match
// (say "ip saddr @") looks up: peer sets are named for the selection, not
// for the rule.
func lookedUp(t *testing.T, out Output, ch, match string) engine.Set {
	t.Helper()
	for _, r := range ruleTexts(chain(t, out, ch)) {
		if rest, ok := strings.CutPrefix(r, match); ok {
			name, _, _ := strings.Cut(rest, " ")
			return set(t, out, name)
		}
	}
	t.Fatalf("no rule of %s starts with %q", ch, match)
	return engine.Set{}
}

func ruleTexts(c engine.Chain) []string { return tabletest.Rules(c) }

func eq(t *testing.T, what string, got, want []string) {
	t.Helper()
	tabletest.EqualLines(t, what, got, want)
}

// --- tests ----------------------------------------------------------------

func TestNoPoliciesMeansNothingIsolated(t *testing.T) {
	out := compileChecked(t, Input{NodeName: "n1", Pods: podtest.Set([]*corev1.Pod{apitest.Pod("x", "a", "10.0.0.1")})})
	for _, m := range []string{tablelayout.MapIngress4, tablelayout.MapIngress6, tablelayout.MapEgress4, tablelayout.MapEgress6} {
		if s := set(t, out, m); len(s.Elements) != 0 {
			t.Errorf("%s has elements %v without any policy", m, keys(s))
		}
	}
	eq(t, "forward", ruleTexts(chain(t, out, tablelayout.ChainForward)), []string{
		"ct state established,related accept",
		"icmpv6 type nd-neighbor-solicit ip6 hoplimit 255 accept",
		"icmpv6 type nd-neighbor-advert ip6 hoplimit 255 accept",
		"icmpv6 type nd-router-solicit ip6 hoplimit 255 accept",
		"icmpv6 type mld-listener-report ip6 hoplimit 1 accept",
		"icmpv6 type mld-listener-done ip6 hoplimit 1 accept",
		"icmpv6 type mld2-listener-report ip6 hoplimit 1 accept",
		"ip6 daddr ff02::1:2 udp dport 547 accept",
		"ip saddr vmap @np_egress4",
		"ip6 saddr vmap @np_egress6",
		"goto np_ingress",
	})
}

func TestDefaultDenyIngressIsolatesOnlyLocalSelectedPods(t *testing.T) {
	in := Input{NodeName: "n1",
		Pods: podtest.Set([]*corev1.Pod{
			apitest.Pod("x", "a", "10.0.0.1"),
			apitest.Pod("x", "b", "10.0.0.2", apitest.OnNode("n2")),
			apitest.Pod("y", "a", "10.0.1.1"),
		}),
		Policies: npset.New([]*networkingv1.NetworkPolicy{netpol("x", "deny", metav1.LabelSelector{}, nil)}),
	}
	out := compileChecked(t, in)
	eq(t, "ingress map", keys(set(t, out, tablelayout.MapIngress4)), []string{"10.0.0.1 : jump np_ing_x_a"})
	eq(t, "egress map", keys(set(t, out, tablelayout.MapEgress4)), nil)
	eq(t, "chain", ruleTexts(chain(t, out, "np_ing_x_a")), []string{
		"ct state invalid drop",
		"ip saddr 10.0.0.1 accept",
		"drop",
	})
	if hasChain(out, "np_ing_x_b") || hasChain(out, "np_ing_y_a") {
		t.Errorf("remote pod or pod of another namespace isolated: %v", chainNames(out))
	}
}

func TestPolicyTypesDefaulting(t *testing.T) {
	egressRule := func(s *networkingv1.NetworkPolicySpec) {
		s.Egress = []networkingv1.NetworkPolicyEgressRule{{}}
	}
	cases := []struct {
		name     string
		spec     func(*networkingv1.NetworkPolicySpec)
		ing, egr bool
	}{
		{"no types no rules: ingress only", nil, true, false},
		{"egress rules imply egress", egressRule, true, true},
		{"explicit egress only", func(s *networkingv1.NetworkPolicySpec) {
			s.PolicyTypes = []networkingv1.PolicyType{networkingv1.PolicyTypeEgress}
		}, false, true},
		{"explicit ingress with egress rules ignores them", func(s *networkingv1.NetworkPolicySpec) {
			egressRule(s)
			s.PolicyTypes = []networkingv1.PolicyType{networkingv1.PolicyTypeIngress}
		}, true, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			out := compileChecked(t, Input{NodeName: "n1", Pods: podtest.Set([]*corev1.Pod{apitest.Pod("x", "a", "10.0.0.1")}),
				Policies: npset.New([]*networkingv1.NetworkPolicy{netpol("x", "p", metav1.LabelSelector{}, tc.spec)})})
			if got := hasChain(out, "np_ing_x_a"); got != tc.ing {
				t.Errorf("ingress isolated = %v, want %v", got, tc.ing)
			}
			if got := hasChain(out, "np_egr_x_a"); got != tc.egr {
				t.Errorf("egress isolated = %v, want %v", got, tc.egr)
			}
		})
	}
}

func TestPeersAndSelectors(t *testing.T) {
	namespaces := []*corev1.Namespace{apitest.Namespace("x", "ns", "x"), apitest.Namespace("y", "ns", "y"), apitest.Namespace("z", "ns", "z")}
	pods := []*corev1.Pod{
		apitest.Pod("x", "a", "10.0.0.1"),
		apitest.Pod("x", "b", "10.0.0.2", apitest.OnNode("n2")),
		apitest.Pod("y", "a", "10.0.1.1", apitest.OnNode("n2")),
		apitest.Pod("y", "b", "10.0.1.2", apitest.OnNode("n2"), apitest.IPs("10.0.1.2", "fd00::102")),
		apitest.Pod("z", "b", "10.0.2.2", apitest.OnNode("n3")),
	}
	from := func(peers ...networkingv1.NetworkPolicyPeer) func(*networkingv1.NetworkPolicySpec) {
		return func(s *networkingv1.NetworkPolicySpec) {
			s.Ingress = []networkingv1.NetworkPolicyIngressRule{{From: peers}}
		}
	}
	cases := []struct {
		name   string
		spec   func(*networkingv1.NetworkPolicySpec)
		want4  []string // members of the peer set, nil = no set
		want6  []string
		noRule bool
	}{
		{name: "podSelector: same namespace only", spec: from(networkingv1.NetworkPolicyPeer{PodSelector: apitest.Selector("pod", "b")}),
			want4: []string{"10.0.0.2"}},
		{name: "namespaceSelector: every pod of matching namespaces", spec: from(networkingv1.NetworkPolicyPeer{NamespaceSelector: apitest.Selector("ns", "y")}),
			want4: []string{"10.0.1.1", "10.0.1.2"}, want6: []string{"fd00::102"}},
		{name: "both selectors in one peer AND together", spec: from(networkingv1.NetworkPolicyPeer{NamespaceSelector: &metav1.LabelSelector{}, PodSelector: apitest.Selector("pod", "b")}),
			want4: []string{"10.0.0.2", "10.0.1.2", "10.0.2.2"}, want6: []string{"fd00::102"}},
		{name: "two peers OR together", spec: from(
			networkingv1.NetworkPolicyPeer{NamespaceSelector: apitest.Selector("ns", "z")},
			networkingv1.NetworkPolicyPeer{PodSelector: apitest.Selector("pod", "a")}),
			want4: []string{"10.0.0.1", "10.0.2.2"}},
		{name: "matchExpressions NotIn", spec: from(networkingv1.NetworkPolicyPeer{NamespaceSelector: &metav1.LabelSelector{
			MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "ns", Operator: metav1.LabelSelectorOpNotIn, Values: []string{"x", "y"}}}}}),
			want4: []string{"10.0.2.2"}},
		{name: "kubernetes.io/metadata.name is implied", spec: from(networkingv1.NetworkPolicyPeer{NamespaceSelector: apitest.Selector(corev1.LabelMetadataName, "z")}),
			want4: []string{"10.0.2.2"}},
		{name: "selector matching nothing allows nothing", spec: from(networkingv1.NetworkPolicyPeer{PodSelector: apitest.Selector("pod", "nobody")}),
			noRule: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			out := compileChecked(t, Input{NodeName: "n1", Namespaces: namespaces, Pods: podtest.Set(pods),
				Policies: npset.New([]*networkingv1.NetworkPolicy{netpol("x", "p", *apitest.Selector("pod", "a"), tc.spec)})})
			if len(out.Problems) > 0 {
				t.Fatal(out.Problems)
			}
			rules := ruleTexts(chain(t, out, "np_ing_x_a"))
			if tc.noRule {
				eq(t, "rules", rules, []string{"ct state invalid drop", "ip saddr 10.0.0.1 accept", "drop"})
				return
			}
			if tc.want4 != nil {
				s4 := lookedUp(t, out, "np_ing_x_a", "ip saddr @")
				eq(t, "v4 peers", keys(s4), tc.want4)
				if !contains(rules, "ip saddr @"+s4.Name+" accept") {
					t.Errorf("no v4 peer rule in %q", rules)
				}
			}
			if tc.want6 != nil {
				eq(t, "v6 peers", keys(lookedUp(t, out, "np_ing_x_a", "ip6 saddr @")), tc.want6)
			}
		})
	}
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func TestEmptyFromVersusMissingRules(t *testing.T) {
	pods := []*corev1.Pod{apitest.Pod("x", "a", "10.0.0.1")}
	allowAll := compileChecked(t, Input{NodeName: "n1", Pods: podtest.Set(pods), Policies: npset.New([]*networkingv1.NetworkPolicy{
		netpol("x", "p", metav1.LabelSelector{}, func(s *networkingv1.NetworkPolicySpec) {
			s.Ingress = []networkingv1.NetworkPolicyIngressRule{{}} // one rule, no from: everything
		})})})
	eq(t, "empty from", ruleTexts(chain(t, allowAll, "np_ing_x_a")), []string{
		"ct state invalid drop", "ip saddr 10.0.0.1 accept", "accept", "drop"})

	denyAll := compileChecked(t, Input{NodeName: "n1", Pods: podtest.Set(pods), Policies: npset.New([]*networkingv1.NetworkPolicy{
		netpol("x", "p", metav1.LabelSelector{}, func(s *networkingv1.NetworkPolicySpec) {
			s.Ingress = []networkingv1.NetworkPolicyIngressRule{} // no rules: nothing
		})})})
	eq(t, "missing rules", ruleTexts(chain(t, denyAll, "np_ing_x_a")), []string{
		"ct state invalid drop", "ip saddr 10.0.0.1 accept", "drop"})
}

func TestPorts(t *testing.T) {
	end := int32(90)
	sctp := corev1.ProtocolSCTP
	udp := corev1.ProtocolUDP
	out := compileChecked(t, Input{NodeName: "n1",
		Pods: podtest.Set([]*corev1.Pod{apitest.Pod("x", "a", "10.0.0.1", apitest.Port("web", 8080, corev1.ProtocolTCP), apitest.Port("dns", 5353, corev1.ProtocolUDP))}),
		Policies: npset.New([]*networkingv1.NetworkPolicy{netpol("x", "p", metav1.LabelSelector{}, func(s *networkingv1.NetworkPolicySpec) {
			r80 := tcp(80)
			r80.EndPort = &end
			s.Ingress = []networkingv1.NetworkPolicyIngressRule{{Ports: []networkingv1.NetworkPolicyPort{
				tcp(443),
				r80,
				{Protocol: &sctp},
				protoPort(corev1.ProtocolTCP, intstr.FromString("web")),
				protoPort(corev1.ProtocolUDP, intstr.FromString("dns")),
				protoPort(corev1.ProtocolUDP, intstr.FromString("web")), // web is TCP: no match
				{Protocol: &udp, Port: ptr(intstr.FromString("missing"))},
			}}}
		})})})
	eq(t, "ports", ruleTexts(chain(t, out, "np_ing_x_a")), []string{
		"ct state invalid drop", "ip saddr 10.0.0.1 accept",
		"tcp dport @np_x_p_in0_tcp accept", // 443 and 80-90: one set per protocol
		"meta l4proto sctp accept",
		"tcp dport 8080 accept",
		"udp dport 5353 accept",
		"drop",
	})
	eq(t, "tcp ports", keys(set(t, out, "np_x_p_in0_tcp")), []string{"80-90", "443"})
}

func ptr[T any](v T) *T { return &v }

func TestNamedPortsResolvePerDestinationPod(t *testing.T) {
	// The same name maps to different numbers on different pods.
	pods := []*corev1.Pod{
		apitest.Pod("x", "a", "10.0.0.1", apitest.Port("http", 8080, corev1.ProtocolTCP)),
		apitest.Pod("x", "b", "10.0.0.2", apitest.Port("http", 9090, corev1.ProtocolTCP), apitest.IPs("10.0.0.2", "fd00::2")),
		apitest.Pod("x", "c", "10.0.0.3"),
	}
	named := protoPort(corev1.ProtocolTCP, intstr.FromString("http"))
	out := compileChecked(t, Input{NodeName: "n1", Pods: podtest.Set(pods), Policies: npset.New([]*networkingv1.NetworkPolicy{
		netpol("x", "in", metav1.LabelSelector{}, func(s *networkingv1.NetworkPolicySpec) {
			s.Ingress = []networkingv1.NetworkPolicyIngressRule{{Ports: []networkingv1.NetworkPolicyPort{named}}}
		}),
		netpol("x", "out", *apitest.Selector("pod", "c"), func(s *networkingv1.NetworkPolicySpec) {
			s.Egress = []networkingv1.NetworkPolicyEgressRule{{
				To:    []networkingv1.NetworkPolicyPeer{{PodSelector: &metav1.LabelSelector{}}},
				Ports: []networkingv1.NetworkPolicyPort{named}}}
		}),
	})})
	if !contains(ruleTexts(chain(t, out, "np_ing_x_a")), "tcp dport 8080 accept") {
		t.Errorf("x/a: %q", ruleTexts(chain(t, out, "np_ing_x_a")))
	}
	if !contains(ruleTexts(chain(t, out, "np_ing_x_b")), "tcp dport 9090 accept") {
		t.Errorf("x/b: %q", ruleTexts(chain(t, out, "np_ing_x_b")))
	}
	eq(t, "c: no port named http", ruleTexts(chain(t, out, "np_ing_x_c")), []string{"ct state invalid drop", "ip saddr 10.0.0.3 accept", "drop"})
	// The tuple sets are named for the selection and the names (shared
	// by every rule that allows the same names to the same pods).
	t4 := lookedUp(t, out, "np_egr_x_c", "ip daddr . meta l4proto . th dport @")
	t6 := lookedUp(t, out, "np_egr_x_c", "ip6 daddr . meta l4proto . th dport @")
	eq(t, "egress tuples v4", keys(t4), []string{"10.0.0.1 . tcp . 8080", "10.0.0.2 . tcp . 9090"})
	eq(t, "egress tuples v6", keys(t6), []string{"fd00::2 . tcp . 9090"})
	eq(t, "egress chain", ruleTexts(chain(t, out, "np_egr_x_c")), []string{
		"ct state invalid drop", "ip daddr 10.0.0.3 accept",
		"ip daddr . meta l4proto . th dport @" + t4.Name + " goto np_ingress",
		"ip6 daddr . meta l4proto . th dport @" + t6.Name + " goto np_ingress",
		"drop",
	})
}

func TestIPBlockExcept(t *testing.T) {
	out := compileChecked(t, Input{NodeName: "n1", Pods: podtest.Set([]*corev1.Pod{apitest.Pod("x", "a", "10.0.0.1")}),
		Policies: npset.New([]*networkingv1.NetworkPolicy{netpol("x", "p", metav1.LabelSelector{}, func(s *networkingv1.NetworkPolicySpec) {
			s.Egress = []networkingv1.NetworkPolicyEgressRule{{To: []networkingv1.NetworkPolicyPeer{
				{IPBlock: &networkingv1.IPBlock{CIDR: "192.168.0.0/16", Except: []string{"192.168.1.0/24", "192.168.128.0/17"}}},
				{IPBlock: &networkingv1.IPBlock{CIDR: "192.168.0.0/24"}}, // overlaps the first: merged
				{IPBlock: &networkingv1.IPBlock{CIDR: "2001:db8::/32", Except: []string{"2001:db8::/33"}}},
			}}}
		})})})
	eq(t, "v4 ranges", keys(set(t, out, "np_x_p_eg0_cidr4")), []string{"192.168.0.0/24", "192.168.2.0-192.168.127.255"})
	eq(t, "v6 ranges", keys(set(t, out, "np_x_p_eg0_cidr6")), []string{"2001:db8:8000::/33"})
	if s := set(t, out, "np_x_p_eg0_cidr4"); !s.Interval {
		t.Error("ipBlock set is not an interval set")
	}
}

// TestIPBlockAsOlderAPIServersStoredIt: ipBlocks an API server before
// Kubernetes 1.36 accepted and a newer one still serves are read as
// Kubernetes components read them, never dropping the policy (which would
// take its pods' isolation away): an IPv4-mapped network is the IPv4
// network it maps, in the cidr and in an except; bits beyond the prefix
// length are cleared; leading zeros are decimal.
func TestIPBlockAsOlderAPIServersStoredIt(t *testing.T) {
	for _, tc := range []struct {
		name   string
		blocks []networkingv1.IPBlock
		v4, v6 []string // the cidr sets' elements; nil: no set
	}{
		{"IPv4-mapped except", []networkingv1.IPBlock{{CIDR: "10.0.0.0/8", Except: []string{"::ffff:10.1.0.0/112"}}},
			[]string{"10.0.0.0/16", "10.2.0.0-10.255.255.255"}, nil},
		{"IPv4-mapped cidr", []networkingv1.IPBlock{{CIDR: "::ffff:10.77.1.0/120", Except: []string{"10.77.1.128/25"}}},
			[]string{"10.77.1.0/25"}, nil},
		{"host bits", []networkingv1.IPBlock{{CIDR: "10.77.1.10/16", Except: []string{"10.77.1.10/24"}}},
			[]string{"10.77.0.0/24", "10.77.2.0-10.77.255.255"}, nil},
		{"leading zeros", []networkingv1.IPBlock{{CIDR: "010.077.000.000/016"}}, []string{"10.77.0.0/16"}, nil},
		{"IPv6 stays IPv6", []networkingv1.IPBlock{{CIDR: "::ffff:0:0/95"}}, nil, []string{"::fffe:0:0/95"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var peers []networkingv1.NetworkPolicyPeer
			for i := range tc.blocks {
				peers = append(peers, networkingv1.NetworkPolicyPeer{IPBlock: &tc.blocks[i]})
			}
			np := netpol("x", "p", metav1.LabelSelector{}, func(s *networkingv1.NetworkPolicySpec) {
				s.Egress = []networkingv1.NetworkPolicyEgressRule{{To: peers}}
			})
			if probs := Validate(np); len(probs) > 0 {
				t.Fatalf("Validate: %v", probs)
			}
			out := compileChecked(t, Input{NodeName: "n1", Pods: podtest.Set([]*corev1.Pod{apitest.Pod("x", "a", "10.0.0.1")}),
				Policies: npset.New([]*networkingv1.NetworkPolicy{np})})
			for _, s := range []struct {
				name string
				want []string
			}{{"np_x_p_eg0_cidr4", tc.v4}, {"np_x_p_eg0_cidr6", tc.v6}} {
				if s.want == nil {
					for _, got := range out.Sets {
						if got.Name == s.name {
							t.Errorf("set %s: %v, want none", s.name, keys(got))
						}
					}
					continue
				}
				eq(t, s.name, keys(set(t, out, s.name)), s.want)
			}
			if !hasChain(out, "np_egr_x_a") {
				t.Errorf("x/a is not isolated: chains %v", chainNames(out))
			}
		})
	}
}

func TestPodsThatAreNotEnforced(t *testing.T) {
	pods := []*corev1.Pod{
		apitest.Pod("x", "done", "10.0.0.1", apitest.Phase(corev1.PodSucceeded)),
		apitest.Pod("x", "failed", "10.0.0.2", apitest.Phase(corev1.PodFailed)),
		apitest.Pod("x", "noip", "", apitest.IPs()),
		apitest.Pod("x", "host", "192.0.2.10", apitest.HostNetwork()),
		apitest.Pod("x", "live", "10.0.0.5"),
	}
	out := compileChecked(t, Input{NodeName: "n1", Pods: podtest.Set(pods), Policies: npset.New([]*networkingv1.NetworkPolicy{
		netpol("x", "p", metav1.LabelSelector{}, func(s *networkingv1.NetworkPolicySpec) {
			s.Ingress = []networkingv1.NetworkPolicyIngressRule{{From: []networkingv1.NetworkPolicyPeer{{PodSelector: &metav1.LabelSelector{}}}}}
		})})})
	eq(t, "isolated", keys(set(t, out, tablelayout.MapIngress4)), []string{"10.0.0.5 : jump np_ing_x_live"})
	eq(t, "peers", keys(lookedUp(t, out, "np_ing_x_live", "ip saddr @")), []string{"10.0.0.5"})
}

func TestInvalidObjectsAreReportedAndFailClosed(t *testing.T) {
	badCIDR := netpol("x", "bad-cidr", metav1.LabelSelector{}, func(s *networkingv1.NetworkPolicySpec) {
		s.Ingress = []networkingv1.NetworkPolicyIngressRule{{From: []networkingv1.NetworkPolicyPeer{{IPBlock: &networkingv1.IPBlock{CIDR: "10.0.0.0/33"}}}}}
	})
	badExcept := netpol("x", "bad-except", metav1.LabelSelector{}, func(s *networkingv1.NetworkPolicySpec) {
		s.Ingress = []networkingv1.NetworkPolicyIngressRule{{From: []networkingv1.NetworkPolicyPeer{{IPBlock: &networkingv1.IPBlock{CIDR: "10.0.0.0/16", Except: []string{"10.1.0.0/24"}}}}}}
	})
	badPort := netpol("x", "bad-port", metav1.LabelSelector{}, func(s *networkingv1.NetworkPolicySpec) {
		s.Ingress = []networkingv1.NetworkPolicyIngressRule{{Ports: []networkingv1.NetworkPolicyPort{protoPort("ICMP", intstr.FromString("Bad_Name"))}}}
	})
	badSel := netpol("x", "bad-sel", metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "a", Operator: "Maybe"}}}, nil)
	good := netpol("y", "good", metav1.LabelSelector{}, nil)
	out := compileChecked(t, Input{NodeName: "n1",
		Pods:     podtest.Set([]*corev1.Pod{apitest.Pod("x", "a", "10.0.0.1"), apitest.Pod("y", "a", "10.0.1.1"), apitest.Pod("y", "weird", "not-an-ip")}),
		Policies: npset.New([]*networkingv1.NetworkPolicy{badCIDR, badExcept, badPort, badSel, good})})
	var got []string
	for _, p := range out.Problems {
		got = append(got, p.Error())
	}
	want := []string{
		`NetworkPolicy x/bad-cidr: spec.ingress[0].from[0].ipBlock.cidr: invalid CIDR "10.0.0.0/33"`,
		`NetworkPolicy x/bad-except: spec.ingress[0].from[0].ipBlock.except[0]: "10.1.0.0/24" must be a strict subset of cidr "10.0.0.0/16"`,
		`NetworkPolicy x/bad-port: spec.ingress[0].ports[0].protocol: unsupported value "ICMP"`,
		`NetworkPolicy x/bad-port: spec.ingress[0].ports[0].port: invalid port name "Bad_Name"`,
		`NetworkPolicy x/bad-sel: spec.podSelector:`,
		`Pod y/weird: status.podIPs[0]: invalid IP "not-an-ip"`,
	}
	for _, w := range want {
		found := false
		for _, g := range got {
			if strings.HasPrefix(g, w) {
				found = true
			}
		}
		if !found {
			t.Errorf("missing problem %q in:\n%s", w, strings.Join(got, "\n"))
		}
	}
	if !hasChain(out, "np_ing_x_a") {
		t.Error("x/a lost its isolation to invalid policies")
	}
	if !hasChain(out, "np_ing_y_a") {
		t.Error("the valid policy in y was not compiled")
	}
	// Each invalid policy compiles exactly as its fail-closed form: its
	// pods isolated, nothing it allows installed.
	pods := podtest.Set([]*corev1.Pod{apitest.Pod("x", "a", "10.0.0.1", apitest.WithLabels("pod", "a")), apitest.Pod("x", "b", "10.0.0.2", apitest.WithLabels("pod", "b"))})
	for _, np := range []*networkingv1.NetworkPolicy{badCIDR, badExcept, badPort, badSel} {
		got := Compile(Input{NodeName: "n1", Pods: pods, Policies: npset.New([]*networkingv1.NetworkPolicy{np})})
		want := compileChecked(t, Input{NodeName: "n1", Pods: pods, Policies: npset.New([]*networkingv1.NetworkPolicy{FailClosedInvalid(np, Validate(np))})})
		if !reflect.DeepEqual(got.Chains, want.Chains) || !reflect.DeepEqual(got.Sets, want.Sets) {
			t.Errorf("%s: compiled as\n%v\nnot as its fail-closed form\n%v", np.Name, got.Chains, want.Chains)
		}
	}
}

// An invalid policy is enforced as its fail-closed form: its subject and
// directions when they can be read; every pod of its namespace when its
// podSelector cannot be trusted; both directions when its policyTypes
// names one that cannot be read.
func TestFailClosedInvalid(t *testing.T) {
	sel := metav1.LabelSelector{MatchLabels: map[string]string{"pod": "a"}}
	withRules := func(s *networkingv1.NetworkPolicySpec) {
		s.Ingress = []networkingv1.NetworkPolicyIngressRule{{From: []networkingv1.NetworkPolicyPeer{{IPBlock: &networkingv1.IPBlock{CIDR: "10.0.0.0/33"}}}}}
		s.Egress = []networkingv1.NetworkPolicyEgressRule{{}}
	}
	for _, tc := range []struct {
		name  string
		np    *networkingv1.NetworkPolicy
		sel   metav1.LabelSelector
		types []networkingv1.PolicyType
	}{
		{"bad peer: same subject, defaulted types", netpol("x", "p", sel, withRules), sel,
			[]networkingv1.PolicyType{networkingv1.PolicyTypeIngress, networkingv1.PolicyTypeEgress}},
		{"bad peer, egress only", netpol("x", "p", sel, func(s *networkingv1.NetworkPolicySpec) {
			withRules(s)
			s.PolicyTypes = []networkingv1.PolicyType{networkingv1.PolicyTypeEgress}
		}), sel, []networkingv1.PolicyType{networkingv1.PolicyTypeEgress}},
		{"bad podSelector: the whole namespace", netpol("x", "p",
			metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "pod", Operator: "Maybe"}}}, func(s *networkingv1.NetworkPolicySpec) {
				s.PolicyTypes = []networkingv1.PolicyType{networkingv1.PolicyTypeIngress}
			}), metav1.LabelSelector{}, []networkingv1.PolicyType{networkingv1.PolicyTypeIngress}},
		{"unknown policy type: both directions", netpol("x", "p", sel, func(s *networkingv1.NetworkPolicySpec) {
			s.PolicyTypes = []networkingv1.PolicyType{networkingv1.PolicyTypeIngress, "Sideways"}
		}), sel, []networkingv1.PolicyType{networkingv1.PolicyTypeIngress, networkingv1.PolicyTypeEgress}},
		{"duplicate policy type: as named", netpol("x", "p", sel, func(s *networkingv1.NetworkPolicySpec) {
			s.PolicyTypes = []networkingv1.PolicyType{networkingv1.PolicyTypeEgress, networkingv1.PolicyTypeEgress}
		}), sel, []networkingv1.PolicyType{networkingv1.PolicyTypeEgress}},
	} {
		probs := Validate(tc.np)
		if len(probs) == 0 {
			t.Fatalf("%s: the policy is valid", tc.name)
		}
		got := FailClosedInvalid(tc.np, probs)
		if !reflect.DeepEqual(got.Spec.PodSelector, tc.sel) || !reflect.DeepEqual(got.Spec.PolicyTypes, tc.types) ||
			len(got.Spec.Ingress)+len(got.Spec.Egress) != 0 || got.Name != tc.np.Name || got.Namespace != tc.np.Namespace {
			t.Errorf("%s: %+v", tc.name, got.Spec)
		}
	}
}

func TestLongNamesStayWithinKernelLimits(t *testing.T) {
	long := strings.Repeat("n", 63)
	pol := strings.Repeat("p", 253)
	out := compileChecked(t, Input{NodeName: "n1",
		Pods: podtest.Set([]*corev1.Pod{apitest.Pod(long, strings.Repeat("q", 253), "10.0.0.1")}),
		Policies: npset.New([]*networkingv1.NetworkPolicy{netpol(long, pol, metav1.LabelSelector{}, func(s *networkingv1.NetworkPolicySpec) {
			s.Ingress = []networkingv1.NetworkPolicyIngressRule{{From: []networkingv1.NetworkPolicyPeer{{PodSelector: &metav1.LabelSelector{}}}}}
		})})})
	for _, c := range out.Chains {
		if len(c.Name) > nftsafe.MaxName {
			t.Errorf("chain name %d bytes", len(c.Name))
		}
	}
	for _, s := range out.Sets {
		if len(s.Name) > nftsafe.MaxName {
			t.Errorf("set name %d bytes", len(s.Name))
		}
	}
}

func TestDeterministic(t *testing.T) {
	in := Input{NodeName: "n1", Namespaces: []*corev1.Namespace{apitest.Namespace("x"), apitest.Namespace("y")}}
	var podList []*corev1.Pod
	for i := 0; i < 20; i++ {
		podList = append(podList, apitest.Pod([]string{"x", "y"}[i%2], fmt.Sprintf("p%d", i), fmt.Sprintf("10.0.0.%d", i+1)))
	}
	in.Pods = podtest.Set(podList)
	in.Policies = npset.New([]*networkingv1.NetworkPolicy{netpol("x", "p", metav1.LabelSelector{}, func(s *networkingv1.NetworkPolicySpec) {
		s.Ingress = []networkingv1.NetworkPolicyIngressRule{{From: []networkingv1.NetworkPolicyPeer{{NamespaceSelector: &metav1.LabelSelector{}}}}}
	})})
	first := fmt.Sprint(Compile(in))
	for i := 0; i < 5; i++ {
		if got := fmt.Sprint(Compile(in)); got != first {
			t.Fatal("output differs between runs")
		}
	}
}
