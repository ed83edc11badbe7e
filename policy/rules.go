package policy

import (
	"net/netip"
	"sort"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/nftguard/nftguard/engine"
	"github.com/nftguard/nftguard/internal/nftsafe"
	"github.com/nftguard/nftguard/selection"
)

// ruleKey names one ingress or egress rule of a policy.
type ruleKey struct {
	cp     *compiledPolicy
	egress bool
	idx    int
}

// compiledRule is what a rule compiles to independent of the pod whose
// chain it goes into: the rules are these peer matches crossed with the
// port matches, then the named-port matches.
type compiledRule struct {
	comment      string
	peerMatches  []string
	namedMatches []string
	// portMatches when they do not depend on the destination pod;
	// else perDst, and ports resolve on each chain's pod.
	portMatches []string
	perDst      bool
	ports       []networkingv1.NetworkPolicyPort
}

// ruleScratch is what compiling one rule notes for its memo: the sets it
// declared, whether it named a set another rule declared first, the
// selections it used, and whether it read every pod.
type ruleScratch struct {
	declared []*engine.Set
	collided bool
	used     []selection.PeerKey
	allPods  bool
}

// portMatchesFor returns the port matches that apply to any peer: numbers,
// ranges, protocols, and (for ingress, dst != nil) names resolved on the
// destination pod. One "" stands for no port restriction.
func portMatchesFor(ports []networkingv1.NetworkPolicyPort, dst *selection.Pod) []string {
	if len(ports) == 0 {
		return []string{""}
	}
	var portMatches []string
	for _, pp := range ports {
		proto := protoName(pp.Protocol)
		switch {
		case pp.Port == nil:
			portMatches = append(portMatches, "meta l4proto "+proto)
		case pp.Port.Type == intstr.Int && pp.EndPort != nil && *pp.EndPort != pp.Port.IntVal:
			portMatches = append(portMatches, proto+" dport "+strconv.Itoa(int(pp.Port.IntVal))+"-"+strconv.Itoa(int(*pp.EndPort)))
		case pp.Port.Type == intstr.Int:
			portMatches = append(portMatches, proto+" dport "+strconv.Itoa(int(pp.Port.IntVal)))
		case dst != nil:
			if n, ok := dst.Obj.NamedPort(pp.Port.StrVal, pp.Protocol); ok {
				portMatches = append(portMatches, proto+" dport "+strconv.Itoa(int(n)))
			}
		}
	}
	return portMatches
}

