package e2e

import (
	"context"
	"crypto/rand"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/vishvananda/netlink"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/network-policy-api/apis/v1beta1"

	"github.com/nftguard/nftguard/internal/netlab"
	"github.com/nftguard/nftguard/internal/nfnl"
)

// Isolation belongs to the pod, not to its address. These tests attack
// it as a tenant would, through `nftguard apply` on the own-node lab (two
// nodes; x/a and x/b on n1, y/a on n2; servers on both nodes), routed and
// bridged:
//
//   - forged sources: raw IPv4 and IPv6 UDP datagrams and SCTP INITs from
//     a pod with another pod's address or an unused one of the pod range
//     as source, to its own node, to a pod on the other node and to its
//     neighbour; none may arrive, while the same packets with the sender's
//     own source do (the control);
//   - link-local: TCP and UDP (real sockets) and SCTP INITs (raw, from the
//     pod's own fe80:: address) to the node's link-local address (routed:
//     the veth's fe80::1; bridged: br0's) and, bridged, to the other pod's
//     link-local address, judged by NetworkPolicy and ClusterNetworkPolicy
//     like any other traffic; `nftguard explain` agrees.
func TestPodGuard(t *testing.T) {
	for _, bridged := range []bool{false, true} {
		name := "routed"
		if bridged {
			name = "bridged"
		}
		t.Run(name, func(t *testing.T) { testPodGuard(t, bridged) })
	}
}

func testPodGuard(t *testing.T, bridged bool) {
	o := newOwnNodeLab(t, bridged)
	t.Run("forged sources", func(t *testing.T) { o.forgedSources(t) })
	t.Run("link-local", func(t *testing.T) { o.linkLocal(t) })
}

// nonce is a fresh 8-byte marker.
func nonce(t *testing.T) []byte {
	b := make([]byte, 8)
	rand.Read(b)
	b[0] |= 1 // an SCTP initiate tag must not be 0
	return b
}

// forgedCase is one forged packet and where it must not arrive.
type forgedCase struct {
	name     string
	from     string
	src, dst netip.Addr
	at       *netlab.Endpoint
	proto    uint8
	want     bool // arrives
}

