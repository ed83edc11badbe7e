package engine

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand"
	"slices"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/nftguard/nftguard/engine/nftwire"
)

// TestQuickDiffEqualsFullDiff replays random sequences of Desired tables
// through one compiler, as Sync does, and checks that the diff narrowed
// to the compiler's delta writes the very batch the full diff writes and
// leaves the same cache behind.
func TestQuickDiffEqualsFullDiff(t *testing.T) {
	quick, stale := 0, 0
	for seed := int64(0); seed < 300; seed++ {
		rnd := rand.New(rand.NewSource(seed))
		c := newCompiler(unix.NFPROTO_INET)
		var cache *kernelTable
		var prev *Desired
		d := randomDesired(rnd, nil)
		for step := 0; step < 12; step++ {
			want, err := c.compile(d)
			if err != nil {
				t.Fatalf("seed %d step %d: %v", seed, step, err)
			}
			full := newBatch(unix.NFPROTO_INET, "t", 1, true, 0)
			nextFull, _, errFull := diffNames(full, orEmpty(cache, full), want, allNames(orEmpty(cache, nil), want))
			b := newBatch(unix.NFPROTO_INET, "t", 1, true, 0)
			next, errQuick := diff(b, cache, want)
			if (errFull == nil) != (errQuick == nil) {
				t.Fatalf("seed %d step %d: full diff error %v, diff error %v", seed, step, errFull, errQuick)
			}
			if errors.Is(errQuick, errStaleCache) {
				// A set updated in place while a chain is recreated:
				// Sync reads the kernel's table and diffs again. A
				// table compiled afresh from the previous state is
				// what that read returns.
				read, err := compile(unix.NFPROTO_INET, prev)
				if err != nil {
					t.Fatal(err)
				}
				b = newBatch(unix.NFPROTO_INET, "t", 1, true, 0)
				if next, errQuick = diff(b, read, want); errQuick != nil {
					t.Fatalf("seed %d step %d: after a read: %v", seed, step, errQuick)
				}
				next.mirrors = want
				cache, prev = next, d
				d = randomDesired(rnd, d)
				stale++
				continue
			}
			if errQuick != nil {
				t.Fatalf("seed %d step %d: %v", seed, step, errQuick)
			}
			if quickDelta(cache, want) != nil {
				quick++
			}
			if !bytes.Equal(full.m.B, b.m.B) {
				t.Fatalf("seed %d step %d: the batches differ (%d ops vs %d)", seed, step, len(full.ops), len(b.ops))
			}
			if err := sameCache(nextFull, next); err != nil {
				t.Fatalf("seed %d step %d: caches differ: %v", seed, step, err)
			}
			next.mirrors = want
			cache, prev = next, d
			d = randomDesired(rnd, d)
		}
	}
	t.Logf("%d of 3600 diffs quick, %d stale caches", quick, stale)
	if quick < 1000 {
		t.Errorf("only %d of 3600 diffs took the quick path", quick)
	}
}

// orEmpty stands in for diff's handling of a missing cache: the full diff
// starts by creating the table.
func orEmpty(cache *kernelTable, b *batch) *kernelTable {
	if cache != nil {
		return cache
	}
	if b != nil {
		b.addTable()
	}
	return newKernelTable()
}

func sameCache(a, b *kernelTable) error {
	if !slices.Equal(a.chainOrder, b.chainOrder) || !slices.Equal(a.setOrder, b.setOrder) {
		return fmt.Errorf("order")
	}
	if len(a.chains) != len(b.chains) || len(a.setVer) != len(b.setVer) {
		return fmt.Errorf("%d/%d chains, %d/%d set versions", len(a.chains), len(b.chains), len(a.setVer), len(b.setVer))
	}
	for n, ca := range a.chains {
		cb := b.chains[n]
		if cb == nil || ca.from != cb.from || len(ca.rules) != len(cb.rules) {
			return fmt.Errorf("chain %s", n)
		}
		for i := range ca.rules {
			if ca.rules[i].key != cb.rules[i].key {
				return fmt.Errorf("chain %s rule %d", n, i)
			}
		}
	}
	for n, v := range a.setVer {
		if b.setVer[n] != v {
			return fmt.Errorf("set %s version", n)
		}
	}
	return nil
}