// compileRule compiles the part of a rule that does not depend on the pod
// whose chain it goes into, declaring its sets.
func (c *compiler) compileRule(d *direction, cp *compiledPolicy, idx int, peers []networkingv1.NetworkPolicyPeer, ports []networkingv1.NetworkPolicyPort) *compiledRule {
	idxText := strconv.Itoa(idx)
	cr := &compiledRule{comment: nftsafe.Comment(cp.key + " " + d.field + "[" + idxText + "]"), ports: ports}
	base := []string{cp.np.Namespace, cp.np.Name, d.setTag + idxText}

	// Named ports resolve on the destination pod: for ingress that is the
	// chain's pod, for egress each peer pod.
	var named []networkingv1.NetworkPolicyPort
	for _, pp := range ports {
		if pp.Port != nil && pp.Port.Type != intstr.Int {
			if d.egress {
				named = append(named, pp)
			} else {
				cr.perDst = true
			}
		}
	}
	if !cr.perDst {
		cr.portMatches = portMatchesFor(ports, nil)
	}

	if len(peers) == 0 {
		// No peers: every source (ingress) or destination (egress).
		cr.peerMatches = []string{""}
		if len(named) > 0 {
			c.scratch.allPods = true
			cr.namedMatches = c.namedEgress(base, c.sel.All(), named)
		}
		return cr
	}

	var selected []*selection.Pod
	var blocks4, blocks6 []addrRange
	nsel, dup := 0, false
	for _, peer := range peers {
		if peer.IPBlock != nil {
			cidr, _ := ParseIPBlockCIDR(peer.IPBlock.CIDR) // valid: validate
			var except []netip.Prefix
			for _, e := range peer.IPBlock.Except {
				ep, _ := ParseIPBlockCIDR(e)
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
		// A peer without namespaceSelector selects in the policy's
		// own namespace.
		sel, k := c.sel.Select(cp.np.Namespace, peer.NamespaceSelector, peer.PodSelector)
		c.scratch.used = append(c.scratch.used, k)
		if nsel == 0 {
			selected = sel.Pods // shared with the cache: copied before changing
		} else {
			if nsel == 1 {
				selected = append([]*selection.Pod(nil), selected...)
			}
			selected = append(selected, sel.Pods...)
		}
		dup = dup || sel.Dup
		nsel++
	}
	if dup {
		// Pods sharing a key count once, as the first selected.
		selected = selection.Unique(selected)
	}
	// Otherwise duplicates are the same pod, and addrSet drops repeated
	// elements.

	n4, n6 := 0, 0
	for _, p := range selected {
		n4 += len(p.V4Text())
		n6 += len(p.V6Text())
	}
	if n4 > 0 {
		v4 := make([]string, 0, n4)
		for _, p := range selected {
			v4 = append(v4, p.V4Text()...)
		}
		cr.peerMatches = append(cr.peerMatches, d.peer4+" @"+c.addrSet(append(base, "pods4"), "ipv4_addr", false, v4, cr.comment))
	}
	if n6 > 0 {
		v6 := make([]string, 0, n6)
		for _, p := range selected {
			v6 = append(v6, p.V6Text()...)
		}
		cr.peerMatches = append(cr.peerMatches, d.peer6+" @"+c.addrSet(append(base, "pods6"), "ipv6_addr", false, v6, cr.comment))
	}
	if rs := mergeRanges(blocks4); len(rs) > 0 {
		cr.peerMatches = append(cr.peerMatches, d.peer4+" @"+c.addrSet(append(base, "cidr4"), "ipv4_addr", true, rangeTexts(rs), cr.comment))
	}
	if rs := mergeRanges(blocks6); len(rs) > 0 {
		cr.peerMatches = append(cr.peerMatches, d.peer6+" @"+c.addrSet(append(base, "cidr6"), "ipv6_addr", true, rangeTexts(rs), cr.comment))
	}
	if len(named) > 0 {
		cr.namedMatches = c.namedEgress(base, selected, named)
	}
	return cr
}

// namedEgress matches egress named ports: the name resolves on each
// destination pod, so the rule looks up address . protocol . port tuples.
func (c *compiler) namedEgress(base []string, peers []*selection.Pod, named []networkingv1.NetworkPolicyPort) []string {
	var t4, t6 []string
	for _, p := range peers {
		for _, pp := range named {
			n, ok := p.Obj.NamedPort(pp.Port.StrVal, pp.Protocol)
			if !ok {
				continue
			}
			suffix := " . " + protoName(pp.Protocol) + " . " + strconv.Itoa(int(n))
			for _, a := range p.V4Text() {
				t4 = append(t4, a+suffix)
			}
			for _, a := range p.V6Text() {
				t6 = append(t6, a+suffix)
			}
		}
	}
	comment := nftsafe.Comment(base[0] + "/" + base[1] + " " + base[2])
	var out []string
	if len(t4) > 0 {
		out = append(out, "ip daddr . meta l4proto . th dport @"+c.addrSet(append(base, "named4"), "ipv4_addr . inet_proto . inet_service", false, t4, comment))
	}
	if len(t6) > 0 {
		out = append(out, "ip6 daddr . meta l4proto . th dport @"+c.addrSet(append(base, "named6"), "ipv6_addr . inet_proto . inet_service", false, t6, comment))
	}
	return out
}

// addrSet declares (once) a named set holding the given elements, sorted
// and without repeats, and returns its name. It may reorder elems.
func (c *compiler) addrSet(parts []string, typ string, interval bool, elems []string, comment string) string {
	name := setName(parts)
	if _, ok := c.sets[name]; ok {
		c.scratch.collided = true
		return name
	}
	s := &engine.Set{Name: name, Type: typ, Interval: interval, Comment: comment}
	sort.Strings(elems)
	s.Elements = make([]engine.Element, 0, len(elems))
	for i, e := range elems {
		if i == 0 || e != elems[i-1] {
			s.Elements = append(s.Elements, engine.Element{Key: e})
		}
	}
	c.sets[name] = s
	c.scratch.declared = append(c.scratch.declared, s)
	return name
}

func protoName(p *corev1.Protocol) string {
	if p == nil {
		return "tcp"
	}
	return strings.ToLower(string(*p))
}

func rangeTexts(rs []addrRange) []string {
	out := make([]string, len(rs))
	for i, r := range rs {
		out[i] = rangeText(r)
	}
	return out
}
