package clusterpolicy

import (
	"fmt"
	"net/netip"
	"slices"
	"sort"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/network-policy-api/apis/v1beta1"

	"github.com/nftguard/nftguard/engine"
	"github.com/nftguard/nftguard/internal/cidrs"
	"github.com/nftguard/nftguard/internal/nftsafe"
	"github.com/nftguard/nftguard/podset"
	"github.com/nftguard/nftguard/selection"
)

// compiledRule is what a rule compiles to independent of the pod whose
// chain it goes into: its peer matches crossed with its port matches, then
// its named-port matches, each ending in the action's verdict.
type compiledRule struct {
	comment string
	action  v1beta1.ClusterNetworkPolicyRuleAction
	// fail: the rule fails closed (see compiledPolicy); nothing else is
	// set.
	fail         bool
	peerMatches  []string
	namedMatches []string
	// portMatches when they do not depend on the destination pod; else
	// perDst (ingress named ports), and they resolve on the chain's pod.
	portMatches []string
	perDst      bool
	protocols   []v1beta1.ClusterNetworkPolicyProtocol
}

// l4 are the protocols a named port may resolve to, as nft names them.
var l4 = [3]struct {
	name  string
	proto corev1.Protocol
}{{"tcp", corev1.ProtocolTCP}, {"udp", corev1.ProtocolUDP}, {"sctp", corev1.ProtocolSCTP}}

// portMatches returns the matches of the protocols that apply to any peer
// (numbers and ranges) and, with dst, the named ports resolved on dst. One
// "" stands for no restriction.
func portMatches(protos []v1beta1.ClusterNetworkPolicyProtocol, dst *podset.Pod) []string {
	if len(protos) == 0 {
		return []string{""}
	}
	var out []string
	for i := range protos {
		p := &protos[i]
		switch {
		case p.TCP != nil:
			out = append(out, portMatch("tcp", p.TCP.DestinationPort))
		case p.UDP != nil:
			out = append(out, portMatch("udp", p.UDP.DestinationPort))
		case p.SCTP != nil:
			out = append(out, portMatch("sctp", p.SCTP.DestinationPort))
		case p.DestinationNamedPort != "" && dst != nil:
			// A name may be declared for more than one protocol.
			for _, l := range l4 {
				if n, ok := dst.NamedPort(p.DestinationNamedPort, &l.proto); ok {
					out = append(out, l.name+" dport "+strconv.Itoa(int(n)))
				}
			}
		}
	}
	return out
}

// portMatch matches a valid destinationPort of protocol proto.
func portMatch(proto string, p *v1beta1.Port) string {
	if p.Range != nil {
		return proto + " dport " + strconv.Itoa(int(p.Range.Start)) + "-" + strconv.Itoa(int(p.Range.End))
	}
	return proto + " dport " + strconv.Itoa(int(p.Number))
}

// ruleOf returns rule idx of a direction of a policy, ingress peers as
// egress peers without the egress-only fields.
func ruleOf(cnp *v1beta1.ClusterNetworkPolicy, egress bool, idx int) (name string, action v1beta1.ClusterNetworkPolicyRuleAction, peers []v1beta1.ClusterNetworkPolicyEgressPeer, protos []v1beta1.ClusterNetworkPolicyProtocol) {
	if egress {
		r := &cnp.Spec.Egress[idx]
		return r.Name, r.Action, r.To, r.Protocols
	}
	r := &cnp.Spec.Ingress[idx]
	peers = make([]v1beta1.ClusterNetworkPolicyEgressPeer, len(r.From))
	for j, p := range r.From {
		peers[j] = v1beta1.ClusterNetworkPolicyEgressPeer{Namespaces: p.Namespaces, Pods: p.Pods}
	}
	return r.Name, r.Action, peers, r.Protocols
}

