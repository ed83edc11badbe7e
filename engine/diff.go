package engine

import (
	"bytes"
	"errors"
	"fmt"
	"maps"
	"sort"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/nftguard/nftguard/engine/nftwire"
)

// errStaleCache means the engine's cached table describes a version of a
// compiled set that the compiler has since updated in place more than once
// (a sync in between did not complete): the kernel must be read again.
var errStaleCache = errors.New("cached table is older than the compiled sets")

// How the diff treats a set that exists in the kernel and is kept.
const (
	setSame          = iota // the version the kernel holds: nothing to do
	setChangeApplies        // the compiler's change applies to the kernel's version
	setCompare              // compare every element
)

// diff appends to b the operations that turn cur (nil: no table) into want,
// and returns the table the kernel will hold once b is committed, for the
// engine's cache: kept chains and rules are cur's (with their kernel
// handles), new rules are copies of want's whose handles the kernel's echo
// fills in. want is not modified. A chain that is the same compiled object
// the cached chain was made from is skipped without looking at its rules,
// and a set the compiler updated in place is changed by its delta, so a
// small change costs little however large the table is. Order matters
// inside the batch: everything that refers to an object is removed before
// the object, and every object exists before anything refers to it.
func diff(b *batch, cur, want *kernelTable) (*kernelTable, error) {
	if cur == nil {
		b.addTable()
		cur = newKernelTable()
	}
	if q := quickDelta(cur, want); q != nil {
		if next, ok, err := diffNames(b, cur, want, namesOf(cur, q)); ok || err != nil {
			return next, err
		}
	}
	next, _, err := diffNames(b, cur, want, allNames(cur, want))
	return next, err
}

// names are the objects a diff looks at, each list in its table's order.
type names struct {
	quick                bool // only these may differ; the rest is the same
	curChains, curSets   []string
	wantChains, wantSets []string
}

func allNames(cur, want *kernelTable) names {
	return names{curChains: cur.chainOrder, curSets: cur.setOrder, wantChains: want.chainOrder, wantSets: want.setOrder}
}

// namesOf narrows a diff to the objects of a delta against the table cur
// mirrors.
func namesOf(cur *kernelTable, q *tableDelta) names {
	chains := make(map[string]bool, len(q.chains)+len(q.goneChains))
	for _, n := range q.chains {
		chains[n] = true
	}
	for _, n := range q.goneChains {
		chains[n] = true
	}
	sets := make(map[string]bool, len(q.sets)+len(q.goneSets))
	for _, n := range q.sets {
		sets[n] = true
	}
	for _, n := range q.goneSets {
		sets[n] = true
	}
	ns := names{quick: true, wantChains: q.chains, wantSets: q.sets}
	for _, n := range cur.chainOrder {
		if chains[n] {
			ns.curChains = append(ns.curChains, n)
		}
	}
	for _, n := range cur.setOrder {
		if sets[n] {
			ns.curSets = append(ns.curSets, n)
		}
	}
	return ns
}

