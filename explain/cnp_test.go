package explain

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	cnp "sigs.k8s.io/network-policy-api/apis/v1beta1"

	"github.com/nftguard/nftguard/internal/cnptest"
	"github.com/nftguard/nftguard/podset"
)

const (
	accept = cnp.ClusterNetworkPolicyRuleActionAccept
	deny   = cnp.ClusterNetworkPolicyRuleActionDeny
	pass   = cnp.ClusterNetworkPolicyRuleActionPass
	admin  = cnp.AdminTier
	base   = cnp.BaselineTier
)

// The ClusterNetworkPolicy builders are cnptest's (shared with the e2e
// and compiler tests), under the short names these tables use. Never
// assigned. A rule is written for either direction and split by the
// policy builders.
type rule = cnptest.Rule

func ingressCNP(name string, tier cnp.Tier, prio int32, subj cnp.ClusterNetworkPolicySubject, rules ...rule) *cnp.ClusterNetworkPolicy {
	return cnptest.Policy(name, tier, prio, subj, rules, nil)
}

func egressCNP(name string, tier cnp.Tier, prio int32, subj cnp.ClusterNetworkPolicySubject, rules ...rule) *cnp.ClusterNetworkPolicy {
	return cnptest.Policy(name, tier, prio, subj, nil, rules)
}

func peerNodes(kv ...string) cnp.ClusterNetworkPolicyEgressPeer {
	return cnp.ClusterNetworkPolicyEgressPeer{Nodes: sel(kv...)}
}

func peerNets(cidrs ...cnp.CIDR) cnp.ClusterNetworkPolicyEgressPeer {
	return cnp.ClusterNetworkPolicyEgressPeer{Networks: cidrs}
}

func peerDomains(names ...cnp.DomainName) cnp.ClusterNetworkPolicyEgressPeer {
	return cnp.ClusterNetworkPolicyEgressPeer{DomainNames: names}
}

var (
	sctp      = corev1.ProtocolSCTP
	allNS     = &metav1.LabelSelector{}
	anyPeer   = peerNets("0.0.0.0/0", "::/0")
	emptyPeer = cnp.ClusterNetworkPolicyEgressPeer{}
	// NetworkPolicies of x that isolate all its pods: one allows
	// everything, one nothing.
	allowAllX = pol("x", "allow-all", networkingv1.NetworkPolicySpec{PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress, networkingv1.PolicyTypeEgress},
		Ingress: []networkingv1.NetworkPolicyIngressRule{{}}, Egress: []networkingv1.NetworkPolicyEgressRule{{}}})
	denyAllX = pol("x", "deny-all", networkingv1.NetworkPolicySpec{PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress, networkingv1.PolicyTypeEgress}})
)

// cnpInput is testInput with node n2 labelled for nodes peers.
func cnpInput() Input {
	in := testInput()
	in.Nodes[1].Labels = map[string]string{"role": "infra"}
	return in
}

type cnpCase struct {
	name     string
	cnps     []*cnp.ClusterNetworkPolicy
	nps      []*networkingv1.NetworkPolicy
	nodeName string
	flow     Flow
	ingress  bool     // which side is checked; the other must allow
	want     []string // substrings of the checked side's decision
	not      []string // substrings it must not have
	tier     string
	allowed  bool
	// problem, when set, is a substring of the problems New must
	// report (rules that fail closed); else it must report none.
	problem string
	edit    func(*Input) // changes the cluster before New
}

func (tt cnpCase) run(t *testing.T) {
	t.Helper()
	in := cnpInput()
	in.ClusterNetworkPolicies = tt.cnps
	in.NetworkPolicies = tt.nps
	in.NodeName = tt.nodeName
	if tt.edit != nil {
		tt.edit(&in)
	}
	c, probs := New(in)
	if tt.problem == "" && len(probs) > 0 {
		t.Fatalf("problems: %v", probs)
	}
	if tt.problem != "" && !strings.Contains(fmt.Sprint(probs), tt.problem) {
		t.Fatalf("problems %v lack %q", probs, tt.problem)
	}
	res, err := c.Explain(tt.flow)
	if err != nil {
		t.Fatal(err)
	}
	d, other := res.Egress, res.Ingress
	if tt.ingress {
		d, other = res.Ingress, res.Egress
	}
	text := d.String()
	for _, w := range tt.want {
		if !strings.Contains(text, w) {
			t.Errorf("decision lacks %q:\n%s", w, res)
		}
	}
	for _, w := range tt.not {
		if strings.Contains(text, w) {
			t.Errorf("decision has %q:\n%s", w, res)
		}
	}
	if d.Allowed != tt.allowed || d.Tier != tt.tier {
		t.Errorf("allowed, tier = %v, %q; want %v, %q\n%s", d.Allowed, d.Tier, tt.allowed, tt.tier, res)
	}
	if !other.Allowed {
		t.Errorf("the other side denies:\n%s", res)
	}
	if res.Allowed != (res.Egress.Allowed && res.Ingress.Allowed) {
		t.Errorf("overall verdict disagrees with the sides:\n%s", res)
	}
}

