package engine

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/mdlayher/netlink"
	"golang.org/x/sys/unix"

	"github.com/nftguard/nftguard/internal/nfnl"
)

// Attribute numbers golang.org/x/sys/unix does not define yet (values from
// the kernel's uapi nf_tables.h, which is stable ABI).
const (
	nftaTableUserdata    = 6
	nftaChainFlags       = 10
	nftaChainUserdata    = 12
	nftaSetDescConcat    = 2
	nftaSetFieldLen      = 1
	nftaSetElemKeyEnd    = 10
	nftSetConcat         = 0x80
	nftMsgDestroyTable   = 26
	nlaFNested           = unix.NLA_F_NESTED
	nlaTypeMask          = 0x3fff
	nfnlBatchGenID       = unix.NFNL_BATCH_GENID
	nlmsgHdrLen          = unix.SizeofNlMsghdr
	nfgenHdrLen          = 4
	nftDataVerdict       = unix.NFT_DATA_VERDICT
	elemChunkBytes       = 60 << 10 // NFTA_SET_ELEM_LIST_ELEMENTS has a 16-bit length
	defaultSocketBufSize = 4 << 20
)

// msgType is the nlmsg_type of an nf_tables message.
func msgType(m uint16) uint16 { return unix.NFNL_SUBSYS_NFTABLES<<8 | m }

// enc appends netlink messages and attributes to one buffer. Encoding by hand
// instead of through netlink.Message values keeps a 50k-rule batch to one
// allocation and lets us patch lengths in place.
type enc struct {
	b []byte
}

func (e *enc) pad() {
	for len(e.b)%4 != 0 {
		e.b = append(e.b, 0)
	}
}

// msg starts a message and returns its offset for end.
func (e *enc) msg(typ, flags uint16, seq uint32, fam byte, resID uint16) int {
	off := len(e.b)
	e.b = binary.NativeEndian.AppendUint32(e.b, 0)
	e.b = binary.NativeEndian.AppendUint16(e.b, typ)
	e.b = binary.NativeEndian.AppendUint16(e.b, flags)
	e.b = binary.NativeEndian.AppendUint32(e.b, seq)
	e.b = binary.NativeEndian.AppendUint32(e.b, 0)
	e.b = append(e.b, fam, unix.NFNETLINK_V0)
	e.b = binary.BigEndian.AppendUint16(e.b, resID)
	return off
}

func (e *enc) endMsg(off int) {
	e.pad()
	binary.NativeEndian.PutUint32(e.b[off:], uint32(len(e.b)-off))
}

func (e *enc) attr(typ uint16, data []byte) {
	e.b = binary.NativeEndian.AppendUint16(e.b, uint16(4+len(data)))
	e.b = binary.NativeEndian.AppendUint16(e.b, typ)
	e.b = append(e.b, data...)
	e.pad()
}

func (e *enc) str(typ uint16, s string) {
	e.b = binary.NativeEndian.AppendUint16(e.b, uint16(4+len(s)+1))
	e.b = binary.NativeEndian.AppendUint16(e.b, typ)
	e.b = append(e.b, s...)
	e.b = append(e.b, 0)
	e.pad()
}

func (e *enc) u32(typ uint16, v uint32) {
	var d [4]byte
	binary.BigEndian.PutUint32(d[:], v)
	e.attr(typ, d[:])
}

func (e *enc) u64(typ uint16, v uint64) {
	var d [8]byte
	binary.BigEndian.PutUint64(d[:], v)
	e.attr(typ, d[:])
}

func (e *enc) nest(typ uint16) int {
	off := len(e.b)
	e.b = binary.NativeEndian.AppendUint16(e.b, 0)
	e.b = binary.NativeEndian.AppendUint16(e.b, typ|nlaFNested)
	return off
}

// endNest closes a nested attribute; it fails rather than wrap a length that
// does not fit 16 bits (the google/nftables element-count bug).
func (e *enc) endNest(off int) error {
	n := len(e.b) - off
	if n > 0xffff {
		return fmt.Errorf("netlink attribute of %d bytes exceeds 65535", n)
	}
	binary.NativeEndian.PutUint16(e.b[off:], uint16(n))
	return nil
}

// attrs decodes a flat attribute list; nested payloads stay raw.
func attrs(b []byte) (map[uint16][]byte, error) {
	m := make(map[uint16][]byte, 8)
	err := walkAttrs(b, func(typ uint16, data []byte) { m[typ] = data })
	return m, err
}

