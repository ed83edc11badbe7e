package dnsfwd

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/miekg/dns"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/nftguard/nftguard/fqdn"
)

// The "pods" of the tests are loopback addresses the test clients bind
// to, so the forwarder sees distinct sources.
var (
	podA     = netip.MustParseAddr("127.0.0.2") // dual-stack with ::1
	podA6    = netip.MustParseAddr("::1")
	podB     = netip.MustParseAddr("127.0.0.3")
	stranger = netip.MustParseAddr("127.0.0.9")
)

// upstream is the "cluster DNS": a real miekg/dns server on loopback,
// UDP and TCP on the same port, answering from a zone-file-like map.
type upstream struct {
	addr    netip.AddrPort
	mu      sync.Mutex
	records map[string][]string // "name. TYPE" → records in zone-file form
	// delay is how long each answer waits; inFlight and maxInFlight
	// count the queries being answered.
	delay                 atomic.Int64 // time.Duration
	inFlight, maxInFlight atomic.Int64
	// hold, if set, holds each answer until the channel is closed.
	hold    atomic.Pointer[chan struct{}]
	queries atomic.Int64
	// mangle, if set, changes each reply before it is sent.
	mangle atomic.Pointer[func(*dns.Msg)]
	// sent is the last reply, as the server packed it.
	sent atomic.Pointer[dns.Msg]
}

func startUpstream(t testing.TB, host string) *upstream {
	t.Helper()
	u := &upstream{records: map[string][]string{}}
	var pc net.PacketConn
	var l net.Listener
	for range 20 {
		var err error
		pc, err = net.ListenPacket("udp", net.JoinHostPort(host, "0"))
		if err != nil {
			t.Fatal(err)
		}
		port := pc.LocalAddr().(*net.UDPAddr).Port
		l, err = net.Listen("tcp", net.JoinHostPort(host, fmt.Sprint(port)))
		if err == nil {
			u.addr = netip.AddrPortFrom(netip.MustParseAddr(host), uint16(port))
			break
		}
		pc.Close()
	}
	if !u.addr.IsValid() {
		t.Fatal("no port free for udp and tcp")
	}
	for _, s := range []*dns.Server{{PacketConn: pc, Handler: u}, {Listener: l, Handler: u}} {
		started := make(chan struct{})
		s.NotifyStartedFunc = func() { close(started) }
		go s.ActivateAndServe()
		<-started
		t.Cleanup(func() { s.Shutdown() })
	}
	return u
}

func (u *upstream) set(name string, qtype uint16, records ...string) {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.records[dns.Fqdn(strings.ToLower(name))+" "+dns.TypeToString[qtype]] = records
}

func (u *upstream) ServeDNS(w dns.ResponseWriter, r *dns.Msg) {
	u.queries.Add(1)
	n := u.inFlight.Add(1)
	defer u.inFlight.Add(-1)
	for {
		m := u.maxInFlight.Load()
		if n <= m || u.maxInFlight.CompareAndSwap(m, n) {
			break
		}
	}
	time.Sleep(time.Duration(u.delay.Load()))
	if h := u.hold.Load(); h != nil {
		<-*h
	}
	resp := new(dns.Msg)
	resp.SetReply(r)
	q := r.Question[0]
	u.mu.Lock()
	records, ok := u.records[strings.ToLower(q.Name)+" "+dns.TypeToString[q.Qtype]]
	u.mu.Unlock()
	if !ok {
		resp.Rcode = dns.RcodeNameError
	}
	for _, s := range records {
		rr, err := dns.NewRR(s)
		if err != nil {
			panic(err)
		}
		resp.Answer = append(resp.Answer, rr)
	}
	if _, isUDP := w.RemoteAddr().(*net.UDPAddr); isUDP {
		size := dns.MinMsgSize
		if opt := r.IsEdns0(); opt != nil {
			size = max(size, int(opt.UDPSize()))
		}
		resp.Truncate(size)
	} else {
		resp.Compress = true
	}
	if f := u.mangle.Load(); f != nil {
		(*f)(resp)
	}
	u.sent.Store(resp.Copy())
	w.WriteMsg(resp)
}

// batch is one AddTimed call of the fake committer.
type batch struct {
	elems []fqdn.Element
	at    time.Time // when AddTimed returned
}

// committer records what it is asked to add; it can be made to fail or
// to take time.
type committer struct {
	mu      sync.Mutex
	batches []batch
	delay   atomic.Int64 // time.Duration
	fail    atomic.Bool
	// before runs at the start of each AddTimed.
	before atomic.Pointer[func()]
}

