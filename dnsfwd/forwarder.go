package dnsfwd

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"github.com/miekg/dns"

	"github.com/nftguard/nftguard/fqdn"
	"github.com/nftguard/nftguard/internal/nfnl"
)

// Committer adds elements with a timeout to timeout sets of the table, all
// in one netlink batch: the elements are in the kernel when it returns
// nil. The agent adapts the engine to it.
type Committer interface {
	AddTimed(ctx context.Context, elems []fqdn.Element) error
}

// Limits bound what pods can cost the forwarder; a zero field takes its
// default.
type Limits struct {
	// PodInFlight is how many queries one pod (both of its addresses)
	// can have in flight at most; more are REFUSED. Default 32.
	PodInFlight int
	// InFlight is how many queries all pods can have in flight. Each
	// holds at most one reply buffer (at most 64 KiB), so this bounds
	// the forwarder's memory. It is shared fairly between namespaces,
	// then pods (see admission.go): a query over its share is REFUSED,
	// one within it waits for a slot while all are taken. Default 256.
	InFlight int
	// NamespaceMin and PodMin are the shares a namespace and a pod keep
	// however many others have queries in flight: a query within them
	// is never refused as over its share (it may wait). Defaults 8, 4.
	NamespaceMin, PodMin int
	// StartingInFlight is how many queries the sources of the node's
	// pod ranges that no pod has (pods starting, see PendingWait) have
	// in flight together, and how many TCP connections they have open
	// together. Default 16.
	StartingInFlight int
	// QueueWait bounds how long a query within its share waits for a
	// slot while all are taken; then it is REFUSED. Default 2 s, the
	// longest a slot is normally held (UpstreamTimeout).
	QueueWait time.Duration
	// PodConns and Conns bound the open TCP connections of one pod and
	// of all; a connection beyond them is closed. Defaults 8 and 256.
	// One namespace holds at most a quarter of Conns, so the pods of
	// one tenant cannot take every connection from the others.
	PodConns, Conns int
	// UpstreamTimeout bounds one exchange with the cluster DNS (dial,
	// write, read); after it the pod gets SERVFAIL. Default 2 s.
	UpstreamTimeout time.Duration
	// CommitTimeout bounds one Committer.AddTimed. Default 2 s.
	CommitTimeout time.Duration
	// PodElements bounds the elements one pod's answers hold in the
	// kernel at a time; the addresses of answers beyond it are not added
	// (their connections fail closed). Default DefaultPodElements.
	PodElements int
	// NodeElements bounds the elements all pods' answers hold in the
	// kernel at a time, failing closed as PodElements does. Each subject
	// pod may hold an equal share of it (at least MinPodElements, at most
	// PodElements), so pods at their limit cannot lock another out.
	// Default DefaultNodeElements.
	NodeElements int
	// TCPIdleTimeout closes a pod's TCP connection that sends no query
	// for that long; TCPReadTimeout bounds reading one query once its
	// first byte came, and writing one reply. Defaults 10 s and 2 s.
	TCPIdleTimeout, TCPReadTimeout time.Duration
}

func (l Limits) withDefaults() Limits {
	def := func(v *int, d int) {
		if *v <= 0 {
			*v = d
		}
	}
	defD := func(v *time.Duration, d time.Duration) {
		if *v <= 0 {
			*v = d
		}
	}
	def(&l.PodInFlight, 32)
	def(&l.InFlight, 256)
	def(&l.NamespaceMin, 8)
	def(&l.PodMin, 4)
	def(&l.StartingInFlight, 16)
	defD(&l.QueueWait, 2*time.Second)
	def(&l.PodConns, 8)
	def(&l.Conns, 256)
	def(&l.PodElements, DefaultPodElements)
	def(&l.NodeElements, DefaultNodeElements)
	defD(&l.UpstreamTimeout, 2*time.Second)
	defD(&l.CommitTimeout, 2*time.Second)
	defD(&l.TCPIdleTimeout, 10*time.Second)
	defD(&l.TCPReadTimeout, 2*time.Second)
	return l
}

// maxQuery is the largest query accepted over TCP: a question and an OPT
// record fit many times over, and a pod cannot make the forwarder buffer
// 64 KiB per connection.
const maxQuery = 4096

