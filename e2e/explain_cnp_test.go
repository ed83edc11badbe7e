package e2e

import (
	"context"
	"fmt"
	"math/rand"
	"os/exec"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	cnpv1beta1 "sigs.k8s.io/network-policy-api/apis/v1beta1"

	"github.com/nftguard/nftguard/compose"
	"github.com/nftguard/nftguard/engine"
	"github.com/nftguard/nftguard/explain"
	"github.com/nftguard/nftguard/internal/cnptest"
	"github.com/nftguard/nftguard/internal/netlab"
	"github.com/nftguard/nftguard/internal/podtest"
	"github.com/nftguard/nftguard/npset"
	"github.com/nftguard/nftguard/problem"
)

// TestExplainAgreesWithKernelCNP checks explain against the kernel with
// ClusterNetworkPolicies: for each scenario the table is built in process
// with compose.Build (NetworkPolicies and ClusterNetworkPolicies together)
// and synced into the lab node, and the probe matrix over every pod and
// the external host must equal what the explain package says for every
// cell. explain reads the API objects by itself, so agreement cross-checks
// the ClusterNetworkPolicy compiler and the kernel. A few cells per
// scenario are also pinned by hand, so that two readings that both ignored
// ClusterNetworkPolicies could not agree vacuously. Scenarios with invalid
// policies check that explain reports the compiler's problems and
// warnings and says what the kernel does with them: a left-out policy
// enforces nothing, an invalid rule fails closed where it stands.
func TestExplainAgreesWithKernelCNP(t *testing.T) {
	runExplainCNP(t, netlab.IPv4)
}

// TestExplainAgreesWithKernelCNPIPv6 does the same over IPv6.
func TestExplainAgreesWithKernelCNPIPv6(t *testing.T) {
	runExplainCNP(t, netlab.IPv6)
}

var (
	ecnpPods  = []string{"x/a", "x/b", "y/a", "y/b"}
	ecnpPorts = []netlab.Port{tcp80, tcp81, udp80, sctp80}
)

// ecnpCell pins explain's verdict on one cell of a scenario.
type ecnpCell struct {
	from, to string
	port     netlab.Port
	allowed  bool
}

type ecnpScenario struct {
	name  string
	cnps  []*cnpv1beta1.ClusterNetworkPolicy
	nps   []*networkingv1.NetworkPolicy
	cells []ecnpCell
	// problems are substrings of the compiler's problems, one each; a
	// scenario without them must have none.
	problems []string
	// random: the problems are whatever the compiler reports, at least
	// one, and the matrix must deny somewhere (no cell is pinned).
	random bool
	edit   func(*compose.Input) // changes the cluster of input
}

// ecnpLab is the lab, the objects of one scenario and the engine that
// programs the node.
type ecnpLab struct {
	t   *testing.T
	lab *netlab.Lab
	eng *engine.Engine
}