// TestClusterNetworkPolicyMatrix runs every action in both tiers against
// every peer kind of each direction, with a NetworkPolicy that would decide
// the other way where the tier order matters.
func TestClusterNetworkPolicyMatrix(t *testing.T) {
	type peerKind struct {
		name    string
		ingress bool
		peer    cnp.ClusterNetworkPolicyEgressPeer
		flow    Flow
		text    string // how the matched peer is shown
		miss    Flow   // a flow the peer does not match
	}
	xa := cnptest.NamespacesSubjectOf("ns", "x")
	kinds := []peerKind{
		{"ingress namespaces", true, cnptest.PeerNamespacesOf("ns", "y"), Flow{From: "y/a", To: "x/a", Protocol: tcp, Port: 80}, "from[0] namespaces ns=y",
			Flow{From: "x/b", To: "x/a", Protocol: tcp, Port: 80}},
		{"ingress pods", true, cnptest.PeerPods(sel("ns", "y"), sel("pod", "a")), Flow{From: "y/a", To: "x/a", Protocol: tcp, Port: 80},
			"from[0] pods namespaceSelector ns=y AND podSelector pod=a", Flow{From: "x/b", To: "x/a", Protocol: tcp, Port: 80}},
		{"egress namespaces", false, cnptest.PeerNamespacesOf("ns", "y"), Flow{From: "x/a", To: "y/a", Protocol: tcp, Port: 80}, "to[0] namespaces ns=y",
			Flow{From: "x/a", To: "x/b", Protocol: tcp, Port: 80}},
		{"egress pods", false, cnptest.PeerPods(allNS, sel("pod", "a")), Flow{From: "x/a", To: "y/a", Protocol: udp, Port: 53},
			"to[0] pods namespaceSelector {} (all) AND podSelector pod=a", Flow{From: "x/a", To: "x/b", Protocol: udp, Port: 53}},
		{"egress nodes", false, peerNodes("role", "infra"), Flow{From: "x/a", To: "192.168.0.2", Protocol: tcp, Port: 10250},
			"to[0] nodes role=infra (node n2)", Flow{From: "x/a", To: "192.168.0.3", Protocol: tcp, Port: 10250}},
		{"egress networks", false, peerNets("8.8.8.0/24"), Flow{From: "x/a", To: "8.8.8.8", Protocol: sctp, Port: 9},
			"to[0] networks 8.8.8.0/24", Flow{From: "x/a", To: "8.8.4.4", Protocol: sctp, Port: 9}},
	}
	var cases []cnpCase
	for _, k := range kinds {
		dir := "egress"
		if k.ingress {
			dir = "ingress"
		}
		mk := func(name string, tier cnp.Tier, a cnp.ClusterNetworkPolicyRuleAction, prio int32) *cnp.ClusterNetworkPolicy {
			if k.ingress {
				return ingressCNP(name, tier, prio, xa, cnptest.R("the-rule", a, k.peer))
			}
			return egressCNP(name, tier, prio, xa, cnptest.R("the-rule", a, k.peer))
		}
		head := func(name, tier string, prio int) string {
			return fmt.Sprintf("ClusterNetworkPolicy %s (%s, priority %d) rule %s[0] \"the-rule\" (peer %s, port any port)", name, tier, prio, dir, k.text)
		}
		cases = append(cases,
			// Admin decides before NetworkPolicy, which would say the opposite.
			cnpCase{name: k.name + "/Admin Accept over a NetworkPolicy deny", cnps: []*cnp.ClusterNetworkPolicy{mk("acc", admin, accept, 3)},
				nps: []*networkingv1.NetworkPolicy{denyAllX}, flow: k.flow, ingress: k.ingress,
				want: []string{"allowed by " + head("acc", "Admin", 3)}, tier: TierAdmin, allowed: true},
			cnpCase{name: k.name + "/Admin Deny over a NetworkPolicy allow", cnps: []*cnp.ClusterNetworkPolicy{mk("den", admin, deny, 0)},
				nps: []*networkingv1.NetworkPolicy{allowAllX}, flow: k.flow, ingress: k.ingress,
				want: []string{"denied by " + head("den", "Admin", 0)}, tier: TierAdmin},
			cnpCase{name: k.name + "/Admin Pass to a NetworkPolicy deny", cnps: []*cnp.ClusterNetworkPolicy{mk("pas", admin, pass, 999), mk("deny-later", admin, deny, 1000)},
				nps: []*networkingv1.NetworkPolicy{denyAllX}, flow: k.flow, ingress: k.ingress,
				want: []string{"passed by " + head("pas", "Admin", 999) + ", then denied: isolated by x/deny-all"}, not: []string{"deny-later", "note"},
				tier: TierNetworkPolicy},
			// Baseline decides only where no NetworkPolicy isolates.
			cnpCase{name: k.name + "/Baseline Accept", cnps: []*cnp.ClusterNetworkPolicy{mk("acc", base, accept, 7)}, flow: k.flow, ingress: k.ingress,
				want: []string{"allowed by " + head("acc", "Baseline", 7)}, tier: TierBaseline, allowed: true},
			cnpCase{name: k.name + "/Baseline Deny", cnps: []*cnp.ClusterNetworkPolicy{mk("den", base, deny, 7)}, flow: k.flow, ingress: k.ingress,
				want: []string{"denied by " + head("den", "Baseline", 7)}, tier: TierBaseline},
			cnpCase{name: k.name + "/Baseline Pass to the default", cnps: []*cnp.ClusterNetworkPolicy{mk("pas", base, pass, 7), mk("pat", base, deny, 8)}, flow: k.flow, ingress: k.ingress,
				want: []string{"passed by " + head("pas", "Baseline", 7) + ", then allowed: not isolated for " + dir}, not: []string{"denied by"}, allowed: true},
			cnpCase{name: k.name + "/Baseline Deny under a NetworkPolicy allow", cnps: []*cnp.ClusterNetworkPolicy{mk("den", base, deny, 7)},
				nps: []*networkingv1.NetworkPolicy{allowAllX}, flow: k.flow, ingress: k.ingress,
				want: []string{"allowed by x/allow-all " + dir + "[0]"}, not: []string{"den"}, tier: TierNetworkPolicy, allowed: true},
			cnpCase{name: k.name + "/Admin Deny does not match another peer", cnps: []*cnp.ClusterNetworkPolicy{mk("den", admin, deny, 7)}, flow: k.miss, ingress: k.ingress,
				want:    []string{"allowed: not isolated for " + dir + ": no NetworkPolicy selects the pod, and no rule of the ClusterNetworkPolicies that select it (Admin: den) decided"},
				allowed: true},
		)
	}
	for _, tt := range cases {
		t.Run(tt.name, tt.run)
	}
}

