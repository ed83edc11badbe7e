package netlab

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"sync"

	"golang.org/x/sys/unix"
)

// Hand-made IPv6 packets, for tests of what a firewall does with packets a
// normal socket never sends: neighbour discovery with a forged source or hop
// limit, multicast listener reports, DHCPv6 from a link-local address. The
// sender writes the whole IPv6 header itself (IPPROTO_RAW), the receiver
// sees every packet of one protocol that its kernel accepts for delivery.

// Next-header values RawIPv6 understands (and ProtoSCTP).
const (
	ProtoICMPv6 = 58
	ProtoUDP    = 17
)

// RawIPv6 is one IPv6 packet without extension headers.
type RawIPv6 struct {
	Src, Dst   netip.Addr
	HopLimit   uint8
	NextHeader uint8 // ProtoICMPv6 or ProtoUDP
	// Payload is the transport header and data. Its checksum field is
	// filled in (ICMPv6 and UDP both cover the pseudo header).
	Payload []byte
}

// Bytes returns the packet as it goes on the wire.
func (p RawIPv6) Bytes() ([]byte, error) {
	if !p.Src.Is6() || !p.Dst.Is6() || p.Src.Is4In6() || p.Dst.Is4In6() {
		return nil, fmt.Errorf("raw IPv6 packet %s -> %s: want IPv6 addresses", p.Src, p.Dst)
	}
	var sumAt int
	switch p.NextHeader {
	case ProtoICMPv6:
		sumAt = 2
	case ProtoUDP:
		sumAt = 6
	case ipprotoSCTP:
		// SCTP's checksum (CRC32c) covers its own packet only: the
		// payload carries it already.
		sumAt = -1
	default:
		return nil, fmt.Errorf("raw IPv6 packet: next header %d not supported", p.NextHeader)
	}
	if len(p.Payload) < max(sumAt+2, 8) || len(p.Payload) > 1200 {
		return nil, fmt.Errorf("raw IPv6 packet: payload of %d bytes", len(p.Payload))
	}
	b := make([]byte, 40+len(p.Payload))
	b[0] = 6 << 4
	binary.BigEndian.PutUint16(b[4:], uint16(len(p.Payload)))
	b[6] = p.NextHeader
	b[7] = p.HopLimit
	src, dst := p.Src.As16(), p.Dst.As16()
	copy(b[8:], src[:])
	copy(b[24:], dst[:])
	pl := b[40:]
	copy(pl, p.Payload)
	if sumAt < 0 {
		return b, nil
	}
	pl[sumAt], pl[sumAt+1] = 0, 0
	if p.NextHeader == ProtoUDP {
		binary.BigEndian.PutUint16(pl[4:], uint16(len(pl)))
	}
	binary.BigEndian.PutUint16(pl[sumAt:], checksum6(src, dst, p.NextHeader, pl))
	return b, nil
}

// checksum6 is the Internet checksum over the IPv6 pseudo header and the
// payload (RFC 8200 section 8.1).
func checksum6(src, dst [16]byte, next uint8, payload []byte) uint16 {
	var sum uint32
	add := func(b []byte) {
		for i := 0; i+1 < len(b); i += 2 {
			sum += uint32(binary.BigEndian.Uint16(b[i:]))
		}
		if len(b)%2 == 1 {
			sum += uint32(b[len(b)-1]) << 8
		}
	}
	add(src[:])
	add(dst[:])
	var pseudo [8]byte
	binary.BigEndian.PutUint32(pseudo[0:], uint32(len(payload)))
	pseudo[7] = next
	add(pseudo[:])
	add(payload)
	for sum>>16 != 0 {
		sum = sum&0xffff + sum>>16
	}
	c := ^uint16(sum)
	if c == 0 && next == ProtoUDP {
		c = 0xffff // UDP sends a zero sum as all ones
	}
	return c
}

// SendRawIPv6 sends p out of the eth0 of the pod or external host from,
// exactly as given: the kernel neither checks nor rewrites the source
// address or the hop limit.
func (l *Lab) SendRawIPv6(from string, p RawIPv6) error {
	e := l.Endpoint(from)
	if e == nil {
		return fmt.Errorf("send raw IPv6: no pod or external host %q", from)
	}
	pkt, err := p.Bytes()
	if err != nil {
		return err
	}
	return l.in(e.Path, func() error {
		eth0, err := net.InterfaceByName("eth0")
		if err != nil {
			return err
		}
		fd, err := unix.Socket(unix.AF_INET6, unix.SOCK_RAW|unix.SOCK_CLOEXEC, unix.IPPROTO_RAW)
		if err != nil {
			return fmt.Errorf("raw IPv6 socket in %s: %w", from, err)
		}
		defer unix.Close(fd)
		sa := &unix.SockaddrInet6{Addr: p.Dst.As16(), ZoneId: uint32(eth0.Index)}
		if err := unix.Sendto(fd, pkt, 0, sa); err != nil {
			return fmt.Errorf("send raw IPv6 %s -> %s from %s: %w", p.Src, p.Dst, from, err)
		}
		return nil
	})
}

// Catcher records the packets of one protocol that reach an endpoint.
type Catcher struct {
	conn *net.IPConn
	wg   sync.WaitGroup

	mu   sync.Mutex
	got  [][]byte // payloads (transport header and data) received so far
	news chan struct{}
}

// CatchIPv6 starts recording the IPv6 packets with next header proto that
// the kernel of the pod or external host to delivers, after joining the
// multicast groups on its eth0. Close it when done.
func (l *Lab) CatchIPv6(to string, proto uint8, groups ...netip.Addr) (*Catcher, error) {
	e := l.Endpoint(to)
	if e == nil {
		return nil, fmt.Errorf("catch IPv6: no pod or external host %q", to)
	}
	return l.catch(e, unix.AF_INET6, proto, func(fd int) error {
		eth0, err := net.InterfaceByName("eth0")
		if err != nil {
			return err
		}
		for _, g := range groups {
			mreq := &unix.IPv6Mreq{Multiaddr: g.As16(), Interface: uint32(eth0.Index)}
			if err := unix.SetsockoptIPv6Mreq(fd, unix.IPPROTO_IPV6, unix.IPV6_JOIN_GROUP, mreq); err != nil {
				return fmt.Errorf("join %s in %s: %w", g, to, err)
			}
		}
		return nil
	})
}

func (c *Catcher) read() {
	buf := make([]byte, 2048)
	for {
		n, _, err := c.conn.ReadFrom(buf)
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			continue
		}
		c.mu.Lock()
		c.got = append(c.got, bytes.Clone(buf[:n]))
		c.mu.Unlock()
		select {
		case c.news <- struct{}{}:
		default:
		}
	}
}

// Wait reports whether a packet whose payload contains nonce arrives before
// ctx ends (or has arrived already).
func (c *Catcher) Wait(ctx context.Context, nonce []byte) bool {
	for {
		c.mu.Lock()
		for _, p := range c.got {
			if bytes.Contains(p, nonce) {
				c.mu.Unlock()
				return true
			}
		}
		c.mu.Unlock()
		select {
		case <-c.news:
		case <-ctx.Done():
			return false
		}
	}
}

// Close stops recording.
func (c *Catcher) Close() {
	c.conn.Close()
	c.wg.Wait()
}
