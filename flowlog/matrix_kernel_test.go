package flowlog

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"net"
	"net/netip"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/nftguard/nftguard/engine"
	"github.com/nftguard/nftguard/internal/netlab"
	"github.com/nftguard/nftguard/policy"
	"github.com/nftguard/nftguard/tablelayout"
)

// matrixCluster is a node with two logged namespaces and these policies:
//
//	x/in-b   isolates x/b for ingress: only from x/a, on TCP, UDP and SCTP 80
//	y/out-a  isolates y/a for egress: only to pods of namespace x, on port 81
//
// x/a and y/b are isolated in no direction.
func matrixCluster(t *testing.T) *labCluster {
	c := newLabPods(t, "x/a", "x/b", "y/a", "y/b")
	ports := func(n int32) []networkingv1.NetworkPolicyPort {
		var out []networkingv1.NetworkPolicyPort
		for _, proto := range []corev1.Protocol{corev1.ProtocolTCP, corev1.ProtocolUDP, corev1.ProtocolSCTP} {
			port := intstr.FromInt32(n)
			out = append(out, networkingv1.NetworkPolicyPort{Protocol: &proto, Port: &port})
		}
		return out
	}
	sel := func(k, v string) *metav1.LabelSelector {
		return &metav1.LabelSelector{MatchLabels: map[string]string{k: v}}
	}
	c.policies = []*networkingv1.NetworkPolicy{
		{ObjectMeta: metav1.ObjectMeta{Namespace: "x", Name: "in-b"}, Spec: networkingv1.NetworkPolicySpec{
			PodSelector: *sel("pod", "b"),
			Ingress:     []networkingv1.NetworkPolicyIngressRule{{From: []networkingv1.NetworkPolicyPeer{{PodSelector: sel("pod", "a")}}, Ports: ports(80)}},
		}},
		{ObjectMeta: metav1.ObjectMeta{Namespace: "y", Name: "out-a"}, Spec: networkingv1.NetworkPolicySpec{
			PodSelector: *sel("pod", "a"),
			PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeEgress},
			Egress:      []networkingv1.NetworkPolicyEgressRule{{To: []networkingv1.NetworkPolicyPeer{{NamespaceSelector: sel("ns", "x")}}, Ports: ports(81)}},
		}},
	}
	c.nss = loggedNamespaces("x", "y")
	return c
}

// matrixDenial is what the policies of matrixCluster say of one flow: ""
// when it is allowed, else the direction and the chain (pod) and policy
// that deny it. Egress is decided first: a packet egress denies never
// meets the destination's ingress.
func matrixDenial(from, to string, port int) (dir Direction, pod, pol string) {
	switch {
	case from == to:
		return "", "", "" // a pod may always reach itself
	case from == "y/a" && !(strings.HasPrefix(to, "x/") && port == 81):
		return Egress, "y/a", "y/out-a"
	case to == "x/b" && !(from == "x/a" && port == 80):
		return Ingress, "x/b", "x/in-b"
	}
	return "", "", ""
}

