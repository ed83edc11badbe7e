package e2e

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"net"
	"net/netip"
	"os"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nftguard/nftguard/internal/kubetest"
	"github.com/nftguard/nftguard/internal/netlab"
	"github.com/nftguard/nftguard/internal/testns"
)

// now deletes a pod at once, as its kubelet confirms after stopping it
// (the lab has no kubelet: a graceful deletion would never end).
var now = metav1.DeleteOptions{GracePeriodSeconds: new(int64)}

var egressStarts = flag.Int("egress.starts", 100, "TestAgentEgress: pod starts in the pod-start test")

// egressAgentLab is two lab nodes with agents (`nftguard run`) against the
// real API server, an external host "ext" behind n1 that answers each TCP
// connection with the source it saw and counts UDP datagrams by source,
// and a foreign masquerade on n1 for pod traffic leaving towards ext (what
// a CNI or kube-proxy would install). The load-balancer addresses are put
// on a node's lo as kube-vip puts them on the leader; the other node gets
// a route to them through the leader, as ARP would send the replies there.
type egressAgentLab struct {
	*agentLab
	ctx  context.Context
	udp  *udpCounter
	masq map[netlab.Family]string
}

var egressAgentTopology = []netlab.NodeSpec{
	{Name: "n1", Pods: []string{"x/a", "y/a", "x/s"}},
	{Name: "n2", Pods: []string{"x/b", "y/b"}},
}

func newEgressAgentLab(t *testing.T, extra ...string) *egressAgentLab {
	return newEgressAgentLabWith(t, agentLabOptions{args: extra})
}

// newEgressAgentLabWith builds the lab with opts' API server and pod
// attachment (dualStack, bridged); opts.args are added to the agents'
// egress flags.
func newEgressAgentLabWith(t *testing.T, opts agentLabOptions) *egressAgentLab {
	args := append([]string{"--min-sync-interval", "20ms", "--max-sync-interval", "500ms", "--service-cidr", kubetest.ServiceRangeV4}, opts.args...)
	if opts.dualStack {
		args = append(args, "--service-cidr", kubetest.ServiceRangeV6)
	}
	for i := range egressAgentTopology {
		args = append(args, "--cluster-cidr", fmt.Sprintf("10.%d.0.0/24", 100+i), "--cluster-cidr", fmt.Sprintf("fd00:10:%d::/64", 100+i))
	}
	opts.topology, opts.external, opts.args = egressAgentTopology, []string{"ext"}, args
	a := newAgentLabWith(t, opts)
	e := &egressAgentLab{agentLab: a, ctx: context.Background(), masq: map[netlab.Family]string{}}
	startRecorder(t, a.lab, "ext", 9000)
	e.udp = startUDPCounter(t, a.lab, "ext", 9001)
	n1 := e.ns("n1")
	veth := a.lab.Endpoint("ext").HostVeth
	for _, n := range a.lab.Nodes {
		n1.MustExec(t, "", "iptables-nft", "-t", "nat", "-A", "POSTROUTING", "-s", n.PodCIDRv4.String(), "-o", veth, "-j", "MASQUERADE")
		n1.MustExec(t, "", "ip6tables-nft", "-t", "nat", "-A", "POSTROUTING", "-s", n.PodCIDRv6.String(), "-o", veth, "-j", "MASQUERADE")
	}
	ext := a.lab.Endpoint("ext")
	// The node's address towards ext: the first address of ext's subnet.
	e.masq[netlab.IPv4] = netip.PrefixFrom(ext.IPv4, 24).Masked().Addr().Next().String()
	e.masq[netlab.IPv6] = netip.PrefixFrom(ext.IPv6, 64).Masked().Addr().Next().String()
	return e
}

func (e *egressAgentLab) ns(node string) *testns.NS {
	n := e.lab.Node(node)
	return &testns.NS{Name: n.NetNS, Path: n.Path}
}

// announce puts the load-balancer addresses on node's lo and takes them off
// every other node, which routes them to node instead: kube-vip's leader
// moving. It returns when the kernels have the change.
func (e *egressAgentLab) announce(t *testing.T, node string, addrs ...string) {
	t.Helper()
	holder := e.lab.Node(node)
	for _, n := range e.lab.Nodes {
		ns := e.ns(n.Name)
		for _, a := range addrs {
			bits, via := "/32", holder.IPv4.String()
			if strings.Contains(a, ":") {
				bits, via = "/128", holder.IPv6.String()
			}
			// Either may be absent: errors are expected and ignored.
			ns.Exec("", "ip", "addr", "del", a+bits, "dev", "lo")
			ns.Exec("", "ip", "route", "del", a+bits)
			if n.Name == node {
				ns.MustExec(t, "", "ip", "addr", "add", a+bits, "dev", "lo")
			} else {
				ns.MustExec(t, "", "ip", "route", "add", a+bits, "via", via)
			}
		}
	}
}