// diffNames is diff over the named objects. A quick diff reports !ok,
// having written nothing, when a set or chain must be recreated: rules and
// elements elsewhere that refer to it go and come back with it.
func diffNames(b *batch, cur, want *kernelTable, ns names) (next *kernelTable, ok bool, err error) {
	next = &kernelTable{
		chainOrder: want.chainOrder,
		sets:       want.sets,
		setOrder:   want.setOrder,
	}
	if ns.quick {
		// Every object the delta does not name is the cache's.
		next.chains = maps.Clone(cur.chains)
		for _, n := range ns.curChains {
			delete(next.chains, n)
		}
		next.setVer = maps.Clone(cur.setVer)
		if next.setVer == nil {
			next.setVer = map[string]uint64{}
		}
		for _, n := range ns.curSets {
			delete(next.setVer, n)
		}
		for _, n := range ns.wantSets {
			if v := want.sets[n].ver; v != 0 {
				next.setVer[n] = v
			}
		}
	} else {
		next.chains = make(map[string]*kernelChain, len(want.chains))
		next.setVer = make(map[string]uint64, len(want.sets))
		for name, s := range want.sets {
			if s.ver != 0 {
				next.setVer[name] = s.ver
			}
		}
	}

	recreateSet := map[string]bool{}
	for _, name := range ns.curSets {
		if w, ok := want.sets[name]; ok && !sameDecl(w, cur.sets[name]) {
			recreateSet[name] = true
		}
	}
	// The kernel updates a chain's policy in place but ignores a new
	// comment (user data), so a changed comment recreates the chain like a
	// changed hook or priority does.
	recreateChain := map[string]bool{}
	for _, name := range ns.curChains {
		c := cur.chains[name]
		if w, ok := want.chains[name]; ok && (!w.sameBase(c) || !bytes.Equal(w.userdata, c.userdata)) {
			recreateChain[name] = true
		}
	}
	if ns.quick && (len(recreateSet) > 0 || len(recreateChain) > 0) {
		return nil, false, nil
	}
	// A rule that uses a recreated set or jumps to a recreated chain is
	// removed before it and added back after it.
	forced := func(r *kernelRule) bool {
		for _, s := range r.refs {
			if recreateSet[s] {
				return true
			}
		}
		for _, c := range r.jumps {
			if recreateChain[c] {
				return true
			}
		}
		return false
	}
	// Skipping a chain unseen is safe only when no rule has to be forced
	// out of it.
	skipOK := len(recreateSet) == 0 && len(recreateChain) == 0
	same := func(name string) bool {
		c, w := cur.chains[name], want.chains[name]
		return skipOK && c != nil && w != nil && c.from == w
	}
	// Verdict-map entries that jump to a recreated chain go and come back
	// with it too.
	forcedElem := func(el nftwire.Elem) bool {
		return el.Verdict != nil && recreateChain[el.Verdict.Chain]
	}

	// A chain whose rules are kept in part needs their handles.
	var noHandles []string
	for _, name := range ns.curChains {
		if _, ok := want.chains[name]; ok && cur.chains[name].noHandles && !same(name) && !recreateChain[name] {
			noHandles = append(noHandles, name)
		}
	}
	if len(noHandles) > 0 {
		return nil, false, &needHandlesError{chains: noHandles}
	}

	// 1. Rules out of chains that go away, and rules not kept.
	plans := map[string][]int{} // want chain -> want rule index -> cur rule index (-1: insert)
	for _, name := range ns.curChains {
		c := cur.chains[name]
		w, ok := want.chains[name]
		if ok && same(name) {
			continue
		}
		if !ok || recreateChain[name] {
			if len(c.rules) > 0 {
				b.flushChain(c)
			}
			continue
		}
		match, del := matchRules(c.rules, w.rules, forced)
		if len(del) == len(c.rules) && len(del) > 1 {
			b.flushChain(c)
		} else {
			for _, i := range del {
				b.delRule(name, c.rules[i])
			}
		}
		plans[name] = match
	}

	// 2. Sets that go away or change shape; elements that go away.
	mode := map[string]int{}
	segAdd := map[string][]nftwire.Elem{} // step 5's additions to kept interval sets
	for _, name := range ns.curSets {
		w, ok := want.sets[name]
		if !ok || recreateSet[name] {
			b.delSet(name)
			continue
		}
		c := cur.sets[name]
		if dynamicElems(c) {
			// Kept with the same declaration: its elements are
			// AddTimed's, never the diff's.
			mode[name] = setSame
			continue
		}
		cv, known := cur.setVer[name]
		switch {
		case known && cv == w.ver && c == w && len(recreateChain) == 0:
			mode[name] = setSame
			continue
		case known && w.change != nil && w.change.base == cv && len(recreateChain) == 0:
			mode[name] = setChangeApplies
			if len(w.change.del) > 0 {
				if err := b.elems(delSetElem, w, 0, w.change.del, nil, opDesc{}); err != nil {
					return nil, false, err
				}
			}
			continue
		case c == w && !(known && cv == w.ver) && w.ver != 0:
			return nil, false, errStaleCache
		}
		mode[name] = setCompare
		var gone []nftwire.Elem
		if segmentSet(c) && segmentSet(w) {
			var add []nftwire.Elem
			gone, add = diffSegments(c, w, forcedElem)
			segAdd[name] = add
		} else {
			var ids []string
			for id, el := range c.elems {
				if we, ok := w.elems[id]; !ok || elemValue(we) != elemValue(el) || forcedElem(el) {
					ids = append(ids, id)
				}
			}
			sort.Strings(ids)
			for _, id := range ids {
				gone = append(gone, c.elems[id])
			}
		}
		if len(gone) > 0 {
			if err := b.elems(delSetElem, c, 0, gone, nil, opDesc{}); err != nil {
				return nil, false, err
			}
		}
	}

	// 3. Chains that go away (their rules and jumps into them are gone).
	for _, name := range ns.curChains {
		if _, ok := want.chains[name]; !ok || recreateChain[name] {
			b.delChain(name)
		}
	}

	// 4. New chains and policy changes.
	for _, name := range ns.wantChains {
		w := want.chains[name]
		c, ok := cur.chains[name]
		switch {
		case !ok || recreateChain[name]:
			b.addChain(w, false)
		case w.base && w.policy != c.policy:
			b.addChain(w, true)
		}
	}

	// 5. New sets with their elements; new elements of kept sets.
	for _, name := range ns.wantSets {
		w := want.sets[name]
		c, ok := cur.sets[name]
		if !ok || recreateSet[name] {
			b.setID++
			b.addSet(w, b.setID, opDesc{verb: "add set", name: name})
			if dynamicElems(w) {
				continue
			}
			if err := b.elems(newSetElem, w, b.setID, w.list(), w.texts(), opDesc{}); err != nil {
				return nil, false, err
			}
			continue
		}
		var add []nftwire.Elem
		var texts []string
		switch mode[name] {
		case setSame:
		case setChangeApplies:
			add, texts = w.change.add, w.change.addTexts
		default:
			if add0, ok := segAdd[name]; ok {
				add = add0
				for _, el := range add {
					texts = append(texts, w.elemText[elemID(el)])
				}
				break
			}
			for _, id := range w.ids() {
				we := w.elems[id]
				if ce, ok := c.elems[id]; !ok || elemValue(ce) != elemValue(we) || forcedElem(we) {
					add = append(add, we)
					texts = append(texts, w.elemText[id])
				}
			}
		}
		if len(add) > 0 {
			if err := b.elems(newSetElem, w, 0, add, texts, opDesc{}); err != nil {
				return nil, false, err
			}
		}
	}

	// 6. New rules, each inserted before the next kept rule.
	for _, name := range ns.wantChains {
		w := want.chains[name]
		if same(name) {
			next.chains[name] = cur.chains[name]
			continue
		}
		nc := *w
		nc.from = w
		nc.rules = make([]*kernelRule, len(w.rules))
		next.chains[name] = &nc
		plan, ok := plans[name]
		if !ok { // new or recreated chain: everything appended
			for j, r := range w.rules {
				nc.rules[j] = newRule(r)
				if err := b.addRule(name, nc.rules[j], 0); err != nil {
					return nil, false, err
				}
			}
			continue
		}
		crules := cur.chains[name].rules
		for j, i := range plan {
			if i >= 0 {
				nc.rules[j] = crules[i]
			}
		}
		before := make([]uint64, len(w.rules))
		var nextHandle uint64
		for j := len(w.rules) - 1; j >= 0; j-- {
			if plan[j] >= 0 {
				nextHandle = nc.rules[j].handle
				continue
			}
			before[j] = nextHandle
		}
		for j, r := range w.rules {
			if plan[j] >= 0 {
				continue
			}
			nc.rules[j] = newRule(r)
			if err := b.addRule(name, nc.rules[j], before[j]); err != nil {
				return nil, false, err
			}
		}
	}
	return next, true, nil
}

