package engine

import (
	"fmt"
	"maps"
	"slices"

	"golang.org/x/sys/unix"

	"github.com/nftguard/nftguard/engine/nftsyntax"
	"github.com/nftguard/nftguard/engine/nftwire"
	"github.com/nftguard/nftguard/internal/parallel"
)

// compiler turns the caller's Desired into kernel form and remembers what
// it compiled, so that a Sync compiles only what the caller changed: an
// unchanged chain or set comes back as the very same object (which lets the
// diff skip it by identity), a changed chain reuses the compiled form of
// its unchanged rules, and a changed plain set is updated in place with a
// delta the diff can send without comparing every element. It is not safe
// for concurrent use (the Engine's mutex guards it).
type compiler struct {
	fam byte
	// The set declarations of the last compile, parsed, and what they
	// were parsed from.
	decls setDecls
	heads map[string]setHead
	// prevTable is the table the previous compile returned, the base of
	// the next one's delta.
	prevTable *kernelTable
	chains    map[string]*chainEntry
	sets      map[string]*setEntry
	ver       uint64     // last set version handed out
	memos     []exprMemo // one per compile worker
}

// setHead is what a set's parsed declaration is made from.
type setHead struct {
	typ, data string
	interval  bool
	timeout   bool
}

type chainEntry struct {
	src Chain // the caller's chain as compiled, with its own copy of Rules
	k   *kernelChain
}

type setEntry struct {
	src Set // the caller's set as compiled, with its own copy of Elements
	k   *kernelSet
}

// setChange is how a compiled set changed from version base to its current
// version.
type setChange struct {
	base     uint64
	add, del []nftwire.Elem
	addTexts []string
}

func newCompiler(fam byte) *compiler {
	return &compiler{fam: fam}
}

// compile turns d into kernel form with a compiler of its own (no reuse).
func compile(fam byte, d *Desired) (*kernelTable, error) {
	return newCompiler(fam).compile(d)
}

