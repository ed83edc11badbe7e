package explain

import (
	"fmt"
	"net/netip"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	cnpv1beta1 "sigs.k8s.io/network-policy-api/apis/v1beta1"

	"github.com/nftguard/nftguard/selection"
)

// ClusterRuleRef names one ClusterNetworkPolicy rule and what of it matched.
type ClusterRuleRef struct {
	Policy    string // the ClusterNetworkPolicy's name
	Tier      string // TierAdmin or TierBaseline
	Priority  int32
	Direction string // "ingress" or "egress"
	Index     int    // in spec.ingress or spec.egress
	Name      string // the rule's name; may be empty
	// Action is the rule's action as written: Accept, Deny or Pass.
	Action string
	Peer   string // e.g. `to[0] networks 169.254.169.254/32`
	Port   string // e.g. "protocols[0] TCP/80", or "any port"
	// FailClosed, when the rule decided by failing closed, is why the
	// compiler cannot enforce it as written (its field relative to the
	// rule, and the reason): an invalid rule, or a peer nftguard cannot
	// match. A Deny or Pass rule that fails closed denies all traffic of
	// its direction, whatever its peers and protocols say.
	FailClosed string
}

func (r ClusterRuleRef) String() string {
	s := r.head()
	if r.FailClosed != "" {
		return s + fmt.Sprintf(" (%s: fail closed, this %s rule denies all traffic)", r.FailClosed, r.Action)
	}
	return s + fmt.Sprintf(" (peer %s, port %s)", r.Peer, r.Port)
}

// head names the policy and the rule.
func (r ClusterRuleRef) head() string {
	s := fmt.Sprintf("ClusterNetworkPolicy %s (%s, priority %d) rule %s[%d]", displayName(r.Policy), r.Tier, r.Priority, r.Direction, r.Index)
	if r.Name != "" {
		// Rule names are free text of up to 100 characters: quoted, so
		// no control character reaches a terminal as is.
		s += " " + strconv.Quote(r.Name)
	}
	return s
}

// tierResult is what one CNP tier says about one side of a flow.
type tierResult struct {
	// action is the effective action of the deciding rule (Deny for a
	// rule that fails closed), empty when no rule matched.
	action cnpv1beta1.ClusterNetworkPolicyRuleAction
	rule   *ClusterRuleRef
	// selecting are the tier's policies that select the pod and have rules
	// for the direction, in evaluation order.
	selecting []string
	notes     []string
	// domainMisses are the domainNames rules met before the decision
	// that held no answer for the destination.
	domainMisses []ClusterRuleRef
}

// evalTier runs the tier's policies that select self, lowest priority first
// (equal priorities by name), and within a policy its rules in written
// order: the first rule that matches decides for the tier.
func (c *Cluster) evalTier(tier string, ingress bool, self, peer Endpoint, f Flow) tierResult {
	var res tierResult
	var decided *clusterPolicy
	for _, cp := range c.cnps {
		if cp.tier != tier {
			continue
		}
		rules := cp.egress
		if ingress {
			rules = cp.ingress
		}
		if len(rules) == 0 || !cp.selects(c, self.pod) {
			continue
		}
		res.selecting = append(res.selecting, cp.shown)
		if decided != nil {
			// Only an equal priority could have decided instead, had
			// the tie been broken the other way.
			if cp.priority == decided.priority {
				if other, action, _, _ := c.firstMatch(cp, ingress, rules, self, peer, f); other != nil {
					res.notes = append(res.notes, fmt.Sprintf(
						"priority %d is shared with %s, which would %s: the API leaves the order of equal priorities open; nftguard orders them by name, so %s decides",
						cp.priority, other, strings.ToLower(string(action)), decided.shown))
				}
			}
			continue
		}
		ref, action, notes, misses := c.firstMatch(cp, ingress, rules, self, peer, f)
		res.notes = append(res.notes, notes...)
		res.domainMisses = append(res.domainMisses, misses...)
		if ref != nil {
			res.action, res.rule, decided = action, ref, cp
		}
	}
	return res
}