const udpReadBuffer = 4 << 20

// Replies over bigReply bytes are parsed at most maxBigParses at a time
// (see parse): 8 parses of the largest reply hold about 6 MB.
const (
	bigReply     = 4096
	maxBigParses = 8
)

// Config is the forwarder's configuration.
type Config struct {
	// Listen are the addresses the table's redirect sends the pods'
	// queries to; each is served over UDP and TCP on the same port (port
	// 0 picks one free for both, for tests). Use specific addresses, not
	// 0.0.0.0 or [::]: a UDP reply must leave from the address the query
	// was redirected to, or conntrack cannot undo the redirect.
	Listen    []netip.AddrPort
	Committer Committer
	Logger    *slog.Logger // nil: slog.Default()
	Metrics   *Metrics     // nil: unregistered collectors
	Limits    Limits
	// NetNS, when set, is the node's network namespace when the agent
	// runs outside it (--netns: labs and tests): the listeners and the
	// upstream sockets are made there. Nil: the caller's namespace.
	NetNS *nfnl.NetNS
}

// Forwarder serves the redirected queries of the subject pods.
type Forwarder struct {
	cfg   Config
	lim   Limits
	log   *slog.Logger
	m     *Metrics
	table atomic.Pointer[fqdn.Table]

	mu       sync.Mutex
	adm      *admission
	conns    map[[2]netip.Addr]int
	nsConns  map[string]int // per namespace (startingNS: the starting pods')
	nconns   int
	open     map[net.Conn]struct{} // pods' TCP connections, closed at shutdown
	budget   *elementBudget
	subjects atomic.Int64 // subject pods of the table, for their element shares

	started  atomic.Bool
	ready    chan struct{} // closed once every listener is bound
	stopping chan struct{} // closed when Run's context is done
	done     chan struct{} // closed when Run returns
	addrs    []netip.AddrPort

	bigParses chan struct{}                 // a semaphore of maxBigParses
	kick      chan struct{}                 // SetTable asks the heartbeat to refresh now
	changed   atomic.Pointer[chan struct{}] // closed and replaced by SetTable

	lastWarn atomic.Int64 // unix nanoseconds of the last rate-limited warning
}

// New checks cfg and returns a forwarder that serves once Run is called.
func New(cfg Config) (*Forwarder, error) {
	if len(cfg.Listen) == 0 {
		return nil, errors.New("dns forwarder: no listen address")
	}
	for _, a := range cfg.Listen {
		if !a.IsValid() || a.Addr().IsUnspecified() {
			return nil, fmt.Errorf("dns forwarder: listen address %v must be a specific address", a)
		}
	}
	if cfg.Committer == nil {
		return nil, errors.New("dns forwarder: no committer")
	}
	f := &Forwarder{
		cfg: cfg, lim: cfg.Limits.withDefaults(), log: cfg.Logger, m: cfg.Metrics,
		conns: map[[2]netip.Addr]int{}, nsConns: map[string]int{}, open: map[net.Conn]struct{}{},
		budget: newElementBudget(),
		ready:  make(chan struct{}), stopping: make(chan struct{}), done: make(chan struct{}),
		bigParses: make(chan struct{}, maxBigParses),
		kick:      make(chan struct{}, 1),
	}
	ch := make(chan struct{})
	f.changed.Store(&ch)
	f.adm = newAdmission(shareLimits{
		total: f.lim.InFlight, podMax: f.lim.PodInFlight, podMin: f.lim.PodMin, nsMin: f.lim.NamespaceMin,
		startingMax: f.lim.StartingInFlight, maxWaiting: 2 * f.lim.InFlight,
		reserve: min(4*f.lim.NamespaceMin, f.lim.InFlight/4),
	})
	if f.log == nil {
		f.log = slog.Default()
	}
	if f.m == nil {
		m, err := NewMetrics(nil)
		if err != nil {
			return nil, err
		}
		f.m = m
	}
	return f, nil
}

