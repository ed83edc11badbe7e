package doctor

import (
	"fmt"

	"github.com/mdlayher/netlink"
	"golang.org/x/sys/unix"

	"github.com/nftguard/nftguard/internal/nfnl"
)

// dumper sends nftables GET requests with NLM_F_DUMP, the only kind of
// request doctor sends to an inspected namespace.
type dumper struct {
	conn *netlink.Conn
	rw   nfnl.Transport
	buf  []byte // receive buffer
	seq  uint32
}

func dialIn(path string) (*dumper, error) {
	c, err := nfnl.Dial(path)
	if err != nil {
		return nil, fmt.Errorf("open nftables netlink socket: %w", err)
	}
	return &dumper{conn: c, rw: nfnl.Raw(c), buf: make([]byte, 1<<20)}, nil
}

func (d *dumper) Close() error { return d.conn.Close() }

// strAttr is one string attribute of a dump request.
type strAttr struct {
	typ uint16
	val string
}

// dump sends one GET request of the given type and returns the payloads
// (after the nfgenmsg header) of every reply, with the family of each. A
// dump the kernel flagged as interrupted is nfnl.ErrDumpInterrupted.
func (d *dumper) dump(typ uint16, family byte, attrs ...strAttr) ([]reply, error) {
	switch typ {
	case unix.NFT_MSG_GETTABLE, unix.NFT_MSG_GETCHAIN, unix.NFT_MSG_GETRULE, unix.NFT_MSG_GETSET, unix.NFT_MSG_GETSETELEM:
	default:
		// A guard for the read-only promise: nothing else is ever sent.
		return nil, fmt.Errorf("refusing to send nftables message type %d", typ)
	}
	d.seq++
	var m nfnl.Encoder
	off := m.Msg(nfnl.MsgType(typ), unix.NLM_F_REQUEST|unix.NLM_F_DUMP, d.seq, family, 0)
	for _, a := range attrs {
		m.Str(a.typ, a.val)
	}
	m.EndMsg(off)
	var out []reply
	err := nfnl.Request(d.rw, d.buf, m.B, d.seq, true, func(r nfnl.Msg) {
		if len(r.Data) < nfnl.NfgenHdrLen {
			return
		}
		out = append(out, reply{family: r.Data[0], attrs: append([]byte(nil), r.Data[nfnl.NfgenHdrLen:]...)})
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

type reply struct {
	family byte
	attrs  []byte
}
