package policy

// The compiler as it was before the selection caches: kept as the reference
// the optimised Compile must equal on randomised clusters.

import (
	"fmt"
	"net/netip"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/nftguard/nftguard/engine"
	"github.com/nftguard/nftguard/engine/nftsyntax"
)

// refPod is a live refPod reduced to what the refCompiler needs.
type refPod struct {
	obj   *corev1.Pod
	key   string // namespace/name
	local bool
	v4    []netip.Addr
	v6    []netip.Addr
}

// refCompiledPolicy is a valid policy with its selectors parsed once.
type refCompiledPolicy struct {
	np       *networkingv1.NetworkPolicy
	key      string
	selector labels.Selector
	ingress  bool
	egress   bool
}

type refCompiler struct {
	in       Input
	nsLabels map[string]labels.Set
	pods     []*refPod
	podsByNS map[string][]*refPod
	sets     map[string]*engine.Set
	problems []Problem
}

// Compile turns the cluster state into the policy chains and sets for the
// node in.NodeName. Invalid objects are reported in Output.Problems and left
// out; everything else is compiled.
func refCompile(in Input) Output {
	c := &refCompiler{in: in, nsLabels: map[string]labels.Set{}, podsByNS: map[string][]*refPod{}, sets: map[string]*engine.Set{}}
	for _, ns := range in.Namespaces {
		l := labels.Set{}
		for k, v := range ns.Labels {
			l[k] = v
		}
		// The API server puts this label on every namespace; manifests
		// applied without one must select the same way.
		l[corev1.LabelMetadataName] = ns.Name
		c.nsLabels[ns.Name] = l
	}
	c.indexPods()

	var policies []*refCompiledPolicy
	for _, np := range in.Policies {
		if probs := refValidate(np); len(probs) > 0 {
			c.problems = append(c.problems, probs...)
			continue
		}
		sel, _ := metav1.LabelSelectorAsSelector(&np.Spec.PodSelector)
		cp := &refCompiledPolicy{np: np, key: np.Namespace + "/" + np.Name, selector: sel}
		cp.ingress, cp.egress = policyTypes(np)
		policies = append(policies, cp)
	}
	sort.Slice(policies, func(i, j int) bool { return policies[i].key < policies[j].key })

	out := Output{}
	ingress4 := engine.Set{Name: MapIngress4, Type: "ipv4_addr", Map: "verdict", Comment: "local pods isolated for ingress"}
	ingress6 := engine.Set{Name: MapIngress6, Type: "ipv6_addr", Map: "verdict", Comment: "local pods isolated for ingress"}
	egress4 := engine.Set{Name: MapEgress4, Type: "ipv4_addr", Map: "verdict", Comment: "local pods isolated for egress"}
	egress6 := engine.Set{Name: MapEgress6, Type: "ipv6_addr", Map: "verdict", Comment: "local pods isolated for egress"}

	var podChains []engine.Chain
	for _, p := range c.pods {
		if !p.local {
			continue
		}
		var ing, egr []*refCompiledPolicy
		for _, cp := range policies {
			if cp.np.Namespace != p.obj.Namespace || !cp.selector.Matches(labels.Set(p.obj.Labels)) {
				continue
			}
			if cp.ingress {
				ing = append(ing, cp)
			}
			if cp.egress {
				egr = append(egr, cp)
			}
		}
		if len(ing) > 0 {
			ch := c.ingressChain(p, ing)
			podChains = append(podChains, ch)
			refAddDispatch(&ingress4, &ingress6, p, ch.Name)
		}
		if len(egr) > 0 {
			ch := c.egressChain(p, egr)
			podChains = append(podChains, ch)
			refAddDispatch(&egress4, &egress6, p, ch.Name)
		}
	}
	sort.Slice(podChains, func(i, j int) bool { return podChains[i].Name < podChains[j].Name })

	out.Chains = append(out.Chains,
		engine.Chain{
			Name: ChainForward, Type: "filter", Hook: "forward", Priority: 0, Policy: "accept",
			Comment: "NetworkPolicy: pod traffic routed or bridged through this node",
			Rules: []engine.Rule{
				{Rule: "ct state established,related accept"},
				{Rule: "icmpv6 type nd-neighbor-solicit ip6 hoplimit 255 accept", Comment: "IPv6 neighbour discovery on the link (RFC 4861)"},
				{Rule: "icmpv6 type nd-neighbor-advert ip6 hoplimit 255 accept", Comment: "IPv6 neighbour discovery on the link (RFC 4861)"},
				{Rule: "ip saddr vmap @" + MapEgress4},
				{Rule: "ip6 saddr vmap @" + MapEgress6},
				{Rule: "goto " + ChainIngress},
			},
		},
		engine.Chain{
			Name:    ChainIngress,
			Comment: "NetworkPolicy: ingress isolation of local pods",
			Rules: []engine.Rule{
				{Rule: "ip daddr vmap @" + MapIngress4},
				{Rule: "ip6 daddr vmap @" + MapIngress6},
				{Rule: "accept"},
			},
		},
	)
	out.Chains = append(out.Chains, podChains...)
	for _, m := range []*engine.Set{&ingress4, &ingress6, &egress4, &egress6} {
		sortElements(m)
		out.Sets = append(out.Sets, *m)
	}
	names := make([]string, 0, len(c.sets))
	for n := range c.sets {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		s := c.sets[n]
		sortElements(s)
		out.Sets = append(out.Sets, *s)
	}
	out.Problems = c.problems
	return out
}