// SetTable makes t the table of the queries received from now on; the
// answers to queries in flight are matched against the newest table when
// they arrive. A nil table refuses everything.
//
// A table with a redirect also refreshes the heartbeat at once: the sync
// that first made the redirect (and its heartbeat set) is in force, and
// the redirect must not wait for the next period.
func (f *Forwarder) SetTable(t *fqdn.Table) {
	f.table.Store(t)
	f.tableChanged(t)
	ch := make(chan struct{})
	close(*f.changed.Swap(&ch)) // wakes the queries of pending pods
	if t.Redirects() {
		select {
		case f.kick <- struct{}{}:
		default:
		}
	}
}

// Ready is closed once the listeners are bound.
func (f *Forwarder) Ready() <-chan struct{} { return f.ready }

// Addrs are the addresses served (UDP and TCP on each), valid once Ready
// is closed; they differ from Config.Listen only in ports that were 0.
func (f *Forwarder) Addrs() []netip.AddrPort {
	<-f.ready
	return f.addrs
}

// Run binds the listeners and serves until ctx is done, then closes them
// and the pods' connections and waits for the queries in flight. It
// returns nil after ctx is done, or the error that stopped it.
func (f *Forwarder) Run(ctx context.Context) error {
	if !f.started.CompareAndSwap(false, true) {
		return errors.New("dns forwarder: Run called twice")
	}
	defer close(f.done)
	var udps []*net.UDPConn
	var tcps []*net.TCPListener
	closeAll := func() {
		for _, c := range udps {
			c.Close()
		}
		for _, l := range tcps {
			l.Close()
		}
	}
	for _, a := range f.cfg.Listen {
		var u *net.UDPConn
		var l *net.TCPListener
		err := f.inNS(func() (err error) {
			u, l, err = listen(a)
			return err
		})
		if err != nil {
			closeAll()
			return err
		}
		udps, tcps = append(udps, u), append(tcps, l)
		f.addrs = append(f.addrs, netip.AddrPortFrom(a.Addr(), uint16(l.Addr().(*net.TCPAddr).Port)))
	}
	close(f.ready)

	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	var wg sync.WaitGroup
	for _, u := range udps {
		wg.Go(func() {
			if err := f.serveUDP(ctx, u, &wg); err != nil {
				cancel(err)
			}
		})
	}
	for _, l := range tcps {
		wg.Go(func() {
			if err := f.serveTCP(ctx, l, &wg); err != nil {
				cancel(err)
			}
		})
	}
	<-ctx.Done()
	close(f.stopping)
	closeAll()
	f.mu.Lock()
	for c := range f.open {
		c.Close()
	}
	f.mu.Unlock()
	wg.Wait()
	if err := context.Cause(ctx); err != nil && !errors.Is(err, context.Canceled) && !errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	return nil
}

// inNS runs fn where the forwarder's sockets belong (Config.NetNS).
func (f *Forwarder) inNS(fn func() error) error {
	if f.cfg.NetNS == nil {
		return fn()
	}
	return f.cfg.NetNS.Run(fn)
}

// listen binds UDP and TCP on the same address and port.
func listen(a netip.AddrPort) (*net.UDPConn, *net.TCPListener, error) {
	for range 20 {
		u, err := net.ListenUDP("udp", net.UDPAddrFromAddrPort(a))
		if err != nil {
			return nil, nil, fmt.Errorf("dns forwarder: listen on udp %v: %w", a, err)
		}
		port := u.LocalAddr().(*net.UDPAddr).Port
		l, err := net.ListenTCP("tcp", net.TCPAddrFromAddrPort(netip.AddrPortFrom(a.Addr(), uint16(port))))
		if err == nil {
			// Room for a burst of queries from many pods at once (the
			// kernel caps it at net.core.rmem_max): a query dropped here
			// costs the pod a resolver timeout of seconds.
			_ = u.SetReadBuffer(udpReadBuffer)
			if err := recvPktinfo(u, a.Addr().Unmap().Is6()); err != nil {
				u.Close()
				l.Close()
				return nil, nil, err
			}
			return u, l, nil
		}
		u.Close()
		if a.Port() != 0 {
			return nil, nil, fmt.Errorf("dns forwarder: listen on tcp %v: %w", a, err)
		}
		// The free UDP port is taken for TCP: try another.
	}
	return nil, nil, fmt.Errorf("dns forwarder: no port free for both udp and tcp on %v", a.Addr())
}

