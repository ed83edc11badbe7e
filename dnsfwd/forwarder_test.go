package dnsfwd

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/netip"
	"slices"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/nftguard/nftguard/fqdn"
)

func TestForwardCommitsAndRelaysUnchanged(t *testing.T) {
	h := start(t, Limits{})
	h.up.set("a.example", dns.TypeA, "a.example. 0 IN A 192.0.2.7", "a.example. 60 IN A 192.0.2.8")
	r, err := h.query(t, podA, "udp", "A.Example.", dns.TypeA)
	if err != nil {
		t.Fatal(err)
	}
	// The pod gets upstream's reply as upstream sent it (TTL 0 stays 0),
	// with its own id.
	sent := h.up.sent.Load()
	sent.Id = r.Id
	if r.String() != sent.String() {
		t.Errorf("reply differs from upstream's:\n%s\nupstream:\n%s", r, sent)
	}
	if r.Answer[0].Header().Ttl != 0 {
		t.Errorf("TTL rewritten: %v", r.Answer[0])
	}
	want := []string{"127.0.0.2 . 192.0.2.7 5s", "127.0.0.2 . 192.0.2.8 1m0s"}
	if got := h.com.keys("web4"); !slices.Equal(got, want) {
		t.Errorf("elements %v, want %v", got, want)
	}
	if n := len(h.com.all()); n != 1 {
		t.Errorf("%d batches, want 1", n)
	}
	if c := counter(t, h.fwd.m.AnswersCommitted); c != 1 {
		t.Errorf("answers committed %v", c)
	}
	if c := counter(t, h.fwd.m.ElementsAdded); c != 2 {
		t.Errorf("elements added %v", c)
	}
	// The latency is observed just after the reply is written.
	poll(t, "one latency observation", func() bool { return testutilCount(t, h) == 1 })
}

func testutilCount(t *testing.T, h *harness) uint64 {
	t.Helper()
	mfs, err := h.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var n uint64
	for _, mf := range mfs {
		if mf.GetName() == "nftguard_dns_forward_duration_seconds" {
			for _, m := range mf.GetMetric() {
				n += m.GetHistogram().GetSampleCount()
			}
		}
	}
	return n
}

func TestForwardFamilies(t *testing.T) {
	h := start(t, Limits{})
	h.up.set("v4.a.example", dns.TypeA, "v4.a.example. 30 IN A 192.0.2.7")
	h.up.set("v6.a.example", dns.TypeAAAA, "v6.a.example. 30 IN AAAA 2001:db8::7")
	// An A query over IPv6 is keyed by the pod's IPv4 address, and an
	// AAAA query over IPv4 by its IPv6 address.
	if _, err := h.query(t, podA6, "udp", "v4.a.example.", dns.TypeA); err != nil {
		t.Fatal(err)
	}
	if _, err := h.query(t, podA, "tcp", "v6.a.example.", dns.TypeAAAA); err != nil {
		t.Fatal(err)
	}
	if got, want := h.com.keys("web4"), []string{"127.0.0.2 . 192.0.2.7 30s"}; !slices.Equal(got, want) {
		t.Errorf("web4 %v, want %v", got, want)
	}
	if got, want := h.com.keys("web6"), []string{"::1 . 2001:db8::7 30s"}; !slices.Equal(got, want) {
		t.Errorf("web6 %v, want %v", got, want)
	}
	// podB has no IPv6 address: an AAAA answer adds nothing.
	r, err := h.query(t, podB, "udp", "v6.a.example.", dns.TypeAAAA)
	if err != nil || len(r.Answer) != 1 {
		t.Fatalf("%v, %v", r, err)
	}
	if n := len(h.com.all()); n != 2 {
		t.Errorf("%d batches, want 2", n)
	}
	if c := counter(t, h.fwd.m.AnswersIgnored.WithLabelValues(fqdn.IgnoredNoAddress)); c != 1 {
		t.Errorf("ignored no_address %v", c)
	}
	if c := counter(t, h.fwd.m.AddrsIgnored.WithLabelValues(addrsNoPodAddr)); c != 1 {
		t.Errorf("addresses ignored no_pod_address %v", c)
	}
}

// TestEscapedDotIsNoLabelBoundary: "evil\.wild.example" is the label
// "evil.wild" in the zone "example", not a name under *.wild.example: its
// answer is relayed and adds nothing; "\\.wild.example" (a label that is
// one backslash) is under it.
func TestEscapedDotIsNoLabelBoundary(t *testing.T) {
	h := start(t, Limits{})
	h.up.set(`evil\.wild.example`, dns.TypeA, `evil\.wild.example. 60 IN A 198.51.100.66`)
	h.up.set(`\\.wild.example`, dns.TypeA, `\\.wild.example. 60 IN A 198.51.100.67`)
	for _, name := range []string{`evil\.wild.example.`, `\\.wild.example.`} {
		if r, err := h.query(t, podA, "udp", name, dns.TypeA); err != nil || len(r.Answer) != 1 {
			t.Fatalf("%s: %v, %v", name, r, err)
		}
	}
	if got, want := h.com.keys("web4"), []string{"127.0.0.2 . 198.51.100.67 1m0s"}; !slices.Equal(got, want) {
		t.Errorf("web4 %v, want %v", got, want)
	}
}

