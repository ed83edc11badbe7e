package e2e

import (
	"encoding/json"
	"flag"
	"fmt"
	"net"
	"net/netip"
	"os"
	"testing"
	"time"

	"github.com/vishvananda/netlink"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nftguard/nftguard/internal/egresslat"
)

var (
	egressScale    = flag.Bool("egress.scale", false, "TestAgentEgressLatency: load -egress.pods pods (1% on n1) and -egress.policies policies first")
	egressPods     = flag.Int("egress.pods", scalePods, "TestAgentEgressLatency with -egress.scale: pods of the load")
	egressPolicies = flag.Int("egress.policies", scalePolicies, "TestAgentEgressLatency with -egress.scale: policies of the load")
	egressRuns     = flag.Int("egress.runs", 100, "TestAgentEgressLatency: measurements of each kind")
	egressOut      = flag.String("egress.out", "", "TestAgentEgressLatency: write the measurements as JSON (internal/egresslat) to this file; bench/suite's egress scenario reads it")
)

// TestAgentEgressLatency measures on n1's kernel table, through `nftguard
// run` against the real API server: (1) from a selected pod's address
// written to the API to its SNAT map entry; (2) from the node losing and
// gaining the Service's address (kube-vip failover, done over netlink in
// the node's namespace) to the pod's address held and translated again;
// (3) the pod-start guard's cost for other pods: TCP connection setup time
// from a pod with a known address to the external host, guard off and on.
// With -egress.scale the 10k-pod / 1k-policy load of TestAgent (or the
// size of -egress.pods and -egress.policies) is written first. Paths:
// routed nodes, IPv4.
func TestAgentEgressLatency(t *testing.T) {
	e := newEgressAgentLab(t)
	n := *egressRuns
	res := egresslat.Result{Runs: n}
	if *egressScale {
		e.loadScale(t, *egressPods, *egressPolicies)
		res.Pods, res.Policies, res.Nodes = *egressPods, *egressPolicies, scaleNodes
	}
	lb := netip.MustParseAddr("203.0.113.7")
	e.announce(t, "n1", lb.String())
	e.setPodLabel(e.ctx, "x/a", "app", "web")
	e.service(t, "web", map[string]string{"nftguard.io/egress": "true"}, lb.String())
	xa := e.lab.Endpoint("x/a").IPv4
	k := newKernelSets(t, e.lab.Node("n1").Path)
	in := func(set string, a netip.Addr) func() (bool, error) {
		return func() (bool, error) { w, err := k.where(a); return w[set], err }
	}
	wait := func(what string, cond func() (bool, error)) time.Duration {
		t.Helper()
		start := time.Now()
		for {
			ok, err := cond()
			if err != nil {
				t.Fatal(err)
			}
			if ok {
				return time.Since(start)
			}
			if time.Since(start) > 10*time.Second {
				t.Fatalf("%s: not in the kernel after 10s\n%s", what, e.logs())
			}
			time.Sleep(200 * time.Microsecond)
		}
	}
	wait("x/a translated", in("eg_snat4", xa))
	l := latencies{by: map[string][]time.Duration{}, pause: 30 * time.Millisecond}

	// (1) A selected pod's address appears in the API.
	for i := 0; i < n; i++ {
		ip := netip.MustParseAddr(fmt.Sprintf("10.100.0.%d", 100+i%100))
		p := latPod("x", fmt.Sprintf("lat-%d", i), "n1", "", map[string]string{"app": "web"})
		created, err := e.admin.CoreV1().Pods("x").Create(e.ctx, p, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		wait("guard on", func() (bool, error) {
			c, err := k.countIn("eg_guard4", netip.MustParsePrefix("10.0.0.0/8"))
			return c > 0, err
		})
		l.measure(t, "pod address -> SNAT", func() error { return setPodIP(e.ctx, e.admin, created, ip.String()) }, in("eg_snat4", ip), true)
		if err := e.admin.CoreV1().Pods("x").Delete(e.ctx, created.Name, now); err != nil {
			t.Fatal(err)
		}
		wait("pod gone", func() (bool, error) { ok, err := in("eg_snat4", ip)(); return !ok, err })
	}

	// (2) The node loses and regains the address.
	lo := func() netlink.Link {
		var link netlink.Link
		if err := e.lab.Run("n1", func() (err error) { link, err = netlink.LinkByName("lo"); return err }); err != nil {
			t.Fatal(err)
		}
		return link
	}()
	addr := &netlink.Addr{IPNet: &net.IPNet{IP: lb.AsSlice(), Mask: net.CIDRMask(32, 32)}}
	for i := 0; i < n; i++ {
		l.measure(t, "address lost -> held", func() error { return e.lab.Run("n1", func() error { return netlink.AddrDel(lo, addr) }) }, in("eg_hold4", xa), true)
		l.measure(t, "address gained -> SNAT", func() error { return e.lab.Run("n1", func() error { return netlink.AddrAdd(lo, addr) }) }, in("eg_snat4", xa), true)
	}
	res.AddressToSNAT, res.LostToHeld, res.GainedToSNAT = msList(l.by["pod address -> SNAT"]), msList(l.by["address lost -> held"]), msList(l.by["address gained -> SNAT"])
	for _, k := range []struct {
		name string
		d    []float64
	}{{"pod address -> SNAT", res.AddressToSNAT}, {"address lost -> held", res.LostToHeld}, {"address gained -> SNAT", res.GainedToSNAT}} {
		t.Logf("%-24s n=%d  p50 %6.1fms  p99 %6.1fms  max %6.1fms (from the write, API or netlink, to the kernel's table)", k.name, len(k.d),
			egresslat.Quantile(k.d, 0.5), egresslat.Quantile(k.d, 0.99), egresslat.Quantile(k.d, 1))
	}
	m := e.agents["n1"].metrics(t)
	changes := metricValue(m, `nftguard_event_to_kernel_seconds_count{kind="LocalAddress"}`)
	res.LocalAddressChanges = int(changes)
	res.LocalAddressAvgMs = 1000 * metricValue(m, `nftguard_event_to_kernel_seconds_sum{kind="LocalAddress"}`) / changes
	t.Logf("n1's own view, nftguard_event_to_kernel_seconds{kind=\"LocalAddress\"}: %v changes, average %.2f ms", changes, res.LocalAddressAvgMs)

	// (3) The guard's cost for a pod whose address is known: y/a's TCP
	// connection setup to ext, alternating guard off and on in rounds.
	ext := netip.AddrPortFrom(e.lab.Endpoint("ext").IPv4, 9000)
	connect := func() time.Duration {
		var d time.Duration
		if err := e.lab.Run("y/a", func() error {
			start := time.Now()
			c, err := net.DialTimeout("tcp", ext.String(), 2*time.Second)
			d = time.Since(start)
			if err != nil {
				return err
			}
			return c.Close()
		}); err != nil {
			t.Fatal(err)
		}
		return d
	}
	by := map[bool][]time.Duration{}
	for round := 0; round < 4; round++ {
		for _, on := range []bool{false, true} {
			if on {
				p := latPod("x", "pending", "n1", "", map[string]string{"app": "web"})
				if _, err := e.admin.CoreV1().Pods("x").Create(e.ctx, p, metav1.CreateOptions{}); err != nil {
					t.Fatal(err)
				}
				wait("guard on", func() (bool, error) {
					c, err := k.countIn("eg_guard4", netip.MustParsePrefix("10.0.0.0/8"))
					return c > 0, err
				})
			}
			for i := 0; i < n/2+1; i++ {
				by[on] = append(by[on], connect())
			}
			if on {
				if err := e.admin.CoreV1().Pods("x").Delete(e.ctx, "pending", now); err != nil {
					t.Fatal(err)
				}
				wait("guard off", func() (bool, error) {
					c, err := k.countIn("eg_guard4", netip.MustParsePrefix("10.0.0.0/8"))
					return c == 0, err
				})
			}
		}
	}
	res.ConnectGuardOff, res.ConnectGuardOn = msList(by[false]), msList(by[true])
	for _, k := range []struct {
		on bool
		d  []float64
	}{{false, res.ConnectGuardOff}, {true, res.ConnectGuardOn}} {
		t.Logf("y/a -> ext TCP connect, guard on=%v: n=%d p50 %.3fms p99 %.3fms", k.on, len(k.d), egresslat.Quantile(k.d, 0.5), egresslat.Quantile(k.d, 0.99))
	}
	if *egressOut != "" {
		b, err := json.Marshal(res)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(*egressOut, b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// msList is ds in milliseconds (µs resolution), in order.
func msList(ds []time.Duration) []float64 {
	out := make([]float64, len(ds))
	for i, d := range ds {
		out[i] = ms(d)
	}
	return out
}