// serveUDP reads queries until the socket is closed. Reading is one
// goroutine per socket; a query is handled in its own goroutine only once
// it holds an in-flight slot, so goroutines are bounded by Limits.InFlight.
func (f *Forwarder) serveUDP(ctx context.Context, u *net.UDPConn, wg *sync.WaitGroup) error {
	buf := make([]byte, dns.MaxMsgSize)
	oob := make([]byte, 128)
	for {
		n, oobn, _, src, err := u.ReadMsgUDPAddrPort(buf, oob)
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			if ne, ok := err.(net.Error); ok && ne.Timeout() {
				continue
			}
			return fmt.Errorf("dns forwarder: read udp: %w", err)
		}
		start := time.Now()
		pod := src.Addr().Unmap()
		write := func(b []byte) {
			if _, err := u.WriteToUDPAddrPort(b, src); err != nil {
				f.warn("dns forwarder: write reply", "pod", pod, "error", err)
			}
		}
		if n > maxQuery {
			// No query is this large; not worth holding while it waits.
			f.m.QueriesRefused.WithLabelValues(RefusedMalformed).Inc()
			continue
		}
		h, w, ok := f.admit(buf[:n], pod, inputIfindex(oob[:oobn]), write)
		if !ok {
			continue
		}
		q := append([]byte(nil), buf[:n]...)
		wg.Go(func() {
			if w != nil && !f.await(ctx, q, w, write) {
				return
			}
			defer f.release(h)
			if reply := f.handle(ctx, "udp", pod, q); reply != nil {
				write(reply)
			}
			f.m.Latency.WithLabelValues("udp").Observe(time.Since(start).Seconds())
		})
	}
}

// admit takes an in-flight slot for a query from pod that arrived on
// interface ifindex (0: not known), or returns a waiter to wait for one
// on (see await), or refuses it (writing the refusal, if any, with write).
func (f *Forwarder) admit(q []byte, pod netip.Addr, ifindex int, write func([]byte)) (holder, *waiter, bool) {
	h, ok := f.holder(pod, ifindex)
	if !ok {
		f.refuse(q, RefusedNotSubject, dns.RcodeRefused, write)
		return holder{}, nil, false
	}
	f.mu.Lock()
	granted, w, reason := f.adm.admit(h)
	f.mu.Unlock()
	if reason != "" {
		f.refuse(q, reason, dns.RcodeRefused, write)
		return holder{}, nil, false
	}
	if !granted {
		f.m.QueriesQueued.Inc()
	}
	return h, w, true
}

// await waits for the slot of a queued query, at most Limits.QueueWait,
// and refuses the query if none came.
func (f *Forwarder) await(ctx context.Context, q []byte, w *waiter, write func([]byte)) bool {
	timer := time.NewTimer(f.lim.QueueWait)
	defer timer.Stop()
	select {
	case <-w.ready:
		return true
	case <-timer.C:
	case <-ctx.Done():
	}
	f.mu.Lock()
	ok := f.adm.cancel(w)
	f.mu.Unlock()
	if !ok {
		f.refuse(q, RefusedQueueTimeout, dns.RcodeRefused, write)
	}
	return ok
}

// holder is who a query from pod on interface ifindex is charged to: a
// subject pod of its namespace, or a starting pod of the shared pool
// (Table.Pending); ok is false for anything else, which is refused.
//
// The pod is named by the Table from the source address. The interface
// tells a query that another pod sent with the pod's address (on a
// routed node, where each pod has an interface of its own) from the
// pod's own: it is charged to a holder of its own, and never takes the
// pod's share. On a bridge every pod's queries arrive on the bridge, and
// only the data path's check of source addresses tells them apart.
func (f *Forwarder) holder(pod netip.Addr, ifindex int) (holder, bool) {
	t := f.table.Load()
	if sub := t.Lookup(pod); sub != nil {
		return holder{ns: sub.Namespace, pod: sub.Addrs, ifindex: ifindex}, true
	}
	if t.Pending(pod) {
		return holder{ns: startingNS, pod: [2]netip.Addr{pod.Unmap()}, ifindex: ifindex}, true
	}
	return holder{}, false
}

