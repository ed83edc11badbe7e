package explain

import (
	"fmt"
	"net/netip"
	"strings"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"
	cnpv1beta1 "sigs.k8s.io/network-policy-api/apis/v1beta1"

	"github.com/nftguard/nftguard/podset"
	nppolicy "github.com/nftguard/nftguard/policy"
	"github.com/nftguard/nftguard/selection"
)

// Result is the verdict on one flow: the source's egress and the
// destination's ingress are judged independently, and the flow passes only
// when both allow it.
type Result struct {
	From, To Endpoint
	Protocol corev1.Protocol
	Port     int32
	Egress   Decision // on the source side
	Ingress  Decision // on the destination side
	Allowed  bool
}

// Decision is the verdict of one side.
type Decision struct {
	Allowed bool
	// Tier is the tier that decided: TierAdmin, TierNetworkPolicy or
	// TierBaseline; empty when none did (the default allow, or an
	// exception that comes before policy).
	Tier string
	// Reason says why, when no policy rule decided: the pod is not
	// isolated, talks to itself or to its node, or is no pod at all.
	Reason string
	// Isolated lists the NetworkPolicies (namespace/name) that isolate
	// the pod in this direction, when the NetworkPolicy tier was reached.
	Isolated []string
	// Rule is the first NetworkPolicy rule, in policy name order, that
	// allowed the flow.
	Rule *RuleRef
	// ClusterRule is the ClusterNetworkPolicy rule that decided (an
	// Accept, or a Deny), when an Admin or Baseline rule did.
	ClusterRule *ClusterRuleRef
	// Passed are the Pass rules met on the way, at most one per tier.
	Passed []ClusterRuleRef
	// Notes say what else shaped the verdict: a tie of equal priorities
	// broken by name, rules skipped because they fail closed.
	Notes []string
	// UnmatchedDomains are the Accept rules with domainNames peers met
	// before the decision that held no DNS answer of the pod's for the
	// destination (with no live state given, every one met).
	UnmatchedDomains []ClusterRuleRef
}

// RuleRef names one rule of a policy and what of it matched.
type RuleRef struct {
	Policy    string // namespace/name
	Direction string // "ingress" or "egress"
	Index     int    // in spec.ingress or spec.egress
	Peer      string // e.g. `from[1] namespaceSelector ns=y`, or "any peer"
	Port      string // e.g. "ports[0] TCP/80", or "any port"
}

func (r RuleRef) String() string {
	return fmt.Sprintf("%s %s[%d] (peer %s, port %s)", r.Policy, r.Direction, r.Index, r.Peer, r.Port)
}

// Explain judges one flow. The error wraps ErrBadInput when the flow names
// an unknown or terminated pod, or an unusable address.
func (c *Cluster) Explain(f Flow) (*Result, error) {
	switch f.Protocol {
	case corev1.ProtocolTCP, corev1.ProtocolUDP, corev1.ProtocolSCTP:
		if f.Port < 1 || f.Port > 65535 {
			return nil, badInput("port %d: must be from 1 to 65535", f.Port)
		}
	case ProtocolICMPv6:
		if f.Port < 0 || f.Port > 255 {
			return nil, badInput("ICMPv6 type %d: must be from 0 to 255", f.Port)
		}
	default:
		return nil, badInput("protocol %q: must be TCP, UDP or SCTP", f.Protocol)
	}
	from, err := c.resolve(f.From)
	if err != nil {
		return nil, fmt.Errorf("--from: %w", err)
	}
	to, err := c.resolve(f.To)
	if err != nil {
		return nil, fmt.Errorf("--to: %w", err)
	}
	family := f.Family
	if f.Protocol == ProtocolICMPv6 && family == 0 {
		family = 6 // ICMPv6 has no IPv4 flow to default to
	}
	if err := pickAddrs(&from, &to, family); err != nil {
		return nil, err
	}
	r := &Result{From: from, To: to, Protocol: f.Protocol, Port: f.Port}
	if f.Protocol == ProtocolICMPv6 {
		if from.Addr.Is4() {
			return nil, badInput("ICMPv6 needs IPv6 addresses, not %s and %s", from.Addr, to.Addr)
		}
		if f.Port == icmpv6NeighborSolicit || f.Port == icmpv6NeighborAdvert {
			d := Decision{Allowed: true, Reason: neighbourDiscovery}
			r.Egress, r.Ingress, r.Allowed = d, d, true
			return r, nil
		}
		// Any other ICMPv6 type is a flow like others: only rules
		// without ports admit it.
	}
	r.Egress = c.side(false, from, to, f)
	r.Ingress = c.side(true, to, from, f)
	r.Allowed = r.Egress.Allowed && r.Ingress.Allowed
	return r, nil
}

