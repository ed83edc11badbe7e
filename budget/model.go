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
	// IPBlocks counts the ipBlock peers, Excepts their except entries.
	IPBlocks, Excepts int
	// AllAddrs are the addresses of every pod in the cluster: an egress
	// rule with named ports and no peers resolves them on every pod.
	AllAddrs int
}

// Estimate is an upper bound of what a NetworkPolicy of shape s adds to a
// node's table, in the layout of package policy (see doc.go for the
// layout it mirrors). It is the one place that knows that layout: when the
// compiler's layout changes, this function and its table test change with
// it, and nothing else.
func Estimate(s Shape) Cost {
	var c Cost
	if s.LocalPods == 0 {
		// The compiler builds a policy's rules and sets only for the
		// chains of the local pods it selects.
		return c
	}
	for _, r := range s.Rules {
		peers := r.SelectorPeers + r.IPBlocks
		// Peer matches: none (every peer), or up to one per kind and
		// family (pods4, pods6, cidr4, cidr6).
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
		// Port matches: every numbered entry, and on ingress every named
		// one (resolved on the chain's pod); egress named ports are
		// address . protocol . port sets, one rule per family.
		ports := r.Ports
		named := 0
		if r.Egress {
			if r.NamedPorts > 0 {
				named = 2
			}
		} else {
			ports += r.NamedPorts
		}
		if ports == 0 && (named == 0 || r.Ports+r.NamedPorts == 0) {
			ports = 1
		}
		c.Rules += s.LocalPods * (kinds*ports + named)
		// Each rule holds its own sets: the selected addresses, and
		// each ipBlock cut by its excepts into at most 1+excepts
		// intervals of two elements (start and end).
		c.Elements += r.SelectedAddrs + 2*(r.IPBlocks+r.Excepts)
		if r.Egress && r.NamedPorts > 0 {
			addrs := r.SelectedAddrs
			if peers == 0 {
				addrs = r.AllAddrs
			}
			c.Elements += r.NamedPorts * addrs
		}
	}
	// Each selected pod's chain per direction: ct state invalid, the pod
	// to itself per address (two at most), the final drop; and its
	// dispatch map element per address. Shared with other policies that
	// select the pod; counted for each, which keeps the bound.
	c.Rules += s.LocalPods * s.Directions * 4
	c.Elements += s.LocalPods * s.Directions * 2
	return c
}
