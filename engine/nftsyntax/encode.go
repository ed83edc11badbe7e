package nftsyntax

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
func AppendExpr(b []byte, fam Family, e expr.Any) ([]byte, error) {
	m := attrBuf{b: b}
	switch x := e.(type) {
	case *expr.Meta:
		m.str(unix.NFTA_EXPR_NAME, "meta")
		d := m.nest(unix.NFTA_EXPR_DATA)
		m.u32(unix.NFTA_META_KEY, uint32(x.Key))
		if x.SourceRegister {
			m.u32(unix.NFTA_META_SREG, x.Register)
		} else {
			m.u32(unix.NFTA_META_DREG, x.Register)
		}
		m.end(d)
	case *expr.Cmp:
		m.str(unix.NFTA_EXPR_NAME, "cmp")
		d := m.nest(unix.NFTA_EXPR_DATA)
		m.u32(unix.NFTA_CMP_SREG, x.Register)
		m.u32(unix.NFTA_CMP_OP, uint32(x.Op))
		v := m.nest(unix.NFTA_CMP_DATA)
		m.attr(unix.NFTA_DATA_VALUE, x.Data)
		m.end(v)
		m.end(d)
	case *expr.Payload:
		m.str(unix.NFTA_EXPR_NAME, "payload")
		d := m.nest(unix.NFTA_EXPR_DATA)
		if x.OperationType == expr.PayloadWrite {
			m.u32(unix.NFTA_PAYLOAD_SREG, x.SourceRegister)
		} else {
			m.u32(unix.NFTA_PAYLOAD_DREG, x.DestRegister)
		}
		m.u32(unix.NFTA_PAYLOAD_BASE, uint32(x.Base))
		m.u32(unix.NFTA_PAYLOAD_OFFSET, x.Offset)
		m.u32(unix.NFTA_PAYLOAD_LEN, x.Len)
		if x.CsumType > 0 {
			m.u32(unix.NFTA_PAYLOAD_CSUM_TYPE, uint32(x.CsumType))
			m.u32(unix.NFTA_PAYLOAD_CSUM_OFFSET, x.CsumOffset)
			if x.CsumFlags > 0 {
				m.u32(unix.NFTA_PAYLOAD_CSUM_FLAGS, x.CsumFlags)
			}
		}
		m.end(d)
	case *expr.Immediate:
		m.str(unix.NFTA_EXPR_NAME, "immediate")
		d := m.nest(unix.NFTA_EXPR_DATA)
		m.u32(unix.NFTA_IMMEDIATE_DREG, x.Register)
		v := m.nest(unix.NFTA_IMMEDIATE_DATA)
		m.attr(unix.NFTA_DATA_VALUE, x.Data)
		m.end(v)
		m.end(d)
	case *expr.Verdict:
		m.str(unix.NFTA_EXPR_NAME, "immediate")
		d := m.nest(unix.NFTA_EXPR_DATA)
		m.u32(unix.NFTA_IMMEDIATE_DREG, unix.NFT_REG_VERDICT)
		v := m.nest(unix.NFTA_IMMEDIATE_DATA)
		vd := m.nest(unix.NFTA_DATA_VERDICT)
		m.u32(unix.NFTA_VERDICT_CODE, uint32(x.Kind))
		if x.Chain != "" {
			m.str(unix.NFTA_VERDICT_CHAIN, x.Chain)
		}
		m.end(vd)
		m.end(v)
		m.end(d)
	case *expr.Lookup:
		m.str(unix.NFTA_EXPR_NAME, "lookup")
		d := m.nest(unix.NFTA_EXPR_DATA)
		if x.SourceRegister != 0 {
			m.u32(unix.NFTA_LOOKUP_SREG, x.SourceRegister)
		}
		if x.IsDestRegSet {
			m.u32(unix.NFTA_LOOKUP_DREG, x.DestRegister)
		}
		if x.Invert {
			m.u32(unix.NFTA_LOOKUP_FLAGS, unix.NFT_LOOKUP_F_INV)
		}
		m.str(unix.NFTA_LOOKUP_SET, x.SetName)
		m.u32(unix.NFTA_LOOKUP_SET_ID, x.SetID)
		m.end(d)
	case *expr.Counter:
		m.str(unix.NFTA_EXPR_NAME, "counter")
		d := m.nest(unix.NFTA_EXPR_DATA)
		m.u64(unix.NFTA_COUNTER_BYTES, x.Bytes)
		m.u64(unix.NFTA_COUNTER_PACKETS, x.Packets)
		m.end(d)
	case *expr.Bitwise:
		m.str(unix.NFTA_EXPR_NAME, "bitwise")
		d := m.nest(unix.NFTA_EXPR_DATA)
		m.u32(unix.NFTA_BITWISE_SREG, x.SourceRegister)
		m.u32(unix.NFTA_BITWISE_DREG, x.DestRegister)
		m.u32(unix.NFTA_BITWISE_LEN, x.Len)
		v := m.nest(unix.NFTA_BITWISE_MASK)
		m.attr(unix.NFTA_DATA_VALUE, x.Mask)
		m.end(v)
		v = m.nest(unix.NFTA_BITWISE_XOR)
		m.attr(unix.NFTA_DATA_VALUE, x.Xor)
		m.end(v)
		m.end(d)
	default:
		eb, err := expr.Marshal(byte(fam), e)
		if err != nil {
			return b, err
		}
		return append(b, eb...), nil
	}
	return m.b, nil
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
func Canonical(e expr.Any) bool {
	switch x := e.(type) {
	case *expr.Meta, *expr.Cmp, *expr.Payload, *expr.Verdict, *expr.Lookup, *expr.Counter, *expr.Bitwise:
		return true
	case *expr.Immediate:
		return !(x.Register == unix.NFT_REG_VERDICT && len(x.Data) == 0)
	}
	return false
}

// attrBuf appends netlink attributes as netlink.MarshalAttributes lays
// them out (native-endian header, unpadded length, zero padding).
type attrBuf struct{ b []byte }

func (m *attrBuf) attr(typ uint16, data []byte) {
	m.b = binary.NativeEndian.AppendUint16(m.b, uint16(4+len(data)))
	m.b = binary.NativeEndian.AppendUint16(m.b, typ)
	m.b = append(m.b, data...)
	m.pad(len(data))
}

// pad aligns an attribute whose payload is n bytes to 4 bytes.
func (m *attrBuf) pad(n int) {
	m.b = append(m.b, zeros[:(4-n%4)%4]...)
}

var zeros [4]byte

// str appends a NUL-terminated string attribute.
func (m *attrBuf) str(typ uint16, s string) {
	m.b = binary.NativeEndian.AppendUint16(m.b, uint16(4+len(s)+1))
	m.b = binary.NativeEndian.AppendUint16(m.b, typ)
	m.b = append(m.b, s...)
	m.b = append(m.b, 0)
	m.pad(len(s) + 1)
}

func (m *attrBuf) u32(typ uint16, v uint32) {
	m.b = binary.NativeEndian.AppendUint16(m.b, 8)
	m.b = binary.NativeEndian.AppendUint16(m.b, typ)
	m.b = binary.BigEndian.AppendUint32(m.b, v)
}

func (m *attrBuf) u64(typ uint16, v uint64) {
	m.b = binary.NativeEndian.AppendUint16(m.b, 12)
	m.b = binary.NativeEndian.AppendUint16(m.b, typ)
	m.b = binary.BigEndian.AppendUint64(m.b, v)
}

func (m *attrBuf) nest(typ uint16) int {
	off := len(m.b)
	m.b = binary.NativeEndian.AppendUint16(m.b, 0)
	m.b = binary.NativeEndian.AppendUint16(m.b, typ|unix.NLA_F_NESTED)
	return off
}

func (m *attrBuf) end(off int) {
	binary.NativeEndian.PutUint16(m.b[off:], uint16(len(m.b)-off))
}
