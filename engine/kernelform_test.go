package engine

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"net/netip"
	"sort"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/nftguard/nftguard/engine/nftwire"
	"github.com/nftguard/nftguard/internal/testns"
)

// Kernel-form builders: expressions exactly as nft 1.0.6 emits them for an
// inet table, so `nft list` renders what the tests write.

func be16(v uint16) []byte { return binary.BigEndian.AppendUint16(nil, v) }

func matchIPv4() []nftwire.Expr {
	return []nftwire.Expr{
		&nftwire.Meta{Key: nftwire.MetaKeyNFPROTO, Register: 1},
		&nftwire.Cmp{Op: nftwire.CmpOpEq, Register: 1, Data: []byte{unix.NFPROTO_IPV4}},
	}
}

func matchTCPDport(port uint16) []nftwire.Expr {
	return []nftwire.Expr{
		&nftwire.Meta{Key: nftwire.MetaKeyL4PROTO, Register: 1},
		&nftwire.Cmp{Op: nftwire.CmpOpEq, Register: 1, Data: []byte{unix.IPPROTO_TCP}},
		&nftwire.Payload{DestRegister: 1, Base: nftwire.PayloadBaseTransportHeader, Offset: 2, Len: 2},
		&nftwire.Cmp{Op: nftwire.CmpOpEq, Register: 1, Data: be16(port)},
	}
}

func loadIPv4(offset uint32) nftwire.Expr {
	return &nftwire.Payload{DestRegister: 1, Base: nftwire.PayloadBaseNetworkHeader, Offset: offset, Len: 4}
}

// ruleDaddrDport is "ip daddr A tcp dport P counter accept".
func ruleDaddrDport(a netip.Addr, port uint16, v nftwire.VerdictKind) *kernelRule {
	ip := a.As4()
	ex := matchIPv4()
	ex = append(ex, loadIPv4(16), &nftwire.Cmp{Op: nftwire.CmpOpEq, Register: 1, Data: ip[:]})
	ex = append(ex, matchTCPDport(port)...)
	ex = append(ex, &nftwire.Counter{}, &nftwire.Verdict{Kind: v})
	return &kernelRule{exprs: ex, text: fmt.Sprintf("ip daddr %s tcp dport %d counter %s", a, port, verdictName(v))}
}

// ruleSaddrInSet is "ip saddr @set accept".
func ruleSaddrInSet(set string, v nftwire.VerdictKind) *kernelRule {
	ex := matchIPv4()
	ex = append(ex, loadIPv4(12), &nftwire.Lookup{SourceRegister: 1, SetName: set}, &nftwire.Verdict{Kind: v})
	return &kernelRule{exprs: ex, text: "ip saddr @" + set + " " + verdictName(v)}
}

// ruleJump is "jump chain" with an nft comment.
func ruleJump(chain, comment string) *kernelRule {
	r := &kernelRule{exprs: []nftwire.Expr{&nftwire.Verdict{Kind: nftwire.VerdictJump, Chain: chain}}, text: "jump " + chain}
	if comment != "" {
		r.userdata = append([]byte{0, byte(len(comment) + 1)}, append([]byte(comment), 0)...)
	}
	return r
}

// ruleDaddrVmap is "ip daddr vmap { a : accept, b : drop }" with an
// anonymous verdict map.
func ruleDaddrVmap(acc, drop netip.Addr) *kernelRule {
	s := ipv4Set("", false)
	s.flags = unix.NFT_SET_ANONYMOUS | unix.NFT_SET_CONSTANT | unix.NFT_SET_MAP
	s.dataType = nftDataVerdict
	a, d := acc.As4(), drop.As4()
	s.add(nftwire.Elem{Key: a[:], Verdict: &nftwire.Verdict{Kind: nftwire.VerdictAccept}})
	s.add(nftwire.Elem{Key: d[:], Verdict: &nftwire.Verdict{Kind: nftwire.VerdictDrop}})
	ex := matchIPv4()
	ex = append(ex, loadIPv4(16), &nftwire.Lookup{SourceRegister: 1, DestRegister: 0, IsDestRegSet: true, SetName: "__set%d", SetID: 0})
	return &kernelRule{exprs: ex, anon: []*kernelSet{s}, text: "ip daddr vmap {...}"}
}

func verdictName(v nftwire.VerdictKind) string {
	switch v {
	case nftwire.VerdictAccept:
		return "accept"
	case nftwire.VerdictDrop:
		return "drop"
	}
	return fmt.Sprint(v)
}