// TestClusterNetworkPolicyOrder checks the order of tiers, priorities,
// names and rules, Pass chains and the equal-priority note.
func TestClusterNetworkPolicyOrder(t *testing.T) {
	xa := cnptest.NamespacesSubjectOf("ns", "x")
	toYA := Flow{From: "x/a", To: "y/a", Protocol: tcp, Port: 80}
	fromB := Flow{From: "x/b", To: "x/a", Protocol: tcp, Port: 80}
	for _, tt := range []cnpCase{
		{name: "Pass through all three tiers to the default allow",
			cnps: []*cnp.ClusterNetworkPolicy{
				egressCNP("b-pass", base, 0, xa, cnptest.R("", pass, cnptest.PeerNamespacesOf("ns", "y"))),
				egressCNP("a-pass", admin, 500, xa, cnptest.R("p", pass, anyPeer)),
				egressCNP("a-deny", admin, 501, xa, cnptest.R("", deny, anyPeer)),
				egressCNP("b-deny", base, 1, xa, cnptest.R("", deny, anyPeer)),
			},
			flow: toYA,
			want: []string{`passed by ClusterNetworkPolicy a-pass (Admin, priority 500) rule egress[0] "p" (peer to[0] networks 0.0.0.0/0, port any port), ` +
				`then passed by ClusterNetworkPolicy b-pass (Baseline, priority 0) rule egress[0] (peer to[0] namespaces ns=y, port any port), ` +
				`then allowed: not isolated for egress: no NetworkPolicy selects the pod, and no rule of the ClusterNetworkPolicies that select it (Admin: a-pass, a-deny; Baseline: b-pass, b-deny) decided`},
			allowed: true},
		{name: "Admin Pass then NetworkPolicy allow: Baseline never consulted",
			cnps: []*cnp.ClusterNetworkPolicy{egressCNP("a-pass", admin, 1, xa, cnptest.R("", pass, anyPeer)), egressCNP("b-deny", base, 1, xa, cnptest.R("", deny, anyPeer))},
			nps:  []*networkingv1.NetworkPolicy{allowAllX}, flow: toYA,
			want: []string{"passed by ClusterNetworkPolicy a-pass", "then allowed by NetworkPolicy x/allow-all egress[0]"}, not: []string{"b-deny"},
			tier: TierNetworkPolicy, allowed: true},
		{name: "lower priority value first, whatever the names",
			cnps: []*cnp.ClusterNetworkPolicy{egressCNP("a-deny", admin, 6, xa, cnptest.R("", deny, anyPeer)), egressCNP("z-accept", admin, 5, xa, cnptest.R("", accept, anyPeer))},
			flow: toYA, want: []string{"allowed by ClusterNetworkPolicy z-accept (Admin, priority 5)"}, not: []string{"note"}, tier: TierAdmin, allowed: true},
		{name: "equal priorities by name, and explain says so",
			cnps: []*cnp.ClusterNetworkPolicy{egressCNP("b-deny", admin, 10, xa, cnptest.R("no", deny, anyPeer)), egressCNP("a-accept", admin, 10, xa, cnptest.R("yes", accept, cnptest.PeerNamespacesOf("ns", "y")))},
			flow: toYA,
			want: []string{`allowed by ClusterNetworkPolicy a-accept (Admin, priority 10) rule egress[0] "yes"`,
				`note: priority 10 is shared with ClusterNetworkPolicy b-deny (Admin, priority 10) rule egress[0] "no" (peer to[0] networks 0.0.0.0/0, port any port), which would deny: ` +
					`the API leaves the order of equal priorities open; nftguard orders them by name, so a-accept decides`},
			tier: TierAdmin, allowed: true},
		{name: "equal priorities without another match: no note",
			cnps: []*cnp.ClusterNetworkPolicy{egressCNP("b-deny", admin, 10, xa, cnptest.R("no", deny, cnptest.PeerNamespacesOf("ns", "z"))), egressCNP("a-accept", admin, 10, xa, cnptest.R("yes", accept, anyPeer))},
			flow: toYA, want: []string{"allowed by ClusterNetworkPolicy a-accept"}, not: []string{"note"}, tier: TierAdmin, allowed: true},
		{name: "rules in written order: the first match decides",
			cnps: []*cnp.ClusterNetworkPolicy{ingressCNP("web", admin, 1, xa,
				cnptest.R("web", accept, cnptest.PeerNamespacesOf()).On(cnptest.TCP(81), cnptest.TCP(80)),
				cnptest.R("rest", deny, cnptest.PeerNamespacesOf()))},
			flow: fromB, ingress: true, want: []string{`allowed by ClusterNetworkPolicy web (Admin, priority 1) rule ingress[0] "web" (peer from[0] namespaces {} (all), port protocols[1] TCP/80)`},
			tier: TierAdmin, allowed: true},
		{name: "rules in written order: a later rule when the first misses",
			cnps: []*cnp.ClusterNetworkPolicy{ingressCNP("web", admin, 1, xa,
				cnptest.R("web", accept, cnptest.PeerNamespacesOf()).On(cnptest.TCP(81)),
				cnptest.R("rest", deny, cnptest.PeerNamespacesOf()))},
			flow: fromB, ingress: true, want: []string{`denied by ClusterNetworkPolicy web (Admin, priority 1) rule ingress[1] "rest"`}, tier: TierAdmin},
		{name: "a policy without rules for the direction does not select",
			cnps: []*cnp.ClusterNetworkPolicy{ingressCNP("in-only", admin, 1, xa, cnptest.R("", deny, cnptest.PeerNamespacesOf()))},
			flow: toYA, want: []string{"not isolated for egress: no policy selects the pod"}, allowed: true},
	} {
		t.Run(tt.name, tt.run)
	}
	// An Admin egress Accept does not open the destination's ingress.
	in := cnpInput()
	in.ClusterNetworkPolicies = []*cnp.ClusterNetworkPolicy{egressCNP("out", admin, 1, xa, cnptest.R("", accept, anyPeer)), ingressCNP("in", admin, 2, cnptest.NamespacesSubjectOf("ns", "y"), cnptest.R("", deny, cnptest.PeerNamespacesOf("ns", "x")))}
	c, _ := New(in)
	res, err := c.Explain(toYA)
	if err != nil {
		t.Fatal(err)
	}
	if res.Allowed || !res.Egress.Allowed || res.Ingress.Allowed ||
		!strings.Contains(res.String(), "egress  x/a: allowed by ClusterNetworkPolicy out (Admin, priority 1) rule egress[0]") ||
		!strings.Contains(res.String(), "ingress y/a: denied by ClusterNetworkPolicy in (Admin, priority 2) rule ingress[0]") {
		t.Errorf("egress Accept and ingress Deny:\n%s", res)
	}
}