// compileRule compiles a rule, declaring its sets.
func (c *compiler) compileRule(cp *compiledPolicy, egress bool, idx int) *compiledRule {
	s := &slots[slotIndex(cp.admin, egress)]
	name, action, peers, protos := ruleOf(cp.cnp, egress, idx)
	idxText := strconv.Itoa(idx)
	comment := "cnp " + cp.cnp.Name + " " + s.field + "[" + idxText + "] " + string(action)
	if name != "" {
		comment += " " + name
	}
	cr := &compiledRule{comment: nftsafe.Comment(comment), action: action, protocols: protos}
	fail := cp.failIng
	if egress {
		fail = cp.failEgr
	}
	if fail[idx] {
		cr.fail = true
		return cr
	}
	var named []string
	for _, p := range protos {
		if p.DestinationNamedPort != "" {
			if egress {
				named = append(named, p.DestinationNamedPort)
			} else {
				cr.perDst = true
			}
		}
	}
	if !cr.perDst {
		cr.portMatches = portMatches(protos, nil)
	}

	tag := s.setTag + idxText
	var sels []selection.Selection
	var keys []selection.PeerKey
	var nets4, nets6 []netip.Prefix
	var nodes4, nodes6 []string
	for _, peer := range peers {
		var nsSel, podSel *metav1.LabelSelector
		switch {
		case peer.Namespaces != nil:
			nsSel = peer.Namespaces
		case peer.Pods != nil:
			nsSel, podSel = &peer.Pods.NamespaceSelector, &peer.Pods.PodSelector
		case peer.Networks != nil:
			for _, n := range peer.Networks {
				pfx, _ := netip.ParsePrefix(string(n)) // valid: validate
				if pfx.Addr().Is4() {
					nets4 = append(nets4, pfx)
				} else {
					nets6 = append(nets6, pfx)
				}
			}
			continue
		case peer.Nodes != nil:
			a4, a6 := c.nodeAddrs(peer.Nodes)
			nodes4, nodes6 = append(nodes4, a4...), append(nodes6, a6...)
			continue
		default:
			continue // fail closed already (validate)
		}
		sel, k := c.sel.Select("", nsSel, podSel)
		sels, keys = append(sels, sel), append(keys, k)
	}
	c.used = append(c.used, keys...)
	var pods []*selection.Pod // the selected pods, for named ports
	if len(named) > 0 {
		pods = selectedPods(sels)
	}
	pe := c.peerElems(keys, sels)
	pname := cp.cnp.Name
	add := func(match string, kind, typ string, interval bool, elems []string) {
		if len(elems) > 0 {
			cr.peerMatches = append(cr.peerMatches, match+" @"+c.addrSet(setName(pname, tag, kind), typ, interval, elems, cr.comment))
		}
	}
	if len(pe.v4) > 0 {
		cr.peerMatches = append(cr.peerMatches, s.peer4+" @"+c.sharedSet(setName(pname, tag, "pods4"), "ipv4_addr", pe.v4, cr.comment))
	}
	if len(pe.v6) > 0 {
		cr.peerMatches = append(cr.peerMatches, s.peer6+" @"+c.sharedSet(setName(pname, tag, "pods6"), "ipv6_addr", pe.v6, cr.comment))
	}
	add(s.peer4, "net4", "ipv4_addr", true, prefixTexts(nets4))
	add(s.peer6, "net6", "ipv6_addr", true, prefixTexts(nets6))
	add(s.peer4, "nodes4", "ipv4_addr", false, nodes4)
	add(s.peer6, "nodes6", "ipv6_addr", false, nodes6)
	if len(named) > 0 {
		var t4, t6 []string
		for _, p := range pods {
			for _, n := range named {
				for _, l := range l4 {
					num, ok := p.Obj.NamedPort(n, &l.proto)
					if !ok {
						continue
					}
					suffix := " . " + l.name + " . " + strconv.Itoa(int(num))
					for _, a := range p.V4Text() {
						t4 = append(t4, a+suffix)
					}
					for _, a := range p.V6Text() {
						t6 = append(t6, a+suffix)
					}
				}
			}
		}
		if len(t4) > 0 {
			cr.namedMatches = append(cr.namedMatches, "ip daddr . meta l4proto . th dport @"+
				c.addrSet(setName(pname, tag, "named4"), "ipv4_addr . inet_proto . inet_service", false, t4, cr.comment))
		}
		if len(t6) > 0 {
			cr.namedMatches = append(cr.namedMatches, "ip6 daddr . meta l4proto . th dport @"+
				c.addrSet(setName(pname, tag, "named6"), "ipv6_addr . inet_proto . inet_service", false, t6, cr.comment))
		}
	}
	return cr
}

// selectedPods joins selections, each pod once.
func selectedPods(sels []selection.Selection) []*selection.Pod {
	var pods []*selection.Pod
	dup := false
	for i, sel := range sels {
		if i == 0 {
			pods = sel.Pods // shared: copied before changing
		} else {
			if i == 1 {
				pods = append([]*selection.Pod(nil), pods...)
			}
			pods = append(pods, sel.Pods...)
		}
		dup = dup || sel.Dup
	}
	if dup {
		// Pods sharing a key count once, as the first selected.
		pods = selection.Unique(pods)
	}
	return pods
}

// peerAddrs is the sorted set elements of the addresses that a list of
// pod selections selects. Rules of many policies often select the same
// pods (every namespace, say): their sets share these elements, computed
// once per compile and kept across compiles while they stay the same, so
// that a pod event that changes no address changes no rule.
type peerAddrs struct {
	v4, v6 []engine.Element
}

// peerElems returns the elements of the selections keys named.
func (c *compiler) peerElems(keys []selection.PeerKey, sels []selection.Selection) *peerAddrs {
	if len(keys) == 0 {
		return &peerAddrs{}
	}
	ck := fmt.Sprint(keys)
	if pa := c.addrs[ck]; pa != nil {
		return pa
	}
	old := c.prev.addrs[ck]
	same := old != nil
	for _, k := range keys {
		if !same {
			break
		}
		same = c.sel.Unchanged(k)
	}
	if !same {
		var v4, v6 []string
		for _, p := range selectedPods(sels) {
			v4 = append(v4, p.V4Text()...)
			v6 = append(v6, p.V6Text()...)
		}
		pa := &peerAddrs{v4: elements(v4), v6: elements(v6)}
		if old == nil || !slices.Equal(old.v4, pa.v4) || !slices.Equal(old.v6, pa.v6) {
			old = pa
		}
	}
	c.addrs[ck], c.next.addrs[ck] = old, old
	return old
}

