package e2e

import (
	"net/netip"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nftguard/nftguard/internal/netlab"
)

// TestAgentEgressServiceFamilies runs egress through `nftguard run` against
// an API server with an IPv4 and an IPv6 Service range, so that Services
// carry the spec.ipFamilies the API server allocated, not one written by
// hand. Paths: routed nodes, IPv4 and IPv6; every verdict is the source a
// TCP connection's packets arrived with at the external host.
//
//   - an IPv6-only Service (SingleStack, [IPv6]) translates its pod's IPv6
//     traffic to its IPv6 load-balancer address and claims nothing of its
//     IPv4 traffic, which leaves with the node's masquerade as before;
//   - a dual-stack Service (RequireDualStack, [IPv4, IPv6]) with only its
//     IPv4 address in status translates IPv4 and holds IPv6 (a family it
//     claims, with no address yet); with both addresses it translates
//     both; deleted, both leave with the node's masquerade again.
func TestAgentEgressServiceFamilies(t *testing.T) {
	e := newEgressAgentLabWith(t, agentLabOptions{dualStack: true})
	v4, v6 := netlab.IPv4, netlab.IPv6
	lb4, lb6, only6 := "203.0.113.7", "2001:db8::7", "2001:db8::6"
	e.announce(t, "n1", lb4, lb6, only6)
	e.setPodLabel(e.ctx, "x/a", "app", "web")
	ann := map[string]string{"nftguard.io/egress": "true", "nftguard.io/egress-ipv6": "true"}
	single, require := corev1.IPFamilyPolicySingleStack, corev1.IPFamilyPolicyRequireDualStack

	t.Run("IPv6-only Service", func(t *testing.T) {
		s := e.familyService(t, "y", "v6", ann, map[string]string{"pod": "a"}, &single, []corev1.IPFamily{corev1.IPv6Protocol})
		e.setLB(t, s, only6)
		e.expect(t, "IPv6 translated", "y/a", v6, only6)
		e.steady(t, "IPv6 stays translated", "y/a", v6, only6)
		e.steady(t, "IPv4 not claimed: the node's masquerade", "y/a", v4, e.masq[v4])
		if err := e.admin.CoreV1().Services("y").Delete(e.ctx, "v6", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		e.expect(t, "Service deleted", "y/a", v6, e.masq[v6])
	})

	t.Run("dual-stack Service", func(t *testing.T) {
		s := e.familyService(t, "x", "web", ann, map[string]string{"app": "web"}, &require, []corev1.IPFamily{corev1.IPv4Protocol, corev1.IPv6Protocol})
		s = e.setLB(t, s, lb4)
		e.expect(t, "IPv4 address only: IPv4 translated", "x/a", v4, lb4)
		e.steady(t, "IPv4 address only: IPv6 held", "x/a", v6, "")
		e.setLB(t, s, lb4, lb6)
		e.expect(t, "both addresses: IPv6 translated", "x/a", v6, lb6)
		e.steady(t, "both addresses: IPv4 still translated", "x/a", v4, lb4)
		e.steady(t, "a pod it does not select", "y/a", v4, e.masq[v4])
		if err := e.admin.CoreV1().Services("x").Delete(e.ctx, "web", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		e.expect(t, "Service deleted, IPv4", "x/a", v4, e.masq[v4])
		e.expect(t, "Service deleted, IPv6", "x/a", v6, e.masq[v6])
	})
}

// familyService creates a LoadBalancer Service with the given family
// policy and families and checks that the API server allocated a cluster
// address of each family asked for, so that the agent sees what a
// dual-stack cluster's API server writes.
func (e *egressAgentLab) familyService(t *testing.T, ns, name string, ann, sel map[string]string, policy *corev1.IPFamilyPolicy, families []corev1.IPFamily) *corev1.Service {
	t.Helper()
	s, err := e.admin.CoreV1().Services(ns).Create(e.ctx, &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: name, Annotations: ann},
		Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer, Selector: sel, IPFamilyPolicy: policy, IPFamilies: families,
			Ports: []corev1.ServicePort{{Port: 80}}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(s.Spec.IPFamilies, families) || len(s.Spec.ClusterIPs) != len(families) {
		t.Fatalf("Service %s/%s: families %v, cluster IPs %v; want one address of each of %v", ns, name, s.Spec.IPFamilies, s.Spec.ClusterIPs, families)
	}
	for i, f := range families {
		if a := netip.MustParseAddr(s.Spec.ClusterIPs[i]); a.Is6() != (f == corev1.IPv6Protocol) {
			t.Fatalf("Service %s/%s: cluster IP %s for family %s", ns, name, a, f)
		}
	}
	return s
}

// TestAgentEgressBridged runs egress SNAT through `nftguard run` with the
// pods on a Linux bridge with br_netfilter on (netlab's bridged nodes).
// Paths: bridged nodes, IPv4 and IPv6. Pod traffic that leaves the
// cluster is bridged into br0 and then routed out of the node, so it
// crosses the inet postrouting hooks the egress chains sit in (the filter
// hold chain at priority 80, the NAT chain at 90); the sources seen at the
// external host prove it: the Service's address on the node that holds
// it, nothing from a selected pod on the node that does not (held), the
// node's masquerade for a pod not selected. br_netfilter also hands
// frames bridged between two pods of one node to the same hooks: that
// traffic must keep the pod's own source, which a recorder in the other
// pod checks.
func TestAgentEgressBridged(t *testing.T) {
	e := newEgressAgentLabWith(t, agentLabOptions{bridged: true})
	for _, n := range e.lab.Nodes {
		if n.Bridge == "" {
			t.Fatalf("node %s has no pod bridge: the lab is routed", n.Name)
		}
	}
	v4, v6 := netlab.IPv4, netlab.IPv6
	lb4, lb6 := "203.0.113.7", "2001:db8::7"
	startRecorder(t, e.lab, "y/a", 9000)
	e.setPodLabel(e.ctx, "x/a", "app", "web")
	e.setPodLabel(e.ctx, "x/b", "app", "web")
	e.announce(t, "n1", lb4, lb6)
	e.service(t, "web", map[string]string{"nftguard.io/egress": "true", "nftguard.io/egress-ipv6": "true"}, lb4, lb6)

	e.expect(t, "SNAT on create", "x/a", v4, lb4)
	e.expect(t, "SNAT on create v6", "x/a", v6, lb6)
	e.steady(t, "address not local: held", "x/b", v4, "")
	e.steady(t, "address not local: held v6", "x/b", v6, "")
	e.steady(t, "not selected", "y/a", v4, e.masq[v4])
	e.steady(t, "not selected v6", "y/a", v6, e.masq[v6])
	n1 := e.ns("n1")
	for _, f := range []netlab.Family{v4, v6} {
		xa, ya := e.lab.Endpoint("x/a").Addr(f), e.lab.Endpoint("y/a").Addr(f)
		// A rule with no target counts the connections (first packets)
		// that reach the nat table's postrouting hook between the two
		// pods: proof that bridged frames cross it.
		ipt, bits := "iptables-nft", "/32"
		if f == v6 {
			ipt, bits = "ip6tables-nft", "/128"
		}
		n1.MustExec(t, "", ipt, "-t", "nat", "-I", "POSTROUTING", "-s", xa.String()+bits, "-d", ya.String()+bits)
		for range 3 {
			if got := e.sourceAt(t, "x/a", netip.AddrPortFrom(ya, 9000)); got != xa.String() {
				t.Errorf("x/a -> y/a over the bridge (%v): arrived from %q, want x/a's own %s", f, got, xa)
			}
		}
		out := n1.MustExec(t, "", ipt, "-t", "nat", "-L", "POSTROUTING", "1", "-v", "-x", "-n")
		if fields := strings.Fields(out); len(fields) == 0 || fields[0] != "3" {
			t.Errorf("x/a -> y/a over the bridge (%v): nat postrouting saw %q, want the 3 connections counted", f, strings.TrimSpace(out))
		}
	}
	m := e.agents["n1"].metrics(t)
	if v := metricValue(m, `nftguard_egress_translated_packets_total{namespace="x",service="web"}`); v < 4 {
		t.Errorf("n1 counted %v packets translated for x/web, want the probes' packets", v)
	}
	if v := metricValue(e.agents["n2"].metrics(t), `nftguard_egress_dropped_packets_total{reason="held"}`); v < 6 {
		t.Errorf("n2 counted %v held packets dropped, want x/b's SYNs", v)
	}
}
