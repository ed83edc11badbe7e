package nftwire

import (
	"encoding/binary"

	"github.com/google/nftables/expr"
	"golang.org/x/sys/unix"
)

// AppendExpr appends the encoding of one expression (NFTA_EXPR_NAME and
// NFTA_EXPR_DATA), byte for byte what expr.Marshal returns for it, to b.
// The expressions nearly every rule is made of are encoded here directly
// into the caller's buffer, because google/nftables builds each nested
// attribute in a buffer of its own (a dozen allocations per expression);
// anything else goes through expr.Marshal. TestAppendExpr holds the two
// encoders to the same bytes.
func AppendExpr(b []byte, fam Family, e Expr) ([]byte, error) {
	var d, v, vd int // offsets of open nested attributes
	switch x := e.(type) {
	case *expr.Meta:
		b = putstr(b, unix.NFTA_EXPR_NAME, "meta")
		b, d = nest(b, unix.NFTA_EXPR_DATA)
		b = putu32(b, unix.NFTA_META_KEY, uint32(x.Key))
		if x.SourceRegister {
			b = putu32(b, unix.NFTA_META_SREG, x.Register)
		} else {
			b = putu32(b, unix.NFTA_META_DREG, x.Register)
		}
		endNest(b, d)
	case *expr.Cmp:
		b = putstr(b, unix.NFTA_EXPR_NAME, "cmp")
		b, d = nest(b, unix.NFTA_EXPR_DATA)
		b = putu32(b, unix.NFTA_CMP_SREG, x.Register)
		b = putu32(b, unix.NFTA_CMP_OP, uint32(x.Op))
		b, v = nest(b, unix.NFTA_CMP_DATA)
		b = putattr(b, unix.NFTA_DATA_VALUE, x.Data)
		endNest(b, v)
		endNest(b, d)
	case *expr.Payload:
		b = putstr(b, unix.NFTA_EXPR_NAME, "payload")
		b, d = nest(b, unix.NFTA_EXPR_DATA)
		if x.OperationType == expr.PayloadWrite {
			b = putu32(b, unix.NFTA_PAYLOAD_SREG, x.SourceRegister)
		} else {
			b = putu32(b, unix.NFTA_PAYLOAD_DREG, x.DestRegister)
		}
		b = putu32(b, unix.NFTA_PAYLOAD_BASE, uint32(x.Base))
		b = putu32(b, unix.NFTA_PAYLOAD_OFFSET, x.Offset)
		b = putu32(b, unix.NFTA_PAYLOAD_LEN, x.Len)
		if x.CsumType > 0 {
			b = putu32(b, unix.NFTA_PAYLOAD_CSUM_TYPE, uint32(x.CsumType))
			b = putu32(b, unix.NFTA_PAYLOAD_CSUM_OFFSET, x.CsumOffset)
			if x.CsumFlags > 0 {
				b = putu32(b, unix.NFTA_PAYLOAD_CSUM_FLAGS, x.CsumFlags)
			}
		}
		endNest(b, d)
	case *expr.Immediate:
		b = putstr(b, unix.NFTA_EXPR_NAME, "immediate")
		b, d = nest(b, unix.NFTA_EXPR_DATA)
		b = putu32(b, unix.NFTA_IMMEDIATE_DREG, x.Register)
		b, v = nest(b, unix.NFTA_IMMEDIATE_DATA)
		b = putattr(b, unix.NFTA_DATA_VALUE, x.Data)
		endNest(b, v)
		endNest(b, d)
	case *expr.Verdict:
		b = putstr(b, unix.NFTA_EXPR_NAME, "immediate")
		b, d = nest(b, unix.NFTA_EXPR_DATA)
		b = putu32(b, unix.NFTA_IMMEDIATE_DREG, unix.NFT_REG_VERDICT)
		b, v = nest(b, unix.NFTA_IMMEDIATE_DATA)
		b, vd = nest(b, unix.NFTA_DATA_VERDICT)
		b = putu32(b, unix.NFTA_VERDICT_CODE, uint32(x.Kind))
		if x.Chain != "" {
			b = putstr(b, unix.NFTA_VERDICT_CHAIN, x.Chain)
		}
		endNest(b, vd)
		endNest(b, v)
		endNest(b, d)
	case *expr.Lookup:
		b = putstr(b, unix.NFTA_EXPR_NAME, "lookup")
		b, d = nest(b, unix.NFTA_EXPR_DATA)
		if x.SourceRegister != 0 {
			b = putu32(b, unix.NFTA_LOOKUP_SREG, x.SourceRegister)
		}
		if x.IsDestRegSet {
			b = putu32(b, unix.NFTA_LOOKUP_DREG, x.DestRegister)
		}
		if x.Invert {
			b = putu32(b, unix.NFTA_LOOKUP_FLAGS, unix.NFT_LOOKUP_F_INV)
		}
		b = putstr(b, unix.NFTA_LOOKUP_SET, x.SetName)
		b = putu32(b, unix.NFTA_LOOKUP_SET_ID, x.SetID)
		endNest(b, d)
	case *expr.Counter:
		b = putstr(b, unix.NFTA_EXPR_NAME, "counter")
		b, d = nest(b, unix.NFTA_EXPR_DATA)
		b = putu64(b, unix.NFTA_COUNTER_BYTES, x.Bytes)
		b = putu64(b, unix.NFTA_COUNTER_PACKETS, x.Packets)
		endNest(b, d)
	case *expr.Bitwise:
		b = putstr(b, unix.NFTA_EXPR_NAME, "bitwise")
		b, d = nest(b, unix.NFTA_EXPR_DATA)
		b = putu32(b, unix.NFTA_BITWISE_SREG, x.SourceRegister)
		b = putu32(b, unix.NFTA_BITWISE_DREG, x.DestRegister)
		b = putu32(b, unix.NFTA_BITWISE_LEN, x.Len)
		b, v = nest(b, unix.NFTA_BITWISE_MASK)
		b = putattr(b, unix.NFTA_DATA_VALUE, x.Mask)
		endNest(b, v)
		b, v = nest(b, unix.NFTA_BITWISE_XOR)
		b = putattr(b, unix.NFTA_DATA_VALUE, x.Xor)
		endNest(b, v)
		endNest(b, d)
	default:
		eb, err := expr.Marshal(byte(fam), e)
		if err != nil {
			return b, err
		}
		return append(b, eb...), nil
	}
	return b, nil
}