// compile returns the kernel form of d. Compiled objects are shared with
// earlier results and must not be changed by the caller; only sets change,
// in place, under a new version. On error nothing the compiler remembers
// has changed.
func (c *compiler) compile(d *Desired) (*kernelTable, error) {
	t := &kernelTable{
		chains:     make(map[string]*kernelChain, len(d.Chains)),
		sets:       make(map[string]*kernelSet, len(d.Sets)),
		chainOrder: make([]string, 0, len(d.Chains)),
		setOrder:   make([]string, 0, len(d.Sets)),
	}
	decls := make(setDecls, len(d.Sets))
	heads := make(map[string]setHead, len(d.Sets))
	for i := range d.Sets {
		s := &d.Sets[i]
		if err := checkSetHead(s); err != nil {
			return nil, err
		}
		if _, dup := decls[s.Name]; dup {
			return nil, fmt.Errorf("set %q declared twice", s.Name)
		}
		h := setHead{typ: s.Type, data: s.Map, interval: s.Interval, timeout: s.Timeout}
		decl, ok := c.decls[s.Name]
		if !ok || c.heads[s.Name] != h {
			var err error
			if decl, err = nftsyntax.ParseSetDecl(s.Name, s.Type, s.Map, s.Interval); err != nil {
				return nil, fmt.Errorf("set %q: %w", s.Name, err)
			}
			decl.Timeout = s.Timeout
		}
		decls[s.Name], heads[s.Name] = decl, h
	}
	// Rules are compiled against the declarations of the sets they name:
	// a chain compiled before is reused only if those are unchanged.
	declsSame := maps.Equal(heads, c.heads)
	oldChain := func(name string) *chainEntry {
		old := c.chains[name]
		if old == nil || declsSame {
			return old
		}
		for _, r := range old.k.rules {
			for _, ref := range r.refs {
				if h, ok := heads[ref]; !ok || h != c.heads[ref] {
					return nil
				}
			}
		}
		return old
	}

	// Sets and chains compile independently of each other (rules only
	// read the declarations), so they are spread over the CPUs; results
	// and errors are then taken in declaration order, as if compiled one
	// after the other.
	nSets := len(d.Sets)
	units := make([]compiled, nSets+len(d.Chains))
	seen := make(map[string]bool, len(d.Chains))
	for i, ch := range d.Chains {
		units[nSets+i].dup = seen[ch.Name]
		seen[ch.Name] = true
	}
	// What the caller did not change is found here, so that the workers
	// start only for what needs compiling (usually a few objects). Equal
	// strings that share memory (content the caller did not rebuild)
	// compare without being read.
	pending := make([]int, 0, 8)
	for i := range units {
		u := &units[i]
		if i < nSets {
			s := &d.Sets[i]
			if old := c.sets[s.Name]; old != nil && sameSetHead(&old.src, s) && slices.Equal(old.src.Elements, s.Elements) {
				u.set = old
				continue
			}
		} else if ch := &d.Chains[i-nSets]; !u.dup {
			u.old = oldChain(ch.Name)
			if u.old != nil && sameChainHead(&u.old.src, ch) && slices.Equal(u.old.src.Rules, ch.Rules) {
				u.chain = u.old
				continue
			}
		}
		pending = append(pending, i)
	}
	c.forEach(len(pending), func(j int, memo exprMemo) {
		i := pending[j]
		u := &units[i]
		if i < nSets {
			s := d.Sets[i]
			u.set, u.apply, u.err = c.compileSet(s, decls[s.Name], c.sets[s.Name])
			if u.err != nil {
				u.err = fmt.Errorf("set %q: %w", s.Name, u.err)
			}
			return
		}
		if ch := d.Chains[i-nSets]; !u.dup {
			u.chain, u.err = c.compileChain(ch, decls, u.old, memo)
		}
	})

	sets := make(map[string]*setEntry, len(d.Sets))
	var apply []func()
	for i, s := range d.Sets {
		u := units[i]
		if u.err != nil {
			return nil, u.err
		}
		if u.apply != nil {
			apply = append(apply, u.apply)
		}
		sets[s.Name] = u.set
		t.addSet(u.set.k)
	}
	chains := make(map[string]*chainEntry, len(d.Chains))
	for i, ch := range d.Chains {
		u := units[nSets+i]
		if u.dup {
			return nil, fmt.Errorf("chain %q declared twice", ch.Name)
		}
		if u.err != nil {
			return nil, u.err
		}
		chains[ch.Name] = u.chain
		t.addChain(u.chain.k)
	}
	// Versions are handed out in declaration order, once nothing failed.
	for _, s := range d.Sets {
		if k := sets[s.Name].k; k.ver == 0 {
			c.ver++
			k.ver = c.ver
		}
	}
	for _, fn := range apply {
		fn()
	}
	t.delta = c.delta(d, pending)
	if c.prevTable != nil {
		c.prevTable.delta = nil // only the newest table keeps its base alive
	}
	c.chains, c.sets, c.decls, c.heads, c.prevTable = chains, sets, decls, heads, t
	return t, nil
}

// delta lists what the compile of d changed from the previous compile,
// before c moves on to d: the units that needed compiling (pending, by
// index: sets, then chains) and the names that are gone.
func (c *compiler) delta(d *Desired, pending []int) *tableDelta {
	if c.prevTable == nil {
		return nil
	}
	dl := &tableDelta{base: c.prevTable}
	nSets := len(d.Sets)
	newSets, newChains := 0, 0
	for _, i := range pending {
		if i < nSets {
			name := d.Sets[i].Name
			dl.sets = append(dl.sets, name)
			if c.sets[name] == nil {
				newSets++
			}
			continue
		}
		name := d.Chains[i-nSets].Name
		dl.chains = append(dl.chains, name)
		if c.chains[name] == nil {
			newChains++
		}
	}
	// Names are unique, so without new names equal counts mean none
	// is gone.
	if len(d.Sets)-newSets != len(c.prevTable.setOrder) {
		dl.goneSets = gone(c.prevTable.setOrder, len(d.Sets), func(i int) string { return d.Sets[i].Name })
	}
	if len(d.Chains)-newChains != len(c.prevTable.chainOrder) {
		dl.goneChains = gone(c.prevTable.chainOrder, len(d.Chains), func(i int) string { return d.Chains[i].Name })
	}
	return dl
}

