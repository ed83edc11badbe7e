package dnsfwd_test

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/miekg/dns"
	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/network-policy-api/apis/v1beta1"

	"github.com/nftguard/nftguard/clusterpolicy"
	"github.com/nftguard/nftguard/compose"
	"github.com/nftguard/nftguard/dnsfwd"
	"github.com/nftguard/nftguard/engine"
	"github.com/nftguard/nftguard/fqdn"
	"github.com/nftguard/nftguard/internal/apitest"
	"github.com/nftguard/nftguard/internal/dnslab"
	"github.com/nftguard/nftguard/internal/netlab"
	"github.com/nftguard/nftguard/internal/nfnl"
	"github.com/nftguard/nftguard/internal/podtest"
	"github.com/nftguard/nftguard/podif"
)

// The domainNames lab: one node (routed or bridged pods) with subject
// pods x/a and x/b and a pod y/a no domain rule selects; external host
// "dns" plays the cluster DNS (a real DNS server), "ext" holds every
// address the answers name (198.18.0.0/22 and 2001:db8:18::/116 are local
// there and routed to it by the node), and "rogue" is a DNS server that is
// not the cluster's. The table is what compose.Build makes; the forwarder
// is the package's, in the node's namespace, committing through a real
// engine; pods resolve over UDP or TCP, IPv4 or IPv6, with real sockets.
//
// The policy (Admin, subject namespace x): egress[0] Accept to the names
// below; egress[1] Deny to 198.18.0.0/16 and 2001:db8:18::/48, where no
// other rule allows anything. Everything else (the DNS servers, the node)
// stays allowed, as a cluster's DNS must be.

const (
	fwdPort  = 9753
	echoPort = 8443 // ext's echo server, for long-lived connections
)

var domainNames = []string{"*.fc.example", "a.example", "*.w.example", "cname.example", "many.example", "short.example"}

type dnsLab struct {
	t *testing.T
	// guarded compiles the pod guards the agent installs, from the
	// interfaces read in the node (package podif).
	guarded bool
	lab     *netlab.Lab
	node    *netlab.Node
	eng     *engine.Engine
	res     compose.Result
	dnsIP   [2]netip.Addr // the cluster DNS, v4 and v6
	rogue   [2]netip.Addr
	fwd     *dnsfwd.Forwarder
	stop    context.CancelFunc
	done    chan struct{}
	nodeNS  *nfnl.NetNS
	// unknown pods are left out of the input: pods starting, whose
	// addresses the agent has not learnt yet.
	unknown map[string]bool
	// subjectNS are the namespaces the policy selects (x, and more).
	subjectNS map[string]bool
	// reg holds the forwarder's metrics, read by the starvation tests.
	reg *prometheus.Registry
}

func newDNSLab(t *testing.T, bridged bool) *dnsLab {
	return newDNSLabPods(t, bridged, []string{"x/a", "x/b", "y/a"}, nil)
}