// ICMPv6 neighbour solicitation and advertisement, which the table accepts
// before any policy.
const (
	icmpv6NeighborSolicit = 135
	icmpv6NeighborAdvert  = 136
)

const neighbourDiscovery = "IPv6 neighbour discovery: accepted before policy (with hop limit 255, as RFC 4861 requires, so only on the pods' own link), " +
	"so that pods on one bridge can resolve each other whatever isolates them"

// side judges the egress of self towards peer, or (ingress) the ingress of
// self from peer.
func (c *Cluster) side(ingress bool, self, peer Endpoint, f Flow) Decision {
	switch {
	case self.pod == nil:
		return Decision{Allowed: true, Reason: "not a pod: no policy applies"}
	case self.HostNetwork:
		return Decision{Allowed: true, Reason: "hostNetwork pod: never isolated"}
	case peer.pod == self.pod || peer.Addr == self.Addr:
		return Decision{Allowed: true, Reason: "a pod always reaches itself"}
	case ingress && peer.onNodeOf(self.Node):
		return Decision{Allowed: true, Reason: "from the pod's own node: always allowed (the node's own traffic, such as the kubelet's probes, never meets ingress policy)"}
	case c.nodeName != "" && self.Node != c.nodeName:
		return Decision{Allowed: true, Reason: fmt.Sprintf("not enforced on node %s: the pod runs on %q", c.nodeName, self.Node)}
	}
	d := c.tiers(ingress, self, peer, f)
	if !ingress && peer.onNodeOf(self.Node) {
		// The table judges this flow in its input hook with the same
		// dispatch as forwarded traffic; say so, since it surprises users
		// of CNIs that always allow it.
		d.Notes = append([]string{fmt.Sprintf("%s is an address of the pod's own node %s: egress policy applies to it as to any destination", peer.Addr, peer.Node)}, d.Notes...)
	}
	return d
}

// tiers runs the tiers in order for one side: Admin, NetworkPolicy,
// Baseline, then allow.
func (c *Cluster) tiers(ingress bool, self, peer Endpoint, f Flow) Decision {
	dir := "egress"
	if ingress {
		dir = "ingress"
	}
	d := Decision{}
	admin := c.evalTier(TierAdmin, ingress, self, peer, f)
	if c.tierDecides(&d, TierAdmin, admin) {
		return d
	}
	if c.networkPolicies(&d, ingress, self, peer, f) {
		return d
	}
	baseline := c.evalTier(TierBaseline, ingress, self, peer, f)
	if c.tierDecides(&d, TierBaseline, baseline) {
		return d
	}
	d.Allowed = true
	var selecting []string
	for _, t := range []struct {
		name string
		res  tierResult
	}{{TierAdmin, admin}, {TierBaseline, baseline}} {
		if len(t.res.selecting) > 0 {
			selecting = append(selecting, t.name+": "+strings.Join(t.res.selecting, ", "))
		}
	}
	if len(selecting) == 0 {
		d.Reason = "not isolated for " + dir + ": no policy selects the pod"
	} else {
		d.Reason = fmt.Sprintf("not isolated for %s: no NetworkPolicy selects the pod, and no rule of the ClusterNetworkPolicies that select it (%s) decided",
			dir, strings.Join(selecting, "; "))
	}
	return d
}

