package clusterpolicy

import (
	"net/netip"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/network-policy-api/apis/v1beta1"

	"github.com/nftguard/nftguard/internal/cidrs"
	"github.com/nftguard/nftguard/internal/nftsafe"
	"github.com/nftguard/nftguard/podchain"
	"github.com/nftguard/nftguard/selection"
)

// l4 are the protocols a named port may resolve to, in the order their
// matches are written.
var l4 = [3]corev1.Protocol{corev1.ProtocolTCP, corev1.ProtocolUDP, corev1.ProtocolSCTP}

// portEntries returns the numbered ports of a rule's protocols, and its
// named ports (each name with every protocol it may be declared with).
func portEntries(protos []v1beta1.ClusterNetworkPolicyProtocol) (entries []podchain.PortEntry, named []podchain.NamedPort) {
	for i := range protos {
		p := &protos[i]
		switch {
		case p.TCP != nil:
			entries = append(entries, portEntry("tcp", p.TCP.DestinationPort))
		case p.UDP != nil:
			entries = append(entries, portEntry("udp", p.UDP.DestinationPort))
		case p.SCTP != nil:
			entries = append(entries, portEntry("sctp", p.SCTP.DestinationPort))
		case p.DestinationNamedPort != "":
			// A name may be declared for more than one protocol.
			for _, proto := range l4 {
				named = append(named, podchain.NamedPort{Name: p.DestinationNamedPort, Proto: proto})
			}
		}
	}
	return entries, named
}

// portEntry is a valid destinationPort of protocol proto.
func portEntry(proto string, p *v1beta1.Port) podchain.PortEntry {
	if p.Range != nil {
		return podchain.PortEntry{Proto: proto, From: p.Range.Start, To: max(p.Range.Start, p.Range.End)}
	}
	return podchain.PortEntry{Proto: proto, From: p.Number, To: p.Number}
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

// action is a rule's action as package podchain writes it: anything but
// Accept and Pass drops (an unknown action fails closed, see validate).
func action(a v1beta1.ClusterNetworkPolicyRuleAction) podchain.Action {
	switch a {
	case v1beta1.ClusterNetworkPolicyRuleActionAccept:
		return podchain.Accept
	case v1beta1.ClusterNetworkPolicyRuleActionPass:
		return podchain.Pass
	}
	return podchain.Deny
}

// compileRule compiles a rule of slot s, declaring its sets.
func (c *compiler) compileRule(cp *compiledPolicy, s *slot, idx int) *podchain.Rule {
	egress := s.Egress
	name, act, peers, protos := ruleOf(cp.cnp, egress, idx)
	idxText := strconv.Itoa(idx)
	comment := "cnp " + cp.cnp.Name + " " + s.field + "[" + idxText + "] " + string(act)
	if name != "" {
		comment += " " + name
	}
	r := &podchain.Rule{Comment: nftsafe.Comment(comment), Action: action(act)}
	fail := cp.failIng
	if egress {
		fail = cp.failEgr
	}
	if fail[idx] {
		r.Fail = true
		return r
	}
	tag := s.setTag + idxText
	pname := cp.cnp.Name
	entries, named := portEntries(protos)
	portMatches := []string{""} // no protocols: every port and protocol
	if len(protos) > 0 {
		portMatches = c.cyc.PortMatches(entries, func(proto string) string { return setName(pname, tag, proto) }, r.Comment)
	}
	r.PortMatches = portMatches
	var egressNamed podchain.NamedPorts
	switch {
	case len(named) == 0:
	case egress:
		egressNamed = podchain.NewNamedPorts(named)
	default:
		nn := podchain.NewNamedPorts(named)
		r.DstPorts = nn.Matches
	}

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
		case peer.DomainNames != nil:
			continue // one pair of sets for the rule's names, below
		default:
			continue // fail closed already (validate)
		}
		sel, k := c.sel.Select("", nsSel, podSel)
		sels, keys = append(sels, sel), append(keys, k)
	}
	if len(r.PortMatches) == 0 && r.DstPorts == nil {
		// Only egress named ports: the tuple sets below match the
		// peers; peer sets would be looked up by no rule.
		r.NamedMatches = c.cyc.NamedSets("cnp_", keys, false, func() []*selection.Member { return podchain.SelectedPods(sels) }, egressNamed,
			func(kind string) string { return setName(pname, tag, kind) })
		return r
	}
	s4, s6 := c.cyc.PeerSets("cnp_", keys, sels, func(kind string) string { return setName(pname, tag, kind) })
	add := func(match string, kind, typ string, interval bool, elems []string) {
		if len(elems) > 0 {
			r.PeerMatches = append(r.PeerMatches, match+" @"+c.cyc.AddrSet(setName(pname, tag, kind), typ, interval, elems, r.Comment))
		}
	}
	if s4 != "" {
		r.PeerMatches = append(r.PeerMatches, s.Peer4+" @"+s4)
	}
	if s6 != "" {
		r.PeerMatches = append(r.PeerMatches, s.Peer6+" @"+s6)
	}
	if pats := cp.domains[idx]; egress && len(pats) > 0 {
		r.PeerMatches = append(r.PeerMatches, domainMatches(pats)...)
	}
	add(s.Peer4, "net4", "ipv4_addr", true, prefixTexts(nets4))
	add(s.Peer6, "net6", "ipv6_addr", true, prefixTexts(nets6))
	add(s.Peer4, "nodes4", "ipv4_addr", false, nodes4)
	add(s.Peer6, "nodes6", "ipv6_addr", false, nodes6)
	if egressNamed != nil {
		r.NamedMatches = c.cyc.NamedSets("cnp_", keys, false, func() []*selection.Member { return podchain.SelectedPods(sels) }, egressNamed,
			func(kind string) string { return setName(pname, tag, kind) })
	}
	return r
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
