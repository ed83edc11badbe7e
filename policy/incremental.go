package policy

import (
	networkingv1 "k8s.io/api/networking/v1"

	"github.com/nftguard/nftguard/npset"
	"github.com/nftguard/nftguard/podchain"
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
	// chains are the rules, pod chains and peer addresses (package
	// podchain's memo).
	chains *podchain.Memo
}

// validPolicy is a policy object validated: cp is its compiled form, the
// fail-closed one when problems are not empty.
type validPolicy struct {
	cp       *compiledPolicy
	problems []problem.Problem
}

// validate reads a policy object: its problems, and its compiled form. An
// invalid policy is compiled as FailClosedInvalid: its pods stay isolated
// and nothing it allows is installed.
func (c *compiler) validate(np *networkingv1.NetworkPolicy) *validPolicy {
	vp := &validPolicy{}
	src := np
	if probs := validate(np, &c.val); len(probs) > 0 {
		vp.problems = probs
		np = FailClosedInvalid(np, probs)
	}
	sel := c.sel.Selectors().Parse(&np.Spec.PodSelector).Selector
	vp.cp = &compiledPolicy{np: np, key: src.Namespace + "/" + src.Name, selector: sel}
	vp.cp.ingress, vp.cp.egress = policyTypes(np)
	return vp
}