// With logging on, over TCP, UDP and SCTP (a raw INIT) and IPv4 and IPv6:
// the kernel enforces the matrix (netlab's probes), then one packet per
// flow (a single SYN, datagram or INIT) gives exactly one record for each
// denied flow, with its pods, ports, direction and policy, and none for an
// allowed flow; the drop counters of the two isolated pod chains grew by
// exactly the denied packets.
func TestMatrixEveryDeniedPacketOneRecord(t *testing.T) {
	c := matrixCluster(t)
	l := tablelayout.LogDenied{Group: 1605, Rate: 1000, Burst: 1000}
	c.program(t, &l)
	r, err := Open(Config{Group: l.Group, NetNS: c.node.Path})
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	t.Cleanup(func() { r.Close() })
	col := collect(t, r, NewObjects(c.pods, c.policies), c.node.Path)
	ctx := context.Background()

	ports := netlab.DefaultPorts
	for _, f := range []netlab.Family{netlab.IPv4, netlab.IPv6} {
		want := c.lab.NewExpected(f, true, ports...)
		for _, from := range c.lab.Pods {
			for _, to := range c.lab.Pods {
				for _, p := range ports {
					if dir, _, _ := matrixDenial(from.Name, to.Name, p.Num); dir != "" {
						want.Expect(from.Name, to.Name, false, p)
					}
				}
			}
		}
		got, err := c.lab.Reachability(ctx, f, ports...)
		if err != nil {
			t.Fatal(err)
		}
		if d := netlab.Compare(want, got); d != "" {
			t.Fatalf("%v: the kernel does not enforce the policies:\n%s", f, d)
		}
	}
	// netlab's probes retry; their records are not counted here.
	waitRecords(t, col)

	eng, err := engine.New(engine.Table{Name: "nftguard"}, engine.WithNetNS(c.node.Path))
	if err != nil {
		t.Fatal(err)
	}
	defer eng.Close()
	drops := func() map[string]uint64 {
		rcs, err := eng.Counters(ctx, func(ch string) bool { _, _, ok := policy.DeniedChain(ch); return ok })
		if err != nil {
			t.Fatal(err)
		}
		m := map[string]uint64{}
		for _, rc := range rcs {
			if rc.Comment == policy.CommentIsolatedIngress || rc.Comment == policy.CommentIsolatedEgress {
				m[rc.Chain] += rc.Counters[0].Packets
			}
		}
		return m
	}
	before := drops()

	type flow struct {
		*labFlow
		dir      Direction
		pod, pol string
	}
	var flows []flow
	sent := labFlows(c.lab, ports)
	for _, lf := range sent {
		dir, pod, pol := matrixDenial(lf.from.Name, lf.to.Name, lf.port.Num)
		flows = append(flows, flow{labFlow: lf, dir: dir, pod: pod, pol: pol})
	}
	sendOnePacketEach(t, c.lab, sent)
	recs := waitRecords(t, col)
	after := drops()

	denied := map[string]uint64{}
	var nDenied int
	for _, fl := range flows {
		name := fl.String()
		if fl.port.Proto != netlab.SCTP && fl.allowed != (fl.dir == "") {
			t.Errorf("%s: one packet allowed=%v, the policies say denied=%q", name, fl.allowed, fl.dir)
		}
		mine := fl.records(recs)
		if fl.dir == "" {
			if len(mine) != 0 {
				t.Errorf("%s is allowed, yet recorded: %s", name, recText(mine[0]))
			}
			continue
		}
		nDenied++
		denied[chainOf(fl.dir, fl.pod)]++
		if len(mine) != 1 {
			t.Errorf("%s is denied by %s (%s): %d records, want 1", name, fl.pol, fl.dir, len(mine))
			continue
		}
		rec := mine[0]
		if rec.Direction != fl.dir || rec.Pod != fl.pod || strings.Join(rec.Policies, ",") != fl.pol ||
			rec.SrcPod != fl.from.Name || rec.DstPod != fl.to.Name || rec.SrcPort == 0 {
			t.Errorf("%s: record %s; want %s of %s by %s", name, recText(rec), fl.dir, fl.pod, fl.pol)
		}
	}
	if len(recs) != nDenied {
		t.Errorf("%d records for %d denied packets", len(recs), nDenied)
	}
	for ch, n := range denied {
		if got := after[ch] - before[ch]; got != n {
			t.Errorf("chain %s: drop counter grew by %d, want %d (denied packets sent)", ch, got, n)
		}
	}
	t.Logf("%d flows, %d denied, %d records; drop counters %v -> %v", len(flows), nDenied, len(recs), before, after)
}

// labFlow is one flow of a matrix test: from one lab pod to another on a
// port over a family, and whether its single packet got through (for TCP
// and UDP; see onePacket).
type labFlow struct {
	from, to *netlab.Endpoint
	port     netlab.Port
	fam      netlab.Family
	allowed  bool
}

