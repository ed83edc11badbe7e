package clusterpolicy

import (
	"flag"
	"path/filepath"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/network-policy-api/apis/v1beta1"

	"github.com/nftguard/nftguard/internal/apitest"
	"github.com/nftguard/nftguard/internal/cnptest"
	"github.com/nftguard/nftguard/internal/golden"
	"github.com/nftguard/nftguard/internal/podtest"
	"github.com/nftguard/nftguard/tablelayout"
)

// The golden files under testdata/ are the whole policy tables (the
// NetworkPolicy fixed chains with the tiers, and the ClusterNetworkPolicy
// chains and sets) for fixed inputs, after the input as comments. Run
//
//	go test ./clusterpolicy/ -run Golden -update
//
// and review the diff of testdata/ as part of a change.
var update = flag.Bool("update", false, "rewrite the golden files under testdata/ from the compiler's output")

func goldenScenarios() map[string]Input {
	z := []v1beta1.ClusterNetworkPolicyIngressPeer{fromNS(sel("ns", "z"))}
	return map[string]Input{
		// The example of examples/cluster: an admin guardrail and baseline
		// isolation of every namespace.
		"admin-deny-baseline-isolation": cluster(
			protectY(),
			cnp("isolate-namespaces", v1beta1.BaselineTier, 0, func(s *v1beta1.ClusterNetworkPolicySpec) {
				s.Ingress = []v1beta1.ClusterNetworkPolicyIngressRule{
					ingress(deny, "other-namespaces", []v1beta1.ClusterNetworkPolicyIngressPeer{fromNS(&metav1.LabelSelector{
						MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "ns", Operator: metav1.LabelSelectorOpNotIn, Values: []string{"x"}}}})}),
				}
			}),
		),
		"peers-and-protocols": cluster(
			cnp("peers", v1beta1.AdminTier, 0, func(s *v1beta1.ClusterNetworkPolicySpec) {
				s.Subject = v1beta1.ClusterNetworkPolicySubject{Pods: &v1beta1.NamespacedPod{NamespaceSelector: *sel("ns", "x"), PodSelector: *sel("pod", "a")}}
				s.Ingress = []v1beta1.ClusterNetworkPolicyIngressRule{
					ingress(accept, "numbers", z, cnptest.TCP(80), cnptest.UDPRange(1000, 2000), cnptest.SCTP(9)),
					ingress(pass, "named", z, cnptest.NamedPort("web"), cnptest.NamedPort("dns")),
				}
				s.Egress = []v1beta1.ClusterNetworkPolicyEgressRule{
					egress(pass, "cluster", []v1beta1.ClusterNetworkPolicyEgressPeer{cnptest.PeerNamespaces(&metav1.LabelSelector{})}, cnptest.NamedPort("web")),
					egress(accept, "nodes", []v1beta1.ClusterNetworkPolicyEgressPeer{toNodes(&metav1.LabelSelector{})}, cnptest.TCP(6443)),
					egress(deny, "world", []v1beta1.ClusterNetworkPolicyEgressPeer{toNets("0.0.0.0/0", "10.0.0.0/8", "::/0")}),
				}
			}),
		),
		"fail-closed-and-invalid": cluster(
			cnp("unknown-peers", v1beta1.AdminTier, 0, func(s *v1beta1.ClusterNetworkPolicySpec) {
				s.Ingress = []v1beta1.ClusterNetworkPolicyIngressRule{
					ingress(accept, "matches-nothing", []v1beta1.ClusterNetworkPolicyIngressPeer{{}}),
					ingress(pass, "denies-all", []v1beta1.ClusterNetworkPolicyIngressPeer{{}}),
				}
				s.Egress = []v1beta1.ClusterNetworkPolicyEgressRule{
					egress(accept, "domains", []v1beta1.ClusterNetworkPolicyEgressPeer{{DomainNames: []v1beta1.DomainName{"*.example.com"}}}),
					egress(deny, "bad-cidr", []v1beta1.ClusterNetworkPolicyEgressPeer{toNets("10.0.0.1/8")}),
				}
			}),
			cnp("bad-priority", v1beta1.AdminTier, 1001, func(s *v1beta1.ClusterNetworkPolicySpec) {
				s.Ingress = []v1beta1.ClusterNetworkPolicyIngressRule{ingress(deny, "", z)}
			}),
		),
		// Logging of denied packets on: namespace y opts in (its Deny
		// rules go to the shared log chains), x does not (counted
		// drops); rules that fail closed drop the same way.
		"log-denied": func() Input {
			in := cluster(
				protectY(egress(pass, "unknown-peer", []v1beta1.ClusterNetworkPolicyEgressPeer{{}})),
				cnp("isolate-namespaces", v1beta1.BaselineTier, 0, func(s *v1beta1.ClusterNetworkPolicySpec) {
					s.Ingress = []v1beta1.ClusterNetworkPolicyIngressRule{
						ingress(deny, "other-namespaces", []v1beta1.ClusterNetworkPolicyIngressPeer{fromNS(sel("ns", "z"))}),
					}
					s.Egress = []v1beta1.ClusterNetworkPolicyEgressRule{
						egress(deny, "z", []v1beta1.ClusterNetworkPolicyEgressPeer{cnptest.PeerNamespaces(sel("ns", "z"))}, cnptest.TCP(80)),
					}
				}),
			)
			l := tablelayout.DefaultLogDenied()
			in.LogDenied = &l
			in.Namespaces[1].Annotations = map[string]string{tablelayout.AnnotationLogDenied: "true"}
			return in
		}(),
		"hostile-and-long-names": func() Input {
			long := strings.Repeat("n", 253)
			in := cluster(cnp(long, v1beta1.AdminTier, 0, func(s *v1beta1.ClusterNetworkPolicySpec) {
				s.Ingress = []v1beta1.ClusterNetworkPolicyIngressRule{ingress(deny, "a \"quoted\" rule; drop", z)}
			}), cnp("Bad Name\"", v1beta1.BaselineTier, 0, func(s *v1beta1.ClusterNetworkPolicySpec) {
				s.Egress = []v1beta1.ClusterNetworkPolicyEgressRule{egress(deny, "", []v1beta1.ClusterNetworkPolicyEgressPeer{cnptest.PeerNamespaces(sel("ns", "z"))})}
			}))
			in.Pods = podtest.Append(in.Pods, apitest.Pod(long[:63], long, "10.0.5.5"))
			return in
		}(),
	}
}