func TestForwardCNAMEChainAndWildcard(t *testing.T) {
	h := start(t, Limits{})
	h.up.set("www.wild.example", dns.TypeA,
		"www.wild.example. 300 IN CNAME edge.cdn.example.",
		"edge.cdn.example. 20 IN CNAME e1.cdn.example.",
		"e1.cdn.example. 600 IN A 198.51.100.1",
		"unrelated.example. 600 IN A 203.0.113.66")
	h.up.set("wild.example", dns.TypeA, "wild.example. 60 IN A 198.51.100.9")
	h.up.set("other.example", dns.TypeA, "other.example. 60 IN A 198.51.100.10")
	for _, name := range []string{"www.wild.example.", "wild.example.", "other.example."} {
		r, err := h.query(t, podA, "udp", name, dns.TypeA)
		if err != nil || r.Rcode != dns.RcodeSuccess {
			t.Fatalf("%s: %v, %v", name, r, err)
		}
	}
	if got, want := h.com.keys("web4"), []string{"127.0.0.2 . 198.51.100.1 20s"}; !slices.Equal(got, want) {
		t.Errorf("web4 %v, want %v", got, want)
	}
	if c := counter(t, h.fwd.m.AnswersIgnored.WithLabelValues(fqdn.IgnoredNoMatch)); c != 2 {
		t.Errorf("ignored no_match %v, want 2", c)
	}
	// NXDOMAIN is relayed and adds nothing.
	r, err := h.query(t, podA, "udp", "nope.a.example.", dns.TypeA)
	if err != nil || r.Rcode != dns.RcodeNameError {
		t.Fatalf("%v, %v", r, err)
	}
	if c := counter(t, h.fwd.m.AnswersIgnored.WithLabelValues(fqdn.IgnoredRcode)); c != 1 {
		t.Errorf("ignored rcode %v", c)
	}
}

func TestTruncatedUDPThenTCP(t *testing.T) {
	h := start(t, Limits{})
	var records []string
	for i := range 100 {
		records = append(records, fmt.Sprintf("big.a.example. 60 IN A 198.51.100.%d", i))
	}
	h.up.set("big.a.example", dns.TypeA, records...)
	// No EDNS: 512 bytes hold 28 records, so upstream truncates; the pod
	// gets the truncated reply and nothing is committed from it.
	c := &dns.Client{Net: "udp", Timeout: 5 * time.Second, Dialer: &net.Dialer{LocalAddr: &net.UDPAddr{IP: podA.AsSlice()}}}
	m := new(dns.Msg)
	m.SetQuestion("big.a.example.", dns.TypeA)
	r, _, err := c.Exchange(m, h.addr.String())
	if err != nil {
		t.Fatal(err)
	}
	if !r.Truncated {
		t.Fatalf("reply not truncated: %v", r)
	}
	if n := len(h.com.all()); n != 0 {
		t.Errorf("%d batches from a truncated answer", n)
	}
	if c := counter(t, h.fwd.m.AnswersIgnored.WithLabelValues(fqdn.IgnoredTruncated)); c != 1 {
		t.Errorf("ignored truncated %v", c)
	}
	// The pod's retry over TCP gets all of it, and all of it is added.
	r, err = h.query(t, podA, "tcp", "big.a.example.", dns.TypeA)
	if err != nil || r.Truncated || len(r.Answer) != 100 {
		t.Fatalf("tcp: %d records, %v", len(r.Answer), err)
	}
	if got := h.com.keys("web4"); len(got) != 100 {
		t.Errorf("%d elements, want 100", len(got))
	}
}

// TestCommitHappensBeforeReply proves the pod cannot read the answer
// before its elements are in the kernel: the committer takes 200 ms and
// checks, when it starts, that the pod has nothing yet.
func TestCommitHappensBeforeReply(t *testing.T) {
	h := start(t, Limits{})
	h.up.set("a.example", dns.TypeA, "a.example. 60 IN A 192.0.2.7")
	var replied atomic.Bool
	var early atomic.Bool
	const delay = 200 * time.Millisecond
	h.com.delay.Store(int64(delay))
	before := func() { early.Store(replied.Load()) }
	h.com.before.Store(&before)
	sent := time.Now()
	r, err := h.query(t, podA, "udp", "a.example.", dns.TypeA)
	got := time.Now()
	replied.Store(true)
	if err != nil || len(r.Answer) != 1 {
		t.Fatalf("%v, %v", r, err)
	}
	b := h.com.all()
	if len(b) != 1 {
		t.Fatalf("%d batches", len(b))
	}
	if early.Load() || !b[0].at.Before(got) || got.Sub(sent) < delay {
		t.Errorf("reply at +%v, commit returned at +%v: the reply did not wait for the commit", got.Sub(sent), b[0].at.Sub(sent))
	}
	// The same over TCP.
	sent = time.Now()
	r, err = h.query(t, podA, "tcp", "a.example.", dns.TypeA)
	got = time.Now()
	if err != nil || len(r.Answer) != 1 {
		t.Fatalf("%v, %v", r, err)
	}
	b = h.com.all()
	if len(b) != 2 || !b[1].at.Before(got) || got.Sub(sent) < delay {
		t.Errorf("tcp: reply at +%v, batches %d", got.Sub(sent), len(b))
	}
}

