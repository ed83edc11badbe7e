package clusterpolicy

import (
	"fmt"
	"regexp"
	"sort"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/network-policy-api/apis/v1beta1"

	"github.com/nftguard/nftguard/engine"
	"github.com/nftguard/nftguard/internal/apitest"
	"github.com/nftguard/nftguard/internal/podtest"
	"github.com/nftguard/nftguard/internal/tabletest"
	"github.com/nftguard/nftguard/npset"
	"github.com/nftguard/nftguard/policy"
)

// --- builders -------------------------------------------------------------

// The namespace and pod builders are apitest's (shared with policy's
// tests); sel, the one these tests write everywhere, keeps a short name.
func sel(kv ...string) *metav1.LabelSelector { return apitest.Selector(kv...) }

func mknode(name string, labels map[string]string, addrs ...string) *corev1.Node {
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}}
	for i, a := range addrs {
		t := corev1.NodeInternalIP
		if i%2 == 1 {
			t = corev1.NodeExternalIP
		}
		n.Status.Addresses = append(n.Status.Addresses, corev1.NodeAddress{Type: t, Address: a})
	}
	n.Status.Addresses = append(n.Status.Addresses, corev1.NodeAddress{Type: corev1.NodeHostName, Address: name})
	return n
}

const (
	accept = v1beta1.ClusterNetworkPolicyRuleActionAccept
	deny   = v1beta1.ClusterNetworkPolicyRuleActionDeny
	pass   = v1beta1.ClusterNetworkPolicyRuleActionPass
)

func cnp(name string, tier v1beta1.Tier, prio int32, f func(*v1beta1.ClusterNetworkPolicySpec)) *v1beta1.ClusterNetworkPolicy {
	c := &v1beta1.ClusterNetworkPolicy{ObjectMeta: metav1.ObjectMeta{Name: name}}
	c.Spec.Tier, c.Spec.Priority = tier, prio
	c.Spec.Subject.Namespaces = &metav1.LabelSelector{}
	if f != nil {
		f(&c.Spec)
	}
	return c
}

func ingress(a v1beta1.ClusterNetworkPolicyRuleAction, name string, from []v1beta1.ClusterNetworkPolicyIngressPeer, protos ...v1beta1.ClusterNetworkPolicyProtocol) v1beta1.ClusterNetworkPolicyIngressRule {
	return v1beta1.ClusterNetworkPolicyIngressRule{Name: name, Action: a, From: from, Protocols: protos}
}

func egress(a v1beta1.ClusterNetworkPolicyRuleAction, name string, to []v1beta1.ClusterNetworkPolicyEgressPeer, protos ...v1beta1.ClusterNetworkPolicyProtocol) v1beta1.ClusterNetworkPolicyEgressRule {
	return v1beta1.ClusterNetworkPolicyEgressRule{Name: name, Action: a, To: to, Protocols: protos}
}

func fromNS(s *metav1.LabelSelector) v1beta1.ClusterNetworkPolicyIngressPeer {
	return v1beta1.ClusterNetworkPolicyIngressPeer{Namespaces: s}
}
func fromPods(nsSel, podSel *metav1.LabelSelector) v1beta1.ClusterNetworkPolicyIngressPeer {
	return v1beta1.ClusterNetworkPolicyIngressPeer{Pods: &v1beta1.NamespacedPod{NamespaceSelector: *nsSel, PodSelector: *podSel}}
}
func toNets(cidrs ...string) v1beta1.ClusterNetworkPolicyEgressPeer {
	p := v1beta1.ClusterNetworkPolicyEgressPeer{}
	for _, c := range cidrs {
		p.Networks = append(p.Networks, v1beta1.CIDR(c))
	}
	return p
}
func toNodes(s *metav1.LabelSelector) v1beta1.ClusterNetworkPolicyEgressPeer {
	return v1beta1.ClusterNetworkPolicyEgressPeer{Nodes: s}
}

// --- helpers over the output ---------------------------------------------

// table is the whole policy table with out's tiers: the NetworkPolicy
// part (of nps) around the ClusterNetworkPolicy part.
func table(in Input, out Output, nps ...*networkingv1.NetworkPolicy) *engine.Desired {
	pol := policy.Compile(policy.Input{NodeName: in.NodeName, Namespaces: in.Namespaces, Pods: in.Pods, Policies: npset.New(nps), Tiers: out.Tiers, LogDenied: in.LogDenied})
	return &engine.Desired{Chains: append(pol.Chains, out.Chains...), Sets: append(pol.Sets, out.Sets...)}
}

