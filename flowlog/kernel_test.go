package flowlog

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/nftguard/nftguard/engine"
	"github.com/nftguard/nftguard/internal/netlab"
	"github.com/nftguard/nftguard/internal/podtest"
	"github.com/nftguard/nftguard/npset"
	"github.com/nftguard/nftguard/policy"
	"github.com/nftguard/nftguard/tablelayout"
)

// labCluster is one node's pods as API objects, with the lab's addresses,
// and the policies of the kernel tests:
//
//	x (logged)  x/in-b   isolates x/b for ingress: only x/a on TCP 80
//	            x/out-a  isolates x/a for egress: only x/b on TCP 80
//	z (not)     z/deny   isolates z/a for ingress: nothing allowed
//
// y/a is isolated in no direction.
type labCluster struct {
	lab      *netlab.Lab
	node     *netlab.Node
	pods     []*corev1.Pod
	policies []*networkingv1.NetworkPolicy
	nss      []*corev1.Namespace
}

// newLabPods is a lab of one node n1 with these pods ("ns/name"), and
// them as running API objects labelled pod=name with the lab's IPv4 and
// IPv6 addresses; the caller adds namespaces and policies.
func newLabPods(t *testing.T, pods ...string) *labCluster {
	lab := netlab.New(t, netlab.Spec{Nodes: []netlab.NodeSpec{{Name: "n1", Pods: pods}}})
	c := &labCluster{lab: lab, node: lab.Nodes[0]}
	for _, e := range lab.Pods {
		ns, name, _ := strings.Cut(e.Name, "/")
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{"pod": name}}}
		p.Spec.NodeName = "n1"
		p.Status.Phase = corev1.PodRunning
		p.Status.PodIPs = []corev1.PodIP{{IP: e.IPv4.String()}, {IP: e.IPv6.String()}}
		c.pods = append(c.pods, p)
	}
	return c
}

func newLabCluster(t *testing.T) *labCluster {
	c := newLabPods(t, "x/a", "x/b", "y/a", "z/a")
	tcp80 := intstr.FromInt32(80)
	ports := []networkingv1.NetworkPolicyPort{{Port: &tcp80}}
	only := func(name string) []networkingv1.NetworkPolicyPeer {
		return []networkingv1.NetworkPolicyPeer{{PodSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"pod": name}}}}
	}
	np := func(ns, name, pod string, spec networkingv1.NetworkPolicySpec) *networkingv1.NetworkPolicy {
		spec.PodSelector = metav1.LabelSelector{MatchLabels: map[string]string{"pod": pod}}
		return &networkingv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Spec: spec}
	}
	c.policies = []*networkingv1.NetworkPolicy{
		np("x", "in-b", "b", networkingv1.NetworkPolicySpec{Ingress: []networkingv1.NetworkPolicyIngressRule{{From: only("a"), Ports: ports}}}),
		np("x", "out-a", "a", networkingv1.NetworkPolicySpec{PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeEgress},
			Egress: []networkingv1.NetworkPolicyEgressRule{{To: only("b"), Ports: ports}}}),
		np("z", "deny", "a", networkingv1.NetworkPolicySpec{}),
	}
	c.nss = []*corev1.Namespace{
		{ObjectMeta: metav1.ObjectMeta{Name: "x", Annotations: map[string]string{tablelayout.AnnotationLogDenied: "true"}}},
		{ObjectMeta: metav1.ObjectMeta{Name: "y"}},
		{ObjectMeta: metav1.ObjectMeta{Name: "z"}},
	}
	return c
}