func (o *ownNodeLab) forgedSources(t *testing.T) {
	o.policies = []*networkingv1.NetworkPolicy{np("x", "deny-egress-a", spec{PodSelector: *match("pod", "a"), PolicyTypes: egressOnly})}
	o.cnps = nil
	o.apply()
	xb, ya := o.lab.Endpoint("x/b"), o.lab.Endpoint("y/a")
	n1 := o.hosts["n1"]
	unused4 := netip.MustParseAddr("10.100.0.200")
	unused6 := netip.MustParseAddr("fd00:10:100::c8")
	var cases []forgedCase
	for _, proto := range []uint8{netlab.ProtoUDP, netlab.ProtoSCTP} {
		pn := map[uint8]string{netlab.ProtoUDP: "udp", netlab.ProtoSCTP: "sctp"}[proto]
		for _, f := range []netlab.Family{netlab.IPv4, netlab.IPv6} {
			unused := unused4
			if f == netlab.IPv6 {
				unused = unused6
			}
			for _, tgt := range []*netlab.Endpoint{n1, ya, xb} {
				add := func(name, from string, src netip.Addr, want bool) {
					cases = append(cases, forgedCase{name: fmt.Sprintf("%s %s %v -> %s: %s", pn, from, f, tgt.Name, name),
						from: from, src: src, dst: tgt.Addr(f), at: tgt, proto: proto, want: want})
				}
				if tgt != xb {
					// x/b is not isolated: its address is the one worth forging.
					add("source x/b's address", "x/a", xb.Addr(f), false)
					add("its own source (x/b, not isolated: the control)", "x/b", xb.Addr(f), true)
				}
				add("unused address of the pod range", "x/a", unused, false)
				if tgt == n1 {
					add("source y/a's address (a pod of another node)", "x/b", ya.Addr(f), false)
				}
			}
		}
	}
	// Each case's marker at the receiver: the UDP payload, or the SCTP
	// INIT's initiate tag (netlab.Forged sets its low bit).
	marker := func(proto uint8, n []byte) []byte {
		if proto == netlab.ProtoSCTP {
			m := append([]byte(nil), n[:4]...)
			m[3] |= 1
			return m
		}
		return n
	}
	// One catcher per target, family and protocol.
	type catchKey struct {
		at    *netlab.Endpoint
		f     netlab.Family
		proto uint8
	}
	catchers := map[catchKey]*netlab.Catcher{}
	for _, c := range cases {
		f := netlab.IPv4
		if c.dst.Is6() {
			f = netlab.IPv6
		}
		k := catchKey{c.at, f, c.proto}
		if catchers[k] == nil {
			cat, err := o.lab.CatchAt(c.at, f, c.proto)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(cat.Close)
			catchers[k] = cat
		}
	}
	const rounds = 5
	nonces := make([][]byte, len(cases))
	for i, c := range cases {
		nonces[i] = nonce(t)
		for r := 0; r < rounds; r++ {
			err := o.lab.SendForged(o.lab.Endpoint(c.from), netlab.Forged{Src: c.src, Dst: c.dst, Proto: c.proto, DstPort: 80, Nonce: nonces[i]})
			if err != nil {
				t.Fatalf("%s: %v", c.name, err)
			}
		}
	}
	// Every control arrives (polled); the forged packets, sent before
	// them on the same paths, had as long to arrive.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	sent, forged, arrived := 0, 0, 0
	for i, c := range cases {
		f := netlab.IPv4
		if c.dst.Is6() {
			f = netlab.IPv6
		}
		cat := catchers[catchKey{c.at, f, c.proto}]
		if c.want {
			if !cat.Wait(ctx, marker(c.proto, nonces[i])) {
				t.Errorf("%s: the control did not arrive", c.name)
			}
		}
	}
	var bad []string
	for i, c := range cases {
		f := netlab.IPv4
		if c.dst.Is6() {
			f = netlab.IPv6
		}
		n := catchers[catchKey{c.at, f, c.proto}].Count(marker(c.proto, nonces[i]))
		if !c.want {
			forged++
			sent += rounds
			arrived += n
			if n > 0 {
				bad = append(bad, fmt.Sprintf("%s: %d of %d arrived", c.name, n, rounds))
			}
		}
	}
	if len(bad) > 0 {
		t.Errorf("forged packets arrived:\n%s\ntable of n1:\n%s", strings.Join(bad, "\n"), nftList(t, o.lab.Node("n1").NetNS))
	}
	t.Logf("%d forged cases, %d packets sent, %d arrived; %d controls", forged, sent, arrived, len(cases)-forged)
	out := nftList(t, o.lab.Node("n1").NetNS)
	for _, pod := range []string{"x_a", "x_b"} {
		if !strings.Contains(out, "chain pg_"+pod) {
			t.Errorf("no guard chain of %s in n1's table:\n%s", pod, out)
		}
	}
}

