package policy

import (
	"slices"

	networkingv1 "k8s.io/api/networking/v1"

	"github.com/nftguard/nftguard/engine"
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
	// policies is shared by successive memos and updated in place: a
	// new table per compile would cost every policy of the cluster per
	// event. It is a cache: the policy list below carries each compile's
	// answers, and an entry dropped too early only costs a validation.
	policies map[*networkingv1.NetworkPolicy]*validPolicy
	// The policy list of the compile and what it gave (see policyList).
	// A compile given the very same list (the agent passes it again
	// when no policy changed) takes it all as it is.
	list   *policyList
	rules  map[ruleKey]*ruleMemo
	chains map[chainKey]*chainMemo
}

func newMemo(prev *memo) *memo {
	next := &memo{
		node:     prev.node,
		policies: prev.policies,
		rules:    map[ruleKey]*ruleMemo{},
		chains:   map[chainKey]*chainMemo{},
	}
	if next.policies == nil {
		next.policies = map[*networkingv1.NetworkPolicy]*validPolicy{}
	}
	return next
}

// sameList tells whether a and b are the very same list: same length and,
// unless empty, same backing array.
func sameList[T any](a, b []T) bool {
	return len(a) == len(b) && (len(a) == 0 || &a[0] == &b[0])
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

// policy validates a policy object once.
func (c *compiler) policy(np *networkingv1.NetworkPolicy) *validPolicy {
	vp := c.next.policies[np]
	if vp == nil {
		vp = &validPolicy{}
		if probs := validate(np, &c.val); len(probs) > 0 {
			vp.problems = probs
		} else {
			sel := c.sel.Selectors().Parse(&np.Spec.PodSelector).Selector
			vp.cp = &compiledPolicy{np: np, key: np.Namespace + "/" + np.Name, selector: sel}
			vp.cp.ingress, vp.cp.egress = policyTypes(np)
		}
	}
	c.next.policies[np] = vp
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
