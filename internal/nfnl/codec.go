package nfnl

import (
	"encoding/binary"
	"errors"
	"fmt"

	"golang.org/x/sys/unix"
)

// Sizes of the headers every nfnetlink message starts with.
const (
	NlmsgHdrLen = unix.SizeofNlMsghdr // struct nlmsghdr
	NfgenHdrLen = 4                   // struct nfgenmsg: family, version, res_id
)

// attrTypeMask strips NLA_F_NESTED and NLA_F_NET_BYTEORDER from a type.
const attrTypeMask = 0x3fff

// MsgType is the nlmsg_type of an nf_tables message.
func MsgType(m uint16) uint16 { return unix.NFNL_SUBSYS_NFTABLES<<8 | m }

// Encoder appends netlink messages and attributes to one buffer, B.
// Encoding by hand instead of through netlink.Message values keeps a
// 50k-rule batch to one allocation and lets callers patch lengths and flags
// in place. Multi-byte values in headers are native-endian (netlink), in
// U32/U64 attributes big-endian (what nf_tables expects).
type Encoder struct {
	B []byte
}

// Pad aligns B to 4 bytes.
func (e *Encoder) Pad() {
	for len(e.B)%4 != 0 {
		e.B = append(e.B, 0)
	}
}

// Msg starts a message (nlmsghdr + nfgenmsg) and returns its offset for
// EndMsg.
func (e *Encoder) Msg(typ, flags uint16, seq uint32, fam byte, resID uint16) int {
	off := len(e.B)
	e.B = binary.NativeEndian.AppendUint32(e.B, 0)
	e.B = binary.NativeEndian.AppendUint16(e.B, typ)
	e.B = binary.NativeEndian.AppendUint16(e.B, flags)
	e.B = binary.NativeEndian.AppendUint32(e.B, seq)
	e.B = binary.NativeEndian.AppendUint32(e.B, 0)
	e.B = append(e.B, fam, unix.NFNETLINK_V0)
	e.B = binary.BigEndian.AppendUint16(e.B, resID)
	return off
}

// EndMsg pads the message that starts at off and writes its length.
func (e *Encoder) EndMsg(off int) {
	e.Pad()
	binary.NativeEndian.PutUint32(e.B[off:], uint32(len(e.B)-off))
}

// Attr appends one attribute.
func (e *Encoder) Attr(typ uint16, data []byte) {
	e.B = binary.NativeEndian.AppendUint16(e.B, uint16(4+len(data)))
	e.B = binary.NativeEndian.AppendUint16(e.B, typ)
	e.B = append(e.B, data...)
	e.Pad()
}

// Str appends a NUL-terminated string attribute.
func (e *Encoder) Str(typ uint16, s string) {
	e.B = binary.NativeEndian.AppendUint16(e.B, uint16(4+len(s)+1))
	e.B = binary.NativeEndian.AppendUint16(e.B, typ)
	e.B = append(e.B, s...)
	e.B = append(e.B, 0)
	e.Pad()
}

// U32 appends a big-endian 32-bit attribute.
func (e *Encoder) U32(typ uint16, v uint32) {
	var d [4]byte
	binary.BigEndian.PutUint32(d[:], v)
	e.Attr(typ, d[:])
}

// U64 appends a big-endian 64-bit attribute.
func (e *Encoder) U64(typ uint16, v uint64) {
	var d [8]byte
	binary.BigEndian.PutUint64(d[:], v)
	e.Attr(typ, d[:])
}

// Nest starts a nested attribute and returns its offset for EndNest.
func (e *Encoder) Nest(typ uint16) int {
	off := len(e.B)
	e.B = binary.NativeEndian.AppendUint16(e.B, 0)
	e.B = binary.NativeEndian.AppendUint16(e.B, typ|unix.NLA_F_NESTED)
	return off
}

// EndNest closes a nested attribute; it fails rather than wrap a length
// that does not fit 16 bits (the google/nftables element-count bug).
func (e *Encoder) EndNest(off int) error {
	n := len(e.B) - off
	if n > 0xffff {
		return fmt.Errorf("netlink attribute of %d bytes exceeds 65535", n)
	}
	binary.NativeEndian.PutUint16(e.B[off:], uint16(n))
	return nil
}

// Msg is one received netlink message.
type Msg struct {
	Type  uint16
	Flags uint16
	Seq   uint32
	Pid   uint32
	Data  []byte // after the nlmsghdr; aliases the receive buffer
}

// ParseMsgs appends the messages of one datagram to out.
func ParseMsgs(b []byte, out []Msg) ([]Msg, error) {
	for len(b) >= NlmsgHdrLen {
		l := int(binary.NativeEndian.Uint32(b))
		if l < NlmsgHdrLen || l > len(b) {
			return out, errors.New("malformed netlink message")
		}
		out = append(out, Msg{
			Type:  binary.NativeEndian.Uint16(b[4:]),
			Flags: binary.NativeEndian.Uint16(b[6:]),
			Seq:   binary.NativeEndian.Uint32(b[8:]),
			Pid:   binary.NativeEndian.Uint32(b[12:]),
			Data:  b[NlmsgHdrLen:l],
		})
		b = b[min(align(l), len(b)):]
	}
	return out, nil
}

func align(n int) int { return (n + 3) &^ 3 }

// WalkAttrs calls fn for each attribute of one level, in order; nested
// payloads stay raw. The type has the nested and byte-order flags removed.
func WalkAttrs(b []byte, fn func(typ uint16, data []byte)) error {
	for len(b) >= 4 {
		l := int(binary.NativeEndian.Uint16(b))
		typ := binary.NativeEndian.Uint16(b[2:]) & attrTypeMask
		if l < 4 || l > len(b) {
			return errors.New("malformed netlink attribute")
		}
		fn(typ, b[4:l])
		b = b[min(align(l), len(b)):]
	}
	return nil
}

// Attrs decodes one level of attributes by type (the last of a type wins).
func Attrs(b []byte) (map[uint16][]byte, error) {
	m := make(map[uint16][]byte, 8)
	err := WalkAttrs(b, func(typ uint16, data []byte) { m[typ] = data })
	return m, err
}

// AttrList returns the payloads of one level of attributes in order (for
// NFTA_LIST_ELEM lists).
func AttrList(b []byte) ([][]byte, error) {
	var out [][]byte
	err := WalkAttrs(b, func(_ uint16, data []byte) { out = append(out, data) })
	return out, err
}

// BE32 reads a big-endian 32-bit attribute (0 if it is too short).
func BE32(b []byte) uint32 {
	if len(b) < 4 {
		return 0
	}
	return binary.BigEndian.Uint32(b)
}

// BE64 reads a big-endian 64-bit attribute (0 if it is too short).
func BE64(b []byte) uint64 {
	if len(b) < 8 {
		return 0
	}
	return binary.BigEndian.Uint64(b)
}

// CStr reads a string attribute up to its NUL.
func CStr(b []byte) string {
	for i, c := range b {
		if c == 0 {
			return string(b[:i])
		}
	}
	return string(b)
}

// ErrCode extracts the errno of an NLMSG_ERROR payload (0 for an ACK).
func ErrCode(data []byte) unix.Errno {
	if len(data) < 4 {
		return unix.EPROTO
	}
	return unix.Errno(-int32(binary.NativeEndian.Uint32(data)))
}
