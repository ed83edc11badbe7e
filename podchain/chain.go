package podchain

import (
	"slices"

	"github.com/nftguard/nftguard/engine"
	"github.com/nftguard/nftguard/internal/nftsafe"
	"github.com/nftguard/nftguard/podset"
	"github.com/nftguard/nftguard/selection"
)

// Kind is one kind of pod chain, a tier in one direction: everything that
// differs between the chains of a NetworkPolicy (ingress, egress) and of a
// ClusterNetworkPolicy tier (Admin or Baseline, ingress or egress), so that
// one builder makes them all.
//
// A Kind is known by its address: the memo (RuleKey, Cycle.Chain) and
// Dispatch tell kinds apart by their *Kind, so a compiler declares each of
// its kinds once, in a variable that outlives its memo (a package
// variable), and passes that pointer. A copy is another kind: what the
// memo holds for the original is not found through it.
type Kind struct {
	Egress bool
	// ChainPrefix starts the chains' names: np_ing, cnp_ae, ... The name
	// is ChainPrefix_NS_POD (see ChainName).
	ChainPrefix string
	// Field names the chain in its comment: "ingress", "Admin tier
	// egress", ...
	Field string
	// Peer4 and Peer6 match the peer's address: ip saddr for ingress,
	// ip daddr for egress.
	Peer4, Peer6 string
	// Accept is the verdict of an Accept: accept (ingress) or goto
	// np_ingress (egress: the destination's ingress still decides).
	Accept string
	// Denied is the shared denied chain of the direction (see End).
	Denied string
	// InvalidDrop starts the chain with "ct state invalid drop".
	InvalidDrop bool
	// Isolated, when set, ends the chain in a drop with this comment (a
	// NetworkPolicy isolates); else a packet no rule decides returns to
	// the fixed chain (a tier goes on with the next).
	Isolated string
}

// ChainName names a local pod's chain of a kind: ChainPrefix, namespace
// and name joined with "_", each part through nftsafe.NamePart and the
// whole through nftsafe.Name.
func (k *Kind) ChainName(ns, name string) string {
	return nftsafe.Name(k.ChainPrefix + "_" + nftsafe.NamePart(ns) + "_" + nftsafe.NamePart(name))
}

// Verdict is what a matching rule of action a does in this kind of chain.
func (k *Kind) Verdict(a Action, end End) string {
	switch a {
	case Accept:
		return k.Accept
	case Pass:
		return "return"
	}
	if a == Jump {
		return "" // the rule's Target, see appendRule
	}
	return k.drop(end)
}

// chainKey names a local pod's chain of one kind.
type chainKey struct {
	p    *selection.Member
	kind *Kind
}

// chainMemo is a pod chain with the rules it was built from.
type chainMemo struct {
	rules []*Rule
	end   End
	chain engine.Chain
}

// Chain returns the chain of kind k of local pod p from the compiled rules
// of the policies selecting it, in evaluation order: the previous
// compile's when the pod, the rules and how the chain drops are the same.
// Everything in a chain follows from these three, so the policies that
// gave no rule (an isolating policy without rules) need no comparing.
func (c *Cycle) Chain(p *selection.Member, k *Kind, rules []*Rule, end End) engine.Chain {
	ck := chainKey{p: p, kind: k}
	if cm, ok := c.prev.chains[ck]; ok && cm.end == end && slices.Equal(cm.rules, rules) {
		c.next.chains[ck] = cm
		return cm.chain
	}
	ch := buildChain(p, k, rules, end)
	c.next.chains[ck] = &chainMemo{rules: slices.Clone(rules), end: end, chain: ch}
	return ch
}

// buildChain makes the chain. A pod may always reach itself, also through
// the node (a hairpin): those accepts come before any policy rule.
func buildChain(p *selection.Member, k *Kind, rules []*Rule, end End) engine.Chain {
	ch := engine.Chain{Name: k.ChainName(p.Obj.Namespace, p.Obj.Name), Comment: nftsafe.Comment(k.Field + " of pod " + p.Key)}
	if k.InvalidDrop {
		ch.Rules = append(ch.Rules, engine.Rule{Rule: "ct state invalid drop"})
	}
	for _, a := range p.V4Text() {
		ch.Rules = append(ch.Rules, engine.Rule{Rule: k.Peer4 + " " + a + " accept", Comment: "pod to itself"})
	}
	for _, a := range p.V6Text() {
		ch.Rules = append(ch.Rules, engine.Rule{Rule: k.Peer6 + " " + a + " accept", Comment: "pod to itself"})
	}
	for _, r := range rules {
		ch.Rules = appendRule(ch.Rules, k, r, p.Obj, end)
	}
	if k.Isolated != "" {
		ch.Rules = append(ch.Rules, engine.Rule{Rule: k.drop(end), Comment: k.Isolated})
	}
	return ch
}

// appendRule appends the nft rules of one compiled rule: its peer matches
// crossed with its port matches (and, with dst, the named ports resolved
// on dst), then its named-port matches.
func appendRule(out []engine.Rule, k *Kind, r *Rule, dst *podset.Pod, end End) []engine.Rule {
	if r.Action == Jump {
		return append(out, engine.Rule{Rule: JumpTo(r.Target), Comment: r.Comment})
	}
	if r.Fail {
		if r.Action != Accept {
			out = append(out, engine.Rule{Rule: k.drop(end), Comment: r.Comment})
		}
		return out
	}
	v := k.Verdict(r.Action, end)
	pm := r.PortMatches
	if r.DstPorts != nil && dst != nil {
		pm = append(pm[:len(pm):len(pm)], r.DstPorts(dst)...)
	}
	for _, peer := range r.PeerMatches {
		for _, m := range pm {
			out = append(out, engine.Rule{Rule: Join(peer, m, v), Comment: r.Comment})
		}
	}
	for _, peer := range r.NamedMatches {
		out = append(out, engine.Rule{Rule: Join(peer, "", v), Comment: r.Comment})
	}
	return out
}
