package oracletest

import (
	"strings"
	"testing"

	"github.com/nftguard/nftguard/engine/nftsyntax"
	"github.com/nftguard/nftguard/engine/nftwire"
	"github.com/nftguard/nftguard/internal/testns"
)

// refusedCase is a set nftsyntax must refuse with a clear error. nftOK
// records what nft 1.0.6 does with the same declaration: false when nft
// refuses it too, true when nft accepts it (a documented gap of the subset:
// refused, never half-compiled).
type refusedCase struct {
	c      setCase
	errHas string
	nftOK  bool
}

var refusedCases = []refusedCase{
	{c: setCase{name: "rpfx", key: "ipv4_addr", elems: keys("10.0.0.0/8")}, errHas: "needs flags interval"},
	{c: setCase{name: "rrng", key: "inet_service", elems: keys("80-90")}, errHas: "needs flags interval"},
	{c: setCase{name: "rwild", key: "ifname", elems: keys(`"veth*"`)}, errHas: "needs flags interval"},
	{c: setCase{name: "rcrng", key: "ipv4_addr . inet_service", elems: keys("10.0.0.1 . 80-90")}, errHas: "needs flags interval"},
	{c: setCase{name: "rovl", key: "ipv4_addr", interval: true, elems: keys("10.0.0.0/8", "10.1.0.0/16")}, errHas: "overlaps"},
	{c: setCase{name: "rovl2", key: "inet_service", interval: true, elems: keys("80-90", "85-100")}, errHas: "overlaps"},
	{c: setCase{name: "rcovl", key: "ipv4_addr . inet_service", interval: true, elems: keys("10.0.0.0/8 . 80-90", "10.1.1.1 . 85")}, errHas: "overlaps"},
	{c: setCase{name: "rmkr", key: "mark", interval: true, elems: keys("0x00000010-0x0000001f")}, errHas: "not supported", nftOK: true},
	{c: setCase{name: "rdup", key: "ipv4_addr", elems: keys("10.0.0.1", "10.0.0.1")}, errHas: "duplicate", nftOK: true},
	{c: setCase{name: "rv", key: "ipv4_addr", data: "verdict", elems: kv("10.0.0.1", "jump")}, errHas: "verdict"},
	{c: setCase{name: "rifl", key: "ifname", elems: keys(`"veth0123456789ab"`)}, errHas: "invalid ifname"},
}

// TestOracleRefusedElements checks that what nftsyntax refuses is refused
// with a clear error, and records whether nft accepts it.
func TestOracleRefusedElements(t *testing.T) {
	ns := testns.New(t, "orcr")
	for _, rc := range refusedCases {
		c := rc.c
		t.Run(c.name, func(t *testing.T) {
			decl, err := nftsyntax.ParseSetDecl(c.name, c.key, c.data, c.interval)
			if err != nil {
				t.Fatal(err)
			}
			texts := make([]nftsyntax.ElementText, len(c.elems))
			for i, e := range c.elems {
				texts[i] = nftsyntax.ElementText{Key: e.Key, Value: e.Value}
			}
			_, err = nftsyntax.EncodeElements(decl, texts)
			if err == nil || !strings.Contains(err.Error(), rc.errHas) {
				t.Errorf("EncodeElements: got error %v, want one containing %q", err, rc.errHas)
			}
			_, nerr := ns.Exec(nftText([]setCase{c}), "nft", "-f", "-")
			if nerr == nil {
				ns.MustExec(t, "", "nft", "delete", "table", "inet", tableName)
			}
			if (nerr == nil) != rc.nftOK {
				t.Errorf("nft -f accepted=%v, want %v (nft error: %v)", nerr == nil, rc.nftOK, nerr)
			}
			if rc.nftOK {
				t.Logf("gap: nft accepts what nftsyntax refuses: %v", err)
			}
		})
	}
}

// TestKernelIntervalDeleteOrder pins the kernel behaviour behind the engine
// resync failures: on this kernel (6.18) a DELSETELEM of a plain interval set
// must carry each interval's start element immediately followed by its end
// element, as nft sends them; any other order fails with ENOENT.
func TestKernelIntervalDeleteOrder(t *testing.T) {
	ns := testns.New(t, "orck")
	start0, end0 := nftwire.Elem{Key: []byte{0, 0, 0, 0}}, nftwire.Elem{Key: []byte{1, 0, 0, 0}, IntervalEnd: true}
	start10, end10 := nftwire.Elem{Key: []byte{10, 0, 0, 0}}, nftwire.Elem{Key: []byte{11, 0, 0, 0}, IntervalEnd: true}
	for _, tc := range []struct {
		name  string
		elems []nftwire.Elem
		ok    bool
	}{
		{"start-end pairs", []nftwire.Elem{start0, end0, start10, end10}, true},
		{"pairs reversed", []nftwire.Elem{start10, end10, start0, end0}, true},
		{"end-start pairs", []nftwire.Elem{end0, start0, end10, start10}, false},
		{"starts then ends", []nftwire.Elem{start0, start10, end0, end10}, false},
	} {
		ns.MustExec(t, "table inet nftguard { set s { type ipv4_addr; flags interval; elements = { 10.0.0.0/8, 0.0.0.0/8 }; }; }", "nft", "-f", "-")
		err := deleteElems(ns, "s", tc.elems)
		if (err == nil) != tc.ok {
			t.Errorf("%s: delete error %v, want ok=%v", tc.name, err, tc.ok)
		}
		ns.MustExec(t, "", "nft", "delete", "table", "inet", tableName)
	}
}