// program makes the node's table the compile of the cluster with l.
func (c *labCluster) program(t *testing.T, l *tablelayout.LogDenied) {
	t.Helper()
	out := policy.Compile(policy.Input{NodeName: "n1", Namespaces: c.nss, Pods: podtest.Set(c.pods), Policies: npset.New(c.policies), LogDenied: l})
	if len(out.Problems) > 0 {
		t.Fatalf("problems: %v", out.Problems)
	}
	eng, err := engine.New(engine.Table{Name: "nftguard"}, engine.WithNetNS(c.node.Path))
	if err != nil {
		t.Fatal(err)
	}
	defer eng.Close()
	if _, err := eng.Sync(context.Background(), &engine.Desired{Chains: out.Chains, Sets: out.Sets}); err != nil {
		t.Fatalf("sync: %v", err)
	}
}

// collector runs a reader and keeps what it reads.
type collector struct {
	mu    sync.Mutex
	recs  []Record
	total uint64 // records read, taken or not
	done  chan error
	stop  context.CancelFunc

	// nsPath is the namespace of the table whose log is read ("": no
	// log chains), base what its log rules had counted when reading
	// began.
	nsPath string
	base   uint64
}

// collect reads r's records; nsPath is the namespace of the table that
// logs them ("" for a table without logging).
func collect(t *testing.T, r *Reader, res Resolver, nsPath string) *collector {
	ctx, cancel := context.WithCancel(context.Background())
	c := &collector{done: make(chan error, 1), stop: cancel, nsPath: nsPath}
	if nsPath != "" {
		// The group is bound (Open): every record logged from now on
		// reaches the reader.
		c.base = loggedIn(t, nsPath)
	}
	go func() {
		c.done <- r.Run(ctx, func(rec Record) {
			Resolve(&rec, res)
			c.mu.Lock()
			c.recs = append(c.recs, rec)
			c.total++
			c.mu.Unlock()
		})
	}()
	t.Cleanup(func() {
		cancel()
		if err := <-c.done; err != nil {
			t.Errorf("reader: %v", err)
		}
	})
	return c
}

func (c *collector) take() []Record {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := c.recs
	c.recs = nil
	return out
}

// sendUDP sends n datagrams from a lab pod, one socket, as fast as it can
// within d (n <= 0: until d is over); it returns how many were sent.
func sendUDP(t *testing.T, lab *netlab.Lab, from string, to netip.AddrPort, n int, d time.Duration) int {
	t.Helper()
	sent := 0
	err := lab.Run(from, func() error {
		conn, err := net.Dial("udp", to.String())
		if err != nil {
			return err
		}
		defer conn.Close()
		deadline := time.Now().Add(d)
		msg := []byte("denied?")
		for (n <= 0 || sent < n) && (sent%256 != 0 || time.Now().Before(deadline)) {
			if _, err := conn.Write(msg); err != nil {
				// A refused port reported by ICMP makes the next write
				// fail; it is not a lab failure.
				if errors.Is(err, unix.ECONNREFUSED) {
					continue
				}
				return err
			}
			sent++
		}
		return nil
	})
	if err != nil {
		t.Fatalf("send from %s to %s: %v", from, to, err)
	}
	return sent
}

// ping sends one ICMP echo request over IPv4 from a lab pod.
func ping(t *testing.T, lab *netlab.Lab, from string, to netip.Addr) {
	t.Helper()
	err := lab.Run(from, func() error {
		conn, err := net.ListenPacket("ip4:icmp", "0.0.0.0")
		if err != nil {
			return err
		}
		defer conn.Close()
		msg := []byte{8, 0, 0, 0, 0x12, 0x34, 0, 1, 'n', 'g'}
		sum := icmpChecksum(msg)
		msg[2], msg[3] = byte(sum>>8), byte(sum)
		_, err = conn.WriteTo(msg, &net.IPAddr{IP: to.AsSlice()})
		return err
	})
	if err != nil {
		t.Fatalf("ping from %s: %v", from, err)
	}
}

func icmpChecksum(b []byte) uint16 {
	var s uint32
	for i := 0; i+1 < len(b); i += 2 {
		s += uint32(b[i])<<8 | uint32(b[i+1])
	}
	if len(b)%2 == 1 {
		s += uint32(b[len(b)-1]) << 8
	}
	for s>>16 != 0 {
		s = s&0xffff + s>>16
	}
	return ^uint16(s)
}

