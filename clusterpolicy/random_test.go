package clusterpolicy

import (
	"flag"
	"fmt"
	"math/rand"
	"net/netip"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/network-policy-api/apis/v1beta1"

	"github.com/nftguard/nftguard/internal/apitest"
	"github.com/nftguard/nftguard/internal/cnptest"
	"github.com/nftguard/nftguard/internal/podtest"
	"github.com/nftguard/nftguard/tablelayout"
)

var incrSeeds = flag.Int("incr.seeds", 800, "random change sequences TestCompilerEqualsCompileOnRandomChanges replays")

// randomCluster is a small cluster where selectors often overlap: pods of
// three namespaces on two nodes, two Nodes, and policies of every tier,
// action, peer kind and protocol form, some invalid or unreadable.
func randomCluster(r *rand.Rand) Input {
	in := Input{NodeName: "n1"}
	pick := func(s ...string) string { return s[r.Intn(len(s))] }
	for _, n := range []string{"x", "y", "z"} {
		if r.Intn(4) > 0 {
			in.Namespaces = append(in.Namespaces, apitest.Namespace(n, "tier", pick("a", "b", "c")))
			optIn(r, in.Namespaces[len(in.Namespaces)-1])
		}
	}
	if r.Intn(2) == 0 {
		l := tablelayout.DefaultLogDenied()
		in.LogDenied = &l
	}
	for i, n := 0, r.Intn(12); i < n; i++ {
		namespace, name := pick("x", "y", "z"), pick("a", "b", "c", "d", "e")
		var addrs []string
		if r.Intn(5) > 0 {
			addrs = append(addrs, fmt.Sprintf("10.0.%d.%d", r.Intn(3), r.Intn(20)))
		}
		if r.Intn(3) == 0 {
			addrs = append(addrs, fmt.Sprintf("fd00::%d", r.Intn(20)))
		}
		p := apitest.Pod(namespace, name, "", apitest.OnNode(pick("n1", "n1", "n2")), apitest.IPs(addrs...), apitest.WithLabels("app", pick("a", "b", "c", "d")))
		if r.Intn(3) == 0 {
			apitest.Port(pick("web", "dns"), int32(80+r.Intn(3)), corev1.Protocol(pick("TCP", "UDP", "SCTP", "")))(p)
		}
		if r.Intn(15) == 0 {
			p.Status.Phase = corev1.PodFailed
		}
		in.Pods = podtest.Append(in.Pods, p)
	}
	for i, n := 0, r.Intn(3); i < n; i++ {
		in.Nodes = append(in.Nodes, mknode(fmt.Sprintf("n%d", i+1), apitest.Labels("role", pick("a", "b")),
			fmt.Sprintf("192.168.0.%d", r.Intn(4)), fmt.Sprintf("2001:db8::%d", r.Intn(4))))
	}
	selector := func() *metav1.LabelSelector {
		switch r.Intn(4) {
		case 0:
			return &metav1.LabelSelector{}
		case 1:
			return sel("tier", pick("a", "b", "c"))
		case 2:
			return sel("app", pick("a", "b", "c", "d"))
		}
		return &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "app", Operator: metav1.LabelSelectorOpIn, Values: []string{pick("a", "b"), pick("c", "d")}}}}
	}
	actions := []v1beta1.ClusterNetworkPolicyRuleAction{accept, deny, pass}
	protocols := func() []v1beta1.ClusterNetworkPolicyProtocol {
		var out []v1beta1.ClusterNetworkPolicyProtocol
		for i, n := 0, r.Intn(3); i < n; i++ {
			switch r.Intn(5) {
			case 0:
				out = append(out, cnptest.TCP(int32(80+r.Intn(3))))
			case 1:
				out = append(out, cnptest.UDPRange(53, int32(54+r.Intn(100))))
			case 2:
				out = append(out, cnptest.SCTP(int32(80+r.Intn(2))))
			case 3:
				out = append(out, cnptest.NamedPort(pick("web", "dns")))
			default:
				out = append(out, cnptest.UDPRange(100, 50)) // invalid
			}
		}
		return out
	}
	for i, n := 0, r.Intn(5); i < n; i++ {
		p := cnp(fmt.Sprintf("p%d", r.Intn(6)), v1beta1.Tier(pick("Admin", "Baseline", "Admin", "Baseline", "Other")), int32(r.Intn(3)), nil)
		if r.Intn(2) == 0 {
			p.Spec.Subject = v1beta1.ClusterNetworkPolicySubject{Namespaces: sel("tier", pick("a", "b", "c"))}
		} else {
			p.Spec.Subject = v1beta1.ClusterNetworkPolicySubject{Pods: &v1beta1.NamespacedPod{NamespaceSelector: *selector(), PodSelector: *selector()}}
		}
		for j, m := 0, r.Intn(4); j < m; j++ {
			var from []v1beta1.ClusterNetworkPolicyIngressPeer
			for k, o := 0, 1+r.Intn(2); k < o; k++ {
				switch r.Intn(6) {
				case 0:
					from = append(from, v1beta1.ClusterNetworkPolicyIngressPeer{})
				case 1, 2:
					from = append(from, fromNS(selector()))
				default:
					from = append(from, fromPods(selector(), selector()))
				}
			}
			p.Spec.Ingress = append(p.Spec.Ingress, ingress(actions[r.Intn(3)], pick("", "r"), from, protocols()...))
		}
		for j, m := 0, r.Intn(4); j < m; j++ {
			var to []v1beta1.ClusterNetworkPolicyEgressPeer
			named := false
			protos := protocols()
			for _, pr := range protos {
				named = named || pr.DestinationNamedPort != ""
			}
			for k, o := 0, 1+r.Intn(2); k < o; k++ {
				switch x := r.Intn(8); {
				case x == 0:
					to = append(to, v1beta1.ClusterNetworkPolicyEgressPeer{})
				case x == 1 && !named:
					to = append(to, toNets(pick("10.0.0.0/16", "10.0.1.0/24", "0.0.0.0/0", "10.0.0.1/8"), pick("fd00::/64", "::/0")))
				case x == 2 && !named:
					to = append(to, toNodes(sel("role", pick("a", "b"))))
				case x == 3 && !named:
					to = append(to, v1beta1.ClusterNetworkPolicyEgressPeer{DomainNames: []v1beta1.DomainName{"example.com"}})
				case x <= 5:
					to = append(to, cnptest.PeerNamespaces(selector()))
				default:
					to = append(to, cnptest.PeerPods(selector(), selector()))
				}
			}
			p.Spec.Egress = append(p.Spec.Egress, egress(actions[r.Intn(3)], pick("", "r"), to, protos...))
		}
		in.Policies = append(in.Policies, p)
	}
	return in
}