// PendingWait bounds how long a query from an address of the node's pod
// ranges that no subject has (a pod starting: the table redirects its DNS
// until its address is known) waits for a table that names it; then, or
// once a table says it is no subject, it is relayed without adding
// anything. The wait covers the kubelet's status write and one sync.
const PendingWait = 2 * time.Second

// awaitSubject waits while pod is a pending source of the current table,
// for a table that makes it a subject or not, at most PendingWait.
func (f *Forwarder) awaitSubject(ctx context.Context, pod netip.Addr) {
	var timer *time.Timer
	for {
		ch := f.changed.Load() // before the table: a swap in between closes it
		if !f.table.Load().Pending(pod) {
			return
		}
		if timer == nil {
			timer = time.NewTimer(PendingWait)
			defer timer.Stop()
		}
		select {
		case <-*ch:
		case <-timer.C:
			return
		case <-ctx.Done():
			return
		}
	}
}

func (f *Forwarder) release(h holder) {
	f.mu.Lock()
	f.adm.release(h)
	f.mu.Unlock()
}

// refuse counts a query not relayed and answers it with rcode if it is a
// query that can be parsed; anything else is dropped (answering garbage
// would make the forwarder a reflector).
func (f *Forwarder) refuse(q []byte, reason string, rcode int, write func([]byte)) {
	f.m.QueriesRefused.WithLabelValues(reason).Inc()
	var m dns.Msg
	if err := m.Unpack(q); err != nil || m.Response {
		return
	}
	if reply := errorReply(&m, rcode); reply != nil {
		write(reply)
	}
}

func errorReply(q *dns.Msg, rcode int) []byte {
	r := new(dns.Msg)
	r.SetRcode(q, rcode)
	b, err := r.Pack()
	if err != nil {
		return nil
	}
	return b
}

// handle relays one query of a subject pod and returns the reply to write
// (nil: write nothing). The elements of the answer are committed before
// it returns, so the reply is written after they are in the kernel.
func (f *Forwarder) handle(ctx context.Context, transport string, pod netip.Addr, q []byte) []byte {
	var query dns.Msg
	if err := query.Unpack(q); err != nil || query.Response {
		// A pod's garbage: FORMERR with its id if the header is that of
		// a query, else nothing.
		f.m.QueriesRefused.WithLabelValues(RefusedMalformed).Inc()
		if len(q) >= 12 && q[2]&0x80 == 0 {
			query = dns.Msg{MsgHdr: dns.MsgHdr{Id: binary.BigEndian.Uint16(q)}}
			return errorReply(&query, dns.RcodeFormatError)
		}
		return nil
	}
	if query.Opcode != dns.OpcodeQuery {
		f.m.QueriesRefused.WithLabelValues(RefusedOpcode).Inc()
		return errorReply(&query, dns.RcodeNotImplemented)
	}
	if len(query.Question) != 1 {
		f.m.QueriesRefused.WithLabelValues(RefusedMalformed).Inc()
		return errorReply(&query, dns.RcodeFormatError)
	}
	f.awaitSubject(ctx, pod)
	server, ok := f.table.Load().Server(pod.Is6())
	if !ok {
		f.m.QueriesRefused.WithLabelValues(RefusedUpstream).Inc()
		return errorReply(&query, dns.RcodeServerFailure)
	}
	raw, err := f.exchange(ctx, transport, server, q, &query)
	if err != nil {
		f.m.QueriesRefused.WithLabelValues(RefusedUpstream).Inc()
		f.log.Debug("dns forwarder: upstream exchange failed", "pod", pod, "server", server, "transport", transport, "error", err)
		return errorReply(&query, dns.RcodeServerFailure)
	}
	// Most names a pod resolves are no rule's: their answers are relayed
	// without being parsed, which saves the parse and bounds what a
	// pod's large answers can cost.
	if f.table.Load().Wants(pod, query.Question[0].Name) {
		f.commit(ctx, pod, f.parse(ctx, raw, &query))
	} else {
		f.m.AnswersIgnored.WithLabelValues(fqdn.IgnoredNoMatch).Inc()
	}
	// The reply is upstream's, byte for byte, with the pod's id back.
	binary.BigEndian.PutUint16(raw, query.Id)
	return raw
}

