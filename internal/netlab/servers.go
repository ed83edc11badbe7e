package netlab

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// servers are one endpoint's listeners. Their sockets are created inside the
// endpoint's namespace (a socket stays in the namespace it was created in);
// the serve loops then run on ordinary goroutines.
type servers struct {
	closers []io.Closer
	sctp    *sctpServer
	wg      sync.WaitGroup
}

func startServers(l *Lab, e *Endpoint, ports []Port) (*servers, error) {
	s := &servers{}
	l.mu.Lock()
	l.servers = append(l.servers, s) // so Close stops whatever got started
	l.mu.Unlock()

	var tcp []net.Listener
	var udp []net.PacketConn
	sctpPorts := map[uint16]bool{}
	err := l.in(e.Path, func() error {
		for _, p := range ports {
			// The wildcard dual-stack address answers on IPv4 and IPv6
			// and on any address later routed or NATed to the endpoint.
			addr := fmt.Sprintf(":%d", p.Num)
			switch p.Proto {
			case TCP:
				ln, err := net.Listen("tcp", addr)
				if err != nil {
					return fmt.Errorf("listen %v: %w", p, err)
				}
				s.closers = append(s.closers, ln)
				tcp = append(tcp, ln)
			case UDP:
				pc, err := net.ListenPacket("udp", addr)
				if err != nil {
					return fmt.Errorf("listen %v: %w", p, err)
				}
				s.closers = append(s.closers, pc)
				udp = append(udp, pc)
			case SCTP:
				sctpPorts[uint16(p.Num)] = true
			}
		}
		var err error
		s.sctp, err = newSCTPServer(sctpPorts)
		return err
	})
	if err != nil {
		return nil, err
	}
	for _, ln := range tcp {
		s.wg.Go(func() { serveTCP(ln) })
	}
	for _, pc := range udp {
		s.wg.Go(func() { serveUDP(pc) })
	}
	for _, c := range s.sctp.conns {
		s.wg.Go(func() { s.sctp.serve(c) })
	}
	return s, nil
}

// close stops the listeners and waits for their loops to end.
func (s *servers) close() {
	for _, c := range s.closers {
		c.Close()
	}
	if s.sctp != nil {
		s.sctp.close()
	}
	s.wg.Wait()
}

// serveTCP accepts and closes connections: a completed handshake is the
// whole answer a probe needs.
func serveTCP(ln net.Listener) {
	for {
		c, err := ln.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			time.Sleep(10 * time.Millisecond) // e.g. out of file descriptors
			continue
		}
		c.Close()
	}
}

// serveUDP echoes every datagram back to its sender, from the address it
// was sent to. A node has several addresses (its uplink, the pods'
// gateway), and a reply from the one the routing table picks would not
// match the client's connected socket: the probe would see nothing, as if
// policy had dropped it. The socket is dual-stack, so the IPv6 packet info
// carries an IPv4 destination as a mapped address, and Linux takes it back
// as the IPv4 source (golang.org/x/net's ipv6 package drops IPv4 sources,
// hence the control message by hand).
func serveUDP(pc net.PacketConn) {
	uc, ok := pc.(*net.UDPConn)
	if !ok {
		return
	}
	pktinfo := setRecvPktinfo(uc) == nil
	buf, oob := make([]byte, 2048), make([]byte, 256)
	for {
		n, oobn, _, from, err := uc.ReadMsgUDPAddrPort(buf, oob)
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			continue
		}
		var reply []byte
		if pktinfo {
			reply = replyFrom(oob[:oobn])
		}
		uc.WriteMsgUDPAddrPort(buf[:n], reply, from)
	}
}

func setRecvPktinfo(uc *net.UDPConn) error {
	rc, err := uc.SyscallConn()
	if err != nil {
		return err
	}
	var serr error
	if err := rc.Control(func(fd uintptr) {
		serr = unix.SetsockoptInt(int(fd), unix.IPPROTO_IPV6, unix.IPV6_RECVPKTINFO, 1)
	}); err != nil {
		return err
	}
	return serr
}

// replyFrom turns the packet info of a received datagram into the control
// message that sends the reply from its destination address; nil if there
// is none.
func replyFrom(oob []byte) []byte {
	msgs, err := unix.ParseSocketControlMessage(oob)
	if err != nil {
		return nil
	}
	for _, m := range msgs {
		if m.Header.Level == unix.IPPROTO_IPV6 && m.Header.Type == unix.IPV6_PKTINFO && len(m.Data) >= 20 {
			// The interface too: a link-local address (the routed
			// lab's fe80::1 is on every pod veth) names a source only
			// together with its link.
			return unix.PktInfo6(&unix.Inet6Pktinfo{Addr: [16]byte(m.Data[:16]), Ifindex: binary.NativeEndian.Uint32(m.Data[16:20])})
		}
	}
	return nil
}

