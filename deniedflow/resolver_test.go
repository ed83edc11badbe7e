package deniedflow

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	cnpv1beta1 "sigs.k8s.io/network-policy-api/apis/v1beta1"

	"github.com/nftguard/nftguard/compose"
)

// The decider judges records by the input of the last sync: nothing before
// the first sync or without ClusterNetworkPolicies, one explain.Cluster per
// sync generation however many records ask, a new one after a sync.
func TestClusterDeciderPerSync(t *testing.T) {
	var d clusterDecider
	if d.get() != nil {
		t.Fatal("a cluster before the first sync")
	}
	d.synced(compose.Input{NodeName: "n1"})
	if d.get() != nil {
		t.Fatal("a cluster without ClusterNetworkPolicies")
	}
	in := compose.Input{NodeName: "n1", ClusterNetworkPolicies: []*cnpv1beta1.ClusterNetworkPolicy{{ObjectMeta: metav1.ObjectMeta{Name: "p"},
		Spec: cnpv1beta1.ClusterNetworkPolicySpec{Tier: cnpv1beta1.AdminTier, Subject: cnpv1beta1.ClusterNetworkPolicySubject{Namespaces: &metav1.LabelSelector{}}}}}}
	d.synced(in)
	first := d.get()
	if first == nil || d.get() != first {
		t.Fatalf("built %p then %p, want one cluster per sync", first, d.get())
	}
	d.synced(in)
	if second := d.get(); second == nil || second == first {
		t.Fatalf("after a sync: %p, want a new cluster", second)
	}
}