func runExplainCNP(t *testing.T, f netlab.Family) {
	lab := netlab.New(t, netlab.Spec{
		Nodes:    []netlab.NodeSpec{{Name: "n1", Pods: ecnpPods}},
		External: []string{"ext"},
		Ports:    ecnpPorts,
	})
	eng, err := engine.New(compose.Table(), engine.WithNetNS(lab.Node("n1").Path))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { eng.Close() })
	l := &ecnpLab{t: t, lab: lab, eng: eng}
	for _, sc := range ecnpScenarios(l) {
		t.Run(sc.name, func(t *testing.T) {
			l.t = t
			in := l.input(sc)
			if sc.edit != nil {
				sc.edit(&in)
			}
			res := compose.Build(in)
			compiled := problemTexts(res.Problems)
			if sc.random && len(compiled) == 0 {
				t.Fatal("a random scenario without problems: it tests nothing invalid")
			}
			if !sc.random && len(compiled) != len(sc.problems) {
				t.Fatalf("compile problems %q, want %d: %q", compiled, len(sc.problems), sc.problems)
			}
			for i, want := range sc.problems {
				if !strings.Contains(compiled[i], want) {
					t.Errorf("compile problem %q, want %q", compiled[i], want)
				}
			}
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			if _, err := eng.Sync(ctx, res.Desired); err != nil {
				t.Fatalf("sync: %v", err)
			}
			// Probes of an earlier scenario must not pass as replies.
			if err := lab.FlushConntrack(); err != nil {
				t.Fatal(err)
			}
			cl, probs := explain.New(explain.Input{NodeName: in.NodeName, Namespaces: in.Namespaces, Nodes: in.Nodes, Pods: in.Pods.All(),
				NetworkPolicies: in.NetworkPolicies.All(), ClusterNetworkPolicies: in.ClusterNetworkPolicies})
			// Explain classifies the objects as the compiler does.
			if e := problemTexts(probs); strings.Join(e, "\n") != strings.Join(compiled, "\n") {
				t.Fatalf("explain's problems differ from the compiler's:\nexplain:  %q\ncompiler: %q", e, compiled)
			}
			if e, c := problemTexts(cl.Warnings()), problemTexts(res.Warnings); strings.Join(e, "\n") != strings.Join(c, "\n") {
				t.Fatalf("explain's warnings differ from the compiler's:\nexplain:  %q\ncompiler: %q", e, c)
			}
			explained := lab.NewExpected(f, false, ecnpPorts...)
			for _, p := range explained.Ports {
				for _, from := range explained.From {
					for _, to := range explained.To {
						fl := l.flow(f, from, to, p)
						r, err := cl.Explain(fl)
						if err != nil {
							t.Fatalf("explain %s -> %s %v: %v", from, to, p, err)
						}
						explained.Expect(from, to, r.Allowed, p)
					}
				}
			}
			denied := 0
			for _, p := range explained.Ports {
				for _, from := range explained.From {
					for _, to := range explained.To {
						if from != to && !explained.Allowed(from, to, p) {
							denied++
						}
					}
				}
			}
			if sc.random && denied == 0 {
				t.Fatal("a random scenario that denies nothing")
			}
			for _, c := range sc.cells {
				if got := explained.Allowed(c.from, c.to, c.port); got != c.allowed {
					r, _ := cl.Explain(l.flow(f, c.from, c.to, c.port))
					t.Errorf("explain %s -> %s %v: allowed=%v, the scenario pins %v\n%s", c.from, c.to, c.port, got, c.allowed, r)
				}
			}
			got, err := lab.Reachability(ctx, f, ecnpPorts...)
			if err != nil {
				t.Fatalf("probe: %v", err)
			}
			if diff := netlab.Compare(explained, got); diff != "" {
				t.Fatalf("explain (expected) and the kernel (actual) disagree:\n%s\ntable:\n%s", diff, l.listTable())
			}
		})
	}
}

// input is the cluster of a scenario: namespaces x and y, the lab's pods
// with the upstream named ports, node n1, and a node "ext-node" whose
// addresses are the external host's (so that a nodes peer can be probed).
func (l *ecnpLab) input(sc ecnpScenario) compose.Input {
	in := compose.Input{NodeName: "n1", NetworkPolicies: npset.New(sc.nps), ClusterNetworkPolicies: sc.cnps}
	for _, ns := range []string{"x", "y"} {
		in.Namespaces = append(in.Namespaces, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns, Labels: map[string]string{"ns": ns}}})
	}
	ext := l.lab.Endpoint("ext")
	in.Nodes = []*corev1.Node{
		{ObjectMeta: metav1.ObjectMeta{Name: "n1", Labels: map[string]string{"role": "worker"}}},
		{ObjectMeta: metav1.ObjectMeta{Name: "ext-node", Labels: map[string]string{"role": "ext"}},
			Status: corev1.NodeStatus{Addresses: []corev1.NodeAddress{
				{Type: corev1.NodeInternalIP, Address: ext.IPv4.String()}, {Type: corev1.NodeInternalIP, Address: ext.IPv6.String()}}}},
	}
	for _, name := range ecnpPods {
		ep := l.lab.Endpoint(name)
		ns, pn, _ := strings.Cut(name, "/")
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: pn, Labels: map[string]string{"pod": pn}}}
		p.Spec.NodeName = "n1"
		ct := corev1.Container{Name: "cont", Image: "agnhost"}
		for _, port := range []int32{80, 81} {
			for _, proto := range []corev1.Protocol{corev1.ProtocolTCP, corev1.ProtocolUDP, corev1.ProtocolSCTP} {
				ct.Ports = append(ct.Ports, corev1.ContainerPort{
					Name: fmt.Sprintf("serve-%d-%s", port, strings.ToLower(string(proto))), ContainerPort: port, Protocol: proto})
			}
		}
		p.Spec.Containers = []corev1.Container{ct}
		p.Status.Phase = corev1.PodRunning
		p.Status.PodIPs = []corev1.PodIP{{IP: ep.IPv4.String()}, {IP: ep.IPv6.String()}}
		p.Status.PodIP = p.Status.PodIPs[0].IP
		in.Pods = podtest.Append(in.Pods, p)
	}
	return in
}