// newDNSLabPods is newDNSLab with other pods, and namespaces besides x
// whose pods the policy makes subjects too.
func newDNSLabPods(t *testing.T, bridged bool, pods, subjectNS []string) *dnsLab {
	lab := netlab.New(t, netlab.Spec{
		Nodes:    []netlab.NodeSpec{{Name: "n1", Pods: pods}},
		External: []string{"dns", "ext", "rogue"},
		Bridged:  bridged,
		Ports:    []netlab.Port{{Proto: netlab.TCP, Num: 80}},
	})
	l := &dnsLab{t: t, lab: lab, node: lab.Node("n1"), unknown: map[string]bool{}, subjectNS: map[string]bool{"x": true}}
	for _, ns := range subjectNS {
		l.subjectNS[ns] = true
	}
	dnsEP, ext, rogue := lab.Endpoint("dns"), lab.Endpoint("ext"), lab.Endpoint("rogue")
	l.dnsIP = [2]netip.Addr{dnsEP.IPv4, dnsEP.IPv6}
	l.rogue = [2]netip.Addr{rogue.IPv4, rogue.IPv6}

	// ext holds the answers' addresses; the node routes them to it.
	for _, c := range [][]string{
		{"ip", "netns", "exec", ext.NetNS, "ip", "addr", "add", "198.18.0.0/16", "dev", "lo"},
		{"ip", "netns", "exec", ext.NetNS, "ip", "-6", "route", "add", "local", "2001:db8:18::/112", "dev", "lo"},
		{"ip", "netns", "exec", l.node.NetNS, "ip", "route", "add", "198.18.0.0/16", "via", ext.IPv4.String()},
		{"ip", "netns", "exec", l.node.NetNS, "ip", "-6", "route", "add", "2001:db8:18::/112", "via", ext.IPv6.String()},
	} {
		if out, err := exec.Command(c[0], c[1:]...).CombinedOutput(); err != nil {
			t.Fatalf("%v: %v: %s", c, err, out)
		}
	}
	startEcho(t, lab, "ext")

	dnslab.Start(t, func(fn func() error) error { return lab.Run("dns", fn) }, l.dnsIP[:], answer)
	dnslab.Start(t, func(fn func() error) error { return lab.Run("rogue", fn) }, l.rogue[:], func(name string, qtype uint16) ([]dns.RR, int) {
		// The rogue server names addresses no cluster DNS answer gave.
		if qtype == dns.TypeAAAA {
			return []dns.RR{dnslab.AAAA(name, 300, netip.MustParseAddr("2001:db8:18::4fa"))}, dns.RcodeSuccess
		}
		return []dns.RR{dnslab.A(name, 300, netip.MustParseAddr("198.18.4.250"))}, dns.RcodeSuccess
	})

	eng, err := engine.New(compose.Table(), engine.WithNetNS(l.node.Path))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { eng.Close() })
	l.eng = eng
	if l.nodeNS, err = nfnl.OpenNetNS(l.node.Path); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.nodeNS.Close() })
	l.sync()
	l.startForwarder()
	return l
}

// forwardAddrs are the node's addresses the forwarder listens on: its
// side of the cluster DNS's link.
func (l *dnsLab) forwardAddrs() (netip.AddrPort, netip.AddrPort) {
	ep := l.lab.Endpoint("dns")
	n4 := netip.AddrFrom4(ep.IPv4.As4())
	b4 := n4.As4()
	b4[3] = 1
	b6 := ep.IPv6.As16()
	b6[15] = 1
	return netip.AddrPortFrom(netip.AddrFrom4(b4), fwdPort), netip.AddrPortFrom(netip.AddrFrom16(b6), fwdPort)
}

func (l *dnsLab) input() compose.Input {
	in := compose.Input{NodeName: "n1"}
	seen := map[string]bool{}
	for _, ep := range l.node.Pods {
		ns, _, _ := strings.Cut(ep.Name, "/")
		if !seen[ns] {
			seen[ns] = true
			subject := "no"
			if l.subjectNS[ns] {
				subject = "yes"
			}
			in.Namespaces = append(in.Namespaces, apitest.Namespace(ns, "ns", ns, "subject", subject))
		}
	}
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1"}}
	node.Spec.PodCIDRs = []string{l.node.PodCIDRv4.String(), l.node.PodCIDRv6.String()}
	in.Nodes = []*corev1.Node{node}
	for _, ep := range l.node.Pods {
		if l.unknown[ep.Name] {
			continue // its address has not reached the agent yet
		}
		ns, name, _ := strings.Cut(ep.Name, "/")
		in.Pods = podtest.Append(in.Pods, apitest.Pod(ns, name, ep.IPv4.String(), apitest.OnNode("n1"),
			apitest.IPs(ep.IPv4.String(), ep.IPv6.String()), apitest.WithLabels("pod", name)))
	}
	var names []v1beta1.DomainName
	for _, n := range domainNames {
		names = append(names, v1beta1.DomainName(n))
	}
	in.ClusterNetworkPolicies = []*v1beta1.ClusterNetworkPolicy{{
		ObjectMeta: metav1.ObjectMeta{Name: "egress-names"},
		Spec: v1beta1.ClusterNetworkPolicySpec{
			Tier: v1beta1.AdminTier, Priority: 10,
			Subject: v1beta1.ClusterNetworkPolicySubject{Namespaces: apitest.Selector("subject", "yes")},
			Egress: []v1beta1.ClusterNetworkPolicyEgressRule{
				{Name: "names", Action: v1beta1.ClusterNetworkPolicyRuleActionAccept, To: []v1beta1.ClusterNetworkPolicyEgressPeer{{DomainNames: names}}},
				{Name: "rest", Action: v1beta1.ClusterNetworkPolicyRuleActionDeny, To: []v1beta1.ClusterNetworkPolicyEgressPeer{{Networks: []v1beta1.CIDR{"198.18.0.0/16", "2001:db8:18::/48"}}}},
			},
		},
	}}
	f4, f6 := l.forwardAddrs()
	in.DNS = &clusterpolicy.DNS{Servers: l.dnsIP[:], Forward4: f4, Forward6: f6}
	if l.guarded {
		ifs, err := podif.Read(l.node.Path)
		if err != nil {
			l.t.Fatal(err)
		}
		in.PodInterfaces, in.PodInterfacesKnown = ifs, true
	}
	return in
}

