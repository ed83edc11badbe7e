package explain

import (
	"errors"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/nftguard/nftguard/podset"
)

func testPod(ns, name, node string, labels map[string]string, ips ...string) *corev1.Pod {
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: labels}}
	p.Spec.NodeName = node
	p.Status.Phase = corev1.PodRunning
	for _, ip := range ips {
		p.Status.PodIPs = append(p.Status.PodIPs, corev1.PodIP{IP: ip})
	}
	p.Spec.Containers = []corev1.Container{{Name: "c", Ports: []corev1.ContainerPort{
		{Name: "http", ContainerPort: 8080},
		{Name: "dns", ContainerPort: 53, Protocol: corev1.ProtocolUDP},
	}}}
	return p
}

func testInput() Input {
	host := testPod("y", "host", "n1", map[string]string{"pod": "host"}, "192.168.0.1")
	host.Spec.HostNetwork = true
	dead := testPod("x", "dead", "n1", map[string]string{"pod": "dead"}, "10.0.0.9")
	dead.Status.Phase = corev1.PodSucceeded
	return Input{
		Namespaces: []*corev1.Namespace{
			{ObjectMeta: metav1.ObjectMeta{Name: "x", Labels: map[string]string{"ns": "x"}}},
			{ObjectMeta: metav1.ObjectMeta{Name: "y", Labels: map[string]string{"ns": "y"}}},
		},
		Nodes: []*corev1.Node{
			{ObjectMeta: metav1.ObjectMeta{Name: "n1"}, Status: corev1.NodeStatus{Addresses: []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "192.168.0.1"}, {Type: corev1.NodeExternalIP, Address: "203.0.113.1"}}}},
			{ObjectMeta: metav1.ObjectMeta{Name: "n2"}, Status: corev1.NodeStatus{Addresses: []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "192.168.0.2"}}}},
		},
		Pods: podset.FromAPIList([]*corev1.Pod{
			testPod("x", "a", "n1", map[string]string{"pod": "a"}, "10.0.0.2", "fd00::2"),
			testPod("x", "b", "n1", map[string]string{"pod": "b"}, "10.0.0.3", "fd00::3"),
			testPod("y", "a", "n2", map[string]string{"pod": "a"}, "10.0.1.2", "fd00:1::2"),
			host, dead,
		}),
	}
}

func pol(ns, name string, s networkingv1.NetworkPolicySpec) *networkingv1.NetworkPolicy {
	return &networkingv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Spec: s}
}

func sel(kv ...string) *metav1.LabelSelector {
	m := map[string]string{}
	for i := 0; i+1 < len(kv); i += 2 {
		m[kv[i]] = kv[i+1]
	}
	return &metav1.LabelSelector{MatchLabels: m}
}

func portOf(proto corev1.Protocol, v intstr.IntOrString, end ...int32) networkingv1.NetworkPolicyPort {
	p := networkingv1.NetworkPolicyPort{Protocol: &proto, Port: &v}
	if len(end) > 0 {
		p.EndPort = &end[0]
	}
	return p
}

var (
	tcp = corev1.ProtocolTCP
	udp = corev1.ProtocolUDP

	denyIngressX = pol("x", "deny-in", networkingv1.NetworkPolicySpec{PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress}})
	denyEgressX  = pol("x", "deny-out", networkingv1.NetworkPolicySpec{PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeEgress}})
	in           = func(peers []networkingv1.NetworkPolicyPeer, ports ...networkingv1.NetworkPolicyPort) []networkingv1.NetworkPolicyIngressRule {
		return []networkingv1.NetworkPolicyIngressRule{{From: peers, Ports: ports}}
	}
	out = func(peers []networkingv1.NetworkPolicyPeer, ports ...networkingv1.NetworkPolicyPort) []networkingv1.NetworkPolicyEgressRule {
		return []networkingv1.NetworkPolicyEgressRule{{To: peers, Ports: ports}}
	}
)

