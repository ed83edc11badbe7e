package doctor

import (
	"bytes"
	"fmt"

	"github.com/nftguard/nftguard/engine/nftwire"
)

// difference is one way our table differs from what the manifests
// produce. opens says it may let through traffic the manifests' table
// stops: an extra base chain, a rule that may accept, jump or return where
// the manifests have none, a lost drop or dispatch, a policy turned to
// accept, a base chain moved off its hook or priority, the table missing.
// Only a difference that can only stop more traffic (an extra drop, a lost
// accept, an extra regular chain nothing jumps to, a set's elements, whose
// meaning depends on the rules) is not.
type difference struct {
	text  string
	opens bool
}

// diffTables lists how got differs from want: chains (hook, priority,
// policy, rule bytecode and comments, in order) and sets (types, flags,
// elements). Handles are ignored: they differ between any two kernels.
// Rules are aligned by a longest common subsequence, so that one inserted
// or deleted rule is one difference, not one per rule after it.
func diffTables(want, got *Table) []difference {
	switch {
	case want == nil && got == nil:
		return nil
	case got == nil:
		opens := false
		for _, c := range want.Chains {
			opens = opens || c.Policy == "drop" || hasStop(c.Rules)
		}
		return []difference{{"the table is missing", opens}}
	case want == nil:
		return []difference{{"the table exists but the manifests produce none", false}}
	}
	var out []difference
	add := func(opens bool, format string, args ...any) {
		out = append(out, difference{fmt.Sprintf(format, args...), opens})
	}
	pairByName(want.Chains, got.Chains, func(c *Chain) string { return c.Name }, func(w, g *Chain) {
		if g == nil {
			add(w.Hook != "" || hasStop(w.Rules), "chain %s is missing", w.Name)
			return
		}
		if w.Hook != g.Hook || w.Type != g.Type || w.Priority != g.Priority || w.Policy != g.Policy {
			moved := w.Hook != g.Hook || w.Type != g.Type || w.Priority != g.Priority
			add(moved || (w.Policy == "drop" && g.Policy != "drop"), "chain %s: hook %s %s priority %d policy %s, want hook %s %s priority %d policy %s",
				w.Name, g.Type, g.Hook, g.Priority, g.Policy, w.Type, w.Hook, w.Priority, w.Policy)
		}
		diffRules(w, g, add)
	}, func(c *Chain) {
		if c.Hook != "" {
			add(true, "extra base chain %s (%s hook %s priority %d policy %s, %d rules)", c.Name, c.Type, c.Hook, c.Priority, c.Policy, len(c.Rules))
		} else {
			add(false, "extra chain %s", c.Name)
		}
	})
	pairByName(want.Sets, got.Sets, func(s *Set) string { return s.Name }, func(w, g *Set) {
		if g == nil {
			add(false, "set %s is missing", w.Name)
			return
		}
		if w.Flags != g.Flags || w.KeyType != g.KeyType || w.KeyLen != g.KeyLen || w.DataType != g.DataType || w.DataLen != g.DataLen {
			add(false, "set %s: different type or flags", w.Name)
		}
		if missing, extra := diffElements(w.Elements, g.Elements); missing+extra > 0 {
			add(false, "set %s: %d elements missing, %d extra", w.Name, missing, extra)
		}
	}, func(s *Set) {
		add(false, "extra set %s", s.Name)
	})
	return out
}

// pairByName hands pair each of want's objects, in want's order, with
// got's of the same name (nil when got has none), then extra each of got's
// objects that want has not, in got's order.
func pairByName[T any](want, got []*T, name func(*T) string, pair func(w, g *T), extra func(g *T)) {
	byName := make(map[string]*T, len(got))
	for _, g := range got {
		byName[name(g)] = g
	}
	for _, w := range want {
		n := name(w)
		g := byName[n]
		delete(byName, n)
		pair(w, g)
	}
	for _, g := range got {
		if _, left := byName[name(g)]; left {
			extra(g)
		}
	}
}

// diffRules reports the rules of chain g that differ from w's. Runs of
// rules between two rules both have in common are compared pairwise (a
// changed rule), and what one run has beyond the other is missing or extra.
func diffRules(w, g *Chain, add func(bool, string, ...any)) {
	pairs := commonRules(w.Rules, g.Rules)
	i, j := 0, 0
	for _, p := range append(pairs, [2]int{len(w.Rules), len(g.Rules)}) {
		for ; i < p[0] && j < p[1]; i, j = i+1, j+1 {
			add(mayOpen(g.Rules[j]) || stops(w.Rules[i]), "chain %s: rule %d (handle %d) is %q, want %q", w.Name, i+1, g.Rules[j].Handle, g.Rules[j].Text, w.Rules[i].Text)
		}
		for ; i < p[0]; i++ {
			add(stops(w.Rules[i]), "chain %s: rule %d is missing: %s", w.Name, i+1, w.Rules[i].Text)
		}
		for ; j < p[1]; j++ {
			add(mayOpen(g.Rules[j]), "chain %s: extra rule (handle %d): %s", w.Name, g.Rules[j].Handle, g.Rules[j].Text)
		}
		i, j = p[0]+1, p[1]+1
	}
}

