package clusterpolicy

import (
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/network-policy-api/apis/v1beta1"

	"github.com/nftguard/nftguard/engine"
	"github.com/nftguard/nftguard/podchain"
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
	// chains are the rules, pod chains and peer addresses (package
	// podchain's memo).
	chains *podchain.Memo
}

func newMemo(node string) *memo {
	return &memo{
		node:     node,
		policies: map[*v1beta1.ClusterNetworkPolicy]*validPolicy{},
		subjects: map[*compiledPolicy]*subjectMemo{},
	}
}

// subjectMemo is the local pods a subject selected.
type subjectMemo struct {
	key   selection.PeerKey
	local []*selection.Member
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

// rule returns the compiled form of one rule (see podchain.Cycle.Rule for
// when it is the previous compile's).
func (c *compiler) rule(cp *compiledPolicy, s *slot, idx int) *podchain.Rule {
	return c.cyc.Rule(podchain.RuleKey{Policy: cp, Kind: &s.Kind, Idx: idx}, func() (*podchain.Rule, podchain.Deps) {
		return c.compileRule(cp, s, idx), podchain.Deps{Nodes: cp.hasNodes}
	})
}

// podChain returns a local pod's chain of one slot from the rules of the
// policies selecting it, in evaluation order (the previous compile's when
// the pod, the rules and how the chain drops are the same).
func (c *compiler) podChain(p *selection.Member, si int, pols []*compiledPolicy) engine.Chain {
	s := &slots[si]
	var rules []*podchain.Rule
	for _, cp := range pols {
		n := len(cp.cnp.Spec.Ingress)
		if s.Egress {
			n = len(cp.cnp.Spec.Egress)
		}
		for i := 0; i < n; i++ {
			rules = append(rules, c.rule(cp, s, i))
		}
	}
	return c.cyc.Chain(p, &s.Kind, rules, podchain.EndOf(c.logged, p.Obj.Namespace))
}