func TestExplain(t *testing.T) {
	tests := []struct {
		name     string
		policies []*networkingv1.NetworkPolicy
		nodeName string
		flow     Flow
		egress   string // substring of the egress decision
		ingress  string // substring of the ingress decision
		allowed  bool
	}{
		{name: "no policies",
			flow:   Flow{From: "x/b", To: "x/a", Protocol: tcp, Port: 80},
			egress: "allowed: not isolated for egress", ingress: "allowed: not isolated for ingress", allowed: true},
		{name: "default deny ingress",
			policies: []*networkingv1.NetworkPolicy{denyIngressX},
			flow:     Flow{From: "x/b", To: "x/a", Protocol: tcp, Port: 80},
			ingress:  "denied: isolated by x/deny-in, no rule allowed"},
		{name: "two isolating policies are both named",
			policies: []*networkingv1.NetworkPolicy{denyIngressX, pol("x", "only-b", networkingv1.NetworkPolicySpec{PodSelector: *sel("pod", "a"), Ingress: in([]networkingv1.NetworkPolicyPeer{{PodSelector: sel("pod", "c")}})})},
			flow:     Flow{From: "x/b", To: "x/a", Protocol: tcp, Port: 80},
			ingress:  "isolated by x/deny-in, x/only-b, no rule allowed"},
		{name: "a pod reaches itself",
			policies: []*networkingv1.NetworkPolicy{denyIngressX, denyEgressX},
			flow:     Flow{From: "x/a", To: "x/a", Protocol: tcp, Port: 80},
			egress:   "itself", ingress: "itself", allowed: true},
		{name: "podSelector peer in the policy's namespace",
			policies: []*networkingv1.NetworkPolicy{pol("x", "allow-b", networkingv1.NetworkPolicySpec{PodSelector: *sel("pod", "a"), Ingress: in([]networkingv1.NetworkPolicyPeer{{PodSelector: sel("pod", "b")}})})},
			flow:     Flow{From: "x/b", To: "x/a", Protocol: tcp, Port: 80},
			ingress:  "allowed by x/allow-b ingress[0] (peer from[0] podSelector pod=b, port any port)", allowed: true},
		{name: "podSelector does not reach into other namespaces",
			policies: []*networkingv1.NetworkPolicy{pol("x", "allow-a", networkingv1.NetworkPolicySpec{PodSelector: *sel("pod", "a"), Ingress: in([]networkingv1.NetworkPolicyPeer{{PodSelector: sel("pod", "a")}})})},
			flow:     Flow{From: "y/a", To: "x/a", Protocol: tcp, Port: 80},
			ingress:  "denied"},
		{name: "namespaceSelector AND podSelector in one peer",
			policies: []*networkingv1.NetworkPolicy{pol("x", "and", networkingv1.NetworkPolicySpec{Ingress: in([]networkingv1.NetworkPolicyPeer{{NamespaceSelector: sel("ns", "y"), PodSelector: sel("pod", "b")}})})},
			flow:     Flow{From: "y/a", To: "x/a", Protocol: tcp, Port: 80},
			ingress:  "denied"},
		{name: "namespaceSelector by metadata name",
			policies: []*networkingv1.NetworkPolicy{pol("x", "by-name", networkingv1.NetworkPolicySpec{Ingress: in([]networkingv1.NetworkPolicyPeer{{NamespaceSelector: sel(corev1.LabelMetadataName, "y")}})})},
			flow:     Flow{From: "y/a", To: "x/a", Protocol: tcp, Port: 80},
			ingress:  "from[0] namespaceSelector kubernetes.io/metadata.name=y", allowed: true},
		{name: "number port mismatch",
			policies: []*networkingv1.NetworkPolicy{pol("x", "p81", networkingv1.NetworkPolicySpec{Ingress: in(nil, portOf(tcp, intstr.FromInt32(81)))})},
			flow:     Flow{From: "x/b", To: "x/a", Protocol: tcp, Port: 80},
			ingress:  "denied"},
		{name: "protocol defaults to TCP",
			policies: []*networkingv1.NetworkPolicy{pol("x", "p80", networkingv1.NetworkPolicySpec{Ingress: in(nil, networkingv1.NetworkPolicyPort{Port: &[]intstr.IntOrString{intstr.FromInt32(80)}[0]})})},
			flow:     Flow{From: "x/b", To: "x/a", Protocol: udp, Port: 80},
			ingress:  "denied"},
		{name: "endPort range",
			policies: []*networkingv1.NetworkPolicy{pol("x", "range", networkingv1.NetworkPolicySpec{Ingress: in(nil, portOf(tcp, intstr.FromInt32(80), 90))})},
			flow:     Flow{From: "x/b", To: "x/a", Protocol: tcp, Port: 85},
			ingress:  "ports[0] TCP/80-90", allowed: true},
		{name: "protocol without port is every port",
			policies: []*networkingv1.NetworkPolicy{pol("x", "udp", networkingv1.NetworkPolicySpec{Ingress: in(nil, networkingv1.NetworkPolicyPort{Protocol: &udp})})},
			flow:     Flow{From: "x/b", To: "x/a", Protocol: udp, Port: 5353},
			ingress:  "ports[0] UDP (every port)", allowed: true},
		{name: "named port resolves on the destination",
			policies: []*networkingv1.NetworkPolicy{pol("x", "named", networkingv1.NetworkPolicySpec{Ingress: in(nil, portOf(tcp, intstr.FromString("http")))})},
			flow:     Flow{From: "x/b", To: "x/a", Protocol: tcp, Port: 8080},
			ingress:  "ports[0] TCP/http (8080 on x/a)", allowed: true},
		{name: "named port needs its protocol",
			policies: []*networkingv1.NetworkPolicy{pol("x", "named", networkingv1.NetworkPolicySpec{Ingress: in(nil, portOf(udp, intstr.FromString("http")))})},
			flow:     Flow{From: "x/b", To: "x/a", Protocol: udp, Port: 8080},
			ingress:  "denied"},
		{name: "egress named port to an address that is no pod",
			policies: []*networkingv1.NetworkPolicy{pol("x", "named", networkingv1.NetworkPolicySpec{PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeEgress}, Egress: out(nil, portOf(tcp, intstr.FromString("http")))})},
			flow:     Flow{From: "x/a", To: "8.8.8.8", Protocol: tcp, Port: 8080},
			egress:   "denied", ingress: "not a pod"},
		{name: "egress defaults when the policy has egress rules",
			policies: []*networkingv1.NetworkPolicy{pol("x", "eg", networkingv1.NetworkPolicySpec{Egress: out([]networkingv1.NetworkPolicyPeer{{PodSelector: sel("pod", "b")}})})},
			flow:     Flow{From: "x/a", To: "y/a", Protocol: tcp, Port: 80},
			egress:   "isolated by x/eg", ingress: "allowed"},
		{name: "ipBlock except",
			policies: []*networkingv1.NetworkPolicy{pol("x", "cidr", networkingv1.NetworkPolicySpec{PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeEgress},
				Egress: out([]networkingv1.NetworkPolicyPeer{{IPBlock: &networkingv1.IPBlock{CIDR: "10.0.0.0/16", Except: []string{"10.0.1.0/24"}}}})})},
			flow:   Flow{From: "x/a", To: "y/a", Protocol: tcp, Port: 80},
			egress: "denied"},
		{name: "ipBlock matches a pod address",
			policies: []*networkingv1.NetworkPolicy{pol("x", "cidr", networkingv1.NetworkPolicySpec{PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeEgress},
				Egress: out([]networkingv1.NetworkPolicyPeer{{IPBlock: &networkingv1.IPBlock{CIDR: "10.0.0.0/16", Except: []string{"10.0.1.0/24"}}}})})},
			flow:   Flow{From: "x/a", To: "x/b", Protocol: tcp, Port: 80},
			egress: "to[0] ipBlock 10.0.0.0/16 except 10.0.1.0/24", allowed: true},
		{name: "IPv4 ipBlock does not match the IPv6 flow",
			policies: []*networkingv1.NetworkPolicy{pol("x", "cidr", networkingv1.NetworkPolicySpec{PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeEgress},
				Egress: out([]networkingv1.NetworkPolicyPeer{{IPBlock: &networkingv1.IPBlock{CIDR: "10.0.0.0/8"}}})})},
			flow:   Flow{From: "x/a", To: "x/b", Protocol: tcp, Port: 80, Family: 6},
			egress: "denied"},
		{name: "an external address is judged only by ipBlocks",
			policies: []*networkingv1.NetworkPolicy{pol("x", "any-pod", networkingv1.NetworkPolicySpec{Ingress: in([]networkingv1.NetworkPolicyPeer{{NamespaceSelector: &metav1.LabelSelector{}}})})},
			flow:     Flow{From: "8.8.8.8", To: "x/a", Protocol: tcp, Port: 80},
			egress:   "not a pod", ingress: "denied"},
		{name: "the pod's own node is always allowed",
			policies: []*networkingv1.NetworkPolicy{denyIngressX},
			flow:     Flow{From: "192.168.0.1", To: "x/a", Protocol: tcp, Port: 80},
			ingress:  "own node", allowed: true},
		{name: "egress to the pod's own node meets egress policy",
			policies: []*networkingv1.NetworkPolicy{denyEgressX},
			flow:     Flow{From: "x/a", To: "192.168.0.1", Protocol: tcp, Port: 10250},
			egress:   "denied: isolated by x/deny-out, no rule allowed\n    note: 192.168.0.1 is an address of the pod's own node n1"},
		{name: "an ipBlock of the node's address allows egress to it",
			policies: []*networkingv1.NetworkPolicy{pol("x", "to-node", networkingv1.NetworkPolicySpec{PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeEgress},
				Egress: out([]networkingv1.NetworkPolicyPeer{{IPBlock: &networkingv1.IPBlock{CIDR: "192.168.0.1/32"}}})})},
			flow:   Flow{From: "x/a", To: "192.168.0.1", Protocol: tcp, Port: 10250},
			egress: "allowed by x/to-node egress[0]", ingress: "not a pod", allowed: true},
		{name: "egress to a hostNetwork pod on the pod's own node meets egress policy",
			policies: []*networkingv1.NetworkPolicy{denyEgressX},
			flow:     Flow{From: "x/a", To: "y/host", Protocol: tcp, Port: 80},
			egress:   "denied: isolated by x/deny-out", ingress: "hostNetwork"},
		{name: "an ExternalIP of the pod's own node is not the node's own traffic",
			policies: []*networkingv1.NetworkPolicy{denyIngressX},
			flow:     Flow{From: "203.0.113.1", To: "x/a", Protocol: tcp, Port: 80},
			egress:   "not a pod", ingress: "denied: isolated by x/deny-in"},
		{name: "an ipBlock an older API server stored means what it meant (IPv4-mapped except)",
			policies: []*networkingv1.NetworkPolicy{pol("x", "stored", networkingv1.NetworkPolicySpec{PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeEgress},
				Egress: out([]networkingv1.NetworkPolicyPeer{{IPBlock: &networkingv1.IPBlock{CIDR: "10.0.0.0/8", Except: []string{"::ffff:10.0.1.0/120"}}}})})},
			flow:   Flow{From: "x/a", To: "y/a", Protocol: tcp, Port: 80},
			egress: "denied: isolated by x/stored"},
		{name: "an ipBlock with host bits an older API server stored is its network",
			policies: []*networkingv1.NetworkPolicy{pol("x", "stored", networkingv1.NetworkPolicySpec{PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeEgress},
				Egress: out([]networkingv1.NetworkPolicyPeer{{IPBlock: &networkingv1.IPBlock{CIDR: "10.0.1.9/24"}}})})},
			flow:   Flow{From: "x/a", To: "y/a", Protocol: tcp, Port: 80},
			egress: "allowed by x/stored egress[0]", ingress: "not isolated", allowed: true},
		{name: "another node is not",
			policies: []*networkingv1.NetworkPolicy{denyIngressX},
			flow:     Flow{From: "192.168.0.2", To: "x/a", Protocol: tcp, Port: 80},
			ingress:  "denied"},
		{name: "a hostNetwork pod on the same node is node traffic",
			policies: []*networkingv1.NetworkPolicy{denyIngressX},
			flow:     Flow{From: "y/host", To: "x/a", Protocol: tcp, Port: 80},
			egress:   "hostNetwork", ingress: "own node", allowed: true},
		{name: "a hostNetwork pod is not selected by a namespaceSelector",
			policies: []*networkingv1.NetworkPolicy{pol("y", "deny", networkingv1.NetworkPolicySpec{PodSelector: *sel("pod", "a"), Ingress: in([]networkingv1.NetworkPolicyPeer{{NamespaceSelector: sel("ns", "y")}})})},
			flow:     Flow{From: "y/host", To: "y/a", Protocol: tcp, Port: 80},
			ingress:  "denied"},
		{name: "a pod named by its address",
			policies: []*networkingv1.NetworkPolicy{pol("x", "allow-b", networkingv1.NetworkPolicySpec{Ingress: in([]networkingv1.NetworkPolicyPeer{{PodSelector: sel("pod", "b")}})})},
			flow:     Flow{From: "10.0.0.3", To: "10.0.0.2", Protocol: tcp, Port: 80},
			ingress:  "allowed by x/allow-b", allowed: true},
		{name: "not enforced for pods on other nodes",
			policies: []*networkingv1.NetworkPolicy{pol("y", "deny", networkingv1.NetworkPolicySpec{})},
			nodeName: "n1",
			flow:     Flow{From: "x/a", To: "y/a", Protocol: tcp, Port: 80},
			ingress:  "not enforced on node n1", allowed: true},
		{name: "the first allowing rule in policy order decides",
			policies: []*networkingv1.NetworkPolicy{
				pol("x", "z-all", networkingv1.NetworkPolicySpec{Ingress: []networkingv1.NetworkPolicyIngressRule{{}}}),
				pol("x", "a-80", networkingv1.NetworkPolicySpec{Ingress: []networkingv1.NetworkPolicyIngressRule{{Ports: []networkingv1.NetworkPolicyPort{portOf(tcp, intstr.FromInt32(81))}}, {Ports: []networkingv1.NetworkPolicyPort{portOf(tcp, intstr.FromInt32(80))}}}}),
			},
			flow:    Flow{From: "x/b", To: "x/a", Protocol: tcp, Port: 80},
			ingress: "allowed by x/a-80 ingress[1]", allowed: true},
		{name: "egress deny wins over an ingress allow",
			policies: []*networkingv1.NetworkPolicy{denyEgressX, pol("y", "all", networkingv1.NetworkPolicySpec{Ingress: []networkingv1.NetworkPolicyIngressRule{{}}})},
			flow:     Flow{From: "x/a", To: "y/a", Protocol: tcp, Port: 80},
			egress:   "isolated by x/deny-out", ingress: "allowed by y/all ingress[0] (peer any peer, port any port)"},
		{name: "an invalid policy isolates its pods and allows nothing",
			policies: []*networkingv1.NetworkPolicy{pol("x", "bad", networkingv1.NetworkPolicySpec{Ingress: in([]networkingv1.NetworkPolicyPeer{{IPBlock: &networkingv1.IPBlock{CIDR: "nope"}}})})},
			flow:     Flow{From: "x/b", To: "x/a", Protocol: tcp, Port: 80},
			ingress:  "isolated by x/bad, no rule allowed"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := testInput()
			in.NetworkPolicies = tt.policies
			in.NodeName = tt.nodeName
			c, _ := New(in)
			r, err := c.Explain(tt.flow)
			if err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(r.Egress.String(), tt.egress) {
				t.Errorf("egress = %q, want it to contain %q", r.Egress, tt.egress)
			}
			if !strings.Contains(r.Ingress.String(), tt.ingress) {
				t.Errorf("ingress = %q, want it to contain %q", r.Ingress, tt.ingress)
			}
			if r.Allowed != tt.allowed {
				t.Errorf("allowed = %v, want %v\n%s", r.Allowed, tt.allowed, r)
			}
			if r.Allowed != (r.Egress.Allowed && r.Ingress.Allowed) {
				t.Errorf("overall verdict disagrees with the sides:\n%s", r)
			}
		})
	}
}