// TestReplyToAnotherQuestion: a reply whose question is not the query's
// adds nothing, even when its own question matches a pattern.
func TestReplyToAnotherQuestion(t *testing.T) {
	h := start(t, Limits{})
	h.up.set("a.example", dns.TypeA, "a.example. 60 IN A 192.0.2.7")
	mangle := func(m *dns.Msg) {
		m.Question[0].Name = "x.a.example."
		m.Answer[0].Header().Name = "x.a.example."
	}
	h.up.mangle.Store(&mangle)
	for _, network := range []string{"udp", "tcp"} {
		c := &dns.Client{Net: network, Timeout: 5 * time.Second}
		if network == "udp" {
			c.Dialer = &net.Dialer{LocalAddr: &net.UDPAddr{IP: podA.AsSlice()}}
		} else {
			c.Dialer = &net.Dialer{LocalAddr: &net.TCPAddr{IP: podA.AsSlice()}}
		}
		m := new(dns.Msg)
		m.SetQuestion("a.example.", dns.TypeA)
		// miekg's client does not check the question: the pod gets the
		// reply as upstream sent it.
		if _, _, err := c.Exchange(m, h.addr.String()); err != nil {
			t.Fatalf("%s: %v", network, err)
		}
	}
	if n := len(h.com.all()); n != 0 {
		t.Errorf("%d batches from replies to another question", n)
	}
	if c := counter(t, h.fwd.m.AnswersIgnored.WithLabelValues(IgnoredUnparsable)); c != 2 {
		t.Errorf("unparsable %v, want 2", c)
	}
}

func TestCommitFailureStillAnswers(t *testing.T) {
	h := start(t, Limits{})
	h.up.set("a.example", dns.TypeA, "a.example. 60 IN A 192.0.2.7")
	h.com.fail.Store(true)
	r, err := h.query(t, podA, "udp", "a.example.", dns.TypeA)
	if err != nil || r.Rcode != dns.RcodeSuccess || len(r.Answer) != 1 {
		t.Fatalf("%v, %v", r, err)
	}
	if c := counter(t, h.fwd.m.AnswersIgnored.WithLabelValues(IgnoredCommitFailed)); c != 1 {
		t.Errorf("commit_failed %v", c)
	}
	if c := counter(t, h.fwd.m.AnswersCommitted); c != 0 {
		t.Errorf("committed %v", c)
	}
}

func TestNotSubjectRefused(t *testing.T) {
	h := start(t, Limits{})
	h.up.set("a.example", dns.TypeA, "a.example. 60 IN A 192.0.2.7")
	r, err := h.query(t, stranger, "udp", "a.example.", dns.TypeA)
	if err != nil || r.Rcode != dns.RcodeRefused || len(r.Question) != 1 || len(r.Answer) != 0 {
		t.Fatalf("stranger over udp: %v, %v", r, err)
	}
	if _, err := h.query(t, stranger, "tcp", "a.example.", dns.TypeA); err == nil {
		t.Error("stranger over tcp was answered")
	}
	// A pod that stops being a subject is refused from the next query.
	tab := &fqdn.Table{Pods: map[netip.Addr]*fqdn.Subject{podA: {Addrs: [2]netip.Addr{podA, {}}, Rules: []*fqdn.Rule{h.web}}}, Servers: []netip.AddrPort{h.up.addr}}
	h.fwd.SetTable(tab)
	if r, err := h.query(t, podB, "udp", "a.example.", dns.TypeA); err != nil || r.Rcode != dns.RcodeRefused {
		t.Fatalf("podB after the swap: %v, %v", r, err)
	}
	h.fwd.SetTable(nil)
	if r, err := h.query(t, podA, "udp", "a.example.", dns.TypeA); err != nil || r.Rcode != dns.RcodeRefused {
		t.Fatalf("nil table: %v, %v", r, err)
	}
	if n := h.up.queries.Load(); n != 0 {
		t.Errorf("upstream got %d queries from refused sources", n)
	}
	if c := counter(t, h.fwd.m.QueriesRefused.WithLabelValues(RefusedNotSubject)); c != 4 {
		t.Errorf("refused not_subject %v, want 4", c)
	}
	if len(h.com.all()) != 0 {
		t.Error("something was committed")
	}
}

