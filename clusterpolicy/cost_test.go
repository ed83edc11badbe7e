package clusterpolicy

import (
	"fmt"
	"strings"
	"testing"

	"sigs.k8s.io/network-policy-api/apis/v1beta1"

	"github.com/nftguard/nftguard/internal/cnptest"
)

// 100 policies whose rules select every namespace share one set per
// family; a rule of many ports (the CRD allows 25 protocols) is one set
// element per port and one rule per peer kind and protocol in each
// selected pod's chain.
func TestSharedSetsAndPortSets(t *testing.T) {
	var pols []*v1beta1.ClusterNetworkPolicy
	for i := range 100 {
		pols = append(pols, cnp(fmt.Sprintf("p%03d", i), v1beta1.AdminTier, int32(i), func(s *v1beta1.ClusterNetworkPolicySpec) {
			s.Subject = v1beta1.ClusterNetworkPolicySubject{Namespaces: sel("ns", "x")}
			s.Egress = []v1beta1.ClusterNetworkPolicyEgressRule{egress(pass, "all", []v1beta1.ClusterNetworkPolicyEgressPeer{cnptest.PeerNamespaces(sel())})}
		}))
	}
	var protos []v1beta1.ClusterNetworkPolicyProtocol
	for i := range maxProtocols {
		protos = append(protos, cnptest.TCP(int32(2*(i+1))))
	}
	pols = append(pols, cnp("ports", v1beta1.BaselineTier, 0, func(s *v1beta1.ClusterNetworkPolicySpec) {
		s.Subject = v1beta1.ClusterNetworkPolicySubject{Namespaces: sel("ns", "x")}
		s.Ingress = []v1beta1.ClusterNetworkPolicyIngressRule{ingress(deny, "many", []v1beta1.ClusterNetworkPolicyIngressPeer{fromNS(sel())}, protos...)}
	}))
	out := compileChecked(t, cluster(pols...))
	var shared []string
	rules, elems := 0, 0
	for _, s := range out.Sets {
		if strings.HasPrefix(s.Name, "cnp_sel_") {
			shared = append(shared, s.Name)
		}
		elems += len(s.Elements)
	}
	for _, c := range out.Chains {
		rules += len(c.Rules)
	}
	t.Logf("100 all-namespace policies and one of 25 ports, 2 local pods: %d rules, %d set elements", rules, elems)
	if len(shared) != 2 {
		t.Errorf("shared sets %v, want one per family", shared)
	}
	eq(t, "x/a ingress", chainRules(t, out, "cnp_bi_x_a"), []string{
		"ip saddr 10.0.0.1 accept", "ip6 saddr fd00::1 accept",
		"ip saddr @SEL4 tcp dport @cnp_ports_in0_tcp drop", "ip6 saddr @SEL6 tcp dport @cnp_ports_in0_tcp drop",
	})
	if n := len(setElems(t, out, "cnp_ports_in0_tcp")); n != maxProtocols {
		t.Errorf("%d port elements, want %d", n, maxProtocols)
	}
}