// tierDecides records a CNP tier's result in d and reports whether the
// tier decided (Accept or Deny); a Pass is recorded on the way.
func (c *Cluster) tierDecides(d *Decision, tier string, res tierResult) bool {
	d.Notes = append(d.Notes, res.notes...)
	d.UnmatchedDomains = append(d.UnmatchedDomains, res.domainMisses...)
	switch res.action {
	case cnpv1beta1.ClusterNetworkPolicyRuleActionAccept:
		d.Allowed, d.Tier, d.ClusterRule = true, tier, res.rule
		return true
	case cnpv1beta1.ClusterNetworkPolicyRuleActionDeny:
		d.Tier, d.ClusterRule = tier, res.rule
		return true
	case cnpv1beta1.ClusterNetworkPolicyRuleActionPass:
		d.Passed = append(d.Passed, *res.rule)
	}
	return false
}

// networkPolicies runs the NetworkPolicy tier: it decides when a policy
// isolates the pod in this direction.
func (c *Cluster) networkPolicies(d *Decision, ingress bool, self, peer Endpoint, f Flow) bool {
	obj := self.pod.obj
	for _, p := range c.policies {
		if p.np.Namespace != obj.Namespace || !p.selector.Matches(labels.Set(obj.Labels)) {
			continue
		}
		if (ingress && !p.ingress) || (!ingress && !p.egress) {
			continue
		}
		d.Isolated = append(d.Isolated, p.key)
		if d.Rule != nil {
			continue // keep collecting the isolating policies
		}
		d.Rule = c.matchPolicy(p, ingress, peer, self, f)
	}
	switch {
	case len(d.Isolated) == 0:
		return false
	case d.Rule != nil:
		d.Allowed = true
	default:
		d.Reason = fmt.Sprintf("isolated by %s, no rule allowed", strings.Join(d.Isolated, ", "))
	}
	d.Tier = TierNetworkPolicy
	return true
}

// matchPolicy returns the first rule of p's ingress (egress) that admits
// the peer on the flow's port. dst is the flow's destination, on which
// named ports resolve.
func (c *Cluster) matchPolicy(p *policy, ingress bool, peer, self Endpoint, f Flow) *RuleRef {
	dst := peer
	if ingress {
		dst = self
	}
	type rule struct {
		peers []networkingv1.NetworkPolicyPeer
		ports []networkingv1.NetworkPolicyPort
	}
	var rules []rule
	dir, peerField := "egress", "to"
	if ingress {
		dir, peerField = "ingress", "from"
		for _, r := range p.np.Spec.Ingress {
			rules = append(rules, rule{r.From, r.Ports})
		}
	} else {
		for _, r := range p.np.Spec.Egress {
			rules = append(rules, rule{r.To, r.Ports})
		}
	}
	for i, r := range rules {
		peerText, ok := c.matchPeers(r.peers, peerField, p.np.Namespace, peer)
		if !ok {
			continue
		}
		portText, ok := matchPorts(r.ports, dst, f)
		if !ok {
			continue
		}
		return &RuleRef{Policy: p.key, Direction: dir, Index: i, Peer: peerText, Port: portText}
	}
	return nil
}

