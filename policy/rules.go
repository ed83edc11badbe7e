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
	"github.com/nftguard/nftguard/podset"
	"github.com/nftguard/nftguard/selection"
)

// portMatchesFor returns the port matches that apply to any peer: numbers,
// ranges, protocols, and (for ingress, dst != nil) names resolved on the
// destination pod. One "" stands for no port restriction.
func portMatchesFor(ports []networkingv1.NetworkPolicyPort, dst *podset.Pod) []string {
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
			if n, ok := dst.NamedPort(pp.Port.StrVal, pp.Protocol); ok {
				portMatches = append(portMatches, proto+" dport "+strconv.Itoa(int(n)))
			}
		}
	}
	return portMatches
}

// compileRule compiles the part of a rule that does not depend on the pod
// whose chain it goes into, declaring its sets.
func (c *compiler) compileRule(d *direction, cp *compiledPolicy, idx int, peers []networkingv1.NetworkPolicyPeer, ports []networkingv1.NetworkPolicyPort) (*podchain.Rule, podchain.Deps) {
	var deps podchain.Deps
	idxText := strconv.Itoa(idx)
	r := &podchain.Rule{Comment: nftsafe.Comment(cp.key + " " + d.Field + "[" + idxText + "]")}
	base := []string{cp.np.Namespace, cp.np.Name, d.setTag + idxText}

	// Named ports resolve on the destination pod: for ingress that is the
	// chain's pod, for egress each peer pod.
	var named []podchain.NamedPort
	if nps := namedPorts(ports); len(nps) > 0 {
		if d.Egress {
			for _, pp := range nps {
				proto := corev1.ProtocolTCP
				if pp.Protocol != nil {
					proto = *pp.Protocol
				}
				named = append(named, podchain.NamedPort{Name: pp.Port.StrVal, Proto: proto})
			}
		} else {
			r.DstPorts = func(dst *podset.Pod) []string { return portMatchesFor(ports, dst) }
		}
	}
	if r.DstPorts == nil {
		r.PortMatches = portMatchesFor(ports, nil)
	}
	comment := nftsafe.Comment(base[0] + "/" + base[1] + " " + base[2])

	if len(peers) == 0 {
		// No peers: every source (ingress) or destination (egress).
		r.PeerMatches = []string{""}
		if len(named) > 0 {
			deps.AllPods = true
			t4, t6 := podchain.NamedTuples(c.sel.All(), named)
			r.NamedMatches = c.cyc.NamedSets(setName(append(base, "named4")), setName(append(base, "named6")), t4, t6, comment)
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
	v4, v6 := c.cyc.PeerAddrs(keys, sels)
	if len(v4) > 0 {
		r.PeerMatches = append(r.PeerMatches, d.Peer4+" @"+c.cyc.SharedSet(setName(append(base, "pods4")), "ipv4_addr", v4, r.Comment))
	}
	if len(v6) > 0 {
		r.PeerMatches = append(r.PeerMatches, d.Peer6+" @"+c.cyc.SharedSet(setName(append(base, "pods6")), "ipv6_addr", v6, r.Comment))
	}
	if rs := mergeRanges(blocks4); len(rs) > 0 {
		r.PeerMatches = append(r.PeerMatches, d.Peer4+" @"+c.cyc.AddrSet(setName(append(base, "cidr4")), "ipv4_addr", true, rangeTexts(rs), r.Comment))
	}
	if rs := mergeRanges(blocks6); len(rs) > 0 {
		r.PeerMatches = append(r.PeerMatches, d.Peer6+" @"+c.cyc.AddrSet(setName(append(base, "cidr6")), "ipv6_addr", true, rangeTexts(rs), r.Comment))
	}
	if len(named) > 0 {
		t4, t6 := podchain.NamedTuples(podchain.SelectedPods(sels), named)
		r.NamedMatches = c.cyc.NamedSets(setName(append(base, "named4")), setName(append(base, "named6")), t4, t6, comment)
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
