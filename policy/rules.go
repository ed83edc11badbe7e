package policy

import (
	"net/netip"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/nftguard/nftguard/internal/nftsafe"
	"github.com/nftguard/nftguard/podchain"
	"github.com/nftguard/nftguard/selection"
)

// compileRule compiles the part of a rule that does not depend on the pod
// whose chain it goes into, declaring its sets.
func (c *compiler) compileRule(d *direction, cp *compiledPolicy, idx int, peers []networkingv1.NetworkPolicyPeer, ports []networkingv1.NetworkPolicyPort) (*podchain.Rule, podchain.Deps) {
	var deps podchain.Deps
	idxText := strconv.Itoa(idx)
	r := &podchain.Rule{Comment: nftsafe.Comment(cp.key + " " + d.Field + "[" + idxText + "]")}
	base := []string{cp.np.Namespace, cp.np.Name, d.setTag + idxText}

	// Numbered ports are matches shared by every peer (one per
	// protocol, see podchain.Cycle.PortMatches). Named ports resolve on
	// the destination pod: for ingress that is the chain's pod, for
	// egress each peer pod.
	var entries []podchain.PortEntry
	var named []podchain.NamedPort
	for _, pp := range ports {
		proto := protoName(pp.Protocol)
		switch {
		case pp.Port == nil:
			entries = append(entries, podchain.PortEntry{Proto: proto, All: true})
		case pp.Port.Type == intstr.Int:
			to := pp.Port.IntVal
			if pp.EndPort != nil {
				to = max(to, *pp.EndPort)
			}
			entries = append(entries, podchain.PortEntry{Proto: proto, From: pp.Port.IntVal, To: to})
		default:
			p := corev1.ProtocolTCP
			if pp.Protocol != nil {
				p = *pp.Protocol
			}
			named = append(named, podchain.NamedPort{Name: pp.Port.StrVal, Proto: p})
		}
	}
	portMatches := []string{""} // no ports: every port and protocol
	if len(ports) > 0 {
		portMatches = c.cyc.PortMatches(entries, func(proto string) string { return setName(append(base, proto)) }, r.Comment)
	}
	r.PortMatches = portMatches
	var egressNamed podchain.NamedPorts
	switch {
	case len(named) == 0:
	case d.Egress:
		egressNamed = podchain.NewNamedPorts(named)
	default:
		nn := podchain.NewNamedPorts(named)
		r.DstPorts = nn.Matches
	}

	if len(peers) == 0 {
		// No peers: every source (ingress) or destination (egress).
		r.PeerMatches = []string{""}
		if egressNamed != nil {
			deps.AllPods = true
			r.NamedMatches = c.cyc.NamedSets("np_", nil, true, c.sel.All, egressNamed, func(kind string) string { return setName(append(base, kind)) })
		}
		return r, deps
	}

	var sels []selection.Selection
	var keys []selection.PeerKey
	var blocks4, blocks6 []addrRange
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
		sels, keys = append(sels, sel), append(keys, k)
	}
	if len(r.PortMatches) == 0 && r.DstPorts == nil {
		// Only egress named ports: the tuple sets below match the
		// peers; a peer set would be looked up by no rule.
		r.NamedMatches = c.cyc.NamedSets("np_", keys, false, func() []*selection.Member { return podchain.SelectedPods(sels) }, egressNamed,
			func(kind string) string { return setName(append(base, kind)) })
		return r, deps
	}
	s4, s6 := c.cyc.PeerSets("np_", keys, sels, func(kind string) string { return setName(append(base, kind)) })
	if s4 != "" {
		r.PeerMatches = append(r.PeerMatches, d.Peer4+" @"+s4)
	}
	if s6 != "" {
		r.PeerMatches = append(r.PeerMatches, d.Peer6+" @"+s6)
	}
	if rs := mergeRanges(blocks4); len(rs) > 0 {
		r.PeerMatches = append(r.PeerMatches, d.Peer4+" @"+c.cyc.AddrSet(setName(append(base, "cidr4")), "ipv4_addr", true, rangeTexts(rs), r.Comment))
	}
	if rs := mergeRanges(blocks6); len(rs) > 0 {
		r.PeerMatches = append(r.PeerMatches, d.Peer6+" @"+c.cyc.AddrSet(setName(append(base, "cidr6")), "ipv6_addr", true, rangeTexts(rs), r.Comment))
	}
	if egressNamed != nil {
		r.NamedMatches = c.cyc.NamedSets("np_", keys, false, func() []*selection.Member { return podchain.SelectedPods(sels) }, egressNamed,
			func(kind string) string { return setName(append(base, kind)) })
	}
	return r, deps
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
