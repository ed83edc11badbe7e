package compose

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/network-policy-api/apis/v1beta1"

	"github.com/nftguard/nftguard/internal/apitest"
	"github.com/nftguard/nftguard/internal/podtest"
	"github.com/nftguard/nftguard/npset"
)

// A local pod whose address another local pod came first with is named by
// both tiers the same way, and once: also when only a
// ClusterNetworkPolicy selects it (no NetworkPolicy chain would report it).
func TestSharedAddressReportedOnceByBothTiers(t *testing.T) {
	admin := &v1beta1.ClusterNetworkPolicy{ObjectMeta: metav1.ObjectMeta{Name: "deny-z"}}
	admin.Spec.Tier, admin.Spec.Priority = "Admin", 1
	admin.Spec.Subject.Namespaces = &metav1.LabelSelector{}
	admin.Spec.Ingress = []v1beta1.ClusterNetworkPolicyIngressRule{{Action: "Deny",
		From: []v1beta1.ClusterNetworkPolicyIngressPeer{{Namespaces: &metav1.LabelSelector{MatchLabels: map[string]string{"ns": "z"}}}}}}
	deny := &networkingv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: "x", Name: "deny"}}
	want := "Pod x/b: status.podIPs: address 10.0.0.1 is also pod x/a's, whose policies decide for it"
	for _, tc := range []struct {
		name string
		nps  []*networkingv1.NetworkPolicy
	}{{"cluster policy only", nil}, {"both tiers", []*networkingv1.NetworkPolicy{deny}}} {
		t.Run(tc.name, func(t *testing.T) {
			res := Build(Input{NodeName: "n1",
				Namespaces: []*corev1.Namespace{apitest.Namespace("x"), apitest.Namespace("z")},
				Pods: podtest.Set([]*corev1.Pod{
					apitest.Pod("x", "a", "10.0.0.1"),
					apitest.Pod("x", "b", "10.0.0.1"),
				}),
				NetworkPolicies:        npset.New(tc.nps),
				ClusterNetworkPolicies: []*v1beta1.ClusterNetworkPolicy{admin},
			})
			n := 0
			for _, p := range res.Problems {
				if p.Error() == want {
					n++
					if !p.Local {
						t.Errorf("%v: not Local, but only this node has the two pods", p)
					}
				} else {
					t.Errorf("unexpected problem %v", p)
				}
			}
			if n != 1 {
				t.Errorf("reported %d times, want once: %v", n, res.Problems)
			}
		})
	}
}