func (c *refCompiler) indexPods() {
	for _, o := range c.in.Pods {
		// Terminated pods no longer own their address, and hostNetwork
		// pods use the node's: neither is isolated nor selected as a peer
		// (traffic from a hostNetwork refPod is judged by its node's IP).
		if o.Status.Phase == corev1.PodSucceeded || o.Status.Phase == corev1.PodFailed || o.Spec.HostNetwork {
			continue
		}
		p := &refPod{obj: o, key: o.Namespace + "/" + o.Name, local: o.Spec.NodeName == c.in.NodeName}
		ips := o.Status.PodIPs
		if len(ips) == 0 && o.Status.PodIP != "" {
			ips = []corev1.PodIP{{IP: o.Status.PodIP}}
		}
		ok := true
		for i, ip := range ips {
			a, err := netip.ParseAddr(ip.IP)
			if err != nil {
				c.problems = append(c.problems, Problem{Kind: "Pod", Namespace: o.Namespace, Name: o.Name,
					Field: fmt.Sprintf("status.podIPs[%d]", i), Reason: fmt.Sprintf("invalid IP %q", ip.IP)})
				ok = false
				break
			}
			a = a.Unmap()
			if a.Is4() {
				p.v4 = append(p.v4, a)
			} else {
				p.v6 = append(p.v6, a)
			}
		}
		if !ok || len(p.v4)+len(p.v6) == 0 {
			continue // without an address there is nothing to match
		}
		c.pods = append(c.pods, p)
		c.podsByNS[o.Namespace] = append(c.podsByNS[o.Namespace], p)
	}
	sort.Slice(c.pods, func(i, j int) bool { return c.pods[i].key < c.pods[j].key })
}

func refAddDispatch(m4, m6 *engine.Set, p *refPod, chain string) {
	for _, a := range p.v4 {
		m4.Elements = append(m4.Elements, engine.Element{Key: a.String(), Value: "jump " + chain})
	}
	for _, a := range p.v6 {
		m6.Elements = append(m6.Elements, engine.Element{Key: a.String(), Value: "jump " + chain})
	}
}

// refDirection holds what differs between ingress and egress rules.
type refDirection struct {
	tag     string // "in" or "eg", used in set names
	field   string // "ingress" or "egress", used in comments
	peer4   string // "ip saddr" or "ip daddr"
	peer6   string
	verdict string // what a matching rule does
}

func (c *refCompiler) ingressChain(p *refPod, pols []*refCompiledPolicy) engine.Chain {
	d := refDirection{tag: "in", field: "ingress", peer4: "ip saddr", peer6: "ip6 saddr", verdict: "accept"}
	ch := engine.Chain{Name: objName("ing", p.obj.Namespace, p.obj.Name), Comment: nftsyntax.ClipComment("ingress of pod " + p.key)}
	ch.Rules = append(ch.Rules, engine.Rule{Rule: "ct state invalid drop"})
	// A refPod may always reach itself, also through the node (hairpin).
	for _, a := range p.v4 {
		ch.Rules = append(ch.Rules, engine.Rule{Rule: "ip saddr " + a.String() + " accept", Comment: "pod to itself"})
	}
	for _, a := range p.v6 {
		ch.Rules = append(ch.Rules, engine.Rule{Rule: "ip6 saddr " + a.String() + " accept", Comment: "pod to itself"})
	}
	for _, cp := range pols {
		for i, r := range cp.np.Spec.Ingress {
			ch.Rules = append(ch.Rules, c.ruleFor(d, cp, i, r.From, r.Ports, p)...)
		}
	}
	ch.Rules = append(ch.Rules, engine.Rule{Rule: "drop", Comment: "isolated for ingress: no rule allowed"})
	return ch
}