// randomDesired returns a random table, or a random change of prev that
// shares what it does not change (as an incremental caller does).
func randomDesired(rnd *rand.Rand, prev *Desired) *Desired {
	setTypes := []struct {
		typ, data string
		interval  bool
	}{{"ipv4_addr", "", false}, {"ipv4_addr", "", true}, {"ipv4_addr", "verdict", false}, {"inet_service", "", false}}
	newSet := func(i int) Set {
		st := setTypes[rnd.Intn(len(setTypes))]
		s := Set{Name: fmt.Sprintf("s%d", i), Type: st.typ, Map: st.data, Interval: st.interval}
		n := rnd.Intn(6)
		for j := 0; j < n; j++ {
			var el Element
			switch {
			case st.typ == "inet_service":
				el.Key = fmt.Sprint(1 + rnd.Intn(50)*10)
			case st.interval:
				el.Key = fmt.Sprintf("10.%d.0.0/16", rnd.Intn(50))
			default:
				el.Key = fmt.Sprintf("10.0.0.%d", rnd.Intn(50))
			}
			if st.data == "verdict" {
				el.Value = "accept"
			}
			if !slices.ContainsFunc(s.Elements, func(e Element) bool { return e.Key == el.Key }) {
				s.Elements = append(s.Elements, el)
			}
		}
		return s
	}
	ruleFor := func(sets []Set, chains int, self int) Rule {
		switch x := rnd.Intn(6); {
		case x == 0 && len(sets) > 0:
			s := sets[rnd.Intn(len(sets))]
			switch {
			case s.Type == "inet_service":
				return Rule{Rule: "tcp dport @" + s.Name + " accept"}
			case s.Map == "verdict":
				return Rule{Rule: "ip saddr vmap @" + s.Name}
			}
			return Rule{Rule: "ip saddr @" + s.Name + " accept"}
		case x == 1 && chains > 1:
			j := rnd.Intn(chains)
			if j > self {
				return Rule{Rule: fmt.Sprintf("jump c%d", j)}
			}
		case x == 2:
			return Rule{Rule: "ct state established accept", Comment: fmt.Sprint("c", rnd.Intn(3))}
		}
		return Rule{Rule: fmt.Sprintf("tcp dport %d drop", 1+rnd.Intn(100))}
	}
	if prev == nil || rnd.Intn(15) == 0 {
		d := &Desired{}
		nSets := rnd.Intn(5)
		for i := 0; i < nSets; i++ {
			d.Sets = append(d.Sets, newSet(i))
		}
		nChains := 1 + rnd.Intn(5)
		for i := 0; i < nChains; i++ {
			ch := Chain{Name: fmt.Sprintf("c%d", i)}
			if i == 0 {
				ch.Type, ch.Hook = "filter", "input"
			}
			for j := rnd.Intn(5); j > 0; j-- {
				ch.Rules = append(ch.Rules, ruleFor(d.Sets, nChains, i))
			}
			d.Chains = append(d.Chains, ch)
		}
		return d
	}
	d := &Desired{Chains: slices.Clone(prev.Chains), Sets: slices.Clone(prev.Sets)}
	for k := 1 + rnd.Intn(3); k > 0; k-- {
		switch rnd.Intn(7) {
		case 0: // a set's elements change
			if len(d.Sets) > 0 {
				i := rnd.Intn(len(d.Sets))
				n := newSet(i)
				if n.Type == d.Sets[i].Type && n.Map == d.Sets[i].Map && n.Interval == d.Sets[i].Interval {
					d.Sets[i].Elements = n.Elements
				}
			}
		case 1: // a set's declaration changes: rules naming it go
			if len(d.Sets) > 0 {
				i := rnd.Intn(len(d.Sets))
				d.Sets[i] = newSet(i)
				dropRefs(d, d.Sets[i].Name)
			}
		case 2: // a set goes
			if len(d.Sets) > 0 {
				i := len(d.Sets) - 1
				dropRefs(d, d.Sets[i].Name)
				d.Sets = d.Sets[:i]
			}
		case 3: // a set comes
			d.Sets = append(d.Sets, newSet(len(d.Sets)))
		case 4: // a chain's rules change
			i := rnd.Intn(len(d.Chains))
			rules := slices.Clone(d.Chains[i].Rules)
			if len(rules) > 0 && rnd.Intn(2) == 0 {
				rules = slices.Delete(rules, 0, 1)
			} else {
				rules = append(rules, ruleFor(d.Sets, len(d.Chains), i))
			}
			d.Chains[i].Rules = rules
		case 5: // a chain comes or goes (the last: jumps only go forward)
			if n := len(d.Chains); n > 1 && rnd.Intn(2) == 0 {
				gone := d.Chains[n-1].Name
				d.Chains = d.Chains[:n-1]
				for i := range d.Chains {
					d.Chains[i].Rules = slices.DeleteFunc(slices.Clone(d.Chains[i].Rules), func(r Rule) bool { return r.Rule == "jump "+gone })
				}
			} else {
				d.Chains = append(d.Chains, Chain{Name: fmt.Sprintf("c%d", n), Rules: []Rule{{Rule: "accept"}}})
			}
		case 6: // a chain's comment changes (the chain is recreated)
			i := rnd.Intn(len(d.Chains))
			d.Chains[i].Comment = fmt.Sprint("v", rnd.Intn(3))
		}
	}
	return d
}

