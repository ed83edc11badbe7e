package policy

import (
	networkingv1 "k8s.io/api/networking/v1"

	"github.com/nftguard/nftguard/engine"
	"github.com/nftguard/nftguard/podchain"
	"github.com/nftguard/nftguard/selection"
)

// direction is a kind of pod chain of package podchain (ingress or
// egress) with what policy adds: the tag of its rules' set names.
type direction struct {
	podchain.Dir
	setTag string // "in" or "eg": np_NS_POLICY_in0_pods4, see names.go
}

var (
	dirIngress = direction{setTag: "in", Dir: podchain.Dir{Slot: 0, ChainPrefix: "np_ing", Field: "ingress",
		Peer4: "ip saddr", Peer6: "ip6 saddr", Accept: "accept", Denied: ChainDeniedIngress,
		InvalidDrop: true, Isolated: CommentIsolatedIngress}}
	// A packet egress allows still needs the destination's ingress.
	dirEgress = direction{setTag: "eg", Dir: podchain.Dir{Slot: 1, Egress: true, ChainPrefix: "np_egr", Field: "egress",
		Peer4: "ip daddr", Peer6: "ip6 daddr", Accept: "goto " + ChainIngress, Denied: ChainDeniedEgress,
		InvalidDrop: true, Isolated: CommentIsolatedEgress}}
)

// ruleCount is how many rules of this direction np has.
func (d *direction) ruleCount(np *networkingv1.NetworkPolicy) int {
	if d.Egress {
		return len(np.Spec.Egress)
	}
	return len(np.Spec.Ingress)
}

// rule returns rule i of this direction of np: its peers and ports.
func (d *direction) rule(np *networkingv1.NetworkPolicy, i int) ([]networkingv1.NetworkPolicyPeer, []networkingv1.NetworkPolicyPort) {
	if d.Egress {
		return np.Spec.Egress[i].To, np.Spec.Egress[i].Ports
	}
	return np.Spec.Ingress[i].From, np.Spec.Ingress[i].Ports
}

// podChain returns the ingress or egress chain of a local pod from the
// rules of the policies that select it, in policy key and rule order (the
// previous compile's when the pod and the rules are the same).
func (c *compiler) podChain(p *selection.Pod, pols []*compiledPolicy, d *direction) engine.Chain {
	var rules []*podchain.Rule
	for _, cp := range pols {
		for i, n := 0, d.ruleCount(cp.np); i < n; i++ {
			rules = append(rules, c.rule(d, cp, i))
		}
	}
	return c.cyc.Chain(p, &d.Dir, rules, podchain.EndOf(c.logged, p.Obj.Namespace))
}

// rule returns the compiled form of one rule of a policy (see
// podchain.Cycle.Rule for when it is the previous compile's).
func (c *compiler) rule(d *direction, cp *compiledPolicy, idx int) *podchain.Rule {
	return c.cyc.Rule(podchain.RuleKey{Policy: cp, Slot: d.Slot, Idx: idx}, func() (*podchain.Rule, podchain.Deps) {
		peers, ports := d.rule(cp.np, idx)
		return c.compileRule(d, cp, idx, peers, ports)
	})
}