// linkLocalOf is the link-local address of eth0 in the namespace at path.
func linkLocalOf(t *testing.T, path, dev string) netip.Addr {
	t.Helper()
	var out netip.Addr
	err := nfnl.InNetNS(path, func() error {
		l, err := netlink.LinkByName(dev)
		if err != nil {
			return err
		}
		as, err := netlink.AddrList(l, netlink.FAMILY_V6)
		if err != nil {
			return err
		}
		for _, a := range as {
			if ip, ok := netip.AddrFromSlice(a.IP); ok && ip.IsLinkLocalUnicast() && ip != netip.MustParseAddr("fe80::1") {
				out = ip
				return nil
			}
		}
		return fmt.Errorf("%s has no link-local address", dev)
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// ifindexOf is the index of dev in the namespace at path.
func ifindexOf(t *testing.T, path, dev string) int {
	t.Helper()
	var idx int
	err := nfnl.InNetNS(path, func() error {
		l, err := netlink.LinkByName(dev)
		if err != nil {
			return err
		}
		idx = l.Attrs().Index
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return idx
}

// llTarget is a link-local destination of the probes.
type llTarget struct {
	name string
	ep   *netlab.Endpoint // whose servers answer
	addr netip.Addr       // with zone eth0 (the sender's side)
}

type llWant func(src string, tgt llTarget, p netlab.Port) bool

func (o *ownNodeLab) llTargets(t *testing.T) []llTarget {
	n1 := o.lab.Node("n1")
	node := netip.MustParseAddr("fe80::1") // on every routed pod veth
	if o.bridged {
		node = linkLocalOf(t, n1.Path, n1.Bridge)
	}
	tgts := []llTarget{{name: "n1 link-local", ep: o.hosts["n1"], addr: node.WithZone("eth0")}}
	if o.bridged {
		for _, p := range []string{"x/a", "x/b"} {
			ep := o.lab.Endpoint(p)
			tgts = append(tgts, llTarget{name: p + " link-local", ep: ep, addr: linkLocalOf(t, ep.Path, "eth0").WithZone("eth0")})
		}
	}
	return tgts
}

var llPorts = []netlab.Port{tcp80, tcp81, udp80, udp81, sctp80, sctp81}

// llProbe probes every source × link-local target × port and compares
// with want.
func (o *ownNodeLab) llProbe(t *testing.T, what string, srcs []string, want llWant) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var bad []string
	n, allowed := 0, 0
	for _, s := range srcs {
		src := o.lab.Endpoint(s)
		for _, tgt := range o.llTargets(t) {
			if tgt.ep == src {
				continue
			}
			for _, p := range llPorts {
				var ok bool
				if p.Proto == netlab.SCTP {
					ok = o.llSCTP(t, ctx, src, tgt, p)
				} else {
					// A numeric zone: Go caches interface names process-wide,
					// and every pod's eth0 is another interface.
					addr := tgt.addr.WithZone(strconv.Itoa(ifindexOf(t, src.Path, "eth0")))
					res, err := o.rt.Connect(ctx, src, tgt.ep, p.Proto, netip.AddrPortFrom(addr, uint16(p.Num)), time.Second)
					if err != nil {
						t.Fatal(err)
					}
					ok = res.OK()
				}
				n++
				if ok {
					allowed++
				}
				if w := want(s, tgt, p); ok != w {
					bad = append(bad, fmt.Sprintf("%s -> %s [%s] %v: got %s, want %s", s, tgt.name, tgt.addr, p, verdictWord(ok), verdictWord(w)))
				}
			}
		}
	}
	if len(bad) > 0 {
		t.Fatalf("%s: %d of %d probes differ:\n%s\ntable of n1:\n%s", what, len(bad), n, strings.Join(bad, "\n"), nftList(t, o.lab.Node("n1").NetNS))
	}
	t.Logf("%s: %d link-local probes as expected (%d allowed, %d denied)", what, n, allowed, n-allowed)
}

// llSCTP sends an SCTP INIT from src's own link-local address and reports
// whether tgt's namespace received it (no kernel SCTP here: see netlab).
func (o *ownNodeLab) llSCTP(t *testing.T, ctx context.Context, src *netlab.Endpoint, tgt llTarget, p netlab.Port) bool {
	cat, err := o.lab.CatchAt(tgt.ep, netlab.IPv6, netlab.ProtoSCTP)
	if err != nil {
		t.Fatal(err)
	}
	defer cat.Close()
	n := nonce(t)[:4]
	fp := netlab.Forged{Src: linkLocalOf(t, src.Path, "eth0"), Dst: tgt.addr.WithZone(""), Proto: netlab.ProtoSCTP, DstPort: uint16(p.Num), Nonce: n}
	wait, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	for r := 0; r < 2; r++ {
		if err := o.lab.SendForged(src, fp); err != nil {
			t.Fatal(err)
		}
	}
	n[3] |= 1 // the initiate tag, whose low bit netlab.Forged sets
	return cat.Wait(wait, n)
}

// explainLL asks `nftguard explain` about src's TCP to a link-local
// target and checks the verdict.
func (o *ownNodeLab) explainLL(t *testing.T, src string, tgt llTarget, p netlab.Port, allowed bool) {
	t.Helper()
	out, err := exec.Command(nftguardBin, "explain", "-f", o.dir, "--node-name", "n1",
		"--from", src, "--to", tgt.addr.WithZone("").String(), "--port", p.String()).CombinedOutput()
	if err != nil {
		t.Fatalf("explain %s -> %s %v: %v\n%s", src, tgt.addr, p, err, out)
	}
	if w := "verdict: " + verdictWord(allowed); !strings.Contains(string(out), w) {
		t.Errorf("explain %s -> %s (%s) %v: want %q:\n%s", src, tgt.addr, tgt.name, p, w, out)
	}
}

func (o *ownNodeLab) linkLocal(t *testing.T) {
	srcs := []string{"x/a", "x/b"}
	node := o.llTargets(t)[0]

	// x/a isolated both ways: nothing to or from its link-local
	// addresses, as nothing to or from its pod IPs; x/b is not isolated.
	o.policies = []*networkingv1.NetworkPolicy{np("x", "deny-all-a", spec{PodSelector: *match("pod", "a"),
		PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress, networkingv1.PolicyTypeEgress}})}
	o.cnps = nil
	o.apply()
	isolatedA := func(src string, tgt llTarget, _ netlab.Port) bool {
		return src != "x/a" && !strings.HasPrefix(tgt.name, "x/a")
	}
	o.llProbe(t, "x/a isolated both ways", srcs, isolatedA)
	o.explainLL(t, "x/a", node, tcp80, false)

	// A link-local peer is in an ipBlock that lists it, on the rule's
	// ports only.
	o.policies = []*networkingv1.NetworkPolicy{np("x", "ll-80", spec{PodSelector: *match("pod", "a"), PolicyTypes: egressOnly,
		Egress: []networkingv1.NetworkPolicyEgressRule{{
			To:    []peer{{IPBlock: &networkingv1.IPBlock{CIDR: "fe80::/10"}}},
			Ports: allProtocols(80),
		}}})}
	o.apply()
	ipBlock80 := func(src string, tgt llTarget, p netlab.Port) bool {
		return src != "x/a" || p.Num == 80
	}
	o.llProbe(t, "x/a egress to ipBlock fe80::/10 port 80", srcs, ipBlock80)
	o.explainLL(t, "x/a", node, tcp80, true)
	o.explainLL(t, "x/a", node, tcp81, false)

	// ClusterNetworkPolicy judges it too: an Admin Deny of every network
	// on port 80 for x/b (which no NetworkPolicy isolates).
	o.policies = nil
	o.cnps = []*v1beta1.ClusterNetworkPolicy{
		cnpOf("deny-80", v1beta1.AdminTier, 10, "x", func(s *cnpSpec) {
			s.Subject.Namespaces = nil
			s.Subject.Pods = &v1beta1.NamespacedPod{NamespaceSelector: *match("ns", "x"), PodSelector: *match("pod", "b")}
			s.Egress = []v1beta1.ClusterNetworkPolicyEgressRule{cOut(cDeny, toNetworks("0.0.0.0/0", "::/0"), cnpAllProtocols(80)...)}
		}),
	}
	o.apply()
	admin := func(src string, _ llTarget, p netlab.Port) bool { return src != "x/b" || p.Num != 80 }
	o.llProbe(t, "Admin Deny of every network on port 80 for x/b", srcs, admin)
	o.explainLL(t, "x/b", node, tcp80, false)
	o.cnps = nil
}

// allProtocols is one NetworkPolicy port for TCP, UDP and SCTP.
func allProtocols(port int32) []networkingv1.NetworkPolicyPort {
	var out []networkingv1.NetworkPolicyPort
	for _, p := range []corev1.Protocol{corev1.ProtocolTCP, corev1.ProtocolUDP, corev1.ProtocolSCTP} {
		num := intstr.FromInt32(port)
		out = append(out, networkingv1.NetworkPolicyPort{Protocol: &p, Port: &num})
	}
	return out
}

// cnpAllProtocols is one ClusterNetworkPolicy destination port for TCP,
// UDP and SCTP.
func cnpAllProtocols(port int32) []v1beta1.ClusterNetworkPolicyProtocol {
	pt := &v1beta1.Port{Number: port}
	return []v1beta1.ClusterNetworkPolicyProtocol{
		{TCP: &v1beta1.ClusterNetworkPolicyProtocolTCP{DestinationPort: pt}},
		{UDP: &v1beta1.ClusterNetworkPolicyProtocolUDP{DestinationPort: pt}},
		{SCTP: &v1beta1.ClusterNetworkPolicyProtocolSCTP{DestinationPort: pt}},
	}
}

// TestAgentPodGuard is the same attack through `nftguard run` against the
// real API server, routed and bridged (three nodes; x/a and y/a on n1):
// with x/a isolated for egress by a NetworkPolicy created through the
// API, x/a's raw UDP datagrams with y/a's address (IPv4 and IPv6) never
// reach x/b on n2 while y/a's own do, and the agent counts them in
// nftguard_forged_packets_total{namespace="x"} and logs them (with
// --log-denied) as records naming x/a; x/a's TCP to its node's
// link-local address is refused while y/a's is answered, and, bridged,
// x/a cannot reach y/a's link-local address either.
func TestAgentPodGuard(t *testing.T) {
	for _, bridged := range []bool{false, true} {
		name := "routed"
		if bridged {
			name = "bridged"
		}
		t.Run(name, func(t *testing.T) { testAgentPodGuard(t, bridged) })
	}
}

func testAgentPodGuard(t *testing.T, bridged bool) {
	a := newAgentLabWith(t, agentLabOptions{bridged: bridged, args: []string{"--min-sync-interval", "50ms", "--max-sync-interval", "500ms",
		"--log-denied", "--log-group", "1612", "--log-rate", "1000", "--log-burst", "1000"}})
	ctx := context.Background()
	n1 := a.lab.Node("n1")
	ag := a.agents["n1"]
	waitMetrics(t, ag, map[string]float64{"nftguard_pods_guarded": float64(len(n1.Pods))})
	rt, err := netlab.NewRuntime(a.lab)
	if err != nil {
		t.Fatal(err)
	}
	host, err := rt.ServeNode("n1", agentPorts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rt.StopNode(host) })

	a.createPolicy(ctx, np("x", "deny-egress-a", spec{PodSelector: *match("pod", "a"), PolicyTypes: egressOnly}))
	for deadline := time.Now().Add(30 * time.Second); !strings.Contains(nftList(t, n1.NetNS), "chain np_egr_x_a"); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the policy never reached n1:\n%s", nftList(t, n1.NetNS))
		}
	}
	xa, ya, xb := a.lab.Endpoint("x/a"), a.lab.Endpoint("y/a"), a.lab.Endpoint("x/b")

	// Forged: x/a with y/a's address, against y/a's own as the control.
	before := metricValue(ag.metrics(t), `nftguard_forged_packets_total{namespace="x"}`)
	const rounds = 10
	forged := 0
	for _, f := range []netlab.Family{netlab.IPv4, netlab.IPv6} {
		cat, err := a.lab.CatchAt(xb, f, netlab.ProtoUDP)
		if err != nil {
			t.Fatal(err)
		}
		defer cat.Close()
		bad, good := nonce(t), nonce(t)
		for r := 0; r < rounds; r++ {
			if err := a.lab.SendForged(xa, netlab.Forged{Src: ya.Addr(f), Dst: xb.Addr(f), Proto: netlab.ProtoUDP, DstPort: 80, Nonce: bad}); err != nil {
				t.Fatal(err)
			}
			forged++
		}
		if err := a.lab.SendForged(ya, netlab.Forged{Src: ya.Addr(f), Dst: xb.Addr(f), Proto: netlab.ProtoUDP, DstPort: 80, Nonce: good}); err != nil {
			t.Fatal(err)
		}
		wait, cancel := context.WithTimeout(ctx, 10*time.Second)
		if !cat.Wait(wait, good) {
			t.Errorf("%v: y/a's own datagram did not reach x/b", f)
		}
		cancel()
		if n := cat.Count(bad); n > 0 {
			t.Errorf("%v: %d of %d datagrams x/a sent with y/a's address reached x/b", f, n, rounds)
		}
	}
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		got := metricValue(ag.metrics(t), `nftguard_forged_packets_total{namespace="x"}`) - before
		if got >= float64(forged) {
			t.Logf("nftguard_forged_packets_total{namespace=\"x\"} grew by %v for %d forged datagrams", got, forged)
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("nftguard_forged_packets_total{namespace=\"x\"} grew by %v, want %d", got, forged)
		}
	}

	// The agent logs them, named by the pod whose interface they came by
	// (their source names y/a).
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		b, err := os.ReadFile(ag.logPath)
		if err != nil {
			t.Fatal(err)
		}
		log := string(b)
		if strings.Contains(log, `"direction":"forged"`) && strings.Contains(log, `"srcPod":"x/a"`) &&
			strings.Contains(log, `"src":"`+ya.IPv4.String()+`"`) && !strings.Contains(log, `"srcPod":"y/a"`) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no forged-source record naming x/a in agent n1's log:\n%s", ag.logTail())
		}
	}

	// Link-local: the node's, and bridged, y/a's.
	type target struct {
		name string
		ep   *netlab.Endpoint
		addr netip.Addr
	}
	node := netip.MustParseAddr("fe80::1")
	if bridged {
		node = linkLocalOf(t, n1.Path, n1.Bridge)
	}
	tgts := []target{{"n1 link-local", host, node}}
	if bridged {
		tgts = append(tgts, target{"y/a link-local", ya, linkLocalOf(t, ya.Path, "eth0")})
	}
	for _, tgt := range tgts {
		for _, src := range []*netlab.Endpoint{xa, ya} {
			if src == tgt.ep {
				continue
			}
			addr := tgt.addr.WithZone(strconv.Itoa(ifindexOf(t, src.Path, "eth0")))
			res, err := rt.Connect(ctx, src, tgt.ep, netlab.TCP, netip.AddrPortFrom(addr, 80), time.Second)
			if err != nil {
				t.Fatal(err)
			}
			if want := src != xa; res.OK() != want {
				t.Errorf("%s -> %s [%s] tcp/80: got %s, want %s", src.Name, tgt.name, tgt.addr, verdictWord(res.OK()), verdictWord(want))
			}
		}
	}
}

