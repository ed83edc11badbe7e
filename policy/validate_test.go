package policy

import (
	"math/rand"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/nftguard/nftguard/selection"
)

func TestValidate(t *testing.T) {
	spec := func(f func(*networkingv1.NetworkPolicySpec)) *networkingv1.NetworkPolicy {
		return netpol("x", "p", metav1.LabelSelector{}, f)
	}
	ingressPorts := func(ports ...networkingv1.NetworkPolicyPort) *networkingv1.NetworkPolicy {
		return spec(func(s *networkingv1.NetworkPolicySpec) {
			s.Ingress = []networkingv1.NetworkPolicyIngressRule{{Ports: ports}}
		})
	}
	egressPeers := func(peers ...networkingv1.NetworkPolicyPeer) *networkingv1.NetworkPolicy {
		return spec(func(s *networkingv1.NetworkPolicySpec) {
			s.Egress = []networkingv1.NetworkPolicyEgressRule{{To: peers}}
		})
	}
	icmp := corev1.Protocol("ICMP")
	end := func(p int32) *int32 { return &p }
	cases := []struct {
		name string
		np   *networkingv1.NetworkPolicy
		want []string // Problem.Error() of each problem, in order
	}{
		{"valid", spec(nil), nil},
		{"no name", netpol("x", "", metav1.LabelSelector{}, nil), []string{
			"NetworkPolicy x/: metadata.name: required"}},
		{"policy types", spec(func(s *networkingv1.NetworkPolicySpec) {
			s.PolicyTypes = []networkingv1.PolicyType{"Sideways", networkingv1.PolicyTypeIngress, networkingv1.PolicyTypeIngress}
		}), []string{
			`NetworkPolicy x/p: spec.policyTypes[0]: unsupported value "Sideways": must be Ingress or Egress`,
			`NetworkPolicy x/p: spec.policyTypes[2]: duplicate value "Ingress"`}},
		{"peer with nothing", egressPeers(networkingv1.NetworkPolicyPeer{}), []string{
			"NetworkPolicy x/p: spec.egress[0].to[0]: must specify a peer: podSelector, namespaceSelector or ipBlock"}},
		{"ipBlock beside a selector", egressPeers(networkingv1.NetworkPolicyPeer{IPBlock: &networkingv1.IPBlock{CIDR: "10.0.0.0/8"}, PodSelector: &metav1.LabelSelector{}}), []string{
			"NetworkPolicy x/p: spec.egress[0].to[0]: may not specify both ipBlock and another peer"}},
		{"except outside, other family, unparsable", egressPeers(networkingv1.NetworkPolicyPeer{IPBlock: &networkingv1.IPBlock{CIDR: "10.0.0.0/8", Except: []string{"11.0.0.0/16", "fd00::/64", "bad", "10.0.0.0/8"}}}), []string{
			`NetworkPolicy x/p: spec.egress[0].to[0].ipBlock.except[0]: "11.0.0.0/16" must be a strict subset of cidr "10.0.0.0/8"`,
			`NetworkPolicy x/p: spec.egress[0].to[0].ipBlock.except[1]: "fd00::/64" is not in the same IP family as cidr "10.0.0.0/8"`,
			`NetworkPolicy x/p: spec.egress[0].to[0].ipBlock.except[2]: invalid CIDR "bad": netip.ParsePrefix("bad"): no '/'`,
			`NetworkPolicy x/p: spec.egress[0].to[0].ipBlock.except[3]: "10.0.0.0/8" must be a strict subset of cidr "10.0.0.0/8"`}},
		{"what an older API server stored", egressPeers(
			networkingv1.NetworkPolicyPeer{IPBlock: &networkingv1.IPBlock{CIDR: "10.0.0.0/8", Except: []string{"::ffff:10.1.0.0/112", "10.2.0.1/16", "010.003.000.000/16"}}},
			networkingv1.NetworkPolicyPeer{IPBlock: &networkingv1.IPBlock{CIDR: "::ffff:10.77.1.0/120", Except: []string{"10.77.1.0/25"}}},
		), nil},
		{"an IPv4-mapped except outside the cidr", egressPeers(networkingv1.NetworkPolicyPeer{IPBlock: &networkingv1.IPBlock{CIDR: "10.0.0.0/8", Except: []string{"::ffff:11.0.0.0/112"}}}), []string{
			`NetworkPolicy x/p: spec.egress[0].to[0].ipBlock.except[0]: "::ffff:11.0.0.0/112" must be a strict subset of cidr "10.0.0.0/8"`}},
		{"bad selector operator", egressPeers(networkingv1.NetworkPolicyPeer{NamespaceSelector: &metav1.LabelSelector{
			MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "a", Operator: "Near"}}}}), []string{
			`NetworkPolicy x/p: spec.egress[0].to[0].namespaceSelector: "Near" is not a valid label selector operator`}},
		{"ports", ingressPorts(
			networkingv1.NetworkPolicyPort{Protocol: &icmp},
			networkingv1.NetworkPolicyPort{Port: ptr(intstr.FromInt32(0))},
			networkingv1.NetworkPolicyPort{Port: ptr(intstr.FromInt32(500)), EndPort: end(400)},
			networkingv1.NetworkPolicyPort{EndPort: end(9)},
			networkingv1.NetworkPolicyPort{Port: ptr(intstr.FromString("http")), EndPort: end(9)},
		), []string{
			`NetworkPolicy x/p: spec.ingress[0].ports[0].protocol: unsupported value "ICMP": must be TCP, UDP or SCTP`,
			`NetworkPolicy x/p: spec.ingress[0].ports[1].port: 0 is not between 1 and 65535`,
			`NetworkPolicy x/p: spec.ingress[0].ports[2].endPort: 400 must be greater than or equal to port 500`,
			`NetworkPolicy x/p: spec.ingress[0].ports[3].endPort: may not be specified when port is not specified`,
			`NetworkPolicy x/p: spec.ingress[0].ports[4].endPort: may not be specified when port is a named port`}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var got []string
			for _, p := range Validate(tc.np) {
				got = append(got, p.Error())
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("problems (-want +got):\n%s", diff)
			}
		})
	}
}

// TestValidateWithCachesEqualsValidate checks that the compile's caches
// of parsed selectors and port names change no answer of Validate, over
// the policies of random clusters (which share selectors and break
// policies in every way Validate reports), in one cache as a compile does.
func TestValidateWithCachesEqualsValidate(t *testing.T) {
	for seed := int64(0); seed < 300; seed++ {
		in := randomCluster(rand.New(rand.NewSource(seed)))
		v := &validator{selectors: selection.NewSelectors(), portNames: map[string][]string{}}
		for _, np := range in.Policies.All() {
			if diff := cmp.Diff(Validate(np), validate(np, v)); diff != "" {
				t.Fatalf("seed %d, %s/%s (-uncached +cached):\n%s", seed, np.Namespace, np.Name, diff)
			}
		}
	}
}