// compileChecked compiles, and checks that the whole table (with the
// NetworkPolicy part) loads (see tabletest.Loads).
func compileChecked(t *testing.T, in Input) Output {
	t.Helper()
	out := Compile(in)
	tabletest.Loads(t, table(in, out))
	return out
}

// The readers of the output are tabletest's, shared with policy.
// chainRules writes a lookup of a peer set shared by selection
// (cnp_sel_HASH_4) as @SEL4 (or @SEL6), of a shared named-port set
// (cnp_named_HASH_4) as @NAMED4: their names are a hash of what they
// hold; peerElems reads their elements.
func chainRules(t *testing.T, out Output, name string) []string {
	t.Helper()
	rules := tabletest.Rules(tabletest.Chain(t, out.Chains, name))
	for i, r := range rules {
		rules[i] = sharedNamedName.ReplaceAllString(sharedSetName.ReplaceAllString(r, "@SEL$1"), "@NAMED$1")
	}
	return rules
}

var (
	sharedSetName   = regexp.MustCompile(`@cnp_sel_[0-9a-f]{16}_([46])`)
	sharedNamedName = regexp.MustCompile(`@cnp_named_[0-9a-f]{16}_([46])`)
)

// peerElems are the elements of the set that the rule number i (0-based)
// of chain ch with a peer-set lookup looks up.
func peerElems(t *testing.T, out Output, ch string, i int) []string {
	t.Helper()
	for _, r := range tabletest.Rules(tabletest.Chain(t, out.Chains, ch)) {
		m := regexp.MustCompile(`@(cnp_(?:sel|named)_[0-9a-f]{16}_[46])`).FindStringSubmatch(r)
		if m == nil {
			continue
		}
		if i == 0 {
			return setElems(t, out, m[1])
		}
		i--
	}
	t.Fatalf("chain %s has no peer-set lookup number %d", ch, i)
	return nil
}

func chainNames(out Output) []string { return tabletest.ChainNames(out.Chains) }

func setElems(t *testing.T, out Output, name string) []string {
	t.Helper()
	return tabletest.Elements(tabletest.Set(t, out.Sets, name))
}

func eq(t *testing.T, what string, got, want []string) {
	t.Helper()
	tabletest.EqualLines(t, what, got, want)
}

// renderGolden renders the input, the problems and warnings, and the
// whole table as nft text.
func renderGolden(t *testing.T, in Input, out Output) string {
	t.Helper()
	var b strings.Builder
	fmt.Fprintf(&b, "# node %s\n", in.NodeName)
	if in.LogDenied != nil {
		fmt.Fprintf(&b, "# log denied %s\n", apitest.JSON(t, in.LogDenied))
	}
	for _, n := range in.Namespaces {
		fmt.Fprintf(&b, "# namespace %s %s\n", n.Name, apitest.JSON(t, n.Labels))
		if len(n.Annotations) > 0 {
			fmt.Fprintf(&b, "#   annotations %s\n", apitest.JSON(t, n.Annotations))
		}
	}
	for _, p := range podtest.List(in.Pods) {
		fmt.Fprintf(&b, "# pod %s/%s %s node=%q podIPs=%s containers=%s\n", p.Namespace, p.Name, apitest.JSON(t, p.Labels),
			p.Spec.NodeName, apitest.JSON(t, p.Status.PodIPs), apitest.JSON(t, p.Spec.Containers))
	}
	for _, n := range in.Nodes {
		fmt.Fprintf(&b, "# node %s %s %s\n", n.Name, apitest.JSON(t, n.Labels), apitest.JSON(t, n.Status.Addresses))
	}
	for _, c := range in.Policies {
		fmt.Fprintf(&b, "# cnp %s %s\n", c.Name, apitest.JSON(t, c.Spec))
	}
	for _, p := range out.Problems {
		fmt.Fprintf(&b, "# problem %s\n", p.Error())
	}
	for _, p := range out.Warnings {
		fmt.Fprintf(&b, "# warning %s\n", p.Error())
	}
	text, err := engine.Render(engine.Table{Name: "nftguard"}, table(in, out))
	if err != nil {
		t.Fatal(err)
	}
	b.WriteString(text)
	return b.String()
}

func sorted(s []string) []string {
	s = append([]string(nil), s...)
	sort.Strings(s)
	return s
}