// Canonical reports whether an expression as this package's compiler builds
// it is in canonical form: decoding its encoding (DecodeExpr) and encoding
// the result again gives the same bytes, so a caller that compares rules
// by the re-encoding of what it decodes (as the engine does to compare its
// rules with the kernel's) can take the encoding as it is. Only types whose
// google/nftables decoder reads back every attribute its encoder writes are
// listed; TestCanonical checks the claim on every rule of the compiler's
// test cases. An immediate that loads the verdict register without data
// decodes as a Verdict, so it is not canonical as an Immediate.
func Canonical(e Expr) bool {
	switch x := e.(type) {
	case *expr.Meta, *expr.Cmp, *expr.Payload, *expr.Verdict, *expr.Lookup, *expr.Counter, *expr.Bitwise:
		return true
	case *expr.Immediate:
		return !(x.Register == unix.NFT_REG_VERDICT && len(x.Data) == 0)
	}
	return false
}

// The put functions append netlink attributes as netlink.MarshalAttributes
// lays them out (native-endian header, unpadded length, zero padding).
// They take and return the buffer rather than update a struct through a
// pointer, so that a caller's stack buffer stays on the stack.

func putattr(b []byte, typ uint16, data []byte) []byte {
	b = binary.NativeEndian.AppendUint16(b, uint16(4+len(data)))
	b = binary.NativeEndian.AppendUint16(b, typ)
	b = append(b, data...)
	return pad(b, len(data))
}

// pad aligns an attribute whose payload is n bytes to 4 bytes.
func pad(b []byte, n int) []byte {
	return append(b, zeros[:(4-n%4)%4]...)
}

var zeros [4]byte

// putstr appends a NUL-terminated string attribute.
func putstr(b []byte, typ uint16, s string) []byte {
	b = binary.NativeEndian.AppendUint16(b, uint16(4+len(s)+1))
	b = binary.NativeEndian.AppendUint16(b, typ)
	b = append(b, s...)
	b = append(b, 0)
	return pad(b, len(s)+1)
}

func putu32(b []byte, typ uint16, v uint32) []byte {
	b = binary.NativeEndian.AppendUint16(b, 8)
	b = binary.NativeEndian.AppendUint16(b, typ)
	return binary.BigEndian.AppendUint32(b, v)
}

func putu64(b []byte, typ uint16, v uint64) []byte {
	b = binary.NativeEndian.AppendUint16(b, 12)
	b = binary.NativeEndian.AppendUint16(b, typ)
	return binary.BigEndian.AppendUint64(b, v)
}

// nest starts a nested attribute; endNest writes its length once its
// content is appended.
func nest(b []byte, typ uint16) ([]byte, int) {
	off := len(b)
	b = binary.NativeEndian.AppendUint16(b, 0)
	b = binary.NativeEndian.AppendUint16(b, typ|unix.NLA_F_NESTED)
	return b, off
}

func endNest(b []byte, off int) {
	binary.NativeEndian.PutUint16(b[off:], uint16(len(b)-off))
}