func TestExplainBadInput(t *testing.T) {
	c, _ := New(testInput())
	for _, f := range []Flow{
		{From: "x/nope", To: "x/a", Protocol: tcp, Port: 80},
		{From: "x/a", To: "x/dead", Protocol: tcp, Port: 80},
		{From: "nonsense", To: "x/a", Protocol: tcp, Port: 80},
		{From: "x/a", To: "x/b", Protocol: "ICMP", Port: 80},
		{From: "x/a", To: "x/b", Protocol: tcp, Port: 0},
		{From: "10.0.0.3", To: "fd00::2", Protocol: tcp, Port: 80},
		{From: "x/a", To: "y/host", Protocol: tcp, Port: 80, Family: 6},
	} {
		if _, err := c.Explain(f); !errors.Is(err, ErrBadInput) {
			t.Errorf("%+v: err = %v, want ErrBadInput", f, err)
		}
	}
}

func TestParsePort(t *testing.T) {
	for _, tt := range []struct {
		in    string
		proto corev1.Protocol
		port  int32
		ok    bool
	}{
		{"tcp/80", tcp, 80, true},
		{"UDP/53", udp, 53, true},
		{"sctp/65535", corev1.ProtocolSCTP, 65535, true},
		{"tcp/0", "", 0, false},
		{"icmp/1", "", 0, false},
		{"80", "", 0, false},
		{"tcp/http", "", 0, false},
	} {
		p, n, err := ParsePort(tt.in)
		if (err == nil) != tt.ok || p != tt.proto || n != tt.port {
			t.Errorf("ParsePort(%q) = %v, %d, %v", tt.in, p, n, err)
		}
	}
}

func TestProblems(t *testing.T) {
	in := testInput()
	in.NetworkPolicies = []*networkingv1.NetworkPolicy{
		pol("x", "bad", networkingv1.NetworkPolicySpec{Ingress: in2(networkingv1.NetworkPolicyPeer{IPBlock: &networkingv1.IPBlock{CIDR: "10.0.0.0/8", Except: []string{"11.0.0.0/8"}}})}),
	}
	_, probs := New(in)
	if len(probs) != 1 || !strings.Contains(probs[0].Error(), "NetworkPolicy x/bad: spec.ingress[0].from[0].ipBlock.except[0]") {
		t.Errorf("problems = %v", probs)
	}
}

func in2(p networkingv1.NetworkPolicyPeer) []networkingv1.NetworkPolicyIngressRule {
	return []networkingv1.NetworkPolicyIngressRule{{From: []networkingv1.NetworkPolicyPeer{p}}}
}