// setUD is nft's set user data: key (and data) byte order.
func setUD(keyOrder uint32, dataOrder uint32) []byte {
	b := []byte{0, 4}
	b = binary.NativeEndian.AppendUint32(b, keyOrder)
	if dataOrder != 0 {
		b = append(b, 1, 4)
		b = binary.NativeEndian.AppendUint32(b, dataOrder)
	}
	return b
}

func ipv4Set(name string, interval bool) *kernelSet {
	s := &kernelSet{name: name, keyType: 7, keyLen: 4, elems: map[string]nftwire.Elem{}, userdata: setUD(2, 0)}
	if interval {
		s.flags |= unix.NFT_SET_INTERVAL
	}
	return s
}

func ip4(i int) netip.Addr {
	return netip.AddrFrom4([4]byte{10, byte(i >> 16), byte(i >> 8), byte(i)})
}

// bigTable builds nChains regular chains (jumped to from a base chain) with
// nRules rules in all, and an ipv4 set with nElems elements.
func bigTable(t testing.TB, nChains, nRules, nElems int) *kernelTable {
	t.Helper()
	k := newKernelTable()
	base := &kernelChain{name: "input", base: true, typ: "filter", hook: unix.NF_INET_LOCAL_IN, prio: 0, policy: 1}
	base.rules = append(base.rules, ruleSaddrInSet("allowed", nftwire.VerdictAccept))
	k.addChain(base)
	for c := 0; c < nChains; c++ {
		name := fmt.Sprintf("c%03d", c)
		base.rules = append(base.rules, ruleJump(name, ""))
		k.addChain(&kernelChain{name: name})
	}
	for i := 0; i < nRules; i++ {
		c := k.chains[fmt.Sprintf("c%03d", i%nChains)]
		c.rules = append(c.rules, ruleDaddrDport(ip4(i), uint16(1000+i%60000), nftwire.VerdictAccept))
	}
	s := ipv4Set("allowed", false)
	for i := 0; i < nElems; i++ {
		a := netip.AddrFrom4([4]byte{172, byte(i >> 16), byte(i >> 8), byte(i)}).As4()
		s.add(nftwire.Elem{Key: a[:]})
	}
	k.addSet(s)
	if err := k.prepare(unix.NFPROTO_INET); err != nil {
		t.Fatal(err)
	}
	return k
}

