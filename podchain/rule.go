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
	// PortMatches when they do not depend on the destination pod; else
	// DstPorts (ingress named ports) gives them for the chain's pod. One
	// "" stands for no port restriction.
	PortMatches []string
	DstPorts    func(dst *podset.Pod) []string
}

// same tells whether two compilations of one rule (of one policy object,
// so DstPorts reads the same ports) are the same.
func same(a, b *Rule) bool {
	return a.Comment == b.Comment && a.Action == b.Action && a.Fail == b.Fail &&
		(a.DstPorts == nil) == (b.DstPorts == nil) &&
		slices.Equal(a.PeerMatches, b.PeerMatches) && slices.Equal(a.NamedMatches, b.NamedMatches) &&
		slices.Equal(a.PortMatches, b.PortMatches)
}

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