// udpFrom is a raw UDP socket of a pod connected to the forwarder.
func udpFrom(t *testing.T, pod netip.Addr, fwd netip.AddrPort) *net.UDPConn {
	t.Helper()
	c, err := net.DialUDP("udp", net.UDPAddrFromAddrPort(netip.AddrPortFrom(pod, 0)), net.UDPAddrFromAddrPort(fwd))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// exchangeRaw sends b and returns the reply (nil if none within wait).
func exchangeRaw(t *testing.T, c *net.UDPConn, b []byte, wait time.Duration) *dns.Msg {
	t.Helper()
	if _, err := c.Write(b); err != nil {
		t.Fatal(err)
	}
	c.SetReadDeadline(time.Now().Add(wait))
	buf := make([]byte, 65535)
	n, err := c.Read(buf)
	if err != nil {
		return nil
	}
	m := new(dns.Msg)
	if err := m.Unpack(buf[:n]); err != nil {
		t.Fatalf("unparsable reply %x: %v", buf[:n], err)
	}
	return m
}

func TestMalformedQueries(t *testing.T) {
	h := start(t, Limits{})
	h.up.set("a.example", dns.TypeA, "a.example. 60 IN A 192.0.2.7")
	c := udpFrom(t, podA, h.addr)
	pack := func(m *dns.Msg) []byte {
		b, err := m.Pack()
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	q := new(dns.Msg)
	q.SetQuestion("a.example.", dns.TypeA)
	resp := new(dns.Msg)
	resp.SetReply(q)
	update := new(dns.Msg)
	update.SetUpdate("a.example.")
	two := q.Copy()
	two.Question = append(two.Question, two.Question[0])
	headerOnly := pack(q)[:12]
	cut := pack(q)
	cut = cut[:len(cut)-3]
	for _, tt := range []struct {
		name  string
		b     []byte
		rcode int // -1: no reply
	}{
		{"empty", []byte{}, -1},
		{"5 bytes", []byte{1, 2, 3, 4, 5}, -1},
		{"a response", pack(resp), -1},
		{"header only", headerOnly, dns.RcodeFormatError},
		{"question cut short", cut, dns.RcodeFormatError},
		{"two questions", pack(two), dns.RcodeFormatError},
		{"update", pack(update), dns.RcodeNotImplemented},
	} {
		r := exchangeRaw(t, c, tt.b, 300*time.Millisecond)
		switch {
		case tt.rcode == -1 && r != nil:
			t.Errorf("%s: reply %v, want none", tt.name, r)
		case tt.rcode >= 0 && (r == nil || r.Rcode != tt.rcode):
			t.Errorf("%s: reply %v, want rcode %s", tt.name, r, dns.RcodeToString[tt.rcode])
		}
	}
	// Random bytes, with and without a plausible query header, from
	// another pod: the junk that parses as queries fills that pod's
	// in-flight slots for a moment, and only that pod's.
	cb := udpFrom(t, podB, h.addr)
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range 3000 {
		b := make([]byte, rng.IntN(600))
		for j := range b {
			b[j] = byte(rng.Uint32())
		}
		if i%2 == 0 && len(b) >= 12 {
			copy(b, headerOnly)
		}
		cb.Write(b)
	}
	// TCP: a length beyond maxQuery or below a header closes the
	// connection (reset, as the rest is unread).
	tcpFrom := func() *net.TCPConn {
		conn, err := net.DialTCP("tcp", net.TCPAddrFromAddrPort(netip.AddrPortFrom(podA, 0)), net.TCPAddrFromAddrPort(h.addr))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { conn.Close() })
		conn.SetDeadline(time.Now().Add(3 * time.Second))
		return conn
	}
	for _, b := range [][]byte{{0xff, 0xff, 1, 2, 3}, {0, 5, 1, 2, 3, 4, 5}} {
		conn := tcpFrom()
		conn.Write(b)
		rest, err := io.ReadAll(conn)
		if (err != nil && !errors.Is(err, syscall.ECONNRESET)) || len(rest) > 0 {
			t.Errorf("tcp %x: %x, %v; want the connection closed", b[:2], rest, err)
		}
	}
	// 40 zero bytes are a query header without a question: FORMERR, and
	// the connection goes on.
	conn := tcpFrom()
	conn.Write(append([]byte{0, 40}, make([]byte, 40)...))
	rest, err := readTCPMsg(conn, dns.MaxMsgSize)
	var m dns.Msg
	if err != nil || m.Unpack(rest) != nil || m.Rcode != dns.RcodeFormatError {
		t.Errorf("tcp zeros: %v, %v", m, err)
	}
	dc := &dns.Conn{Conn: conn}
	if err := dc.WriteMsg(q); err != nil {
		t.Fatal(err)
	}
	if r, err := dc.ReadMsg(); err != nil || len(r.Answer) != 1 {
		t.Errorf("tcp query after FORMERR: %v, %v", r, err)
	}
	// The forwarder still serves, and nothing was committed by the junk.
	if r, err := h.query(t, podA, "udp", "a.example.", dns.TypeA); err != nil || len(r.Answer) != 1 {
		t.Fatalf("after the junk: %v, %v", r, err)
	}
	if got := h.com.keys("web4"); len(got) != 2 {
		t.Errorf("elements %v", got)
	}
	if c := counter(t, h.fwd.m.QueriesRefused.WithLabelValues(RefusedMalformed)); c < 5 {
		t.Errorf("malformed %v", c)
	}
}

// TestLargeAnswer: the largest answer a message holds (4,000 A records in
// 64 KiB; 10,000 do not fit in one DNS message) adds MaxAddrsPerAnswer
// elements in one batch, counts the rest, and reaches the pod whole.
func TestLargeAnswer(t *testing.T) {
	h := start(t, Limits{})
	const n = 4000
	records := make([]string, n)
	for i := range records {
		records[i] = fmt.Sprintf("huge.a.example. 60 IN A 10.%d.%d.%d", i>>16, (i>>8)&255, i&255)
	}
	h.up.set("huge.a.example", dns.TypeA, records...)
	r, err := h.query(t, podA, "tcp", "huge.a.example.", dns.TypeA)
	if err != nil || len(r.Answer) != n {
		t.Fatalf("%v records, %v", len(r.Answer), err)
	}
	b := h.com.all()
	if len(b) != 1 || len(b[0].elems) != fqdn.MaxAddrsPerAnswer {
		t.Fatalf("%d batches, want 1 of %d elements", len(b), fqdn.MaxAddrsPerAnswer)
	}
	if c := counter(t, h.fwd.m.AddrsIgnored.WithLabelValues(addrsOverLimit)); c != n-fqdn.MaxAddrsPerAnswer {
		t.Errorf("over_limit %v, want %d", c, n-fqdn.MaxAddrsPerAnswer)
	}
}

// TestConcurrentQueriesOnePod: 1,000 queries at once from one pod. At most
// PodInFlight reach upstream at a time, the rest are REFUSED, every query
// gets an answer, and another pod is still served.
func TestConcurrentQueriesOnePod(t *testing.T) {
	h := start(t, Limits{})
	h.up.set("a.example", dns.TypeA, "a.example. 60 IN A 192.0.2.7")
	h.up.delay.Store(int64(50 * time.Millisecond))
	var ok, refused, failed atomic.Int64
	var wg sync.WaitGroup
	for range 1000 {
		wg.Go(func() {
			for range 3 { // a resolver's retries, for queries the socket dropped
				r, err := h.query(t, podA, "udp", "a.example.", dns.TypeA)
				if err != nil {
					continue
				}
				switch r.Rcode {
				case dns.RcodeSuccess:
					ok.Add(1)
				case dns.RcodeRefused:
					refused.Add(1)
				default:
					failed.Add(1)
				}
				return
			}
			failed.Add(1)
		})
	}
	wg.Wait()
	t.Logf("ok %d, refused %d, failed %d, upstream max in flight %d", ok.Load(), refused.Load(), failed.Load(), h.up.maxInFlight.Load())
	if ok.Load()+refused.Load() != 1000 || failed.Load() != 0 {
		t.Errorf("ok %d + refused %d != 1000 (failed %d)", ok.Load(), refused.Load(), failed.Load())
	}
	if m := h.up.maxInFlight.Load(); m > 32 || m < 2 {
		t.Errorf("upstream saw %d queries at once, want 2..32", m)
	}
	if refused.Load() == 0 {
		t.Error("nothing refused")
	}
	if c := counter(t, h.fwd.m.QueriesRefused.WithLabelValues(RefusedPodLimit)); c < float64(refused.Load()) {
		t.Errorf("pod_limit %v < %d refusals", c, refused.Load())
	}
	h.up.delay.Store(0)
	if r, err := h.query(t, podB, "udp", "a.example.", dns.TypeA); err != nil || r.Rcode != dns.RcodeSuccess {
		t.Fatalf("podB: %v, %v", r, err)
	}
	waitIdle(t, h.fwd)
}

// waitIdle waits until no query is in flight: a slot is released just
// after the reply is written.
func waitIdle(t *testing.T, f *Forwarder) {
	t.Helper()
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(10 * time.Millisecond) {
		f.mu.Lock()
		total, pods := f.adm.total, len(f.adm.pods)+len(f.adm.queue)
		f.mu.Unlock()
		if total == 0 && pods == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d queries of %d pods still in flight", total, pods)
		}
	}
}