// gone returns the names of before that none of the n names given by name
// has, in before's order.
func gone(before []string, n int, name func(i int) string) []string {
	now := make(map[string]bool, n)
	for i := range n {
		now[name(i)] = true
	}
	var out []string
	for _, b := range before {
		if !now[b] {
			out = append(out, b)
		}
	}
	return out
}

// compiled is the result of compiling one set or chain of a Desired.
type compiled struct {
	set   *setEntry
	apply func()
	chain *chainEntry
	old   *chainEntry // the chain compiled before, if its rules may be reused
	dup   bool        // a chain of the same name came earlier
	err   error
}

// forEach calls fn for 0..n-1 on up to GOMAXPROCS goroutines, each with
// an expression memo of its own (the memos are kept for later syncs).
func (c *compiler) forEach(n int, fn func(i int, memo exprMemo)) {
	workers := parallel.Workers(n, 1, maxCompileWorkers)
	for len(c.memos) < max(workers, 1) {
		c.memos = append(c.memos, exprMemo{})
	}
	parallel.For(workers, n, 1, func(w, i int) { fn(i, c.memos[w]) })
}

// maxCompileWorkers bounds the goroutines one compile uses.
const maxCompileWorkers = 8

func sameSetHead(a, b *Set) bool {
	return a.Name == b.Name && a.Type == b.Type && a.Map == b.Map && a.Interval == b.Interval &&
		a.Timeout == b.Timeout && a.Comment == b.Comment
}

// compileSet returns the set's entry and, for a set updated in place, the
// function that applies the update once the whole Desired has compiled.
func (c *compiler) compileSet(s Set, decl nftsyntax.SetDecl, old *setEntry) (*setEntry, func(), error) {
	// compile hands over only sets that changed since old.
	if old != nil && sameSetHead(&old.src, &s) {
		// Interval sets are encoded as a whole (ranges merge), so only
		// plain sets and maps, whose elements are independent, get a
		// delta.
		if !s.Interval {
			return c.updateSetInPlace(s, decl, old)
		}
	}
	ud := nftsyntax.SetUserData(decl)
	if s.Comment != "" {
		ud = append(ud, nftwire.Comment(nftwire.UdataSetComment, s.Comment)...)
	}
	ks := setFromDecl(decl, false, ud)
	ks.flags = nftsyntax.SetFlags(decl)
	elems, err := nftsyntax.EncodeElements(decl, elementTexts(s.Elements))
	if err != nil {
		return nil, nil, err
	}
	ids := elemIDs(elems)
	ks.elems = make(map[string]nftwire.Elem, len(elems))
	// order is a subsequence of ids (duplicates dropped), so it is
	// written over ids: entry i is read before any write reaches it.
	ks.order = ids[:0]
	ks.elemText = make(map[string]string, len(elems))
	texts := len(elems) == len(s.Elements)
	for i, el := range elems {
		id := ids[i]
		ks.addID(id, el)
		if texts {
			ks.elemText[id] = s.Elements[i].Key
		}
	}
	if len(ks.elems) == len(elems) {
		ks.compiled = elems
		if texts {
			ks.compiledTexts = make([]string, len(elems))
			for i := range elems {
				ks.compiledTexts[i] = s.Elements[i].Key
			}
		}
	}
	// ks.ver stays 0 until compile hands out versions.
	return &setEntry{src: copySet(s), k: ks}, nil, nil
}