// parse parses upstream's reply to query, or returns nil if it cannot be
// parsed or is not an answer to query's question. A parsed message costs
// about 11 times its size (720 KB for a 64 KiB reply), so at most
// maxBigParses replies over bigReply bytes are parsed at once.
func (f *Forwarder) parse(ctx context.Context, raw []byte, query *dns.Msg) *dns.Msg {
	if len(raw) > bigReply {
		select {
		case f.bigParses <- struct{}{}:
			defer func() { <-f.bigParses }()
		case <-ctx.Done():
			return nil
		}
	}
	resp := new(dns.Msg)
	if err := resp.Unpack(raw); err != nil {
		return nil
	}
	if len(resp.Question) != 1 {
		return resp // no answer to match; Elements ignores it
	}
	q, rq := query.Question[0], resp.Question[0]
	if rq.Qtype != q.Qtype || rq.Qclass != q.Qclass || fqdn.Normalize(rq.Name) != fqdn.Normalize(q.Name) {
		return nil
	}
	return resp
}

// commit adds the elements of resp (nil if it could not be parsed) to the
// kernel, counting what it adds and ignores.
func (f *Forwarder) commit(ctx context.Context, pod netip.Addr, resp *dns.Msg) {
	if resp == nil {
		// Truncated in a record, or not the answer to the question:
		// relayed, never parsed into elements.
		f.m.AnswersIgnored.WithLabelValues(IgnoredUnparsable).Inc()
		return
	}
	// The newest table: a pod that stopped being a subject while its
	// query was in flight gets nothing, and new set names are used.
	res := f.table.Load().Elements(pod, resp)
	if res.OverLimit > 0 {
		f.m.AddrsIgnored.WithLabelValues(addrsOverLimit).Add(float64(res.OverLimit))
	}
	if res.NoPodAddr > 0 {
		f.m.AddrsIgnored.WithLabelValues(addrsNoPodAddr).Add(float64(res.NoPodAddr))
	}
	if res.Ignored != "" {
		f.m.AnswersIgnored.WithLabelValues(res.Ignored).Inc()
		return
	}
	elems := res.Elements()
	if sub := f.table.Load().Lookup(pod); sub != nil {
		fit, overPod, overNode := f.budgetFor(sub.Addrs, elems, time.Now())
		if overPod > 0 {
			f.m.AddrsIgnored.WithLabelValues(addrsPodLimit).Add(float64(overPod))
			f.warn("dns forwarder: the pod holds its share of elements; the answer's other addresses are not added", "pod", pod, "name", res.Question,
				"limit", podShare(int(f.subjects.Load()), f.lim.PodElements, f.lim.NodeElements), "ignored", overPod)
		}
		if overNode > 0 {
			f.m.AddrsIgnored.WithLabelValues(addrsNodeLimit).Add(float64(overNode))
			f.warn("dns forwarder: the node holds its limit of elements; the answer's other addresses are not added", "pod", pod, "name", res.Question,
				"limit", f.lim.NodeElements, "ignored", overNode)
		}
		if elems = fit; len(elems) == 0 {
			reason := IgnoredPodLimit
			if overNode > 0 {
				reason = IgnoredNodeLimit
			}
			f.m.AnswersIgnored.WithLabelValues(reason).Inc()
			return
		}
	}
	cctx, cancel := context.WithTimeout(ctx, f.lim.CommitTimeout)
	defer cancel()
	if err := f.cfg.Committer.AddTimed(cctx, elems); err != nil {
		// Answer anyway: DNS keeps working, and the connection the pod
		// makes next is refused by the policy (fail closed).
		f.m.AnswersIgnored.WithLabelValues(IgnoredCommitFailed).Inc()
		f.warn("dns forwarder: add the elements of an answer", "pod", pod, "name", res.Question, "elements", len(res.Matches), "error", err)
		return
	}
	f.m.AnswersCommitted.Inc()
	f.m.ElementsAdded.Add(float64(len(elems)))
}