// TestGlobalLimit: with all of Limits.InFlight taken, queries within their
// share wait for a slot (at most twice InFlight of them) and are answered;
// the ones beyond that are refused.
func TestGlobalLimit(t *testing.T) {
	h := start(t, Limits{InFlight: 2})
	h.up.set("a.example", dns.TypeA, "a.example. 60 IN A 192.0.2.7")
	h.up.delay.Store(int64(300 * time.Millisecond))
	var ok, refused atomic.Int64
	var wg sync.WaitGroup
	for _, pod := range []netip.Addr{podA, podA, podA, podA, podB, podB, podB, podB} {
		wg.Go(func() {
			r, err := h.query(t, pod, "udp", "a.example.", dns.TypeA)
			if err != nil {
				t.Error(err)
				return
			}
			switch r.Rcode {
			case dns.RcodeRefused:
				refused.Add(1)
			case dns.RcodeSuccess:
				ok.Add(1)
			}
		})
	}
	wg.Wait()
	if ok.Load() != 6 || refused.Load() != 2 || counter(t, h.fwd.m.QueriesRefused.WithLabelValues(RefusedGlobalLimit)) != 2 {
		t.Errorf("answered %d, refused %d; want 6 and 2", ok.Load(), refused.Load())
	}
	if c := counter(t, h.fwd.m.QueriesQueued); c != 4 {
		t.Errorf("queued %v, want 4", c)
	}
}

