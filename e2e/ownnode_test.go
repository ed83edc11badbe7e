package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"iter"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/network-policy-api/apis/v1beta1"

	"github.com/nftguard/nftguard/flowlog"
	"github.com/nftguard/nftguard/internal/netlab"
)

// The own-node lab: two nodes joined by a switch, pods x/a and x/b on n1
// and y/a on n2, and servers in both nodes' own namespaces (as host-network
// pods and node daemons listen there). Probes go from n1's pods to every
// address of n1 the lab has (its uplink, which is its Node's InternalIP,
// and the pods' gateway on the node), to n2 and to y/a, over TCP, UDP and
// SCTP on ports 80 and 81, IPv4 and IPv6; and from n1 itself into its pods
// (kubelet-style probes).
type ownNodeLab struct {
	t         *testing.T
	lab       *netlab.Lab
	rt        *netlab.Runtime
	bridged   bool
	dir       string
	hosts     map[string]*netlab.Endpoint // n1, n2: the nodes' servers
	policies  []*networkingv1.NetworkPolicy
	cnps      []*v1beta1.ClusterNetworkPolicy
	logDenied bool
	// family, when set, makes the Pod objects single-stack: their
	// status.podIPs list only that family's address (the pods' namespaces
	// still hold both, as a node's pods in a single-stack cluster hold a
	// link-local IPv6 address).
	family netlab.Family
}

// ownNodeTarget is one destination of the probes.
type ownNodeTarget struct {
	name   string // e.g. "n1 uplink (own node)"
	ep     *netlab.Endpoint
	v4, v6 netip.Addr // invalid: the lab has no such address
}

// addrs yields the target's addresses the lab has, with their family.
func (t ownNodeTarget) addrs() iter.Seq2[netlab.Family, netip.Addr] {
	return func(yield func(netlab.Family, netip.Addr) bool) {
		for f, a := range map[netlab.Family]netip.Addr{netlab.IPv4: t.v4, netlab.IPv6: t.v6} {
			if a.IsValid() && !yield(f, a) {
				return
			}
		}
	}
}

var ownNodePorts = []netlab.Port{tcp80, tcp81, udp80, udp81, sctp80, sctp81}

func newOwnNodeLab(t *testing.T, bridged bool) *ownNodeLab {
	t.Helper()
	lab := netlab.New(t, netlab.Spec{
		Nodes: []netlab.NodeSpec{
			{Name: "n1", Pods: []string{"x/a", "x/b"}},
			{Name: "n2", Pods: []string{"y/a"}},
		},
		Bridged: bridged,
	})
	rt, err := netlab.NewRuntime(lab)
	if err != nil {
		t.Fatal(err)
	}
	o := &ownNodeLab{t: t, lab: lab, rt: rt, bridged: bridged, dir: t.TempDir(), hosts: map[string]*netlab.Endpoint{}}
	for _, n := range []string{"n1", "n2"} {
		h, err := rt.ServeNode(n, ownNodePorts)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { rt.StopNode(h) })
		o.hosts[n] = h
	}
	return o
}

// targets are the destinations probed from n1's pods. The gateway is an
// address of n1 that no Node object names: the routed lab's 169.254.1.1
// on every pod veth (its IPv6 gateway, fe80::1, is link-local, which a
// policy cannot name and the probes do not use), the bridged lab's
// addresses of br0.
func (o *ownNodeLab) targets() []ownNodeTarget {
	n1, n2 := o.lab.Node("n1"), o.lab.Node("n2")
	gw := ownNodeTarget{name: "n1 pod gateway (own node)", ep: o.hosts["n1"], v4: netip.MustParseAddr("169.254.1.1")}
	if o.bridged {
		gw.v4 = n1.PodCIDRv4.Addr().Next()
		gw.v6 = n1.PodCIDRv6.Addr().Next()
	}
	ya := o.lab.Endpoint("y/a")
	return []ownNodeTarget{
		{name: "n1 InternalIP (own node)", ep: o.hosts["n1"], v4: n1.IPv4, v6: n1.IPv6},
		gw,
		{name: "n2 InternalIP (other node)", ep: o.hosts["n2"], v4: n2.IPv4, v6: n2.IPv6},
		{name: "y/a (pod on n2)", ep: ya, v4: ya.IPv4, v6: ya.IPv6},
	}
}

