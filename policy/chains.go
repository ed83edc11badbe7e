package policy

import (
	networkingv1 "k8s.io/api/networking/v1"

	"github.com/nftguard/nftguard/engine"
	"github.com/nftguard/nftguard/internal/nftsafe"
	"github.com/nftguard/nftguard/podchain"
	"github.com/nftguard/nftguard/selection"
	"github.com/nftguard/nftguard/tablelayout"
)

// direction is a kind of pod chain of package podchain (ingress or
// egress) with what policy adds: the tag of its rules' set names. The two
// are package variables: the memo knows a kind by its address.
type direction struct {
	podchain.Kind
	setTag       string // "in" or "eg": np_NS_POLICY_in0_pods4, see names.go
	policyPrefix string // "np_pi" or "np_pe": a policy's chain, see names.go
}

var (
	dirIngress = direction{setTag: "in", policyPrefix: "np_pi", Kind: podchain.Kind{ChainPrefix: "np_ing", Field: "ingress",
		Peer4: "ip saddr", Peer6: "ip6 saddr", Accept: "accept", Denied: tablelayout.ChainDeniedIngress,
		InvalidDrop: true, Isolated: CommentIsolatedIngress}}
	// A packet egress allows still needs the destination's ingress.
	dirEgress = direction{setTag: "eg", policyPrefix: "np_pe", Kind: podchain.Kind{Egress: true, ChainPrefix: "np_egr", Field: "egress",
		Peer4: "ip daddr", Peer6: "ip6 daddr", Accept: podchain.GotoChain(tablelayout.ChainIngress), Denied: tablelayout.ChainDeniedEgress,
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

// podChain returns the ingress or egress chain of a local pod: a jump to
// the chain of each policy that selects it (in policy key order), which
// holds the policy's rules of this direction once for all the pods it
// selects, then what of those rules depends on the pod (ingress named
// ports resolved on it). Every NetworkPolicy rule accepts, so the order
// of the rules decides nothing. The previous compile's chain when the pod
// and the rules are the same.
func (c *compiler) podChain(p *selection.Member, pols []*compiledPolicy, d *direction) engine.Chain {
	var rules []*podchain.Rule
	for _, cp := range pols {
		n := d.ruleCount(cp.np)
		if n == 0 {
			continue
		}
		prs := c.policyRules(d, cp)
		jump, ok := c.cyc.PolicyChain(cp, &d.Kind, d.policyChainName(cp), nftsafe.Comment(d.Field+" rules of "+cp.key), prs)
		if !ok {
			// Another policy of the same key (manifests only) has the
			// chain's name: this one's rules stay in the pod's chain.
			rules = append(rules, prs...)
			continue
		}
		if jump != nil {
			rules = append(rules, jump)
		}
		for _, r := range prs {
			if r.DstPorts != nil {
				rules = append(rules, r.DstOnly())
			}
		}
	}
	return c.cyc.Chain(p, &d.Kind, rules, podchain.EndOf(c.logged, p.Obj.Namespace))
}

// policyRules are the compiled rules of one direction of a policy, the
// same slice for every pod the policy selects in this compile.
func (c *compiler) policyRules(d *direction, cp *compiledPolicy) []*podchain.Rule {
	k := policyRulesKey{cp, d}
	if prs, ok := c.polRules[k]; ok {
		return prs
	}
	n := d.ruleCount(cp.np)
	prs := make([]*podchain.Rule, n)
	for i := range n {
		prs[i] = c.rule(d, cp, i)
	}
	c.polRules[k] = prs
	return prs
}

type policyRulesKey struct {
	cp *compiledPolicy
	d  *direction
}

// policyChainName names a policy's chain of this direction.
func (d *direction) policyChainName(cp *compiledPolicy) string {
	return nftsafe.Name(d.policyPrefix + "_" + nftsafe.NamePart(cp.np.Namespace) + "_" + nftsafe.NamePart(cp.np.Name))
}

// rule returns the compiled form of one rule of a policy (see
// podchain.Cycle.Rule for when it is the previous compile's).
func (c *compiler) rule(d *direction, cp *compiledPolicy, idx int) *podchain.Rule {
	return c.cyc.Rule(podchain.RuleKey{Policy: cp, Kind: &d.Kind, Idx: idx}, func() (*podchain.Rule, podchain.Deps) {
		peers, ports := d.rule(cp.np, idx)
		return c.compileRule(d, cp, idx, peers, ports)
	})
}
