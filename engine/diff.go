package engine

import (
	"sort"

	"github.com/nftguard/nftguard/engine/nftsyntax"
)

// diff appends to b the operations that turn cur (nil: no table) into want,
// and returns want with the kernel handles of kept rules filled in (new
// rules get theirs from the kernel's echo). Order matters inside the batch:
// everything that refers to an object is removed before the object, and
// every object exists before anything refers to it.
func diff(b *batch, cur, want *kTable) error {
	if cur == nil {
		b.addTable()
		cur = newKTable()
	}

	recreateSet := map[string]bool{}
	for _, name := range cur.setOrder {
		if w, ok := want.sets[name]; ok && w.declKey() != cur.sets[name].declKey() {
			recreateSet[name] = true
		}
	}
	recreateChain := map[string]bool{}
	for _, name := range cur.chainOrder {
		if w, ok := want.chains[name]; ok && !w.sameBase(cur.chains[name]) {
			recreateChain[name] = true
		}
	}
	usesRecreated := func(r *kRule) bool {
		for _, s := range r.refs {
			if recreateSet[s] {
				return true
			}
		}
		return false
	}

	// 1. Rules out of chains that go away, and rules not kept.
	plans := map[string][]int{} // want chain -> want rule index -> cur handle (0: insert)
	for _, name := range cur.chainOrder {
		c := cur.chains[name]
		w, ok := want.chains[name]
		if !ok || recreateChain[name] {
			if len(c.rules) > 0 {
				b.flushChain(name)
			}
			continue
		}
		match, del := matchRules(c.rules, w.rules, usesRecreated)
		if len(del) == len(c.rules) && len(del) > 1 {
			b.flushChain(name)
		} else {
			for _, i := range del {
				b.delRule(name, c.rules[i].handle)
			}
		}
		plans[name] = match
		for j, i := range match {
			if i >= 0 {
				w.rules[j].handle = c.rules[i].handle
			}
		}
	}

	// 2. Sets that go away or change shape; elements that go away.
	for _, name := range cur.setOrder {
		w, ok := want.sets[name]
		if !ok || recreateSet[name] {
			b.delSet(name)
			continue
		}
		var gone []nftsyntax.Elem
		c := cur.sets[name]
		for id, el := range c.elems {
			if we, ok := w.elems[id]; !ok || elemValue(we) != elemValue(el) {
				gone = append(gone, el)
			}
		}
		if len(gone) > 0 {
			if err := b.elems(delSetElem, c, 0, gone, nil, opDesc{}); err != nil {
				return err
			}
		}
	}

	// 3. Chains that go away (their rules and jumps into them are gone).
	for _, name := range cur.chainOrder {
		if _, ok := want.chains[name]; !ok || recreateChain[name] {
			b.delChain(name)
		}
	}

	// 4. New chains and policy changes.
	for _, name := range want.chainOrder {
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
	for _, name := range want.setOrder {
		w := want.sets[name]
		c, ok := cur.sets[name]
		if !ok || recreateSet[name] {
			b.setID++
			b.addSet(w, b.setID, opDesc{verb: "add set", name: name})
			if err := b.elems(newSetElem, w, b.setID, w.list(), w.texts(), opDesc{}); err != nil {
				return err
			}
			continue
		}
		var add []nftsyntax.Elem
		var texts []string
		for _, id := range w.order {
			we := w.elems[id]
			if ce, ok := c.elems[id]; !ok || elemValue(ce) != elemValue(we) {
				add = append(add, we)
				texts = append(texts, w.elemText[id])
			}
		}
		if len(add) > 0 {
			if err := b.elems(newSetElem, w, 0, add, texts, opDesc{}); err != nil {
				return err
			}
		}
	}

	// 6. New rules, each inserted before the next kept rule.
	for _, name := range want.chainOrder {
		w := want.chains[name]
		plan, ok := plans[name]
		if !ok { // new or recreated chain: everything appended
			for _, r := range w.rules {
				if err := b.addRule(name, r, 0); err != nil {
					return err
				}
			}
			continue
		}
		before := make([]uint64, len(w.rules))
		var next uint64
		for j := len(w.rules) - 1; j >= 0; j-- {
			if plan[j] >= 0 {
				next = w.rules[j].handle
				continue
			}
			before[j] = next
		}
		for j, r := range w.rules {
			if plan[j] >= 0 {
				continue
			}
			r.handle = 0
			if err := b.addRule(name, r, before[j]); err != nil {
				return err
			}
		}
	}
	return nil
}

// matchRules pairs desired rules with kernel rules of equal canonical form
// so that as many kernel rules as possible are kept in their order (a
// longest increasing subsequence of matched positions). It returns, per
// desired rule, the kept kernel index or -1, and the kernel indices to
// delete.
func matchRules(cur, want []*kRule, forced func(*kRule) bool) (match []int, del []int) {
	byKey := map[string][]int{}
	for i, r := range cur {
		if r.key == "" || forced(r) {
			continue
		}
		byKey[r.key] = append(byKey[r.key], i)
	}
	cand := make([]int, len(want))
	for j, r := range want {
		cand[j] = -1
		if q := byKey[r.key]; len(q) > 0 {
			cand[j] = q[0]
			byKey[r.key] = q[1:]
		}
	}
	match = lis(cand)
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