// problemTexts are the problems as printed.
func problemTexts(ps []problem.Problem) []string {
	var out []string
	for _, p := range ps {
		out = append(out, p.Error())
	}
	return out
}

func (l *ecnpLab) flow(f netlab.Family, from, to string, p netlab.Port) explain.Flow {
	endpoint := func(name string) string {
		if strings.Contains(name, "/") {
			return name
		}
		return l.lab.Endpoint(name).Addr(f).String()
	}
	return explain.Flow{From: endpoint(from), To: endpoint(to), Protocol: corev1.Protocol(strings.ToUpper(string(p.Proto))),
		Port: int32(p.Num), Family: int(f)}
}

// listTable shows the kernel's table, with nft as the oracle, for a failure.
func (l *ecnpLab) listTable() string {
	out, err := exec.Command("nsenter", "--net="+l.lab.Node("n1").Path, "nft", "list", "table", "inet", "nftguard").CombinedOutput()
	if err != nil {
		return fmt.Sprintf("(nft list failed: %v: %s)", err, out)
	}
	return string(out)
}

// The ClusterNetworkPolicy builders are cnptest's (shared with explain's
// tables), under the names these scenarios use. Never assigned.
type ecnpRule = cnptest.Rule

const (
	cnpAccept = cnpv1beta1.ClusterNetworkPolicyRuleActionAccept
	cnpDeny   = cnpv1beta1.ClusterNetworkPolicyRuleActionDeny
	cnpPass   = cnpv1beta1.ClusterNetworkPolicyRuleActionPass
	cnpAdmin  = cnpv1beta1.AdminTier
	cnpBase   = cnpv1beta1.BaselineTier
)