// updateSetInPlace encodes only the elements that differ between the set as last
// compiled and s: the common prefix and suffix are skipped by comparison,
// and what remains in the middle is matched by text.
func (c *compiler) updateSetInPlace(s Set, decl nftsyntax.SetDecl, old *setEntry) (*setEntry, func(), error) {
	gone, added := middle(old.src.Elements, s.Elements)
	count := make(map[Element]int, len(gone))
	for _, e := range gone {
		count[e]++
	}
	var add []Element
	for _, e := range added {
		if count[e] > 0 {
			count[e]--
			continue
		}
		add = append(add, e)
	}
	var del []Element
	for _, e := range gone {
		if count[e] > 0 {
			count[e]--
			del = append(del, e)
		}
	}
	delE, err := nftsyntax.EncodeElements(decl, elementTexts(del))
	if err != nil {
		return nil, nil, err
	}
	addE, err := nftsyntax.EncodeElements(decl, elementTexts(add))
	if err != nil {
		return nil, nil, err
	}
	k := old.k
	delIDs := make(map[string]bool, len(delE))
	for _, id := range elemIDs(delE) {
		delIDs[id] = true
	}
	addIDs := elemIDs(addE)
	for i, id := range addIDs {
		if _, ok := k.elems[id]; ok && !delIDs[id] {
			return nil, nil, fmt.Errorf("set %s: duplicate element %q", s.Name, add[i].Key)
		}
	}
	texts := make([]string, len(add))
	for i, e := range add {
		texts[i] = e.Key
	}
	apply := func() {
		k.compiled, k.compiledTexts = nil, nil
		for id := range delIDs {
			delete(k.elems, id)
			delete(k.elemText, id)
		}
		if len(delIDs) > 0 {
			// Keeping the caller's order would cost a pass over every
			// element; it only orders a later re-creation of the set,
			// which works in any order.
			k.order = nil
		}
		for i, e := range addE {
			id := addIDs[i]
			if k.order != nil {
				k.order = append(k.order, id)
			}
			k.elems[id] = e
			if k.elemText != nil {
				k.elemText[id] = texts[i]
			}
		}
		c.ver++
		k.change = &setChange{base: k.ver, add: addE, del: delE, addTexts: texts}
		k.ver = c.ver
	}
	return &setEntry{src: copySet(s), k: k}, apply, nil
}

func sameChainHead(a, b *Chain) bool {
	return a.Name == b.Name && a.Type == b.Type && a.Hook == b.Hook && a.Device == b.Device && a.Priority == b.Priority &&
		a.Policy == b.Policy && a.Comment == b.Comment
}

// compileChain compiles a chain, reusing the compiled form of the rules the
// caller did not change (found as a common prefix and suffix, then by text
// in the middle).
func (c *compiler) compileChain(ch Chain, decls setDecls, old *chainEntry, memo exprMemo) (*chainEntry, error) {
	// compile hands over only chains that changed since old.
	kc, err := chainHead(ch)
	if err != nil {
		return nil, err
	}
	kc.rules = make([]*kernelRule, len(ch.Rules))
	var reuse map[Rule][]*kernelRule
	p, q := 0, 0
	if old != nil {
		or, ok := old.src.Rules, old.k.rules
		for p < len(or) && p < len(ch.Rules) && or[p] == ch.Rules[p] {
			kc.rules[p] = ok[p]
			p++
		}
		for q < len(or)-p && q < len(ch.Rules)-p && or[len(or)-1-q] == ch.Rules[len(ch.Rules)-1-q] {
			i := len(ch.Rules) - 1 - q
			kc.rules[i] = withIndex(ok[len(or)-1-q], i+1)
			q++
		}
		reuse = map[Rule][]*kernelRule{}
		for i := p; i < len(or)-q; i++ {
			reuse[or[i]] = append(reuse[or[i]], ok[i])
		}
	}
	for i := p; i < len(ch.Rules)-q; i++ {
		r := ch.Rules[i]
		if rs := reuse[r]; len(rs) > 0 {
			kc.rules[i], reuse[r] = withIndex(rs[0], i+1), rs[1:]
			continue
		}
		kr, err := c.compileRule(ch.Name, i+1, r, decls, memo)
		if err != nil {
			return nil, err
		}
		kc.rules[i] = kr
	}
	src := ch
	src.Rules = append([]Rule(nil), ch.Rules...)
	return &chainEntry{src: src, k: kc}, nil
}

// chainHead compiles a chain's declaration (everything but its rules).
func chainHead(c Chain) (*kernelChain, error) {
	if err := checkChainHead(&c); err != nil {
		return nil, err
	}
	kc := &kernelChain{name: c.Name}
	if c.Hook != "" {
		h, ok := hooks[c.Hook]
		if !ok {
			return nil, fmt.Errorf("chain %q: unknown hook %q", c.Name, c.Hook)
		}
		kc.base, kc.hook, kc.prio, kc.typ, kc.dev = true, h, c.Priority, c.Type, c.Device
		if kc.typ == "" {
			kc.typ = "filter"
		}
		switch c.Policy {
		case "", "accept":
			kc.policy = nfAccept
		case "drop":
			kc.policy = nfDrop
		default:
			return nil, fmt.Errorf("chain %q: unknown policy %q", c.Name, c.Policy)
		}
	}
	if c.Comment != "" {
		kc.userdata = nftwire.Comment(nftwire.UdataChainComment, c.Comment)
	}
	return kc, nil
}

