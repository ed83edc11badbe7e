package controller

import (
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/tools/cache"
	cnpv1alpha2 "sigs.k8s.io/network-policy-api/apis/v1alpha2"

	"github.com/nftguard/nftguard/peerslice"
)

// TestTransform: what the caches keep of each kind — and nothing of the
// API objects beyond it.
func TestTransform(t *testing.T) {
	meta := metav1.ObjectMeta{Namespace: "a", Name: "p", UID: "u1", ResourceVersion: "7",
		Annotations: map[string]string{"big": "x"}, ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "kubelet"}}}

	pod := &corev1.Pod{ObjectMeta: meta, Spec: corev1.PodSpec{NodeName: "n1", Containers: []corev1.Container{{
		Name: "c", Ports: []corev1.ContainerPort{{Name: "web", ContainerPort: 80}}}}},
		Status: corev1.PodStatus{Phase: corev1.PodRunning, PodIPs: []corev1.PodIP{{IP: "10.0.0.1"}}}}
	pod.Labels = map[string]string{"app": "p"}
	got, err := transform(pod)
	if err != nil {
		t.Fatal(err)
	}
	po, ok := got.(*podObj)
	if !ok {
		t.Fatalf("pod: %T", got)
	}
	if po.Annotations != nil || po.ManagedFields != nil || po.Labels != nil || po.ResourceVersion != "7" || po.Namespace != "a" {
		t.Errorf("pod metadata kept: %+v", po.ObjectMeta)
	}
	if p := po.pod; p.NodeName != "n1" || !slices.Equal(p.IPs, []string{"10.0.0.1"}) || p.Labels["app"] != "p" || len(p.Ports) != 1 {
		t.Errorf("pod record: %+v", p)
	}

	web := intstr.FromString("web")
	np := &networkingv1.NetworkPolicy{ObjectMeta: meta, Spec: networkingv1.NetworkPolicySpec{
		Ingress: []networkingv1.NetworkPolicyIngressRule{{Ports: []networkingv1.NetworkPolicyPort{{Port: &web}}}}}}
	if got, err = transform(np); err != nil {
		t.Fatal(err)
	}
	if pol, ok := got.(*policyObj); !ok || !slices.Equal(pol.names, []string{"web"}) || pol.Annotations != nil {
		t.Errorf("NetworkPolicy: %+v", got)
	}

	old := &cnpv1alpha2.ClusterNetworkPolicy{ObjectMeta: metav1.ObjectMeta{Name: "c"}, Spec: cnpv1alpha2.ClusterNetworkPolicySpec{
		Tier: cnpv1alpha2.AdminTier,
		Egress: []cnpv1alpha2.ClusterNetworkPolicyEgressRule{{Name: "r", Action: cnpv1alpha2.ClusterNetworkPolicyRuleActionAccept,
			Protocols: []cnpv1alpha2.ClusterNetworkPolicyProtocol{{DestinationNamedPort: "dns"}}}}}}
	if got, err = transform(old); err != nil {
		t.Fatal(err)
	}
	if pol, ok := got.(*policyObj); !ok || !slices.Equal(pol.names, []string{"dns"}) {
		t.Errorf("v1alpha2 ClusterNetworkPolicy: %+v", got)
	}

	s := &peerslice.PeerSlice{ObjectMeta: meta, Peers: []peerslice.Peer{{Name: "p", IPs: []string{"10.0.0.1"}}}}
	u, err := peerslice.ToUnstructured(s)
	if err != nil {
		t.Fatal(err)
	}
	if got, err = transform(u); err != nil {
		t.Fatal(err)
	}
	if ps, ok := got.(*peerslice.PeerSlice); !ok || ps.ManagedFields != nil || len(ps.Peers) != 1 || ps.ResourceVersion != "7" {
		t.Errorf("PeerSlice: %+v", got)
	}

	// Tombstones pass through unchanged; the handlers unwrap them.
	tomb := cache.DeletedFinalStateUnknown{Key: "a/p", Obj: po}
	if got, err = transform(tomb); err != nil || unwrap(got) != po {
		t.Errorf("tombstone: %+v, %v", got, err)
	}
}