func (l *dnsLab) sync() {
	l.t.Helper()
	l.res = compose.Build(l.input())
	if len(l.res.Problems)+len(l.res.Warnings) > 0 {
		l.t.Fatalf("problems %v warnings %v", l.res.Problems, l.res.Warnings)
	}
	if _, err := l.eng.Sync(context.Background(), l.res.Desired); err != nil {
		l.t.Fatal(err)
	}
	if l.fwd != nil {
		l.fwd.SetTable(l.res.DNS) // after the sync, as the agent does
	}
	if l.guarded && len(l.res.Unattributed) > 0 {
		l.t.Fatalf("pods without a guard: %v", l.res.Unattributed)
	}
}

// committer is the agent's adapter (dnsfwd/nodedns) in miniature.
type committer struct{ eng engine.Timed }

func (c committer) AddTimed(ctx context.Context, elems []fqdn.Element) error {
	out := make([]engine.TimedElement, len(elems))
	for i, e := range elems {
		out[i] = engine.TimedElement{Set: e.Set, Key: e.Key, Timeout: e.TTL, Comment: e.Name}
	}
	return c.eng.AddTimed(ctx, out)
}

// startForwarder runs a forwarder (and its heartbeat) as the agent does.
func (l *dnsLab) startForwarder() {
	l.t.Helper()
	f4, f6 := l.forwardAddrs()
	l.reg = prometheus.NewRegistry()
	m, err := dnsfwd.NewMetrics(l.reg)
	if err != nil {
		l.t.Fatal(err)
	}
	fwd, err := dnsfwd.New(dnsfwd.Config{Listen: []netip.AddrPort{f4, f6}, Committer: committer{l.eng}, NetNS: l.nodeNS, Metrics: m})
	if err != nil {
		l.t.Fatal(err)
	}
	fwd.SetTable(l.res.DNS)
	ctx, cancel := context.WithCancel(context.Background())
	l.fwd, l.stop, l.done = fwd, cancel, make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		if err := fwd.Run(ctx); err != nil {
			l.t.Errorf("forwarder: %v", err)
		}
	})
	<-fwd.Ready()
	wg.Go(func() { fwd.Heartbeat(ctx, clusterpolicy.SetAlive, []string{"tcp", "udp"}) })
	go func() { wg.Wait(); close(l.done) }()
	l.t.Cleanup(l.stopForwarder)
	// The heartbeat's first refresh enables the redirect.
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		if st, err := l.eng.ReadTimed(context.Background(), clusterpolicy.SetAlive); err == nil && len(st) == 2 {
			return
		}
		time.Sleep(5 * time.Millisecond)
	}
	l.t.Fatal("the forwarder's heartbeat never reached the kernel")
}