// exchange relays q (raw, parsed as query) to server over transport and
// returns upstream's reply. It uses a fresh socket connected to server
// (the kernel delivers nothing from another source) and a fresh random id,
// and accepts only a response with that id: this is the only place
// replies are read, so nothing but the Table's server's answers to our
// own queries is ever parsed into elements.
func (f *Forwarder) exchange(ctx context.Context, transport string, server netip.AddrPort, q []byte, query *dns.Msg) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, f.lim.UpstreamTimeout)
	defer cancel()
	var d net.Dialer
	var conn net.Conn
	err := f.inNS(func() (err error) {
		conn, err = d.DialContext(ctx, transport, server.String())
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("dial %s %v: %w", transport, server, err)
	}
	defer conn.Close()
	deadline, _ := ctx.Deadline()
	if err := conn.SetDeadline(deadline); err != nil {
		return nil, err
	}
	// Give up on cancellation (shutdown), not only at the deadline.
	stop := context.AfterFunc(ctx, func() { conn.SetDeadline(time.Unix(1, 0)) })
	defer stop()

	id := dns.Id()
	out := append([]byte(nil), q...)
	binary.BigEndian.PutUint16(out, id)
	if transport == "tcp" {
		msg := make([]byte, 2+len(out))
		binary.BigEndian.PutUint16(msg, uint16(len(out)))
		copy(msg[2:], out)
		if _, err := conn.Write(msg); err != nil {
			return nil, fmt.Errorf("write to %v: %w", server, err)
		}
		raw, err := readTCPMsg(conn, dns.MaxMsgSize)
		if err != nil {
			return nil, fmt.Errorf("read from %v: %w", server, err)
		}
		if !isReply(raw, id) {
			return nil, fmt.Errorf("%v sent no reply to the query", server)
		}
		return raw, nil
	}
	if _, err := conn.Write(out); err != nil {
		return nil, fmt.Errorf("write to %v: %w", server, err)
	}
	// Upstream answers within the size the query offers (512 without
	// EDNS), so that is all the buffer needs; one byte more shows a
	// reply that is larger than it may be.
	size := dns.MinMsgSize
	if opt := query.IsEdns0(); opt != nil {
		size = max(size, int(opt.UDPSize()))
	}
	buf := make([]byte, size+1)
	for {
		n, err := conn.Read(buf)
		if err != nil {
			return nil, fmt.Errorf("read from %v: %w", server, err)
		}
		if n <= size && isReply(buf[:n], id) {
			return append([]byte(nil), buf[:n]...), nil
		}
		// Not the reply to this query: wait for it.
	}
}

// isReply reports whether b has a DNS header with id and the response bit.
func isReply(b []byte, id uint16) bool {
	return len(b) >= 12 && binary.BigEndian.Uint16(b) == id && b[2]&0x80 != 0
}

// readTCPMsg reads one length-prefixed message of at most limit bytes.
func readTCPMsg(r io.Reader, limit int) ([]byte, error) {
	var l [2]byte
	if _, err := io.ReadFull(r, l[:]); err != nil {
		return nil, err
	}
	n := int(binary.BigEndian.Uint16(l[:]))
	if n > limit {
		return nil, fmt.Errorf("message of %d bytes, more than %d", n, limit)
	}
	b := make([]byte, n)
	if _, err := io.ReadFull(r, b); err != nil {
		return nil, err
	}
	return b, nil
}

// serveTCP accepts connections until the listener is closed.
func (f *Forwarder) serveTCP(ctx context.Context, l *net.TCPListener, wg *sync.WaitGroup) error {
	for {
		c, err := l.AcceptTCP()
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			if ne, ok := err.(net.Error); ok && ne.Timeout() {
				continue
			}
			// EMFILE and the like: back off instead of spinning.
			f.warn("dns forwarder: accept", "error", err)
			select {
			case <-ctx.Done():
				return nil
			case <-time.After(100 * time.Millisecond):
			}
			continue
		}
		pod := c.RemoteAddr().(*net.TCPAddr).AddrPort().Addr().Unmap()
		h, ok := f.openConn(c, pod)
		if !ok {
			c.Close()
			continue
		}
		wg.Go(func() {
			defer f.closeConn(c, h)
			f.serveConn(ctx, c, pod)
		})
	}
}

