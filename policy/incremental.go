package policy

import (
	"slices"

	networkingv1 "k8s.io/api/networking/v1"

	"github.com/nftguard/nftguard/engine"
	"github.com/nftguard/nftguard/npset"
	"github.com/nftguard/nftguard/problem"
	"github.com/nftguard/nftguard/selection"
)

// Compiler compiles successive states of one node's view of the cluster.
// Each call returns exactly what Compile returns for the same Input, but a
// call re-derives only what depends on objects that changed since the
// previous call: pods, policies, peer selections, rules and per-pod chains
// of unchanged objects are taken from it. An agent handling one event in a
// 10k-pod cluster so pays for the event, not for the cluster.
//
// Objects are compared by identity: the caller must not modify an object
// after passing it in, and must pass a changed object as a new object, as
// informer caches do. Lists too: the very same policy list as the previous
// call's (same backing array and length) is taken as unchanged, so a list
// that changed must be a new list. The zero value is ready to use; a Compiler is not safe
// for concurrent use.
type Compiler struct {
	sel  selection.Memo // pods, namespaces and selections
	prev *memo          // policies, rules and chains
}

// memo is what one compile derived from the policies, keyed by what it was
// derived from. A compile reads the previous memo and writes a new one
// holding only what it used, so nothing outlives the objects it came from.
type memo struct {
	node string
	// npByNS is what each namespace's group of policies gave, shared by
	// successive memos and updated in place: a new table per compile
	// would cost every namespace per event.
	npByNS map[string]*nsPolicies
	// The groups of the compile's policy Set, what was read of each, and
	// their problems in order.
	npGroups   []*npset.Group
	npRead     []*nsPolicies
	npProblems []problem.Problem
	npGen      uint64 // the compile that wrote this memo
	rules      map[ruleKey]*ruleMemo
	chains     map[chainKey]*chainMemo
}

func newMemo(prev *memo) *memo {
	next := &memo{
		node:   prev.node,
		rules:  map[ruleKey]*ruleMemo{},
		chains: map[chainKey]*chainMemo{},
	}
	return next
}

// validPolicy is a policy object validated: cp is nil for an invalid one.
type validPolicy struct {
	cp       *compiledPolicy
	problems []problem.Problem
}

// ruleMemo is a compiled rule with what it was compiled from.
type ruleMemo struct {
	cr      *compiledRule
	peers   []selection.PeerKey
	allPods bool // it read every pod (egress named ports without peers)
	sets    []*engine.Set
}

// chainKey names a local pod's ingress or egress chain.
type chainKey struct {
	p      *selection.Pod
	egress bool
}

// chainMemo is a pod chain with the policies and rules it was built from.
type chainMemo struct {
	pols  []*compiledPolicy
	rules []*compiledRule
	end   chainEnd // how it ends: plain drop, counted drop, or the shared denied chain
	chain engine.Chain
}

// validate reads a policy object: its problems, or its compiled form.
func (c *compiler) validate(np *networkingv1.NetworkPolicy) *validPolicy {
	vp := &validPolicy{}
	if probs := validate(np, &c.val); len(probs) > 0 {
		vp.problems = probs
	} else {
		sel := c.sel.Selectors().Parse(&np.Spec.PodSelector).Selector
		vp.cp = &compiledPolicy{np: np, key: np.Namespace + "/" + np.Name, selector: sel}
		vp.cp.ingress, vp.cp.egress = policyTypes(np)
	}
	return vp
}

// rule returns the compiled form of one rule of a policy: the previous
// compile's when every peer selection it used is unchanged, else compiled
// again.
func (c *compiler) rule(d *direction, cp *compiledPolicy, idx int, peers []networkingv1.NetworkPolicyPeer, ports []networkingv1.NetworkPolicyPort) *compiledRule {
	k := ruleKey{cp: cp, egress: d.egress, idx: idx}
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
	c.scratch = ruleScratch{declared: c.scratch.declared[:0]}
	cr := c.compileRule(d, cp, idx, peers, ports)
	if !c.scratch.collided {
		// A rule whose set name another declared first is compiled
		// every time: the first declarer may not be there next time.
		c.next.rules[k] = &ruleMemo{cr: cr, peers: c.scratch.used, allPods: c.scratch.allPods, sets: slices.Clone(c.scratch.declared)}
	}
	c.rules[k] = cr
	return cr
}

// stillValid tells whether a rule compiled before is what compiling it now
// would give.
func (c *compiler) stillValid(rm *ruleMemo) bool {
	if rm.allPods && c.sel.PodsChanged() {
		return false
	}
	for _, s := range rm.sets {
		if _, taken := c.sets[s.Name]; taken {
			return false
		}
	}
	for _, k := range rm.peers {
		if !c.sel.Unchanged(k) {
			return false
		}
	}
	return true
}