// objects are the manifests: namespaces, Nodes with their uplink addresses
// as InternalIP, pods, policies and ClusterNetworkPolicies.
func (o *ownNodeLab) objects() []any {
	var objs []any
	for _, ns := range []string{"x", "y"} {
		n := &corev1.Namespace{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Namespace"},
			ObjectMeta: metav1.ObjectMeta{Name: ns, Labels: map[string]string{"ns": ns}}}
		if o.logDenied && ns == "x" {
			n.Annotations = map[string]string{"nftguard.io/log-denied": "true"}
		}
		objs = append(objs, n)
	}
	for _, n := range o.lab.Nodes {
		objs = append(objs, &corev1.Node{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Node"},
			ObjectMeta: metav1.ObjectMeta{Name: n.Name},
			Status: corev1.NodeStatus{Addresses: []corev1.NodeAddress{
				{Type: corev1.NodeInternalIP, Address: n.IPv4.String()},
				{Type: corev1.NodeInternalIP, Address: n.IPv6.String()},
			}}})
	}
	for _, ep := range o.lab.Pods {
		ns, name, _ := strings.Cut(ep.Name, "/")
		p := &corev1.Pod{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{"pod": name}}}
		p.Spec.NodeName = ep.Node.Name
		p.Spec.Containers = []corev1.Container{{Name: "c", Image: "agnhost"}}
		p.Status.Phase = corev1.PodRunning
		p.Status.PodIPs = []corev1.PodIP{{IP: ep.IPv4.String()}, {IP: ep.IPv6.String()}}
		if o.family != 0 {
			p.Status.PodIPs = []corev1.PodIP{{IP: ep.Addr(o.family).String()}}
		}
		p.Status.PodIP = p.Status.PodIPs[0].IP
		objs = append(objs, p)
	}
	for _, np := range o.policies {
		np = np.DeepCopy()
		np.TypeMeta = metav1.TypeMeta{APIVersion: "networking.k8s.io/v1", Kind: "NetworkPolicy"}
		objs = append(objs, np)
	}
	for _, p := range o.cnps {
		objs = append(objs, p.DeepCopy())
	}
	return objs
}