// matchPeers reports whether one of the peers selects e, and which.
func (c *Cluster) matchPeers(peers []networkingv1.NetworkPolicyPeer, field, policyNS string, e Endpoint) (string, bool) {
	if len(peers) == 0 {
		return "any peer", true
	}
	for j, pr := range peers {
		name := fmt.Sprintf("%s[%d]", field, j)
		if b := pr.IPBlock; b != nil {
			if inBlock(b, e.Addr) {
				text := name + " ipBlock " + b.CIDR
				if len(b.Except) > 0 {
					text += " except " + strings.Join(b.Except, ",")
				}
				return text, true
			}
			continue
		}
		// Selectors pick pods; a hostNetwork pod or a bare address is
		// never one of them.
		if e.pod == nil || e.HostNetwork {
			continue
		}
		obj := e.pod.obj
		var parts []string
		if pr.NamespaceSelector == nil {
			if obj.Namespace != policyNS {
				continue
			}
		} else {
			sel, _ := selection.AsSelector(pr.NamespaceSelector)
			if !sel.Matches(c.namespaceLabels(obj.Namespace)) {
				continue
			}
			parts = append(parts, "namespaceSelector "+selectorText(pr.NamespaceSelector))
		}
		if pr.PodSelector != nil {
			sel, _ := selection.AsSelector(pr.PodSelector)
			if !sel.Matches(labels.Set(obj.Labels)) {
				continue
			}
			parts = append(parts, "podSelector "+selectorText(pr.PodSelector))
		}
		return name + " " + strings.Join(parts, " AND "), true
	}
	return "", false
}

func selectorText(s *metav1.LabelSelector) string {
	t := metav1.FormatLabelSelector(s)
	if t == "" || t == "<none>" {
		return "{} (all)"
	}
	return t
}

// inBlock reports whether a is in the CIDR and in none of its excepts,
// read as the compiler reads them (policy.ParseIPBlockCIDR: a value an
// older API server stored means what it meant then).
func inBlock(b *networkingv1.IPBlock, a netip.Addr) bool {
	cidr, err := nppolicy.ParseIPBlockCIDR(b.CIDR)
	if err != nil || !cidr.Contains(a) {
		return false
	}
	for _, e := range b.Except {
		if ex, err := nppolicy.ParseIPBlockCIDR(e); err == nil && ex.Contains(a) {
			return false
		}
	}
	return true
}

// matchPorts reports whether one of the ports admits the flow, and which.
// Named ports resolve on the destination pod.
func matchPorts(ports []networkingv1.NetworkPolicyPort, dst Endpoint, f Flow) (string, bool) {
	if len(ports) == 0 {
		return "any port", true
	}
	for k, pp := range ports {
		proto := corev1.ProtocolTCP
		if pp.Protocol != nil {
			proto = *pp.Protocol
		}
		if proto != f.Protocol {
			continue
		}
		name := fmt.Sprintf("ports[%d] %s", k, proto)
		switch {
		case pp.Port == nil:
			return name + " (every port)", true
		case pp.Port.Type == intstr.Int && pp.EndPort != nil:
			if f.Port >= pp.Port.IntVal && f.Port <= *pp.EndPort {
				return fmt.Sprintf("%s/%d-%d", name, pp.Port.IntVal, *pp.EndPort), true
			}
		case pp.Port.Type == intstr.Int:
			if f.Port == pp.Port.IntVal {
				return fmt.Sprintf("%s/%d", name, f.Port), true
			}
		default:
			if dst.pod == nil {
				continue // a name means nothing on an address that is no pod
			}
			if n, ok := namedPort(dst.pod.obj, pp.Port.StrVal, proto); ok && n == f.Port {
				return fmt.Sprintf("%s/%s (%d on %s)", name, pp.Port.StrVal, n, dst.Pod), true
			}
		}
	}
	return "", false
}

// namedPort finds the first container port of that name and protocol
// (TCP when unset), in the containers first, then in sidecars (init
// containers that keep running), as Kubernetes and the compilers do
// (podset.Pod.NamedPort). The API server checks port names per container,
// so two containers of a pod may declare one name for different protocols
// (TCP 53 and UDP 53 as "dns"): each protocol then matches its own port.
func namedPort(p *podset.Pod, name string, proto corev1.Protocol) (int32, bool) {
	return p.NamedPort(name, &proto)
}