// TestClusterNetworkPolicyPeersAndPorts covers subjects, fail-closed peers,
// named ports, protocol forms, IPv6 networks and nodes peers.
func TestClusterNetworkPolicyPeersAndPorts(t *testing.T) {
	xa := cnptest.NamespacesSubjectOf("ns", "x")
	toYA := Flow{From: "x/a", To: "y/a", Protocol: tcp, Port: 80}
	// Accepts x, then denies pods by a selector the API server would
	// refuse: the Deny fails closed where it stands.
	badSelector := []*cnp.ClusterNetworkPolicy{ingressCNP("p", base, 1, xa,
		cnptest.R("ok", accept, cnptest.PeerNamespacesOf("ns", "x")),
		cnptest.R("bad", deny, cnptest.PeerPods(allNS, &metav1.LabelSelector{MatchLabels: map[string]string{"a b": "c"}})))}
	for _, tt := range []cnpCase{
		// Subjects.
		{name: "pods subject selects only its pods",
			cnps: []*cnp.ClusterNetworkPolicy{egressCNP("only-b", admin, 1, cnptest.PodsSubject(allNS, sel("pod", "b")), cnptest.R("", deny, anyPeer))},
			flow: toYA, want: []string{"no policy selects the pod"}, allowed: true},
		{name: "pods subject",
			cnps: []*cnp.ClusterNetworkPolicy{egressCNP("only-a", admin, 1, cnptest.PodsSubject(sel("ns", "x"), sel("pod", "a")), cnptest.R("", deny, anyPeer))},
			flow: toYA, want: []string{"denied by ClusterNetworkPolicy only-a"}, tier: TierAdmin},
		{name: "namespaces subject by metadata name",
			cnps: []*cnp.ClusterNetworkPolicy{egressCNP("x", admin, 1, cnptest.NamespacesSubjectOf(corev1.LabelMetadataName, "x"), cnptest.R("", deny, anyPeer))},
			flow: toYA, want: []string{"denied by ClusterNetworkPolicy x"}, tier: TierAdmin},
		{name: "not enforced for pods of other nodes",
			cnps:     []*cnp.ClusterNetworkPolicy{ingressCNP("y", admin, 1, cnptest.NamespacesSubjectOf("ns", "y"), cnptest.R("", deny, cnptest.PeerNamespacesOf()))},
			nodeName: "n1", flow: toYA, ingress: true, want: []string{"not enforced on node n1"}, allowed: true},
		// Fail-closed peers.
		{name: "a Deny rule with a peer of no field denies all",
			cnps: []*cnp.ClusterNetworkPolicy{egressCNP("new", admin, 1, xa, cnptest.R("future", deny, cnptest.PeerNamespacesOf("ns", "nowhere"), emptyPeer).On(cnptest.TCP(1)))},
			flow: toYA,
			want: []string{`denied by ClusterNetworkPolicy new (Admin, priority 1) rule egress[0] "future" (to[1]: no known peer field is set (a newer API version?): fail closed, this Deny rule denies all traffic)`},
			tier: TierAdmin},
		{name: "a Pass rule with a peer of no field denies all",
			cnps: []*cnp.ClusterNetworkPolicy{ingressCNP("new", base, 1, xa, cnptest.R("", pass, emptyPeer))},
			flow: Flow{From: "8.8.8.8", To: "x/a", Protocol: udp, Port: 53}, ingress: true,
			want: []string{"denied by ClusterNetworkPolicy new (Baseline, priority 1) rule ingress[0] (from[0]: no known peer field is set", "this Pass rule denies all traffic"},
			tier: TierBaseline},
		{name: "an Accept rule with a peer of no field matches nothing",
			cnps: []*cnp.ClusterNetworkPolicy{egressCNP("new", admin, 1, xa, cnptest.R("future", accept, cnptest.PeerNamespacesOf("ns", "y"), emptyPeer), cnptest.R("rest", deny, anyPeer))},
			flow: toYA,
			want: []string{`denied by ClusterNetworkPolicy new (Admin, priority 1) rule egress[1] "rest"`,
				`note: ClusterNetworkPolicy new (Admin, priority 1) rule egress[0] "future" fails closed: to[1]: no known peer field is set (a newer API version?); this Accept rule matches no traffic`},
			tier: TierAdmin},
		{name: "domainNames: the Accept rule matches nothing, the deny behind it decides",
			cnps: []*cnp.ClusterNetworkPolicy{egressCNP("dns", admin, 1, xa, cnptest.R("example", accept, peerDomains("example.com")), cnptest.R("rest", deny, anyPeer))},
			flow: Flow{From: "x/a", To: "93.184.216.34", Protocol: tcp, Port: 443},
			want: []string{`denied by ClusterNetworkPolicy dns (Admin, priority 1) rule egress[1] "rest"`,
				`rule egress[0] "example" matches addresses the pod resolved for example.com while their DNS answers last; without the node's live state this explanation takes it to match nothing`},
			tier: TierAdmin},
		{name: "domainNames in a Deny rule denies all",
			cnps: []*cnp.ClusterNetworkPolicy{egressCNP("dns", base, 1, xa, cnptest.R("", deny, peerDomains("*.example.com")))},
			flow: toYA, want: []string{"to[0].domainNames: domainNames peers are supported only in Accept rules: fail closed, this Deny rule denies all traffic"}, tier: TierBaseline},
		// Protocols.
		{name: "named port on the destination pod (ingress)",
			cnps: []*cnp.ClusterNetworkPolicy{ingressCNP("named", admin, 1, xa, cnptest.R("", accept, cnptest.PeerNamespacesOf()).On(cnptest.NamedPort("http")))},
			flow: Flow{From: "y/a", To: "x/a", Protocol: tcp, Port: 8080}, ingress: true,
			want: []string{`port protocols[0] destinationNamedPort "http" (TCP/8080 on x/a)`}, tier: TierAdmin, allowed: true},
		{name: "named port brings its protocol",
			cnps: []*cnp.ClusterNetworkPolicy{ingressCNP("named", admin, 1, xa, cnptest.R("", deny, cnptest.PeerNamespacesOf()).On(cnptest.NamedPort("dns")))},
			flow: Flow{From: "y/a", To: "x/a", Protocol: tcp, Port: 53}, ingress: true, want: []string{"(Admin: named) decided"}, allowed: true},
		{name: "named port on the destination pod (egress)",
			cnps: []*cnp.ClusterNetworkPolicy{egressCNP("named", admin, 1, xa, cnptest.R("", deny, cnptest.PeerPods(allNS, allNS)).On(cnptest.NamedPort("dns")))},
			flow: Flow{From: "x/a", To: "y/a", Protocol: udp, Port: 53},
			want: []string{`port protocols[0] destinationNamedPort "dns" (UDP/53 on y/a)`}, tier: TierAdmin},
		{name: "named port not on the pod",
			cnps: []*cnp.ClusterNetworkPolicy{egressCNP("named", admin, 1, xa, cnptest.R("", deny, cnptest.PeerPods(allNS, allNS)).On(cnptest.NamedPort("metrics")))},
			flow: toYA, want: []string{"(Admin: named) decided"}, allowed: true},
		// A name declared for two protocols (in two containers) matches
		// each protocol on its own port, as the compiler programs it; not
		// only the first port of that name.
		{name: "named port declared for two protocols: the second one",
			edit: addNamedPort("x", "a", "http", corev1.ProtocolUDP, 8053),
			cnps: []*cnp.ClusterNetworkPolicy{ingressCNP("named", admin, 1, xa, cnptest.R("", deny, cnptest.PeerNamespacesOf()).On(cnptest.NamedPort("http")))},
			flow: Flow{From: "y/a", To: "x/a", Protocol: udp, Port: 8053}, ingress: true,
			want: []string{`port protocols[0] destinationNamedPort "http" (UDP/8053 on x/a)`}, tier: TierAdmin},
		{name: "named port declared for two protocols: the first one",
			edit: addNamedPort("x", "a", "http", corev1.ProtocolUDP, 8053),
			cnps: []*cnp.ClusterNetworkPolicy{ingressCNP("named", admin, 1, xa, cnptest.R("", deny, cnptest.PeerNamespacesOf()).On(cnptest.NamedPort("http")))},
			flow: Flow{From: "y/a", To: "x/a", Protocol: tcp, Port: 8080}, ingress: true,
			want: []string{`port protocols[0] destinationNamedPort "http" (TCP/8080 on x/a)`}, tier: TierAdmin},
		{name: "named port declared for two protocols: not crossed",
			edit: addNamedPort("x", "a", "http", corev1.ProtocolUDP, 8053),
			cnps: []*cnp.ClusterNetworkPolicy{ingressCNP("named", admin, 1, xa, cnptest.R("", deny, cnptest.PeerNamespacesOf()).On(cnptest.NamedPort("http")))},
			flow: Flow{From: "y/a", To: "x/a", Protocol: udp, Port: 8080}, ingress: true, want: []string{"(Admin: named) decided"}, allowed: true},
		{name: "named port declared for two protocols (egress)",
			edit: addNamedPort("y", "a", "dns", corev1.ProtocolTCP, 5353),
			cnps: []*cnp.ClusterNetworkPolicy{egressCNP("named", admin, 1, xa, cnptest.R("", deny, cnptest.PeerPods(allNS, allNS)).On(cnptest.NamedPort("dns")))},
			flow: Flow{From: "x/a", To: "y/a", Protocol: tcp, Port: 5353},
			want: []string{`port protocols[0] destinationNamedPort "dns" (TCP/5353 on y/a)`}, tier: TierAdmin},
		// Invalid rules fail closed where they stand; the policy stays.
		{name: "an invalid Accept rule matches nothing, the rule behind it decides",
			cnps: []*cnp.ClusterNetworkPolicy{egressCNP("p", admin, 1, xa, cnptest.R("bad", accept, peerNets("10.0.0.0/33")), cnptest.R("rest", deny, anyPeer))},
			flow: toYA, problem: "spec.egress[0].to[0].networks[0]: invalid CIDR",
			want: []string{`denied by ClusterNetworkPolicy p (Admin, priority 1) rule egress[1] "rest"`,
				`note: ClusterNetworkPolicy p (Admin, priority 1) rule egress[0] "bad" fails closed: to[0].networks[0]: invalid CIDR "10.0.0.0/33"; this Accept rule matches no traffic`},
			tier: TierAdmin},
		{name: "an invalid selector in a rule peer fails that rule closed",
			cnps: badSelector,
			flow: Flow{From: "y/a", To: "x/a", Protocol: tcp, Port: 80}, ingress: true, problem: "spec.ingress[1].from[0].pods.podSelector",
			want: []string{`denied by ClusterNetworkPolicy p (Baseline, priority 1) rule ingress[1] "bad" (from[0].pods.podSelector: `, "fail closed, this Deny rule denies all traffic"},
			tier: TierBaseline},
		{name: "a rule before the invalid one still decides first",
			cnps: badSelector,
			flow: Flow{From: "x/b", To: "x/a", Protocol: tcp, Port: 80}, ingress: true, problem: "spec.ingress[1].from[0].pods.podSelector",
			want: []string{`allowed by ClusterNetworkPolicy p (Baseline, priority 1) rule ingress[0] "ok"`}, tier: TierBaseline, allowed: true},
		{name: "an empty protocol entry fails the Pass rule closed: it denies every protocol",
			cnps: []*cnp.ClusterNetworkPolicy{egressCNP("p", admin, 1, xa, cnptest.R("", pass, cnptest.PeerNamespacesOf("ns", "z")).On(cnptest.TCP(80), cnp.ClusterNetworkPolicyProtocol{}))},
			flow: Flow{From: "x/a", To: "y/a", Protocol: udp, Port: 53}, problem: "spec.egress[0].protocols[1]",
			want: []string{"(protocols[1]: exactly one of tcp, udp, sctp and destinationNamedPort must be set: fail closed, this Pass rule denies all traffic)"}, tier: TierAdmin},
		{name: "an empty protocols list fails the Accept rule closed",
			cnps: []*cnp.ClusterNetworkPolicy{egressCNP("p", admin, 1, xa, rule{Name: "none", Action: accept, Peers: []cnp.ClusterNetworkPolicyEgressPeer{anyPeer}, Protocols: []cnp.ClusterNetworkPolicyProtocol{}},
				cnptest.R("rest", deny, anyPeer))},
			flow: toYA, problem: "spec.egress[0].protocols: 0 protocols",
			want: []string{`rule egress[0] "none" fails closed: protocols: 0 protocols: 1 to 25 are required; this Accept rule matches no traffic`, `denied by ClusterNetworkPolicy p (Admin, priority 1) rule egress[1] "rest"`},
			tier: TierAdmin},
		{name: "UDP range",
			cnps: []*cnp.ClusterNetworkPolicy{egressCNP("r", base, 1, xa, cnptest.R("", deny, anyPeer).On(cnptest.TCP(5000), cnptest.UDPRange(5000, 6000)))},
			flow: Flow{From: "x/a", To: "y/a", Protocol: udp, Port: 6000}, want: []string{"port protocols[1] UDP/5000-6000"}, tier: TierBaseline},
		{name: "SCTP port: TCP on it does not match",
			cnps: []*cnp.ClusterNetworkPolicy{egressCNP("s", base, 1, xa, cnptest.R("", deny, anyPeer).On(cnptest.SCTP(80)))},
			flow: toYA, want: []string{"(Baseline: s) decided"}, allowed: true},
		{name: "SCTP port",
			cnps: []*cnp.ClusterNetworkPolicy{egressCNP("s", base, 1, xa, cnptest.R("", deny, anyPeer).On(cnptest.SCTP(80)))},
			flow: Flow{From: "x/a", To: "y/a", Protocol: sctp, Port: 80}, want: []string{"port protocols[0] SCTP/80"}, tier: TierBaseline},
		{name: "ICMPv6 meets only rules without protocols",
			cnps: []*cnp.ClusterNetworkPolicy{egressCNP("s", admin, 1, xa, cnptest.R("tcp", accept, anyPeer).On(cnptest.TCP(80)), cnptest.R("all", deny, anyPeer))},
			flow: Flow{From: "x/a", To: "y/a", Protocol: ProtocolICMPv6, Port: 128}, want: []string{`rule egress[1] "all" (peer to[0] networks ::/0, port any port)`}, tier: TierAdmin},
		// Networks, nodes, and what pods peers never select.
		{name: "IPv6 networks",
			cnps: []*cnp.ClusterNetworkPolicy{egressCNP("v6", admin, 1, xa, cnptest.R("", deny, peerNets("10.0.0.0/8", "fd00::/64")))},
			flow: Flow{From: "x/a", To: "x/b", Protocol: tcp, Port: 80, Family: 6}, want: []string{"peer to[0] networks fd00::/64"}, tier: TierAdmin},
		{name: "IPv6 networks do not match the IPv4 flow",
			cnps: []*cnp.ClusterNetworkPolicy{egressCNP("v6", admin, 1, xa, cnptest.R("", deny, peerNets("fd00::/16")))},
			flow: Flow{From: "x/a", To: "x/b", Protocol: tcp, Port: 80}, want: []string{"(Admin: v6) decided"}, allowed: true},
		{name: "networks match pod addresses too",
			cnps: []*cnp.ClusterNetworkPolicy{ingressCNP("in", admin, 1, xa, cnptest.R("", deny, cnptest.PeerNamespacesOf("ns", "z")))},
			flow: Flow{From: "y/a", To: "x/a", Protocol: tcp, Port: 80}, ingress: true, want: []string{"(Admin: in) decided"}, allowed: true},
		{name: "nodes peer: every node",
			cnps: []*cnp.ClusterNetworkPolicy{egressCNP("nodes", admin, 1, xa, cnptest.R("", deny, peerNodes()))},
			flow: Flow{From: "x/a", To: "192.168.0.2", Protocol: tcp, Port: 22}, want: []string{"to[0] nodes {} (all) (node n2)"}, tier: TierAdmin},
		// A nodes peer matches a Node's InternalIP and ExternalIP
		// addresses only, as the compiler programs it.
		{name: "nodes peer: an ExternalIP address",
			edit: nodeAddresses("n2", corev1.NodeAddress{Type: corev1.NodeExternalIP, Address: "203.0.113.9"}),
			cnps: []*cnp.ClusterNetworkPolicy{egressCNP("nodes", admin, 1, xa, cnptest.R("", deny, peerNodes("role", "infra")))},
			flow: Flow{From: "x/a", To: "203.0.113.9", Protocol: tcp, Port: 22}, want: []string{"to[0] nodes role=infra (node n2)"}, tier: TierAdmin},
		{name: "nodes peer: not a Hostname address",
			edit: nodeAddresses("n2", corev1.NodeAddress{Type: corev1.NodeHostName, Address: "192.168.0.5"}),
			cnps: []*cnp.ClusterNetworkPolicy{egressCNP("nodes", admin, 1, xa, cnptest.R("", deny, peerNodes("role", "infra")))},
			flow: Flow{From: "x/a", To: "192.168.0.5", Protocol: tcp, Port: 22}, want: []string{"(Admin: nodes) decided"}, allowed: true},
		{name: "nodes peer: not an InternalDNS address",
			edit: nodeAddresses("n2", corev1.NodeAddress{Type: corev1.NodeInternalDNS, Address: "fd00:9::1"}),
			cnps: []*cnp.ClusterNetworkPolicy{egressCNP("nodes", admin, 1, xa, cnptest.R("", deny, peerNodes()))},
			flow: Flow{From: "x/a", To: "fd00:9::1", Protocol: tcp, Port: 22}, want: []string{"(Admin: nodes) decided"}, allowed: true},
		{name: "nodes peer: the pod's own node is denied too",
			cnps: []*cnp.ClusterNetworkPolicy{egressCNP("nodes", admin, 1, xa, cnptest.R("", deny, peerNodes()))},
			flow: Flow{From: "x/a", To: "192.168.0.1", Protocol: tcp, Port: 22}, want: []string{"to[0] nodes {} (all) (node n1)", "an address of the pod's own node n1"}, tier: TierAdmin},
		{name: "nodes peer does not select pods",
			cnps: []*cnp.ClusterNetworkPolicy{egressCNP("nodes", admin, 1, xa, cnptest.R("", deny, peerNodes()))},
			flow: toYA, want: []string{"(Admin: nodes) decided"}, allowed: true},
		{name: "namespaces peer does not select a hostNetwork pod",
			cnps: []*cnp.ClusterNetworkPolicy{ingressCNP("in", admin, 1, cnptest.NamespacesSubjectOf("ns", "y"), cnptest.R("", deny, cnptest.PeerNamespacesOf()))},
			flow: Flow{From: "y/host", To: "y/a", Protocol: tcp, Port: 80}, ingress: true, want: []string{"(Admin: in) decided"}, allowed: true},
		{name: "networks peer does select a hostNetwork pod's address",
			cnps: []*cnp.ClusterNetworkPolicy{ingressCNP("in", admin, 1, cnptest.NamespacesSubjectOf("ns", "y"), rule{Action: deny, Peers: []cnp.ClusterNetworkPolicyEgressPeer{cnptest.PeerNamespacesOf()}}),
				egressCNP("out", admin, 1, cnptest.NamespacesSubjectOf("ns", "x"), cnptest.R("", deny, peerNets("192.168.0.0/24")))},
			flow: Flow{From: "x/a", To: "y/host", Protocol: tcp, Port: 80}, want: []string{"peer to[0] networks 192.168.0.0/24", "an address of the pod's own node n1"}, tier: TierAdmin},
		{name: "a hostNetwork pod is never a subject",
			cnps: []*cnp.ClusterNetworkPolicy{egressCNP("y", admin, 1, cnptest.NamespacesSubjectOf("ns", "y"), cnptest.R("", deny, anyPeer))},
			flow: Flow{From: "y/host", To: "x/a", Protocol: tcp, Port: 80}, want: []string{"hostNetwork pod: never isolated"}, allowed: true},
	} {
		t.Run(tt.name, tt.run)
	}
}