// openConn admits a pod's TCP connection within the limits. A source that
// is no subject is closed right away: only a subject's queries are
// redirected here. A namespace holds at most a quarter of Limits.Conns,
// and starting pods' connections share one small pool, as their queries
// do.
func (f *Forwarder) openConn(c net.Conn, pod netip.Addr) (holder, bool) {
	h, ok := f.holder(pod, 0)
	if !ok {
		f.m.QueriesRefused.WithLabelValues(RefusedNotSubject).Inc()
		return holder{}, false
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	nsLimit := max(f.lim.PodConns, f.lim.Conns/4)
	if h.ns == startingNS {
		nsLimit = f.lim.StartingInFlight
	}
	if f.conns[h.pod] >= f.lim.PodConns || f.nconns >= f.lim.Conns || f.nsConns[h.ns] >= nsLimit {
		f.m.QueriesRefused.WithLabelValues(RefusedConnLimit).Inc()
		return holder{}, false
	}
	f.conns[h.pod]++
	f.nsConns[h.ns]++
	f.nconns++
	f.open[c] = struct{}{}
	return h, true
}

func (f *Forwarder) closeConn(c net.Conn, h holder) {
	c.Close()
	f.mu.Lock()
	if f.conns[h.pod]--; f.conns[h.pod] <= 0 {
		delete(f.conns, h.pod)
	}
	f.nconns--
	if f.nsConns[h.ns]--; f.nsConns[h.ns] <= 0 {
		delete(f.nsConns, h.ns)
	}
	delete(f.open, c)
	f.mu.Unlock()
}

// serveConn answers the queries of one connection in order, until the pod
// closes it, is idle for TCPIdleTimeout, or sends something that is not a
// query. Each query is admitted like a UDP one (a pod that stopped being
// a subject gets REFUSED).
func (f *Forwarder) serveConn(ctx context.Context, c net.Conn, pod netip.Addr) {
	for ctx.Err() == nil {
		if err := c.SetReadDeadline(time.Now().Add(f.lim.TCPIdleTimeout)); err != nil {
			return
		}
		var l [2]byte
		if _, err := io.ReadFull(c, l[:]); err != nil {
			return
		}
		start := time.Now()
		n := int(binary.BigEndian.Uint16(l[:]))
		if n < 12 || n > maxQuery {
			f.m.QueriesRefused.WithLabelValues(RefusedMalformed).Inc()
			return
		}
		if err := c.SetDeadline(start.Add(f.lim.TCPReadTimeout)); err != nil {
			return
		}
		q := make([]byte, n)
		if _, err := io.ReadFull(c, q); err != nil {
			return
		}
		var reply []byte
		write := func(b []byte) { reply = b }
		// A TCP connection is the pod's own: its handshake needed the
		// replies that go to the pod's address.
		h, w, ok := f.admit(q, pod, 0, write)
		if ok && w != nil {
			ok = f.await(ctx, q, w, write)
		}
		if ok {
			reply = f.handle(ctx, "tcp", pod, q)
			f.release(h)
		}
		if reply == nil {
			return
		}
		out := make([]byte, 2+len(reply))
		binary.BigEndian.PutUint16(out, uint16(len(reply)))
		copy(out[2:], reply)
		if err := c.SetWriteDeadline(time.Now().Add(f.lim.TCPReadTimeout)); err != nil {
			return
		}
		if _, err := c.Write(out); err != nil {
			return
		}
		if ok {
			f.m.Latency.WithLabelValues("tcp").Observe(time.Since(start).Seconds())
		}
	}
}

// warn logs at most one warning a second: a pod can cause many of the
// same.
func (f *Forwarder) warn(msg string, args ...any) {
	now := time.Now().UnixNano()
	last := f.lastWarn.Load()
	if now-last < int64(time.Second) || !f.lastWarn.CompareAndSwap(last, now) {
		return
	}
	f.log.Warn(msg, args...)
}
