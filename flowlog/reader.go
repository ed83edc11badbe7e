package flowlog

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/mdlayher/netlink"
	"golang.org/x/sys/unix"

	"github.com/nftguard/nftguard/internal/nfnl"
)

// ErrGroupBusy means another socket in the network namespace reads the
// group already: nfnetlink_log delivers a group's records to one socket
// only, so a second reader would get nothing (see the package doc).
var ErrGroupBusy = errors.New("the NFLOG group is already read by another socket (an nftguard agent or flows?)")

// Config says what to read.
type Config struct {
	// Group is the nfnetlink_log group the table logs to
	// (tablelayout.LogDenied.Group).
	Group uint16
	// NetNS is the network namespace to read in ("" for the caller's):
	// the node's, the one the table lives in.
	NetNS string
	// CopyRange is how many bytes of each packet the kernel copies;
	// DefaultCopyRange when 0. The headers are all a record needs.
	CopyRange uint32
	// ReadBuffer is the socket's receive buffer in bytes;
	// DefaultReadBuffer when 0. Records that do not fit are lost by the
	// kernel and counted (Stats.Lost).
	ReadBuffer int
}

// Defaults of Config.
const (
	// DefaultCopyRange covers an IPv6 header with a few extension headers
	// and any transport header's ports, or ICMP's type and code.
	DefaultCopyRange  = 256
	DefaultReadBuffer = 1 << 20
)

// Reader reads one NFLOG group over netlink. Run is meant for one
// goroutine; Lost may be called from any.
type Reader struct {
	conn  *netlink.Conn
	group uint16
	lost  atomic.Uint64
}

// Open binds the group in cfg.NetNS and sets it to copy packets: the
// socket is created inside the namespace and belongs to it for its whole
// life. It sends no PF_BIND: that command would make nfnetlink_log the
// logger of plain `log` statements for the whole namespace, a change to
// state that is not ours (docs/design.md, principle 1); `log group N`
// needs no binding.
func Open(cfg Config) (*Reader, error) {
	if cfg.CopyRange == 0 {
		cfg.CopyRange = DefaultCopyRange
	}
	if cfg.ReadBuffer == 0 {
		cfg.ReadBuffer = DefaultReadBuffer
	}
	conn, err := nfnl.Dial(cfg.NetNS)
	if err != nil {
		return nil, fmt.Errorf("open netfilter netlink socket: %w", err)
	}
	r := &Reader{conn: conn, group: cfg.Group}
	if err := conn.SetReadBuffer(cfg.ReadBuffer); err != nil {
		conn.Close()
		return nil, fmt.Errorf("set NFLOG socket buffer to %d bytes: %w", cfg.ReadBuffer, err)
	}
	// One message binds and configures: records cannot arrive before
	// the instance has its copy mode. A queue threshold of 1 hands every
	// record over at once (the kernel's default batches up to 100 for a
	// second); records are rate-limited in the table, so this costs
	// nothing under a flood.
	var attrs []byte
	attrs = appendAttr(attrs, cfgAttrCmd, []byte{cfgCmdBind})
	mode := make([]byte, 6)
	binary.BigEndian.PutUint32(mode, cfg.CopyRange)
	mode[4] = copyPacket
	attrs = appendAttr(attrs, cfgAttrMode, mode)
	attrs = appendAttr(attrs, cfgAttrQThresh, be32(1))
	attrs = appendAttr(attrs, cfgAttrTimeout, be32(1)) // 1/100 s
	attrs = appendAttr(attrs, cfgAttrNLBufSiz, be32(16384))
	if err := r.config(attrs); err != nil {
		conn.Close()
		if errors.Is(err, unix.EPERM) || errors.Is(err, unix.EBUSY) {
			return nil, fmt.Errorf("bind NFLOG group %d: %w", cfg.Group, ErrGroupBusy)
		}
		return nil, fmt.Errorf("bind NFLOG group %d: %w", cfg.Group, err)
	}
	return r, nil
}

// config sends a configuration message for the group and waits for its
// acknowledgement, keeping aside nothing else: records that arrive
// meanwhile (the group is bound by then) are dropped, which only ever
// happens to records of the first moment.
func (r *Reader) config(attrs []byte) error {
	body := append([]byte{unix.AF_UNSPEC, unix.NFNETLINK_V0, 0, 0}, attrs...)
	binary.BigEndian.PutUint16(body[2:4], r.group)
	req, err := r.conn.Send(netlink.Message{
		Header: netlink.Header{
			Type:  netlink.HeaderType(subsysULOG<<8 | msgConfig),
			Flags: netlink.Request | netlink.Acknowledge,
		},
		Data: body,
	})
	if err != nil {
		return fmt.Errorf("send: %w", err)
	}
	// Not Conn.Execute: it takes a record arriving before the
	// acknowledgement for a reply out of sequence.
	if err := r.conn.SetReadDeadline(time.Now().Add(5 * time.Second)); err != nil {
		return err
	}
	defer r.conn.SetReadDeadline(time.Time{})
	for {
		msgs, err := r.conn.Receive()
		if err != nil {
			return err // an error answer comes back as an *netlink.OpError
		}
		for _, m := range msgs {
			if m.Header.Type == netlink.Error && m.Header.Sequence == req.Header.Sequence {
				return nil // an acknowledgement; Receive returned errors already
			}
		}
	}
}

// Run reads records until ctx ends, calling fn for each on the calling
// goroutine. It returns nil when ctx ends and an error only when the
// socket fails; records the kernel could not queue on a full socket are
// counted in Stats.Lost and reading goes on.
func (r *Reader) Run(ctx context.Context, fn func(Record)) error {
	stop := context.AfterFunc(ctx, func() { r.conn.SetReadDeadline(time.Now()) })
	defer stop()
	for {
		msgs, err := r.conn.Receive()
		if ctx.Err() != nil {
			return nil
		}
		if err != nil {
			if errors.Is(err, unix.ENOBUFS) {
				r.lost.Add(1) // at least one; the kernel does not say how many
				continue
			}
			return fmt.Errorf("read NFLOG group %d: %w", r.group, err)
		}
		for _, m := range msgs {
			if m.Header.Type != netlink.HeaderType(subsysULOG<<8|msgPacket) {
				continue
			}
			rec, err := decodeMessage(m.Data)
			if err != nil {
				continue // one malformed record is no reason to stop
			}
			if rec.Time.IsZero() {
				rec.Time = time.Now()
			}
			fn(rec)
		}
	}
}

// Lost is how many times the kernel reported records lost because the
// socket's buffer was full.
func (r *Reader) Lost() uint64 { return r.lost.Load() }

// Close closes the socket, which frees the group for the next reader
// (the kernel drops a socket's instances when it is released). Call it
// after Run has returned.
func (r *Reader) Close() error {
	return r.conn.Close()
}

// appendAttr appends one netlink attribute, padded to 4 bytes.
func appendAttr(b []byte, typ uint16, v []byte) []byte {
	var h [4]byte
	binary.NativeEndian.PutUint16(h[0:2], uint16(4+len(v)))
	binary.NativeEndian.PutUint16(h[2:4], typ)
	b = append(b, h[:]...)
	b = append(b, v...)
	for len(b)%4 != 0 {
		b = append(b, 0)
	}
	return b
}

func be32(v uint32) []byte {
	return binary.BigEndian.AppendUint32(nil, v)
}
