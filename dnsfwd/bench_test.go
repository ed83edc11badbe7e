package dnsfwd

import (
	"net"
	"net/netip"
	"testing"
	"time"

	"github.com/miekg/dns"
)

// BenchmarkForward is one pod's sequential UDP queries through the
// forwarder (upstream on loopback, a fake committer, a name that matches
// so every answer is committed), against the same queries sent to the
// upstream directly: x_direct is how many times longer a forwarded query
// takes.
func BenchmarkForward(b *testing.B) {
	h := start(b, Limits{})
	h.up.set("a.example", dns.TypeA, "a.example. 60 IN A 192.0.2.7", "a.example. 60 IN A 192.0.2.8")
	exchange := func(server netip.AddrPort, n int) time.Duration {
		conn, err := net.DialUDP("udp", net.UDPAddrFromAddrPort(netip.AddrPortFrom(podA, 0)), net.UDPAddrFromAddrPort(server))
		if err != nil {
			b.Fatal(err)
		}
		defer conn.Close()
		c := &dns.Client{Net: "udp", Timeout: 2 * time.Second}
		dc := &dns.Conn{Conn: conn}
		m := new(dns.Msg)
		m.SetQuestion("a.example.", dns.TypeA)
		begin := time.Now()
		for range n {
			m.Id = dns.Id()
			r, _, err := c.ExchangeWithConn(m, dc)
			if err != nil || len(r.Answer) != 2 {
				b.Fatalf("%v, %v", r, err)
			}
		}
		return time.Since(begin)
	}
	exchange(h.addr, 100) // warm up
	b.ResetTimer()
	fwd := exchange(h.addr, b.N)
	b.StopTimer()
	direct := exchange(h.up.addr, b.N)
	b.ReportMetric(float64(b.N)/fwd.Seconds(), "answers/s")
	b.ReportMetric(float64(direct.Nanoseconds())/float64(b.N), "direct_ns/op")
	b.ReportMetric(fwd.Seconds()/direct.Seconds(), "x_direct")
	if got := len(h.com.all()); got < b.N {
		b.Errorf("%d batches for %d answers", got, b.N)
	}
}
