package e2e

import (
	"net/netip"
	"regexp"
	"strconv"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/nftguard/nftguard/internal/netlab"
)

// --- policy builders --------------------------------------------------------

type spec = networkingv1.NetworkPolicySpec
type peer = networkingv1.NetworkPolicyPeer

func np(ns, name string, s spec) *networkingv1.NetworkPolicy {
	return &networkingv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Spec: s}
}

func match(kv ...string) *metav1.LabelSelector {
	m := map[string]string{}
	for i := 0; i+1 < len(kv); i += 2 {
		m[kv[i]] = kv[i+1]
	}
	return &metav1.LabelSelector{MatchLabels: m}
}

func expr(key string, op metav1.LabelSelectorOperator, values ...string) *metav1.LabelSelector {
	return &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: key, Operator: op, Values: values}}}
}

func pods(kv ...string) peer { return peer{PodSelector: match(kv...)} }
func nss(kv ...string) peer  { return peer{NamespaceSelector: match(kv...)} }

func ingress(from []peer, ports ...networkingv1.NetworkPolicyPort) []networkingv1.NetworkPolicyIngressRule {
	return []networkingv1.NetworkPolicyIngressRule{{From: from, Ports: ports}}
}

func egress(to []peer, ports ...networkingv1.NetworkPolicyPort) []networkingv1.NetworkPolicyEgressRule {
	return []networkingv1.NetworkPolicyEgressRule{{To: to, Ports: ports}}
}

func port(proto corev1.Protocol, p int) networkingv1.NetworkPolicyPort {
	v := intstr.FromInt32(int32(p))
	return networkingv1.NetworkPolicyPort{Protocol: &proto, Port: &v}
}

func named(proto corev1.Protocol, name string) networkingv1.NetworkPolicyPort {
	v := intstr.FromString(name)
	return networkingv1.NetworkPolicyPort{Protocol: &proto, Port: &v}
}

func protoOnly(proto corev1.Protocol) networkingv1.NetworkPolicyPort {
	return networkingv1.NetworkPolicyPort{Protocol: &proto}
}

func portRange(p, end int) networkingv1.NetworkPolicyPort {
	v := intstr.FromInt32(int32(p))
	e := int32(end)
	return networkingv1.NetworkPolicyPort{Port: &v, EndPort: &e}
}

var (
	ingressOnly = []networkingv1.PolicyType{networkingv1.PolicyTypeIngress}
	egressOnly  = []networkingv1.PolicyType{networkingv1.PolicyTypeEgress}
	both        = []networkingv1.PolicyType{networkingv1.PolicyTypeIngress, networkingv1.PolicyTypeEgress}
	allPodsSel  = metav1.LabelSelector{}
	tcp         = corev1.ProtocolTCP
	udp         = corev1.ProtocolUDP
	sctp        = corev1.ProtocolSCTP
)

// --- expectations -----------------------------------------------------------

func all(string, string, netlab.Port) bool { return true }

func not(f allowedFunc) allowedFunc {
	return func(a, b string, p netlab.Port) bool { return !f(a, b, p) }
}

func and(fs ...allowedFunc) allowedFunc {
	return func(a, b string, p netlab.Port) bool {
		for _, f := range fs {
			if !f(a, b, p) {
				return false
			}
		}
		return true
	}
}

func or(fs ...allowedFunc) allowedFunc {
	return func(a, b string, p netlab.Port) bool {
		for _, f := range fs {
			if f(a, b, p) {
				return true
			}
		}
		return false
	}
}