// addNamedPort gives a pod a second container declaring a port.
func addNamedPort(ns, name, port string, proto corev1.Protocol, num int32) func(*Input) {
	return func(in *Input) {
		for i, p := range in.Pods {
			if p.Namespace == ns && p.Name == name {
				c := *p
				c.Ports = append(slices.Clip(c.Ports), podset.Port{Name: port, Number: num, Protocol: proto})
				in.Pods[i] = &c
			}
		}
	}
}

// nodeAddresses adds addresses to a node.
func nodeAddresses(node string, addrs ...corev1.NodeAddress) func(*Input) {
	return func(in *Input) {
		for i, n := range in.Nodes {
			if n.Name == node {
				n = n.DeepCopy()
				n.Status.Addresses = append(n.Status.Addresses, addrs...)
				in.Nodes[i] = n
			}
		}
	}
}

func TestClusterNetworkPolicyWarnings(t *testing.T) {
	in := cnpInput()
	in.ClusterNetworkPolicies = []*cnp.ClusterNetworkPolicy{
		egressCNP("dns", admin, 1, cnptest.NamespacesSubjectOf(), cnptest.R("", accept, peerNets("10.0.0.0/8")), cnptest.R("", accept, peerDomains("example.com"))),
		ingressCNP("new", base, 1, cnptest.NamespacesSubjectOf(), cnptest.R("", pass, emptyPeer)),
	}
	c, probs := New(in)
	if len(probs) > 0 {
		t.Fatal(probs)
	}
	var got []string
	for _, w := range c.Warnings() {
		got = append(got, w.Error())
	}
	want := []string{
		"ClusterNetworkPolicy new: spec.ingress[0].from[0]: no known peer field is set (a newer API version?): the rule drops all traffic of its direction (fail closed)",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("warnings:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// TestClusterNetworkPolicyValidation checks that explain classifies invalid
// policies as the compiler does (clusterpolicy.CheckAll), because the
// kernel enforces the compiler's classification: an invalid placement
// leaves the policy out, an invalid rule fails closed where it stands (a
// Deny rule then denies all traffic of its direction), and what the API
// server would refuse but the compiler enforces as written is enforced.
func TestClusterNetworkPolicyValidation(t *testing.T) {
	ok := func() *cnp.ClusterNetworkPolicy {
		return egressCNP("p", admin, 1, cnptest.NamespacesSubjectOf("ns", "x"), cnptest.R("", deny, anyPeer))
	}
	badSel := &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "a", Operator: "Near"}}}
	long := strings.Repeat("n", 101)
	const (
		leftOut    = iota // the policy enforces nothing
		failClosed        // the Deny rule denies all traffic of its direction
		asWritten         // enforced as written, no problem
	)
	egressFlow := Flow{From: "x/a", To: "8.8.8.8", Protocol: tcp, Port: 80}
	ingressFlow := Flow{From: "y/a", To: "x/a", Protocol: udp, Port: 53}
	for _, tt := range []struct {
		name   string
		edit   func(p *cnp.ClusterNetworkPolicy)
		field  string // a substring of the problems and warnings
		effect int
		why    string // a substring of the fail-closed cause in the decision
	}{
		{"no name", func(p *cnp.ClusterNetworkPolicy) { p.Name = "" }, "metadata.name: required", leftOut, ""},
		{"tier", func(p *cnp.ClusterNetworkPolicy) { p.Spec.Tier = "Developer" }, `spec.tier: unsupported value "Developer"`, leftOut, ""},
		{"priority low", func(p *cnp.ClusterNetworkPolicy) { p.Spec.Priority = -1 }, "spec.priority: -1 is out of range 0-1000", leftOut, ""},
		{"priority high", func(p *cnp.ClusterNetworkPolicy) { p.Spec.Priority = 1001 }, "spec.priority: 1001", leftOut, ""},
		{"no subject", func(p *cnp.ClusterNetworkPolicy) { p.Spec.Subject = cnp.ClusterNetworkPolicySubject{} }, "spec.subject: exactly one", leftOut, ""},
		{"two subjects", func(p *cnp.ClusterNetworkPolicy) { p.Spec.Subject.Pods = &cnp.NamespacedPod{} }, "spec.subject: exactly one of namespaces and pods", leftOut, ""},
		{"bad subject selector", func(p *cnp.ClusterNetworkPolicy) { p.Spec.Subject.Namespaces = badSel }, "spec.subject.namespaces:", leftOut, ""},
		{"26 rules", func(p *cnp.ClusterNetworkPolicy) {
			for len(p.Spec.Egress) < 26 {
				p.Spec.Egress = append(p.Spec.Egress, p.Spec.Egress[0])
			}
		}, "spec.egress: 26 rules: at most 25", leftOut, ""},
		// Rules fail closed; the policy stays.
		{"long rule name", func(p *cnp.ClusterNetworkPolicy) { p.Spec.Egress[0].Name = long }, "spec.egress[0].name: 101 bytes", failClosed, "name: 101 bytes"},
		{"action", func(p *cnp.ClusterNetworkPolicy) { p.Spec.Egress[0].Action = "Allow" }, `spec.egress[0].action: unsupported value "Allow"`, failClosed, `action: unsupported value "Allow"`},
		{"no peers", func(p *cnp.ClusterNetworkPolicy) { p.Spec.Egress[0].To = nil }, "spec.egress[0].to: 0 peers", failClosed, "to: 0 peers"},
		{"no ingress peers", func(p *cnp.ClusterNetworkPolicy) {
			p.Spec.Ingress = []cnp.ClusterNetworkPolicyIngressRule{{Action: deny}}
		}, "spec.ingress[0].from: 0 peers", failClosed, "from: 0 peers"},
		{"two peer fields", func(p *cnp.ClusterNetworkPolicy) { p.Spec.Egress[0].To[0].Nodes = allNS }, "spec.egress[0].to[0]: exactly one peer field", failClosed, "to[0]: exactly one peer field"},
		{"ingress two peer fields", func(p *cnp.ClusterNetworkPolicy) {
			p.Spec.Ingress = []cnp.ClusterNetworkPolicyIngressRule{{Action: deny, From: []cnp.ClusterNetworkPolicyIngressPeer{{Namespaces: allNS, Pods: &cnp.NamespacedPod{}}}}}
		}, "spec.ingress[0].from[0]: exactly one peer field", failClosed, "from[0]: exactly one"},
		{"invalid peer selector", func(p *cnp.ClusterNetworkPolicy) { p.Spec.Egress[0].To[0] = cnptest.PeerPods(allNS, badSel) }, "spec.egress[0].to[0].pods.podSelector", failClosed, "to[0].pods.podSelector"},
		{"invalid ingress peer selector", func(p *cnp.ClusterNetworkPolicy) {
			p.Spec.Ingress = []cnp.ClusterNetworkPolicyIngressRule{{Action: deny, From: []cnp.ClusterNetworkPolicyIngressPeer{{Namespaces: badSel}}}}
		}, "spec.ingress[0].from[0].namespaces", failClosed, "from[0].namespaces"},
		{"CIDR", func(p *cnp.ClusterNetworkPolicy) { p.Spec.Egress[0].To[0].Networks = []cnp.CIDR{"10.0.0.0/33"} }, "spec.egress[0].to[0].networks[0]: invalid CIDR", failClosed, "to[0].networks[0]"},
		{"CIDR host bits", func(p *cnp.ClusterNetworkPolicy) { p.Spec.Egress[0].To[0].Networks = []cnp.CIDR{"10.0.0.1/8"} }, "has host bits set (want 10.0.0.0/8)", failClosed, "host bits"},
		{"domain name", func(p *cnp.ClusterNetworkPolicy) { p.Spec.Egress[0].To[0] = peerDomains("exa mple.com") }, `spec.egress[0].to[0].domainNames[0]: domain name "exa mple.com"`, failClosed, "to[0].domainNames[0]"},
		{"named port with networks", func(p *cnp.ClusterNetworkPolicy) {
			p.Spec.Egress[0].Protocols = []cnp.ClusterNetworkPolicyProtocol{cnptest.NamedPort("http")}
		}, "spec.egress[0].protocols[0].destinationNamedPort: networks/nodes/domainNames peer cannot be set with namedPorts", failClosed, "protocols[0].destinationNamedPort"},
		{"empty protocols", func(p *cnp.ClusterNetworkPolicy) { p.Spec.Egress[0].Protocols = []cnp.ClusterNetworkPolicyProtocol{} }, "spec.egress[0].protocols: 0 protocols", failClosed, "protocols: 0 protocols"},
		{"empty protocol", func(p *cnp.ClusterNetworkPolicy) {
			p.Spec.Egress[0].Protocols = []cnp.ClusterNetworkPolicyProtocol{cnptest.UDPRange(1, 2), {}}
		}, "spec.egress[0].protocols[1]: exactly one of tcp, udp, sctp", failClosed, "protocols[1]: exactly one"},
		{"two protocols in one", func(p *cnp.ClusterNetworkPolicy) {
			p.Spec.Egress[0].Protocols = []cnp.ClusterNetworkPolicyProtocol{{TCP: cnptest.TCP(1).TCP, UDP: cnptest.UDPRange(1, 2).UDP}}
		}, "spec.egress[0].protocols[0]: exactly one of tcp", failClosed, "protocols[0]"},
		{"no destination port", func(p *cnp.ClusterNetworkPolicy) {
			p.Spec.Egress[0].Protocols = []cnp.ClusterNetworkPolicyProtocol{{TCP: &cnp.ClusterNetworkPolicyProtocolTCP{}}}
		}, "protocols[0].tcp.destinationPort: required", failClosed, "protocols[0].tcp.destinationPort: required"},
		{"port 0", func(p *cnp.ClusterNetworkPolicy) {
			p.Spec.Egress[0].Protocols = []cnp.ClusterNetworkPolicyProtocol{cnptest.SCTP(0)}
		}, "sctp.destinationPort: exactly one of number and range", failClosed, "sctp.destinationPort"}, // 0 is unset
		{"port 70000", func(p *cnp.ClusterNetworkPolicy) {
			p.Spec.Egress[0].Protocols = []cnp.ClusterNetworkPolicyProtocol{cnptest.SCTP(70000)}
		}, "sctp.destinationPort.number: 70000 is not a port", failClosed, "sctp.destinationPort.number"},
		{"port and range", func(p *cnp.ClusterNetworkPolicy) {
			pr := cnptest.UDPRange(1, 2)
			pr.UDP.DestinationPort.Number = 5
			p.Spec.Egress[0].Protocols = []cnp.ClusterNetworkPolicyProtocol{pr}
		}, "exactly one of number and range", failClosed, "udp.destinationPort"},
		{"range order", func(p *cnp.ClusterNetworkPolicy) {
			p.Spec.Egress[0].Protocols = []cnp.ClusterNetworkPolicyProtocol{cnptest.UDPRange(5, 5)}
		}, "range: start port must be less than end port", failClosed, "range"},
		{"range end", func(p *cnp.ClusterNetworkPolicy) {
			p.Spec.Egress[0].Protocols = []cnp.ClusterNetworkPolicyProtocol{cnptest.UDPRange(5, 70000)}
		}, "range: ports must be 1-65535", failClosed, "range"},
		// The API server would refuse these; the compiler enforces them
		// as written, so the kernel does, so explain does.
		{"duplicate CIDR", func(p *cnp.ClusterNetworkPolicy) {
			p.Spec.Egress[0].To[0].Networks = []cnp.CIDR{"::/0", "::/0", "0.0.0.0/0"}
		}, "", asWritten, ""},
		{"name the API server refuses", func(p *cnp.ClusterNetworkPolicy) { p.Name = "Not_DNS" }, "", asWritten, ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			p := ok()
			tt.edit(p)
			in := cnpInput()
			in.ClusterNetworkPolicies = []*cnp.ClusterNetworkPolicy{p}
			c, probs := New(in)
			all := append(probs, c.Warnings()...)
			var texts []string
			for _, pr := range all {
				texts = append(texts, pr.Error())
				if pr.Kind != "ClusterNetworkPolicy" || pr.APIVersion != "policy.networking.k8s.io/v1beta1" || pr.Name != p.Name {
					t.Errorf("problem names %+v", pr.Object)
				}
			}
			if tt.field == "" && len(texts) > 0 || !strings.Contains(strings.Join(texts, "\n"), tt.field) {
				t.Errorf("problems and warnings %q, want one with %q", texts, tt.field)
			}
			flow := egressFlow
			if len(p.Spec.Ingress) > 0 {
				flow = ingressFlow
			}
			res, err := c.Explain(flow)
			if err != nil {
				t.Fatal(err)
			}
			d := res.Egress
			if flow == ingressFlow {
				d = res.Ingress
			}
			switch tt.effect {
			case leftOut:
				if !res.Allowed || strings.Contains(res.String(), "ClusterNetworkPolicy p ") {
					t.Errorf("a left-out policy enforced:\n%s", res)
				}
			case failClosed:
				if d.Allowed || d.ClusterRule == nil || !strings.Contains(d.ClusterRule.FailClosed, tt.why) ||
					!strings.Contains(d.String(), "fail closed, this "+string(p.Spec.Egress[0].Action)+" rule denies all traffic") {
					t.Errorf("want the rule to fail closed for %q:\n%s", tt.why, res)
				}
			case asWritten:
				if d.Allowed || d.ClusterRule == nil || d.ClusterRule.FailClosed != "" || d.ClusterRule.Peer == "" {
					t.Errorf("want the rule enforced as written:\n%s", res)
				}
			}
		})
	}
}