// blackhole is an upstream that reads everything and answers nothing.
func blackhole(t *testing.T) netip.AddrPort {
	t.Helper()
	var pc net.PacketConn
	var l net.Listener
	var port int
	for range 20 {
		var err error
		pc, err = net.ListenPacket("udp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		port = pc.LocalAddr().(*net.UDPAddr).Port
		if l, err = net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", port)); err == nil {
			break
		}
		pc.Close()
	}
	if l == nil {
		t.Fatal("no port free for udp and tcp")
	}
	var conns []net.Conn
	var mu sync.Mutex
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		pc.Close()
		l.Close()
		mu.Lock()
		for _, c := range conns {
			c.Close()
		}
		mu.Unlock()
	})
	return netip.AddrPortFrom(netip.MustParseAddr("127.0.0.1"), uint16(port))
}

func TestUpstreamNeverAnswers(t *testing.T) {
	h := start(t, Limits{UpstreamTimeout: 300 * time.Millisecond})
	a := &fqdn.Subject{Addrs: [2]netip.Addr{podA, {}}, Rules: []*fqdn.Rule{h.web}}
	h.fwd.SetTable(&fqdn.Table{Pods: map[netip.Addr]*fqdn.Subject{podA: a}, Servers: []netip.AddrPort{blackhole(t)}})
	for _, network := range []string{"udp", "tcp"} {
		begin := time.Now()
		r, err := h.query(t, podA, network, "a.example.", dns.TypeA)
		took := time.Since(begin)
		if err != nil || r.Rcode != dns.RcodeServerFailure || len(r.Question) != 1 {
			t.Fatalf("%s: %v, %v", network, r, err)
		}
		// Not before the timeout: the SERVFAIL is the timeout's.
		if took < 300*time.Millisecond {
			t.Errorf("%s: SERVFAIL after %v, before the 300ms upstream timeout", network, took)
		}
	}
	// No server for any family: SERVFAIL at once.
	h.fwd.SetTable(&fqdn.Table{Pods: map[netip.Addr]*fqdn.Subject{podA: a}})
	if r, err := h.query(t, podA, "udp", "a.example.", dns.TypeA); err != nil || r.Rcode != dns.RcodeServerFailure {
		t.Fatalf("no server: %v, %v", r, err)
	}
	if c := counter(t, h.fwd.m.QueriesRefused.WithLabelValues(RefusedUpstream)); c != 3 {
		t.Errorf("refused upstream %v, want 3", c)
	}
	waitIdle(t, h.fwd)
}

func TestTCPConnectionLimits(t *testing.T) {
	h := start(t, Limits{PodConns: 2, TCPIdleTimeout: 300 * time.Millisecond})
	dial := func() *net.TCPConn {
		c, err := net.DialTCP("tcp", net.TCPAddrFromAddrPort(netip.AddrPortFrom(podA, 0)), net.TCPAddrFromAddrPort(h.addr))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c
	}
	// closedWithin reports whether the forwarder closes c within d.
	closedWithin := func(c *net.TCPConn, d time.Duration) bool {
		c.SetReadDeadline(time.Now().Add(d))
		_, err := c.Read(make([]byte, 1))
		return err == io.EOF
	}
	conns := func() int {
		h.fwd.mu.Lock()
		defer h.fwd.mu.Unlock()
		return h.fwd.nconns
	}
	c1, c2 := dial(), dial()
	poll(t, "both connections accepted", func() bool { return conns() == 2 })
	// The third is refused as it is accepted (counted), not closed later
	// as idle: the count tells the two apart, the close follows.
	third := dial()
	poll(t, "the third connection refused", func() bool {
		return counter(t, h.fwd.m.QueriesRefused.WithLabelValues(RefusedConnLimit)) == 1
	})
	if conns() != 2 || !closedWithin(third, time.Minute) {
		t.Error("a third connection of the pod was not closed")
	}
	// Idle connections are closed after TCPIdleTimeout, which frees room.
	if !closedWithin(c1, time.Minute) || !closedWithin(c2, time.Minute) {
		t.Error("idle connections were not closed")
	}
	h.up.set("a.example", dns.TypeA, "a.example. 60 IN A 192.0.2.7")
	if r, err := h.query(t, podA, "tcp", "a.example.", dns.TypeA); err != nil || len(r.Answer) != 1 {
		t.Fatalf("after the idle close: %v, %v", r, err)
	}
}

