package compose

import (
	"context"
	"math/rand"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/network-policy-api/apis/v1beta1"

	"github.com/nftguard/nftguard/engine"
	"github.com/nftguard/nftguard/internal/nftcheck"
	"github.com/nftguard/nftguard/internal/testns"
)

// hostileCNPs adds ClusterNetworkPolicies whose every free-form string may
// be hostile to a hostile cluster.
func hostileCNPs(r *rand.Rand, in *Input) {
	str := func() string { return hostileString(r) }
	sel := func() *metav1.LabelSelector {
		if r.Intn(3) == 0 {
			return &metav1.LabelSelector{}
		}
		return &metav1.LabelSelector{MatchLabels: map[string]string{[]string{"app", str()}[r.Intn(2)]: []string{"a", str()}[r.Intn(2)]}}
	}
	actions := []v1beta1.ClusterNetworkPolicyRuleAction{"Accept", "Deny", "Pass", v1beta1.ClusterNetworkPolicyRuleAction(str())}
	for i := r.Intn(5); i > 0; i-- {
		p := &v1beta1.ClusterNetworkPolicy{ObjectMeta: metav1.ObjectMeta{Name: str()}}
		p.Spec.Tier = []v1beta1.Tier{"Admin", "Baseline", v1beta1.Tier(str())}[r.Intn(3)]
		p.Spec.Priority = int32(r.Intn(1100))
		if r.Intn(2) == 0 {
			p.Spec.Subject.Namespaces = sel()
		} else {
			p.Spec.Subject.Pods = &v1beta1.NamespacedPod{NamespaceSelector: *sel(), PodSelector: *sel()}
		}
		protos := func() []v1beta1.ClusterNetworkPolicyProtocol {
			var out []v1beta1.ClusterNetworkPolicyProtocol
			for j := r.Intn(3); j > 0; j-- {
				switch r.Intn(3) {
				case 0:
					out = append(out, v1beta1.ClusterNetworkPolicyProtocol{DestinationNamedPort: []string{"http", str()}[r.Intn(2)]})
				case 1:
					out = append(out, v1beta1.ClusterNetworkPolicyProtocol{TCP: &v1beta1.ClusterNetworkPolicyProtocolTCP{DestinationPort: &v1beta1.Port{Number: int32(r.Intn(70000))}}})
				default:
					out = append(out, v1beta1.ClusterNetworkPolicyProtocol{UDP: &v1beta1.ClusterNetworkPolicyProtocolUDP{DestinationPort: &v1beta1.Port{Range: &v1beta1.PortRange{Start: int32(r.Intn(70000)), End: int32(r.Intn(70000))}}}})
				}
			}
			return out
		}
		for j := r.Intn(4); j > 0; j-- {
			p.Spec.Ingress = append(p.Spec.Ingress, v1beta1.ClusterNetworkPolicyIngressRule{Name: str(), Action: actions[r.Intn(4)],
				From:      []v1beta1.ClusterNetworkPolicyIngressPeer{{Namespaces: sel()}, {Pods: &v1beta1.NamespacedPod{NamespaceSelector: *sel(), PodSelector: *sel()}}}[:1+r.Intn(2)],
				Protocols: protos()})
		}
		for j := r.Intn(4); j > 0; j-- {
			var to []v1beta1.ClusterNetworkPolicyEgressPeer
			switch r.Intn(4) {
			case 0:
				to = append(to, v1beta1.ClusterNetworkPolicyEgressPeer{Networks: []v1beta1.CIDR{"10.0.0.0/8", v1beta1.CIDR(str()), "::/0"}[:1+r.Intn(3)]})
			case 1:
				to = append(to, v1beta1.ClusterNetworkPolicyEgressPeer{Nodes: sel()})
			case 2:
				to = append(to, v1beta1.ClusterNetworkPolicyEgressPeer{DomainNames: []v1beta1.DomainName{v1beta1.DomainName(str())}})
			default:
				to = append(to, v1beta1.ClusterNetworkPolicyEgressPeer{Namespaces: sel()})
			}
			p.Spec.Egress = append(p.Spec.Egress, v1beta1.ClusterNetworkPolicyEgressRule{Name: str(), Action: actions[r.Intn(4)], To: to, Protocols: protos()})
		}
		in.ClusterNetworkPolicies = append(in.ClusterNetworkPolicies, p)
	}
}

// TestHostileClusterNetworkPoliciesLoad: tables built from hostile
// clusters with hostile ClusterNetworkPolicies pass nftcheck.Check, the
// incremental Builder gives what Build gives, and every table loads into
// the kernel through the engine in one transaction each.
func TestHostileClusterNetworkPoliciesLoad(t *testing.T) {
	ns := testns.New(t, "cnphost")
	eng, err := engine.New(Table(), engine.WithNetNS(ns.Path))
	if err != nil {
		t.Fatal(err)
	}
	defer eng.Close()
	var b Builder
	cnpChains := 0
	for seed := int64(1); seed <= 150; seed++ {
		r := rand.New(rand.NewSource(seed))
		in := hostileCluster(r)
		hostileCNPs(r, &in)
		res := b.Build(in)
		want := Build(in)
		if diff := cmp.Diff(want.Desired, res.Desired); diff != "" {
			t.Fatalf("seed %d: Builder differs from Build (-Build +Builder):\n%s", seed, diff)
		}
		if diff := cmp.Diff(want.Problems, res.Problems); diff != "" {
			t.Fatalf("seed %d: Builder's problems differ from Build's:\n%s", seed, diff)
		}
		if diff := cmp.Diff(want.Warnings, res.Warnings); diff != "" {
			t.Fatalf("seed %d: Builder's warnings differ from Build's:\n%s", seed, diff)
		}
		for _, err := range nftcheck.Check(res.Desired) {
			t.Errorf("seed %d: %v", seed, err)
		}
		for _, c := range res.Desired.Chains {
			if strings.HasPrefix(c.Name, "cnp_") {
				cnpChains++
			}
		}
		if _, err := eng.Sync(context.Background(), res.Desired); err != nil {
			text, _ := engine.Render(Table(), res.Desired)
			t.Fatalf("seed %d: sync: %v\n%s", seed, err, text)
		}
	}
	if cnpChains < 50 {
		t.Errorf("only %d ClusterNetworkPolicy chains over all seeds: the clusters do not exercise the compiler", cnpChains)
	}
	t.Logf("%d ClusterNetworkPolicy pod chains loaded", cnpChains)
}
