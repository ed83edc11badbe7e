package e2e

import (
	"context"
	"errors"
	"net/netip"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/network-policy-api/apis/v1beta1"

	"github.com/nftguard/nftguard/compose"
	"github.com/nftguard/nftguard/engine"
	"github.com/nftguard/nftguard/internal/cnptest"
	"github.com/nftguard/nftguard/internal/netlab"
	"github.com/nftguard/nftguard/internal/podtest"
	"github.com/nftguard/nftguard/npset"
)

// ClusterNetworkPolicy end to end in the kernel: the table compose.Build
// makes from the lab's pods, NetworkPolicies and ClusterNetworkPolicies is
// synced by the engine into the lab node, and real TCP, UDP and SCTP
// probes between the pod namespaces check the tiers' evaluation order.

// cnpCluster is a cluster (cluster_test.go) with ClusterNetworkPolicies,
// compiled in process and synced by one engine (successive steps are
// incremental syncs of one Builder, as the agent does).
type cnpCluster struct {
	*cluster
	cnps    map[string]*v1beta1.ClusterNetworkPolicy
	builder compose.Builder
	eng     *engine.Engine
	last    *engine.Desired
	// wantProblem, when set, is a text a problem of the next syncs must
	// contain (and every problem must): the objects are invalid on
	// purpose.
	wantProblem string
}

func newCNPCluster(t *testing.T, bridged bool) *cnpCluster {
	c := &cnpCluster{cluster: newCluster(t, bridged), cnps: map[string]*v1beta1.ClusterNetworkPolicy{}}
	eng, err := engine.New(compose.Table(), engine.WithNetNS(c.lab.Node(c.node).Path))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { eng.Close() })
	c.eng = eng
	return c
}

func (c *cnpCluster) addCNP(p *v1beta1.ClusterNetworkPolicy) { c.cnps[p.Name] = p }

