package clusterpolicy

import (
	"slices"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/network-policy-api/apis/v1beta1"

	"github.com/nftguard/nftguard/engine"
	"github.com/nftguard/nftguard/selection"
)

// Compiler compiles successive states of one node's view of the cluster,
// like policy.Compiler: each call returns exactly what Compile returns for
// the same Input, but re-derives only what depends on objects that changed
// since the previous call (policy validation, subject selections, rules
// whose peer selections and nodes are unchanged, and pod chains whose pod
// and rules are unchanged are reused).
//
// Objects are compared by identity: a changed object must be passed as a
// new object, as informer caches do. The zero value is ready to use; a
// Compiler is not safe for concurrent use. Its selection memo is its own:
// policy.Compiler keeps its Index inside, and sharing one would change
// policy's API for the cost of indexing the pods twice (pointer lookups,
// nothing parsed again), and only while some ClusterNetworkPolicy exists.
type Compiler struct {
	sel  selection.Memo
	prev *memo
}

// memo is what one compile derived, keyed by what it was derived from; a
// compile writes a new one holding only what it used.
type memo struct {
	node     string
	nodes    []*corev1.Node
	policies map[*v1beta1.ClusterNetworkPolicy]*validPolicy
	subjects map[*compiledPolicy]*subjectMemo
	rules    map[ruleKey]*ruleMemo
	chains   map[chainKey]*chainMemo
	addrs    map[string]*peerAddrs // by the selections' keys, see peerElems
}

func newMemo(node string) *memo {
	return &memo{
		node:     node,
		policies: map[*v1beta1.ClusterNetworkPolicy]*validPolicy{},
		subjects: map[*compiledPolicy]*subjectMemo{},
		rules:    map[ruleKey]*ruleMemo{},
		chains:   map[chainKey]*chainMemo{},
		addrs:    map[string]*peerAddrs{},
	}
}

// subjectMemo is the local pods a subject selected.
type subjectMemo struct {
	key   selection.PeerKey
	local []*selection.Pod
}

// ruleKey names one rule of a policy.
type ruleKey struct {
	cp     *compiledPolicy
	egress bool
	idx    int
}

// ruleMemo is a compiled rule with what it was compiled from.
type ruleMemo struct {
	cr    *compiledRule
	peers []selection.PeerKey
	nodes bool // it read Input.Nodes
	sets  []*engine.Set
}

// chainKey names a local pod's chain of one slot.
type chainKey struct {
	p    *selection.Pod
	slot int
}

// chainMemo is a pod chain with the rules it was built from.
type chainMemo struct {
	rules []*compiledRule
	end   chainEnd
	chain engine.Chain
}

// policy validates a policy object once.
func (c *compiler) policy(cnp *v1beta1.ClusterNetworkPolicy) *validPolicy {
	vp, ok := c.prev.policies[cnp]
	if !ok {
		vp = c.next.policies[cnp]
	}
	if vp == nil {
		vp = validate(cnp, c.sel.Selectors())
	}
	c.next.policies[cnp] = vp
	return vp
}

// rule returns the compiled form of one rule: the previous compile's when
// everything it read is unchanged.
func (c *compiler) rule(cp *compiledPolicy, egress bool, idx int) *compiledRule {
	k := ruleKey{cp: cp, egress: egress, idx: idx}
	if cr := c.rules[k]; cr != nil {
		return cr
	}
	if rm, ok := c.prev.rules[k]; ok && c.stillValid(rm) {
		for _, s := range rm.sets {
			c.sets[s.Name] = s
		}
		c.rules[k], c.next.rules[k] = rm.cr, rm
		return rm.cr
	}
	c.used, c.declared = nil, nil
	cr := c.compileRule(cp, egress, idx)
	sets := c.declared
	if rm, ok := c.prev.rules[k]; ok && sameRule(rm.cr, cr) && sameSets(rm.sets, sets) {
		// Compiled again to the same rule: keep the previous one, so
		// that the chains holding it are kept too.
		cr, sets = rm.cr, rm.sets
		for _, s := range sets {
			c.sets[s.Name] = s
		}
	}
	c.next.rules[k] = &ruleMemo{cr: cr, peers: c.used, nodes: cp.hasNodes, sets: sets}
	c.rules[k] = cr
	return cr
}

// sameRule tells whether two compilations of one rule (of one policy
// object) are the same.
func sameRule(a, b *compiledRule) bool {
	return a.comment == b.comment && a.action == b.action && a.fail == b.fail && a.perDst == b.perDst &&
		slices.Equal(a.peerMatches, b.peerMatches) && slices.Equal(a.namedMatches, b.namedMatches) &&
		slices.Equal(a.portMatches, b.portMatches)
}

// sameSets tells whether two lists of sets hold the same sets.
func sameSets(a, b []*engine.Set) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		x, y := a[i], b[i]
		if x.Name != y.Name || x.Type != y.Type || x.Interval != y.Interval || x.Comment != y.Comment || !slices.Equal(x.Elements, y.Elements) {
			return false
		}
	}
	return true
}

func (c *compiler) stillValid(rm *ruleMemo) bool {
	if rm.nodes && !c.nodesSet {
		return false
	}
	for _, k := range rm.peers {
		if !c.sel.Unchanged(k) {
			return false
		}
	}
	return true
}

// podChain returns a local pod's chain of one slot, the previous
// compile's when the pod, the rules and how the chain drops (logging, the
// namespace's opt-in) are the same.
func (c *compiler) podChain(p *selection.Pod, si int, pols []*compiledPolicy) engine.Chain {
	s := &slots[si]
	var rules []*compiledRule
	for _, cp := range pols {
		n := len(cp.cnp.Spec.Ingress)
		if s.egress {
			n = len(cp.cnp.Spec.Egress)
		}
		for i := 0; i < n; i++ {
			rules = append(rules, c.rule(cp, s.egress, i))
		}
	}
	k := chainKey{p: p, slot: si}
	end := c.endOf(p.Obj)
	if cm, ok := c.prev.chains[k]; ok && cm.end == end && slices.Equal(cm.rules, rules) {
		c.next.chains[k] = cm
		return cm.chain
	}
	ch := buildChain(p, s, rules, end)
	c.next.chains[k] = &chainMemo{rules: rules, end: end, chain: ch}
	return ch
}