func newTestEngine(t testing.TB, ns *testns.NS, opts ...Option) *Engine {
	t.Helper()
	e, err := New(Table{Name: "nftguard"}, append([]Option{WithNetNS(ns.Path)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close() })
	return e
}

// readBack reads the table with a fresh engine (no cache).
func readBack(t testing.TB, ns *testns.NS) *kernelTable {
	t.Helper()
	e := newTestEngine(t, ns)
	k, err := e.read()
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// sameK reports the first difference between two kernel-form tables.
func sameK(a, b *kernelTable) error {
	if a == nil || b == nil {
		if a == b {
			return nil
		}
		return fmt.Errorf("one table missing (%v, %v)", a == nil, b == nil)
	}
	names := func(m map[string]*kernelChain) []string {
		var s []string
		for n := range m {
			s = append(s, n)
		}
		sort.Strings(s)
		return s
	}
	if an, bn := names(a.chains), names(b.chains); strings.Join(an, ",") != strings.Join(bn, ",") {
		return fmt.Errorf("chains %v != %v", an, bn)
	}
	for n, ca := range a.chains {
		cb := b.chains[n]
		if !ca.sameBase(cb) || ca.policy != cb.policy || !bytes.Equal(ca.userdata, cb.userdata) {
			return fmt.Errorf("chain %s: %+v != %+v", n, *ca, *cb)
		}
		if len(ca.rules) != len(cb.rules) {
			return fmt.Errorf("chain %s: %d rules != %d", n, len(ca.rules), len(cb.rules))
		}
		for i := range ca.rules {
			if ca.rules[i].key != cb.rules[i].key || ca.rules[i].key == "" {
				return fmt.Errorf("chain %s rule %d differs (%s / %s)", n, i+1, ca.rules[i].text, cb.rules[i].text)
			}
		}
	}
	if len(a.sets) != len(b.sets) {
		return fmt.Errorf("%d sets != %d", len(a.sets), len(b.sets))
	}
	for n, sa := range a.sets {
		sb, ok := b.sets[n]
		if !ok {
			return fmt.Errorf("set %s missing", n)
		}
		if sa.declKey() != sb.declKey() {
			return fmt.Errorf("set %s: declaration differs: %+v != %+v", n, sa, sb)
		}
		if len(sa.elems) != len(sb.elems) {
			return fmt.Errorf("set %s: %d elements != %d", n, len(sa.elems), len(sb.elems))
		}
		for id, ea := range sa.elems {
			eb, ok := sb.elems[id]
			if !ok || elemValue(ea) != elemValue(eb) {
				return fmt.Errorf("set %s: element %x differs", n, ea.Key)
			}
		}
	}
	return nil
}

func TestKernelFormRoundTrip(t *testing.T) {
	ns := testns.New(t, "eng")
	ctx := context.Background()
	e := newTestEngine(t, ns)
	want := bigTable(t, 3, 10, 20)
	// more features: a verdict map, an interval set, a concatenation, a
	// data map, an anonymous vmap, a comment, base chains of every hook.
	vm := ipv4Set("vm", false)
	vm.flags |= unix.NFT_SET_MAP
	vm.dataType = nftDataVerdict
	a := ip4(1).As4()
	vm.add(nftwire.Elem{Key: a[:], Verdict: &nftwire.Verdict{Kind: nftwire.VerdictJump, Chain: "c000"}})
	want.addSet(vm)
	iv := ipv4Set("nets", true)
	iv.add(nftwire.Elem{Key: []byte{0, 0, 0, 0}, IntervalEnd: true})
	iv.add(nftwire.Elem{Key: []byte{10, 0, 0, 0}})
	iv.add(nftwire.Elem{Key: []byte{11, 0, 0, 0}, IntervalEnd: true})
	want.addSet(iv)
	cc := &kernelSet{name: "svc", keyType: 7<<6 | 13, keyLen: 8, elems: map[string]nftwire.Elem{}, userdata: setUD(2, 0)}
	cc.add(nftwire.Elem{Key: []byte{10, 0, 0, 1, 0, 80, 0, 0}})
	want.addSet(cc)
	dm := ipv4Set("snat", false)
	dm.flags |= unix.NFT_SET_MAP
	dm.dataType, dm.dataLen, dm.userdata = 7, 4, setUD(2, 2)
	dm.add(nftwire.Elem{Key: a[:], Data: []byte{192, 168, 0, 1}})
	want.addSet(dm)
	for i, h := range []uint32{unix.NF_INET_PRE_ROUTING, unix.NF_INET_FORWARD, unix.NF_INET_LOCAL_OUT, unix.NF_INET_POST_ROUTING} {
		c := &kernelChain{name: fmt.Sprintf("hook%d", h), base: true, typ: "filter", hook: h, prio: int32(i*10 - 5), policy: uint32(i % 2)}
		c.rules = []*kernelRule{ruleDaddrVmap(ip4(1), ip4(2)), ruleJump("c001", "a comment")}
		want.addChain(c)
	}
	nat := &kernelChain{name: "nat", base: true, typ: "nat", hook: unix.NF_INET_POST_ROUTING, prio: 100, policy: 1}
	want.addChain(nat)
	if err := want.prepare(unix.NFPROTO_INET); err != nil {
		t.Fatal(err)
	}
	st, err := e.syncTable(ctx, want)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("first sync: %+v", st)
	if err := sameK(want, readBack(t, ns)); err != nil {
		t.Fatal(err)
	}
	out := ns.MustExec(t, "", "nft", "list", "table", "inet", "nftguard")
	for _, s := range []string{"ip daddr 10.0.0.1 tcp dport 1001 counter packets 0 bytes 0 accept", "jump c001 comment \"a comment\"", "ip saddr @allowed accept", "10.0.0.1 : jump c000", "ip daddr vmap { 10.0.0.1 : accept, 10.0.0.2 : drop }", "type nat hook postrouting priority srcnat", "10.0.0.1 . 80"} {
		if !strings.Contains(out, s) {
			t.Errorf("nft list lacks %q:\n%s", s, out)
		}
	}
	// Same state again: nothing to send, from the cache and from a fresh
	// engine's read.
	st, err = e.syncTable(ctx, want)
	if err != nil || st.Messages != 0 {
		t.Fatalf("second sync: %+v %v", st, err)
	}
	e.cache = nil
	st, err = e.syncTable(ctx, want)
	if err != nil || st.Messages != 0 || !st.Read {
		t.Fatalf("sync after read: %+v %v", st, err)
	}
}

func nftsyntaxElem(a, b, c, d byte) nftwire.Elem { return nftwire.Elem{Key: []byte{a, b, c, d}} }