// TestPodGuardSingleStack: pods whose Pod objects are IPv4-only or
// IPv6-only (through `nftguard apply`, routed and bridged). A pod's only
// own addresses are the family its Pod lists and its link-local ones: a
// datagram from its address of the other family leaves it no more than a
// forged one, while one from its listed address does; and its link-local
// traffic is judged by its policy in every cluster, IPv4-only ones
// included (every pod has an fe80:: address).
func TestPodGuardSingleStack(t *testing.T) {
	for _, bridged := range []bool{false, true} {
		for _, fam := range []netlab.Family{netlab.IPv4, netlab.IPv6} {
			name := fmt.Sprintf("routed/%v-only", fam)
			if bridged {
				name = fmt.Sprintf("bridged/%v-only", fam)
			}
			t.Run(name, func(t *testing.T) {
				o := newOwnNodeLab(t, bridged)
				o.family = fam
				o.policies = []*networkingv1.NetworkPolicy{np("x", "deny-all-a", spec{PodSelector: *match("pod", "a"),
					PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress, networkingv1.PolicyTypeEgress}})}
				o.apply()
				xb, n1 := o.lab.Endpoint("x/b"), o.hosts["n1"]
				other := netlab.IPv6
				if fam == netlab.IPv6 {
					other = netlab.IPv4
				}
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				defer cancel()
				for _, c := range []struct {
					f    netlab.Family
					want bool
				}{{other, false}, {fam, true}} {
					cat, err := o.lab.CatchAt(n1, c.f, netlab.ProtoUDP)
					if err != nil {
						t.Fatal(err)
					}
					n := nonce(t)
					for r := 0; r < 5; r++ {
						if err := o.lab.SendForged(xb, netlab.Forged{Src: xb.Addr(c.f), Dst: n1.Addr(c.f), Proto: netlab.ProtoUDP, DstPort: 80, Nonce: n}); err != nil {
							t.Fatal(err)
						}
					}
					if c.want {
						if !cat.Wait(ctx, n) {
							t.Errorf("x/b's datagram from its listed %v address did not reach n1", c.f)
						}
					} else if got := cat.Count(n); got > 0 {
						t.Errorf("%d of 5 datagrams from x/b's unlisted %v address reached n1", got, c.f)
					}
					cat.Close()
				}
				isolatedA := func(src string, tgt llTarget, _ netlab.Port) bool {
					return src != "x/a" && !strings.HasPrefix(tgt.name, "x/a")
				}
				o.llProbe(t, fmt.Sprintf("%v-only pods, x/a isolated both ways", fam), []string{"x/a", "x/b"}, isolatedA)
			})
		}
	}
}