func TestHeartbeatAndShutdown(t *testing.T) {
	up := startUpstream(t, "127.0.0.1")
	up.set("a.example", dns.TypeA, "a.example. 60 IN A 192.0.2.7")
	// A query is in flight at the shutdown: the upstream holds its answer
	// until the test has seen Run return.
	hold := make(chan struct{})
	up.hold.Store(&hold)
	defer close(hold)
	com := &committer{}
	f, err := New(Config{Listen: []netip.AddrPort{netip.MustParseAddrPort("127.0.0.1:0")}, Committer: com})
	if err != nil {
		t.Fatal(err)
	}
	f.SetTable(&fqdn.Table{
		Pods:    map[netip.Addr]*fqdn.Subject{podA: {Addrs: [2]netip.Addr{podA, {}}, Rules: []*fqdn.Rule{{Patterns: []fqdn.Pattern{{Domain: "a.example"}}, Set4: "s4"}}}},
		Servers: []netip.AddrPort{up.addr},
	})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	hbDone := make(chan struct{})
	go func() {
		defer close(hbDone)
		f.Heartbeat(context.Background(), "dns_up", []string{"tcp", "udp"})
	}()
	errc := make(chan error, 1)
	go func() { errc <- f.Run(ctx) }()
	// Two refreshes: the first at once, the next a period later.
	poll(t, "two heartbeat refreshes", func() bool { return len(com.keys("dns_up")) >= 4 })
	for i, b := range com.keys("dns_up") {
		if want := []string{"tcp 3s", "udp 3s"}[i%2]; b != want {
			t.Errorf("heartbeat %d is %q, want %q", i, b, want)
		}
	}
	go queryFrom(podA, f.Addrs()[0], "udp", "a.example.", dns.TypeA)
	poll(t, "the query to reach the upstream", func() bool { return up.inFlight.Load() == 1 })
	cancel()
	if err := <-errc; err != nil {
		t.Errorf("Run: %v", err)
	}
	// Run did not wait for the exchange in flight: the upstream still
	// holds its answer.
	if up.inFlight.Load() != 1 {
		t.Error("Run returned only after the upstream answered the query in flight")
	}
	// Heartbeat returns when Run's context is done, so nothing
	// refreshes the redirect after the shutdown.
	<-hbDone
	if err := f.Run(context.Background()); err == nil {
		t.Error("a second Run did not fail")
	}
}

func TestNewErrors(t *testing.T) {
	com := &committer{}
	for _, cfg := range []Config{
		{Committer: com},
		{Listen: []netip.AddrPort{netip.MustParseAddrPort("0.0.0.0:53")}, Committer: com},
		{Listen: []netip.AddrPort{netip.MustParseAddrPort("[::]:53")}, Committer: com},
		{Listen: []netip.AddrPort{{}}, Committer: com},
		{Listen: []netip.AddrPort{netip.MustParseAddrPort("127.0.0.1:0")}},
	} {
		if _, err := New(cfg); err == nil {
			t.Errorf("New(%+v) did not fail", cfg)
		}
	}
	// A port taken: Run fails, and a Heartbeat waiting for it returns.
	l, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	f, err := New(Config{Listen: []netip.AddrPort{netip.MustParseAddrPort(l.LocalAddr().String())}, Committer: com})
	if err != nil {
		t.Fatal(err)
	}
	hb := make(chan struct{})
	go func() { f.Heartbeat(context.Background(), "s", []string{"udp"}); close(hb) }()
	if err := f.Run(context.Background()); err == nil {
		t.Error("Run on a taken port did not fail")
	}
	<-hb
}

// TestPendingPodWaitsForTable: a query from an address of the node's pod
// ranges that no subject has yet (a pod starting) waits for the table
// that names it: when that table makes it a subject, its answer is
// committed before the reply; when the table says it is no subject (or
// PendingWait passes) it is relayed without anything added. An address
// outside the ranges is refused at once.
func TestPendingPodWaitsForTable(t *testing.T) {
	h := start(t, Limits{})
	h.up.set("a.example", dns.TypeA, "a.example. 60 IN A 192.0.2.7")
	pending := netip.MustParseAddr("127.0.0.17")
	base := func(subject bool) *fqdn.Table {
		tab := &fqdn.Table{Pods: map[netip.Addr]*fqdn.Subject{podA: {Addrs: [2]netip.Addr{podA, {}}, Rules: []*fqdn.Rule{h.web}}},
			Servers: []netip.AddrPort{h.up.addr}, Ranges: []netip.Prefix{netip.MustParsePrefix("127.0.0.16/29")}}
		if subject {
			tab.Pods[pending] = &fqdn.Subject{Addrs: [2]netip.Addr{pending, {}}, Rules: []*fqdn.Rule{h.web}}
		}
		return tab
	}
	known := base(false)
	known.Known = map[netip.Addr]bool{pending: true}
	for _, tc := range []struct {
		name      string
		becomes   *fqdn.Table
		committed int
	}{{"becomes a subject", base(true), 1}, {"becomes a known pod that is no subject", known, 0}} {
		t.Run(tc.name, func(t *testing.T) {
			h.fwd.SetTable(base(false))
			before := len(h.com.all())
			const after = 150 * time.Millisecond
			go func() {
				time.Sleep(after)
				// A table with something else changed first: the query
				// keeps waiting while the pod is still pending.
				h.fwd.SetTable(base(false))
				time.Sleep(after)
				h.fwd.SetTable(tc.becomes)
			}()
			start := time.Now()
			r, err := h.query(t, pending, "udp", "a.example.", dns.TypeA)
			took := time.Since(start)
			if err != nil || r.Rcode != dns.RcodeSuccess || len(r.Answer) != 1 {
				t.Fatalf("pending pod: %v, %v", r, err)
			}
			if took < 2*after || took > PendingWait {
				t.Errorf("answered after %v, want after the table that names it (%v) and before PendingWait", took, 2*after)
			}
			if got := len(h.com.all()) - before; got != tc.committed {
				t.Errorf("%d batches committed, want %d", got, tc.committed)
			}
		})
	}
	t.Run("never named", func(t *testing.T) {
		h.fwd.SetTable(base(false))
		start := time.Now()
		r, err := h.query(t, pending, "udp", "a.example.", dns.TypeA)
		if err != nil || r.Rcode != dns.RcodeSuccess {
			t.Fatalf("pending pod: %v, %v", r, err)
		}
		if took := time.Since(start); took < PendingWait {
			t.Errorf("answered after %v, before PendingWait", took)
		}
	})
	if r, err := h.query(t, stranger, "udp", "a.example.", dns.TypeA); err != nil || r.Rcode != dns.RcodeRefused {
		t.Errorf("an address outside the ranges: %v, %v", r, err)
	}
}