// stopForwarder is the agent dying: the table stays, nothing refreshes
// the heartbeat, nothing listens.
func (l *dnsLab) stopForwarder() {
	if l.stop != nil {
		l.stop()
		<-l.done
		l.stop = nil
	}
}

// answer is the cluster DNS's zone.
func answer(name string, qtype uint16) ([]dns.RR, int) {
	n := fqdn.Normalize(name)
	// Addresses: trials 198.18.0.1-198.18.3.250 (and from 198.18.20.1
	// for the later ones), the other names 198.18.4.x, many.example
	// 198.18.8.1 on; never one address for two names.
	owned := func(owner, v4, v6 string, ttl uint32) []dns.RR {
		if qtype == dns.TypeAAAA {
			return []dns.RR{dnslab.AAAA(owner, ttl, netip.MustParseAddr(v6))}
		}
		return []dns.RR{dnslab.A(owner, ttl, netip.MustParseAddr(v4))}
	}
	addr := func(v4, v6 string, ttl uint32) []dns.RR { return owned(name, v4, v6, ttl) }
	var i int
	switch {
	case strings.HasSuffix(n, ".fc.example") && scan(strings.TrimSuffix(n, ".fc.example"), "t%d", &i):
		// First-connect trials: a fresh address for every name.
		b := i / 250
		if i >= 5000 {
			b = 20 + (i-5000)/250
		}
		return addr(fmt.Sprintf("198.18.%d.%d", b, i%250+1), fmt.Sprintf("2001:db8:18::%x", i+1), 30), dns.RcodeSuccess
	case strings.HasSuffix(n, ".slow.example"):
		// A name whose servers do not answer in time: the forwarder
		// gives up after its UpstreamTimeout (2 s).
		time.Sleep(3 * time.Second)
		return addr("198.18.4.9", "2001:db8:18::409", 30), dns.RcodeSuccess
	case n == "a.example":
		return addr("198.18.4.1", "2001:db8:18::401", 30), dns.RcodeSuccess
	case n == "w.example":
		return addr("198.18.4.2", "2001:db8:18::402", 30), dns.RcodeSuccess
	case n == "x.w.example":
		return addr("198.18.4.3", "2001:db8:18::403", 30), dns.RcodeSuccess
	case n == "x.y.w.example":
		return addr("198.18.4.4", "2001:db8:18::404", 30), dns.RcodeSuccess
	case n == "mixed.w.example":
		return addr("198.18.4.5", "2001:db8:18::405", 30), dns.RcodeSuccess
	case n == "other.example":
		return addr("198.18.4.6", "2001:db8:18::406", 30), dns.RcodeSuccess
	case n == "cname.example":
		return append([]dns.RR{dnslab.CNAME(name, 60, "hop.target.example"), dnslab.CNAME("hop.target.example", 60, "end.target.example")},
			owned("end.target.example", "198.18.4.7", "2001:db8:18::407", 60)...), dns.RcodeSuccess
	case n == "short.example":
		return addr("198.18.4.8", "2001:db8:18::408", 1), dns.RcodeSuccess
	case n == "many.example":
		// 1,500 addresses: only TCP carries them (UDP is truncated).
		var rrs []dns.RR
		for k := range 1500 {
			if qtype == dns.TypeAAAA {
				rrs = append(rrs, dnslab.AAAA(name, 60, netip.MustParseAddr(fmt.Sprintf("2001:db8:18::%x", 0x8000+k))))
			} else {
				rrs = append(rrs, dnslab.A(name, 60, netip.AddrFrom4([4]byte{198, 18, byte(8 + k/250), byte(k%250 + 1)})))
			}
		}
		return rrs, dns.RcodeSuccess
	}
	return nil, dns.RcodeNameError
}

func scan(s, format string, i *int) bool {
	n, err := fmt.Sscanf(s, format, i)
	return err == nil && n == 1
}