// labFlows is every flow between two different pods of lab, over IPv4 and
// IPv6 and the given ports.
func labFlows(lab *netlab.Lab, ports []netlab.Port) []*labFlow {
	var flows []*labFlow
	for _, f := range []netlab.Family{netlab.IPv4, netlab.IPv6} {
		for _, from := range lab.Pods {
			for _, to := range lab.Pods {
				if from == to {
					continue
				}
				for _, p := range ports {
					flows = append(flows, &labFlow{from: from, to: to, port: p, fam: f})
				}
			}
		}
	}
	return flows
}

func (fl *labFlow) String() string {
	return fmt.Sprintf("%s -> %s %v %v", fl.from.Name, fl.to.Name, fl.port, fl.fam)
}

// records are the records among recs of fl's addresses, port and protocol.
func (fl *labFlow) records(recs []Record) []Record {
	src, dst := fl.from.Addr(fl.fam), fl.to.Addr(fl.fam)
	var mine []Record
	for _, rec := range recs {
		if rec.Src == src && rec.Dst == dst && rec.DstPort == uint16(fl.port.Num) && rec.ProtocolName() == string(fl.port.Proto) {
			mine = append(mine, rec)
		}
	}
	return mine
}

// sendOnePacketEach sends each flow's one packet (onePacket), 16 at a
// time so that the whole matrix fits the test's time, and notes whether
// it got through.
func sendOnePacketEach(t *testing.T, lab *netlab.Lab, flows []*labFlow) {
	t.Helper()
	var wg sync.WaitGroup
	sem := make(chan struct{}, 16)
	errs := make(chan error, len(flows))
	for _, fl := range flows {
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			var err error
			fl.allowed, err = onePacket(lab, fl.from.Name, netip.AddrPortFrom(fl.to.Addr(fl.fam), uint16(fl.port.Num)), fl.port.Proto)
			if err != nil {
				errs <- err
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
}

// loggedNamespaces are namespaces labelled ns=name that opt in to denied
// logging.
func loggedNamespaces(names ...string) []*corev1.Namespace {
	var out []*corev1.Namespace
	for _, n := range names {
		out = append(out, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: n, Labels: map[string]string{"ns": n},
			Annotations: map[string]string{tablelayout.AnnotationLogDenied: "true"}}})
	}
	return out
}

func chainOf(d Direction, pod string) string {
	ns, name, _ := strings.Cut(pod, "/")
	if d == Egress {
		return "np_egr_" + ns + "_" + name
	}
	return "np_ing_" + ns + "_" + name
}

// onePacket sends exactly one packet of a new flow from a lab pod: a TCP
// SYN (the dial gives up before the first retransmission), a UDP datagram
// (allowed if the server's echo comes back) or an SCTP INIT over a raw
// socket (allowed is always false: its answer is not awaited).
func onePacket(lab *netlab.Lab, from string, to netip.AddrPort, proto netlab.Proto) (allowed bool, err error) {
	if proto == netlab.TCP {
		return lab.DialTCP(from, to, 400*time.Millisecond)
	}
	err = lab.Run(from, func() error {
		switch proto {
		case netlab.UDP:
			c, err := net.Dial("udp", to.String())
			if err != nil {
				return err
			}
			defer c.Close()
			nonce := make([]byte, 8)
			rand.Read(nonce)
			if _, err := c.Write(nonce); err != nil {
				return nil // refused or unreachable: not through
			}
			c.SetReadDeadline(time.Now().Add(400 * time.Millisecond))
			buf := make([]byte, 64)
			n, err := c.Read(buf)
			allowed = err == nil && string(buf[:n]) == string(nonce)
		case netlab.SCTP:
			network := "ip4:132"
			if to.Addr().Is6() {
				network = "ip6:132"
			}
			c, err := net.ListenPacket(network, "")
			if err != nil {
				return err
			}
			defer c.Close()
			var r [6]byte
			rand.Read(r[:])
			pkt := sctpInitPacket(1024+binary.BigEndian.Uint16(r[4:])%60000, to.Port(), binary.BigEndian.Uint32(r[:4])|1)
			_, err = c.WriteTo(pkt, &net.IPAddr{IP: to.Addr().AsSlice()})
			return err
		default:
			return fmt.Errorf("no probe for %s", proto)
		}
		return nil
	})
	if err != nil {
		return false, fmt.Errorf("%s from %s to %s: %w", proto, from, to, err)
	}
	return allowed, nil
}

