package explain

import (
	"fmt"
	"strings"
)

// String prints the verdict the way `nftguard explain` shows it:
//
//	flow x/b (10.100.0.3) -> x/a (10.100.0.2) TCP/80
//	egress  x/b: allowed: not isolated for egress: no policy selects the pod
//	ingress x/a: allowed by x/allow-b ingress[0] (peer from[0] podSelector pod=b, port any port)
//	verdict: allowed
func (r *Result) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "flow %s -> %s %s/%d\n", r.From, r.To, r.Protocol, r.Port)
	fmt.Fprintf(&b, "egress  %s: %s\n", r.From.short(), r.Egress)
	fmt.Fprintf(&b, "ingress %s: %s\n", r.To.short(), r.Ingress)
	fmt.Fprintf(&b, "verdict: %s\n", verdict(r.Allowed))
	return b.String()
}

// String is the decision on one line, the Pass rules met on the way first
// ("passed by ..., then allowed by ..."), and each note on a line of its
// own.
func (d Decision) String() string {
	var b strings.Builder
	for _, p := range d.Passed {
		b.WriteString("passed by " + p.String() + ", then ")
	}
	switch {
	case d.ClusterRule != nil:
		b.WriteString(verdict(d.Allowed) + " by " + d.ClusterRule.String())
	case d.Rule != nil && len(d.Passed) > 0:
		// After a Pass the tier is worth naming; without one the text
		// stays as it was before ClusterNetworkPolicy.
		b.WriteString("allowed by NetworkPolicy " + d.Rule.String())
	case d.Rule != nil:
		b.WriteString("allowed by " + d.Rule.String())
	case d.Allowed:
		b.WriteString("allowed: " + d.Reason)
	default:
		b.WriteString("denied: " + d.Reason)
	}
	for _, n := range d.Notes {
		b.WriteString("\n    note: " + n)
	}
	return b.String()
}

func (e Endpoint) short() string {
	if e.Pod != "" {
		return e.Pod
	}
	return e.Addr.String()
}

func verdict(allowed bool) string {
	if allowed {
		return "allowed"
	}
	return "denied"
}