// startEcho serves TCP echoPort on every address of an endpoint: a
// connection stays open and echoes, to tell established flows from new
// ones.
func startEcho(t *testing.T, lab *netlab.Lab, name string) {
	var ln net.Listener
	if err := lab.Run(name, func() (err error) {
		ln, err = net.Listen("tcp", fmt.Sprintf(":%d", echoPort))
		return err
	}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() { defer c.Close(); _, _ = io.Copy(c, c) }()
		}
	}()
}

// dialer makes sockets in a pod's namespace.
func (l *dnsLab) dialer(pod string) func(network, addr string) (net.Conn, error) {
	ns, err := nfnl.OpenNetNS(l.lab.Endpoint(pod).Path)
	if err != nil {
		l.t.Fatal(err)
	}
	l.t.Cleanup(func() { ns.Close() })
	return func(network, addr string) (c net.Conn, err error) {
		err = ns.Run(func() (err error) {
			c, err = net.DialTimeout(network, addr, time.Second)
			return err
		})
		return c, err
	}
}

// resolve asks server for name from pod and returns the answer's
// addresses.
func (l *dnsLab) resolve(dial func(string, string) (net.Conn, error), transport string, server netip.Addr, name string, v6 bool) ([]netip.Addr, error) {
	qtype := dns.TypeA
	if v6 {
		qtype = dns.TypeAAAA
	}
	addrs, _, err := dnslab.Resolve(dial, transport, server, name, qtype, 2*time.Second)
	return addrs, err
}

// connect opens a TCP connection from the pod to addr:port (a completed
// handshake is the answer); the SYN a policy drops times out (1 s).
func connect(dial func(string, string) (net.Conn, error), addr netip.Addr, port uint16) (net.Conn, bool) {
	c, err := dial("tcp", netip.AddrPortFrom(addr, port).String())
	if err != nil {
		return nil, false
	}
	return c, true
}

// pick returns the family's server and whether the query is AAAA.
func (l *dnsLab) server(v6 bool) netip.Addr {
	if v6 {
		return l.dnsIP[1]
	}
	return l.dnsIP[0]
}

// elements returns the keys of the domain sets that start with the pod's
// address.
func (l *dnsLab) elements(pod netip.Addr) []engine.TimedState {
	l.t.Helper()
	var out []engine.TimedState
	for _, set := range []string{"4", "6"} {
		st, err := l.eng.ReadTimed(context.Background(), domainSet(l.res.DNS)+"_"+set)
		if err != nil {
			l.t.Fatal(err)
		}
		for _, e := range st {
			if strings.HasPrefix(e.Key, pod.String()+" . ") {
				out = append(out, e)
			}
		}
	}
	return out
}

// domainSet is the base name of the policy's domain sets.
func domainSet(t *fqdn.Table) string {
	for _, s := range t.Pods {
		return strings.TrimSuffix(s.Rules[0].Set4, "_4")
	}
	return ""
}

func TestDomainNamesRouted(t *testing.T)  { testDomainNames(t, false) }
func TestDomainNamesBridged(t *testing.T) { testDomainNames(t, true) }