// apply programs both nodes with `nftguard apply`.
func (o *ownNodeLab) apply() {
	o.t.Helper()
	data, err := json.MarshalIndent(map[string]any{"apiVersion": "v1", "kind": "List", "items": o.objects()}, "", "  ")
	if err != nil {
		o.t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(o.dir, "cluster.json"), data, 0o644); err != nil {
		o.t.Fatal(err)
	}
	for _, n := range o.lab.Nodes {
		args := []string{"apply", "-f", o.dir, "--netns", n.Path, "--node-name", n.Name}
		if o.logDenied {
			args = append(args, "--log-denied", "--log-group", "1611", "--log-rate", "1000", "--log-burst", "1000")
		}
		if out, err := exec.Command(nftguardBin, args...).CombinedOutput(); err != nil {
			o.t.Fatalf("nftguard %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
	if err := o.lab.FlushConntrack(); err != nil {
		o.t.Fatal(err)
	}
}

// ownNodeWant says whether a probe from src to the target should pass.
type ownNodeWant func(src string, tgt ownNodeTarget, f netlab.Family, p netlab.Port) bool

// probe measures every source × target × family × port and compares with
// want; a mismatch fails the test with the table of n1.
func (o *ownNodeLab) probe(what string, srcs []string, want ownNodeWant) {
	o.t.Helper()
	type result struct {
		cell string
		ok   bool
		want bool
		err  error
	}
	var (
		mu      sync.Mutex
		results []result
		wg      sync.WaitGroup
		sem     = make(chan struct{}, 16)
	)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	for _, s := range srcs {
		src := o.lab.Endpoint(s)
		for _, tgt := range o.targets() {
			for f, addr := range tgt.addrs() {
				for _, p := range ownNodePorts {
					wg.Add(1)
					go func() {
						defer wg.Done()
						sem <- struct{}{}
						defer func() { <-sem }()
						res, err := o.rt.Connect(ctx, src, tgt.ep, p.Proto, netip.AddrPortFrom(addr, uint16(p.Num)), time.Second)
						mu.Lock()
						defer mu.Unlock()
						results = append(results, result{
							cell: fmt.Sprintf("%s -> %s [%s] %v", s, tgt.name, addr, p),
							ok:   res.OK(), want: want(s, tgt, f, p), err: err})
					}()
				}
			}
		}
	}
	wg.Wait()
	sort.Slice(results, func(i, j int) bool { return results[i].cell < results[j].cell })
	var bad []string
	allowed := 0
	for _, r := range results {
		if r.err != nil {
			o.t.Fatalf("%s: %s: %v", what, r.cell, r.err)
		}
		if r.ok {
			allowed++
		}
		if r.ok != r.want {
			bad = append(bad, fmt.Sprintf("%s: got %s, want %s", r.cell, verdictWord(r.ok), verdictWord(r.want)))
		}
	}
	if len(bad) > 0 {
		o.t.Fatalf("%s: %d of %d probes differ:\n%s\ntable of n1:\n%s", what, len(bad), len(results), strings.Join(bad, "\n"), nftList(o.t, o.lab.Node("n1").NetNS))
	}
	o.t.Logf("%s: %d probes as expected (%d allowed, %d denied)", what, len(results), allowed, len(results)-allowed)
}

// fromNode probes from n1's own namespace into its pods, as the kubelet's
// probes do, and wants every one to pass.
func (o *ownNodeLab) fromNode(what string, pods ...string) {
	o.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for _, pod := range pods {
		dst := o.lab.Endpoint(pod)
		for _, f := range []netlab.Family{netlab.IPv4, netlab.IPv6} {
			for _, p := range ownNodePorts {
				res, err := o.rt.Connect(ctx, o.hosts["n1"], dst, p.Proto, netip.AddrPortFrom(dst.Addr(f), uint16(p.Num)), time.Second)
				if err != nil {
					o.t.Fatal(err)
				}
				if !res.OK() {
					o.t.Errorf("%s: n1 -> %s %v %v: %s", what, pod, f, p, res.Stderr)
				}
			}
		}
	}
}

// explainAgrees asks `nftguard explain` about the TCP cells of one source
// and compares with want, which the probes confirmed.
func (o *ownNodeLab) explainAgrees(src string, want ownNodeWant) {
	o.t.Helper()
	for _, tgt := range o.targets() {
		for f, addr := range tgt.addrs() {
			for _, p := range []netlab.Port{tcp80, tcp81} {
				out, err := exec.Command(nftguardBin, "explain", "-f", o.dir, "--node-name", "n1",
					"--from", src, "--to", addr.String(), "--port", p.String()).CombinedOutput()
				if err != nil {
					o.t.Fatalf("explain %s -> %s %v: %v\n%s", src, addr, p, err, out)
				}
				w := "verdict: " + verdictWord(want(src, tgt, f, p))
				if !strings.Contains(string(out), w) {
					o.t.Errorf("explain %s -> %s (%s) %v: want %q:\n%s", src, addr, tgt.name, p, w, out)
				}
				if strings.Contains(tgt.name, "InternalIP (own node)") && !strings.Contains(string(out), "an address of the pod's own node n1") {
					o.t.Errorf("explain %s -> %s %v does not name the pod's own node:\n%s", src, addr, p, out)
				}
			}
		}
	}
}

func verdictWord(allowed bool) string {
	if allowed {
		return "allowed"
	}
	return "denied"
}

// TestEgressToOwnNode: a pod's egress to an address of its own node is
// delivered locally (the input hook) and never crosses the forward hook;
// it meets the same tiers as forwarded traffic. Routed and bridged, IPv4
// and IPv6, TCP, UDP and SCTP, own node and other node, and the kubelet's
// probes into an isolated pod.
func TestEgressToOwnNode(t *testing.T) {
	for _, bridged := range []bool{false, true} {
		name := "routed"
		if bridged {
			name = "bridged"
		}
		t.Run(name, func(t *testing.T) { testEgressToOwnNode(t, bridged) })
	}
}

func testEgressToOwnNode(t *testing.T, bridged bool) {
	o := newOwnNodeLab(t, bridged)
	srcs := []string{"x/a", "x/b"}

	o.apply()
	o.probe("no policy", srcs, func(string, ownNodeTarget, netlab.Family, netlab.Port) bool { return true })

	// Default-deny egress for x/a: nothing, its own node included.
	o.policies = []*networkingv1.NetworkPolicy{np("x", "deny-egress-a", spec{PodSelector: *match("pod", "a"), PolicyTypes: egressOnly})}
	o.apply()
	denyA := func(src string, _ ownNodeTarget, _ netlab.Family, _ netlab.Port) bool { return src != "x/a" }
	o.probe("default-deny egress", srcs, denyA)
	o.explainAgrees("x/a", denyA)

	// An ipBlock of the node's InternalIP allows exactly that address, on
	// the ports the rule names.
	n1 := o.lab.Node("n1")
	o.policies = []*networkingv1.NetworkPolicy{np("x", "to-node-80", spec{PodSelector: *match("pod", "a"), PolicyTypes: egressOnly,
		Egress: []networkingv1.NetworkPolicyEgressRule{{
			To: []peer{
				{IPBlock: &networkingv1.IPBlock{CIDR: n1.IPv4.String() + "/32"}},
				{IPBlock: &networkingv1.IPBlock{CIDR: n1.IPv6.String() + "/128"}},
			},
			Ports: []networkingv1.NetworkPolicyPort{port(tcp, 80), port(udp, 80), port(sctp, 80)},
		}}})}
	o.apply()
	toNode80 := func(src string, tgt ownNodeTarget, _ netlab.Family, p netlab.Port) bool {
		return src != "x/a" || (tgt.name == "n1 InternalIP (own node)" && p.Num == 80)
	}
	o.probe("ipBlock of the own node's InternalIP, port 80", srcs, toNode80)
	o.explainAgrees("x/a", toNode80)

	// Default deny in both directions: the node's probes into the pod still
	// pass (never filtered), and the pod still cannot reach its node.
	o.policies = []*networkingv1.NetworkPolicy{np("x", "deny-all-a", spec{PodSelector: *match("pod", "a"), PolicyTypes: both})}
	o.apply()
	o.fromNode("kubelet-style probes into a default-deny ingress+egress pod", "x/a")
	o.probe("default-deny ingress and egress", []string{"x/a"}, denyA)

	// ClusterNetworkPolicy: an Admin Deny to every node beats a
	// NetworkPolicy that allows all egress; a Baseline Deny to every
	// network holds for the pod no NetworkPolicy isolates.
	o.policies = []*networkingv1.NetworkPolicy{np("x", "allow-egress-a", spec{PodSelector: *match("pod", "a"), PolicyTypes: egressOnly,
		Egress: []networkingv1.NetworkPolicyEgressRule{{}}})}
	o.cnps = []*v1beta1.ClusterNetworkPolicy{
		cnpOf("deny-nodes", v1beta1.AdminTier, 10, "x", func(s *cnpSpec) {
			s.Egress = []v1beta1.ClusterNetworkPolicyEgressRule{cOut(cDeny, []v1beta1.ClusterNetworkPolicyEgressPeer{{Nodes: &metav1.LabelSelector{}}})}
		}),
		cnpOf("deny-all-networks", v1beta1.BaselineTier, 10, "x", func(s *cnpSpec) {
			s.Egress = []v1beta1.ClusterNetworkPolicyEgressRule{cOut(cDeny, toNetworks("0.0.0.0/0", "::/0")[0:1])}
		}),
	}
	o.apply()
	cnpWant := func(src string, tgt ownNodeTarget, _ netlab.Family, _ netlab.Port) bool {
		if strings.Contains(tgt.name, "InternalIP") {
			return false // Admin: a nodes peer matches the Nodes' InternalIPs
		}
		return src == "x/a" // x/b: Baseline denies every network
	}
	o.probe("Admin Deny to nodes, Baseline Deny to all networks", srcs, cnpWant)
	o.explainAgrees("x/a", cnpWant)
	o.explainAgrees("x/b", cnpWant)
	o.cnps = nil

	// A Service that kube-proxy DNATs to a host-network endpoint on the
	// same node is judged on the endpoint's address and port.
	o.serviceToNode()

	// Denied packets on the new path are logged and named like others.
	o.deniedRecords()
}

// serviceToNode installs a foreign DNAT (as kube-proxy's nat table would:
// a Service address to n1's InternalIP, port 81) in n1 and checks that x/a
// reaches the Service only when its egress policy allows the endpoint.
func (o *ownNodeLab) serviceToNode() {
	o.t.Helper()
	n1 := o.lab.Node("n1")
	svc4, svc6 := netip.MustParseAddr("10.96.0.10"), netip.MustParseAddr("fd00:96::10")
	rules := fmt.Sprintf(`table inet kp-test {
	chain pre {
		type nat hook prerouting priority dstnat; policy accept;
		ip daddr %s tcp dport 80 dnat ip to %s:81
		ip6 daddr %s tcp dport 80 dnat ip6 to [%s]:81
	}
}
`, svc4, n1.IPv4, svc6, n1.IPv6)
	cmd := exec.Command("ip", "netns", "exec", n1.NetNS, "nft", "-f", "-")
	cmd.Stdin = strings.NewReader(rules)
	if out, err := cmd.CombinedOutput(); err != nil {
		o.t.Fatalf("install the Service DNAT: %v\n%s", err, out)
	}
	allowPort := func(p int) {
		o.policies = []*networkingv1.NetworkPolicy{np("x", "to-node", spec{PodSelector: *match("pod", "a"), PolicyTypes: egressOnly,
			Egress: []networkingv1.NetworkPolicyEgressRule{{
				To: []peer{
					{IPBlock: &networkingv1.IPBlock{CIDR: n1.IPv4.String() + "/32"}},
					{IPBlock: &networkingv1.IPBlock{CIDR: n1.IPv6.String() + "/128"}},
				},
				Ports: []networkingv1.NetworkPolicyPort{port(tcp, p)},
			}}})}
		o.apply()
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	check := func(what string, want bool) {
		for _, svc := range []netip.Addr{svc4, svc6} {
			res, err := o.rt.Connect(ctx, o.lab.Endpoint("x/a"), o.hosts["n1"], netlab.TCP, netip.AddrPortFrom(svc, 80), time.Second)
			if err != nil {
				o.t.Fatal(err)
			}
			if res.OK() != want {
				o.t.Errorf("%s: x/a -> Service %s:80 (DNAT to n1:81): got %s, want %s (%s)", what, svc, verdictWord(res.OK()), verdictWord(want), res.Stderr)
			}
		}
	}
	allowPort(81)
	check("egress allows the endpoint n1:81", true)
	allowPort(80)
	check("egress allows n1:80 only, not the endpoint's port", false)
}

// deniedRecords turns on --log-denied for namespace x, sends x/a's
// default-denied packets to its own node, and reads them back with
// `nftguard flows`: each names the pod, the policy and the node's address.
func (o *ownNodeLab) deniedRecords() {
	o.t.Helper()
	n1 := o.lab.Node("n1")
	o.logDenied = true
	o.policies = []*networkingv1.NetworkPolicy{np("x", "deny-egress-a", spec{PodSelector: *match("pod", "a"), PolicyTypes: egressOnly})}
	o.apply()
	// Files, not buffers: the process writes them while this goroutine
	// waits, and they are read only after it exited.
	stdout, err := os.Create(filepath.Join(o.t.TempDir(), "flows.out"))
	if err != nil {
		o.t.Fatal(err)
	}
	defer stdout.Close()
	stderr, err := os.Create(filepath.Join(o.t.TempDir(), "flows.err"))
	if err != nil {
		o.t.Fatal(err)
	}
	defer stderr.Close()
	read := func(f *os.File) string { b, _ := os.ReadFile(f.Name()); return string(b) }
	cmd := exec.Command(nftguardBin, "flows", "--netns", n1.Path, "--group", "1611", "-f", o.dir,
		"-o", "json", "--count", "2", "--for", "30s", "--pod", "x/a")
	cmd.Stdout, cmd.Stderr = stdout, stderr
	if err := cmd.Start(); err != nil {
		o.t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	ctx, cancel := context.WithTimeout(context.Background(), 40*time.Second)
	defer cancel()
	// Send until flows has its two records: it may not have bound the
	// group when the first packets go.
send:
	for {
		for _, a := range []netip.Addr{n1.IPv4, n1.IPv6} {
			if _, cerr := o.rt.Connect(ctx, o.lab.Endpoint("x/a"), o.hosts["n1"], netlab.UDP, netip.AddrPortFrom(a, 81), 100*time.Millisecond); cerr != nil {
				o.t.Fatal(cerr)
			}
		}
		select {
		case err = <-done:
			break send
		case <-ctx.Done():
			cmd.Process.Kill()
			o.t.Fatalf("flows did not print two records:\nstdout:\n%s\nstderr:\n%s", read(stdout), read(stderr))
		default:
		}
	}
	if err != nil {
		o.t.Fatalf("flows: %v\nstdout:\n%s\nstderr:\n%s", err, read(stdout), read(stderr))
	}
	out := read(stdout)
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 2 {
		o.t.Fatalf("%d records, want 2:\n%s", len(lines), out)
	}
	for _, line := range lines {
		var rec flowlog.Record
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			o.t.Fatalf("%q: %v", line, err)
		}
		if rec.Direction != flowlog.Egress || rec.SrcPod != "x/a" || rec.DstPort != 81 ||
			(rec.Dst != n1.IPv4 && rec.Dst != n1.IPv6) || strings.Join(rec.Policies, ",") != "x/deny-egress-a" {
			o.t.Errorf("record %s", line)
		}
	}
	o.t.Logf("denied records on the input path:\n%s", out)
	o.logDenied = false
}
