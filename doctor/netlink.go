package doctor

import (
	"fmt"

	"github.com/mdlayher/netlink"
	"golang.org/x/sys/unix"

	"github.com/nftguard/nftguard/internal/nfnl"
)

// nfgenHdrLen is the size of struct nfgenmsg that starts every nftables
// message.
const nfgenHdrLen = 4

// dumper sends nftables GET requests with NLM_F_DUMP, the only kind of
// request doctor sends to an inspected namespace.
type dumper struct{ conn *netlink.Conn }

func dialIn(path string) (*dumper, error) {
	var c *netlink.Conn
	err := nfnl.InNetNS(path, func() error {
		var err error
		c, err = netlink.Dial(unix.NETLINK_NETFILTER, nil)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("open nftables netlink socket: %w", err)
	}
	return &dumper{conn: c}, nil
}

func (d *dumper) Close() error { return d.conn.Close() }

// dump sends one GET request of the given type and returns the payloads
// (after the nfgenmsg header) of every reply, with the family of each.
func (d *dumper) dump(typ uint16, family byte, attrs []netlink.Attribute) ([]reply, error) {
	data := []byte{family, unix.NFNETLINK_V0, 0, 0}
	if len(attrs) > 0 {
		b, err := netlink.MarshalAttributes(attrs)
		if err != nil {
			return nil, err
		}
		data = append(data, b...)
	}
	switch typ {
	case unix.NFT_MSG_GETTABLE, unix.NFT_MSG_GETCHAIN, unix.NFT_MSG_GETRULE, unix.NFT_MSG_GETSET, unix.NFT_MSG_GETSETELEM:
	default:
		// A guard for the read-only promise: nothing else is ever sent.
		return nil, fmt.Errorf("refusing to send nftables message type %d", typ)
	}
	msgs, err := d.conn.Execute(netlink.Message{
		Header: netlink.Header{Type: netlink.HeaderType(unix.NFNL_SUBSYS_NFTABLES<<8 | typ), Flags: netlink.Request | netlink.Dump},
		Data:   data,
	})
	if err != nil {
		return nil, err
	}
	var out []reply
	for _, m := range msgs {
		if m.Header.Flags&netlink.DumpInterrupted != 0 {
			return nil, nfnl.ErrDumpInterrupted
		}
		if len(m.Data) < nfgenHdrLen {
			continue
		}
		out = append(out, reply{family: m.Data[0], attrs: m.Data[nfgenHdrLen:]})
	}
	return out, nil
}

type reply struct {
	family byte
	attrs  []byte
}

// attrMap decodes one level of attributes; nested ones stay raw.
func attrMap(b []byte) (map[uint16][]byte, error) {
	ad, err := netlink.NewAttributeDecoder(b)
	if err != nil {
		return nil, err
	}
	m := map[uint16][]byte{}
	for ad.Next() {
		m[ad.Type()] = ad.Bytes()
	}
	return m, ad.Err()
}

// attrList returns the attributes of one level in order (for lists).
func attrList(b []byte) ([][]byte, error) {
	ad, err := netlink.NewAttributeDecoder(b)
	if err != nil {
		return nil, err
	}
	var out [][]byte
	for ad.Next() {
		out = append(out, ad.Bytes())
	}
	return out, ad.Err()
}

func cstr(b []byte) string {
	for i, c := range b {
		if c == 0 {
			return string(b[:i])
		}
	}
	return string(b)
}

func be32(b []byte) uint32 {
	if len(b) < 4 {
		return 0
	}
	return uint32(b[0])<<24 | uint32(b[1])<<16 | uint32(b[2])<<8 | uint32(b[3])
}

func be64(b []byte) uint64 {
	if len(b) < 8 {
		return 0
	}
	return uint64(be32(b))<<32 | uint64(be32(b[4:]))
}