// testDomainNames: routed pods run everything; bridged pods (on a Linux
// bridge with br_netfilter) run the first-connect trials, isolation and
// the wildcard table, since their DNS and egress to external hosts is
// routed by the node as a routed pod's is, after the bridge.
func testDomainNames(t *testing.T, bridged bool) {
	l := newDNSLab(t, bridged)
	xa, xb, ya := l.dialer("x/a"), l.dialer("x/b"), l.dialer("y/a")
	xaAddr := l.lab.Endpoint("x/a")

	t.Run("first connect after resolving never fails", func(t *testing.T) {
		const trials = 1000
		failed := map[string]int{}
		var worst time.Duration
		for i := range trials {
			transport := []string{"udp", "tcp"}[i%2]
			v6 := i/2%2 == 1
			dial, pod := xa, "x/a"
			if i%8 >= 4 {
				dial, pod = xb, "x/b"
			}
			kind := fmt.Sprintf("%s over %s, IPv6 %v", pod, transport, v6)
			start := time.Now()
			addrs, err := l.resolve(dial, transport, l.server(v6), fmt.Sprintf("t%d.fc.example", i), v6)
			if err != nil || len(addrs) != 1 {
				t.Fatalf("trial %d (%s): resolve: %v %v", i, kind, addrs, err)
			}
			c, ok := connect(dial, addrs[0], 80)
			if !ok {
				failed[kind]++
				continue
			}
			c.Close()
			worst = max(worst, time.Since(start))
		}
		if len(failed) > 0 {
			t.Errorf("failed first connects in %d trials: %v", trials, failed)
		}
		t.Logf("%d trials (UDP and TCP DNS, IPv4 and IPv6, two pods): 0 failed; slowest resolve+connect %v", trials, worst)
	})

	t.Run("a pod starting resolves before the agent knows its address", func(t *testing.T) {
		// x/b's address is not in the table yet (its status has not
		// reached the agent): its queries are redirected as a pending
		// address of the node's pod range, and the forwarder holds each
		// until the sync that learns x/b, so the answer's elements are
		// committed before x/b reads it.
		const starts = 50
		failed := 0
		var waited time.Duration
		for i := range starts {
			l.unknown["x/b"] = true
			l.sync()
			v6 := i%2 == 1
			type result struct {
				addrs []netip.Addr
				err   error
				at    time.Time
			}
			done := make(chan result, 1)
			go func() {
				addrs, err := l.resolve(xb, []string{"udp", "tcp"}[i/2%2], l.server(v6), fmt.Sprintf("t%d.fc.example", 2000+i), v6)
				done <- result{addrs, err, time.Now()}
			}()
			time.Sleep(30 * time.Millisecond) // the kubelet's status write
			delete(l.unknown, "x/b")
			learnt := time.Now()
			l.sync()
			r := <-done
			if r.err != nil || len(r.addrs) != 1 {
				t.Fatalf("start %d: resolve: %v %v", i, r.addrs, r.err)
			}
			if r.at.Before(learnt) {
				t.Errorf("start %d: answered before the agent learnt the pod's address", i)
			}
			waited = max(waited, r.at.Sub(learnt))
			if c, ok := connect(xb, r.addrs[0], 80); ok {
				c.Close()
			} else {
				failed++
			}
		}
		if failed > 0 {
			t.Errorf("%d of %d starts: the first connect failed", failed, starts)
		}
		t.Logf("%d pod starts: every query waited for the sync that learnt the pod, then its first connect succeeded (answered at most %v after that sync)", starts, waited.Round(time.Microsecond))
	})

	t.Run("answers are per pod, and only the cluster DNS's", func(t *testing.T) {
		addrs, err := l.resolve(xa, "udp", l.server(false), "a.example", false)
		if err != nil {
			t.Fatal(err)
		}
		if _, ok := connect(xa, addrs[0], 80); !ok {
			t.Error("x/a cannot reach a.example after resolving it")
		}
		if _, ok := connect(xb, addrs[0], 80); ok {
			t.Error("x/b reaches a.example, which only x/a resolved")
		}
		if _, ok := connect(xa, netip.MustParseAddr("198.18.4.200"), 80); ok {
			t.Error("x/a reaches an address no answer gave")
		}
		for _, v6 := range []bool{false, true} {
			rogue := l.rogue[0]
			if v6 {
				rogue = l.rogue[1]
			}
			got, err := l.resolve(xa, "udp", rogue, "a.example", v6)
			if err != nil || len(got) != 1 {
				t.Fatalf("rogue server: %v %v", got, err)
			}
			if _, ok := connect(xa, got[0], 80); ok {
				t.Errorf("x/a reaches %v, which a DNS server that is not the cluster's answered", got[0])
			}
		}
		// y/a is no subject: its queries are not redirected, and it
		// adds nothing.
		if _, err := l.resolve(ya, "udp", l.server(false), "a.example", false); err != nil {
			t.Fatal(err)
		}
		if n := len(l.elements(l.lab.Endpoint("y/a").IPv4)); n != 0 {
			t.Errorf("y/a's answers added %d elements", n)
		}
		// Names no rule mentions resolve as usual (no DNS filtering)
		// and open nothing.
		got, err := l.resolve(xa, "tcp", l.server(false), "other.example", false)
		if err != nil || len(got) != 1 {
			t.Fatalf("other.example: %v %v", got, err)
		}
		if _, ok := connect(xa, got[0], 80); ok {
			t.Error("x/a reaches other.example, which no rule names")
		}
	})

	t.Run("wildcards and case", func(t *testing.T) {
		for _, tc := range []struct {
			name string
			ok   bool
		}{{"w.example", false}, {"x.w.example", true}, {"x.y.w.example", true}, {"MIXED.W.Example", true}} {
			for _, v6 := range []bool{false, true} {
				got, err := l.resolve(xa, "udp", l.server(v6), tc.name, v6)
				if err != nil || len(got) != 1 {
					t.Fatalf("%s: %v %v", tc.name, got, err)
				}
				if _, ok := connect(xa, got[0], 80); ok != tc.ok {
					t.Errorf("*.w.example and %s (IPv6 %v): connect %v, want %v", tc.name, v6, ok, tc.ok)
				}
			}
		}
	})
	if bridged {
		return
	}

	t.Run("CNAME chain", func(t *testing.T) {
		for _, v6 := range []bool{false, true} {
			got, err := l.resolve(xa, "udp", l.server(v6), "cname.example", v6)
			if err != nil || len(got) != 1 {
				t.Fatalf("cname.example: %v %v", got, err)
			}
			if _, ok := connect(xa, got[0], 80); !ok {
				t.Errorf("x/a cannot reach the end of cname.example's chain (%v)", got[0])
			}
		}
	})

	t.Run("1,500 addresses for one name", func(t *testing.T) {
		for _, v6 := range []bool{false, true} {
			got, err := l.resolve(xa, "tcp", l.server(v6), "many.example", v6)
			if err != nil || len(got) != 1500 {
				t.Fatalf("many.example: %d addresses, %v", len(got), err)
			}
			for _, a := range []netip.Addr{got[0], got[749], got[1499]} {
				if _, ok := connect(xa, a, 80); !ok {
					t.Errorf("x/a cannot reach %v of many.example", a)
				}
			}
		}
		n := 0
		for _, e := range l.elements(xaAddr.IPv4) {
			if e.Comment == "many.example" {
				n++
			}
		}
		for _, e := range l.elements(xaAddr.IPv6) {
			if e.Comment == "many.example" {
				n++
			}
		}
		if n != 3000 {
			t.Errorf("%d elements name many.example, want 3000", n)
		}
	})

	t.Run("TTL expiry blocks new connections, keeps established ones", func(t *testing.T) {
		got, err := l.resolve(xa, "udp", l.server(false), "short.example", false)
		if err != nil || len(got) != 1 {
			t.Fatalf("short.example: %v %v", got, err)
		}
		conn, ok := connect(xa, got[0], echoPort)
		if !ok {
			t.Fatal("x/a cannot reach short.example right after resolving it")
		}
		defer conn.Close()
		start := time.Now()
		for {
			held := false
			for _, e := range l.elements(xaAddr.IPv4) {
				held = held || strings.HasSuffix(e.Key, " . "+got[0].String())
			}
			if !held {
				break
			}
			if time.Since(start) > 10*time.Second {
				t.Fatal("short.example's element did not expire")
			}
			time.Sleep(50 * time.Millisecond)
		}
		t.Logf("a 1 s TTL expired in the kernel %v after the connect (held %v: fqdn.MinTTL)", time.Since(start).Round(10*time.Millisecond), fqdn.MinTTL)
		if _, ok := connect(xa, got[0], echoPort); ok {
			t.Error("a new connection to short.example after its answer expired")
		}
		if err := echo(conn); err != nil {
			t.Errorf("the established connection broke when the answer expired: %v", err)
		}
	})

	t.Run("the heartbeat keeps the redirect past its timeout", func(t *testing.T) {
		// Resolve and connect every 200 ms for twice the heartbeat's
		// timeout, and watch the heartbeat's elements: each refresh must
		// restart their timers (a refresh the kernel ignored would let
		// them run down to zero every HeartbeatTTL).
		end := time.Now().Add(2 * dnsfwd.HeartbeatTTL)
		least := dnsfwd.HeartbeatTTL
		for i := 0; time.Now().Before(end); i++ {
			st, err := l.eng.ReadTimed(context.Background(), clusterpolicy.SetAlive)
			if err != nil || len(st) != 2 {
				t.Fatalf("heartbeat elements: %v %v", st, err)
			}
			for _, e := range st {
				least = min(least, e.Expires)
			}
			v6 := i%2 == 1
			addrs, err := l.resolve(xa, "udp", l.server(v6), fmt.Sprintf("t%d.fc.example", 3000+i), v6)
			if err != nil || len(addrs) != 1 {
				t.Fatalf("resolve %d: %v %v", i, addrs, err)
			}
			if c, ok := connect(xa, addrs[0], 80); ok {
				c.Close()
			} else {
				t.Errorf("connect %d (%v) failed: the redirect lapsed", i, addrs[0])
			}
			time.Sleep(200 * time.Millisecond)
		}
		if floor := dnsfwd.HeartbeatTTL - dnsfwd.HeartbeatEvery - 500*time.Millisecond; least < floor {
			t.Errorf("a heartbeat element came within %v of expiring, want at least %v left at any time", least, floor)
		}
		t.Logf("the heartbeat's elements never had less than %v left", least.Round(time.Millisecond))
	})

	t.Run("agent stopped: DNS goes direct within the heartbeat's timeout, rules open nothing new", func(t *testing.T) {
		l.stopForwarder()
		stopped := time.Now()
		var direct time.Duration
		var addrs []netip.Addr
		for i := 0; ; i++ {
			got, _, err := dnslab.Resolve(xa, "udp", l.server(false), fmt.Sprintf("t%d.fc.example", 5000+i), dns.TypeA, 200*time.Millisecond)
			if err == nil && len(got) == 1 {
				direct, addrs = time.Since(stopped), got
				break
			}
			if time.Since(stopped) > 10*time.Second {
				t.Fatalf("no DNS answer for 10 s after the forwarder stopped: %v", err)
			}
			time.Sleep(50 * time.Millisecond)
		}
		t.Logf("DNS answered directly %v after the forwarder stopped (heartbeat timeout %v)", direct.Round(10*time.Millisecond), dnsfwd.HeartbeatTTL)
		// One more failed query round and a loaded machine's scheduling
		// are allowed on top of the heartbeat's timeout.
		if direct > dnsfwd.HeartbeatTTL+2*time.Second {
			t.Errorf("DNS took %v to come back, over the heartbeat's %v and two seconds", direct, dnsfwd.HeartbeatTTL)
		}
		if _, ok := connect(xa, addrs[0], 80); ok {
			t.Error("an answer the forwarder never saw opened the domain rule")
		}
		// Restart: the redirect is back with the heartbeat.
		restarted := time.Now()
		l.startForwarder()
		got, err := l.resolve(xa, "udp", l.server(false), "t6000.fc.example", false)
		if err != nil || len(got) != 1 {
			t.Fatalf("after the restart: %v %v", got, err)
		}
		if _, ok := connect(xa, got[0], 80); !ok {
			t.Error("after the restart, a resolved name is not reachable")
		}
		t.Logf("after the restart, a redirected answer opened its address %v after the forwarder started", time.Since(restarted).Round(time.Millisecond))
	})
}

// echo writes a line on c and reads it back.
func echo(c net.Conn) error {
	_ = c.SetDeadline(time.Now().Add(2 * time.Second))
	if _, err := c.Write([]byte("ping\n")); err != nil {
		return err
	}
	buf := make([]byte, 5)
	_, err := io.ReadFull(c, buf)
	return err
}
