package engine

import (
	"context"
	"flag"
	"net/netip"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/nftguard/nftguard/engine/nftwire"
	"github.com/nftguard/nftguard/internal/testns"
)

var long = flag.Bool("long", false, "run the full-size and long-running engine tests")

func handles(k *kernelTable) map[uint64]string {
	m := map[uint64]string{}
	for _, c := range k.chains {
		for _, r := range c.rules {
			m[r.handle] = r.key
		}
	}
	return m
}

// TestBigAndIncremental programs 50k rules over 100 chains and 100k set
// elements in one transaction, reads them back exactly, then changes one
// element and one rule: O(1) messages, every other handle unchanged.
func TestBigAndIncremental(t *testing.T) {
	nRules, nElems := 50000, 100000
	ns := testns.New(t, "engbig")
	ctx := context.Background()
	e := newTestEngine(t, ns)
	want := bigTable(t, 100, nRules, nElems)
	st, err := e.syncTable(ctx, want)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("full program %d rules + %d elements: %v, %d messages, %d bytes", nRules, nElems, st.Duration, st.Messages, st.Bytes)
	start := time.Now()
	got := readBack(t, ns)
	t.Logf("read back: %v", time.Since(start))
	if err := sameK(want, got); err != nil {
		t.Fatal(err)
	}
	if n := len(got.sets["allowed"].elems); n != nElems {
		t.Fatalf("read back %d elements, want %d", n, nElems)
	}
	before := handles(got)

	// One element and one rule change.
	want2 := bigTable(t, 100, nRules, nElems)
	s := want2.sets["allowed"]
	gone := s.order[500]
	delete(s.elems, gone)
	s.order = append(s.order[:500], s.order[501:]...)
	s.add(nftwire.Elem{Key: []byte{192, 168, 9, 9}})
	c := want2.chains["c042"]
	c.rules[200] = ruleDaddrDport(netip.MustParseAddr("192.168.1.1"), 4242, nftwire.VerdictDrop)
	if err := want2.prepare(unix.NFPROTO_INET); err != nil {
		t.Fatal(err)
	}
	st, err = e.syncTable(ctx, want2)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("one rule + one element change at %d rules: %v, %d messages, %d operations, %d bytes, read=%v", nRules, st.Duration, st.Messages, st.Operations, st.Bytes, st.Read)
	if st.Messages > 4 || st.Operations != 4 {
		t.Errorf("change sent %d messages / %d operations, want <= 4 / 4", st.Messages, st.Operations)
	}
	got = readBack(t, ns)
	if err := sameK(want2, got); err != nil {
		t.Fatal(err)
	}
	after := handles(got)
	changed := 0
	for h, k := range before {
		if k2, ok := after[h]; !ok || k2 != k {
			changed++
		}
	}
	if changed != 1 {
		t.Errorf("%d rule handles changed, want 1", changed)
	}
	// A rule inserted in the middle and a rule moved keep the rest.
	want3 := bigTable(t, 100, nRules, nElems-1)
	c = want3.chains["c007"]
	moved := c.rules[3]
	c.rules = append(c.rules[:3], c.rules[4:]...)
	c.rules = append(c.rules[:100], append([]*kernelRule{moved, ruleDaddrDport(ip4(999999), 9, nftwire.VerdictDrop)}, c.rules[100:]...)...)
	want3.prepare(unix.NFPROTO_INET)
	st, err = e.syncTable(ctx, want3)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("move + insert + set rewrite: %+v", st)
	if err := sameK(want3, readBack(t, ns)); err != nil {
		t.Fatal(err)
	}
}