// dropRefs removes the rules naming a set.
func dropRefs(d *Desired, set string) {
	for i := range d.Chains {
		if slices.ContainsFunc(d.Chains[i].Rules, func(r Rule) bool { return refersTo(r.Rule, set) }) {
			d.Chains[i].Rules = slices.DeleteFunc(slices.Clone(d.Chains[i].Rules), func(r Rule) bool { return refersTo(r.Rule, set) })
		}
	}
}

func refersTo(rule, set string) bool {
	for _, f := range bytes.Fields([]byte(rule)) {
		if string(f) == "@"+set {
			return true
		}
	}
	return false
}

// TestSegmentDiff: the element diff of a plain interval set works on whole
// intervals, deletes each interval as its start followed by its end, and is
// deterministic.
func TestSegmentDiff(t *testing.T) {
	set := func(elems ...string) *kernelSet {
		d := &Desired{Sets: []Set{{Name: "s", Type: "inet_service", Interval: true}}}
		for _, e := range elems {
			d.Sets[0].Elements = append(d.Sets[0].Elements, Element{Key: e})
		}
		k, err := compile(0x1, d)
		if err != nil {
			t.Fatal(err)
		}
		return k.sets["s"]
	}
	str := func(els []nftwire.Elem) string {
		var out []string
		for _, e := range els {
			s := fmt.Sprint(binary.BigEndian.Uint16(e.Key))
			if e.IntervalEnd {
				s += "e"
			}
			out = append(out, s)
		}
		return strings.Join(out, " ")
	}
	never := func(nftwire.Elem) bool { return false }
	for _, tc := range []struct {
		cur, want []string
		del, add  string
	}{
		// An end point inside a kept interval: the interval is replaced.
		{[]string{"0-1023", "8080"}, []string{"0-511", "512-1023", "8080-8081"}, "0 1024e 8080 8081e", "0 512e 512 1024e 8080 8082e"},
		// The sentinel goes when an interval starts at zero.
		{[]string{"80", "443"}, []string{"0-79", "443"}, "0e 80 81e", "0 80e"},
		// ... and comes back when none does; the open top interval moves.
		{[]string{"0-9", "60000-65535"}, []string{"10-19", "60001-65535"}, "0 10e 60000", "0e 10 20e 60001"},
		{[]string{"0-9", "22"}, nil, "0 10e 22 23e", ""},
		{[]string{"22"}, []string{"22"}, "", ""},
	} {
		for i := 0; i < 20; i++ {
			del, add := diffSegments(set(tc.cur...), set(tc.want...), never)
			if str(del) != tc.del || str(add) != tc.add {
				t.Fatalf("%v -> %v: del %q add %q, want del %q add %q", tc.cur, tc.want, str(del), str(add), tc.del, tc.add)
			}
		}
	}
}