// needHandlesError says which chains of the cache lack the kernel handles
// the diff needs (see kernelChain.noHandles).
type needHandlesError struct{ chains []string }

func (e *needHandlesError) Error() string {
	return fmt.Sprintf("kernel handles of the rules of %d chains unknown", len(e.chains))
}

// newRule copies a compiled rule for the cache, where the kernel's echo
// gives it a handle.
func newRule(r *kernelRule) *kernelRule {
	c := *r
	c.handle = 0
	return &c
}

// matchRules pairs desired rules with kernel rules of equal canonical form
// so that as many kernel rules as possible are kept in their order (a
// longest increasing subsequence of matched positions, after the common
// prefix and suffix, which such a subsequence always keeps). It returns,
// per desired rule, the kept kernel index or -1, and the kernel indices to
// delete.
func matchRules(cur, want []*kernelRule, forced func(*kernelRule) bool) (match []int, del []int) {
	keep := func(i, j int) bool {
		return cur[i].key != "" && cur[i].key == want[j].key && !forced(cur[i])
	}
	match = make([]int, len(want))
	for j := range match {
		match[j] = -1
	}
	p := 0
	for p < len(cur) && p < len(want) && keep(p, p) {
		match[p] = p
		p++
	}
	q := 0
	for q < len(cur)-p && q < len(want)-p && keep(len(cur)-1-q, len(want)-1-q) {
		match[len(want)-1-q] = len(cur) - 1 - q
		q++
	}
	byKey := map[string][]int{}
	for i := p; i < len(cur)-q; i++ {
		if r := cur[i]; r.key != "" && !forced(r) {
			byKey[r.key] = append(byKey[r.key], i)
		}
	}
	cand := make([]int, len(want)-q-p)
	for j := range cand {
		cand[j] = -1
		k := want[p+j].key
		if q := byKey[k]; len(q) > 0 {
			cand[j] = q[0]
			byKey[k] = q[1:]
		}
	}
	copy(match[p:], lis(cand))
	kept := make([]bool, len(cur))
	for _, i := range match {
		if i >= 0 {
			kept[i] = true
		}
	}
	for i := range cur {
		if !kept[i] {
			del = append(del, i)
		}
	}
	return match, del
}