// withdraw takes addresses off every node.
func (e *egressAgentLab) withdraw(addrs ...string) {
	for _, n := range e.lab.Nodes {
		for _, a := range addrs {
			bits := "/32"
			if strings.Contains(a, ":") {
				bits = "/128"
			}
			e.ns(n.Name).Exec("", "ip", "addr", "del", a+bits, "dev", "lo")
			e.ns(n.Name).Exec("", "ip", "route", "del", a+bits)
		}
	}
}

// source connects from pod to ext over TCP and returns the source the
// external host saw ("" when nothing got through within a second).
func (e *egressAgentLab) source(t *testing.T, pod string, f netlab.Family) string {
	t.Helper()
	return e.sourceAt(t, pod, netip.AddrPortFrom(e.lab.Endpoint("ext").Addr(f), 9000))
}

// sourceAt connects from pod to a source recorder at dst and returns the
// source it saw ("" when nothing got through within a second).
func (e *egressAgentLab) sourceAt(t *testing.T, pod string, dst netip.AddrPort) string {
	t.Helper()
	var seen string
	err := e.lab.Run(pod, func() error {
		d := net.Dialer{Timeout: time.Second}
		c, err := d.Dial("tcp", dst.String())
		if err != nil {
			return nil
		}
		defer c.Close()
		buf := make([]byte, 64)
		c.SetReadDeadline(time.Now().Add(2 * time.Second))
		n, _ := c.Read(buf)
		seen = strings.TrimSpace(string(buf[:n]))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return seen
}

// expect waits (up to 10 s) until pod's traffic to ext arrives from want
// ("" for: does not arrive), and returns how long that took.
func (e *egressAgentLab) expect(t *testing.T, step, pod string, f netlab.Family, want string) time.Duration {
	t.Helper()
	start := time.Now()
	var got string
	for time.Since(start) < 10*time.Second {
		if got = e.source(t, pod, f); got == want {
			return time.Since(start)
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Errorf("%s: %s -> ext (%v) arrived from %q, want %q\n%s", step, pod, f, got, want, e.logs())
	return 0
}

// never checks, a few times over a second, that pod's traffic to ext
// never arrives from anything but want.
func (e *egressAgentLab) steady(t *testing.T, step, pod string, f netlab.Family, want string) {
	t.Helper()
	for i := 0; i < 3; i++ {
		if got := e.source(t, pod, f); got != want {
			t.Errorf("%s: %s -> ext (%v) arrived from %q, want %q", step, pod, f, got, want)
			return
		}
	}
}

func (e *egressAgentLab) service(t *testing.T, name string, ann map[string]string, lb ...string) *corev1.Service {
	t.Helper()
	s, err := e.admin.CoreV1().Services("x").Create(e.ctx, &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: name, Annotations: ann},
		Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer, Selector: map[string]string{"app": "web"},
			Ports: []corev1.ServicePort{{Port: 80}}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return e.setLB(t, s, lb...)
}

func (e *egressAgentLab) setLB(t *testing.T, s *corev1.Service, lb ...string) *corev1.Service {
	t.Helper()
	s, err := e.admin.CoreV1().Services(s.Namespace).Get(e.ctx, s.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	s.Status.LoadBalancer.Ingress = nil
	for _, ip := range lb {
		s.Status.LoadBalancer.Ingress = append(s.Status.LoadBalancer.Ingress, corev1.LoadBalancerIngress{IP: ip})
	}
	out, err := e.admin.CoreV1().Services(s.Namespace).UpdateStatus(e.ctx, s, metav1.UpdateOptions{})
	if err != nil {
		t.Fatalf("status of Service %s: %v", s.Name, err)
	}
	return out
}

// warning waits for a Warning Event about Service x/name that contains
// text, and returns its message.
func (e *egressAgentLab) warning(t *testing.T, name, text string) string {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	var msgs []string
	for time.Now().Before(deadline) {
		l, err := e.admin.CoreV1().Events("x").List(e.ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=" + name})
		if err != nil {
			t.Fatal(err)
		}
		msgs = msgs[:0]
		for _, ev := range l.Items {
			if ev.Type == corev1.EventTypeWarning && ev.InvolvedObject.Kind == "Service" {
				msgs = append(msgs, ev.Message)
				if strings.Contains(ev.Message, text) {
					return ev.Message
				}
			}
		}
		time.Sleep(200 * time.Millisecond)
	}
	t.Errorf("no Warning Event about Service x/%s with %q; events: %q", name, text, msgs)
	return ""
}

// TestAgentEgress walks egress SNAT through `nftguard run` on two nodes
// against the real API server, with real TCP connections to an external
// host that reports the source it saw: a dual-stack Service's address on
// one node, moved to the other and back (kube-vip failover), changed; a
// pod recreated with a new address; two Services selecting one pod;
// annotation removed and Service deleted; then pod starts counted at the
// external side.
func TestAgentEgress(t *testing.T) {
	e := newEgressAgentLab(t)
	v4, v6 := netlab.IPv4, netlab.IPv6
	lb4, lb6 := "203.0.113.7", "2001:db8::7"
	e.setPodLabel(e.ctx, "x/a", "app", "web")
	e.setPodLabel(e.ctx, "x/b", "app", "web")

	e.expect(t, "no egress Service", "x/a", v4, e.masq[v4])
	e.expect(t, "no egress Service v6", "x/a", v6, e.masq[v6])

	e.announce(t, "n1", lb4, lb6)
	web := e.service(t, "web", map[string]string{"nftguard.io/egress": "true", "nftguard.io/egress-ipv6": "true"}, lb4, lb6)
	t.Run("SNAT on create, only where the address lives", func(t *testing.T) {
		e.expect(t, "x/a on the leader", "x/a", v4, lb4)
		e.expect(t, "x/a on the leader v6", "x/a", v6, lb6)
		e.steady(t, "x/b elsewhere: held", "x/b", v4, "")
		e.steady(t, "x/b elsewhere: held v6", "x/b", v6, "")
		e.steady(t, "y/a not selected", "y/a", v4, e.masq[v4])
		e.warning(t, "web", "is not on this node")
		m := e.agents["n2"].metrics(t)
		if v := metricValue(m, `nftguard_egress_held_addresses{namespace="x",reason="not_local",service="web"}`); v != 2 {
			t.Errorf("n2 held addresses = %v, want 2 (x/b's IPv4 and IPv6)", v)
		}
		// Each probe above is one TCP connection of a few packets each
		// way; only x/a's outgoing ones are translated here.
		m = e.agents["n1"].metrics(t)
		pk := metricValue(m, `nftguard_egress_translated_packets_total{namespace="x",service="web"}`)
		by := metricValue(m, `nftguard_egress_translated_bytes_total{namespace="x",service="web"}`)
		if pk < 4 || by < 40*pk {
			t.Errorf("n1 translated packets %v bytes %v: want the probes' packets counted", pk, by)
		}
		t.Logf("n1 counted %v packets, %v bytes translated for x/web", pk, by)
		m = e.agents["n2"].metrics(t)
		if v := metricValue(m, `nftguard_egress_translated_packets_total{namespace="x",service="web"}`); v > 0 {
			t.Errorf("n2 counted %v packets translated, but holds them", v)
		}
		// x/b's probes: each connection's SYN and its retransmission.
		if v := metricValue(m, `nftguard_egress_dropped_packets_total{reason="held"}`); v < 6 {
			t.Errorf("n2 counted %v held packets dropped, want x/b's SYNs", v)
		}
	})

	t.Run("node masquerade by annotation", func(t *testing.T) {
		set := func(v string) {
			s, err := e.admin.CoreV1().Services("x").Get(e.ctx, "web", metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if v == "" {
				delete(s.Annotations, "nftguard.io/egress-node-masquerade")
			} else {
				s.Annotations["nftguard.io/egress-node-masquerade"] = v
			}
			if _, err := e.admin.CoreV1().Services("x").Update(e.ctx, s, metav1.UpdateOptions{}); err != nil {
				t.Fatal(err)
			}
		}
		// n2 has no masquerade of its own: x/b's traffic is masqueraded
		// by n1, which it is routed through.
		set("true")
		e.expect(t, "elsewhere, opted into node masquerade", "x/b", v4, e.masq[v4])
		e.steady(t, "the leader still translates", "x/a", v4, lb4)
		e.warning(t, "web", "left to the node's masquerade")
		set("")
		e.expect(t, "opt-in removed: held again", "x/b", v4, "")
	})

	t.Run("address moved to the other node and back", func(t *testing.T) {
		start := time.Now()
		e.announce(t, "n2", lb4, lb6)
		d := e.expect(t, "x/b on the new leader", "x/b", v4, lb4)
		t.Logf("failover to n2: x/b's first connection through with the address %v after the move (probes every 20ms, each a TCP connection)", d.Round(time.Millisecond))
		e.expect(t, "x/b on the new leader v6", "x/b", v6, lb6)
		e.expect(t, "x/a on the old leader: held", "x/a", v4, "")
		e.announce(t, "n1", lb4, lb6)
		e.expect(t, "x/a back", "x/a", v4, lb4)
		e.expect(t, "x/b held again", "x/b", v4, "")
		t.Logf("failover and back in %v", time.Since(start).Round(time.Millisecond))
		for _, n := range []string{"n1", "n2"} {
			m := e.agents[n].metrics(t)
			t.Logf("%s: LocalAddress to kernel: %v changes, %.1f ms on average", n,
				metricValue(m, `nftguard_event_to_kernel_seconds_count{kind="LocalAddress"}`),
				1000*metricValue(m, `nftguard_event_to_kernel_seconds_sum{kind="LocalAddress"}`)/metricValue(m, `nftguard_event_to_kernel_seconds_count{kind="LocalAddress"}`))
		}
	})

	t.Run("Service address changed", func(t *testing.T) {
		e.announce(t, "n1", "203.0.113.8")
		web = e.setLB(t, web, "203.0.113.8", lb6)
		e.expect(t, "new address", "x/a", v4, "203.0.113.8")
		e.withdraw(lb4)
		e.steady(t, "new address, old one gone", "x/a", v4, "203.0.113.8")
		e.expect(t, "v6 unchanged", "x/a", v6, lb6)
		lb4 = "203.0.113.8"
	})

	t.Run("pod recreated with a new address", func(t *testing.T) {
		// x/a's pod object goes; a new pod object gets x/s's addresses
		// (both: a family the Pod does not list is not the pod's own,
		// and never leaves its interface).
		if err := e.admin.CoreV1().Pods("x").Delete(e.ctx, "s", now); err != nil {
			t.Fatal(err)
		}
		if err := e.admin.CoreV1().Pods("x").Delete(e.ctx, "a", now); err != nil {
			t.Fatal(err)
		}
		e.expect(t, "old address no longer translated", "x/a", v4, e.masq[v4])
		s := e.lab.Endpoint("x/s")
		p := latPod("x", "a-2", "n1", "", map[string]string{"app": "web"})
		if err := createPodWithIP(e.ctx, e.admin, p, s.IPv4.String(), s.IPv6.String()); err != nil {
			t.Fatal(err)
		}
		e.expect(t, "new pod, new address", "x/s", v4, lb4)
	})

	t.Run("two Services select one pod: the older wins", func(t *testing.T) {
		e.announce(t, "n1", lb4, "203.0.113.9", lb6)
		e.service(t, "newer", map[string]string{"nftguard.io/egress": "true"}, "203.0.113.9")
		e.warning(t, "newer", "already translated by the older Service x/web")
		e.steady(t, "older wins", "x/s", v4, lb4)
		// A long-lived UDP flow (one socket) keeps its conntrack entry:
		// it must move to the other Service's address when web stops
		// translating, and to the node's masquerade when that Service
		// goes, although both addresses stay on the node.
		e.udp.reset()
		stopFlow := e.udpFlow(t, "x/s")
		defer stopFlow()
		waitUDP(t, e.udp, lb4, "the flow before")
		web, err := e.admin.CoreV1().Services("x").Get(e.ctx, "web", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		delete(web.Annotations, "nftguard.io/egress")
		if _, err = e.admin.CoreV1().Services("x").Update(e.ctx, web, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		e.expect(t, "annotation removed: the other Service", "x/s", v4, "203.0.113.9")
		waitUDP(t, e.udp, "203.0.113.9", "the long-lived flow after web stopped translating")
		e.expect(t, "annotation removed: IPv6 no longer claimed", "x/s", v6, e.masq[v6])
		if err := e.admin.CoreV1().Services("x").Delete(e.ctx, "newer", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		e.expect(t, "Service deleted: node masquerade", "x/s", v4, e.masq[v4])
		// 203.0.113.9 is still on the node, yet the flow's translation
		// to it was ours: it goes, and the flow is masqueraded.
		waitUDP(t, e.udp, e.masq[v4], "the long-lived flow after its Service was deleted")
		stopFlow()
	})

	t.Run("IPv6 address only", func(t *testing.T) {
		// The lab's API server is single-stack IPv4, so the Service's
		// spec.ipFamilies is [IPv4]: with only an IPv6 address, its
		// IPv6 traffic is translated and its IPv4 traffic held (the
		// family it claims has no address), never masqueraded.
		e.announce(t, "n1", "2001:db8::6")
		s, err := e.admin.CoreV1().Services("y").Create(e.ctx, &corev1.Service{
			ObjectMeta: metav1.ObjectMeta{Name: "v6", Annotations: map[string]string{"nftguard.io/egress": "true", "nftguard.io/egress-ipv6": "true"}},
			Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer, Selector: map[string]string{"pod": "a"},
				Ports: []corev1.ServicePort{{Port: 80}}},
		}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		s.Status.LoadBalancer.Ingress = []corev1.LoadBalancerIngress{{IP: "2001:db8::6"}}
		if _, err := e.admin.CoreV1().Services("y").UpdateStatus(e.ctx, s, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		e.expect(t, "IPv6 translated", "y/a", v6, "2001:db8::6")
		e.expect(t, "IPv4 held", "y/a", v4, "")
		if err := e.admin.CoreV1().Services("y").Delete(e.ctx, "v6", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		e.expect(t, "Service deleted", "y/a", v6, e.masq[v6])
	})

	t.Run("pod start", func(t *testing.T) {
		web, err := e.admin.CoreV1().Services("x").Get(e.ctx, "web", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		web.Annotations["nftguard.io/egress"] = "true"
		if _, err = e.admin.CoreV1().Services("x").Update(e.ctx, web, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		e.expect(t, "egress again", "x/s", v4, lb4)
		e.podStarts(t, *egressStarts, lb4, "a-2", 100*time.Millisecond, e.masq[v4])
		// The datagrams sent before each pod's address was known.
		if v := metricValue(e.agents["n1"].metrics(t), `nftguard_egress_dropped_packets_total{reason="pod_start_guard"}`); v < float64(*egressStarts) {
			t.Errorf("n1 counted %v packets dropped by the pod-start guard, want at least one per start", v)
		} else {
			t.Logf("n1 dropped %v packets from pod addresses not known yet", v)
		}
	})
}

// TestAgentEgressGuardAlways: with --egress-pod-start-guard always, a pod
// that sends from the instant its object is created, before its agent can
// have learned of it, still never leaves with another address.
func TestAgentEgressGuardAlways(t *testing.T) {
	e := newEgressAgentLab(t, "--egress-pod-start-guard", "always")
	lb := "203.0.113.7"
	e.announce(t, "n1", lb)
	e.setPodLabel(e.ctx, "x/s", "app", "web")
	e.service(t, "web", map[string]string{"nftguard.io/egress": "true"}, lb)
	e.expect(t, "translated", "x/s", netlab.IPv4, lb)
	// With the guard always on, the freed address is held, not masqueraded.
	e.podStarts(t, *egressStarts/5, lb, "s", 0, "")
}

// podStarts starts a selected pod on n1 n times, after deleting the pod
// object prev. Each start is a new pod object, created without an address,
// as the scheduler's binding leaves it; after sandboxDelay (0: at once;
// otherwise also not before the agent's pod-start guard is in force, see
// below) the pod's network exists and it sends a UDP
// datagram to ext every millisecond from its first instant; statusDelay
// later the kubelet writes its address to the API; sending goes on until
// 20 datagrams have arrived with the Service's address. Every datagram
// that arrives is counted by source at ext: none may come from another.
// The pod is x/s's namespace each time (same address, a new socket and so
// a new source port, a new pod object); the previous pod object is deleted
// first, and the next start waits until the address leaves with freed
// (the node's masquerade, or "": held).
func (e *egressAgentLab) podStarts(t *testing.T, n int, lb, prev string, sandboxDelay time.Duration, freed string) {
	const statusDelay = 50 * time.Millisecond
	s := e.lab.Endpoint("x/s")
	ext := e.lab.Endpoint("ext").IPv4
	var held []time.Duration
	leaky := 0 // starts with a datagram from another source
	late, worstOn := 0, time.Duration(0)
	for i := 0; i < n; i++ {
		if err := e.admin.CoreV1().Pods("x").Delete(e.ctx, prev, now); err != nil {
			t.Fatal(err)
		}
		// The address is free again when it leaves the cluster untranslated.
		e.expect(t, "previous pod gone", "x/s", netlab.IPv4, freed)
		e.udp.reset()
		name := fmt.Sprintf("start-%d", i)
		p := latPod("x", name, "n1", "", map[string]string{"app": "web"})
		p.Status = corev1.PodStatus{}
		createAt := time.Now()
		created, err := e.admin.CoreV1().Pods("x").Create(e.ctx, p, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if sandboxDelay > 0 {
			// The default guard is on from the sync that learns of the
			// pod object, which races a pod that sends at once (the
			// operations docs say so; --egress-pod-start-guard always closes
			// it, TestAgentEgressGuardAlways): the network comes up
			// once that sync is in force, or after sandboxDelay if the
			// agent is quicker, as a sandbox takes its time. Under
			// load the sync can take longer than sandboxDelay, which
			// is counted, never a leak.
			for metricValue(e.agents["n1"].metrics(t), "nftguard_egress_pending_pods") < 1 {
				if time.Since(createAt) > 10*time.Second {
					t.Fatalf("start %d: the guard was not on 10 s after the pod object was created\n%s", i, e.logs())
				}
				time.Sleep(2 * time.Millisecond)
			}
			if on := time.Since(createAt); on > sandboxDelay {
				late++
				worstOn = max(worstOn, on)
			}
		}
		time.Sleep(sandboxDelay - time.Since(createAt))
		stop := make(chan struct{})
		var wg sync.WaitGroup
		var first time.Time
		wg.Add(1)
		go func() {
			defer wg.Done()
			e.lab.Run("x/s", func() error {
				c, err := net.Dial("udp4", netip.AddrPortFrom(ext, 9001).String())
				if err != nil {
					return err
				}
				defer c.Close()
				first = time.Now()
				t := time.NewTicker(time.Millisecond)
				defer t.Stop()
				for {
					c.Write([]byte("x"))
					select {
					case <-stop:
						return nil
					case <-t.C:
					}
				}
			})
		}()
		time.Sleep(statusDelay)
		statusAt := time.Now()
		created.Status.Phase = corev1.PodRunning
		created.Status.PodIP = s.IPv4.String()
		created.Status.PodIPs = []corev1.PodIP{{IP: s.IPv4.String()}}
		if _, err := e.admin.CoreV1().Pods("x").UpdateStatus(e.ctx, created, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		deadline := time.Now().Add(10 * time.Second)
		for e.udp.count(lb) < 20 && time.Now().Before(deadline) {
			time.Sleep(2 * time.Millisecond)
		}
		close(stop)
		wg.Wait()
		arrived := e.udp.firstFrom(lb)
		if arrived.IsZero() {
			t.Fatalf("start %d: nothing arrived with %s within 10s\n%s", i, lb, e.logs())
		}
		held = append(held, arrived.Sub(first))
		if other := e.udp.others(lb); len(other) > 0 {
			leaky++
			t.Errorf("start %d: datagrams arrived from %v, not only from %s\n%s", i, other, lb,
				e.startTimeline(createAt, first, statusAt))
		}
		prev = name
	}
	sort.Slice(held, func(i, j int) bool { return held[i] < held[j] })
	t.Logf("%d pod starts, %d with datagrams from another source than %s; first datagram sent to first one through with it: p50 %v, p99 %v, max %v (sending starts %v after the pod object, its address is written %v later)",
		n, leaky, lb, held[len(held)/2].Round(time.Millisecond), held[len(held)*99/100].Round(time.Millisecond), held[len(held)-1].Round(time.Millisecond), sandboxDelay, statusDelay)
	if sandboxDelay > 0 {
		t.Logf("the guard was on later than %v after the pod object in %d of %d starts (latest %v); sending waited for it", sandboxDelay, late, n, worstOn.Round(time.Millisecond))
	}
}

// startTimeline describes one pod start for a failure: when the pod
// object was created, when its first datagram was sent, when its address
// was written, when the first and last datagram of each source arrived,
// and what n1's agent logged meanwhile (its syncs that changed the table),
// all relative to the creation.
func (e *egressAgentLab) startTimeline(created, first, status time.Time) string {
	rel := func(at time.Time) string { return fmt.Sprintf("%+.1fms", float64(at.Sub(created).Microseconds())/1000) }
	var b strings.Builder
	fmt.Fprintf(&b, "pod object created at %s; first datagram sent %s, address written %s\n",
		created.Format("15:04:05.000000"), rel(first), rel(status))
	e.udp.mu.Lock()
	for src, n := range e.udp.by {
		fmt.Fprintf(&b, "  %d datagrams from %s: first arrived %s, last %s\n", n, src, rel(e.udp.first[src]), rel(e.udp.last[src]))
	}
	e.udp.mu.Unlock()
	if ag := e.agents["n1"]; ag != nil {
		data, err := os.ReadFile(ag.logPath)
		if err != nil {
			return b.String() + err.Error()
		}
		for _, line := range strings.Split(string(data), "\n") {
			var rec struct {
				Time time.Time `json:"time"`
			}
			if json.Unmarshal([]byte(line), &rec) != nil || rec.Time.Before(created.Add(-time.Second)) {
				continue
			}
			fmt.Fprintf(&b, "  n1 agent %s: %s\n", rel(rec.Time), line)
		}
	}
	return b.String()
}

// udpFlow sends a UDP datagram to ext:9001 every 5 ms from one socket of
// pod, until the returned func is called.
func (e *egressAgentLab) udpFlow(t *testing.T, pod string) func() {
	stop := make(chan struct{})
	done := make(chan struct{})
	ext := e.lab.Endpoint("ext").IPv4
	go func() {
		defer close(done)
		e.lab.Run(pod, func() error {
			c, err := net.Dial("udp4", netip.AddrPortFrom(ext, 9001).String())
			if err != nil {
				return err
			}
			defer c.Close()
			tk := time.NewTicker(5 * time.Millisecond)
			defer tk.Stop()
			for {
				c.Write([]byte("f"))
				select {
				case <-stop:
					return nil
				case <-tk.C:
				}
			}
		})
	}()
	var once sync.Once
	return func() { once.Do(func() { close(stop); <-done }) }
}

// waitUDP waits up to 5 s for a datagram from src at the counter.
func waitUDP(t *testing.T, u *udpCounter, src, what string) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for u.count(src) == 0 {
		if time.Now().After(deadline) {
			t.Errorf("%s: no datagram from %s within 5s (seen: %v)", what, src, u.others(""))
			return
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// udpCounter counts the datagrams arriving at a host, by source address,
// and remembers when the first one from each arrived.
type udpCounter struct {
	mu    sync.Mutex
	by    map[string]int
	first map[string]time.Time
	last  map[string]time.Time
}

func startUDPCounter(t *testing.T, lab *netlab.Lab, host string, port int) *udpCounter {
	u := &udpCounter{by: map[string]int{}, first: map[string]time.Time{}, last: map[string]time.Time{}}
	var pc net.PacketConn
	err := lab.Run(host, func() error {
		var err error
		pc, err = net.ListenPacket("udp", fmt.Sprintf(":%d", port))
		return err
	})
	if err != nil {
		t.Fatalf("listen in %s: %v", host, err)
	}
	t.Cleanup(func() { pc.Close() })
	go func() {
		buf := make([]byte, 64)
		for {
			_, from, err := pc.ReadFrom(buf)
			if err != nil {
				return
			}
			ap, _ := netip.ParseAddrPort(from.String())
			src := ap.Addr().Unmap().String()
			u.mu.Lock()
			at := time.Now()
			if u.by[src] == 0 {
				u.first[src] = at
			}
			u.last[src] = at
			u.by[src]++
			u.mu.Unlock()
		}
	}()
	return u
}

func (u *udpCounter) reset() {
	u.mu.Lock()
	u.by, u.first, u.last = map[string]int{}, map[string]time.Time{}, map[string]time.Time{}
	u.mu.Unlock()
}

func (u *udpCounter) count(src string) int {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.by[src]
}

func (u *udpCounter) firstFrom(src string) time.Time {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.first[src]
}

// others are the counts of every source but src.
func (u *udpCounter) others(src string) map[string]int {
	u.mu.Lock()
	defer u.mu.Unlock()
	out := map[string]int{}
	for s, n := range u.by {
		if s != src {
			out[s] = n
		}
	}
	return out
}
