package e2e

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/miekg/dns"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	cnpclient "sigs.k8s.io/network-policy-api/pkg/client/clientset/versioned"

	"sigs.k8s.io/network-policy-api/apis/v1beta1"

	"github.com/nftguard/nftguard/internal/dnslab"
	"github.com/nftguard/nftguard/internal/kubetest"
	"github.com/nftguard/nftguard/internal/nfnl"
)

// TestAgentDomainNames runs ClusterNetworkPolicy domainNames through
// `nftguard run` on three routed nodes against the real API server (the
// experimental CRD), IPv4 and IPv6. The cluster DNS is a real DNS server
// on an external host, reached at the ClusterIPs of a dual-stack Service
// kube-system/kube-dns (the lab has no kube-proxy, so the host holds those
// addresses itself and every node routes them to it): the agents find it
// through the Service, as in a cluster. Pods on the node next to the DNS
// server and on the other nodes (whose queries cross the switch before
// the redirect sends them to their own node's forwarder) resolve a fresh
// name and connect at once; an answer one pod received opens nothing for
// another; a pod no rule selects is left alone; when an agent is killed
// its pods' DNS goes to the cluster DNS directly within the heartbeat's
// timeout and domain rules open nothing new, and a restarted agent
// redirects again.
func TestAgentDomainNames(t *testing.T) {
	a := newAgentLabWith(t, agentLabOptions{external: []string{"dns", "ext"}, dualStack: true, args: []string{
		"--min-sync-interval", "50ms", "--max-sync-interval", "500ms", "--crd-check-interval", "1s"}})
	ctx := context.Background()
	adminCfg := a.srv.Config(kubetest.Admin)
	if err := kubetest.InstallCNPCRD(ctx, adminCfg, "experimental"); err != nil {
		t.Fatal(err)
	}
	a.waitMetric(t, "nftguard_cluster_network_policy_crd_served", 1, 30*time.Second)

	// kube-dns, and the addresses behind it.
	svc, err := a.admin.CoreV1().Services("kube-system").Create(ctx, &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "kube-dns"},
		Spec: corev1.ServiceSpec{
			IPFamilyPolicy: ptr(corev1.IPFamilyPolicyRequireDualStack),
			IPFamilies:     []corev1.IPFamily{corev1.IPv4Protocol, corev1.IPv6Protocol},
			Ports:          []corev1.ServicePort{{Name: "dns", Port: 53, Protocol: corev1.ProtocolUDP}, {Name: "dns-tcp", Port: 53, Protocol: corev1.ProtocolTCP}},
		},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var clusterDNS [2]netip.Addr
	for _, ip := range svc.Spec.ClusterIPs {
		a := netip.MustParseAddr(ip)
		clusterDNS[b2i(a.Is6())] = a
	}
	if !clusterDNS[0].IsValid() || !clusterDNS[1].IsValid() {
		t.Fatalf("kube-dns ClusterIPs %v", svc.Spec.ClusterIPs)
	}
	dnsEP, ext := a.lab.Endpoint("dns"), a.lab.Endpoint("ext")
	n1 := a.lab.Node("n1")
	cmds := [][]string{
		{dnsEP.NetNS, "ip", "addr", "add", clusterDNS[0].String() + "/32", "dev", "lo"},
		{dnsEP.NetNS, "ip", "addr", "add", clusterDNS[1].String() + "/128", "dev", "lo"},
		{ext.NetNS, "ip", "addr", "add", "198.18.0.0/16", "dev", "lo"},
		{ext.NetNS, "ip", "-6", "route", "add", "local", "2001:db8:18::/112", "dev", "lo"},
		{n1.NetNS, "ip", "route", "add", clusterDNS[0].String(), "via", dnsEP.IPv4.String()},
		{n1.NetNS, "ip", "-6", "route", "add", clusterDNS[1].String(), "via", dnsEP.IPv6.String()},
		{n1.NetNS, "ip", "route", "add", "198.18.0.0/16", "via", ext.IPv4.String()},
		{n1.NetNS, "ip", "-6", "route", "add", "2001:db8:18::/112", "via", ext.IPv6.String()},
	}
	for _, n := range []string{"n2", "n3"} {
		ns := a.lab.Node(n).NetNS
		cmds = append(cmds,
			[]string{ns, "ip", "route", "add", clusterDNS[0].String(), "via", n1.IPv4.String()},
			[]string{ns, "ip", "-6", "route", "add", clusterDNS[1].String(), "via", n1.IPv6.String()},
			[]string{ns, "ip", "route", "add", "198.18.0.0/16", "via", n1.IPv4.String()},
			[]string{ns, "ip", "-6", "route", "add", "2001:db8:18::/112", "via", n1.IPv6.String()})
	}
	for _, c := range cmds {
		if out, err := exec.Command("ip", append([]string{"netns", "exec"}, c...)...).CombinedOutput(); err != nil {
			t.Fatalf("%v: %v: %s", c, err, out)
		}
	}
	dnslab.Start(t, func(fn func() error) error { return a.lab.Run("dns", fn) }, clusterDNS[:], func(name string, qtype uint16) ([]dns.RR, int) {
		var i int
		if n, err := fmt.Sscanf(strings.ToLower(name), "t%d.fc.example.", &i); err != nil || n != 1 {
			return nil, dns.RcodeNameError
		}
		if qtype == dns.TypeAAAA {
			return []dns.RR{dnslab.AAAA(name, 30, netip.MustParseAddr(fmt.Sprintf("2001:db8:18::%x", i+1)))}, dns.RcodeSuccess
		}
		return []dns.RR{dnslab.A(name, 30, netip.AddrFrom4([4]byte{198, 18, byte(i / 250), byte(i%250 + 1)}))}, dns.RcodeSuccess
	})

	cnps := cnpclient.NewForConfigOrDie(adminCfg)
	if _, err := cnps.PolicyV1beta1().ClusterNetworkPolicies().Create(ctx, &v1beta1.ClusterNetworkPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: "egress-names"},
		Spec: v1beta1.ClusterNetworkPolicySpec{
			Tier: v1beta1.AdminTier, Priority: 10,
			Subject: v1beta1.ClusterNetworkPolicySubject{Namespaces: &metav1.LabelSelector{MatchLabels: map[string]string{"ns": "x"}}},
			Egress: []v1beta1.ClusterNetworkPolicyEgressRule{
				{Name: "names", Action: v1beta1.ClusterNetworkPolicyRuleActionAccept, To: []v1beta1.ClusterNetworkPolicyEgressPeer{{DomainNames: []v1beta1.DomainName{"*.fc.example"}}}},
				{Name: "rest", Action: v1beta1.ClusterNetworkPolicyRuleActionDeny, To: []v1beta1.ClusterNetworkPolicyEgressPeer{{Networks: []v1beta1.CIDR{"198.18.0.0/16", "2001:db8:18::/48"}}}},
			},
		},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// Every agent programs the redirect with kube-dns's addresses.
	for _, n := range agentTopology {
		waitFor(t, 30*time.Second, "the redirect to the forwarder on "+n.Name, func() bool {
			out, err := exec.Command("ip", "netns", "exec", a.lab.Node(n.Name).NetNS, "nft", "list", "set", "inet", "nftguard", "cnp_dns_servers6").CombinedOutput()
			return err == nil && strings.Contains(string(out), clusterDNS[1].String())
		})
	}

	dialers := map[string]func(string, string) (net.Conn, error){}
	for _, p := range []string{"x/a", "x/b", "x/c", "y/a"} {
		ns, err := nfnl.OpenNetNS(a.lab.Endpoint(p).Path)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { ns.Close() })
		dialers[p] = func(network, addr string) (c net.Conn, err error) {
			err = ns.Run(func() (err error) {
				c, err = net.DialTimeout(network, addr, time.Second)
				return err
			})
			return c, err
		}
	}
	next := 0
	// resolveConnect resolves a fresh name from pod and connects to its
	// address at once; it returns the address and whether the connect
	// succeeded.
	resolveConnect := func(t *testing.T, pod, transport string, v6 bool, timeout time.Duration) (netip.Addr, bool, error) {
		next++
		qtype := dns.TypeA
		if v6 {
			qtype = dns.TypeAAAA
		}
		addrs, _, err := dnslab.Resolve(dialers[pod], transport, clusterDNS[b2i(v6)], fmt.Sprintf("t%d.fc.example", next), qtype, timeout)
		if err != nil || len(addrs) != 1 {
			return netip.Addr{}, false, fmt.Errorf("resolve from %s over %s: %v %v", pod, transport, addrs, err)
		}
		c, err := dialers[pod]("tcp", netip.AddrPortFrom(addrs[0], 80).String())
		if err != nil {
			return addrs[0], false, nil
		}
		c.Close()
		return addrs[0], true, nil
	}

	t.Run("first connects on every node", func(t *testing.T) {
		failed := map[string]int{}
		const trials = 240
		for i := range trials {
			pod := []string{"x/a", "x/b", "x/c"}[i%3]
			transport := []string{"udp", "tcp"}[i/3%2]
			v6 := i/6%2 == 1
			_, ok, err := resolveConnect(t, pod, transport, v6, 2*time.Second)
			if err != nil {
				t.Fatal(err)
			}
			if !ok {
				failed[fmt.Sprintf("%s %s IPv6=%v", pod, transport, v6)]++
			}
		}
		if len(failed) > 0 {
			t.Errorf("failed first connects in %d trials: %v", trials, failed)
		}
		for _, n := range agentTopology {
			m := a.agents[n.Name].metrics(t)
			if v := metricValue(m, "nftguard_dns_answers_committed_total"); v < trials/3 {
				t.Errorf("agent %s committed %v answers, want at least %d", n.Name, v, trials/3)
			}
			if v := metricValue(m, "nftguard_dns_addresses_held"); v < trials/3 {
				t.Errorf("agent %s holds %v addresses, want at least %d", n.Name, v, trials/3)
			}
		}
	})

	t.Run("answers are the pod's own; other pods are left alone", func(t *testing.T) {
		addr, ok, err := resolveConnect(t, "x/a", "udp", false, 2*time.Second)
		if err != nil || !ok {
			t.Fatalf("x/a: %v %v", ok, err)
		}
		if c, err := dialers["x/b"]("tcp", netip.AddrPortFrom(addr, 80).String()); err == nil {
			c.Close()
			t.Errorf("x/b reaches %v, which only x/a resolved", addr)
		}
		if _, ok, err := resolveConnect(t, "y/a", "udp", false, 2*time.Second); err != nil || !ok {
			t.Errorf("y/a, selected by no rule: connect %v, %v", ok, err)
		}
	})

	t.Run("explain reads the node's answers", func(t *testing.T) {
		addr, ok, err := resolveConnect(t, "x/a", "udp", false, 2*time.Second)
		if err != nil || !ok {
			t.Fatalf("x/a: %v %v", ok, err)
		}
		name := fmt.Sprintf("t%d.fc.example", next)
		kc, err := a.srv.WriteKubeconfig(a.dir, kubetest.Admin)
		if err != nil {
			t.Fatal(err)
		}
		for _, tc := range []struct{ pod, node, want string }{
			{"x/a", "n1", "x/a resolved " + name + " to " + addr.String() + " (answer expires in"},
			{"x/b", "n2", `denied by ClusterNetworkPolicy egress-names (Admin, priority 10) rule egress[1] "rest"`},
		} {
			out, err := exec.Command(nftguardBin, "explain", "--kubeconfig", kc, "--node-table", "--netns", a.lab.Node(tc.node).Path,
				"--from", tc.pod, "--to", addr.String(), "--port", "tcp/80").CombinedOutput()
			if err != nil || !strings.Contains(string(out), tc.want) {
				t.Errorf("explain from %s: %v, want %q in:\n%s", tc.pod, err, tc.want, out)
			}
		}
	})

	t.Run("agent killed and restarted", func(t *testing.T) {
		ag := a.agents["n2"]
		// Answers x/b holds when its agent dies (30 s TTL): the sets
		// keep them, and the next agent must count them.
		for range 20 {
			if _, ok, err := resolveConnect(t, "x/b", "udp", false, time.Second); err != nil || !ok {
				t.Fatalf("x/b before the kill: %v %v", ok, err)
			}
		}
		ag.signal(t, syscall.SIGKILL)
		<-ag.proc.Done()
		killed := time.Now()
		var back time.Duration
		for {
			got, ok, err := resolveConnect(t, "x/b", "udp", false, 200*time.Millisecond)
			if err == nil {
				back = time.Since(killed)
				if ok {
					t.Errorf("x/b reached %v, resolved while its agent was down", got)
				}
				break
			}
			if time.Since(killed) > 10*time.Second {
				t.Fatalf("x/b's DNS not answered 10 s after its agent was killed: %v", err)
			}
			time.Sleep(50 * time.Millisecond)
		}
		t.Logf("x/b's DNS answered directly %v after its agent was killed", back.Round(10*time.Millisecond))
		// The heartbeat's elements expire at most 3 s after the kill;
		// one more failed query round and a loaded machine's scheduling
		// are allowed on top.
		if back > 5*time.Second {
			t.Errorf("DNS came back after %v, over the heartbeat's 3 s and two seconds", back)
		}
		restarted := time.Now()
		a.startAgent(t, "n2")
		ready := time.Since(restarted)
		for {
			_, ok, err := resolveConnect(t, "x/b", "udp", false, 500*time.Millisecond)
			if err == nil && ok {
				break
			}
			if time.Since(restarted) > 30*time.Second {
				t.Fatalf("no redirected answer opened its address 30 s after the restart: %v", err)
			}
			time.Sleep(50 * time.Millisecond)
		}
		t.Logf("restarted agent ready in %v; a resolved name reachable %v after the start", ready.Round(time.Millisecond), time.Since(restarted).Round(time.Millisecond))
		// The sets kept the killed agent's elements: the new forwarder
		// counts them against its limits (it read them at its first
		// sync), so a restart cannot double what the node holds.
		m := ag.metrics(t)
		if counted, held := metricValue(m, "nftguard_dns_elements_counted"), metricValue(m, "nftguard_dns_addresses_held"); counted < held || held < 20 {
			t.Errorf("the restarted agent counts %v elements, the sets hold %v", counted, held)
		} else {
			t.Logf("the restarted agent counts %v elements, the sets hold %v", counted, held)
		}
	})
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

func ptr[T any](v T) *T { return &v }

// waitFor polls cond every 50 ms until it holds or within passes.
func waitFor(t *testing.T, within time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %v", what, within)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