// dialTCP tries a TCP connection from a lab pod; it reports whether it
// was established.
func dialTCP(t *testing.T, lab *netlab.Lab, from string, to netip.AddrPort, timeout time.Duration) bool {
	t.Helper()
	ok, err := lab.DialTCP(from, to, timeout)
	if err != nil {
		t.Fatal(err)
	}
	return ok
}

// waitRecords waits until the reader has read every record the kernel
// logged since reading began (the shared chains' log counters), then
// takes what it has.
func waitRecords(t *testing.T, c *collector) []Record {
	t.Helper()
	read := func() uint64 {
		c.mu.Lock()
		defer c.mu.Unlock()
		return c.total
	}
	deadline := time.Now().Add(time.Minute)
	for logged := loggedIn(t, c.nsPath) - c.base; read() < logged; logged = loggedIn(t, c.nsPath) - c.base {
		if time.Now().After(deadline) {
			t.Fatalf("read %d of the %d records the kernel logged", read(), logged)
		}
		time.Sleep(20 * time.Millisecond)
	}
	return c.take()
}

// loggedIn is what the shared chains' log rules in nsPath have counted:
// the records the kernel logged.
func loggedIn(t *testing.T, nsPath string) uint64 {
	t.Helper()
	in, _ := listCounters(t, nsPath, tablelayout.ChainDeniedIngress)
	eg, _ := listCounters(t, nsPath, tablelayout.ChainDeniedEgress)
	return in + eg
}

func recText(r Record) string {
	return fmt.Sprintf("%s %s %s:%d -> %s:%d icmp=%v/%d pod=%s policies=%v in=%d out=%d (%s)",
		r.Direction, r.ProtocolName(), r.Src, r.SrcPort, r.Dst, r.DstPort, r.HasICMP, r.ICMPType, r.Pod, r.Policies, r.InIfindex, r.OutIfindex, r.Decision)
}