// TestClusterNetworkPolicyDuplicateNames: of two policies of one name
// (possible only in manifests) the first in input order counts, as in the
// compiler, whatever their priorities.
func TestClusterNetworkPolicyDuplicateNames(t *testing.T) {
	xa := cnptest.NamespacesSubjectOf("ns", "x")
	for _, tt := range []struct {
		name    string
		cnps    []*cnp.ClusterNetworkPolicy
		allowed bool
	}{
		{"Accept first", []*cnp.ClusterNetworkPolicy{egressCNP("p", admin, 5, xa, cnptest.R("", accept, anyPeer)), egressCNP("p", admin, 1, xa, cnptest.R("", deny, anyPeer))}, true},
		{"Deny first", []*cnp.ClusterNetworkPolicy{egressCNP("p", admin, 5, xa, cnptest.R("", deny, anyPeer)), egressCNP("p", admin, 1, xa, cnptest.R("", accept, anyPeer))}, false},
		// A left-out policy does not take the name.
		{"left-out first", []*cnp.ClusterNetworkPolicy{egressCNP("p", "Other", 1, xa, cnptest.R("", accept, anyPeer)), egressCNP("p", admin, 5, xa, cnptest.R("", deny, anyPeer))}, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			in := cnpInput()
			in.ClusterNetworkPolicies = tt.cnps
			c, probs := New(in)
			if len(probs) != 1 || probs[0].Name != "p" {
				t.Errorf("problems %v, want one about p", probs)
			}
			res, err := c.Explain(Flow{From: "x/a", To: "y/a", Protocol: tcp, Port: 80})
			if err != nil {
				t.Fatal(err)
			}
			if res.Egress.Allowed != tt.allowed || res.Egress.ClusterRule == nil {
				t.Errorf("egress allowed %v, want %v by the first policy:\n%s", res.Egress.Allowed, tt.allowed, res)
			}
		})
	}
}