// TestCompilerEqualsCompileOnRandomChanges replays random sequences of
// cluster changes through one Compiler and checks every result against a
// fresh Compile.
func TestCompilerEqualsCompileOnRandomChanges(t *testing.T) {
	n := *incrSeeds
	if testing.Short() {
		n = 100
	}
	var chains, sets, problems, warnings, logged int
	for seed := int64(0); seed < int64(n); seed++ {
		r := rand.New(rand.NewSource(seed))
		var m Compiler
		in := randomCluster(r)
		for step := 0; step < 10; step++ {
			got, want := m.Compile(in), Compile(in)
			chains, sets, problems, warnings = chains+len(got.Chains), sets+len(got.Sets), problems+len(got.Problems), warnings+len(got.Warnings)
			for _, ch := range got.Chains {
				for _, rl := range ch.Rules {
					if strings.Contains(rl.Rule, "goto "+tablelayout.ChainDeniedIngress) || strings.Contains(rl.Rule, "goto "+tablelayout.ChainDeniedEgress) {
						logged++
					}
				}
			}
			if diff := cmp.Diff(want, got, cmpopts.EquateComparable(netip.Addr{}, netip.AddrPort{})); diff != "" {
				t.Fatalf("seed %d step %d: Compiler differs from Compile (-Compile +Compiler):\n%s", seed, step, diff)
			}
			if step == 0 && seed < 200 {
				compileChecked(t, in)
			}
			in = mutate(r, in)
		}
	}
	// The sequences must exercise the compiler, not compare empty tables.
	t.Logf("%d chains, %d sets, %d problems, %d warnings, %d logged drops compared", chains, sets, problems, warnings, logged)
	if chains < 10*n || sets < 10*n || problems == 0 || warnings == 0 || logged == 0 {
		t.Errorf("random clusters too thin: %d chains, %d sets, %d problems, %d warnings over %d seeds", chains, sets, problems, warnings, n)
	}
}