// Denied packets of a logged namespace's pods come back as records with
// the right addresses, ports, ICMP type, direction, pod and policies;
// allowed packets and packets a non-logged namespace's policy denies give
// none; a second reader of the group is refused.
func TestDeniedPacketsAreRecorded(t *testing.T) {
	c := newLabCluster(t)
	l := tablelayout.LogDenied{Group: 1601, Rate: 100, Burst: 100}
	c.program(t, &l)
	r, err := Open(Config{Group: l.Group, NetNS: c.node.Path})
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	t.Cleanup(func() { r.Close() }) // after the collector's cleanup stops Run
	if _, err := Open(Config{Group: l.Group, NetNS: c.node.Path}); !errors.Is(err, ErrGroupBusy) {
		t.Errorf("a second reader of the group: %v, want ErrGroupBusy", err)
	}
	col := collect(t, r, NewObjects(c.pods, c.policies), c.node.Path)

	xa, xb, ya, za := c.lab.Endpoint("x/a"), c.lab.Endpoint("x/b"), c.lab.Endpoint("y/a"), c.lab.Endpoint("z/a")
	type want struct {
		dir              Direction
		proto            string
		src, dst         netip.Addr
		dport            uint16
		icmpType         int // -1: no ICMP
		pod              string
		policies         string
		exactlyOne       bool
		inIface, outIfOK bool
	}
	var wants []want
	// Ingress of x/b, UDP over IPv4 and IPv6, from a pod allowed nothing.
	for _, f := range []netlab.Family{netlab.IPv4, netlab.IPv6} {
		sendUDP(t, c.lab, "y/a", netip.AddrPortFrom(xb.Addr(f), 81), 1, time.Second)
		wants = append(wants, want{Ingress, "udp", ya.Addr(f), xb.Addr(f), 81, -1, "x/b", "x/in-b", true, true, true})
	}
	// Egress of x/a: UDP, ICMP echo, TCP (whose SYN may be retransmitted).
	sendUDP(t, c.lab, "x/a", netip.AddrPortFrom(ya.IPv4, 80), 1, time.Second)
	wants = append(wants, want{Egress, "udp", xa.IPv4, ya.IPv4, 80, -1, "x/a", "x/out-a", true, true, true})
	ping(t, c.lab, "x/a", ya.IPv4)
	wants = append(wants, want{Egress, "icmp", xa.IPv4, ya.IPv4, 0, 8, "x/a", "x/out-a", true, true, true})
	if dialTCP(t, c.lab, "x/a", netip.AddrPortFrom(ya.IPv6, 80), 300*time.Millisecond) {
		t.Errorf("x/a reached y/a on TCP 80 over IPv6, which x/out-a denies")
	}
	wants = append(wants, want{Egress, "tcp", xa.IPv6, ya.IPv6, 80, -1, "x/a", "x/out-a", false, true, true})

	// Allowed: x/a to x/b on TCP 80, both ways isolated. Denied but not
	// logged: z/a's ingress (z has no annotation).
	if !dialTCP(t, c.lab, "x/a", netip.AddrPortFrom(xb.IPv4, 80), 2*time.Second) {
		t.Errorf("x/a cannot reach x/b on TCP 80, which both policies allow")
	}
	sendUDP(t, c.lab, "y/a", netip.AddrPortFrom(za.IPv4, 80), 1, time.Second)

	recs := waitRecords(t, col)
	for _, rec := range recs {
		t.Logf("record: %s", recText(rec))
	}
	for _, w := range wants {
		n := 0
		for _, rec := range recs {
			if rec.Src != w.src || rec.Dst != w.dst || rec.ProtocolName() != w.proto || rec.DstPort != w.dport {
				continue
			}
			n++
			if rec.Direction != w.dir || rec.Pod != w.pod || strings.Join(rec.Policies, ",") != w.policies {
				t.Errorf("record %s: want direction %s, pod %s, policies %s", recText(rec), w.dir, w.pod, w.policies)
			}
			if (w.icmpType >= 0) != rec.HasICMP || (w.icmpType >= 0 && int(rec.ICMPType) != w.icmpType) {
				t.Errorf("record %s: want ICMP type %d", recText(rec), w.icmpType)
			}
			if w.proto != "icmp" && rec.SrcPort == 0 {
				t.Errorf("record %s has no source port", recText(rec))
			}
			if rec.InIfindex == 0 || rec.OutIfindex == 0 {
				t.Errorf("record %s lacks an interface", recText(rec))
			}
			if rec.Group != l.Group || rec.Time.IsZero() || rec.Length == 0 {
				t.Errorf("record %s: group %d, time %v, length %d", recText(rec), rec.Group, rec.Time, rec.Length)
			}
			wantDecision := fmt.Sprintf("pod %s isolated for %s by policy %s; no rule allowed", w.pod, w.dir, strings.TrimPrefix(w.policies, "x/"))
			if rec.Decision != wantDecision {
				t.Errorf("decision %q, want %q", rec.Decision, wantDecision)
			}
		}
		if n == 0 || (w.exactlyOne && n != 1) {
			t.Errorf("%d records of %s %s %s -> %s:%d, want one", n, w.dir, w.proto, w.src, w.dst, w.dport)
		}
	}
	for _, rec := range recs {
		if rec.Dst == za.IPv4 || rec.Dst == xb.IPv4 && rec.DstPort == 80 || rec.Src == xb.IPv4 {
			t.Errorf("record of traffic that was allowed or not logged: %s", recText(rec))
		}
	}
	if len(recs) > len(wants)+2 {
		t.Errorf("%d records for %d denied sends", len(recs), len(wants))
	}
}