// A policy name the API server would refuse is still enforced (the
// compiler enforces it), and printed quoted so that it cannot forge a line
// of the verdict or reach a terminal's escape sequences.
func TestClusterNetworkPolicyHostileName(t *testing.T) {
	res := explainXAToYA(t, egressCNP("a\x1b[2J\nverdict: allowed", admin, 1, cnptest.NamespacesSubjectOf("ns", "x"), cnptest.R("", deny, anyPeer)))
	out := res.String()
	if res.Allowed || strings.Count(out, "\n") != 4 || strings.Contains(out, "\x1b") ||
		!strings.Contains(out, `denied by ClusterNetworkPolicy "a\x1b[2J\nverdict: allowed" (Admin, priority 1)`) {
		t.Errorf("hostile policy name:\n%s", out)
	}
}

// A rule name is free text a tenant with CNP rights writes: it is quoted,
// so it cannot forge a line of the verdict.
func TestClusterNetworkPolicyHostileRuleName(t *testing.T) {
	out := explainXAToYA(t, egressCNP("p", admin, 1, cnptest.NamespacesSubjectOf("ns", "x"), cnptest.R("x\nverdict: allowed\x1b[1A", deny, anyPeer))).String()
	if strings.Count(out, "\n") != 4 || strings.Contains(out, "\x1b") || !strings.Contains(out, `rule egress[0] "x\nverdict: allowed\x1b[1A"`) {
		t.Errorf("hostile rule name:\n%s", out)
	}
}

// explainXAToYA explains TCP 80 from x/a to y/a in cnpInput's cluster
// with these ClusterNetworkPolicies, which must raise no problem.
func explainXAToYA(t *testing.T, cnps ...*cnp.ClusterNetworkPolicy) *Result {
	t.Helper()
	in := cnpInput()
	in.ClusterNetworkPolicies = cnps
	c, probs := New(in)
	if len(probs) > 0 {
		t.Fatal(probs)
	}
	res, err := c.Explain(Flow{From: "x/a", To: "y/a", Protocol: tcp, Port: 80})
	if err != nil {
		t.Fatal(err)
	}
	return res
}
