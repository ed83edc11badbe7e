package policy

import (
	"slices"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"

	"github.com/nftguard/nftguard/engine"
	"github.com/nftguard/nftguard/problem"
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
// informer caches do. The zero value is ready to use; a Compiler is not safe
// for concurrent use.
type Compiler struct {
	prev *memo
}

// memo is what one compile derived, keyed by what it was derived from. A
// compile reads the previous memo and writes a new one holding only what it
// used, so nothing outlives the objects it came from.
type memo struct {
	node     string
	pods     map[*corev1.Pod]*podEntry // shared by successive memos, see indexPods
	entries  []*podEntry               // the entries the compile saw, each once
	buckets  map[string]*nsBucket      // shared too: namespace of each pod entry
	gen      uint64                    // the compile that wrote this memo
	policies map[*networkingv1.NetworkPolicy]*policyMemo
	// The valid policies by namespace, each list in key order, and
	// whether two policies share a key.
	policiesByNS  map[string][]*compiledPolicy
	dupPolicyKeys bool
	namespaces    map[string]*corev1.Namespace // the object whose labels count, by name
	nsNames       []string                     // namespaces with pods, sorted
	dupOrder      map[string][]*pod            // pods of namespaces where two share a name, in input order
	peers         map[peerKey]*peerMemo
	rules         map[ruleKey]*ruleMemo
	chains        map[chainKey]*chainMemo
}

func newMemo(node string, policies int) *memo {
	return &memo{
		node:       node,
		policies:   make(map[*networkingv1.NetworkPolicy]*policyMemo, policies),
		namespaces: map[string]*corev1.Namespace{},
		dupOrder:   map[string][]*pod{},
		peers:      map[peerKey]*peerMemo{},
		rules:      map[ruleKey]*ruleMemo{},
		chains:     map[chainKey]*chainMemo{},
	}
}

// podEntry is a pod object reduced: valid unless the pod is neither
// isolated nor selected; problem is set for an invalid one.
//
// What every compile reads comes first, with the start of pod (local), so
// that a compile touches one cache line per unchanged pod.
type podEntry struct {
	gen     uint64    // the last compile that saw the object
	bucket  *nsBucket // its namespace's, so grouping costs no lookup
	problem *problem.Problem
	valid   bool
	src     *corev1.Pod // the object, the entry's key
	pod
}

// nsBucket gathers a namespace's pods during a compile.
type nsBucket struct {
	name string
	pods []*pod
	gen  uint64 // the compile pods belongs to
}

// policyMemo is a policy object validated: cp is nil for an invalid one.
type policyMemo struct {
	cp       *compiledPolicy
	problems []problem.Problem
}

// peerMemo is a peer's selectors and what they selected.
type peerMemo struct {
	pods       *parsedSelector // nil: every pod
	ns         *parsedSelector // nil: the policy's own namespace
	policyNS   string
	namespaces []string
	sel        peerSelection
	ends       []int  // where each namespace's pods end in sel.pods
	dups       []bool // whether each namespace's part may hold pods sharing a key
}

// ruleMemo is a compiled rule with what it was compiled from.
type ruleMemo struct {
	cr      *compiledRule
	peers   []peerKey
	allPods bool // it read every pod (egress named ports without peers)
	sets    []*engine.Set
}

// chainKey names a local pod's ingress or egress chain.
type chainKey struct {
	p      *pod
	egress bool
}

// chainMemo is a pod chain with the policies and rules it was built from.
type chainMemo struct {
	pols  []*compiledPolicy
	rules []*compiledRule
	chain engine.Chain
}

// compareNamespaces records the namespaces whose labels count and tells
// whether namespace selections may differ from the previous compile's.
func (c *compiler) compareNamespaces() {
	for _, ns := range c.in.Namespaces {
		c.next.namespaces[ns.Name] = ns // the last of a name wins, as in nsLabels
	}
	c.next.nsNames = c.nsNames
	c.nsChanged = len(c.next.namespaces) != len(c.prev.namespaces) || !slices.Equal(c.nsNames, c.prev.nsNames)
	if !c.nsChanged {
		for name, ns := range c.next.namespaces {
			if c.prev.namespaces[name] != ns {
				c.nsChanged = true
				break
			}
		}
	}
}

// policy validates a policy object once.
func (c *compiler) policy(np *networkingv1.NetworkPolicy) *policyMemo {
	pm, ok := c.prev.policies[np]
	if !ok {
		pm = c.next.policies[np]
	}
	if pm == nil {
		pm = &policyMemo{}
		if probs := validate(np, c.sc); len(probs) > 0 {
			pm.problems = probs
		} else {
			sel, _ := c.sc.parse(&np.Spec.PodSelector)
			pm.cp = &compiledPolicy{np: np, key: np.Namespace + "/" + np.Name, selector: sel}
			pm.cp.ingress, pm.cp.egress = policyTypes(np)
		}
	}
	c.next.policies[np] = pm
	return pm
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
	var used []peerKey
	c.declared, c.collided, c.used, c.allPods = c.declared[:0], false, &used, false
	cr := c.compileRule(d, cp, idx, peers, ports)
	if !c.collided {
		// A rule whose set name another declared first is compiled
		// every time: the first declarer may not be there next time.
		c.next.rules[k] = &ruleMemo{cr: cr, peers: used, allPods: c.allPods, sets: slices.Clone(c.declared)}
	}
	c.used = nil
	c.rules[k] = cr
	return cr
}

// stillValid tells whether a rule compiled before is what compiling it now
// would give.
func (c *compiler) stillValid(rm *ruleMemo) bool {
	if rm.allPods && len(c.dirtyNS) > 0 {
		return false
	}
	for _, s := range rm.sets {
		if _, taken := c.sets[s.Name]; taken {
			return false
		}
	}
	for _, k := range rm.peers {
		if _, same := c.peer(k); !same {
			return false
		}
	}
	return true
}

// podChain returns the ingress or egress chain of a local pod, the
// previous compile's when the pod, the policies selecting it and their
// compiled rules are the same.
func (c *compiler) podChain(p *pod, pols []*compiledPolicy, d *direction) engine.Chain {
	var rules []*compiledRule
	for _, cp := range pols {
		if d.egress {
			for i, r := range cp.np.Spec.Egress {
				rules = append(rules, c.rule(d, cp, i, r.To, r.Ports))
			}
		} else {
			for i, r := range cp.np.Spec.Ingress {
				rules = append(rules, c.rule(d, cp, i, r.From, r.Ports))
			}
		}
	}
	k := chainKey{p: p, egress: d.egress}
	if cm, ok := c.prev.chains[k]; ok && slices.Equal(cm.pols, pols) && slices.Equal(cm.rules, rules) {
		c.next.chains[k] = cm
		return cm.chain
	}
	var ch engine.Chain
	if d.egress {
		ch = c.egressChain(p, pols)
	} else {
		ch = c.ingressChain(p, pols)
	}
	c.next.chains[k] = &chainMemo{pols: slices.Clone(pols), rules: rules, chain: ch}
	return ch
}
