package e2e

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"net/netip"
	"os/exec"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/nftguard/nftguard/compose"
	"github.com/nftguard/nftguard/conntrack"
	"github.com/nftguard/nftguard/engine"
	"github.com/nftguard/nftguard/internal/netlab"
	"github.com/nftguard/nftguard/internal/podtest"
	"github.com/nftguard/nftguard/internal/testns"
	"github.com/nftguard/nftguard/manifest"
)

// TestEgressConntrack proves that established flows follow egress changes:
// a UDP socket with a fixed source port keeps its conntrack entry (and so its
// translation) for as long as it talks, so without clearing it would keep
// the address it started with.
func TestEgressConntrack(t *testing.T) {
	e := newEgressLab(t)
	e.foreignMasquerade()
	node := e.lab.Node("n1")
	nodeNS := &testns.NS{Name: node.NetNS, Path: node.Path}
	xa, ya := e.lab.Endpoint("x/a"), e.lab.Endpoint("y/a")
	// A foreign masquerade of pod-to-pod traffic (what masquerade-all or a
	// hairpin Service does): the egress chain never translates it, so its
	// entry must survive x/a getting an egress address.
	nodeNS.MustExec(t, "", "iptables-nft", "-t", "nat", "-I", "POSTROUTING", "-s", xa.IPv4.String(), "-d", ya.IPv4.String(), "-j", "MASQUERADE")
	masq4, masq6 := e.nodeAddr(netlab.IPv4), e.nodeAddr(netlab.IPv6)
	ext4, ext6 := e.ext(netlab.IPv4), e.ext(netlab.IPv6)
	startUDPRecorder(t, e.lab, "ext", 9001)
	startTCPEcho(t, e.lab, "ext", 9002)
	startTCPEcho(t, e.lab, "y/a", 9002)

	cleared := func(step string, stdout string, want int) {
		t.Helper()
		got := 0
		if m := regexp.MustCompile(`conntrack: (\d+) stale egress translations cleared`).FindStringSubmatch(stdout); m != nil {
			fmt.Sscan(m[1], &got)
		}
		if got != want {
			t.Errorf("%s: apply cleared %d stale translations, want %d\nstdout:\n%s", step, got, want, stdout)
		}
	}
	udpExpect := func(step string, f *udpFlow, want string) {
		t.Helper()
		if got := f.source(t); got != want {
			t.Errorf("%s: the next datagram of %s arrived from %q, want %q", step, f.name, got, want)
		}
	}

	// No egress Service: the foreign masquerade translates.
	cleared("no egress Service", e.applyOut(), 0)
	udp4 := dialUDP(t, e.lab, "x/a", ext4, 9001, 40001)
	udp6 := dialUDP(t, e.lab, "x/a", ext6, 9001, 40001)
	udpExpect("masqueraded", udp4, masq4)
	udpExpect("masqueraded", udp6, masq6)
	// Connections that no change below may touch: a pod without a binding
	// leaving masqueraded, and x/a to another pod, masqueraded.
	tcpOut := dialTCP(t, e.lab, "x/b", ext4, 9002)
	tcpPod := dialTCP(t, e.lab, "x/a", ya.IPv4, 9002)
	tcpOut.expect(t, "before", masq4)
	podSide := tcpPod.source(t)
	if podSide == "" || podSide == xa.IPv4.String() {
		t.Fatalf("x/a -> y/a arrived from %q: the test's masquerade does not apply", podSide)
	}
	idOut, idPod := e.conntrackID(tcpOut), e.conntrackID(tcpPod)
	untouched := func(step string) {
		t.Helper()
		tcpOut.expect(t, step, masq4)
		tcpPod.expect(t, step, podSide)
		if got := e.conntrackID(tcpOut); got != idOut {
			t.Errorf("%s: the entry of %s was replaced (id %s, was %s)", step, tcpOut.name, got, idOut)
		}
		if got := e.conntrackID(tcpPod); got != idPod {
			t.Errorf("%s: the entry of %s was replaced (id %s, was %s)", step, tcpPod.name, got, idPod)
		}
	}

	// A Service for a pod whose flows were masqueraded: they move to the
	// load-balancer address.
	web := e.service("web", t0, map[string]string{"pod": "a"},
		map[string]string{"nftguard.io/egress": "true", "nftguard.io/egress-ipv6": "true"}, lbIPv4, lbIPv6)
	e.services = []*corev1.Service{web}
	cleared("Service added", e.applyOut(), 2)
	udpExpect("Service added", udp4, lbIPv4)
	udpExpect("Service added", udp6, lbIPv6)
	untouched("Service added")
	// Entries with the right translation stay: re-applying clears nothing.
	cleared("unchanged", e.applyOut(), 0)
	udpExpect("unchanged", udp4, lbIPv4)

	// The load-balancer address changes. Control first: the table alone
	// (synced without clearing) does not move the flow.
	web.Status.LoadBalancer.Ingress = []corev1.LoadBalancerIngress{{IP: "203.0.113.8"}, {IP: "2001:db8::8"}}
	e.syncOnly()
	udpExpect("control: table changed, conntrack not cleared", udp4, lbIPv4)
	udpExpect("control: table changed, conntrack not cleared", udp6, lbIPv6)
	// Then apply (the table is already right; only the clearing acts).
	cleared("load-balancer IP changed", e.applyOut(), 2)
	udpExpect("load-balancer IP changed", udp4, "203.0.113.8")
	udpExpect("load-balancer IP changed", udp6, "2001:db8::8")
	untouched("load-balancer IP changed")

	// The library itself, in the node's namespace: nothing left to clear.
	st, err := conntrack.ClearStale(context.Background(), node.Path, compose.ConntrackBindings(e.compile().EgressBindings),
		conntrack.WithCIDRs([]netip.Prefix{node.PodCIDRv4, node.PodCIDRv6}, []netip.Prefix{netip.MustParsePrefix("10.96.0.0/16")}))
	if err != nil || st.Deleted != 0 || st.Seen < 4 {
		t.Errorf("ClearStale after apply: %+v, %v; want nothing deleted of at least 4 translated entries", st, err)
	}

	// Annotation removed: back to the node address.
	delete(web.Annotations, "nftguard.io/egress")
	cleared("annotation removed", e.applyOut(), 2)
	udpExpect("annotation removed", udp4, masq4)
	udpExpect("annotation removed", udp6, masq6)

	// Service back, then deleted.
	web.Annotations["nftguard.io/egress"] = "true"
	cleared("annotation back", e.applyOut(), 2)
	udpExpect("annotation back", udp4, "203.0.113.8")
	udpExpect("annotation back", udp6, "2001:db8::8")
	e.services = nil
	cleared("Service deleted", e.applyOut(), 2)
	udpExpect("Service deleted", udp4, masq4)
	udpExpect("Service deleted", udp6, masq6)
	untouched("end")
}

