package podchain

import (
	"slices"
	"sort"

	"github.com/nftguard/nftguard/engine"
)

// A policy's chain holds the rules of one policy in one direction once,
// and the chain of each local pod the policy selects jumps to it: the
// policy's rules cost the node once, not once per selected pod. It suits
// rules whose verdict is the same for every pod (NetworkPolicy: accept, or
// goto np_ingress): a Deny's verdict depends on the pod's namespace
// (End), so ClusterNetworkPolicy tiers keep their rules in the pod chains.
// What depends on the pod itself (ingress named ports, resolved on it)
// stays in the pod's chain, after the jump (DstOnly).

// policyChainMemo is a policy's chain with what it was built from, and
// the rule that jumps to it.
type policyChainMemo struct {
	owner any
	rules []*Rule
	chain engine.Chain
	jump  *Rule
}

// PolicyChain returns the rule that jumps to the chain name holding
// rules of kind k, declaring the chain (the previous compile's when the owner and
// the rules are the same). owner is the compiler's handle of the policy.
// jump is nil when the chain would be empty. ok is false when another
// owner declared a chain of that name in this
// compile (two policies of one key, possible in manifests only): the
// caller then keeps the rules in the pod's chain.
func (c *Cycle) PolicyChain(owner any, k *Kind, name, comment string, rules []*Rule) (jump *Rule, ok bool) {
	if pm, taken := c.policyChains[name]; taken {
		return pm.jumpRule(), pm.owner == owner
	}
	pm := c.prev.policyChains[name]
	if pm == nil || pm.owner != owner || !slices.Equal(pm.rules, rules) {
		ch := engine.Chain{Name: name, Comment: comment}
		for _, r := range rules {
			ch.Rules = appendRule(ch.Rules, k, r, nil, EndPlain)
		}
		jump := &Rule{Comment: comment, Action: Jump, Target: name}
		if pm != nil && pm.jump.Target == name && pm.jump.Comment == comment {
			jump = pm.jump // pod chains that jump here stay the same
		}
		pm = &policyChainMemo{owner: owner, rules: slices.Clone(rules), chain: ch, jump: jump}
	}
	c.policyChains[name] = pm
	c.next.policyChains[name] = pm
	return pm.jumpRule(), true
}

// jumpRule is the rule that jumps to the chain, nil when the chain is
// empty (every rule of the policy resolves on the pod): then there is no
// chain and nothing to jump to.
func (pm *policyChainMemo) jumpRule() *Rule {
	if len(pm.chain.Rules) == 0 {
		return nil
	}
	return pm.jump
}

// PolicyChains are the policies' chains of this compile, by name.
func (c *Cycle) PolicyChains() []engine.Chain {
	out := make([]engine.Chain, 0, len(c.policyChains))
	for _, pm := range c.policyChains {
		if len(pm.chain.Rules) > 0 {
			out = append(out, pm.chain)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}
