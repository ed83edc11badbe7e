package nftwire

import (
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/nftables/expr"
	"golang.org/x/sys/unix"
)

func TestDecodeExpr(t *testing.T) {
	cases := []expr.Any{
		&expr.Byteorder{SourceRegister: 1, DestRegister: 1, Op: expr.ByteorderHton, Len: 4, Size: 4},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: []byte{6}},
		&expr.Verdict{Kind: expr.VerdictJump, Chain: "np_ing_x_a"},
		&expr.Lookup{SourceRegister: 1, SetName: "s", Invert: true},
	}
	for _, want := range cases {
		data, err := expr.MarshalExprData(unix.NFPROTO_INET, want)
		if err != nil {
			t.Fatal(err)
		}
		got, err := DecodeExpr(unix.NFPROTO_INET, exprName(t, want), data)
		if err != nil {
			t.Fatalf("%T: %v", want, err)
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("%T decoded (-want +got):\n%s", want, diff)
		}
	}
	if _, err := DecodeExpr(unix.NFPROTO_INET, "osf", nil); !errors.Is(err, ErrUnknownExpr) {
		t.Errorf("osf: %v, want ErrUnknownExpr", err)
	}
	if _, err := DecodeExpr(unix.NFPROTO_INET, "byteorder", []byte{8, 0, 1, 0, 0, 0, 0, 1}); err == nil {
		t.Error("a byteorder without DREG, OP, LEN and SIZE decoded")
	}
}

func exprName(t *testing.T, e expr.Any) string {
	switch e.(type) {
	case *expr.Byteorder:
		return "byteorder"
	case *expr.Cmp:
		return "cmp"
	case *expr.Verdict:
		return "immediate"
	case *expr.Lookup:
		return "lookup"
	}
	t.Fatalf("no name for %T", e)
	return ""
}