func (c *refCompiler) egressChain(p *refPod, pols []*refCompiledPolicy) engine.Chain {
	d := refDirection{tag: "eg", field: "egress", peer4: "ip daddr", peer6: "ip6 daddr", verdict: "goto " + ChainIngress}
	ch := engine.Chain{Name: objName("egr", p.obj.Namespace, p.obj.Name), Comment: nftsyntax.ClipComment("egress of pod " + p.key)}
	ch.Rules = append(ch.Rules, engine.Rule{Rule: "ct state invalid drop"})
	for _, a := range p.v4 {
		ch.Rules = append(ch.Rules, engine.Rule{Rule: "ip daddr " + a.String() + " accept", Comment: "pod to itself"})
	}
	for _, a := range p.v6 {
		ch.Rules = append(ch.Rules, engine.Rule{Rule: "ip6 daddr " + a.String() + " accept", Comment: "pod to itself"})
	}
	for _, cp := range pols {
		for i, r := range cp.np.Spec.Egress {
			ch.Rules = append(ch.Rules, c.ruleFor(d, cp, i, r.To, r.Ports, nil)...)
		}
	}
	ch.Rules = append(ch.Rules, engine.Rule{Rule: "drop", Comment: "isolated for egress: no rule allowed"})
	return ch
}

// ruleFor compiles one ingress or egress rule of a policy. For ingress, dst
// is the refPod the chain belongs to, against which named ports resolve; for
// egress dst is nil and named ports resolve per peer refPod.
func (c *refCompiler) ruleFor(d refDirection, cp *refCompiledPolicy, idx int, peers []networkingv1.NetworkPolicyPeer, ports []networkingv1.NetworkPolicyPort, dst *refPod) []engine.Rule {
	comment := nftsyntax.ClipComment(fmt.Sprintf("%s %s[%d]", cp.key, d.field, idx))
	base := []string{cp.np.Namespace, cp.np.Name, fmt.Sprintf("%s%d", d.tag, idx)}

	// Port matches that apply to any peer: numbers, ranges, protocols, and
	// (for ingress) names resolved on the destination refPod.
	var portMatches []string
	var named []networkingv1.NetworkPolicyPort
	for _, pp := range ports {
		proto := protoName(pp.Protocol)
		switch {
		case pp.Port == nil:
			portMatches = append(portMatches, "meta l4proto "+proto)
		case pp.Port.Type == intstr.Int && pp.EndPort != nil && *pp.EndPort != pp.Port.IntVal:
			portMatches = append(portMatches, fmt.Sprintf("%s dport %d-%d", proto, pp.Port.IntVal, *pp.EndPort))
		case pp.Port.Type == intstr.Int:
			portMatches = append(portMatches, fmt.Sprintf("%s dport %d", proto, pp.Port.IntVal))
		case dst != nil:
			if n, ok := refNamedPort(dst.obj, pp.Port.StrVal, pp.Protocol); ok {
				portMatches = append(portMatches, fmt.Sprintf("%s dport %d", proto, n))
			}
		default:
			named = append(named, pp)
		}
	}
	if len(ports) == 0 {
		portMatches = []string{""}
	}

	var rules []engine.Rule
	emit := func(peerMatch string, pm []string) {
		for _, m := range pm {
			parts := []string{}
			if peerMatch != "" {
				parts = append(parts, peerMatch)
			}
			if m != "" {
				parts = append(parts, m)
			}
			parts = append(parts, d.verdict)
			rules = append(rules, engine.Rule{Rule: strings.Join(parts, " "), Comment: comment})
		}
	}

	if len(peers) == 0 {
		// No peers: every source (ingress) or destination (egress).
		emit("", portMatches)
		if len(named) > 0 {
			c.namedEgress(d, base, "any", c.pods, named, emit)
		}
		return rules
	}

	var selected []*refPod
	var blocks4, blocks6 []addrRange
	for _, peer := range peers {
		if peer.IPBlock != nil {
			cidr, _ := netip.ParsePrefix(peer.IPBlock.CIDR)
			var except []netip.Prefix
			for _, e := range peer.IPBlock.Except {
				ep, _ := netip.ParsePrefix(e)
				except = append(except, ep)
			}
			rs := blockRanges(cidr, except)
			if cidr.Addr().Is4() {
				blocks4 = append(blocks4, rs...)
			} else {
				blocks6 = append(blocks6, rs...)
			}
			continue
		}
		selected = append(selected, c.selectPeers(cp.np.Namespace, peer)...)
	}
	selected = refUniquePods(selected)

	var v4, v6 []string
	for _, p := range selected {
		for _, a := range p.v4 {
			v4 = append(v4, a.String())
		}
		for _, a := range p.v6 {
			v6 = append(v6, a.String())
		}
	}
	if len(v4) > 0 {
		emit(d.peer4+" @"+c.addrSet(append(base, "pods4"), "ipv4_addr", false, v4, comment), portMatches)
	}
	if len(v6) > 0 {
		emit(d.peer6+" @"+c.addrSet(append(base, "pods6"), "ipv6_addr", false, v6, comment), portMatches)
	}
	if rs := mergeRanges(blocks4); len(rs) > 0 {
		emit(d.peer4+" @"+c.addrSet(append(base, "cidr4"), "ipv4_addr", true, rangeTexts(rs), comment), portMatches)
	}
	if rs := mergeRanges(blocks6); len(rs) > 0 {
		emit(d.peer6+" @"+c.addrSet(append(base, "cidr6"), "ipv6_addr", true, rangeTexts(rs), comment), portMatches)
	}
	if len(named) > 0 {
		c.namedEgress(d, base, "", selected, named, emit)
	}
	return rules
}

