package e2e

import (
	"flag"
	"fmt"
	"net"
	"net/netip"
	"sort"
	"testing"
	"time"

	"github.com/vishvananda/netlink"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

var (
	egressScale = flag.Bool("egress.scale", false, "TestAgentEgressLatency: load 10k pods (100 on n1) and 1k policies first")
	egressRuns  = flag.Int("egress.runs", 100, "TestAgentEgressLatency: measurements of each kind")
)

// TestAgentEgressLatency measures on n1's kernel table, through `nftguard
// run` against the real API server: (1) from a selected pod's address
// written to the API to its SNAT map entry; (2) from the node losing and
// gaining the Service's address (kube-vip failover, done over netlink in
// the node's namespace) to the pod's address held and translated again;
// (3) the pod-start guard's cost for other pods: TCP connection setup time
// from a pod with a known address to the external host, guard off and on.
// With -egress.scale the 10k-pod / 1k-policy load of TestAgent is written
// first.
func TestAgentEgressLatency(t *testing.T) {
	e := newEgressAgentLab(t)
	if *egressScale {
		e.loadScale(t)
	}
	n := *egressRuns
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
	for _, kind := range []string{"pod address -> SNAT", "address lost -> held", "address gained -> SNAT"} {
		d := append([]time.Duration(nil), l.by[kind]...)
		sort.Slice(d, func(i, j int) bool { return d[i] < d[j] })
		t.Logf("%-24s n=%d  p50 %6.1fms  p99 %6.1fms  max %6.1fms (from the write, API or netlink, to the kernel's table)", kind, len(d),
			ms(d[len(d)/2]), ms(d[len(d)*99/100]), ms(d[len(d)-1]))
	}
	m := e.agents["n1"].metrics(t)
	t.Logf("n1's own view, nftguard_event_to_kernel_seconds{kind=\"LocalAddress\"}: %v changes, average %.2f ms",
		metricValue(m, `nftguard_event_to_kernel_seconds_count{kind="LocalAddress"}`),
		1000*metricValue(m, `nftguard_event_to_kernel_seconds_sum{kind="LocalAddress"}`)/metricValue(m, `nftguard_event_to_kernel_seconds_count{kind="LocalAddress"}`))

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
	for _, on := range []bool{false, true} {
		d := by[on]
		sort.Slice(d, func(i, j int) bool { return d[i] < d[j] })
		t.Logf("y/a -> ext TCP connect, guard on=%v: n=%d p50 %.3fms p99 %.3fms", on, len(d), ms(d[len(d)/2]), ms(d[len(d)*99/100]))
	}
}
