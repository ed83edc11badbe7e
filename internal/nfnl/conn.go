package nfnl

import (
	"fmt"

	"github.com/mdlayher/netlink"
	"golang.org/x/sys/unix"
)

// Dial creates a netfilter netlink socket inside the network namespace at
// path (the caller's own when path is ""); see InNetNS for why no
// namespace descriptor outlives the call.
func Dial(path string) (*netlink.Conn, error) {
	if path == "" {
		return netlink.Dial(unix.NETLINK_NETFILTER, nil)
	}
	var c *netlink.Conn
	err := InNetNS(path, func() error {
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

// ForceBuffers raises the socket buffers beyond rmem_max/wmem_max (0 leaves
// one as it is), which needs CAP_NET_ADMIN (writing nftables needs it
// anyway).
func ForceBuffers(c *netlink.Conn, snd, rcv int) error {
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

// Transport sends and receives whole datagrams: what requests and batches
// need of a socket. Raw adapts a *netlink.Conn; tests substitute a fake.
type Transport interface {
	// Send sends b as one datagram (one sendmsg, however many messages
	// it holds: the kernel treats a batch in one datagram as one unit).
	Send(b []byte) error
	// Recv reads one datagram into buf, waiting up to the socket's read
	// deadline.
	Recv(buf []byte) (int, error)
}

// Raw is the Transport of a netlink socket. It bypasses the netlink
// package's message handling (which copies every message into values of
// its own) but keeps its runtime-poller integration, so read deadlines
// still apply.
func Raw(c *netlink.Conn) Transport { return rawConn{c} }

type rawConn struct{ c *netlink.Conn }

func (r rawConn) Send(b []byte) error {
	rc, err := r.c.SyscallConn()
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

func (r rawConn) Recv(buf []byte) (int, error) {
	rc, err := r.c.SyscallConn()
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
