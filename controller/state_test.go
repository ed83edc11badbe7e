package controller

import (
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	cnpv1beta1 "sigs.k8s.io/network-policy-api/apis/v1beta1"

	"github.com/nftguard/nftguard/peerslice"
	"github.com/nftguard/nftguard/podset"
)

func pod(ns, name string, ips []string, ports ...podset.Port) *podset.Pod {
	return &podset.Pod{Namespace: ns, Name: name, NodeName: "n1", IPs: ips, Labels: map[string]string{"app": name}, Ports: ports}
}

func TestStateSetPod(t *testing.T) {
	web := podset.Port{Name: "web", Protocol: corev1.ProtocolTCP, Number: 80}
	s := newState()
	steps := []struct {
		name  string
		pod   *podset.Pod // nil: deleted
		dirty bool
		recs  int
	}{
		{"no address: not published", pod("a", "p", nil), false, 0},
		{"gets its address", pod("a", "p", []string{"10.0.0.1"}, web), true, 1},
		{"same record again (a status write)", pod("a", "p", []string{"10.0.0.1"}, web), false, 1},
		{"an unreferenced port changes nothing", pod("a", "p", []string{"10.0.0.1"}, podset.Port{Name: "web", Protocol: corev1.ProtocolTCP, Number: 81}), false, 1},
		{"dual-stack", pod("a", "p", []string{"10.0.0.1", "fd00::1"}), true, 1},
		{"finished", func() *podset.Pod { p := pod("a", "p", []string{"10.0.0.1"}); p.Finished = true; return p }(), true, 0},
		{"deleted after finishing", nil, false, 0},
		{"host network", func() *podset.Pod { p := pod("a", "h", []string{"192.0.2.1"}); p.HostNetwork = true; return p }(), false, 0},
		{"another", pod("a", "q", []string{"10.0.0.2"}), true, 1},
		{"deleted", nil, true, 0},
	}
	for _, st := range steps {
		name := "p"
		if st.pod != nil {
			name = st.pod.Name
		} else if st.name == "deleted" {
			name = "q"
		}
		if got := s.setPod("a", name, st.pod); got != st.dirty {
			t.Errorf("%s: dirty %v, want %v", st.name, got, st.dirty)
		}
		if s.nrecords != st.recs || len(s.desired("a")) != st.recs {
			t.Errorf("%s: %d records (%d desired), want %d", st.name, s.nrecords, len(s.desired("a")), st.recs)
		}
	}
	if len(s.records) != 0 || len(s.pods) != 0 {
		t.Errorf("empty namespace kept: %v %v", s.records, s.pods)
	}
}

func TestStateSetPolicy(t *testing.T) {
	web := podset.Port{Name: "web", Protocol: corev1.ProtocolTCP, Number: 80}
	dns := podset.Port{Name: "dns", Protocol: corev1.ProtocolUDP, Number: 53}
	s := newState()
	s.setPod("a", "p", pod("a", "p", []string{"10.0.0.1"}, web))
	s.setPod("b", "q", pod("b", "q", []string{"10.0.0.2"}, dns, web))
	s.setPod("c", "r", pod("c", "r", []string{"10.0.0.3"}))
	steps := []struct {
		name  string
		key   string
		names []string
		dirty []string
	}{
		{"web referenced", "np/x/1", []string{"web"}, []string{"a", "b"}},
		{"a second policy naming web", "cnp//2", []string{"web"}, nil},
		{"the first drops it: still referenced", "np/x/1", nil, nil},
		{"dns too", "cnp//2", []string{"dns", "web"}, []string{"b"}},
		{"an unused name", "np/x/3", []string{"metrics"}, nil},
		{"web no longer", "cnp//2", []string{"dns"}, []string{"a", "b"}},
	}
	for _, st := range steps {
		if got := s.setPolicy(st.key, st.names); !slices.Equal(got, st.dirty) {
			t.Errorf("%s: dirty %q, want %q", st.name, got, st.dirty)
		}
	}
	want := peerslice.Peer{Name: "q", Node: "n1", IPs: []string{"10.0.0.2"}, Labels: map[string]string{"app": "q"},
		Ports: []peerslice.Port{{Name: "dns", Protocol: "UDP", Port: 53}}}
	if got := s.desired("b"); len(got) != 1 || !got[0].Equal(&want) {
		t.Errorf("b's records: %+v, want %+v", got, want)
	}
	if got := len(s.refCount); got != 2 {
		t.Errorf("%d referenced names (%v), want 2", got, s.refCount)
	}
}

func TestPortNames(t *testing.T) {
	named := func(n string) *intstr.IntOrString { v := intstr.FromString(n); return &v }
	num := intstr.FromInt32(80)
	np := &networkingv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Name: "x"}, Spec: networkingv1.NetworkPolicySpec{
		Ingress: []networkingv1.NetworkPolicyIngressRule{{Ports: []networkingv1.NetworkPolicyPort{{Port: named("web")}, {Port: &num}, {}}}},
		Egress:  []networkingv1.NetworkPolicyEgressRule{{Ports: []networkingv1.NetworkPolicyPort{{Port: named("dns")}, {Port: named("web")}}}},
	}}
	if got := npPortNames(np); !slices.Equal(got, []string{"dns", "web"}) {
		t.Errorf("NetworkPolicy: %q", got)
	}
	if got := npPortNames(&networkingv1.NetworkPolicy{}); got != nil {
		t.Errorf("empty NetworkPolicy: %q", got)
	}
	cnp := &cnpv1beta1.ClusterNetworkPolicy{Spec: cnpv1beta1.ClusterNetworkPolicySpec{
		Ingress: []cnpv1beta1.ClusterNetworkPolicyIngressRule{{Protocols: []cnpv1beta1.ClusterNetworkPolicyProtocol{{DestinationNamedPort: "metrics"}, {TCP: &cnpv1beta1.ClusterNetworkPolicyProtocolTCP{}}}}},
		Egress:  []cnpv1beta1.ClusterNetworkPolicyEgressRule{{Protocols: []cnpv1beta1.ClusterNetworkPolicyProtocol{{DestinationNamedPort: "dns"}}}},
	}}
	if got := cnpPortNames(cnp); !slices.Equal(got, []string{"dns", "metrics"}) {
		t.Errorf("ClusterNetworkPolicy: %q", got)
	}
}
