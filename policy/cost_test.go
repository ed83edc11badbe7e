package policy

import (
	"context"
	"fmt"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/nftguard/nftguard/engine"
	"github.com/nftguard/nftguard/internal/apitest"
	"github.com/nftguard/nftguard/internal/podtest"
	"github.com/nftguard/nftguard/internal/testns"
	"github.com/nftguard/nftguard/npset"
)

// manyPorts is one policy of 20,000 ports (10,000 TCP and 10,000 UDP,
// never adjacent) in both directions, with pod-selector and ipBlock peers,
// over 10 dual-stack local pods.
func manyPorts() Input {
	var pods []*corev1.Pod
	for i := range 10 {
		pods = append(pods, apitest.Pod("x", fmt.Sprintf("p%d", i), fmt.Sprintf("10.0.0.%d", i+1), apitest.IPs(fmt.Sprintf("10.0.0.%d", i+1), fmt.Sprintf("fd00::%d", i+1))))
	}
	var ports []networkingv1.NetworkPolicyPort
	udp := corev1.ProtocolUDP
	for i := range 20000 {
		p := tcp(2 * (i + 1)) // never adjacent: 20,000 elements, not one range
		if i%2 == 1 {
			p.Protocol = &udp
		}
		ports = append(ports, p)
	}
	np := netpol("x", "many", metav1.LabelSelector{}, func(s *networkingv1.NetworkPolicySpec) {
		peers := []networkingv1.NetworkPolicyPeer{{PodSelector: &metav1.LabelSelector{}}, {IPBlock: &networkingv1.IPBlock{CIDR: "192.0.2.0/24"}}}
		s.Ingress = []networkingv1.NetworkPolicyIngressRule{{From: peers, Ports: ports}}
		s.Egress = []networkingv1.NetworkPolicyEgressRule{{To: peers, Ports: ports}}
	})
	return Input{NodeName: "n1", Namespaces: []*corev1.Namespace{apitest.Namespace("x")},
		Pods: podtest.Set(pods), Policies: npset.New([]*networkingv1.NetworkPolicy{np})}
}

// The 20,000-port policy in the kernel: the engine loads it in one batch,
// nft lists it as the engine renders it (the port sets as nft writes
// interval sets), nft -f of that listing is a table a fresh engine finds
// nothing to change in, and the kernel holds well under 1,000 rules.
func TestManyPortsInTheKernel(t *testing.T) {
	ctx := context.Background()
	out := Compile(manyPorts())
	d := &engine.Desired{Chains: out.Chains, Sets: out.Sets}
	table := engine.Table{Name: "nftguard"}
	ns := testns.New(t, "ports")
	eng, err := engine.New(table, engine.WithNetNS(ns.Path))
	if err != nil {
		t.Fatal(err)
	}
	defer eng.Close()
	st, err := eng.Sync(ctx, d)
	if err != nil {
		t.Fatalf("sync: %v", err)
	}
	t.Logf("first sync: %d messages, %d bytes", st.Messages, st.Bytes)
	listed := ns.MustExec(t, "", "nft", "list", "table", "inet", "nftguard")
	rules := 0
	for _, l := range strings.Split(listed, "\n") {
		l = strings.TrimSpace(l)
		if l != "" && !strings.HasPrefix(l, "type ") && !strings.HasPrefix(l, "flags ") && !strings.HasPrefix(l, "comment ") &&
			!strings.HasPrefix(l, "elements ") && !strings.HasPrefix(l, "policy ") && !strings.HasSuffix(l, "{") && l != "}" &&
			!strings.Contains(l, ",") && !strings.HasSuffix(l, "}") {
			rules++
		}
	}
	t.Logf("nft lists %d rules", rules)
	if want := 150; rules > want || rules < 100 {
		t.Errorf("nft lists %d rules, want 100 to %d (126 compiled)", rules, want)
	}
	ns2 := testns.New(t, "ports2")
	ns2.MustExec(t, listed, "nft", "-f", "-")
	eng2, err := engine.New(table, engine.WithNetNS(ns2.Path))
	if err != nil {
		t.Fatal(err)
	}
	defer eng2.Close()
	if st, err := eng2.Sync(ctx, d); err != nil || st.Messages != 0 {
		t.Errorf("a fresh engine over nft -f of nft's listing: %d messages, %v", st.Messages, err)
	}
}

// size is what a table costs the kernel: its rules and set elements.
func size(out Output) (rules, elems int) {
	for _, c := range out.Chains {
		rules += len(c.Rules)
	}
	for _, s := range out.Sets {
		elems += len(s.Elements)
	}
	return rules, elems
}