// optIn sets or clears a namespace's opt-in to denied-packet logs, or
// gives it a value that does not opt in.
func optIn(r *rand.Rand, n *corev1.Namespace) {
	switch r.Intn(3) {
	case 0:
		n.Annotations = map[string]string{tablelayout.AnnotationLogDenied: "true"}
	case 1:
		n.Annotations = map[string]string{tablelayout.AnnotationLogDenied: "yes"}
	default:
		n.Annotations = nil
	}
}

// mutate returns the next state of a cluster: most objects the same
// objects, some changed copies, some new, some gone. in is not modified.
func mutate(r *rand.Rand, in Input) Input {
	other := randomCluster(r)
	out := Input{NodeName: in.NodeName, LogDenied: in.LogDenied}
	if r.Intn(25) == 0 {
		out.NodeName = "n2"
	}
	if r.Intn(10) == 0 {
		// Logging turned on or off (a restart with another flag).
		out.LogDenied = other.LogDenied
	}
	out.Namespaces = apitest.Mix(r, in.Namespaces, other.Namespaces, 6, func(n *corev1.Namespace) *corev1.Namespace {
		c := n.DeepCopy()
		if r.Intn(2) == 0 {
			optIn(r, c)
		} else {
			c.Labels = apitest.Labels("tier", []string{"a", "b", "c"}[r.Intn(3)])
		}
		return c
	})
	out.Pods = podtest.Set(apitest.Mix(r, podtest.List(in.Pods), podtest.List(other.Pods), 6, func(p *corev1.Pod) *corev1.Pod {
		c := p.DeepCopy()
		switch r.Intn(4) {
		case 0:
			c.Labels = apitest.Labels("app", []string{"a", "b", "c", "d"}[r.Intn(4)])
		case 1:
			apitest.IPs(fmt.Sprintf("10.0.%d.%d", r.Intn(3), r.Intn(20)))(c)
		case 2:
			c.Spec.NodeName = []string{"n1", "n2"}[r.Intn(2)]
		default:
			c.ResourceVersion = "2"
		}
		return c
	}))
	out.Nodes = apitest.Mix(r, in.Nodes, other.Nodes, 6, func(n *corev1.Node) *corev1.Node {
		c := n.DeepCopy()
		c.Labels = apitest.Labels("role", []string{"a", "b"}[r.Intn(2)])
		return c
	})
	out.Policies = apitest.Mix(r, in.Policies, other.Policies, 6, func(p *v1beta1.ClusterNetworkPolicy) *v1beta1.ClusterNetworkPolicy {
		c := p.DeepCopy()
		switch r.Intn(4) {
		case 0:
			c.Spec.Priority = int32(r.Intn(3))
		case 1:
			if len(other.Policies) > 0 {
				c.Spec.Ingress = other.Policies[0].DeepCopy().Spec.Ingress
			}
		case 2:
			c.Spec.Tier = v1beta1.AdminTier
		default:
			c.Generation++
		}
		return c
	})
	return out
}