func ecnpScenarios(l *ecnpLab) []ecnpScenario {
	lab := l.lab
	ext := lab.Endpoint("ext")
	extNets := cnpv1beta1.ClusterNetworkPolicyEgressPeer{Networks: []cnpv1beta1.CIDR{
		cnpv1beta1.CIDR(ext.IPv4.String() + "/32"), cnpv1beta1.CIDR(ext.IPv6.String() + "/128")}}
	everywhere := cnpv1beta1.ClusterNetworkPolicyEgressPeer{Networks: []cnpv1beta1.CIDR{"0.0.0.0/0", "::/0"}}
	all := &metav1.LabelSelector{}
	allowAllIngressX := np("x", "allow-all", spec{PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress}, Ingress: []networkingv1.NetworkPolicyIngressRule{{}}})
	denyIngressXA := np("x", "deny-a", spec{PodSelector: *match("pod", "a"), PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress}})
	denyIngressX := np("x", "deny-all", spec{PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress}})
	scs := []ecnpScenario{
		{name: "no-policies-at-all",
			cells: []ecnpCell{{"x/a", "y/a", tcp80, true}, {"y/b", "ext", sctp80, true}}},
		{name: "policies-selecting-no-probed-pod",
			cnps:  []*cnpv1beta1.ClusterNetworkPolicy{cnptest.Policy("z-deny", cnpAdmin, 0, cnptest.NamespacesSubjectOf("ns", "z"), []ecnpRule{cnptest.R("", cnpDeny, cnptest.PeerNamespacesOf())}, []ecnpRule{cnptest.R("", cnpDeny, everywhere)})},
			cells: []ecnpCell{{"x/a", "y/a", tcp80, true}}},
		{name: "admin-deny-egress-to-a-network",
			cnps:  []*cnpv1beta1.ClusterNetworkPolicy{cnptest.Policy("no-ext", cnpAdmin, 10, cnptest.NamespacesSubjectOf("ns", "x"), nil, []ecnpRule{cnptest.R("no-ext", cnpDeny, extNets)})},
			cells: []ecnpCell{{"x/a", "ext", tcp80, false}, {"y/a", "ext", tcp80, true}, {"x/a", "y/a", udp80, true}}},
		{name: "admin-deny-overrides-a-networkpolicy-allow",
			cnps:  []*cnpv1beta1.ClusterNetworkPolicy{cnptest.Policy("no-y", cnpAdmin, 10, cnptest.NamespacesSubjectOf("ns", "x"), []ecnpRule{cnptest.R("no-y", cnpDeny, cnptest.PeerNamespacesOf("ns", "y"))}, nil)},
			nps:   []*networkingv1.NetworkPolicy{allowAllIngressX},
			cells: []ecnpCell{{"y/a", "x/a", tcp80, false}, {"x/b", "x/a", tcp80, true}}},
		{name: "admin-accept-overrides-a-networkpolicy-deny",
			cnps: []*cnpv1beta1.ClusterNetworkPolicy{cnptest.Policy("b-in", cnpAdmin, 10, cnptest.PodsSubject(match("ns", "x"), match("pod", "a")),
				[]ecnpRule{cnptest.R("from-b", cnpAccept, cnptest.PeerPods(all, match("pod", "b")))}, nil)},
			nps:   []*networkingv1.NetworkPolicy{denyIngressX},
			cells: []ecnpCell{{"y/b", "x/a", udp80, true}, {"x/b", "x/a", sctp80, true}, {"y/a", "x/a", tcp80, false}, {"y/b", "x/b", tcp80, false}}},
		{name: "pass-chains-through-the-tiers",
			cnps: []*cnpv1beta1.ClusterNetworkPolicy{
				cnptest.Policy("pass-y", cnpAdmin, 5, cnptest.NamespacesSubjectOf("ns", "x"), []ecnpRule{cnptest.R("pass-y", cnpPass, cnptest.PeerNamespacesOf("ns", "y"))}, nil),
				cnptest.Policy("deny-rest", cnpAdmin, 6, cnptest.NamespacesSubjectOf("ns", "x"), []ecnpRule{cnptest.R("", cnpDeny, cnptest.PeerNamespacesOf())}, nil),
				cnptest.Policy("base-81", cnpBase, 0, cnptest.NamespacesSubjectOf("ns", "x"), []ecnpRule{cnptest.R("", cnpDeny, cnptest.PeerNamespacesOf("ns", "y")).On(cnptest.TCP(81))}, nil),
			},
			nps: []*networkingv1.NetworkPolicy{denyIngressXA},
			cells: []ecnpCell{{"y/a", "x/a", tcp80, false}, {"y/a", "x/b", tcp80, true}, {"y/a", "x/b", tcp81, false},
				{"x/a", "x/b", tcp80, false}}},
		{name: "baseline-isolation-refined-by-a-networkpolicy",
			cnps: []*cnpv1beta1.ClusterNetworkPolicy{cnptest.Policy("isolate", cnpBase, 100, cnptest.NamespacesSubjectOf(), []ecnpRule{cnptest.R("isolate", cnpDeny, cnptest.PeerNamespacesOf())}, nil)},
			nps: []*networkingv1.NetworkPolicy{np("y", "from-x", spec{PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress},
				Ingress: ingress([]peer{nss("ns", "x")})})},
			cells: []ecnpCell{{"x/a", "y/a", tcp80, true}, {"y/a", "y/b", tcp80, false}, {"y/a", "x/a", tcp80, false}}},
		{name: "equal-priorities-by-name",
			cnps: []*cnpv1beta1.ClusterNetworkPolicy{
				cnptest.Policy("b-deny", cnpAdmin, 5, cnptest.NamespacesSubjectOf("ns", "x"), []ecnpRule{cnptest.R("", cnpDeny, cnptest.PeerNamespacesOf())}, nil),
				cnptest.Policy("a-accept", cnpAdmin, 5, cnptest.NamespacesSubjectOf("ns", "x"), []ecnpRule{cnptest.R("", cnpAccept, cnptest.PeerNamespacesOf("ns", "y"))}, nil),
			},
			cells: []ecnpCell{{"y/a", "x/a", tcp80, true}, {"x/b", "x/a", tcp80, false}}},
		{name: "ports-ranges-and-named-ports",
			cnps: []*cnpv1beta1.ClusterNetworkPolicy{cnptest.Policy("ports", cnpAdmin, 1, cnptest.NamespacesSubjectOf("ns", "y"), nil, []ecnpRule{
				cnptest.R("pods", cnpDeny, cnptest.PeerNamespacesOf()).On(cnptest.TCP(81), cnptest.UDPRange(70, 90), cnpv1beta1.ClusterNetworkPolicyProtocol{DestinationNamedPort: "serve-80-sctp"}),
				cnptest.R("ext", cnpDeny, extNets).On(cnptest.TCP(81)),
			})},
			cells: []ecnpCell{{"y/a", "x/a", tcp80, true}, {"y/a", "x/a", tcp81, false}, {"y/a", "x/a", udp80, false}, {"y/a", "x/a", sctp80, false},
				{"y/a", "ext", sctp80, true}, {"y/a", "ext", udp80, true}, {"y/a", "ext", tcp81, false}}},
		{name: "nodes-peer",
			cnps: []*cnpv1beta1.ClusterNetworkPolicy{cnptest.Policy("no-ext-node", cnpAdmin, 1, cnptest.NamespacesSubjectOf("ns", "x"), nil, []ecnpRule{
				cnptest.R("", cnpDeny, cnpv1beta1.ClusterNetworkPolicyEgressPeer{Nodes: match("role", "ext")})})},
			cells: []ecnpCell{{"x/a", "ext", tcp80, false}, {"y/a", "ext", tcp80, true}, {"x/a", "y/a", tcp80, true}}},
		{name: "fail-closed-peers",
			cnps: []*cnpv1beta1.ClusterNetworkPolicy{
				cnptest.Policy("future-accept", cnpAdmin, 1, cnptest.NamespacesSubjectOf("ns", "x"), nil, []ecnpRule{cnptest.R("", cnpAccept, everywhere, cnpv1beta1.ClusterNetworkPolicyEgressPeer{})}),
				cnptest.Policy("deny-y", cnpAdmin, 2, cnptest.NamespacesSubjectOf("ns", "x"), nil, []ecnpRule{cnptest.R("", cnpDeny, cnptest.PeerNamespacesOf("ns", "y"))}),
				cnptest.Policy("future-pass", cnpBase, 1, cnptest.PodsSubject(match("ns", "y"), match("pod", "b")), nil, []ecnpRule{cnptest.R("", cnpPass, cnpv1beta1.ClusterNetworkPolicyEgressPeer{})}),
			},
			cells: []ecnpCell{{"x/a", "y/a", tcp80, false}, {"x/a", "ext", tcp80, true}, {"y/b", "x/a", tcp80, false}, {"y/b", "ext", udp80, false}, {"y/a", "x/a", tcp80, true}}},
		{name: "domain-names-without-answers-match-nothing",
			cnps: []*cnpv1beta1.ClusterNetworkPolicy{cnptest.Policy("allowlist", cnpAdmin, 1, cnptest.NamespacesSubjectOf("ns", "y"), nil, []ecnpRule{
				cnptest.R("docs", cnpAccept, cnpv1beta1.ClusterNetworkPolicyEgressPeer{DomainNames: []cnpv1beta1.DomainName{"kubernetes.io"}}),
				cnptest.R("rest", cnpDeny, everywhere),
			})},
			cells: []ecnpCell{{"y/a", "ext", tcp80, false}, {"y/a", "x/a", tcp80, false}, {"x/a", "y/a", tcp80, true}}},
		// Invalid policies: the compiler's classification, which the
		// kernel enforces and explain must follow.
		{name: "invalid-rule-peer-selector-fails-the-rule-closed",
			cnps: []*cnpv1beta1.ClusterNetworkPolicy{
				cnptest.Policy("guard-x", cnpAdmin, 1, cnptest.NamespacesSubjectOf("ns", "x"),
					[]ecnpRule{cnptest.R("from-b", cnpAccept, cnptest.PeerPods(all, match("pod", "b"))), cnptest.R("bad", cnpDeny, cnptest.PeerPods(all, badSelector))},
					nil),
				cnptest.Policy("guard-y", cnpAdmin, 2, cnptest.NamespacesSubjectOf("ns", "y"), nil,
					[]ecnpRule{cnptest.R("bad", cnpAccept, cnptest.PeerNamespacesOf("ns", "x"), cnpv1beta1.ClusterNetworkPolicyEgressPeer{Namespaces: badSelector}), cnptest.R("no-x", cnpDeny, cnptest.PeerNamespacesOf("ns", "x"))}),
			},
			problems: []string{"ClusterNetworkPolicy guard-x: spec.ingress[1].from[0].pods.podSelector", "ClusterNetworkPolicy guard-y: spec.egress[0].to[1].namespaces"},
			cells: []ecnpCell{{"x/b", "x/a", tcp80, true}, {"y/b", "x/a", udp80, false}, {"x/a", "x/b", udp80, false}, {"ext", "x/b", sctp80, false},
				{"y/a", "ext", tcp80, true}, {"y/b", "y/a", tcp80, true}, {"y/a", "x/b", tcp80, false}}},
		{name: "empty-protocol-entry-and-list-fail-the-rule-closed",
			cnps: []*cnpv1beta1.ClusterNetworkPolicy{
				cnptest.Policy("y-out", cnpBase, 1, cnptest.NamespacesSubjectOf("ns", "y"), nil,
					[]ecnpRule{cnptest.R("", cnpPass, cnptest.PeerNamespacesOf("ns", "x")).On(cnptest.TCP(81), cnpv1beta1.ClusterNetworkPolicyProtocol{})}),
				cnptest.Policy("x-out", cnpAdmin, 1, cnptest.NamespacesSubjectOf("ns", "x"), nil,
					// An empty list (not nil: every protocol) is invalid.
					[]ecnpRule{cnptest.R("none", cnpAccept, extNets).On([]cnpv1beta1.ClusterNetworkPolicyProtocol{}...), cnptest.R("no-ext", cnpDeny, extNets).On(cnptest.TCP(80))}),
			},
			problems: []string{"ClusterNetworkPolicy y-out: spec.egress[0].protocols[1]: exactly one of", "ClusterNetworkPolicy x-out: spec.egress[0].protocols: 0 protocols"},
			cells: []ecnpCell{{"y/a", "x/a", tcp80, false}, {"y/b", "ext", udp80, false}, {"y/a", "y/b", sctp80, false}, {"x/a", "y/a", tcp80, true},
				{"x/a", "ext", tcp80, false}, {"x/a", "ext", udp80, true}}},
		{name: "named-port-declared-for-two-protocols",
			edit: func(in *compose.Input) {
				podList := append([]*corev1.Pod(nil), podtest.List(in.Pods)...)
				for i, p := range podList {
					p = p.DeepCopy()
					p.Spec.Containers[0].Ports = append(p.Spec.Containers[0].Ports, corev1.ContainerPort{Name: "dual", ContainerPort: 81, Protocol: corev1.ProtocolTCP})
					p.Spec.Containers = append(p.Spec.Containers, corev1.Container{Name: "second", Image: "agnhost",
						Ports: []corev1.ContainerPort{{Name: "dual", ContainerPort: 80, Protocol: corev1.ProtocolUDP}}})
					podList[i] = p
				}
				in.Pods = podtest.Set(podList)
			},
			cnps: []*cnpv1beta1.ClusterNetworkPolicy{
				cnptest.Policy("dual-in", cnpAdmin, 1, cnptest.PodsSubject(match("ns", "x"), match("pod", "a")),
					[]ecnpRule{cnptest.R("", cnpDeny, cnptest.PeerNamespacesOf()).On(cnpv1beta1.ClusterNetworkPolicyProtocol{DestinationNamedPort: "dual"})}, nil),
				cnptest.Policy("dual-out", cnpAdmin, 1, cnptest.PodsSubject(match("ns", "y"), match("pod", "b")), nil,
					[]ecnpRule{cnptest.R("", cnpDeny, cnptest.PeerPods(all, all)).On(cnpv1beta1.ClusterNetworkPolicyProtocol{DestinationNamedPort: "dual"})}),
			},
			cells: []ecnpCell{{"y/a", "x/a", udp80, false}, {"y/a", "x/a", tcp81, false}, {"y/a", "x/a", tcp80, true}, {"y/a", "x/b", udp80, true},
				{"y/b", "x/b", udp80, false}, {"y/b", "x/b", tcp81, false}, {"y/b", "x/b", sctp80, true}, {"y/b", "ext", udp80, true}}},
		{name: "nodes-peer-ignores-hostname-addresses",
			edit: func(in *compose.Input) {
				ext := l.lab.Endpoint("ext")
				for i, n := range in.Nodes {
					if n.Name == "ext-node" {
						n = n.DeepCopy()
						n.Status.Addresses = []corev1.NodeAddress{{Type: corev1.NodeHostName, Address: ext.IPv4.String()}, {Type: corev1.NodeHostName, Address: ext.IPv6.String()}}
						in.Nodes[i] = n
					}
				}
				in.Nodes = append(in.Nodes, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "ext-node-2", Labels: map[string]string{"role": "ext2"}},
					Status: corev1.NodeStatus{Addresses: []corev1.NodeAddress{
						{Type: corev1.NodeExternalIP, Address: ext.IPv4.String()}, {Type: corev1.NodeExternalIP, Address: ext.IPv6.String()}}}})
			},
			cnps: []*cnpv1beta1.ClusterNetworkPolicy{cnptest.Policy("nodes", cnpAdmin, 1, cnptest.NamespacesSubjectOf("ns", "x"), nil, []ecnpRule{
				cnptest.R("by-hostname", cnpDeny, cnpv1beta1.ClusterNetworkPolicyEgressPeer{Nodes: match("role", "ext")}),
				cnptest.R("by-external-ip", cnpDeny, cnpv1beta1.ClusterNetworkPolicyEgressPeer{Nodes: match("role", "ext2")}).On(cnptest.TCP(81)),
			})},
			cells: []ecnpCell{{"x/a", "ext", tcp80, true}, {"x/a", "ext", tcp81, false}, {"x/b", "ext", udp80, true}, {"y/a", "ext", tcp81, true}}},
		{name: "left-out-policies-and-namesakes",
			cnps: []*cnpv1beta1.ClusterNetworkPolicy{
				cnptest.Policy("bad-priority", cnpAdmin, 1001, cnptest.NamespacesSubjectOf(), []ecnpRule{cnptest.R("", cnpDeny, cnptest.PeerNamespacesOf())}, nil),
				cnptest.Policy("dup", cnpAdmin, 5, cnptest.NamespacesSubjectOf("ns", "x"), nil, []ecnpRule{cnptest.R("ext-ok", cnpAccept, extNets)}),
				cnptest.Policy("dup", cnpAdmin, 0, cnptest.NamespacesSubjectOf("ns", "x"), nil, []ecnpRule{cnptest.R("nothing", cnpDeny, everywhere, cnptest.PeerNamespacesOf())}),
				cnptest.Policy("x-rest", cnpAdmin, 6, cnptest.NamespacesSubjectOf("ns", "x"), nil, []ecnpRule{cnptest.R("", cnpDeny, cnptest.PeerNamespacesOf("ns", "y"))}),
			},
			problems: []string{"ClusterNetworkPolicy bad-priority: spec.priority", "ClusterNetworkPolicy dup: another ClusterNetworkPolicy of the same name comes first"},
			cells:    []ecnpCell{{"y/a", "x/a", tcp80, true}, {"x/a", "ext", tcp80, true}, {"x/a", "x/b", udp80, true}, {"x/a", "y/a", tcp80, false}}},
		{name: "unknown-action-fails-closed",
			cnps: []*cnpv1beta1.ClusterNetworkPolicy{cnptest.Policy("allow", cnpAdmin, 1, cnptest.NamespacesSubjectOf("ns", "y"),
				[]ecnpRule{cnptest.R("from-x", cnpAccept, cnptest.PeerNamespacesOf("ns", "x")).On(cnptest.TCP(80)), cnptest.R("", "Allow", cnptest.PeerNamespacesOf("ns", "x"))}, nil)},
			problems: []string{`ClusterNetworkPolicy allow: spec.ingress[1].action: unsupported value "Allow"`},
			cells:    []ecnpCell{{"x/a", "y/a", tcp80, true}, {"x/a", "y/a", tcp81, false}, {"ext", "y/b", udp80, false}, {"y/a", "x/a", tcp80, true}}},
	}
	for seed := int64(1); seed <= ecnpRandomScenarios; seed++ {
		scs = append(scs, ecnpRandom(seed, extNets, everywhere))
	}
	return scs
}

