package e2e

import (
	"context"
	"crypto/rand"
	"errors"
	"net"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	networkingv1 "k8s.io/api/networking/v1"

	"github.com/nftguard/nftguard/internal/netlab"
)

// On a bridge with br_netfilter, pod-to-pod IPv6 neighbour
// discovery crosses the forward hook. These tests run the policy scenarios
// on a bridged dual-stack node and check what is and is not accepted before
// policy dispatch.

// TestNetworkPolicyBridgedDualStack runs every scenario on a bridged node
// over IPv4 and IPv6 at once, on TCP, UDP and SCTP ports 80 and 81, with
// every neighbour cache flushed before each probe round, so that an entry
// resolved before the policy applied cannot hide a policy that breaks
// resolution.
func TestNetworkPolicyBridgedDualStack(t *testing.T) {
	start := time.Now()
	c := newCluster(t, true)
	for _, sc := range scenarios(c) {
		t.Run(sc.name, func(t *testing.T) {
			c.t = t
			c.reset()
			for _, st := range sc.steps {
				st.change(c)
				c.dualStackIPBlocks()
				c.apply()
				c.checkDualStack(netlab.DefaultPorts, st.want)
			}
		})
	}
	t.Logf("%d scenarios, both families, %d ports: %v", len(scenarios(c)), len(netlab.DefaultPorts), time.Since(start).Round(time.Second))
}

// dualStackIPBlocks gives every IPv4 ipBlock peer of the policies an IPv6
// twin that selects the same pods, so that scenarios written with IPv4
// CIDRs expect the same over both families: a pod's /32 becomes its /128,
// a shorter prefix holding pods becomes the pods' /64 (the lab's node
// subnet holds every pod in both families).
func (c *cluster) dualStackIPBlocks() {
	twin := func(cidr string) string {
		p := netip.MustParsePrefix(cidr)
		if !p.Addr().Is4() {
			return cidr
		}
		for _, ep := range c.lab.Pods {
			if p.Bits() == 32 && ep.IPv4 == p.Addr() {
				return netip.PrefixFrom(ep.IPv6, 128).String()
			}
			if p.Bits() < 32 && p.Contains(ep.IPv4) {
				return netip.PrefixFrom(ep.IPv6, 64).Masked().String()
			}
		}
		c.t.Fatalf("ipBlock %s holds no lab pod; add its IPv6 twin by hand", cidr)
		return ""
	}
	addTwins := func(peers []peer) []peer {
		out := peers
		for _, pr := range peers {
			b := pr.IPBlock
			if b == nil || !netip.MustParsePrefix(b.CIDR).Addr().Is4() {
				continue
			}
			t := &networkingv1.IPBlock{CIDR: twin(b.CIDR)}
			for _, e := range b.Except {
				t.Except = append(t.Except, twin(e))
			}
			if !slices.ContainsFunc(out, func(q peer) bool { return q.IPBlock != nil && q.IPBlock.CIDR == t.CIDR }) {
				out = append(out, peer{IPBlock: t}) // once, though a policy stays for later steps
			}
		}
		return out
	}
	for _, p := range c.policies {
		for i := range p.Spec.Egress {
			p.Spec.Egress[i].To = addTwins(p.Spec.Egress[i].To)
		}
		for i := range p.Spec.Ingress {
			p.Spec.Ingress[i].From = addTwins(p.Spec.Ingress[i].From)
		}
	}
}

