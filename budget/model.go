package budget

// Cost is what one object adds to a node's table: nft rules and set (or
// map) elements. The compile time of an object, the batch that carries it
// and the memory that holds it all grow with these two (see doc.go for
// the measured factors), so bounding them bounds the rest.
type Cost struct {
	Rules    int
	Elements int
}

// Add returns c + o.
func (c Cost) Add(o Cost) Cost { return Cost{c.Rules + o.Rules, c.Elements + o.Elements} }

// Sub returns c - o.
func (c Cost) Sub(o Cost) Cost { return Cost{c.Rules - o.Rules, c.Elements - o.Elements} }

// Exceeds tells whether c is over l in either dimension.
func (c Cost) Exceeds(l Cost) bool { return c.Rules > l.Rules || c.Elements > l.Elements }

// Shape is what the cost of one NetworkPolicy depends on: its own sizes,
// and how many pods and addresses its selectors select.
type Shape struct {
	// LocalPods are the pods of this node the policy's podSelector
	// selects: each gets a chain (per direction) holding the policy's
	// rules.
	LocalPods int
	// Directions is how many of ingress and egress the policy isolates
	// (its effective policyTypes: 1 or 2).
	Directions int
	Rules      []RuleShape
}

// RuleShape is one ingress or egress rule.
type RuleShape struct {
	Egress bool
	// Ports counts the ports entries with a number, a range or none
	// (protocol only); NamedPorts those with a name.
	Ports, NamedPorts int
	// SelectorPeers counts the podSelector/namespaceSelector peers, and
	// SelectedAddrs the addresses of the pods they select, summed over
	// the peers (a pod two peers select counts twice: an upper bound).
	SelectorPeers, SelectedAddrs int
	// Selection names the rule's selector peers as the compiler shares
	// their set: rules of one Selection hold one set between them, in
	// this policy and in every other. "" for a rule without one.
	Selection string
	// IPBlocks counts the ipBlock peers, Excepts their except entries.
	IPBlocks, Excepts int
	// AllAddrs are the addresses of every pod in the cluster: an egress
	// rule with named ports and no peers resolves them on every pod.
	AllAddrs int
}

// Per isolated local pod and direction, the pod's chain holds at most
// podChainRules rules besides its jumps (invalid state, the pod to itself
// per address, the final drop and what logging adds) and the dispatch
// map podElements elements (its addresses).
const (
	podChainRules = 6
	podElements   = 2
)

// Estimate is an upper bound of what a NetworkPolicy of shape s adds to a
// node's table, in the layout of packages policy and podchain (see doc.go
// for the layout it mirrors). It is the one place that knows that layout:
// when the compiler's layout changes, this function and its table test
// change with it, and nothing else. The set of a Selection is counted once
// however many of the policy's rules share it.
func Estimate(s Shape) Cost {
	var c Cost
	if s.LocalPods == 0 {
		// The compiler builds a policy's rules and sets only when it
		// selects local pods.
		return c
	}
	counted := map[string]bool{}
	for _, r := range s.Rules {
		peers := r.SelectorPeers + r.IPBlocks
		// Peer matches: every peer, or one per kind and family (pods4,
		// pods6, cidr4, cidr6).
		kinds := 0
		if peers == 0 {
			kinds = 1
		}
		if r.SelectorPeers > 0 {
			kinds += 2
		}
		if r.IPBlocks > 0 {
			kinds += 2
		}
		// Port matches: one per protocol (tcp, udp, sctp), numbers and
		// ranges in one set each; none restrict nothing.
		protos := min(r.Ports, 3)
		if r.Ports+r.NamedPorts == 0 {
			protos = 1
		}
		// The policy's own chain, once: peer kinds × protocols, and one
		// rule per family for egress named ports (tuples of address,
		// protocol and port).
		c.Rules += kinds * protos
		if r.NamedPorts > 0 {
			if r.Egress {
				c.Rules += 2
			} else {
				// Ingress names resolve on each selected pod, in its
				// own chain: one port per name and protocol.
				c.Rules += s.LocalPods * kinds * r.NamedPorts
			}
		}
		// Sets, as the kernel stores them: the port sets and the
		// ipBlock sets are interval sets, where an interval is two
		// elements (its start, and an end element after it) and each
		// set has one more (the end sentinel at zero that nft writes
		// when no interval starts there). So a port entry is at most
		// one interval of two elements (a lone port too: adjacent
		// ports are not merged), each ipBlock cut by its excepts at
		// most 1+excepts intervals; a port set per protocol and an
		// ipBlock set per family. The selected addresses are a plain
		// set, shared by the rules of one Selection.
		c.Elements += 2*r.Ports + r.NamedPorts + 2*(r.IPBlocks+r.Excepts)
		if r.Ports > 0 {
			c.Elements += protos
		}
		if r.IPBlocks > 0 {
			c.Elements += 2
		}
		if r.Selection == "" || !counted[r.Selection] {
			counted[r.Selection] = true
			c.Elements += r.SelectedAddrs
		}
		if r.Egress && r.NamedPorts > 0 {
			addrs := r.SelectedAddrs
			if peers == 0 {
				addrs = r.AllAddrs
			}
			c.Elements += r.NamedPorts * addrs
		}
	}
	// Each selected pod's chain per direction jumps to the policy's
	// chain; the rest of that chain and its dispatch element are shared
	// with other policies that select the pod, counted for each, which
	// keeps the bound.
	c.Rules += s.LocalPods * s.Directions * (1 + podChainRules)
	c.Elements += s.LocalPods * s.Directions * podElements
	return c
}
