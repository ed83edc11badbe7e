package podchain

import (
	"slices"

	"github.com/nftguard/nftguard/podset"
)

// Action is what a matching rule does: Accept ends the direction (egress
// goes on to the destination's ingress check), Deny drops, Pass returns to
// the fixed chain, which goes on with the next tier. NetworkPolicy rules
// only accept.
type Action uint8

const (
	Accept Action = iota
	Deny
	Pass
	// Jump goes to a policy's chain (Rule.Target) and, when nothing
	// there decides, on with the next rule.
	Jump
)

// Rule is what one policy rule compiles to independent of the pod whose
// chain it goes into: its peer matches crossed with its port matches, then
// its named-port matches, each ending in the action's verdict in the
// chain's direction.
type Rule struct {
	Comment string
	Action  Action
	// Fail: the rule fails closed; nothing else is set. An Accept that
	// fails matches nothing, any other action drops everything.
	Fail         bool
	PeerMatches  []string
	NamedMatches []string
	// PortMatches do not depend on the destination pod; DstPorts, when
	// set (ingress named ports), gives the matches of the names resolved
	// on the chain's pod, after them. One "" stands for no port
	// restriction.
	PortMatches []string
	DstPorts    func(dst *podset.Pod) []string
	// Target is the chain a Jump goes to.
	Target string

	// dstOnly is the rule without its PortMatches and NamedMatches: what
	// stays in each pod's chain when the rest is in the policy's chain.
	dstOnly *Rule
}

// DstOnly is the part of r that depends on the chain's pod (its peers
// with the named ports resolved on the pod), the same *Rule every time.
func (r *Rule) DstOnly() *Rule {
	if r.dstOnly == nil {
		r.dstOnly = &Rule{Comment: r.Comment, Action: r.Action, PeerMatches: r.PeerMatches, DstPorts: r.DstPorts}
	}
	return r.dstOnly
}

// same tells whether two compilations of one rule (of one policy object,
// so DstPorts reads the same ports) are the same.
func same(a, b *Rule) bool {
	return a.Comment == b.Comment && a.Action == b.Action && a.Fail == b.Fail && a.Target == b.Target &&
		(a.DstPorts == nil) == (b.DstPorts == nil) &&
		slices.Equal(a.PeerMatches, b.PeerMatches) && slices.Equal(a.NamedMatches, b.NamedMatches) &&
		slices.Equal(a.PortMatches, b.PortMatches)
}

// JumpTo is the verdict that continues in chain and comes back to the rule
// after it when chain returns.
func JumpTo(chain string) string { return "jump " + chain }

// GotoChain is the verdict that continues in chain and does not come back:
// what chain decides is final for the chain that went to it.
func GotoChain(chain string) string { return "goto " + chain }

// Join joins the non-empty matches and the verdict with spaces.
func Join(peer, port, verdict string) string {
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