// protectY is the examples' admin guardrail of namespace y: monitoring
// from z/a accepted, everyone else denied, the metadata address denied
// for egress, then the extra egress rules.
func protectY(extraEgress ...v1beta1.ClusterNetworkPolicyEgressRule) *v1beta1.ClusterNetworkPolicy {
	return cnp("protect-y", v1beta1.AdminTier, 10, func(s *v1beta1.ClusterNetworkPolicySpec) {
		s.Subject = v1beta1.ClusterNetworkPolicySubject{Namespaces: sel("ns", "y")}
		s.Ingress = []v1beta1.ClusterNetworkPolicyIngressRule{
			ingress(accept, "monitoring", []v1beta1.ClusterNetworkPolicyIngressPeer{fromPods(sel("ns", "z"), sel("pod", "a"))}, cnptest.TCP(9090)),
			ingress(deny, "everyone-else", []v1beta1.ClusterNetworkPolicyIngressPeer{fromNS(&metav1.LabelSelector{})}),
		}
		s.Egress = append([]v1beta1.ClusterNetworkPolicyEgressRule{
			egress(deny, "metadata", []v1beta1.ClusterNetworkPolicyEgressPeer{toNets("169.254.169.254/32", "fd00:ec2::254/128")}),
		}, extraEgress...)
	})
}

func TestGoldenScenarios(t *testing.T) {
	for name, in := range goldenScenarios() {
		t.Run(name, func(t *testing.T) {
			golden.Check(t, *update, filepath.Join("testdata", name+".nft"), renderGolden(t, in, compileChecked(t, in)))
		})
	}
}
