// Package rtnl holds what the readers of route netlink (nodeaddr, podif,
// conntrack) would otherwise each write again: opening a socket in a
// namespace, a watch's pair of sockets (OpenWatch), draining a watch
// socket's queued notifications, and an address message's own address.
package rtnl

import (
	"context"
	"errors"
	"net/netip"
	"sync"
	"time"

	"github.com/mdlayher/netlink"
	"golang.org/x/sys/unix"

	"github.com/nftguard/nftguard/internal/nfnl"
)

// Dial opens a route netlink socket inside the network namespace at nsPath
// (the caller's own when it is ""), subscribed to the multicast groups.
func Dial(nsPath string, groups uint32) (*netlink.Conn, error) {
	var c *netlink.Conn
	err := nfnl.InNetNS(nsPath, func() error {
		var err error
		c, err = netlink.Dial(unix.NETLINK_ROUTE, &netlink.Config{Groups: groups})
		return err
	})
	if err != nil {
		return nil, err
	}
	return c, nil
}

// Watch is a watch of route netlink: Sub hears the notifications of the
// groups it was opened with, Dump reads the state they call for. Sub is
// closed once the context OpenWatch was given is done: a Receive takes no
// context, and closing the socket is what interrupts it.
type Watch struct {
	Sub, Dump *netlink.Conn
	stop      func() bool
	closeSub  func()
}

// OpenWatch opens a Watch with dial (a socket in the watcher's namespace,
// set up as the watcher needs): Sub subscribed to groups and then readied
// by setup (nil: nothing more), then Dump. A watcher's first read through
// Dump thus follows a complete subscription, and no change falls between
// the two. Close releases both sockets.
func OpenWatch(ctx context.Context, groups uint32, dial func(groups uint32) (*netlink.Conn, error), setup func(sub *netlink.Conn) error) (*Watch, error) {
	sub, err := dial(groups)
	if err != nil {
		return nil, err
	}
	if setup != nil {
		if err := setup(sub); err != nil {
			sub.Close()
			return nil, err
		}
	}
	var once sync.Once
	closeSub := func() { once.Do(func() { sub.Close() }) }
	stop := context.AfterFunc(ctx, closeSub)
	dump, err := dial(0)
	if err != nil {
		stop()
		closeSub()
		return nil, err
	}
	return &Watch{Sub: sub, Dump: dump, stop: stop, closeSub: closeSub}, nil
}

// Close closes both sockets.
func (w *Watch) Close() {
	w.stop()
	w.Dump.Close()
	w.closeSub()
}

// Drain returns the messages already queued on a subscribed socket, without
// waiting: a watcher takes all of one change's notifications before it
// reads the state once. The socket waits again afterwards, whatever the
// outcome; an error (ENOBUFS: notifications were lost) comes with the
// messages read before it.
func Drain(c *netlink.Conn) ([]netlink.Message, error) {
	var out []netlink.Message
	for {
		if err := c.SetReadDeadline(time.Now()); err != nil {
			return nil, err
		}
		msgs, err := c.Receive()
		if err != nil {
			if derr := c.SetReadDeadline(time.Time{}); derr != nil {
				return nil, derr
			}
			var ne interface{ Timeout() bool }
			if errors.As(err, &ne) && ne.Timeout() {
				return out, nil
			}
			return out, err
		}
		out = append(out, msgs...)
	}
}

// OwnAddr reads the attributes of an RTM_NEWADDR message (what follows its
// ifaddrmsg) for the interface's own address: IFA_LOCAL when there is one,
// since on a point-to-point IPv4 link IFA_ADDRESS is the far end's, else
// IFA_ADDRESS (IPv6 has no IFA_LOCAL). It is invalid when the message
// carries neither.
func OwnAddr(attrs []byte) (netip.Addr, error) {
	ad, err := netlink.NewAttributeDecoder(attrs)
	if err != nil {
		return netip.Addr{}, err
	}
	var local, address netip.Addr
	for ad.Next() {
		switch ad.Type() {
		case unix.IFA_LOCAL:
			local, _ = netip.AddrFromSlice(ad.Bytes())
		case unix.IFA_ADDRESS:
			address, _ = netip.AddrFromSlice(ad.Bytes())
		}
	}
	if err := ad.Err(); err != nil {
		return netip.Addr{}, err
	}
	if local.IsValid() {
		return local.Unmap(), nil
	}
	return address.Unmap(), nil
}