// sync builds the table from the objects and syncs it. Every object is new
// (as decoded manifests are), which the Builder must handle like updates.
func (c *cnpCluster) sync() {
	c.t.Helper()
	in := compose.Input{NodeName: c.node}
	for _, o := range c.objects() {
		switch o := o.(type) {
		case *corev1.Namespace:
			in.Namespaces = append(in.Namespaces, o)
		case *corev1.Pod:
			in.Pods = podtest.Append(in.Pods, o)
		case *networkingv1.NetworkPolicy:
			in.NetworkPolicies = npset.New(append(in.NetworkPolicies.All(), o))
		}
	}
	for _, p := range c.cnps {
		in.ClusterNetworkPolicies = append(in.ClusterNetworkPolicies, p.DeepCopy())
	}
	res := c.builder.Build(in)
	switch {
	case c.wantProblem == "" && len(res.Problems) > 0:
		c.t.Fatalf("problems: %v", res.Problems)
	case c.wantProblem != "":
		for _, p := range res.Problems {
			if !strings.Contains(p.Error(), c.wantProblem) {
				c.t.Fatalf("problem %v, want only problems with %q", p, c.wantProblem)
			}
		}
		if len(res.Problems) == 0 {
			c.t.Fatalf("no problem, want one with %q", c.wantProblem)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := c.eng.Sync(ctx, res.Desired); err != nil {
		c.t.Fatalf("sync: %v", err)
	}
	c.last = res.Desired
}

// checkCNP is cluster.check with the synced table in the failure message,
// after flushing the neighbour caches and the node's connection tracking
// (no flow an earlier step allowed counts as established now).
func (c *cnpCluster) checkCNP(f netlab.Family, ports []netlab.Port, want allowedFunc) {
	c.t.Helper()
	if err := errors.Join(c.lab.FlushNeighbours(), c.lab.FlushConntrack()); err != nil {
		c.t.Fatal(err)
	}
	c.compare(f, ports, want, "table", func() string {
		text, _ := engine.Render(compose.Table(), c.last)
		return text
	})
}

// --- ClusterNetworkPolicy builders ----------------------------------------

const (
	cAccept = v1beta1.ClusterNetworkPolicyRuleActionAccept
	cDeny   = v1beta1.ClusterNetworkPolicyRuleActionDeny
	cPass   = v1beta1.ClusterNetworkPolicyRuleActionPass
)

type cnpSpec = v1beta1.ClusterNetworkPolicySpec

func cnpOf(name string, tier v1beta1.Tier, prio int32, subjectNS string, f func(*cnpSpec)) *v1beta1.ClusterNetworkPolicy {
	p := &v1beta1.ClusterNetworkPolicy{
		TypeMeta:   metav1.TypeMeta{APIVersion: "policy.networking.k8s.io/v1beta1", Kind: "ClusterNetworkPolicy"},
		ObjectMeta: metav1.ObjectMeta{Name: name},
	}
	p.Spec.Tier, p.Spec.Priority = tier, prio
	if subjectNS == "" {
		p.Spec.Subject.Namespaces = &metav1.LabelSelector{}
	} else {
		p.Spec.Subject.Namespaces = match("ns", subjectNS)
	}
	f(&p.Spec)
	return p
}

func cIn(a v1beta1.ClusterNetworkPolicyRuleAction, from []v1beta1.ClusterNetworkPolicyIngressPeer, protos ...v1beta1.ClusterNetworkPolicyProtocol) v1beta1.ClusterNetworkPolicyIngressRule {
	return v1beta1.ClusterNetworkPolicyIngressRule{Action: a, From: from, Protocols: protos}
}

func cOut(a v1beta1.ClusterNetworkPolicyRuleAction, to []v1beta1.ClusterNetworkPolicyEgressPeer, protos ...v1beta1.ClusterNetworkPolicyProtocol) v1beta1.ClusterNetworkPolicyEgressRule {
	return v1beta1.ClusterNetworkPolicyEgressRule{Action: a, To: to, Protocols: protos}
}

func fromNSs(ns string) []v1beta1.ClusterNetworkPolicyIngressPeer {
	sel := &metav1.LabelSelector{}
	if ns != "" {
		sel = match("ns", ns)
	}
	return []v1beta1.ClusterNetworkPolicyIngressPeer{{Namespaces: sel}}
}

func fromPod(ns, pod string) []v1beta1.ClusterNetworkPolicyIngressPeer {
	return []v1beta1.ClusterNetworkPolicyIngressPeer{{Pods: &v1beta1.NamespacedPod{NamespaceSelector: *match("ns", ns), PodSelector: *match("pod", pod)}}}
}

func toNSs(ns string) []v1beta1.ClusterNetworkPolicyEgressPeer {
	return []v1beta1.ClusterNetworkPolicyEgressPeer{{Namespaces: match("ns", ns)}}
}

func toNetworks(cidrs ...string) []v1beta1.ClusterNetworkPolicyEgressPeer {
	p := v1beta1.ClusterNetworkPolicyEgressPeer{}
	for _, c := range cidrs {
		p.Networks = append(p.Networks, v1beta1.CIDR(c))
	}
	return []v1beta1.ClusterNetworkPolicyEgressPeer{p}
}

// --- scenarios --------------------------------------------------------------

type cnpStep struct {
	name   string
	change func(c *cnpCluster)
	ports  []netlab.Port
	want   allowedFunc
}

type cnpScenario struct {
	name  string
	steps []cnpStep
}

var allProtoPorts = []netlab.Port{tcp80, tcp81, udp80, udp81, sctp80, sctp81}

func cnpScenarios(c *cnpCluster, f netlab.Family) []cnpScenario {
	addr := func(pod string) string { return c.lab.Endpoint(pod).Addr(f).String() }
	host := func(pod string) string {
		a := c.lab.Endpoint(pod).Addr(f)
		return netip.PrefixFrom(a, a.BitLen()).String()
	}
	_ = addr
	one := func(name string, change func(c *cnpCluster), want allowedFunc, ports ...netlab.Port) cnpScenario {
		if len(ports) == 0 {
			ports = allProtoPorts
		}
		return cnpScenario{name: name, steps: []cnpStep{{name: "apply", change: change, want: want, ports: ports}}}
	}
	allowAllInto := func(ns string) *networkingv1.NetworkPolicy {
		return np(ns, "allow-all", spec{PodSelector: allPodsSel, Ingress: []networkingv1.NetworkPolicyIngressRule{{}}})
	}
	return []cnpScenario{
		one("admin Deny overrides a NetworkPolicy allow", func(c *cnpCluster) {
			c.addPolicy(allowAllInto("x"))
			c.addCNP(cnpOf("deny-y-to-x", v1beta1.AdminTier, 10, "x", func(s *cnpSpec) {
				s.Ingress = []v1beta1.ClusterNetworkPolicyIngressRule{cIn(cDeny, fromNSs("y"))}
			}))
		}, not(and(fromNS("y"), toNS("x")))),
		one("admin Accept overrides a NetworkPolicy deny", func(c *cnpCluster) {
			c.addPolicy(np("x", "deny-all", spec{PodSelector: allPodsSel, PolicyTypes: both}))
			c.addCNP(cnpOf("accept-y", v1beta1.AdminTier, 10, "x", func(s *cnpSpec) {
				s.Ingress = []v1beta1.ClusterNetworkPolicyIngressRule{cIn(cAccept, fromNSs("y"))}
				s.Egress = []v1beta1.ClusterNetworkPolicyEgressRule{cOut(cAccept, toNSs("z"))}
			}))
		}, and(onlyInto(toNS("x"), fromNS("y")), or(not(fromNS("x")), toNS("z")))),
		one("admin Pass hands the decision to NetworkPolicy", func(c *cnpCluster) {
			c.addPolicy(np("x", "only-y-a", spec{PodSelector: allPodsSel, Ingress: ingress([]peer{{NamespaceSelector: match("ns", "y"), PodSelector: match("pod", "a")}})}))
			c.addCNP(cnpOf("pass-y", v1beta1.AdminTier, 10, "x", func(s *cnpSpec) {
				s.Ingress = []v1beta1.ClusterNetworkPolicyIngressRule{cIn(cPass, fromNSs("y")), cIn(cDeny, fromNSs(""))}
			}))
		}, onlyInto(toNS("x"), from("y/a"))),
		one("baseline Deny only for pods no NetworkPolicy isolates", func(c *cnpCluster) {
			c.addPolicy(np("x", "allow-a", spec{PodSelector: *match("pod", "a"), Ingress: []networkingv1.NetworkPolicyIngressRule{{}}}))
			c.addCNP(cnpOf("isolate-from-z", v1beta1.BaselineTier, 0, "", func(s *cnpSpec) {
				s.Ingress = []v1beta1.ClusterNetworkPolicyIngressRule{cIn(cDeny, fromNSs("z"))}
			}))
		}, or(not(fromNS("z")), to("x/a"))),
		one("Pass through all three tiers", func(c *cnpCluster) {
			c.addCNP(cnpOf("admin-pass", v1beta1.AdminTier, 0, "x", func(s *cnpSpec) {
				s.Ingress = []v1beta1.ClusterNetworkPolicyIngressRule{cIn(cPass, fromNSs("y")), cIn(cPass, fromNSs("z"))}
			}))
			c.addCNP(cnpOf("baseline", v1beta1.BaselineTier, 0, "x", func(s *cnpSpec) {
				// y: Pass again, to the default allow; z: denied here.
				s.Ingress = []v1beta1.ClusterNetworkPolicyIngressRule{cIn(cPass, fromNSs("y")), cIn(cDeny, fromNSs(""))}
			}))
		}, onlyInto(toNS("x"), fromNS("y"))),
		one("priorities: the lower number decides first", func(c *cnpCluster) {
			c.addCNP(cnpOf("b-deny", v1beta1.AdminTier, 20, "x", func(s *cnpSpec) {
				s.Ingress = []v1beta1.ClusterNetworkPolicyIngressRule{cIn(cDeny, fromNSs(""))}
			}))
			c.addCNP(cnpOf("a-accept", v1beta1.AdminTier, 10, "x", func(s *cnpSpec) {
				s.Ingress = []v1beta1.ClusterNetworkPolicyIngressRule{cIn(cAccept, fromPod("z", "c"))}
			}))
		}, onlyInto(toNS("x"), from("z/c"))),
		one("ports: TCP number, UDP range and SCTP number", func(c *cnpCluster) {
			c.addCNP(cnpOf("ports", v1beta1.AdminTier, 0, "x", func(s *cnpSpec) {
				s.Ingress = []v1beta1.ClusterNetworkPolicyIngressRule{cIn(cDeny, fromNSs("y"), cnptest.TCP(80), cnptest.UDPRange(80, 81), cnptest.SCTP(81))}
			}))
		}, not(and(fromNS("y"), toNS("x"), onPorts(tcp80, udp80, udp81, sctp81)))),
		one("named ports: ingress on the pod, egress per destination", func(c *cnpCluster) {
			c.addCNP(cnpOf("named", v1beta1.AdminTier, 0, "x", func(s *cnpSpec) {
				s.Ingress = []v1beta1.ClusterNetworkPolicyIngressRule{cIn(cDeny, fromNSs("y"), cnptest.NamedPort("serve-81-tcp"))}
				s.Egress = []v1beta1.ClusterNetworkPolicyEgressRule{cOut(cDeny, toNSs("z"), cnptest.NamedPort("serve-80-udp"))}
			}))
		}, and(not(and(fromNS("y"), toNS("x"), onPorts(tcp81))), not(and(fromNS("x"), toNS("z"), onPorts(udp80))))),
		one("networks: admin egress Deny to one address", func(c *cnpCluster) {
			c.addPolicy(np("x", "allow-egress", spec{PodSelector: allPodsSel, PolicyTypes: egressOnly, Egress: []networkingv1.NetworkPolicyEgressRule{{}}}))
			c.addCNP(cnpOf("no-y-a", v1beta1.AdminTier, 0, "x", func(s *cnpSpec) {
				s.Egress = []v1beta1.ClusterNetworkPolicyEgressRule{cOut(cDeny, toNetworks(host("y/a")))}
			}))
		}, not(and(fromNS("x"), to("y/a")))),
		{name: "egress Accept still needs the destination's ingress", steps: []cnpStep{
			{name: "accept x to z", ports: []netlab.Port{tcp80, udp81}, change: func(c *cnpCluster) {
				c.addPolicy(np("x", "deny-egress", spec{PodSelector: allPodsSel, PolicyTypes: egressOnly}))
				c.addCNP(cnpOf("x-to-z", v1beta1.AdminTier, 0, "x", func(s *cnpSpec) {
					s.Egress = []v1beta1.ClusterNetworkPolicyEgressRule{cOut(cAccept, toNSs("z"))}
				}))
			}, want: or(not(fromNS("x")), toNS("z"))},
			{name: "z isolates its ingress", ports: []netlab.Port{tcp80, udp81}, change: func(c *cnpCluster) {
				c.addPolicy(np("z", "deny-in", spec{PodSelector: allPodsSel, PolicyTypes: ingressOnly}))
			}, want: and(not(fromNS("x")), not(toNS("z")))},
			{name: "the policy is deleted", ports: []netlab.Port{tcp80, udp81}, change: func(c *cnpCluster) {
				delete(c.cnps, "x-to-z")
			}, want: and(not(fromNS("x")), not(toNS("z")))},
		}},
		{name: "a baseline Deny with a subject change", steps: []cnpStep{
			{name: "subject selects nothing", ports: []netlab.Port{tcp80}, change: func(c *cnpCluster) {
				c.addCNP(cnpOf("iso", v1beta1.BaselineTier, 0, "none", func(s *cnpSpec) {
					s.Ingress = []v1beta1.ClusterNetworkPolicyIngressRule{cIn(cDeny, fromNSs(""))}
				}))
			}, want: all},
			{name: "namespace y labelled into the subject", ports: []netlab.Port{tcp80}, change: func(c *cnpCluster) {
				c.nsLabels["y"]["ns"] = "none"
			}, want: not(toNS("y"))},
		}},
	}
}

func runCNPScenarios(t *testing.T, c *cnpCluster, f netlab.Family) {
	for _, sc := range cnpScenarios(c, f) {
		t.Run(sc.name, func(t *testing.T) {
			c.t = t
			c.reset()
			c.cnps = map[string]*v1beta1.ClusterNetworkPolicy{}
			for _, st := range sc.steps {
				st.change(c)
				c.sync()
				c.checkCNP(f, st.ports, st.want)
			}
		})
	}
}

func TestClusterNetworkPolicyRoutedIPv4(t *testing.T) {
	runCNPScenarios(t, newCNPCluster(t, false), netlab.IPv4)
}

func TestClusterNetworkPolicyRoutedIPv6(t *testing.T) {
	runCNPScenarios(t, newCNPCluster(t, false), netlab.IPv6)
}

// TestClusterNetworkPolicyBridged runs the scenarios on a bridged node
// (br_netfilter): IPv6 neighbour discovery between pods crosses the forward
// hook there, and must pass before any tier, also a deny-all one.
func TestClusterNetworkPolicyBridged(t *testing.T) {
	c := newCNPCluster(t, true)
	for _, f := range []netlab.Family{netlab.IPv4, netlab.IPv6} {
		t.Run(f.String(), func(t *testing.T) { runCNPScenarios(t, c, f) })
	}
}

// TestClusterNetworkPolicyKeepsEstablishedFlows: as for NetworkPolicy, a
// Deny added while a connection is established does not cut it (np_forward
// accepts established packets before any tier); new connections are
// denied.
func TestClusterNetworkPolicyKeepsEstablishedFlows(t *testing.T) {
	c := newCNPCluster(t, false)
	c.sync()
	startTCPEcho(t, c.lab, "x/a", 9002)
	ya := c.lab.Endpoint("y/a").Addr(netlab.IPv4).String()
	conn := dialTCP(t, c.lab, "y/a", c.lab.Endpoint("x/a").Addr(netlab.IPv4), 9002)
	conn.expect(t, "before the policy", ya)

	c.addCNP(cnpOf("deny-y", v1beta1.AdminTier, 0, "x", func(s *cnpSpec) {
		s.Ingress = []v1beta1.ClusterNetworkPolicyIngressRule{cIn(cDeny, fromNSs("y"))}
	}))
	c.sync()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for _, p := range []netlab.Port{tcp80, udp80, sctp80} {
		if ok, err := c.lab.Probe(ctx, "y/a", "x/a", p, netlab.IPv4); err != nil || ok {
			t.Errorf("a new %v connection y/a -> x/a after the Deny: allowed=%v (%v), want denied", p, ok, err)
		}
	}
	conn.expect(t, "established before the Deny", ya)
}

// TestClusterNetworkPolicyIPv4MappedNetworkFailsClosed: an Admin egress
// Deny to y/a's address written as an IPv4-mapped IPv6 network, which the
// API refuses. Compiled as written it was an IPv6 set that never matched
// an IPv4 packet, so the Deny let x reach y/a over IPv4. The rule fails
// closed instead: it drops all of x's egress, IPv4 and IPv6, as the API
// prescribes for a rule it cannot read.
func TestClusterNetworkPolicyIPv4MappedNetworkFailsClosed(t *testing.T) {
	c := newCNPCluster(t, false)
	c.t = t
	c.reset()
	mapped := netip.AddrFrom16(c.lab.Endpoint("y/a").Addr(netlab.IPv4).As16()).String() + "/128"
	c.addCNP(cnpOf("no-y-a", v1beta1.AdminTier, 0, "x", func(s *cnpSpec) {
		s.Egress = []v1beta1.ClusterNetworkPolicyEgressRule{cOut(cDeny, toNetworks(mapped))}
	}))
	c.wantProblem = "spec.egress[0].to[0].networks[0]: CIDR \"" + mapped + "\" is an IPv4-mapped IPv6 address"
	c.sync()
	for _, f := range []netlab.Family{netlab.IPv4, netlab.IPv6} {
		c.checkCNP(f, []netlab.Port{tcp80, udp81}, not(fromNS("x")))
	}
}