// TestHeartbeatFollowsRedirect: the heartbeat refreshes while the table
// redirects anyone, also a node with domainNames rules and no subject yet
// (only its pod ranges, for pods starting), and not for a table without a
// redirect (whose heartbeat set does not exist).
func TestHeartbeatFollowsRedirect(t *testing.T) {
	for _, tc := range []struct {
		name  string
		table *fqdn.Table
		beats bool
	}{
		{"pod ranges only", &fqdn.Table{Pods: map[netip.Addr]*fqdn.Subject{}, Ranges: []netip.Prefix{netip.MustParsePrefix("10.0.0.0/24")}}, true},
		{"no redirect", &fqdn.Table{Pods: map[netip.Addr]*fqdn.Subject{}}, false},
		{"no table", nil, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			com := &committer{}
			f, err := New(Config{Listen: []netip.AddrPort{netip.MustParseAddrPort("127.0.0.1:0")}, Committer: com})
			if err != nil {
				t.Fatal(err)
			}
			f.SetTable(tc.table)
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan struct{})
			go func() { defer close(done); _ = f.Run(ctx) }()
			go f.Heartbeat(ctx, "dns_up", []string{"tcp", "udp"})
			if tc.beats {
				poll(t, "a heartbeat", func() bool { return len(com.keys("dns_up")) > 0 })
			} else {
				// Absence: the first refresh comes at once when
				// there is one, so a fraction of the period shows
				// there is none.
				time.Sleep(300 * time.Millisecond)
			}
			cancel()
			<-done
			if got := len(com.keys("dns_up")) > 0; got != tc.beats {
				t.Errorf("heartbeat refreshed %v, want %v", com.keys("dns_up"), tc.beats)
			}
		})
	}
}

// TestTCPNamespaceConnLimit: one namespace's pods hold at most a quarter
// of Limits.Conns; another namespace's pod still connects.
func TestTCPNamespaceConnLimit(t *testing.T) {
	h := start(t, Limits{PodConns: 2, Conns: 8, TCPIdleTimeout: 5 * time.Second})
	sub := func(ns string, a netip.Addr) *fqdn.Subject {
		return &fqdn.Subject{Namespace: ns, Addrs: [2]netip.Addr{a, {}}, Rules: []*fqdn.Rule{h.web}}
	}
	h.fwd.SetTable(&fqdn.Table{Pods: map[netip.Addr]*fqdn.Subject{
		podA: sub("t1", podA), podB: sub("t1", podB), stranger: sub("t2", stranger),
	}, Servers: []netip.AddrPort{h.up.addr}})
	h.up.set("a.example", dns.TypeA, "a.example. 60 IN A 192.0.2.7")
	// dial connects from pod and reports whether a query is answered on
	// the connection (a refused connection is closed before it is).
	dial := func(pod netip.Addr) bool {
		c, err := net.DialTCP("tcp", net.TCPAddrFromAddrPort(netip.AddrPortFrom(pod, 0)), net.TCPAddrFromAddrPort(h.addr))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		dc := &dns.Conn{Conn: c}
		m := new(dns.Msg)
		m.SetQuestion("a.example.", dns.TypeA)
		_ = c.SetDeadline(time.Now().Add(5 * time.Second))
		if err := dc.WriteMsg(m); err != nil {
			return false
		}
		r, err := dc.ReadMsg()
		return err == nil && len(r.Answer) == 1
	}
	if !dial(podA) || !dial(podB) {
		t.Fatal("the first two connections of namespace t1 were refused")
	}
	if dial(podB) {
		t.Error("namespace t1 holds a third connection, over a quarter of 8")
	}
	if !dial(stranger) {
		t.Error("namespace t2's pod cannot connect")
	}
}
