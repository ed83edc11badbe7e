package policy

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/nftguard/nftguard/internal/apitest"
	"github.com/nftguard/nftguard/internal/podtest"
	"github.com/nftguard/nftguard/npset"
	"github.com/nftguard/nftguard/tablelayout"
)

// Names no API server accepts (possible only in a hand-written manifest)
// still compile to a table the kernel takes and nft prints and reads back:
// the pod stays isolated, under hashed names, with quote-free comments.
func TestHostileNamesCompileToSafeNames(t *testing.T) {
	evil := `q"; }; }; flush ruleset; table inet nftguard { chain zz { #`
	in := Input{NodeName: "n1",
		Namespaces: []*corev1.Namespace{apitest.Namespace("x"), apitest.Namespace("a\nb")},
		Pods: podtest.Set([]*corev1.Pod{
			apitest.Pod("x", evil, "10.0.0.1"),
			apitest.Pod("a\nb", "ümlaut", "10.0.0.2", apitest.WithLabels("app", "web")),
			apitest.Pod("x", "b", "10.0.0.3"),
		}),
		Policies: npset.New([]*networkingv1.NetworkPolicy{
			netpol("x", evil, metav1.LabelSelector{}, func(s *networkingv1.NetworkPolicySpec) {
				s.Ingress = []networkingv1.NetworkPolicyIngressRule{{From: []networkingv1.NetworkPolicyPeer{
					{PodSelector: &metav1.LabelSelector{}},
					{NamespaceSelector: &metav1.LabelSelector{}, PodSelector: apitest.Selector("app", "web")},
					{IPBlock: &networkingv1.IPBlock{CIDR: "192.0.2.0/24", Except: []string{"192.0.2.0/25"}}},
				}}}
				s.Egress = []networkingv1.NetworkPolicyEgressRule{{Ports: []networkingv1.NetworkPolicyPort{protoPort(corev1.ProtocolTCP, intstr.FromString("http"))}}}
				s.PolicyTypes = []networkingv1.PolicyType{networkingv1.PolicyTypeIngress, networkingv1.PolicyTypeEgress}
			}),
		}),
	}
	out := compileChecked(t, in) // includes nftcheck.Check
	if len(out.Problems) > 0 {
		t.Fatalf("problems: %v", out.Problems)
	}
	isolated := 0
	for _, c := range out.Chains {
		if strings.HasPrefix(c.Name, "np_ing_x_") {
			isolated++
		}
		if strings.Contains(c.Comment, `"`) || strings.Contains(c.Name, `"`) {
			t.Errorf("chain %q comment %q", c.Name, c.Comment)
		}
	}
	if isolated != 2 {
		t.Errorf("%d pods of x isolated, want 2: %v", isolated, chainNames(out))
	}
}

// Two local pods with one address, or one name, never put one key into a
// verdict map twice or one chain name into the table twice; the pod left
// out is named.
func TestSharedLocalAddressesAndNames(t *testing.T) {
	deny := netpol("x", "deny", metav1.LabelSelector{}, func(s *networkingv1.NetworkPolicySpec) {
		s.PolicyTypes = []networkingv1.PolicyType{networkingv1.PolicyTypeIngress, networkingv1.PolicyTypeEgress}
	})
	in := Input{NodeName: "n1", Namespaces: []*corev1.Namespace{apitest.Namespace("x")},
		Pods: podtest.Set([]*corev1.Pod{
			apitest.Pod("x", "a", "10.0.0.1", apitest.IPs("10.0.0.1", "10.0.0.1", "fd00::1")),
			apitest.Pod("x", "b", "10.0.0.1"),
			apitest.Pod("x", "c", "10.0.0.3"),
			apitest.Pod("x", "c", "10.0.0.4"),
			apitest.Pod("x", "d", "fe80::1%eth0"),
		}),
		Policies: npset.New([]*networkingv1.NetworkPolicy{deny}),
	}
	out := compileChecked(t, in)
	var reasons []string
	for _, p := range out.Problems {
		reasons = append(reasons, p.Error())
	}
	want := []string{
		`Pod x/d: status.podIPs[0]: invalid IP "fe80::1%eth0"`,
		`Pod x/c: another Pod of the same namespace and name on this node comes first`,
		`Pod x/b: status.podIPs: address 10.0.0.1 is also pod x/a's, whose policies decide for it`,
	}
	eq(t, "problems", reasons, want)
	eq(t, "ingress4", keys(set(t, out, tablelayout.MapIngress4)), []string{"10.0.0.1 : jump np_ing_x_a", "10.0.0.3 : jump np_ing_x_c"})
	eq(t, "ingress of a", ruleTexts(chain(t, out, "np_ing_x_a"))[:3], []string{"ct state invalid drop", "ip saddr 10.0.0.1 accept", "ip6 saddr fd00::1 accept"})
}
