package nftsyntax

import (
	"bytes"
	"testing"

	"github.com/google/nftables/expr"
	"golang.org/x/sys/unix"

	"github.com/nftguard/nftguard/engine/nftwire"
)

// compiledExprs returns every expression the compiler emits for the test
// rules, plus hand-made ones covering the encoder's other branches.
func compiledExprs(t *testing.T) []nftwire.Expr {
	t.Helper()
	sets := testSets()
	var out []nftwire.Expr
	for _, c := range allRuleCases() {
		got, err := CompileRule(inet, c.in, sets)
		if err != nil {
			t.Fatalf("CompileRule(%q): %v", c.in, err)
		}
		out = append(out, got.Exprs...)
	}
	return append(out,
		&nftwire.Meta{Key: nftwire.MetaKeyMARK, SourceRegister: true, Register: 1},
		&nftwire.Payload{OperationType: nftwire.PayloadWrite, SourceRegister: 1, Base: nftwire.PayloadBaseNetworkHeader, Offset: 8, Len: 1, CsumType: nftwire.CsumTypeInet, CsumOffset: 10, CsumFlags: 1},
		&nftwire.Payload{OperationType: nftwire.PayloadWrite, SourceRegister: 1, Base: nftwire.PayloadBaseNetworkHeader, Offset: 8, Len: 1, CsumType: nftwire.CsumTypeInet, CsumOffset: 10},
		&nftwire.Lookup{SourceRegister: 1, DestRegister: 2, IsDestRegSet: true, SetName: "x", SetID: 7, Invert: true},
		&nftwire.Lookup{SetName: "x"},
		&nftwire.Counter{Bytes: 1 << 40, Packets: 3},
		&nftwire.Bitwise{SourceRegister: 1, DestRegister: 1, Len: 4, Mask: []byte{1, 2, 3, 4}, Xor: []byte{0, 0, 0, 0}},
		&nftwire.Immediate{Register: 1},
		&nftwire.Immediate{Register: 1, Data: []byte{1, 2, 3}},
		&nftwire.Cmp{Op: nftwire.CmpOpNeq, Register: 1, Data: []byte("eth0\x00")},
		&nftwire.Verdict{Kind: nftwire.VerdictJump, Chain: "some-chain"},
		&nftwire.Verdict{Kind: nftwire.VerdictDrop},
	)
}

func TestAppendExpr(t *testing.T) {
	prefix := []byte{9, 9, 9}
	for _, e := range compiledExprs(t) {
		want, err := expr.Marshal(byte(inet), e)
		if err != nil {
			t.Fatal(err)
		}
		got, err := nftwire.AppendExpr(append([]byte(nil), prefix...), inet, e)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got[:len(prefix)], prefix) || !bytes.Equal(got[len(prefix):], want) {
			t.Errorf("nftwire.AppendExpr(%T %+v):\n got  %x\n want %x", e, e, got[len(prefix):], want)
		}
	}
}

func TestCanonical(t *testing.T) {
	n := 0
	for _, e := range compiledExprs(t) {
		if !nftwire.Canonical(e) {
			continue
		}
		n++
		b, err := nftwire.AppendExpr(nil, inet, e)
		if err != nil {
			t.Fatal(err)
		}
		a, err := attrsOf(b)
		if err != nil {
			t.Fatal(err)
		}
		d, err := nftwire.DecodeExpr(inet, string(bytes.TrimRight(a[unix.NFTA_EXPR_NAME], "\x00")), a[unix.NFTA_EXPR_DATA])
		if err != nil {
			t.Fatalf("decode %T: %v", e, err)
		}
		again, err := nftwire.AppendExpr(nil, inet, d)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(again, b) {
			t.Errorf("%T %+v is not canonical as encoded:\n encoded %x\n again   %x", e, e, b, again)
		}
	}
	if n < 100 {
		t.Fatalf("only %d canonical expressions checked", n)
	}
}

func attrsOf(b []byte) (map[uint16][]byte, error) {
	m := map[uint16][]byte{}
	for len(b) >= 4 {
		l := int(b[0]) | int(b[1])<<8
		typ := (uint16(b[2]) | uint16(b[3])<<8) & 0x3fff
		if l < 4 || l > len(b) {
			return nil, bytes.ErrTooLarge
		}
		m[typ] = b[4:l]
		b = b[min((l+3)&^3, len(b)):]
	}
	return m, nil
}
