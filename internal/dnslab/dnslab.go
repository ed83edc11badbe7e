// Package dnslab is a real DNS server for tests: the cluster DNS of a lab,
// served by github.com/miekg/dns on UDP and TCP port 53 of addresses in a
// network namespace the test made. What it answers is a function of the
// question, so a test serves exactly the records it reasons about.
// Benchmarks use it too (Serve), as the cluster DNS of their labs.
package dnslab

import (
	"fmt"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/miekg/dns"
)

// Answerer returns the records of the answer section for a question
// (name is fully qualified, in the case the client wrote it) and the
// response code.
type Answerer func(name string, qtype uint16) (answer []dns.RR, rcode int)

// Server is a running lab DNS server.
type Server struct {
	Addrs   []netip.Addr
	Queries atomic.Int64 // questions answered, over both transports
	servers []*dns.Server
	wg      sync.WaitGroup
}

// Start serves answer on UDP and TCP port 53 of each address; in runs a
// function inside the namespace that holds the addresses (the sockets are
// made there and keep it). The server stops when the test ends.
func Start(t testing.TB, in func(func() error) error, addrs []netip.Addr, answer Answerer) *Server {
	t.Helper()
	s, err := Serve(in, addrs, answer)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	return s
}

// Serve is Start for programs that are not tests (benchmarks): the caller
// stops the server with Close.
func Serve(in func(func() error) error, addrs []netip.Addr, answer Answerer) (*Server, error) {
	s := &Server{Addrs: addrs}
	h := dns.HandlerFunc(func(w dns.ResponseWriter, r *dns.Msg) {
		m := new(dns.Msg)
		m.SetReply(r)
		m.Authoritative = true
		if len(r.Question) == 1 {
			s.Queries.Add(1)
			q := r.Question[0]
			m.Answer, m.Rcode = answer(q.Name, q.Qtype)
		} else {
			m.Rcode = dns.RcodeFormatError
		}
		if _, udp := w.RemoteAddr().(*net.UDPAddr); udp {
			size := 512
			if o := r.IsEdns0(); o != nil {
				size = int(o.UDPSize())
			}
			m.Truncate(size)
		}
		_ = w.WriteMsg(m)
	})
	for _, a := range addrs {
		ap := netip.AddrPortFrom(a, 53).String()
		var pc net.PacketConn
		var ln net.Listener
		err := in(func() error {
			var err error
			if pc, err = net.ListenPacket("udp", ap); err != nil {
				return err
			}
			if ln, err = net.Listen("tcp", ap); err != nil {
				pc.Close()
			}
			return err
		})
		if err != nil {
			s.Close()
			return nil, fmt.Errorf("lab DNS server on %s: %w", ap, err)
		}
		for _, srv := range []*dns.Server{{PacketConn: pc, Handler: h}, {Listener: ln, Handler: h, ReadTimeout: 5 * time.Second}} {
			started := make(chan struct{})
			srv.NotifyStartedFunc = func() { close(started) }
			s.servers = append(s.servers, srv)
			s.wg.Add(1)
			go func() {
				defer s.wg.Done()
				_ = srv.ActivateAndServe()
			}()
			<-started
		}
	}
	return s, nil
}

// Close stops the server and waits for its goroutines.
func (s *Server) Close() {
	for _, srv := range s.servers {
		_ = srv.Shutdown()
	}
	s.wg.Wait()
}

// A and AAAA make address records.
func A(name string, ttl uint32, ip netip.Addr) dns.RR {
	return &dns.A{Hdr: dns.RR_Header{Name: dns.Fqdn(name), Rrtype: dns.TypeA, Class: dns.ClassINET, Ttl: ttl}, A: ip.AsSlice()}
}

func AAAA(name string, ttl uint32, ip netip.Addr) dns.RR {
	return &dns.AAAA{Hdr: dns.RR_Header{Name: dns.Fqdn(name), Rrtype: dns.TypeAAAA, Class: dns.ClassINET, Ttl: ttl}, AAAA: ip.AsSlice()}
}

// CNAME makes an alias record.
func CNAME(name string, ttl uint32, target string) dns.RR {
	return &dns.CNAME{Hdr: dns.RR_Header{Name: dns.Fqdn(name), Rrtype: dns.TypeCNAME, Class: dns.ClassINET, Ttl: ttl}, Target: dns.Fqdn(target)}
}

// Resolve asks server for name's records of qtype over network ("udp" or
// "tcp") from a socket made by dial (in the pod's namespace), and returns
// the addresses of the answer's A or AAAA records.
func Resolve(dial func(network, addr string) (net.Conn, error), network string, server netip.Addr, name string, qtype uint16, timeout time.Duration) ([]netip.Addr, *dns.Msg, error) {
	conn, err := dial(network, netip.AddrPortFrom(server, 53).String())
	if err != nil {
		return nil, nil, err
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(timeout))
	c := &dns.Conn{Conn: conn}
	q := new(dns.Msg)
	q.SetQuestion(dns.Fqdn(name), qtype)
	q.SetEdns0(4096, false)
	if err := c.WriteMsg(q); err != nil {
		return nil, nil, fmt.Errorf("send query for %s: %w", name, err)
	}
	r, err := c.ReadMsg()
	if err != nil {
		return nil, nil, fmt.Errorf("read answer for %s: %w", name, err)
	}
	if r.Id != q.Id {
		return nil, r, fmt.Errorf("answer id %d, query id %d", r.Id, q.Id)
	}
	var out []netip.Addr
	for _, rr := range r.Answer {
		switch v := rr.(type) {
		case *dns.A:
			if a, ok := netip.AddrFromSlice(v.A.To4()); ok {
				out = append(out, a)
			}
		case *dns.AAAA:
			if a, ok := netip.AddrFromSlice(v.AAAA); ok {
				out = append(out, a)
			}
		}
	}
	return out, r, nil
}