// elements sorts keys and returns them as set elements, each once.
func elements(keys []string) []engine.Element {
	if len(keys) == 0 {
		return nil
	}
	sort.Strings(keys)
	out := make([]engine.Element, 0, len(keys))
	for i, k := range keys {
		if i == 0 || k != keys[i-1] {
			out = append(out, engine.Element{Key: k})
		}
	}
	return out
}

// sharedSet declares a set whose elements (sorted, shared, never changed)
// come from peerElems.
func (c *compiler) sharedSet(name, typ string, elems []engine.Element, comment string) string {
	s := &engine.Set{Name: name, Type: typ, Comment: comment, Elements: elems}
	c.sets[name] = s
	c.declared = append(c.declared, s)
	return name
}

// nodeAddrs returns the InternalIP and ExternalIP addresses of the nodes a
// selector selects, as the API prescribes for nodes peers. Addresses that
// do not parse are no one's: they are skipped.
func (c *compiler) nodeAddrs(ls *metav1.LabelSelector) (v4, v6 []string) {
	sel := c.sel.Selectors().Parse(ls).Selector
	for _, n := range c.in.Nodes {
		if !sel.Matches(labelsOf(n.Labels)) {
			continue
		}
		for _, a := range n.Status.Addresses {
			if a.Type != corev1.NodeInternalIP && a.Type != corev1.NodeExternalIP {
				continue
			}
			ip, err := netip.ParseAddr(a.Address)
			if err != nil || ip.Zone() != "" {
				continue
			}
			ip = ip.Unmap()
			if ip.Is4() {
				v4 = append(v4, ip.String())
			} else {
				v6 = append(v6, ip.String())
			}
		}
	}
	return v4, v6
}

// prefixTexts returns the prefixes without those inside another (an
// interval set refuses overlaps), as set elements.
func prefixTexts(ps []netip.Prefix) []string {
	var out []string
	for _, p := range cidrs.Fold(ps) {
		if p.IsSingleIP() {
			out = append(out, p.Addr().String()) // as nft prints it
		} else {
			out = append(out, p.String())
		}
	}
	return out
}

// addrSet declares a named set of the elements, sorted and without
// repeats, and returns its name. It may reorder elems.
func (c *compiler) addrSet(name, typ string, interval bool, elems []string, comment string) string {
	s := &engine.Set{Name: name, Type: typ, Interval: interval, Comment: comment}
	sort.Strings(elems)
	for i, e := range elems {
		if i == 0 || e != elems[i-1] {
			s.Elements = append(s.Elements, engine.Element{Key: e})
		}
	}
	c.sets[name] = s
	c.declared = append(c.declared, s)
	return name
}

// buildChain makes a local pod's chain of one slot from the rules of the
// policies selecting it, in evaluation order. A packet no rule decides
// falls off the end and returns to the fixed chain: the next tier. How
// its rules drop is end (see chainEnd).
func buildChain(p *selection.Pod, s *slot, rules []*compiledRule, end chainEnd) engine.Chain {
	ch := engine.Chain{Name: podChainName(s.chainPrefix, p.Obj.Namespace, p.Obj.Name),
		Comment: nftsafe.Comment(s.tier + " tier " + s.field + " of pod " + p.Key)}
	// A pod may always reach itself, also through the node (hairpin).
	for _, a := range p.V4Text() {
		ch.Rules = append(ch.Rules, engine.Rule{Rule: s.peer4 + " " + a + " accept", Comment: "pod to itself"})
	}
	for _, a := range p.V6Text() {
		ch.Rules = append(ch.Rules, engine.Rule{Rule: s.peer6 + " " + a + " accept", Comment: "pod to itself"})
	}
	for _, cr := range rules {
		v := s.verdict(cr.action, end)
		if cr.fail {
			if cr.action != v1beta1.ClusterNetworkPolicyRuleActionAccept {
				ch.Rules = append(ch.Rules, engine.Rule{Rule: s.drop(end), Comment: cr.comment})
			}
			continue
		}
		pm := cr.portMatches
		if cr.perDst {
			pm = portMatches(cr.protocols, p.Obj)
		}
		for _, peer := range cr.peerMatches {
			for _, m := range pm {
				ch.Rules = append(ch.Rules, engine.Rule{Rule: join(peer, m, v), Comment: cr.comment})
			}
		}
		for _, peer := range cr.namedMatches {
			ch.Rules = append(ch.Rules, engine.Rule{Rule: peer + " " + v, Comment: cr.comment})
		}
	}
	return ch
}

func join(peer, port, verdict string) string {
	if port == "" {
		return peer + " " + verdict
	}
	return peer + " " + port + " " + verdict
}