// A policy of 20,000 ports (the 329 KB policy that compiled to 800,000
// rules when every port was a rule in every selected pod's chain) costs a
// few rules per peer kind and one set element per port.
func TestManyPortsAreOneSet(t *testing.T) {
	out := compileChecked(t, manyPorts())
	if len(out.Problems) > 0 {
		t.Fatal(out.Problems)
	}
	rules, elems := size(out)
	t.Logf("20,000 ports, 10 local pods, 3 peer kinds, both directions: %d rules, %d set elements", rules, elems)
	if rules >= 1000 {
		t.Errorf("%d rules, want well under 1,000", rules)
	}
	// Each direction: 10,000 tcp and 10,000 udp elements; the pod set
	// (10 + 10 addresses) is shared by both directions; the CIDR set is
	// one per direction; the dispatch maps hold the 20 addresses twice.
	if want := 2*20000 + 20 + 2 + 4*10; elems != want {
		t.Errorf("%d set elements, want %d", elems, want)
	}
	eq(t, "ingress of p0", ruleTexts(chain(t, out, "np_ing_x_p0")), []string{
		"ct state invalid drop", "ip saddr 10.0.0.1 accept", "ip6 saddr fd00::1 accept",
		"ip saddr @" + lookedUp(t, out, "np_ing_x_p0", "ip saddr @").Name + " tcp dport @np_x_many_in0_tcp accept",
		"ip saddr @" + lookedUp(t, out, "np_ing_x_p0", "ip saddr @").Name + " udp dport @np_x_many_in0_udp accept",
		"ip6 saddr @" + lookedUp(t, out, "np_ing_x_p0", "ip6 saddr @").Name + " tcp dport @np_x_many_in0_tcp accept",
		"ip6 saddr @" + lookedUp(t, out, "np_ing_x_p0", "ip6 saddr @").Name + " udp dport @np_x_many_in0_udp accept",
		"ip saddr @np_x_many_in0_cidr4 tcp dport @np_x_many_in0_tcp accept",
		"ip saddr @np_x_many_in0_cidr4 udp dport @np_x_many_in0_udp accept",
		"drop",
	})
}

// 100 policies that each allow egress to every namespace (220 bytes
// each) select the same pods: they share one set per family, whose
// elements are the cluster's pod addresses once, not 100 times.
func TestSameSelectionIsOneSet(t *testing.T) {
	nss, pods, nps := hundredNamespaces(func(s *networkingv1.NetworkPolicySpec) {
		s.Egress = []networkingv1.NetworkPolicyEgressRule{{To: []networkingv1.NetworkPolicyPeer{{NamespaceSelector: &metav1.LabelSelector{}}}}}
	})
	out := compileChecked(t, Input{NodeName: "n1", Namespaces: nss, Pods: podtest.Set(pods), Policies: npset.New(nps)})
	peerSets := setsNamed(out, "np_sel_")
	if len(peerSets) != 1 || len(peerSets[0].Elements) != 1000 {
		t.Fatalf("%d peer sets, want 1 of the 1,000 pod addresses: %v", len(peerSets), setNames(out.Sets))
	}
	rules, elems := size(out)
	t.Logf("100 all-namespace policies, 1,000 pods (100 local): %d rules, %d set elements", rules, elems)
	if elems != 1000+2*100 { // the shared set, and the ingress and egress maps (100 local pods each)
		t.Errorf("%d set elements, want 1,200", elems)
	}
}

// setsNamed are the sets whose names start with prefix.
func setsNamed(out Output, prefix string) []engine.Set {
	var sets []engine.Set
	for _, s := range out.Sets {
		if strings.HasPrefix(s.Name, prefix) {
			sets = append(sets, s)
		}
	}
	return sets
}

func setNames(sets []engine.Set) []string {
	var out []string
	for _, s := range sets {
		out = append(out, s.Name)
	}
	return out
}

// 100 namespaces each allowing egress to every namespace on a named port
// (the pattern that rendered in 12 s and 2.95 GB at 5,000 namespaces):
// one set of address . protocol . port tuples, not one per policy.
func TestSameNamedPortsAreOneSet(t *testing.T) {
	nss, pods, nps := hundredNamespaces(func(s *networkingv1.NetworkPolicySpec) {
		s.PolicyTypes = []networkingv1.PolicyType{networkingv1.PolicyTypeEgress}
		s.Egress = []networkingv1.NetworkPolicyEgressRule{{To: []networkingv1.NetworkPolicyPeer{{NamespaceSelector: &metav1.LabelSelector{}}},
			Ports: []networkingv1.NetworkPolicyPort{protoPort(corev1.ProtocolTCP, intstr.FromString("http"))}}}
	})
	out := compileChecked(t, Input{NodeName: "n1", Namespaces: nss, Pods: podtest.Set(pods), Policies: npset.New(nps)})
	named := setsNamed(out, "np_named_")
	if len(named) != 1 || len(named[0].Elements) != 1000 {
		t.Fatalf("%d named-port sets, want 1 of 1,000 tuples: %v", len(named), setNames(out.Sets))
	}
	rules, elems := size(out)
	t.Logf("100 all-namespace named-port policies, 1,000 pods (100 local): %d rules, %d set elements", rules, elems)
}

// hundredNamespaces is 100 namespaces of 10 pods each (every tenth
// namespace's pods on this node, each pod declaring port http as 8000 +
// its index), and in each namespace one policy selecting its pods, spec.
func hundredNamespaces(spec func(*networkingv1.NetworkPolicySpec)) (nss []*corev1.Namespace, pods []*corev1.Pod, nps []*networkingv1.NetworkPolicy) {
	for i := range 100 {
		ns := fmt.Sprintf("ns%d", i)
		nss = append(nss, apitest.Namespace(ns))
		node := "n2"
		if i%10 == 0 {
			node = "n1"
		}
		for j := range 10 {
			pods = append(pods, apitest.Pod(ns, fmt.Sprintf("p%d", j), fmt.Sprintf("10.%d.0.%d", i, j+1), apitest.OnNode(node),
				apitest.Port("http", int32(8000+j), corev1.ProtocolTCP)))
		}
		nps = append(nps, netpol(ns, "all-namespaces", metav1.LabelSelector{}, spec))
	}
	return nss, pods, nps
}