// compileRule compiles rule number index of a chain, with its canonical key.
func (c *compiler) compileRule(chain string, index int, r Rule, decls setDecls, memo exprMemo) (*kernelRule, error) {
	text := r.Rule
	if r.Comment != "" {
		// nft strings have no escapes: the comment goes in as it is
		// (strconv.Quote would store its escapes), and one nft could
		// not read back is refused.
		if err := nftsyntax.CheckComment(r.Comment); err != nil {
			return nil, fmt.Errorf("chain %q rule %d (%q): %w", chain, index, r.Rule, err)
		}
		text += ` comment "` + r.Comment + `"`
	}
	cr, err := nftsyntax.CompileRule(nftwire.Family(c.fam), text, decls)
	if err != nil {
		return nil, fmt.Errorf("chain %q rule %d (%q): %w", chain, index, r.Rule, err)
	}
	kr := &kernelRule{exprs: cr.Exprs, userdata: cr.UserData, text: r.Rule, index: index}
	for _, as := range cr.AnonSets {
		kr.anon = append(kr.anon, anonSet(as))
	}
	if err := kr.computeKey(c.fam, memo); err != nil {
		return nil, fmt.Errorf("chain %q rule %d: %w", chain, index, err)
	}
	return kr, nil
}

// withIndex returns r numbered index, copying it if its number changes
// (compiled rules are shared and never modified).
func withIndex(r *kernelRule, index int) *kernelRule {
	if r.index == index {
		return r
	}
	c := *r
	c.index = index
	return &c
}

// middle returns what differs between a and b once their common prefix and
// suffix are cut off.
func middle[T comparable](a, b []T) (aMid, bMid []T) {
	p := 0
	for p < len(a) && p < len(b) && a[p] == b[p] {
		p++
	}
	q := 0
	for q < len(a)-p && q < len(b)-p && a[len(a)-1-q] == b[len(b)-1-q] {
		q++
	}
	return a[p : len(a)-q], b[p : len(b)-q]
}

func elementTexts(els []Element) []nftsyntax.ElementText {
	out := make([]nftsyntax.ElementText, len(els))
	for i, el := range els {
		out[i] = nftsyntax.ElementText{Key: el.Key, Value: el.Value}
	}
	return out
}

func copySet(s Set) Set {
	s.Elements = append([]Element(nil), s.Elements...)
	return s
}

var hooks = map[string]uint32{
	"ingress":     nfInetIngress,
	"prerouting":  unix.NF_INET_PRE_ROUTING,
	"input":       unix.NF_INET_LOCAL_IN,
	"forward":     unix.NF_INET_FORWARD,
	"output":      unix.NF_INET_LOCAL_OUT,
	"postrouting": unix.NF_INET_POST_ROUTING,
}

// setDecls resolves @name references while compiling rules.
type setDecls map[string]nftsyntax.SetDecl

func (s setDecls) LookupSet(name string) (nftsyntax.SetDecl, bool) {
	d, ok := s[name]
	return d, ok
}

func anonSet(as nftsyntax.AnonSet) *kernelSet {
	s := &kernelSet{
		name:     as.Decl.Name,
		flags:    as.Flags,
		keyType:  as.Decl.Key.Magic(),
		keyLen:   as.Decl.Key.Len(),
		userdata: as.UserData,
		elems:    map[string]nftwire.Elem{},
	}
	if s.flags&nftSetConcat != 0 {
		for _, f := range as.Decl.Key.Fields {
			s.fieldLens = append(s.fieldLens, f.Len)
		}
	}
	if as.Decl.Data != nil {
		s.dataType = as.Decl.Data.WireDataType()
		if s.dataType != nftDataVerdict {
			s.dataLen = as.Decl.Data.Len()
		}
	}
	for _, el := range as.Elements {
		s.add(el)
	}
	return s
}
