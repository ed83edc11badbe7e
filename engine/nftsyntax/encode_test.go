package nftsyntax

import (
	"bytes"
	"testing"

	"github.com/google/nftables/expr"
	"golang.org/x/sys/unix"
)

// compiledExprs returns every expression the compiler emits for the test
// rules, plus hand-made ones covering the encoder's other branches.
func compiledExprs(t *testing.T) []expr.Any {
	t.Helper()
	sets := testSets()
	var out []expr.Any
	for _, c := range allRuleCases() {
		got, err := CompileRule(inet, c.in, sets)
		if err != nil {
			t.Fatalf("CompileRule(%q): %v", c.in, err)
		}
		out = append(out, got.Exprs...)
	}
	return append(out,
		&expr.Meta{Key: expr.MetaKeyMARK, SourceRegister: true, Register: 1},
		&expr.Payload{OperationType: expr.PayloadWrite, SourceRegister: 1, Base: expr.PayloadBaseNetworkHeader, Offset: 8, Len: 1, CsumType: expr.CsumTypeInet, CsumOffset: 10, CsumFlags: 1},
		&expr.Payload{OperationType: expr.PayloadWrite, SourceRegister: 1, Base: expr.PayloadBaseNetworkHeader, Offset: 8, Len: 1, CsumType: expr.CsumTypeInet, CsumOffset: 10},
		&expr.Lookup{SourceRegister: 1, DestRegister: 2, IsDestRegSet: true, SetName: "x", SetID: 7, Invert: true},
		&expr.Lookup{SetName: "x"},
		&expr.Counter{Bytes: 1 << 40, Packets: 3},
		&expr.Bitwise{SourceRegister: 1, DestRegister: 1, Len: 4, Mask: []byte{1, 2, 3, 4}, Xor: []byte{0, 0, 0, 0}},
		&expr.Immediate{Register: 1},
		&expr.Immediate{Register: 1, Data: []byte{1, 2, 3}},
		&expr.Cmp{Op: expr.CmpOpNeq, Register: 1, Data: []byte("eth0\x00")},
		&expr.Verdict{Kind: expr.VerdictJump, Chain: "some-chain"},
		&expr.Verdict{Kind: expr.VerdictDrop},
	)
}

func TestAppendExpr(t *testing.T) {
	prefix := []byte{9, 9, 9}
	for _, e := range compiledExprs(t) {
		want, err := expr.Marshal(byte(inet), e)
		if err != nil {
			t.Fatal(err)
		}
		got, err := AppendExpr(append([]byte(nil), prefix...), inet, e)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got[:len(prefix)], prefix) || !bytes.Equal(got[len(prefix):], want) {
			t.Errorf("AppendExpr(%T %+v):\n got  %x\n want %x", e, e, got[len(prefix):], want)
		}
	}
}

func TestCanonical(t *testing.T) {
	n := 0
	for _, e := range compiledExprs(t) {
		if !Canonical(e) {
			continue
		}
		n++
		b, err := AppendExpr(nil, inet, e)
		if err != nil {
			t.Fatal(err)
		}
		a, err := attrsOf(b)
		if err != nil {
			t.Fatal(err)
		}
		d, err := DecodeExpr(inet, string(bytes.TrimRight(a[unix.NFTA_EXPR_NAME], "\x00")), a[unix.NFTA_EXPR_DATA])
		if err != nil {
			t.Fatalf("decode %T: %v", e, err)
		}
		again, err := AppendExpr(nil, inet, d)
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