// firstMatch returns the policy's first rule that matches the flow and its
// effective action, with notes on Accept rules skipped because they fail
// closed. A rule that fails closed is the compiler's: an Accept one
// matches nothing, any other matches everything and denies (the kernel
// drops), also for an action that is not Deny.
func (c *Cluster) firstMatch(cp *clusterPolicy, ingress bool, rules []cnpRule, self, peer Endpoint, f Flow) (*ClusterRuleRef, cnpv1beta1.ClusterNetworkPolicyRuleAction, []string, []ClusterRuleRef) {
	dir, field, dst := "egress", "to", peer
	if ingress {
		dir, field, dst = "ingress", "from", self
	}
	var notes []string
	var misses []ClusterRuleRef
	for i, r := range rules {
		ref := &ClusterRuleRef{Policy: cp.name, Tier: cp.tier, Priority: cp.priority, Direction: dir, Index: i, Name: r.name, Action: string(r.action)}
		if r.failClosed != "" {
			if r.action == cnpv1beta1.ClusterNetworkPolicyRuleActionAccept {
				notes = append(notes, fmt.Sprintf("%s fails closed: %s; this Accept rule matches no traffic", ref.head(), r.failClosed))
				continue
			}
			ref.FailClosed = r.failClosed
			return ref, cnpv1beta1.ClusterNetworkPolicyRuleActionDeny, notes, misses
		}
		peerText, ok := c.matchClusterPeers(r.peers, field, peer)
		if !ok && !ingress {
			var note string
			var domains bool
			peerText, ok, domains, note = c.matchDomains(r.peers, self, peer)
			if note != "" {
				notes = append(notes, ref.head()+" "+note)
			}
			if domains && !ok {
				misses = append(misses, *ref)
			}
		}
		if !ok {
			continue
		}
		portText, ok := matchProtocols(r.protocols, dst, f)
		if !ok {
			continue
		}
		ref.Peer, ref.Port = peerText, portText
		return ref, r.action, notes, misses
	}
	return nil, "", notes, misses
}

// matchClusterPeers reports whether one of the peers selects e, and which.
func (c *Cluster) matchClusterPeers(peers []cnpv1beta1.ClusterNetworkPolicyEgressPeer, field string, e Endpoint) (string, bool) {
	// Namespaces and pods peers select pods; a hostNetwork pod or an
	// address that is no pod is never one of them.
	isPod := e.pod != nil && !e.HostNetwork
	for j, p := range peers {
		name := fmt.Sprintf("%s[%d]", field, j)
		switch {
		case p.Namespaces != nil:
			if isPod && matches(p.Namespaces, c.namespaceLabels(e.pod.obj.Namespace)) {
				return name + " namespaces " + selectorText(p.Namespaces), true
			}
		case p.Pods != nil:
			if isPod && matches(&p.Pods.NamespaceSelector, c.namespaceLabels(e.pod.obj.Namespace)) &&
				matches(&p.Pods.PodSelector, labels.Set(e.pod.obj.Labels)) {
				return fmt.Sprintf("%s pods namespaceSelector %s AND podSelector %s", name,
					selectorText(&p.Pods.NamespaceSelector), selectorText(&p.Pods.PodSelector)), true
			}
		case p.Nodes != nil:
			for _, n := range c.nodeAddrs[e.Addr] {
				if matches(p.Nodes, labels.Set(n.Labels)) {
					return fmt.Sprintf("%s nodes %s (node %s)", name, selectorText(p.Nodes), n.Name), true
				}
			}
		case len(p.Networks) > 0:
			for _, n := range p.Networks {
				if pre, err := netip.ParsePrefix(string(n)); err == nil && pre.Contains(e.Addr) {
					return name + " networks " + string(n), true
				}
			}
		}
	}
	return "", false
}

// matches applies a selector that validation already parsed.
func matches(s *metav1.LabelSelector, l labels.Set) bool {
	sel, err := selection.AsSelector(s)
	return err == nil && sel.Matches(l)
}

// matchProtocols reports whether one of the protocol entries admits the
// flow, and which. No entries mean every protocol and port.
func matchProtocols(ps []cnpv1beta1.ClusterNetworkPolicyProtocol, dst Endpoint, f Flow) (string, bool) {
	if len(ps) == 0 {
		return "any port", true
	}
	for k, p := range ps {
		name := fmt.Sprintf("protocols[%d]", k)
		var proto corev1.Protocol
		var port *cnpv1beta1.Port
		switch {
		case p.TCP != nil:
			proto, port = corev1.ProtocolTCP, p.TCP.DestinationPort
		case p.UDP != nil:
			proto, port = corev1.ProtocolUDP, p.UDP.DestinationPort
		case p.SCTP != nil:
			proto, port = corev1.ProtocolSCTP, p.SCTP.DestinationPort
		case p.DestinationNamedPort != "":
			if dst.pod == nil || dst.HostNetwork {
				continue // a name means nothing on an address that is no pod
			}
			// A name may be declared for several protocols: it
			// matches on the port it has for the flow's protocol.
			if n, ok := namedPort(dst.pod.obj, p.DestinationNamedPort, f.Protocol); ok && n == f.Port {
				return fmt.Sprintf("%s destinationNamedPort %q (%s/%d on %s)", name, p.DestinationNamedPort, f.Protocol, n, dst.Pod), true
			}
			continue
		}
		if proto != f.Protocol || port == nil {
			continue
		}
		if r := port.Range; r != nil {
			if f.Port >= r.Start && f.Port <= r.End {
				return fmt.Sprintf("%s %s/%d-%d", name, proto, r.Start, r.End), true
			}
			continue
		}
		if port.Number == f.Port {
			return fmt.Sprintf("%s %s/%d", name, proto, port.Number), true
		}
	}
	return "", false
}