// listCounters reads a denied chain's two counters (logged, denied) with
// nft, the test's oracle.
func listCounters(t *testing.T, nsPath, chain string) (logged, denied uint64) {
	t.Helper()
	name := nsPath[strings.LastIndexByte(nsPath, '/')+1:]
	out, err := exec.Command("ip", "netns", "exec", name, "nft", "list", "chain", "inet", "nftguard", chain).CombinedOutput()
	if err != nil {
		t.Fatalf("nft list chain %s: %v\n%s", chain, err, out)
	}
	re := regexp.MustCompile(`counter packets (\d+) bytes \d+ (log|drop)`)
	for _, m := range re.FindAllStringSubmatch(string(out), -1) {
		v, _ := strconv.ParseUint(m[1], 10, 64)
		if m[2] == "log" {
			logged = v
		} else {
			denied = v
		}
	}
	return logged, denied
}

// A flood of denied datagrams gives at most burst + rate × time records;
// the kernel's counters account for every packet (logged + suppressed);
// allowed traffic between other pods keeps flowing meanwhile.
func TestFloodIsRateLimited(t *testing.T) {
	c := newLabCluster(t)
	l := tablelayout.LogDenied{Group: 1602, Rate: 10, Burst: 20}
	c.program(t, &l)
	r, err := Open(Config{Group: l.Group, NetNS: c.node.Path})
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	t.Cleanup(func() { r.Close() }) // after the collector's cleanup stops Run
	col := collect(t, r, NewObjects(c.pods, c.policies), c.node.Path)
	xb := c.lab.Endpoint("x/b")
	logged0, denied0 := listCounters(t, c.node.Path, tablelayout.ChainDeniedIngress)

	const floodFor = 2 * time.Second
	start := time.Now()
	var sent int
	done := make(chan struct{})
	go func() {
		defer close(done)
		sent = sendUDP(t, c.lab, "y/a", netip.AddrPortFrom(xb.IPv4, 81), 100000, floodFor)
	}()
	// Allowed traffic during the flood.
	for i := 0; i < 3; i++ {
		if !dialTCP(t, c.lab, "x/a", netip.AddrPortFrom(xb.IPv4, 80), 2*time.Second) {
			t.Errorf("allowed connection %d failed during the flood", i)
		}
	}
	<-done
	elapsed := time.Since(start)
	recs := waitRecords(t, col)
	logged1, denied1 := listCounters(t, c.node.Path, tablelayout.ChainDeniedIngress)

	flood := 0
	for _, rec := range recs {
		if rec.Dst == xb.IPv4 && rec.DstPort == 81 {
			flood++
		}
	}
	limit := int(l.Burst) + int(float64(l.Rate)*elapsed.Seconds()) + 2 // the bucket's edges
	t.Logf("flood: %d datagrams sent in %v (%.0f/s); %d records (%.1f/s), limit %d; kernel counters: %d logged, %d denied; socket overruns %d",
		sent, elapsed.Round(time.Millisecond), float64(sent)/elapsed.Seconds(), flood, float64(flood)/elapsed.Seconds(), limit,
		logged1-logged0, denied1-denied0, r.Lost())
	if flood > limit {
		t.Errorf("%d records, over burst + rate × time = %d", flood, limit)
	}
	if flood < int(l.Burst) {
		t.Errorf("%d records, fewer than the burst %d", flood, l.Burst)
	}
	if got := logged1 - logged0; got != uint64(flood) || r.Lost() != 0 {
		t.Errorf("kernel logged %d packets, reader got %d records (%d overruns)", got, flood, r.Lost())
	}
	if got := denied1 - denied0; got > uint64(sent) || got < uint64(sent)/2 {
		t.Errorf("kernel denied %d packets of %d sent", got, sent)
	}
	if sent < 1000 {
		t.Errorf("only %d datagrams sent: no flood", sent)
	}
}