// checkDualStack is check for both families in parallel, after flushing
// the neighbour caches and the node's connection tracking (so no flow of an
// earlier round, allowed then, counts as established now).
func (c *cluster) checkDualStack(ports []netlab.Port, want allowedFunc) {
	c.t.Helper()
	if err := errors.Join(c.lab.FlushNeighbours(), c.lab.FlushConntrack()); err != nil {
		c.t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	fams := []netlab.Family{netlab.IPv4, netlab.IPv6}
	diffs := make([]string, len(fams))
	errs := make([]error, len(fams))
	var wg sync.WaitGroup
	for i, f := range fams {
		wg.Go(func() {
			exp := c.lab.NewExpected(f, false, ports...)
			for _, from := range exp.From {
				for _, to := range exp.To {
					for _, p := range ports {
						exp.Expect(from, to, from == to || want(from, to, p), p)
					}
				}
			}
			got, err := c.lab.Reachability(ctx, f, ports...)
			if err != nil {
				errs[i] = err
				return
			}
			diffs[i] = netlab.Compare(exp, got)
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		c.t.Fatalf("probe: %v", err)
	}
	for i, d := range diffs {
		if d != "" {
			c.t.Errorf("%v connectivity differs from the expectation:\n%s", fams[i], d)
		}
	}
	if c.t.Failed() {
		c.t.Fatalf("rendered table:\n%s", c.render())
	}
}

// TestBridgedIPv6IntoEgressIsolatedPod is the reproduction: x/a may
// send nothing, but everyone may connect to it. Over IPv6 the connection
// from x/b needs x/a's neighbour advertisement, which x/a sends, so an
// egress chain that ends in drop must not see it.
func TestBridgedIPv6IntoEgressIsolatedPod(t *testing.T) {
	c := newCluster(t, true)
	c.addPolicy(np("x", "deny-egress-a", spec{PodSelector: *match("pod", "a"), PolicyTypes: egressOnly}))
	c.apply()
	if err := c.lab.FlushNeighbours(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for _, f := range []netlab.Family{netlab.IPv4, netlab.IPv6} {
		for _, p := range []netlab.Port{tcp80, udp80, sctp80} {
			ok, err := c.lab.Probe(ctx, "x/b", "x/a", p, f)
			if err != nil {
				t.Fatal(err)
			}
			if !ok {
				t.Errorf("%v %v x/b -> x/a: denied, but no policy isolates x/a for ingress", f, p)
			}
			// And the isolation itself still holds.
			ok, err = c.lab.Probe(ctx, "x/a", "x/b", p, f)
			if err != nil {
				t.Fatal(err)
			}
			if ok {
				t.Errorf("%v %v x/a -> x/b: allowed, but x/a is isolated for egress", f, p)
			}
		}
	}
}

// rawCase is one hand-made packet from x/b to x/a and whether it must
// arrive although x/a may receive nothing and x/b may send nothing.
type rawCase struct {
	name   string
	pkt    netlab.RawIPv6
	groups []netip.Addr // multicast groups x/a joins to see it
	arrive bool
}

// TestBridgedSpecialIPv6Packets sends hand-made packets between two pods of
// which each is isolated both ways with nothing allowed (default-deny-all
// in namespace x), and checks which arrive. Accepted before policy:
// neighbour solicitations and advertisements with hop limit 255 (RFC 4861
// section 7.1: anything else is discarded by the receiver anyway, and a
// packet routed by the node has its hop limit decremented before the
// forward hook). Forged ones with a lower hop limit, and router
// advertisements and redirects from a non-link-local source (RFC 4861
// sections 6.1.2 and 8.1 require a link-local one), get no special
// treatment. Link-scoped signalling from the pod's own link-local address
// (multicast listener reports, router solicitations, DHCPv6) passes before
// the policy, whose keys include that address; from a link-local address
// that is not the pod's, the guard on its interface drops it.
func TestBridgedSpecialIPv6Packets(t *testing.T) {
	c := newCluster(t, true)
	c.addPolicy(np("x", "deny-all", spec{PodSelector: allPodsSel, PolicyTypes: both}))
	c.apply()

	a, b := c.lab.Endpoint("x/a").IPv6, c.lab.Endpoint("x/b").IPv6
	// x/b's own link-local address: a made-up one is not x/b's, and its
	// guard drops it (the last cases).
	llB := linkLocalOf(t, c.lab.Endpoint("x/b").Path, "eth0")
	forgedLL := netip.MustParseAddr("fe80::bb")
	solicited := solicitedNode(a)
	icmp := func(typ uint8, hop uint8, src, dst netip.Addr, nonce []byte) netlab.RawIPv6 {
		// Type, code 0, checksum, 4 reserved/flag bytes, then the nonce
		// where a target address or options would be.
		p := append([]byte{typ, 0, 0, 0, 0, 0, 0, 0}, nonce...)
		return netlab.RawIPv6{Src: src, Dst: dst, HopLimit: hop, NextHeader: netlab.ProtoICMPv6, Payload: p}
	}
	udp := func(sport, dport uint16, hop uint8, src, dst netip.Addr, nonce []byte) netlab.RawIPv6 {
		p := append([]byte{byte(sport >> 8), byte(sport), byte(dport >> 8), byte(dport), 0, 0, 0, 0}, nonce...)
		return netlab.RawIPv6{Src: src, Dst: dst, HopLimit: hop, NextHeader: netlab.ProtoUDP, Payload: p}
	}
	var (
		mldRouters  = netip.MustParseAddr("ff02::16")
		allRouters  = netip.MustParseAddr("ff02::2")
		dhcpServers = netip.MustParseAddr("ff02::1:2")
		mldGroup    = netip.MustParseAddr("ff02::1234")
		ndCases     = []struct {
			name     string
			typ, hop uint8
			src, dst netip.Addr
			arrive   bool
		}{
			{"neighbor solicitation, hop limit 255, to the solicited-node group", 135, 255, b, solicited, true},
			{"neighbor solicitation, hop limit 255, unicast (unreachability detection)", 135, 255, b, a, true},
			{"neighbor advertisement, hop limit 255", 136, 255, b, a, true},
			{"neighbor solicitation forged with hop limit 254", 135, 254, b, a, false},
			{"neighbor advertisement forged with hop limit 64", 136, 64, b, a, false},
			{"router advertisement forged from a non-link-local source", 134, 255, b, a, false},
			{"redirect forged from a non-link-local source", 137, 255, b, a, false},
			{"echo request with hop limit 255", 128, 255, b, a, false},
		}
	)
	var cases []rawCase
	for _, nc := range ndCases {
		groups := []netip.Addr(nil)
		if nc.dst.IsMulticast() {
			groups = []netip.Addr{nc.dst}
		}
		cases = append(cases, rawCase{nc.name, icmp(nc.typ, nc.hop, nc.src, nc.dst, nil), groups, nc.arrive})
	}
	cases = append(cases,
		// MLDv2 report (RFC 3810 section 5.2: link-local source, hop
		// limit 1; the Router Alert option is left out, which changes
		// nothing for a firewall keyed on addresses).
		rawCase{"MLDv2 report from a link-local source", icmp(143, 1, llB, mldRouters, nil), []netip.Addr{mldRouters}, true},
		rawCase{"MLDv1 report from a link-local source", icmp(131, 1, llB, mldGroup, nil), []netip.Addr{mldGroup}, true},
		rawCase{"router solicitation from a link-local source", icmp(133, 255, llB, allRouters, nil), []netip.Addr{allRouters}, true},
		rawCase{"DHCPv6 solicit from a link-local source", udp(546, 547, 1, llB, dhcpServers, nil), []netip.Addr{dhcpServers}, true},
		// The same from a link-local address that is not x/b's: its
		// interface's guard drops them (package podguard).
		rawCase{"MLDv2 report from a forged link-local source", icmp(143, 1, forgedLL, mldRouters, nil), []netip.Addr{mldRouters}, false},
		rawCase{"router solicitation from a forged link-local source", icmp(133, 255, forgedLL, allRouters, nil), []netip.Addr{allRouters}, false},
		rawCase{"DHCPv6 solicit from a forged link-local source", udp(546, 547, 1, forgedLL, dhcpServers, nil), []netip.Addr{dhcpServers}, false},
	)

	for _, rc := range cases {
		t.Run(rc.name, func(t *testing.T) {
			nonce := make([]byte, 16)
			rand.Read(nonce)
			rc.pkt.Payload = append(rc.pkt.Payload, nonce...)
			catch, err := c.lab.CatchIPv6("x/a", rc.pkt.NextHeader, rc.groups...)
			if err != nil {
				t.Fatal(err)
			}
			defer catch.Close()
			// A few copies: the first may wait for neighbour resolution.
			ctx, cancel := context.WithTimeout(context.Background(), 1500*time.Millisecond)
			defer cancel()
			go func() {
				for i := 0; i < 3 && ctx.Err() == nil; i++ {
					c.lab.SendRawIPv6("x/b", rc.pkt)
					time.Sleep(300 * time.Millisecond)
				}
			}()
			if got := catch.Wait(ctx, nonce); got != rc.arrive {
				t.Errorf("%s -> %s next header %d type %d hop limit %d: arrived %v, want %v",
					rc.pkt.Src, rc.pkt.Dst, rc.pkt.NextHeader, rc.pkt.Payload[0], rc.pkt.HopLimit, got, rc.arrive)
			}
		})
	}
	explainAgrees(t, c)
}

// explainAgrees checks that `nftguard explain` says of neighbour discovery
// and of an echo request from x/b to x/a what TestBridgedSpecialIPv6Packets
// saw arrive, on the same manifests.
func explainAgrees(t *testing.T, c *cluster) {
	t.Helper()
	for _, q := range []struct {
		port    string
		allowed bool
	}{{"icmpv6/135", true}, {"icmpv6/136", true}, {"icmpv6/128", false}} {
		out, errOut, err := c.run("explain", "-f", c.dir, "--node-name", c.node, "--from", "x/b", "--to", "x/a", "--port", q.port)
		if err != nil {
			t.Fatalf("explain %s: %v: %s", q.port, err, errOut)
		}
		want := "verdict: denied"
		if q.allowed {
			want = "verdict: allowed"
		}
		if !strings.Contains(out, want) {
			t.Errorf("explain %s: want %q:\n%s", q.port, want, out)
		}
		if q.allowed && !strings.Contains(out, "neighbour discovery: accepted before policy") {
			t.Errorf("explain %s does not say neighbour discovery is accepted before policy:\n%s", q.port, out)
		}
	}
}

// solicitedNode is a's solicited-node multicast address (RFC 4291 2.7.1).
func solicitedNode(a netip.Addr) netip.Addr {
	b := a.As16()
	s := [16]byte{0xff, 0x02, 10: 0, 11: 1, 12: 0xff, 13: b[13], 14: b[14], 15: b[15]}
	return netip.AddrFrom16(s)
}

// TestBridgedICMPErrorOfAllowedFlow: ICMP errors about an allowed flow are
// conntrack "related" and pass by the first rule of the forward chain, also
// into a pod isolated for ingress: a UDP datagram to a closed port of x/a
// comes back as port unreachable to x/b, which may receive nothing.
func TestBridgedICMPErrorOfAllowedFlow(t *testing.T) {
	c := newCluster(t, true)
	c.addPolicy(np("x", "deny-ingress-b", spec{PodSelector: *match("pod", "b"), PolicyTypes: ingressOnly}))
	c.apply()
	if err := c.lab.FlushNeighbours(); err != nil {
		t.Fatal(err)
	}
	for _, f := range []netlab.Family{netlab.IPv4, netlab.IPv6} {
		target := netip.AddrPortFrom(c.lab.Endpoint("x/a").Addr(f), 9)
		var refused bool
		err := c.lab.Run("x/b", func() error {
			conn, err := net.Dial("udp", target.String())
			if err != nil {
				return err
			}
			defer conn.Close()
			buf := make([]byte, 16)
			for range 3 {
				conn.Write([]byte("is anyone there"))
				conn.SetReadDeadline(time.Now().Add(500 * time.Millisecond))
				if _, err := conn.Read(buf); errors.Is(err, syscall.ECONNREFUSED) {
					refused = true
					return nil
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		if !refused {
			t.Errorf("%v: the port unreachable from x/a never reached x/b", f)
		}
	}
}