func to(pods ...string) allowedFunc {
	return func(_, b string, _ netlab.Port) bool { return contains(pods, b) }
}
func from(pods ...string) allowedFunc {
	return func(a, _ string, _ netlab.Port) bool { return contains(pods, a) }
}
func toNS(ns ...string) allowedFunc {
	return func(_, b string, _ netlab.Port) bool { return contains(ns, nsOf(b)) }
}
func fromNS(ns ...string) allowedFunc {
	return func(a, _ string, _ netlab.Port) bool { return contains(ns, nsOf(a)) }
}
func onPorts(ps ...netlab.Port) allowedFunc {
	return func(_, _ string, p netlab.Port) bool {
		for _, q := range ps {
			if q == p {
				return true
			}
		}
		return false
	}
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// onlyInto says: traffic into the isolated pods passes only if allow says
// so; everything else passes.
func onlyInto(isolated allowedFunc, allow allowedFunc) allowedFunc {
	return or(not(isolated), allow)
}

// --- scenarios --------------------------------------------------------------

type step struct {
	name   string
	change func(c *cluster)
	ports  []netlab.Port // tcp/80 and tcp/81 when empty
	want   allowedFunc
}

type scenario struct {
	name  string
	steps []step
}

func one(name string, change func(c *cluster), want allowedFunc, ports ...netlab.Port) scenario {
	return scenario{name: name, steps: []step{{name: "apply", change: change, want: want, ports: ports}}}
}

// scenarios are our own table-driven versions of the upstream Kubernetes
// netpol e2e cases (test/e2e/network/netpol), on pods x/a .. z/c.
func scenarios(c *cluster) []scenario {
	ipv4 := func(pod string) string { return c.lab.Endpoint(pod).Addr(netlab.IPv4).String() }
	return []scenario{
		one("default-deny-ingress", func(c *cluster) {
			c.addPolicy(np("x", "deny-ingress", spec{PodSelector: allPodsSel, PolicyTypes: ingressOnly}))
		}, not(toNS("x"))),
		one("default-deny-all", func(c *cluster) {
			c.addPolicy(np("x", "deny-all", spec{PodSelector: allPodsSel, PolicyTypes: both}))
		}, and(not(toNS("x")), not(fromNS("x")))),
		one("allow from pods in the same namespace by podSelector", func(c *cluster) {
			c.addPolicy(np("x", "allow-b", spec{PodSelector: *match("pod", "a"), Ingress: ingress([]peer{pods("pod", "b")})}))
		}, onlyInto(to("x/a"), from("x/b"))),
		one("allow ingress from all namespaces", func(c *cluster) {
			c.addPolicy(np("x", "allow-all-ns", spec{PodSelector: *match("pod", "a"), Ingress: ingress([]peer{{NamespaceSelector: &metav1.LabelSelector{}}})}))
		}, all),
		one("allow only from another namespace by namespaceSelector", func(c *cluster) {
			c.addPolicy(np("x", "allow-y", spec{PodSelector: *match("pod", "a"), Ingress: ingress([]peer{nss("ns", "y")})}))
		}, onlyInto(to("x/a"), fromNS("y"))),
		one("podSelector with matchExpressions", func(c *cluster) {
			c.addPolicy(np("x", "expr", spec{PodSelector: *match("pod", "a"), Ingress: ingress([]peer{{PodSelector: expr("pod", metav1.LabelSelectorOpIn, "b")}})}))
		}, onlyInto(to("x/a"), from("x/b"))),
		one("namespaceSelector with matchExpressions", func(c *cluster) {
			c.addPolicy(np("x", "expr", spec{PodSelector: *match("pod", "a"), Ingress: ingress([]peer{{NamespaceSelector: expr("ns", metav1.LabelSelectorOpNotIn, "x")}})}))
		}, onlyInto(to("x/a"), fromNS("y", "z"))),
		one("namespaceSelector with the default kubernetes.io/metadata.name label", func(c *cluster) {
			c.addPolicy(np("x", "by-name", spec{PodSelector: *match("pod", "a"), Ingress: ingress([]peer{nss(corev1.LabelMetadataName, "z")})}))
		}, onlyInto(to("x/a"), fromNS("z"))),
		one("podSelector OR namespaceSelector (two peers)", func(c *cluster) {
			c.addPolicy(np("x", "or", spec{PodSelector: *match("pod", "a"), Ingress: ingress([]peer{nss("ns", "y"), pods("pod", "b")})}))
		}, onlyInto(to("x/a"), or(fromNS("y"), from("x/b")))),
		one("podSelector AND namespaceSelector (one peer)", func(c *cluster) {
			c.addPolicy(np("x", "and", spec{PodSelector: *match("pod", "a"), Ingress: ingress([]peer{{NamespaceSelector: match("ns", "y"), PodSelector: match("pod", "b")}})}))
		}, onlyInto(to("x/a"), from("y/b"))),
		one("multiple podSelectors and namespaceSelectors", func(c *cluster) {
			c.addPolicy(np("x", "multi", spec{PodSelector: *match("pod", "a"), Ingress: ingress([]peer{{
				NamespaceSelector: expr("ns", metav1.LabelSelectorOpIn, "y", "z"),
				PodSelector:       expr("pod", metav1.LabelSelectorOpIn, "b", "c")}})}))
		}, onlyInto(to("x/a"), from("y/b", "y/c", "z/b", "z/c"))),
		one("any pod in any namespace by an empty podSelector peer", func(c *cluster) {
			c.addPolicy(np("x", "any", spec{PodSelector: *match("pod", "a"), Ingress: ingress([]peer{{PodSelector: &metav1.LabelSelector{}}})}))
		}, onlyInto(to("x/a"), fromNS("x"))),
		one("ports: only 81 from namespace y", func(c *cluster) {
			c.addPolicy(np("x", "port81", spec{PodSelector: *match("pod", "a"), Ingress: ingress([]peer{nss("ns", "y")}, port(tcp, 81))}))
		}, onlyInto(to("x/a"), and(fromNS("y"), onPorts(tcp81)))),
		one("stacked policies with overlapping podSelectors add up", func(c *cluster) {
			c.addPolicy(np("x", "p80", spec{PodSelector: *match("pod", "a"), Ingress: ingress([]peer{nss("ns", "y")}, port(tcp, 80))}))
			c.addPolicy(np("x", "p81", spec{PodSelector: allPodsSel, Ingress: ingress([]peer{nss("ns", "y")}, port(tcp, 81))}))
		}, onlyInto(toNS("x"), or(and(fromNS("y"), onPorts(tcp81)), and(to("x/a"), fromNS("y"), onPorts(tcp80))))),
		one("allow-all ingress", func(c *cluster) {
			c.addPolicy(np("x", "allow-all", spec{PodSelector: allPodsSel, Ingress: []networkingv1.NetworkPolicyIngressRule{{}}}))
		}, all),
		one("ingress on one named port", func(c *cluster) {
			c.addPolicy(np("x", "named", spec{PodSelector: *match("pod", "a"), Ingress: ingress(nil, named(tcp, "serve-81-tcp"))}))
		}, onlyInto(to("x/a"), onPorts(tcp81))),
		one("ingress from a namespace on one named port", func(c *cluster) {
			c.addPolicy(np("x", "named-ns", spec{PodSelector: allPodsSel, Ingress: ingress([]peer{nss("ns", "y")}, named(tcp, "serve-80-tcp"))}))
		}, onlyInto(toNS("x"), and(fromNS("y"), onPorts(tcp80)))),
		one("egress on one named port", func(c *cluster) {
			c.addPolicy(np("x", "egress-named", spec{PodSelector: *match("pod", "a"), PolicyTypes: egressOnly, Egress: egress(nil, named(tcp, "serve-81-tcp"))}))
		}, or(not(from("x/a")), onPorts(tcp81))),
		{name: "updated policy", steps: []step{
			{name: "allow from y", change: func(c *cluster) {
				c.addPolicy(np("x", "upd", spec{PodSelector: *match("pod", "a"), Ingress: ingress([]peer{nss("ns", "y")})}))
			}, want: onlyInto(to("x/a"), fromNS("y"))},
			{name: "now from z", change: func(c *cluster) {
				c.addPolicy(np("x", "upd", spec{PodSelector: *match("pod", "a"), Ingress: ingress([]peer{nss("ns", "z")})}))
			}, want: onlyInto(to("x/a"), fromNS("z"))},
		}},
		{name: "ingress from an updated namespace", steps: []step{
			{name: "no namespace matches", change: func(c *cluster) {
				c.addPolicy(np("x", "ns2", spec{PodSelector: *match("pod", "a"), Ingress: ingress([]peer{nss("ns2", "updated")})}))
			}, want: not(to("x/a"))},
			{name: "label y", change: func(c *cluster) { c.nsLabels["y"]["ns2"] = "updated" },
				want: onlyInto(to("x/a"), fromNS("y"))},
		}},
		{name: "ingress from an updated pod", steps: []step{
			{name: "no pod matches", change: func(c *cluster) {
				c.addPolicy(np("x", "pod2", spec{PodSelector: *match("pod", "a"), Ingress: ingress([]peer{pods("pod2", "updated")})}))
			}, want: not(to("x/a"))},
			{name: "label x/b", change: func(c *cluster) { c.podLabels["x/b"]["pod2"] = "updated" },
				want: onlyInto(to("x/a"), from("x/b"))},
		}},
		{name: "deny ingress to an updated pod", steps: []step{
			{name: "nothing selected", change: func(c *cluster) {
				c.addPolicy(np("x", "target", spec{PodSelector: *match("target", "true"), PolicyTypes: ingressOnly}))
			}, want: all},
			{name: "label x/a", change: func(c *cluster) { c.podLabels["x/a"]["target"] = "true" },
				want: not(to("x/a"))},
		}},
		one("deny egress by podSelector", func(c *cluster) {
			c.addPolicy(np("x", "deny-egress-a", spec{PodSelector: *match("pod", "a"), PolicyTypes: egressOnly}))
		}, not(from("x/a"))),
		one("deny egress from all pods of a namespace", func(c *cluster) {
			c.addPolicy(np("x", "deny-egress", spec{PodSelector: allPodsSel, PolicyTypes: egressOnly}))
		}, not(fromNS("x"))),
		one("ingress and egress in one policy", func(c *cluster) {
			c.addPolicy(np("x", "in-out", spec{PodSelector: *match("pod", "a"), PolicyTypes: both,
				Ingress: ingress([]peer{pods("pod", "b")}),
				Egress:  egress([]peer{pods("pod", "c")})}))
		}, and(onlyInto(to("x/a"), from("x/b")), or(not(from("x/a")), to("x/c")))),
		one("client-side egress deny wins over a server that allows", func(c *cluster) {
			c.addPolicy(np("y", "allow-all", spec{PodSelector: allPodsSel, Ingress: []networkingv1.NetworkPolicyIngressRule{{}}}))
			c.addPolicy(np("x", "deny-egress-a", spec{PodSelector: *match("pod", "a"), PolicyTypes: egressOnly}))
		}, not(from("x/a"))),
		one("egress to a pod in another namespace by pod and namespace selectors", func(c *cluster) {
			c.addPolicy(np("x", "egress-ya", spec{PodSelector: *match("pod", "a"), PolicyTypes: egressOnly,
				Egress: egress([]peer{{NamespaceSelector: match("ns", "y"), PodSelector: match("pod", "a")}})}))
		}, or(not(from("x/a")), to("y/a"))),
		{name: "any port on a specific protocol", steps: []step{{name: "udp only", ports: []netlab.Port{tcp80, udp80, udp81},
			change: func(c *cluster) {
				c.addPolicy(np("x", "udp-any", spec{PodSelector: *match("pod", "a"), Ingress: ingress(nil, protoOnly(udp))}))
			}, want: onlyInto(to("x/a"), onPorts(udp80, udp81))}}},
		one("multiple ingress policies: allow-all takes precedence", func(c *cluster) {
			c.addPolicy(np("x", "p80", spec{PodSelector: *match("pod", "a"), Ingress: ingress([]peer{nss("ns", "y")}, port(tcp, 80))}))
			c.addPolicy(np("x", "allow-all", spec{PodSelector: *match("pod", "a"), Ingress: []networkingv1.NetworkPolicyIngressRule{{}}}))
		}, all),
		one("multiple egress policies: allow-all takes precedence", func(c *cluster) {
			c.addPolicy(np("x", "e80", spec{PodSelector: *match("pod", "a"), PolicyTypes: egressOnly, Egress: egress(nil, port(tcp, 80))}))
			c.addPolicy(np("x", "eall", spec{PodSelector: *match("pod", "a"), PolicyTypes: egressOnly, Egress: []networkingv1.NetworkPolicyEgressRule{{}}}))
		}, all),
		{name: "stop enforcing after the policy is deleted", steps: []step{
			{name: "deny", change: func(c *cluster) {
				c.addPolicy(np("x", "deny-all", spec{PodSelector: allPodsSel, PolicyTypes: both}))
			}, want: and(not(toNS("x")), not(fromNS("x")))},
			{name: "deleted", change: func(c *cluster) { c.deletePolicy("x", "deny-all") }, want: all},
		}},
		one("egress to a CIDR", func(c *cluster) {
			c.addPolicy(np("x", "cidr", spec{PodSelector: *match("pod", "a"), PolicyTypes: egressOnly,
				Egress: egress([]peer{{IPBlock: &networkingv1.IPBlock{CIDR: ipv4("y/a") + "/32"}}})}))
		}, or(not(from("x/a")), to("y/a"))),
		one("egress to a CIDR with an except", func(c *cluster) {
			pfx := netip.MustParsePrefix(ipv4("y/a") + "/16").Masked().String()
			c.addPolicy(np("x", "cidr-except", spec{PodSelector: *match("pod", "a"), PolicyTypes: egressOnly,
				Egress: egress([]peer{{IPBlock: &networkingv1.IPBlock{CIDR: pfx, Except: []string{ipv4("y/a") + "/32"}}}})}))
		}, or(not(from("x/a")), not(to("y/a")))),
		one("an address in both a CIDR's except and another rule is allowed", func(c *cluster) {
			pfx := netip.MustParsePrefix(ipv4("y/a") + "/16").Masked().String()
			c.addPolicy(np("x", "cidr-except", spec{PodSelector: *match("pod", "a"), PolicyTypes: egressOnly,
				Egress: append(egress([]peer{{IPBlock: &networkingv1.IPBlock{CIDR: pfx, Except: []string{ipv4("y/a") + "/32"}}}}),
					egress([]peer{{IPBlock: &networkingv1.IPBlock{CIDR: ipv4("y/a") + "/32"}}})...)}))
		}, all),
		one("ingress and egress isolation are independent", func(c *cluster) {
			c.addPolicy(np("x", "in-a", spec{PodSelector: *match("pod", "a"), PolicyTypes: ingressOnly}))
			c.addPolicy(np("x", "out-b", spec{PodSelector: *match("pod", "b"), PolicyTypes: egressOnly}))
		}, and(not(to("x/a")), not(from("x/b")))),
		{name: "SCTP is not TCP", steps: []step{{name: "sctp 80 only", ports: []netlab.Port{tcp80, sctp80, sctp81},
			change: func(c *cluster) {
				c.addPolicy(np("x", "sctp", spec{PodSelector: *match("pod", "a"), Ingress: ingress(nil, port(sctp, 80))}))
			}, want: onlyInto(to("x/a"), onPorts(sctp80))}}},
		{name: "UDP is not TCP", steps: []step{{name: "udp 81 only", ports: []netlab.Port{tcp81, udp81, udp80},
			change: func(c *cluster) {
				c.addPolicy(np("x", "udp", spec{PodSelector: *match("pod", "a"), Ingress: ingress(nil, port(udp, 81))}))
			}, want: onlyInto(to("x/a"), onPorts(udp81))}}},
		one("endPort range covering 80-81", func(c *cluster) {
			c.addPolicy(np("x", "range", spec{PodSelector: *match("pod", "a"), Ingress: ingress([]peer{nss("ns", "y")}, portRange(80, 81))}))
		}, onlyInto(to("x/a"), and(fromNS("y"), onPorts(tcp80, tcp81)))), // the range's protocol defaults to TCP
		one("endPort range starting above 80", func(c *cluster) {
			c.addPolicy(np("x", "range", spec{PodSelector: *match("pod", "a"), Ingress: ingress([]peer{nss("ns", "y")}, portRange(81, 90))}))
		}, onlyInto(to("x/a"), and(fromNS("y"), onPorts(tcp81)))),
	}
}

func runScenarios(t *testing.T, c *cluster, f netlab.Family, filter func(name string) bool) {
	for _, sc := range scenarios(c) {
		if filter != nil && !filter(sc.name) {
			continue
		}
		t.Run(sc.name, func(t *testing.T) {
			c.t = t
			c.reset()
			for _, st := range sc.steps {
				st.change(c)
				c.apply()
				ports := st.ports
				if len(ports) == 0 {
					ports = []netlab.Port{tcp80, tcp81}
				}
				c.check(f, ports, st.want)
			}
		})
	}
}

func TestNetworkPolicyRoutedIPv4(t *testing.T) {
	c := newCluster(t, false)
	runScenarios(t, c, netlab.IPv4, nil)
}

// subset are scenarios that cover every kind of peer, port and update; the
// routed IPv6 topology runs them (the bridged topology runs every scenario
// over both families, see TestNetworkPolicyBridgedDualStack).
var subset = regexp.MustCompile(`default-deny-all|AND namespaceSelector|named port|updated pod|SCTP is not TCP|UDP is not TCP|client-side egress|endPort range covering|ingress and egress in one policy`)

func TestNetworkPolicyRoutedIPv6(t *testing.T) {
	c := newCluster(t, false)
	runScenarios(t, c, netlab.IPv6, subset.MatchString)
}

// TestLabelChangeIsIncremental checks that label changes send only the
// changed set elements (one per IP family), not a rebuild of the table, and
// that each re-run of apply diffs against what the previous run left.
func TestLabelChangeIsIncremental(t *testing.T) {
	c := newCluster(t, false)
	c.addPolicy(np("x", "pod2", spec{PodSelector: allPodsSel, Ingress: ingress([]peer{{NamespaceSelector: &metav1.LabelSelector{}, PodSelector: match("pod2", "updated")}})}))
	c.podLabels["y/a"]["pod2"] = "updated"
	c.apply()
	c.check(netlab.IPv4, []netlab.Port{tcp80}, onlyInto(toNS("x"), from("y/a")))

	steps := []struct {
		name   string
		change func()
		want   allowedFunc
	}{
		{"label y/b", func() { c.podLabels["y/b"]["pod2"] = "updated" }, onlyInto(toNS("x"), from("y/a", "y/b"))},
		{"unlabel y/a", func() { delete(c.podLabels["y/a"], "pod2") }, onlyInto(toNS("x"), from("y/b"))},
		{"label namespace-wide change that selects nothing new", func() { c.nsLabels["z"]["team"] = "blue" }, onlyInto(toNS("x"), from("y/b"))},
	}
	for i, st := range steps {
		st.change()
		c.apply()
		ops := opsOf(t, c.lastApply)
		// One element of the IPv4 and one of the IPv6 peer set; nothing
		// at all when the selection did not change.
		limit := 2
		if i == 2 {
			limit = 0
		}
		if ops > limit {
			t.Errorf("%s: sent %d operations, want at most %d: %s", st.name, ops, limit, c.lastApply)
		}
		if strings.Contains(c.lastApply, "full") {
			t.Errorf("%s: the table was replaced: %s", st.name, c.lastApply)
		}
		c.check(netlab.IPv4, []netlab.Port{tcp80}, st.want)
	}
}

var opsRE = regexp.MustCompile(`(\d+) operations?`)

func opsOf(t *testing.T, applyOut string) int {
	t.Helper()
	m := opsRE.FindStringSubmatch(applyOut)
	if m == nil {
		t.Fatalf("no operation count in apply output %q", applyOut)
	}
	n, _ := strconv.Atoi(m[1])
	return n
}
