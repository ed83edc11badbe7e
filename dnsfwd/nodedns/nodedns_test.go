package nodedns

import (
	"net/netip"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nftguard/nftguard/fqdn"
)

// TestInternalIPs: only a Node's InternalIP addresses are listened on;
// external addresses, host names, zoned and unparsable addresses are not.
func TestInternalIPs(t *testing.T) {
	n := &corev1.Node{Status: corev1.NodeStatus{Addresses: []corev1.NodeAddress{
		{Type: corev1.NodeExternalIP, Address: "203.0.113.1"},
		{Type: corev1.NodeInternalIP, Address: "10.0.0.1"},
		{Type: corev1.NodeHostName, Address: "node-1"},
		{Type: corev1.NodeInternalIP, Address: "fe80::1%eth0"},
		{Type: corev1.NodeInternalIP, Address: "not an address"},
		{Type: corev1.NodeInternalIP, Address: "fd00::1"},
	}}}
	want := []netip.Addr{netip.MustParseAddr("10.0.0.1"), netip.MustParseAddr("fd00::1")}
	if got := internalIPs(n); !slices.Equal(got, want) {
		t.Errorf("internalIPs = %v, want %v", got, want)
	}
}

// TestKubeDNS: the cluster DNS is kube-system/kube-dns's ClusterIPs (or
// its ClusterIP alone), never a Service of that name elsewhere, a
// headless one, or an unparsable address.
func TestKubeDNS(t *testing.T) {
	svc := func(ns, name, ip string, ips ...string) *corev1.Service {
		return &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
			Spec: corev1.ServiceSpec{ClusterIP: ip, ClusterIPs: ips}}
	}
	for _, tc := range []struct {
		name     string
		services []*corev1.Service
		want     []string
	}{
		{"dual-stack", []*corev1.Service{svc("kube-system", "kube-dns", "10.96.0.10", "10.96.0.10", "fd00::a")}, []string{"10.96.0.10", "fd00::a"}},
		{"ClusterIP only", []*corev1.Service{svc("kube-system", "kube-dns", "10.96.0.10")}, []string{"10.96.0.10"}},
		{"IPv4-mapped", []*corev1.Service{svc("kube-system", "kube-dns", "", "::ffff:10.96.0.10")}, []string{"10.96.0.10"}},
		{"a tenant's kube-dns", []*corev1.Service{svc("tenant", "kube-dns", "10.96.0.66"), svc("kube-system", "coredns", "10.96.0.67")}, nil},
		{"headless", []*corev1.Service{svc("kube-system", "kube-dns", "None", "None")}, nil},
		{"none", nil, nil},
	} {
		var want []netip.Addr
		for _, a := range tc.want {
			want = append(want, netip.MustParseAddr(a))
		}
		if got := kubeDNS(tc.services); !slices.Equal(got, want) {
			t.Errorf("%s: kubeDNS = %v, want %v", tc.name, got, want)
		}
	}
}

// TestDomainSets: every set of the table once, also the sets of rules no
// local pod is a subject of now; a family a rule leaves out is no set.
func TestDomainSets(t *testing.T) {
	r1 := &fqdn.Rule{Set4: "d4_a", Set6: "d6_a"}
	r2 := &fqdn.Rule{Set4: "d4_b"}
	table := &fqdn.Table{
		Sets: []string{"d4_old", "d4_a"},
		Pods: map[netip.Addr]*fqdn.Subject{
			netip.MustParseAddr("10.0.0.1"): {Rules: []*fqdn.Rule{r1, r2}},
			netip.MustParseAddr("10.0.0.2"): {Rules: []*fqdn.Rule{r1}},
		},
	}
	got := domainSets(table)
	slices.Sort(got)
	if want := []string{"d4_a", "d4_b", "d4_old", "d6_a"}; !slices.Equal(got, want) {
		t.Errorf("domainSets = %v, want %v", got, want)
	}
	if got := domainSets(nil); got != nil {
		t.Errorf("domainSets(nil) = %v, want none", got)
	}
}