func sameRule(a, b *Rule) bool {
	return bytes.Equal(a.Raw, b.Raw) && bytes.Equal(a.UserData, b.UserData)
}

// commonRules returns the index pairs of a longest common subsequence of
// two rule lists. Equal heads and tails are matched first, so the table
// covers only the part that differs: tables in sync, or with a few rules
// changed, cost linear time.
func commonRules(a, b []*Rule) [][2]int {
	head := 0
	for head < len(a) && head < len(b) && sameRule(a[head], b[head]) {
		head++
	}
	tail := 0
	for tail < len(a)-head && tail < len(b)-head && sameRule(a[len(a)-1-tail], b[len(b)-1-tail]) {
		tail++
	}
	var out [][2]int
	for k := range head {
		out = append(out, [2]int{k, k})
	}
	ma, mb := a[head:len(a)-tail], b[head:len(b)-tail]
	if len(ma)*len(mb) > maxLCSCells {
		// Too large a table for a report: the middle counts as changed.
		ma = nil
	}
	// l[x][y] is the length of a longest common subsequence of ma[x:], mb[y:].
	l := make([][]int, len(ma)+1)
	for x := range l {
		l[x] = make([]int, len(mb)+1)
	}
	for x := len(ma) - 1; x >= 0; x-- {
		for y := len(mb) - 1; y >= 0; y-- {
			if sameRule(ma[x], mb[y]) {
				l[x][y] = l[x+1][y+1] + 1
			} else {
				l[x][y] = max(l[x+1][y], l[x][y+1])
			}
		}
	}
	for x, y := 0, 0; x < len(ma) && y < len(mb); {
		switch {
		case sameRule(ma[x], mb[y]):
			out = append(out, [2]int{head + x, head + y})
			x, y = x+1, y+1
		case l[x+1][y] >= l[x][y+1]:
			x++
		default:
			y++
		}
	}
	for k := range tail {
		out = append(out, [2]int{len(a) - tail + k, len(b) - tail + k})
	}
	return out
}

// maxLCSCells bounds the memory of one chain's alignment (8 bytes a cell:
// 32 MiB); a chain whose differing middle is larger is compared by
// position.
const maxLCSCells = 4 << 20

// verdict classes of a rule, by what its last verdict can do.
const (
	verdictNone = iota // no verdict: the packet goes on to the next rule
	verdictStop        // drop or reject
	verdictPass        // accept, return, jump, goto or a verdict map
)

func verdictClass(r *Rule) int {
	if len(r.Exprs) == 0 {
		return verdictNone
	}
	for _, e := range r.Exprs {
		if l, ok := e.Value.(*nftwire.Lookup); ok && l.IsDestRegSet && l.DestRegister == 0 {
			return verdictPass // a verdict map: jumps, accepts or drops by element
		}
	}
	switch v := r.Exprs[len(r.Exprs)-1].Value.(type) {
	case *nftwire.Verdict:
		switch v.Kind {
		case nftwire.VerdictDrop:
			return verdictStop
		case nftwire.VerdictContinue:
			return verdictNone
		}
		return verdictPass
	case *nftwire.Reject:
		return verdictStop
	case *nftwire.Target:
		if v.Name == "DROP" || v.Name == "REJECT" {
			return verdictStop
		}
		return verdictPass // an xt target may accept or jump
	case nil:
		return verdictPass // unknown to the decoder: assume the worst
	}
	return verdictNone
}

// mayOpen reports whether a rule the manifests do not have may let
// through traffic they stop: anything but a drop or a rule with no verdict.
func mayOpen(r *Rule) bool { return verdictClass(r) == verdictPass }

// stops reports whether losing a rule of the manifests may let through
// traffic they stop: a drop, or a dispatch (a jump, a verdict map) into
// chains that end in one. Losing an accept only stops more.
func stops(r *Rule) bool {
	if verdictClass(r) == verdictStop {
		return true
	}
	if len(r.Exprs) == 0 {
		return false
	}
	if v, ok := r.Exprs[len(r.Exprs)-1].Value.(*nftwire.Verdict); ok && v.Kind == nftwire.VerdictAccept {
		return false
	}
	return verdictClass(r) == verdictPass
}

// hasStop reports whether any rule of a chain stops traffic if lost.
func hasStop(rules []*Rule) bool {
	for _, r := range rules {
		if stops(r) {
			return true
		}
	}
	return false
}

// diffElements counts elements only in want (missing) and only in got
// (extra); both lists are sorted.
func diffElements(want, got [][]byte) (missing, extra int) {
	i, j := 0, 0
	for i < len(want) || j < len(got) {
		switch {
		case j == len(got):
			missing++
			i++
		case i == len(want):
			extra++
			j++
		default:
			switch c := bytes.Compare(want[i], got[j]); {
			case c == 0:
				i++
				j++
			case c < 0:
				missing++
				i++
			default:
				extra++
				j++
			}
		}
	}
	return missing, extra
}