// sctpServer owns an endpoint's raw SCTP sockets (one per family). They
// record INITs for the listening ports and also send this endpoint's own
// probes, so an SCTP probe never has to enter a namespace.
type sctpServer struct {
	ports map[uint16]bool
	conns map[Family]*net.IPConn

	mu      sync.Mutex
	waiting map[uint32]sctpWaiter // by initiate tag
}

type sctpWaiter struct {
	src  netip.Addr
	port uint16
	got  chan struct{}
}

// newSCTPServer opens the raw sockets; call it inside the namespace.
func newSCTPServer(ports map[uint16]bool) (*sctpServer, error) {
	s := &sctpServer{ports: ports, conns: map[Family]*net.IPConn{}, waiting: map[uint32]sctpWaiter{}}
	for fam, af := range map[Family]int{IPv4: unix.AF_INET, IPv6: unix.AF_INET6} {
		fd, err := unix.Socket(af, unix.SOCK_RAW|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, ipprotoSCTP)
		if err != nil {
			s.close()
			return nil, fmt.Errorf("raw %v SCTP socket: %w", fam, err)
		}
		f := os.NewFile(uintptr(fd), fmt.Sprintf("raw-sctp-%v", fam))
		pc, err := net.FilePacketConn(f) // dups fd into the runtime poller
		f.Close()
		if err != nil {
			s.close()
			return nil, fmt.Errorf("raw %v SCTP socket: %w", fam, err)
		}
		s.conns[fam] = pc.(*net.IPConn)
	}
	return s, nil
}

func (s *sctpServer) close() {
	for _, c := range s.conns {
		c.Close()
	}
}

// serve records arriving INITs. It reads with recvfrom itself because the
// net package strips what it guesses is an IPv4 header, and an SCTP header
// can look like one.
func (s *sctpServer) serve(c *net.IPConn) {
	rc, err := c.SyscallConn()
	if err != nil {
		return
	}
	buf := make([]byte, 2048)
	for {
		var n int
		var from unix.Sockaddr
		var rerr error
		err := rc.Read(func(fd uintptr) bool {
			n, from, rerr = unix.Recvfrom(int(fd), buf, 0)
			return rerr != unix.EAGAIN
		})
		if err != nil {
			return // closed
		}
		if rerr != nil {
			continue
		}
		var src netip.Addr
		pkt := buf[:n]
		switch sa := from.(type) {
		case *unix.SockaddrInet4:
			src = netip.AddrFrom4(sa.Addr)
			var ok bool
			if pkt, ok = stripIPv4Header(pkt); !ok {
				continue
			}
		case *unix.SockaddrInet6:
			src = netip.AddrFrom16(sa.Addr)
		default:
			continue
		}
		port, tag, ok := parseSCTPInit(pkt)
		if !ok || !s.ports[port] {
			continue
		}
		s.mu.Lock()
		w, ok := s.waiting[tag]
		if ok && w.src == src && w.port == port {
			delete(s.waiting, tag)
			close(w.got)
		}
		s.mu.Unlock()
	}
}

// expect registers interest in an INIT with tag from src to port; the
// returned channel closes when it arrives. Call the cancel func when done.
func (s *sctpServer) expect(tag uint32, src netip.Addr, port uint16) (<-chan struct{}, func()) {
	got := make(chan struct{})
	s.mu.Lock()
	s.waiting[tag] = sctpWaiter{src: src, port: port, got: got}
	s.mu.Unlock()
	return got, func() {
		s.mu.Lock()
		if w, ok := s.waiting[tag]; ok && w.got == got {
			delete(s.waiting, tag)
		}
		s.mu.Unlock()
	}
}

// send transmits pkt to dst from this endpoint's namespace.
func (s *sctpServer) send(src, dst netip.Addr, pkt []byte) error {
	var fam Family
	var sa unix.Sockaddr
	var oob []byte
	if dst.Is4() {
		fam, sa = IPv4, &unix.SockaddrInet4{Addr: dst.As4()}
		if src.Is4() {
			oob = unix.PktInfo4(&unix.Inet4Pktinfo{Spec_dst: src.As4()})
		}
	} else {
		fam, sa = IPv6, &unix.SockaddrInet6{Addr: dst.As16()}
		if src.Is6() {
			oob = unix.PktInfo6(&unix.Inet6Pktinfo{Addr: src.As16()})
		}
	}
	rc, err := s.conns[fam].SyscallConn()
	if err != nil {
		return err
	}
	var serr error
	err = rc.Write(func(fd uintptr) bool {
		serr = unix.Sendmsg(int(fd), pkt, oob, sa, 0)
		return serr != unix.EAGAIN
	})
	if err != nil {
		return err
	}
	return serr
}