// applyOut runs nftguard apply like e.apply and returns its stdout, where
// the number of cleared translations is reported.
func (e *egressLab) applyOut() string {
	e.t.Helper()
	out, errOut, err := e.runApply()
	if err != nil {
		e.t.Fatalf("apply: %v\n%s\n%s", err, out, errOut)
	}
	return out
}

// compile builds what apply builds from the manifest, in process.
func (e *egressLab) compile() compose.Result {
	e.t.Helper()
	e.writeManifest()
	node := e.lab.Node("n1")
	objs, problems, err := manifest.Load(nil, e.dir)
	if err != nil || len(problems) > 0 {
		e.t.Fatalf("load manifest: %v %v", err, problems)
	}
	res := compose.Build(compose.Input{NodeName: "n1", Namespaces: objs.Namespaces, Pods: podtest.Set(objs.Pods), Services: objs.Services,
		ClusterCIDRs: []netip.Prefix{node.PodCIDRv4, node.PodCIDRv6}, ServiceCIDRs: []netip.Prefix{netip.MustParsePrefix("10.96.0.0/16")}})
	if len(res.Problems) > 0 {
		e.t.Fatalf("compile: %v", res.Problems)
	}
	return res
}

// syncOnly programs the table as apply does but leaves conntrack alone: the
// control that shows clearing is what moves established flows.
func (e *egressLab) syncOnly() {
	e.t.Helper()
	eng, err := engine.New(compose.Table(), engine.WithNetNS(e.lab.Node("n1").Path))
	if err != nil {
		e.t.Fatal(err)
	}
	defer eng.Close()
	if _, err := eng.Sync(context.Background(), e.compile().Desired); err != nil {
		e.t.Fatalf("sync: %v", err)
	}
}

var conntrackIDRe = regexp.MustCompile(`\bid=(\d+)`)

// conntrackID returns the id of the node's conntrack entry for a TCP
// connection, read with the conntrack binary as an oracle (a replaced entry
// gets a new id, even when the connection survives the replacement).
func (e *egressLab) conntrackID(c *tcpConn) string {
	e.t.Helper()
	node := e.lab.Node("n1")
	out, err := exec.Command("nsenter", "--net="+node.Path, "conntrack", "-L", "-p", "tcp",
		"--orig-src", c.local.Addr().String(), "--orig-dst", c.remote.Addr().String(),
		"--sport", fmt.Sprint(c.local.Port()), "--dport", fmt.Sprint(c.remote.Port()), "-o", "id").CombinedOutput()
	if err != nil {
		e.t.Fatalf("conntrack -L: %v\n%s", err, out)
	}
	m := conntrackIDRe.FindAllStringSubmatch(string(out), -1)
	if len(m) != 1 {
		e.t.Fatalf("conntrack -L for %s: want one entry:\n%s", c.name, out)
	}
	return m[0][1]
}

// udpFlow is one UDP socket in a pod with a fixed source port, so every
// datagram belongs to the same conntrack entry.
type udpFlow struct {
	name string
	conn *net.UDPConn
}