func walkAttrs(b []byte, fn func(typ uint16, data []byte)) error {
	for len(b) >= 4 {
		l := int(binary.NativeEndian.Uint16(b))
		typ := binary.NativeEndian.Uint16(b[2:]) & nlaTypeMask
		if l < 4 || l > len(b) {
			return errors.New("malformed netlink attribute")
		}
		fn(typ, b[4:l])
		al := (l + 3) &^ 3
		if al > len(b) {
			al = len(b)
		}
		b = b[al:]
	}
	return nil
}

func be32(b []byte) uint32 {
	if len(b) < 4 {
		return 0
	}
	return binary.BigEndian.Uint32(b)
}

func be64(b []byte) uint64 {
	if len(b) < 8 {
		return 0
	}
	return binary.BigEndian.Uint64(b)
}

func cstr(b []byte) string {
	for i, c := range b {
		if c == 0 {
			return string(b[:i])
		}
	}
	return string(b)
}

// dialIn creates a netfilter netlink socket inside the network namespace at
// path (the caller's own namespace when path is ""); see nfnl.InNetNS for
// why no namespace descriptor outlives the call.
func dialIn(path string) (*netlink.Conn, error) {
	if path == "" {
		return netlink.Dial(unix.NETLINK_NETFILTER, nil)
	}
	var c *netlink.Conn
	err := nfnl.InNetNS(path, func() error {
		var err error
		c, err = netlink.Dial(unix.NETLINK_NETFILTER, nil)
		return err
	})
	if err != nil {
		if c != nil {
			c.Close()
		}
		return nil, err
	}
	return c, nil
}

// forceBuffers raises the socket buffers beyond rmem_max/wmem_max, which
// needs CAP_NET_ADMIN (the engine needs it anyway to write nftables).
func forceBuffers(c *netlink.Conn, snd, rcv int) error {
	rc, err := c.SyscallConn()
	if err != nil {
		return err
	}
	var serr error
	err = rc.Control(func(fd uintptr) {
		if snd > 0 {
			if e := unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_SNDBUFFORCE, snd); e != nil {
				serr = fmt.Errorf("SO_SNDBUFFORCE: %w", e)
				return
			}
		}
		if rcv > 0 {
			if e := unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_RCVBUFFORCE, rcv); e != nil {
				serr = fmt.Errorf("SO_RCVBUFFORCE: %w", e)
			}
		}
	})
	if err != nil {
		return err
	}
	return serr
}

// rawMsg is one received netlink message.
type rawMsg struct {
	typ   uint16
	flags uint16
	seq   uint32
	pid   uint32
	data  []byte // after the nlmsghdr
}

func parseMsgs(b []byte, out []rawMsg) ([]rawMsg, error) {
	for len(b) >= nlmsgHdrLen {
		l := int(binary.NativeEndian.Uint32(b))
		if l < nlmsgHdrLen || l > len(b) {
			return out, errors.New("malformed netlink message")
		}
		out = append(out, rawMsg{
			typ:   binary.NativeEndian.Uint16(b[4:]),
			flags: binary.NativeEndian.Uint16(b[6:]),
			seq:   binary.NativeEndian.Uint32(b[8:]),
			pid:   binary.NativeEndian.Uint32(b[12:]),
			data:  b[nlmsgHdrLen:l],
		})
		al := (l + 3) &^ 3
		if al > len(b) {
			al = len(b)
		}
		b = b[al:]
	}
	return out, nil
}

// recvRaw reads one datagram, waiting (up to the conn's read deadline) for
// one to arrive.
func recvRaw(c *netlink.Conn, buf []byte) (int, error) {
	rc, err := c.SyscallConn()
	if err != nil {
		return 0, err
	}
	var n int
	var rerr error
	err = rc.Read(func(fd uintptr) bool {
		n, _, rerr = unix.Recvfrom(int(fd), buf, unix.MSG_DONTWAIT)
		return rerr != unix.EAGAIN && rerr != unix.EWOULDBLOCK
	})
	if err != nil {
		return 0, err
	}
	return n, rerr
}

func sendRaw(c *netlink.Conn, b []byte) error {
	rc, err := c.SyscallConn()
	if err != nil {
		return err
	}
	var serr error
	err = rc.Write(func(fd uintptr) bool {
		serr = unix.Sendto(int(fd), b, 0, &unix.SockaddrNetlink{Family: unix.AF_NETLINK})
		return serr != unix.EAGAIN && serr != unix.EWOULDBLOCK
	})
	if err != nil {
		return err
	}
	return serr
}

// Base chain policies (NF_DROP, NF_ACCEPT in linux/netfilter.h).
const (
	nfDrop   = 0
	nfAccept = 1
)
