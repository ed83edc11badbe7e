package explain

import (
	"errors"
	"strings"
	"testing"

	networkingv1 "k8s.io/api/networking/v1"
)

// Neighbour discovery between isolated pods is allowed before policy, and
// the explanation says so; other ICMPv6 is judged like any flow.
func TestExplainNeighbourDiscovery(t *testing.T) {
	in := testInput()
	in.NetworkPolicies = []*networkingv1.NetworkPolicy{
		pol("x", "deny-all", networkingv1.NetworkPolicySpec{PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress, networkingv1.PolicyTypeEgress}}),
		pol("x", "allow-web", networkingv1.NetworkPolicySpec{PodSelector: *sel("pod", "a"),
			Ingress: []networkingv1.NetworkPolicyIngressRule{{Ports: []networkingv1.NetworkPolicyPort{{}}}}}),
	}
	c, probs := New(in)
	if len(probs) != 0 {
		t.Fatal(probs)
	}
	for _, typ := range []int32{135, 136} {
		r, err := c.Explain(Flow{From: "x/b", To: "x/a", Protocol: ProtocolICMPv6, Port: typ})
		if err != nil {
			t.Fatal(err)
		}
		if !r.Allowed || !strings.Contains(r.String(), "neighbour discovery: accepted before policy") {
			t.Errorf("ICMPv6 %d between isolated pods:\n%s", typ, r)
		}
		if !r.From.Addr.Is6() {
			t.Errorf("ICMPv6 %d picked %s", typ, r.From.Addr)
		}
	}
	// An echo request gets no exception: x/b may send nothing.
	r, err := c.Explain(Flow{From: "x/b", To: "x/a", Protocol: ProtocolICMPv6, Port: 128})
	if err != nil {
		t.Fatal(err)
	}
	if r.Allowed || r.Egress.Allowed || !strings.Contains(r.Egress.Reason, "isolated by x/deny-all") {
		t.Errorf("ICMPv6 echo request:\n%s", r)
	}
	// Into x/a a port rule (TCP by default) does not admit ICMPv6, from a
	// pod that may send anything.
	r, err = c.Explain(Flow{From: "y/a", To: "x/a", Protocol: ProtocolICMPv6, Port: 128})
	if err != nil {
		t.Fatal(err)
	}
	if r.Ingress.Allowed {
		t.Errorf("ICMPv6 echo request admitted by a port rule:\n%s", r)
	}
	if _, err := c.Explain(Flow{From: "10.0.0.3", To: "10.0.0.2", Protocol: ProtocolICMPv6, Port: 135}); !errors.Is(err, ErrBadInput) {
		t.Errorf("ICMPv6 over IPv4 addresses: err = %v, want ErrBadInput", err)
	}
}

func TestParseICMPv6Type(t *testing.T) {
	for _, tt := range []struct {
		in   string
		typ  int32
		okay bool
	}{
		{"icmpv6/135", 135, true}, {"ICMPv6/0", 0, true}, {"icmpv6/256", 0, false}, {"icmpv6/nd", 0, false},
	} {
		p, n, err := ParsePort(tt.in)
		if (err == nil) != tt.okay || (tt.okay && (p != ProtocolICMPv6 || n != tt.typ)) {
			t.Errorf("ParsePort(%q) = %v, %d, %v", tt.in, p, n, err)
		}
	}
}