// sctpInitPacket is an SCTP common header and one INIT chunk, with the
// CRC32c checksum conntrack checks (an SCTP packet with a bad checksum is
// invalid and dropped before policy, unlogged).
func sctpInitPacket(srcPort, dstPort uint16, tag uint32) []byte {
	b := make([]byte, 12+20)
	binary.BigEndian.PutUint16(b[0:], srcPort)
	binary.BigEndian.PutUint16(b[2:], dstPort)
	ch := b[12:]
	ch[0] = 1 // INIT
	binary.BigEndian.PutUint16(ch[2:], 20)
	binary.BigEndian.PutUint32(ch[4:], tag)     // initiate tag
	binary.BigEndian.PutUint32(ch[8:], 1<<16)   // receiver window
	binary.BigEndian.PutUint16(ch[12:], 1)      // outbound streams
	binary.BigEndian.PutUint16(ch[14:], 1)      // inbound streams
	binary.BigEndian.PutUint32(ch[16:], tag+41) // initial TSN
	binary.LittleEndian.PutUint32(b[8:], crc32.Checksum(b, crc32.MakeTable(crc32.Castagnoli)))
	return b
}

// With logging off no log, limit or counter statement exists in the table
// (read back with nft, the oracle), and a denied packet gives no record.
func TestMatrixLoggingOff(t *testing.T) {
	c := matrixCluster(t)
	c.program(t, nil)
	name := c.node.Path[strings.LastIndexByte(c.node.Path, '/')+1:]
	out := nftList(t, name)
	for _, word := range []string{" log ", "limit rate", "counter", tablelayout.ChainDeniedIngress, tablelayout.ChainDeniedEgress} {
		if strings.Contains(out, word) {
			t.Errorf("logging off, the table has %q:\n%s", word, out)
		}
	}
	if !strings.Contains(out, "drop comment \""+policy.CommentIsolatedIngress+"\"") {
		t.Errorf("no plain drop of an isolated pod in:\n%s", out)
	}
	r, err := Open(Config{Group: 1606, NetNS: c.node.Path})
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	t.Cleanup(func() { r.Close() })
	col := collect(t, r, nil, "")
	for _, p := range []netlab.Port{{Proto: netlab.TCP, Num: 81}, {Proto: netlab.UDP, Num: 81}, {Proto: netlab.SCTP, Num: 81}} {
		if allowed, err := onePacket(c.lab, "y/b", netip.AddrPortFrom(c.lab.Endpoint("x/b").IPv4, uint16(p.Num)), p.Proto); err != nil || allowed {
			t.Errorf("y/b -> x/b %v: allowed=%v err=%v, want denied", p, allowed, err)
		}
	}
	// Absence: no log chain counts what would have been logged, so a
	// moment's wait is all there is.
	time.Sleep(500 * time.Millisecond)
	if recs := col.take(); len(recs) != 0 {
		t.Errorf("logging off, %d records: %s", len(recs), recText(recs[0]))
	}
}

// nftList lists our table in the lab namespace name with nft, the oracle.
func nftList(t *testing.T, name string) string {
	t.Helper()
	out, err := exec.Command("ip", "netns", "exec", name, "nft", "list", "table", "inet", "nftguard").CombinedOutput()
	if err != nil {
		t.Fatalf("nft list table: %v\n%s", err, out)
	}
	return string(out)
}
