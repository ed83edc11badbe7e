package netlab

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"net"
	"net/netip"
	"os"

	"golang.org/x/sys/unix"
)

// Forged packets: what a pod with NET_RAW (every container has it by
// default) can send, whatever its addresses are. The sender writes the
// whole IP header (IPPROTO_RAW, IP_HDRINCL for IPv4), so the kernel of the
// sending namespace neither checks nor rewrites the source; a firewall on
// the node is what stands between it and its target.

// ProtoSCTP is SCTP's protocol number, for Forged and CatchAt.
const ProtoSCTP = ipprotoSCTP

// Forged is one UDP datagram or SCTP INIT with a chosen source.
type Forged struct {
	Src, Dst netip.Addr // both IPv4 or both IPv6; a link-local Dst leaves eth0
	Proto    uint8      // ProtoUDP or ProtoSCTP
	DstPort  uint16
	// Nonce identifies the packet at the receiver: the UDP payload, or
	// the SCTP INIT's initiate tag (its first 4 bytes).
	Nonce []byte
}

// Bytes returns the packet as it goes on the wire.
func (p Forged) Bytes() ([]byte, error) {
	var l4 []byte
	switch p.Proto {
	case ProtoUDP:
		l4 = make([]byte, 8+len(p.Nonce))
		binary.BigEndian.PutUint16(l4[0:], 40000)
		binary.BigEndian.PutUint16(l4[2:], p.DstPort)
		copy(l4[8:], p.Nonce)
	case ProtoSCTP:
		if len(p.Nonce) < 4 {
			return nil, fmt.Errorf("forged SCTP INIT: nonce of %d bytes, want 4", len(p.Nonce))
		}
		l4 = sctpInit(40000, p.DstPort, binary.BigEndian.Uint32(p.Nonce)|1)
	default:
		return nil, fmt.Errorf("forged packet: protocol %d not supported", p.Proto)
	}
	if p.Src.Is6() && p.Dst.Is6() {
		return RawIPv6{Src: p.Src.WithZone(""), Dst: p.Dst.WithZone(""), HopLimit: 64, NextHeader: p.Proto, Payload: l4}.Bytes()
	}
	if !p.Src.Is4() || !p.Dst.Is4() {
		return nil, fmt.Errorf("forged packet %s -> %s: mixed families", p.Src, p.Dst)
	}
	b := make([]byte, 20+len(l4))
	b[0] = 4<<4 | 5
	binary.BigEndian.PutUint16(b[2:], uint16(len(b)))
	b[8] = 64
	b[9] = p.Proto
	src, dst := p.Src.As4(), p.Dst.As4()
	copy(b[12:], src[:])
	copy(b[16:], dst[:])
	binary.BigEndian.PutUint16(b[10:], checksum(b[:20]))
	copy(b[20:], l4)
	if p.Proto == ProtoUDP {
		u := b[20:]
		binary.BigEndian.PutUint16(u[4:], uint16(len(u)))
		var pseudo []byte
		pseudo = append(pseudo, src[:]...)
		pseudo = append(pseudo, dst[:]...)
		pseudo = append(pseudo, 0, ProtoUDP, byte(len(u)>>8), byte(len(u)))
		c := checksum(append(pseudo, u...))
		if c == 0 {
			c = 0xffff
		}
		binary.BigEndian.PutUint16(u[6:], c)
	}
	return b, nil
}

// checksum is the Internet checksum of b.
func checksum(b []byte) uint16 {
	var sum uint32
	for i := 0; i+1 < len(b); i += 2 {
		sum += uint32(binary.BigEndian.Uint16(b[i:]))
	}
	if len(b)%2 == 1 {
		sum += uint32(b[len(b)-1]) << 8
	}
	for sum>>16 != 0 {
		sum = sum&0xffff + sum>>16
	}
	return ^uint16(sum)
}

// SendForged sends p out of from's eth0 (from is a pod or external host),
// or out of its default route when p.Dst is not link-local.
func (l *Lab) SendForged(from *Endpoint, p Forged) error {
	pkt, err := p.Bytes()
	if err != nil {
		return err
	}
	return l.in(from.Path, func() error {
		if p.Dst.Is6() {
			eth0, err := net.InterfaceByName("eth0")
			if err != nil {
				return err
			}
			fd, err := unix.Socket(unix.AF_INET6, unix.SOCK_RAW|unix.SOCK_CLOEXEC, unix.IPPROTO_RAW)
			if err != nil {
				return fmt.Errorf("raw IPv6 socket in %s: %w", from.Name, err)
			}
			defer unix.Close(fd)
			sa := &unix.SockaddrInet6{Addr: p.Dst.As16()}
			if p.Dst.IsLinkLocalUnicast() {
				sa.ZoneId = uint32(eth0.Index)
			}
			if err := unix.Sendto(fd, pkt, 0, sa); err != nil {
				return fmt.Errorf("send forged %s -> %s from %s: %w", p.Src, p.Dst, from.Name, err)
			}
			return nil
		}
		fd, err := unix.Socket(unix.AF_INET, unix.SOCK_RAW|unix.SOCK_CLOEXEC, unix.IPPROTO_RAW)
		if err != nil {
			return fmt.Errorf("raw IPv4 socket in %s: %w", from.Name, err)
		}
		defer unix.Close(fd)
		if err := unix.Sendto(fd, pkt, 0, &unix.SockaddrInet4{Addr: p.Dst.As4()}); err != nil {
			return fmt.Errorf("send forged %s -> %s from %s: %w", p.Src, p.Dst, from.Name, err)
		}
		return nil
	})
}

// CatchAt records the packets of protocol proto and family f that the
// kernel of e's namespace delivers (e may be a node's endpoint from
// Runtime.ServeNode). Close it when done.
func (l *Lab) CatchAt(e *Endpoint, f Family, proto uint8) (*Catcher, error) {
	af := unix.AF_INET
	if f == IPv6 {
		af = unix.AF_INET6
	}
	return l.catch(e, af, proto, nil)
}

// catch opens a raw socket of family af and protocol proto in e's
// namespace, lets join configure it (nil: nothing), and records what it
// receives.
func (l *Lab) catch(e *Endpoint, af int, proto uint8, join func(fd int) error) (*Catcher, error) {
	c := &Catcher{news: make(chan struct{}, 1)}
	err := l.in(e.Path, func() error {
		fd, err := unix.Socket(af, unix.SOCK_RAW|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, int(proto))
		if err != nil {
			return fmt.Errorf("raw socket in %s: %w", e.Name, err)
		}
		if join != nil {
			if err := join(fd); err != nil {
				unix.Close(fd)
				return err
			}
		}
		file := os.NewFile(uintptr(fd), "raw-catcher")
		pc, err := net.FilePacketConn(file) // dups fd into the runtime poller
		file.Close()
		if err != nil {
			return err
		}
		c.conn = pc.(*net.IPConn)
		return nil
	})
	if err != nil {
		return nil, err
	}
	c.wg.Go(c.read)
	return c, nil
}

// Count is how many recorded packets contain nonce.
func (c *Catcher) Count(nonce []byte) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for _, p := range c.got {
		if bytes.Contains(p, nonce) {
			n++
		}
	}
	return n
}
