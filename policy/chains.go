package policy

import (
	"slices"

	networkingv1 "k8s.io/api/networking/v1"

	"github.com/nftguard/nftguard/engine"
	"github.com/nftguard/nftguard/internal/nftsafe"
	"github.com/nftguard/nftguard/selection"
)

// direction holds everything that differs between a pod's ingress and
// egress chain, so that one builder makes both.
type direction struct {
	egress      bool
	chainPrefix string // "ing" or "egr": np_ing_NS_POD, see names.go
	setTag      string // "in" or "eg": np_NS_POLICY_in0_pods4, see names.go
	field       string // "ingress" or "egress", as in the API, for comments
	peer4       string // the peer's address: "ip saddr" (ingress) or "ip daddr" (egress)
	peer6       string
	verdict     string // what a matching rule does
	isolated    string // the comment of the chain's last rule, which drops
	logDrop     string // that rule when the pod is logged (logdenied.go)
	countDrop   string // that rule when the node logs but the pod is not (logdenied.go)
}

var (
	dirIngress = direction{chainPrefix: "ing", setTag: "in", field: "ingress", peer4: "ip saddr", peer6: "ip6 saddr", verdict: "accept",
		isolated: CommentIsolatedIngress, logDrop: "counter goto " + ChainDeniedIngress, countDrop: "counter drop"}
	// A packet egress allows still needs the destination's ingress.
	dirEgress = direction{egress: true, chainPrefix: "egr", setTag: "eg", field: "egress", peer4: "ip daddr", peer6: "ip6 daddr", verdict: "goto " + ChainIngress,
		isolated: CommentIsolatedEgress, logDrop: "counter goto " + ChainDeniedEgress, countDrop: "counter drop"}
)

// ruleCount is how many rules of this direction np has.
func (d *direction) ruleCount(np *networkingv1.NetworkPolicy) int {
	if d.egress {
		return len(np.Spec.Egress)
	}
	return len(np.Spec.Ingress)
}

// rule returns rule i of this direction of np: its peers and ports.
func (d *direction) rule(np *networkingv1.NetworkPolicy, i int) ([]networkingv1.NetworkPolicyPeer, []networkingv1.NetworkPolicyPort) {
	if d.egress {
		return np.Spec.Egress[i].To, np.Spec.Egress[i].Ports
	}
	return np.Spec.Ingress[i].From, np.Spec.Ingress[i].Ports
}

// podChain returns the ingress or egress chain of a local pod, the
// previous compile's when the pod, the policies selecting it and their
// compiled rules are the same.
func (c *compiler) podChain(p *selection.Pod, pols []*compiledPolicy, d *direction) engine.Chain {
	var rules []*compiledRule
	for _, cp := range pols {
		for i, n := 0, d.ruleCount(cp.np); i < n; i++ {
			peers, ports := d.rule(cp.np, i)
			rules = append(rules, c.rule(d, cp, i, peers, ports))
		}
	}
	k := chainKey{p: p, egress: d.egress}
	end := endPlain
	if c.logged != nil {
		end = endCounted
		if c.logged[p.Obj.Namespace] {
			end = endLogged
		}
	}
	if cm, ok := c.prev.chains[k]; ok && cm.end == end && slices.Equal(cm.pols, pols) && slices.Equal(cm.rules, rules) {
		c.next.chains[k] = cm
		return cm.chain
	}
	ch := buildChain(p, rules, d, end)
	c.next.chains[k] = &chainMemo{pols: slices.Clone(pols), rules: rules, end: end, chain: ch}
	return ch
}

// buildChain makes a pod's chain for one direction from the compiled
// rules of the policies that select it, in policy key and rule order.
// How the chain ends is end (see chainEnd).
func buildChain(p *selection.Pod, rules []*compiledRule, d *direction, end chainEnd) engine.Chain {
	ch := engine.Chain{Name: objName(d.chainPrefix, p.Obj.Namespace, p.Obj.Name), Comment: nftsafe.Comment(d.field + " of pod " + p.Key)}
	ch.Rules = append(ch.Rules, engine.Rule{Rule: "ct state invalid drop"})
	// A pod may always reach itself, also through the node (hairpin).
	for _, a := range p.V4Text() {
		ch.Rules = append(ch.Rules, engine.Rule{Rule: d.peer4 + " " + a + " accept", Comment: "pod to itself"})
	}
	for _, a := range p.V6Text() {
		ch.Rules = append(ch.Rules, engine.Rule{Rule: d.peer6 + " " + a + " accept", Comment: "pod to itself"})
	}
	// Named ports of ingress rules resolve on this pod; of egress rules
	// on each peer pod (compileRule).
	dst := p
	if d.egress {
		dst = nil
	}
	for _, cr := range rules {
		ch.Rules = appendRule(ch.Rules, d, cr, dst)
	}
	last := "drop"
	switch end {
	case endLogged:
		last = d.logDrop
	case endCounted:
		last = d.countDrop
	}
	ch.Rules = append(ch.Rules, engine.Rule{Rule: last, Comment: d.isolated})
	return ch
}

// appendRule appends the nft rules of one compiled rule: its peer matches
// crossed with its port matches, then its named-port matches. dst is the
// pod named ports resolve on when the port matches depend on it.
func appendRule(rules []engine.Rule, d *direction, cr *compiledRule, dst *selection.Pod) []engine.Rule {
	portMatches := cr.portMatches
	if cr.perDst {
		portMatches = portMatchesFor(cr.ports, dst)
	}
	for _, peer := range cr.peerMatches {
		for _, m := range portMatches {
			rules = append(rules, engine.Rule{Rule: joinMatch(peer, m, d.verdict), Comment: cr.comment})
		}
	}
	for _, peer := range cr.namedMatches {
		rules = append(rules, engine.Rule{Rule: joinMatch(peer, "", d.verdict), Comment: cr.comment})
	}
	return rules
}

// joinMatch joins the non-empty matches and the verdict with spaces.
func joinMatch(peer, port, verdict string) string {
	switch {
	case peer == "" && port == "":
		return verdict
	case peer == "":
		return port + " " + verdict
	case port == "":
		return peer + " " + verdict
	}
	return peer + " " + port + " " + verdict
}