// namedEgress matches egress named ports: the name resolves on each
// destination refPod, so the rule looks up address . protocol . port tuples.
func (c *refCompiler) namedEgress(d refDirection, base []string, _ string, peers []*refPod, named []networkingv1.NetworkPolicyPort, emit func(string, []string)) {
	var t4, t6 []string
	for _, p := range peers {
		for _, pp := range named {
			n, ok := refNamedPort(p.obj, pp.Port.StrVal, pp.Protocol)
			if !ok {
				continue
			}
			proto := protoName(pp.Protocol)
			for _, a := range p.v4 {
				t4 = append(t4, fmt.Sprintf("%s . %s . %d", a, proto, n))
			}
			for _, a := range p.v6 {
				t6 = append(t6, fmt.Sprintf("%s . %s . %d", a, proto, n))
			}
		}
	}
	comment := nftsyntax.ClipComment(fmt.Sprintf("%s/%s %s", base[0], base[1], base[2]))
	if len(t4) > 0 {
		emit("ip daddr . meta l4proto . th dport @"+c.addrSet(append(base, "named4"), "ipv4_addr . inet_proto . inet_service", false, t4, comment), []string{""})
	}
	if len(t6) > 0 {
		emit("ip6 daddr . meta l4proto . th dport @"+c.addrSet(append(base, "named6"), "ipv6_addr . inet_proto . inet_service", false, t6, comment), []string{""})
	}
}

// selectPeers returns the pods a podSelector/namespaceSelector peer selects:
// the selectors AND together; a missing namespaceSelector means the policy's
// own namespace.
func (c *refCompiler) selectPeers(policyNS string, peer networkingv1.NetworkPolicyPeer) []*refPod {
	podSel := labels.Everything()
	if peer.PodSelector != nil {
		podSel, _ = metav1.LabelSelectorAsSelector(peer.PodSelector)
	}
	var namespaces []string
	if peer.NamespaceSelector == nil {
		namespaces = []string{policyNS}
	} else {
		nsSel, _ := metav1.LabelSelectorAsSelector(peer.NamespaceSelector)
		for ns := range c.podsByNS {
			l, ok := c.nsLabels[ns]
			if !ok {
				l = labels.Set{corev1.LabelMetadataName: ns}
			}
			if nsSel.Matches(l) {
				namespaces = append(namespaces, ns)
			}
		}
	}
	var out []*refPod
	for _, ns := range namespaces {
		for _, p := range c.podsByNS[ns] {
			if podSel.Matches(labels.Set(p.obj.Labels)) {
				out = append(out, p)
			}
		}
	}
	return out
}

// addrSet declares (once) a named set holding the given elements and returns
// its name.
func (c *refCompiler) addrSet(parts []string, typ string, interval bool, elems []string, comment string) string {
	name := setName(parts)
	if _, ok := c.sets[name]; ok {
		return name
	}
	s := &engine.Set{Name: name, Type: typ, Interval: interval, Comment: comment}
	seen := map[string]bool{}
	for _, e := range elems {
		if !seen[e] {
			seen[e] = true
			s.Elements = append(s.Elements, engine.Element{Key: e})
		}
	}
	c.sets[name] = s
	return name
}

// refNamedPort resolves a port name on a refPod's containers, matching protocol.
func refNamedPort(p *corev1.Pod, name string, proto *corev1.Protocol) (int32, bool) {
	want := corev1.ProtocolTCP
	if proto != nil {
		want = *proto
	}
	containers := append(append([]corev1.Container{}, p.Spec.InitContainers...), p.Spec.Containers...)
	for _, ct := range containers {
		for _, port := range ct.Ports {
			got := port.Protocol
			if got == "" {
				got = corev1.ProtocolTCP
			}
			if port.Name == name && got == want {
				return port.ContainerPort, true
			}
		}
	}
	return 0, false
}

func refUniquePods(ps []*refPod) []*refPod {
	seen := map[string]bool{}
	out := ps[:0]
	for _, p := range ps {
		if !seen[p.key] {
			seen[p.key] = true
			out = append(out, p)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].key < out[j].key })
	return out
}
