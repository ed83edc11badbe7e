package podchain

import (
	"github.com/nftguard/nftguard/engine"
	"github.com/nftguard/nftguard/selection"
)

// Memo is what one compile of a compiler's pod chains derived, keyed by
// what it was derived from: compiled rules, pod chains, and the addresses
// of peer selections. A compile (Cycle) reads the previous memo and writes
// a new one holding only what it used, so nothing outlives the objects it
// came from. The zero value is an empty memo.
type Memo struct {
	rules  map[RuleKey]*ruleMemo
	chains map[chainKey]*chainMemo
	addrs  map[string]*peerAddrs // by the selections' keys, see peerAddrs
	// policyChains by name, see PolicyChain.
	policyChains map[string]*policyChainMemo
}

// RuleKey names one rule of one policy: Policy is the compiler's own
// (comparable) handle of a validated policy object, Kind the kind of
// chain the rule is compiled for (by its address, see Kind), Idx the
// rule's index in that direction.
type RuleKey struct {
	Policy any
	Kind   *Kind
	Idx    int
}

// ruleMemo is a compiled rule with what it was compiled from.
type ruleMemo struct {
	r     *Rule
	deps  Deps
	peers []selection.PeerKey
	sets  []*engine.Set
	// shared are the selections whose shared sets it looks up
	// (PeerSets).
	shared []*peerAddrs
	// ports are its port matches and sets (PortMatches).
	ports *portsMemo
}

// Deps is what a rule read besides its policy and its peer selections.
type Deps struct {
	AllPods bool // every pod (egress named ports without peers)
	Nodes   bool // the Node objects (nodes peers)
}

// scratch is what compiling one rule notes for its memo: the sets it
// declared, whether it named a set another rule declared first, and the
// selections it used.
type scratch struct {
	declared []*engine.Set
	collided bool
	used     []selection.PeerKey
	shared   []*peerAddrs
	// prevPorts are the port matches the rule compiled to before (its
	// policy object, and so its ports, are the same), ports what
	// PortMatches gave now.
	prevPorts, ports *portsMemo
}

// Cycle is one compile of a compiler's pod chains: the previous memo
// read, the next written, the sets declared so far and each rule compiled
// once.
type Cycle struct {
	sel        *selection.Index
	nodesSame  bool
	prev, next *Memo
	sets       map[string]*engine.Set
	rules      map[RuleKey]*Rule
	addrs      map[string]*peerAddrs
	selNames   map[string]*peerAddrs // shared sets' names (without family) in use
	// policyChains are the policies' chains declared in this compile.
	policyChains map[string]*policyChainMemo
	scratch      scratch
}

// NewCycle starts a compile over the pods and selections of sel, reading
// prev (nil: nothing before). nodesSame tells whether the Node objects
// are the previous compile's (rules that read them are kept only then).
func NewCycle(sel *selection.Index, prev *Memo, nodesSame bool) *Cycle {
	if prev == nil {
		prev = &Memo{}
	}
	return &Cycle{
		sel:       sel,
		nodesSame: nodesSame,
		prev:      prev,
		next: &Memo{
			rules:        map[RuleKey]*ruleMemo{},
			chains:       map[chainKey]*chainMemo{},
			addrs:        map[string]*peerAddrs{},
			policyChains: map[string]*policyChainMemo{},
		},
		policyChains: map[string]*policyChainMemo{},
		sets:         map[string]*engine.Set{},
		rules:        map[RuleKey]*Rule{},
		addrs:        map[string]*peerAddrs{},
		selNames:     map[string]*peerAddrs{},
	}
}

// Next is the memo this compile wrote, for the next compile.
func (c *Cycle) Next() *Memo { return c.next }

// Rule returns the compiled form of rule k: this compile's if it was
// compiled already, the previous compile's when everything it read is
// unchanged, else compile's. compile declares the rule's sets through
// AddrSet, SharedSet and NamedSets and records the selections it reads
// through PeerSets; it returns the rule and what else it read. A
// rule compiled again to what it was before is the previous one, so the
// chains that hold it are kept too.
func (c *Cycle) Rule(k RuleKey, compile func() (*Rule, Deps)) *Rule {
	if r := c.rules[k]; r != nil {
		return r
	}
	if rm, ok := c.prev.rules[k]; ok && c.stillValid(rm) {
		for _, s := range rm.sets {
			c.sets[s.Name] = s
		}
		for _, pa := range rm.shared {
			c.useShared(sharedBase(pa), pa)
		}
		c.rules[k], c.next.rules[k] = rm.r, rm
		return rm.r
	}
	c.scratch = scratch{declared: c.scratch.declared[:0]}
	if rm, ok := c.prev.rules[k]; ok {
		c.scratch.prevPorts = rm.ports
	}
	r, deps := compile()
	sets := append([]*engine.Set(nil), c.scratch.declared...)
	if !c.scratch.collided {
		if rm, ok := c.prev.rules[k]; ok && same(rm.r, r) && sameSets(rm.sets, sets) {
			r, sets = rm.r, rm.sets
			for _, s := range sets {
				c.sets[s.Name] = s
			}
		}
		// A rule whose set name another declared first is compiled
		// every time: the first declarer may not be there next time.
		c.next.rules[k] = &ruleMemo{r: r, deps: deps, peers: c.scratch.used, sets: sets, shared: c.scratch.shared, ports: c.scratch.ports}
	}
	c.rules[k] = r
	return r
}

// stillValid tells whether a rule compiled before is what compiling it now
// would give.
func (c *Cycle) stillValid(rm *ruleMemo) bool {
	if rm.deps.AllPods && c.sel.PodsChanged() {
		return false
	}
	if rm.deps.Nodes && !c.nodesSame {
		return false
	}
	for _, s := range rm.sets {
		if _, taken := c.sets[s.Name]; taken {
			return false
		}
	}
	for _, pa := range rm.shared {
		if o, taken := c.selNames[sharedBase(pa)]; taken && o != pa {
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