// ecnpRandomScenarios is how many random scenarios run (a second each).
const ecnpRandomScenarios = 8

// ecnpRandom is a scenario of random policies, some of them or some of
// their rules invalid, over the lab's pods, the external host and its
// nodes: the kernel and explain must agree on every cell.
func ecnpRandom(seed int64, extNets, everywhere cnpv1beta1.ClusterNetworkPolicyEgressPeer) ecnpScenario {
	r := rand.New(rand.NewSource(seed))
	pick := func(s ...string) string { return s[r.Intn(len(s))] }
	all := &metav1.LabelSelector{}
	nsSel := func() *metav1.LabelSelector {
		if r.Intn(3) == 0 {
			return all
		}
		return match("ns", pick("x", "y"))
	}
	peer := func(egress bool) cnpv1beta1.ClusterNetworkPolicyEgressPeer {
		n := 4
		if egress {
			n = 8
		}
		switch r.Intn(n) {
		case 0:
			return cnptest.PeerNamespacesOf("ns", pick("x", "y"))
		case 1:
			return cnpv1beta1.ClusterNetworkPolicyEgressPeer{Namespaces: nsSel()}
		case 2:
			return cnptest.PeerPods(nsSel(), match("pod", pick("a", "b")))
		case 3:
			return cnptest.PeerPods(all, badSelector) // invalid
		case 4:
			return extNets
		case 5:
			return everywhere
		case 6:
			return cnpv1beta1.ClusterNetworkPolicyEgressPeer{Nodes: match("role", "ext")}
		}
		return cnpv1beta1.ClusterNetworkPolicyEgressPeer{} // unknown kind
	}
	protocols := func() []cnpv1beta1.ClusterNetworkPolicyProtocol {
		switch r.Intn(9) {
		case 0:
			return []cnpv1beta1.ClusterNetworkPolicyProtocol{cnptest.TCP(80)}
		case 1:
			return []cnpv1beta1.ClusterNetworkPolicyProtocol{cnptest.TCP(81), cnptest.UDPRange(70, 90)}
		case 2:
			return []cnpv1beta1.ClusterNetworkPolicyProtocol{{DestinationNamedPort: pick("serve-80-udp", "serve-81-tcp", "serve-80-sctp")}}
		case 3:
			return []cnpv1beta1.ClusterNetworkPolicyProtocol{cnptest.TCP(80), {}} // invalid entry
		case 4:
			return []cnpv1beta1.ClusterNetworkPolicyProtocol{} // invalid list
		}
		return nil
	}
	actions := []cnpv1beta1.ClusterNetworkPolicyRuleAction{cnpAccept, cnpDeny, cnpPass, cnpDeny, cnpAccept, "Allow"}
	rules := func(egress bool) []ecnpRule {
		var out []ecnpRule
		for i, n := 0, r.Intn(3); i < n; i++ {
			x := cnptest.R(pick("", "r"), actions[r.Intn(len(actions))], peer(egress))
			if r.Intn(3) == 0 {
				x.Peers = append(x.Peers, peer(egress))
			}
			out = append(out, x.On(protocols()...))
		}
		return out
	}
	sc := ecnpScenario{name: fmt.Sprintf("random-%d", seed), random: true}
	for i, n := 0, 2+r.Intn(3); i < n; i++ {
		tier := cnpv1beta1.Tier(pick("Admin", "Baseline", "Admin", "Baseline", "Other"))
		subj := cnptest.NamespacesSubjectOf("ns", pick("x", "y"))
		if r.Intn(3) == 0 {
			subj = cnptest.PodsSubject(nsSel(), match("pod", pick("a", "b")))
		}
		sc.cnps = append(sc.cnps, cnptest.Policy(pick("p", "q", "r", "s"), tier, int32(r.Intn(3)), subj, rules(false), rules(true)))
	}
	return sc
}

// badSelector is a label selector no API server accepts.
var badSelector = &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "pod", Operator: "Near"}}}
