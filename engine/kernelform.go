package engine

import (
	"fmt"

	"github.com/nftguard/nftguard/engine/nftwire"
)

// kernelTable is the content of our table in kernel form: what the diff compares.
// It is built both from the caller's Desired (by compile) and from the
// kernel's dumps (by read).
type kernelTable struct {
	chains     map[string]*kernelChain
	chainOrder []string
	sets       map[string]*kernelSet
	setOrder   []string
	// setVer is, in the engine's cache, the version of each compiled set
	// the kernel holds (absent: unknown).
	setVer map[string]uint64
	// delta, on a compiled table, is how it differs from the table the
	// same compiler compiled before (nil: unknown).
	delta *tableDelta
	// mirrors, on the engine's cache, is the compiled table the kernel's
	// copy was last made equal to (nil: unknown, as after a read).
	mirrors *kernelTable
}

// tableDelta lists what a compiled table changed from its base, the
// previous compile: the chains and sets that are not the base's very
// objects (new or changed, in declaration order), and the base's names
// that are gone. Everything else is the same object, unchanged.
type tableDelta struct {
	base                 *kernelTable
	chains, sets         []string
	goneChains, goneSets []string
}

// quickDelta returns want's delta when it is relative to the table cur
// mirrors: then only the objects it names can differ between the two.
func quickDelta(cur, want *kernelTable) *tableDelta {
	if cur == nil || cur.mirrors == nil || want.delta == nil || want.delta.base != cur.mirrors {
		return nil
	}
	return want.delta
}

func newKernelTable() *kernelTable {
	return &kernelTable{chains: map[string]*kernelChain{}, sets: map[string]*kernelSet{}}
}

func (t *kernelTable) addChain(c *kernelChain) {
	if _, ok := t.chains[c.name]; !ok {
		t.chainOrder = append(t.chainOrder, c.name)
	}
	t.chains[c.name] = c
}

func (t *kernelTable) addSet(s *kernelSet) {
	if _, ok := t.sets[s.name]; !ok {
		t.setOrder = append(t.setOrder, s.name)
	}
	t.sets[s.name] = s
}

type kernelChain struct {
	name     string
	base     bool
	typ      string
	hook     uint32
	prio     int32
	dev      string // the device of an ingress hook
	policy   uint32 // NF_DROP or NF_ACCEPT
	userdata []byte
	rules    []*kernelRule
	// from is, in the engine's cache, the compiled chain this one was
	// made equal to: the same compiled chain again needs no diff.
	from *kernelChain
	// noHandles is set, in the engine's cache, on a chain whose new rules
	// were added without the kernel echoing their handles (a large
	// batch); the first diff that needs them reads them (fillHandles).
	noHandles bool
}

// sameBase reports whether a chain can be kept as it is apart from its
// policy, which the kernel updates in place.
func (c *kernelChain) sameBase(o *kernelChain) bool {
	return c.base == o.base && c.typ == o.typ && c.hook == o.hook && c.prio == o.prio && c.dev == o.dev
}

type kernelRule struct {
	handle   uint64 // kernel only
	exprs    []nftwire.Expr
	anon     []*kernelSet // anonymous sets, indexed by the lookups' SetID
	userdata []byte
	// key is the canonical form two rules are compared by; "" means the
	// rule could not be decoded and never equals anything.
	key string
	// wireLen, when not 0, says key[:wireLen] is exactly the rule's
	// NFTA_RULE_EXPRESSIONS as the batch sends it (see ruleKey).
	wireLen int
	// refs are the named sets the rule uses (a recreated set forces the
	// rule to be re-added).
	refs []string
	// jumps are the chains the rule jumps or goes to (a recreated chain
	// forces the rule to be re-added).
	jumps []string
	// text and index name the rule in errors (desired side only).
	text  string
	index int
}

// kernelSet is a named (or, inside a rule, anonymous) set in kernel form.
type kernelSet struct {
	name      string
	flags     uint32
	keyType   uint32
	keyLen    uint32
	dataType  uint32
	dataLen   uint32
	fieldLens []uint32
	userdata  []byte
	// elems maps an element's identity (key, key end, interval end flag)
	// to the element.
	elems map[string]nftwire.Elem
	order []string // desired side: element identities in caller order
	// elemText names elements in errors (desired side only).
	elemText map[string]string
	// As compiled, before any change in place: the elements in order and
	// their texts (nil when unknown), so that a new set is written
	// without a lookup per element.
	compiled      []nftwire.Elem
	compiledTexts []string
	// ver identifies the content of a compiled set (0: not from the
	// compiler); delta says how it changed from the previous version.
	ver    uint64
	change *setChange
}

// list returns the elements in caller order (any order for kernel sets).
func (s *kernelSet) list() []nftwire.Elem {
	if s.compiled != nil {
		return s.compiled
	}
	out := make([]nftwire.Elem, 0, len(s.elems))
	if len(s.order) == len(s.elems) {
		for _, id := range s.order {
			out = append(out, s.elems[id])
		}
		return out
	}
	for _, e := range s.elems {
		out = append(out, e)
	}
	return out
}

// ids returns the element identities in caller order when it is known.
func (s *kernelSet) ids() []string {
	if len(s.order) == len(s.elems) {
		return s.order
	}
	out := make([]string, 0, len(s.elems))
	for id := range s.elems {
		out = append(out, id)
	}
	return out
}

// texts returns the caller's text of each element in list order.
func (s *kernelSet) texts() []string {
	if s.compiledTexts != nil {
		return s.compiledTexts
	}
	if s.elemText == nil || len(s.order) != len(s.elems) {
		return nil
	}
	out := make([]string, len(s.order))
	for i, id := range s.order {
		out[i] = s.elemText[id]
	}
	return out
}

// prepare computes the canonical key of every rule of a table built by
// hand (tests); compile computes them as it goes.
func (t *kernelTable) prepare(fam byte) error {
	for _, name := range t.chainOrder {
		for i, r := range t.chains[name].rules {
			if r.index == 0 {
				r.index = i + 1
			}
			if err := r.computeKey(fam, nil); err != nil {
				return fmt.Errorf("chain %q rule %d: %w", name, r.index, err)
			}
		}
	}
	return nil
}

// computeKey sets the rule's canonical key and set references; anonymous
// sets are referred to by index (the lookups' SetID), as nftsyntax emits
// them.
func (r *kernelRule) computeKey(fam byte, memo exprMemo) error {
	anon := r.anon
	resolve := func(_ string, id uint32) (string, bool) {
		if int(id) >= len(anon) {
			return "", false
		}
		return anon[id].contentKey(), true
	}
	k, wl, refs, err := ruleKey(fam, r.exprs, r.userdata, resolve, memo, true)
	if err != nil {
		return err
	}
	r.key, r.refs, r.jumps = k, refs, jumpTargets(r)
	r.wireLen = 0
	if len(r.anon) == 0 {
		r.wireLen = wl
	}
	return nil
}