func dialUDP(t *testing.T, lab *netlab.Lab, pod string, dst netip.Addr, port, srcPort int) *udpFlow {
	t.Helper()
	f := &udpFlow{name: fmt.Sprintf("udp %s:%d -> %s", pod, srcPort, netip.AddrPortFrom(dst, uint16(port)))}
	err := lab.Run(pod, func() error {
		network := "udp4"
		if dst.Is6() {
			network = "udp6"
		}
		var err error
		f.conn, err = net.DialUDP(network, &net.UDPAddr{Port: srcPort}, net.UDPAddrFromAddrPort(netip.AddrPortFrom(dst, uint16(port))))
		return err
	})
	if err != nil {
		t.Fatalf("%s: %v", f.name, err)
	}
	t.Cleanup(func() { f.conn.Close() })
	return f
}

// source sends one datagram and returns the source address the recorder
// saw ("" when no answer came).
func (f *udpFlow) source(t *testing.T) string {
	t.Helper()
	buf := make([]byte, 128)
	for try := 0; try < 3; try++ {
		if _, err := f.conn.Write([]byte("who am i")); err != nil {
			t.Fatalf("%s: send: %v", f.name, err)
		}
		f.conn.SetReadDeadline(time.Now().Add(time.Second))
		n, err := f.conn.Read(buf)
		if err == nil {
			return string(buf[:n])
		}
	}
	return ""
}

// startUDPRecorder answers each datagram with the source address it came
// from.
func startUDPRecorder(t *testing.T, lab *netlab.Lab, host string, port int) {
	t.Helper()
	for _, network := range []string{"udp4", "udp6"} {
		var c net.PacketConn
		err := lab.Run(host, func() error {
			var err error
			c, err = net.ListenPacket(network, fmt.Sprintf(":%d", port))
			return err
		})
		if err != nil {
			t.Fatalf("listen udp in %s: %v", host, err)
		}
		t.Cleanup(func() { c.Close() })
		go func() {
			buf := make([]byte, 1500)
			for {
				_, from, err := c.ReadFrom(buf)
				if err != nil {
					return
				}
				ap, _ := netip.ParseAddrPort(from.String())
				c.WriteTo([]byte(ap.Addr().Unmap().String()), from)
			}
		}()
	}
}

// tcpConn is a long-lived TCP connection from a pod to an echo server that
// answers each line with the source address the connection arrived from.
type tcpConn struct {
	name          string
	conn          net.Conn
	r             *bufio.Reader
	local, remote netip.AddrPort
}

func dialTCP(t *testing.T, lab *netlab.Lab, pod string, dst netip.Addr, port int) *tcpConn {
	t.Helper()
	c := &tcpConn{name: fmt.Sprintf("tcp %s -> %s", pod, netip.AddrPortFrom(dst, uint16(port)))}
	err := lab.Run(pod, func() error {
		d := net.Dialer{Timeout: 2 * time.Second}
		var err error
		c.conn, err = d.Dial("tcp", netip.AddrPortFrom(dst, uint16(port)).String())
		return err
	})
	if err != nil {
		t.Fatalf("%s: %v", c.name, err)
	}
	t.Cleanup(func() { c.conn.Close() })
	c.r = bufio.NewReader(c.conn)
	c.local = c.conn.LocalAddr().(*net.TCPAddr).AddrPort()
	c.remote = c.conn.RemoteAddr().(*net.TCPAddr).AddrPort()
	c.local = netip.AddrPortFrom(c.local.Addr().Unmap(), c.local.Port())
	c.remote = netip.AddrPortFrom(c.remote.Addr().Unmap(), c.remote.Port())
	return c
}

// source asks over the open connection where it comes from ("" when the
// connection no longer works).
func (c *tcpConn) source(t *testing.T) string {
	t.Helper()
	c.conn.SetDeadline(time.Now().Add(2 * time.Second))
	if _, err := c.conn.Write([]byte("who am i\n")); err != nil {
		return ""
	}
	line, err := c.r.ReadString('\n')
	if err != nil {
		return ""
	}
	return strings.TrimSpace(line)
}

func (c *tcpConn) expect(t *testing.T, step, want string) {
	t.Helper()
	if got := c.source(t); got != want {
		t.Errorf("%s: %s arrived from %q, want %q", step, c.name, got, want)
	}
}

func startTCPEcho(t *testing.T, lab *netlab.Lab, host string, port int) {
	t.Helper()
	var (
		mu    sync.Mutex
		conns []net.Conn
	)
	for _, network := range []string{"tcp4", "tcp6"} {
		var ln net.Listener
		err := lab.Run(host, func() error {
			var err error
			ln, err = net.Listen(network, fmt.Sprintf(":%d", port))
			return err
		})
		if err != nil {
			t.Fatalf("listen tcp in %s: %v", host, err)
		}
		t.Cleanup(func() { ln.Close() })
		go func() {
			for {
				c, err := ln.Accept()
				if err != nil {
					return
				}
				mu.Lock()
				conns = append(conns, c)
				mu.Unlock()
				go func() {
					ap, _ := netip.ParseAddrPort(c.RemoteAddr().String())
					s := bufio.NewScanner(c)
					for s.Scan() {
						fmt.Fprintf(c, "%s\n", ap.Addr().Unmap())
					}
				}()
			}
		}()
	}
	t.Cleanup(func() {
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			c.Close()
		}
	})
}