func (c *committer) AddTimed(ctx context.Context, elems []fqdn.Element) error {
	if f := c.before.Load(); f != nil {
		(*f)()
	}
	if d := time.Duration(c.delay.Load()); d > 0 {
		select {
		case <-time.After(d):
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	if c.fail.Load() {
		return errors.New("the kernel says no")
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.batches = append(c.batches, batch{elems: append([]fqdn.Element(nil), elems...), at: time.Now()})
	return nil
}

func (c *committer) all() []batch {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]batch(nil), c.batches...)
}

// keys are the elements of all batches to set, as "KEY TTL".
func (c *committer) keys(set string) []string {
	var out []string
	for _, b := range c.all() {
		for _, e := range b.elems {
			if e.Set == set {
				out = append(out, fmt.Sprintf("%s %v", e.Key, e.TTL))
			}
		}
	}
	return out
}

type harness struct {
	up    *upstream
	com   *committer
	fwd   *Forwarder
	reg   *prometheus.Registry
	addr  netip.AddrPort // the forwarder's IPv4 address
	addr6 netip.AddrPort
	web   *fqdn.Rule
}

// start runs a forwarder on 127.0.0.1 and ::1 in front of an upstream on
// 127.0.0.1, with podA (127.0.0.2 and ::1) and podB (127.0.0.3) subjects
// of a rule for a.example, *.a.example and *.wild.example.
func start(t testing.TB, lim Limits) *harness {
	t.Helper()
	h := &harness{up: startUpstream(t, "127.0.0.1"), com: &committer{}, reg: prometheus.NewRegistry()}
	m, err := NewMetrics(h.reg)
	if err != nil {
		t.Fatal(err)
	}
	h.fwd, err = New(Config{
		Listen:    []netip.AddrPort{netip.MustParseAddrPort("127.0.0.1:0"), netip.MustParseAddrPort("[::1]:0")},
		Committer: h.com, Metrics: m, Limits: lim,
	})
	if err != nil {
		t.Fatal(err)
	}
	h.web = &fqdn.Rule{Policy: "web", Patterns: []fqdn.Pattern{{Domain: "a.example"}, {Domain: "a.example", Wildcard: true}, {Domain: "wild.example", Wildcard: true}}, Set4: "web4", Set6: "web6"}
	a := &fqdn.Subject{Addrs: [2]netip.Addr{podA, podA6}, Rules: []*fqdn.Rule{h.web}}
	h.fwd.SetTable(&fqdn.Table{
		Pods: map[netip.Addr]*fqdn.Subject{
			podA: a, podA6: a,
			podB: {Addrs: [2]netip.Addr{podB, {}}, Rules: []*fqdn.Rule{h.web}},
		},
		Servers: []netip.AddrPort{h.up.addr},
	})
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() { errc <- h.fwd.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-errc; err != nil {
			t.Errorf("Run: %v", err)
		}
	})
	select {
	case <-h.fwd.Ready():
	case err := <-errc:
		t.Fatalf("Run: %v", err)
	}
	h.addr, h.addr6 = h.fwd.Addrs()[0], h.fwd.Addrs()[1]
	return h
}

// query asks the forwarder name/qtype from pod over net ("udp", "tcp").
func (h *harness) query(t testing.TB, pod netip.Addr, network, name string, qtype uint16) (*dns.Msg, error) {
	t.Helper()
	server := h.addr
	if pod.Is6() {
		server = h.addr6
	}
	return queryFrom(pod, server, network, name, qtype)
}

func queryFrom(pod netip.Addr, server netip.AddrPort, network, name string, qtype uint16) (*dns.Msg, error) {
	var local net.Addr = &net.UDPAddr{IP: pod.AsSlice()}
	if network == "tcp" {
		local = &net.TCPAddr{IP: pod.AsSlice()}
	}
	c := &dns.Client{Net: network, Timeout: 5 * time.Second, Dialer: &net.Dialer{LocalAddr: local, Timeout: 5 * time.Second}}
	m := new(dns.Msg)
	m.SetQuestion(name, qtype)
	r, _, err := c.Exchange(m, server.String())
	return r, err
}

func counter(t testing.TB, c prometheus.Collector) float64 {
	t.Helper()
	return testutil.ToFloat64(c)
}

// poll waits until cond holds. The minute guards against a hang; it is
// not a bound on how fast cond becomes true.
func poll(t testing.TB, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(time.Minute); !cond(); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
	}
}