// lis keeps the longest strictly increasing subsequence of the non-negative
// values of a and sets every other entry to -1.
func lis(a []int) []int {
	var tails []int // indices into a
	prev := make([]int, len(a))
	for j, v := range a {
		prev[j] = -1
		if v < 0 {
			continue
		}
		k := sort.Search(len(tails), func(k int) bool { return a[tails[k]] >= v })
		if k > 0 {
			prev[j] = tails[k-1]
		}
		if k == len(tails) {
			tails = append(tails, j)
		} else {
			tails[k] = j
		}
	}
	out := make([]int, len(a))
	for j := range out {
		out[j] = -1
	}
	if len(tails) > 0 {
		for j := tails[len(tails)-1]; j >= 0; j = prev[j] {
			out[j] = a[j]
		}
	}
	return out
}

// segmentSet reports whether a set is a plain (not concatenated) interval
// set, which the kernel keeps as a list of segments: a start element per
// interval, an INTERVAL_END element at its end + 1 (none for an interval
// that runs to the top of the key space), and the INTERVAL_END sentinel at
// zero that nft writes when no interval starts at zero.
func segmentSet(s *kernelSet) bool {
	return s.flags&unix.NFT_SET_INTERVAL != 0 && s.flags&nftSetConcat == 0 && len(s.fieldLens) == 0
}

// segment is one unit of a segment set, added and deleted as a whole: an
// interval's start followed by its end (if any), or a lone end (the zero
// sentinel, or a stray end).
type segment struct {
	elems []nftwire.Elem
	id    string // the elements' identities and values
}

// segments splits a segment set into its units, in key order (at one key
// an end comes before a start, as it closes the interval below).
func segments(s *kernelSet) []segment {
	els := make([]nftwire.Elem, 0, len(s.elems))
	for _, el := range s.elems {
		els = append(els, el)
	}
	sort.Slice(els, func(i, j int) bool {
		a, b := els[i], els[j]
		if c := bytes.Compare(a.Key, b.Key); c != 0 {
			return c < 0
		}
		if a.IntervalEnd != b.IntervalEnd {
			return a.IntervalEnd
		}
		return bytes.Compare(a.KeyEnd, b.KeyEnd) < 0
	})
	out := make([]segment, 0, len(els)/2+1)
	add := func(es ...nftwire.Elem) {
		var sb strings.Builder
		for _, el := range es {
			sb.WriteString(elemID(el))
			sb.WriteString("=")
			sb.WriteString(elemValue(el))
			sb.WriteString("\x01")
		}
		out = append(out, segment{elems: es, id: sb.String()})
	}
	open := -1 // index in els of an interval start not yet closed
	for i, el := range els {
		switch {
		case el.IntervalEnd && el.KeyEnd == nil && open >= 0:
			add(els[open], el)
			open = -1
		case el.IntervalEnd && el.KeyEnd == nil:
			add(el)
		default:
			if open >= 0 {
				add(els[open]) // a start without end: the interval runs to the top
			}
			open = -1
			if el.KeyEnd != nil {
				add(el)
			} else {
				open = i
			}
		}
	}
	if open >= 0 {
		add(els[open])
	}
	return out
}

// diffSegments compares two versions of a segment set interval by interval
// (an interval whose start or end moved is deleted and added again, so an
// end point never lands inside an interval still present), and returns
// the elements to delete, each interval's start immediately followed by
// its end as the kernel wants them, and the elements to add, both in key
// order: the result does not depend on map iteration.
func diffSegments(cur, want *kernelSet, forced func(nftwire.Elem) bool) (del, add []nftwire.Elem) {
	isForced := func(sg segment) bool {
		for _, el := range sg.elems {
			if forced(el) {
				return true
			}
		}
		return false
	}
	cs, ws := segments(cur), segments(want)
	inCur := make(map[string]bool, len(cs))
	for _, sg := range cs {
		inCur[sg.id] = true
	}
	inWant := make(map[string]bool, len(ws))
	for _, sg := range ws {
		inWant[sg.id] = true
	}
	for _, sg := range cs {
		if !inWant[sg.id] || isForced(sg) {
			del = append(del, sg.elems...)
		}
	}
	for _, sg := range ws {
		if !inCur[sg.id] || isForced(sg) {
			add = append(add, sg.elems...)
		}
	}
	return del, add
}
