package e2e

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/vishvananda/netlink"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nftguard/nftguard/internal/netlab"
	"github.com/nftguard/nftguard/internal/testns"
)

// egressLab is one node with pods x/a, x/b, x/c, y/a and an external host
// "ext" beyond the node, where a listener records the source address each
// connection arrives with.
type egressLab struct {
	t        *testing.T
	lab      *netlab.Lab
	dir      string
	services []*corev1.Service
	policies []*networkingv1.NetworkPolicy
	podIPs   map[string][]string // override of a pod's addresses
	nodes    []*corev1.Node      // Node objects in the manifest
	// cidrs are apply's range flags; nil means both pod ranges of n1 and
	// the Service range.
	cidrs []string
	seen  *sourceRecorder
}

var (
	lbIPv4 = "203.0.113.7"
	lbIPv6 = "2001:db8::7"
)

func newEgressLab(t *testing.T) *egressLab {
	t.Helper()
	lab := netlab.New(t, netlab.Spec{
		Nodes:    []netlab.NodeSpec{{Name: "n1", Pods: []string{"x/a", "x/b", "x/c", "y/a"}}},
		External: []string{"ext"},
		Ports:    []netlab.Port{tcp80},
	})
	e := &egressLab{t: t, lab: lab, dir: t.TempDir(), podIPs: map[string][]string{}}
	e.seen = startRecorder(t, lab, "ext", 9000)
	return e
}

func (e *egressLab) service(name string, created time.Time, selector map[string]string, ann map[string]string, ips ...string) *corev1.Service {
	s := &corev1.Service{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Service"},
		ObjectMeta: metav1.ObjectMeta{Namespace: "x", Name: name, Annotations: ann, CreationTimestamp: metav1.NewTime(created)},
	}
	s.Spec.Type = corev1.ServiceTypeLoadBalancer
	s.Spec.Selector = selector
	for _, ip := range ips {
		s.Status.LoadBalancer.Ingress = append(s.Status.LoadBalancer.Ingress, corev1.LoadBalancerIngress{IP: ip})
	}
	return s
}

// writeManifest writes the lab's pods (with their addresses, or the
// override in podIPs), the Services and the policies as one List.
func (e *egressLab) writeManifest() {
	e.t.Helper()
	var items []any
	for _, ns := range []string{"x", "y"} {
		items = append(items, &corev1.Namespace{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Namespace"}, ObjectMeta: metav1.ObjectMeta{Name: ns}})
	}
	for _, ep := range e.lab.Pods {
		ns, name, _ := strings.Cut(ep.Name, "/")
		p := &corev1.Pod{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{"pod": name}}}
		p.Spec.NodeName = "n1"
		p.Status.Phase = corev1.PodRunning
		ips := e.podIPs[ep.Name]
		if ips == nil {
			ips = []string{ep.IPv4.String(), ep.IPv6.String()}
		}
		for _, ip := range ips {
			p.Status.PodIPs = append(p.Status.PodIPs, corev1.PodIP{IP: ip})
		}
		items = append(items, p)
	}
	for _, n := range e.nodes {
		n = n.DeepCopy()
		n.TypeMeta = metav1.TypeMeta{APIVersion: "v1", Kind: "Node"}
		items = append(items, n)
	}
	for _, s := range e.services {
		items = append(items, s)
	}
	for _, np := range e.policies {
		np = np.DeepCopy()
		np.TypeMeta = metav1.TypeMeta{APIVersion: "networking.k8s.io/v1", Kind: "NetworkPolicy"}
		items = append(items, np)
	}
	data, err := json.Marshal(map[string]any{"apiVersion": "v1", "kind": "List", "items": items})
	if err != nil {
		e.t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(e.dir, "cluster.json"), data, 0o644); err != nil {
		e.t.Fatal(err)
	}
}

// runApply writes the manifest and runs nftguard apply on node n1.
func (e *egressLab) runApply() (stdout, stderr string, err error) {
	e.t.Helper()
	e.writeManifest()
	node := e.lab.Node("n1")
	c := &cluster{t: e.t}
	cidrs := e.cidrs
	if cidrs == nil {
		cidrs = []string{"--cluster-cidr", node.PodCIDRv4.String(), "--cluster-cidr", node.PodCIDRv6.String(), "--service-cidr", "10.96.0.0/16"}
	}
	return c.run(append([]string{"apply", "-f", e.dir, "--netns", node.Path, "--node-name", "n1"}, cidrs...)...)
}

// apply runs nftguard apply and returns its stderr; wantSkip says whether
// an object is expected to be skipped as invalid (exit code 1).
func (e *egressLab) apply(wantSkip ...bool) string {
	e.t.Helper()
	skip := len(wantSkip) > 0 && wantSkip[0]
	out, errOut, err := e.runApply()
	var exit *exec.ExitError
	switch {
	case err == nil && skip:
		e.t.Fatalf("apply succeeded, want exit code 1 for a skipped object\n%s\n%s", out, errOut)
	case err == nil:
	case skip && errors.As(err, &exit) && exit.ExitCode() == 1:
	default:
		e.t.Fatalf("apply: %v\n%s\n%s", err, out, errOut)
	}
	return errOut
}

// sourceOf connects from a pod to dst:port over TCP and returns the source
// address the listener saw ("" when the connection did not get through).
func (e *egressLab) sourceOf(pod string, dst netip.Addr, port int) string {
	e.t.Helper()
	var local string
	err := e.lab.Run(pod, func() error {
		d := net.Dialer{Timeout: time.Second}
		c, err := d.Dial("tcp", netip.AddrPortFrom(dst, uint16(port)).String())
		if err != nil {
			return nil
		}
		defer c.Close()
		local = c.LocalAddr().String()
		// Wait for the listener's record of this connection.
		buf := make([]byte, 64)
		c.SetReadDeadline(time.Now().Add(2 * time.Second))
		n, _ := c.Read(buf)
		local = strings.TrimSpace(string(buf[:n]))
		return nil
	})
	if err != nil {
		e.t.Fatal(err)
	}
	return local
}

// sourceRecorder answers each TCP connection with the source address it
// arrived from, so the client learns what the outside world saw.
type sourceRecorder struct {
	ln []net.Listener
}

func startRecorder(t *testing.T, lab *netlab.Lab, host string, port int) *sourceRecorder {
	r := &sourceRecorder{}
	for _, network := range []string{"tcp4", "tcp6"} {
		var ln net.Listener
		err := lab.Run(host, func() error {
			var err error
			ln, err = net.Listen(network, fmt.Sprintf(":%d", port))
			return err
		})
		if err != nil {
			t.Fatalf("listen in %s: %v", host, err)
		}
		r.ln = append(r.ln, ln)
		go func() {
			for {
				c, err := ln.Accept()
				if err != nil {
					return
				}
				ap, _ := netip.ParseAddrPort(c.RemoteAddr().String())
				fmt.Fprintf(c, "%s\n", ap.Addr().Unmap())
				c.Close()
			}
		}()
	}
	t.Cleanup(func() {
		for _, ln := range r.ln {
			ln.Close()
		}
	})
	return r
}

func (e *egressLab) ext(f netlab.Family) netip.Addr { return e.lab.Endpoint("ext").Addr(f) }

// nodeAddr is the node's address towards the external host: what a
// masquerade rule translates to.
func (e *egressLab) nodeAddr(f netlab.Family) string {
	e.t.Helper()
	ext := e.lab.Endpoint("ext")
	fam := netlink.FAMILY_V4
	if f == netlab.IPv6 {
		fam = netlink.FAMILY_V6
	}
	var addr string
	err := e.lab.Run("n1", func() error {
		l, err := netlink.LinkByName(ext.HostVeth)
		if err != nil {
			return err
		}
		as, err := netlink.AddrList(l, fam)
		if err != nil {
			return err
		}
		for _, a := range as {
			if a.IP.IsGlobalUnicast() {
				addr = a.IP.String()
			}
		}
		return nil
	})
	if err != nil || addr == "" {
		e.t.Fatalf("node address towards ext: %v", err)
	}
	return addr
}

// foreignMasquerade installs what another tool would: an iptables-nft
// masquerade for everything leaving towards the external host.
func (e *egressLab) foreignMasquerade() func() string {
	e.t.Helper()
	ns := &testns.NS{Name: e.lab.Node("n1").NetNS, Path: e.lab.Node("n1").Path}
	veth := e.lab.Endpoint("ext").HostVeth
	ns.MustExec(e.t, "", "iptables-nft", "-t", "nat", "-A", "POSTROUTING", "-o", veth, "-j", "MASQUERADE")
	ns.MustExec(e.t, "", "ip6tables-nft", "-t", "nat", "-A", "POSTROUTING", "-o", veth, "-j", "MASQUERADE")
	return func() string {
		var b bytes.Buffer
		b.WriteString(ns.MustExec(e.t, "", "nft", "--debug=netlink", "list", "table", "ip", "nat"))
		b.WriteString(ns.MustExec(e.t, "", "nft", "--debug=netlink", "list", "table", "ip6", "nat"))
		return stripCounters(b.String())
	}
}

// stripCounters drops packet counts, which change with traffic.
func stripCounters(s string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if i := strings.Index(l, "[ counter pkts"); i >= 0 {
			l = l[:i] + "[ counter ]"
		}
		if i := strings.Index(l, "counter packets"); i >= 0 {
			l = l[:i] + "counter"
		}
		out = append(out, l)
	}
	return strings.Join(out, "\n")
}

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func TestEgressSNAT(t *testing.T) {
	e := newEgressLab(t)
	snapshot := e.foreignMasquerade()
	before := snapshot()
	masq4, masq6 := e.nodeAddr(netlab.IPv4), e.nodeAddr(netlab.IPv6)
	ext4, ext6 := e.ext(netlab.IPv4), e.ext(netlab.IPv6)
	expect := func(step, pod string, dst netip.Addr, want string) {
		t.Helper()
		if got := e.sourceOf(pod, dst, 9000); got != want {
			t.Errorf("%s: %s -> %s arrived from %q, want %q", step, pod, dst, got, want)
		}
	}

	// Before any egress Service: the foreign masquerade translates.
	e.apply()
	expect("no egress Service", "x/a", ext4, masq4)

	web := e.service("web", t0, map[string]string{"pod": "a"},
		map[string]string{"nftguard.io/egress": "true", "nftguard.io/egress-ipv6": "true"}, lbIPv4, lbIPv6)
	e.services = []*corev1.Service{web}
	e.apply()
	expect("annotated", "x/a", ext4, lbIPv4)
	expect("annotated v6", "x/a", ext6, lbIPv6)
	expect("not selected", "x/b", ext4, masq4)
	expect("not selected v6", "x/b", ext6, masq6)
	expect("other namespace", "y/a", ext4, masq4)
	// Traffic to other pods is never translated.
	e.seen = startRecorder(t, e.lab, "y/a", 9000)
	expect("pod to pod", "x/a", e.lab.Endpoint("y/a").IPv4, e.lab.Endpoint("x/a").IPv4.String())
	expect("pod to pod v6", "x/a", e.lab.Endpoint("y/a").IPv6, e.lab.Endpoint("x/a").IPv6.String())

	// Destination ports: only tcp:80 is translated, so 9000 is not.
	web.Annotations["nftguard.io/egress-destination-ports"] = "tcp:80,udp:9000"
	e.apply()
	expect("destination ports exclude 9000", "x/a", ext4, masq4)
	web.Annotations["nftguard.io/egress-destination-ports"] = "udp:53,tcp:9000"
	e.apply()
	expect("destination ports include tcp 9000", "x/a", ext4, lbIPv4)
	delete(web.Annotations, "nftguard.io/egress-destination-ports")

	// Denied and allowed networks.
	web.Annotations["nftguard.io/egress-denied-networks"] = ext4.String() + "/32"
	e.apply()
	expect("denied network", "x/a", ext4, masq4)
	expect("denied only v4", "x/a", ext6, lbIPv6)
	delete(web.Annotations, "nftguard.io/egress-denied-networks")
	web.Annotations["nftguard.io/egress-allowed-networks"] = "198.51.100.0/24"
	e.apply()
	expect("outside allowed networks", "x/a", ext4, masq4)
	web.Annotations["nftguard.io/egress-allowed-networks"] = netip.PrefixFrom(ext4, 24).Masked().String()
	e.apply()
	expect("inside allowed networks", "x/a", ext4, lbIPv4)
	delete(web.Annotations, "nftguard.io/egress-allowed-networks")

	// Source ports never match a client's ephemeral port here.
	web.Annotations["nftguard.io/egress-source-ports"] = "tcp:1-1023"
	e.apply()
	expect("source ports", "x/a", ext4, masq4)
	delete(web.Annotations, "nftguard.io/egress-source-ports")

	// Two Services select x/a: the older one wins.
	newer := e.service("newer", t0.Add(time.Hour), map[string]string{"pod": "a"},
		map[string]string{"nftguard.io/egress": "true"}, "203.0.113.99")
	e.services = []*corev1.Service{newer, web}
	stderr := e.apply()
	expect("older Service wins", "x/a", ext4, lbIPv4)
	if !strings.Contains(stderr, "Service x/newer") || !strings.Contains(stderr, "older Service x/web") {
		t.Errorf("the conflict is not reported: %q", stderr)
	}

	// kube-vip's annotations alone.
	kv := e.service("kv", t0, map[string]string{"pod": "b"}, map[string]string{"kube-vip.io/egress": "true"}, "203.0.113.8")
	e.services = []*corev1.Service{web, kv}
	e.apply()
	expect("kube-vip annotation", "x/b", ext4, "203.0.113.8")

	// A bad annotation skips only that Service, and holds its pods: they
	// never leave with the node's address instead.
	kv.Annotations["kube-vip.io/egress-destination-ports"] = "tcp:http"
	stderr = e.apply(true)
	expect("bad annotation: held", "x/b", ext4, "")
	expect("bad annotation: others stay", "x/a", ext4, lbIPv4)
	if !strings.Contains(stderr, `kube-vip.io/egress-destination-ports]="tcp:http"`) {
		t.Errorf("bad annotation not named: %q", stderr)
	}
	e.services = []*corev1.Service{web}

	// NetworkPolicy decides first: denied egress is not translated, it is
	// dropped; allowed egress is translated.
	e.policies = []*networkingv1.NetworkPolicy{np("x", "deny-egress", spec{PodSelector: *match("pod", "a"), PolicyTypes: egressOnly})}
	e.apply()
	expect("policy denies", "x/a", ext4, "")
	e.policies = []*networkingv1.NetworkPolicy{np("x", "allow-ext", spec{PodSelector: *match("pod", "a"), PolicyTypes: egressOnly,
		Egress: egress([]peer{{IPBlock: &networkingv1.IPBlock{CIDR: ext4.String() + "/32"}}})})}
	e.apply()
	expect("policy allows, then SNAT", "x/a", ext4, lbIPv4)
	e.policies = nil

	// Annotation removed, Service deleted.
	delete(web.Annotations, "nftguard.io/egress")
	e.services = []*corev1.Service{web}
	e.apply()
	expect("annotation removed", "x/a", ext4, masq4)
	e.services = nil
	e.apply()
	expect("Service deleted", "x/a", ext4, masq4)

	if after := snapshot(); after != before {
		t.Errorf("the foreign masquerade rules changed:\nbefore:\n%s\nafter:\n%s", before, after)
	}
}

// TestEgressNoIPv6RangeNoPodSNAT: with --cluster-cidr lacking the IPv6 pod
// range, a Service asking for IPv6 egress must not translate its pods'
// IPv6 traffic to other pods (a policy elsewhere that allows only traffic
// from outside the cluster would then let it in): IPv6 is not translated
// at all, with a warning naming the Service. A Node object naming the IPv6
// pod range completes the ranges: then IPv6 leaving the cluster is
// translated and pod-to-pod IPv6 still is not.
func TestEgressNoIPv6RangeNoPodSNAT(t *testing.T) {
	e := newEgressLab(t)
	n1 := e.lab.Node("n1")
	e.cidrs = []string{"--cluster-cidr", n1.PodCIDRv4.String(), "--service-cidr", "10.96.0.0/16"}
	ext4, ext6 := e.ext(netlab.IPv4), e.ext(netlab.IPv6)
	a, ya := e.lab.Endpoint("x/a"), e.lab.Endpoint("y/a")
	expect := func(step, pod string, dst netip.Addr, want string) {
		t.Helper()
		if got := e.sourceOf(pod, dst, 9000); got != want {
			t.Errorf("%s: %s -> %s arrived from %q, want %q", step, pod, dst, got, want)
		}
	}
	e.services = []*corev1.Service{e.service("web", t0, map[string]string{"pod": "a"},
		map[string]string{"nftguard.io/egress": "true", "nftguard.io/egress-ipv6": "true"}, lbIPv4, lbIPv6)}
	stderr := e.apply()
	if !strings.Contains(stderr, "warning: ") || !strings.Contains(stderr, "Service x/web: no IPv6 pod range of the cluster is known") {
		t.Errorf("the untranslated family is not named: %q", stderr)
	}
	startRecorder(t, e.lab, "y/a", 9000)
	expect("IPv4 leaves translated", "x/a", ext4, lbIPv4)
	expect("IPv6 not translated at all", "x/a", ext6, a.IPv6.String())
	expect("pod to pod IPv4", "x/a", ya.IPv4, a.IPv4.String())
	expect("pod to pod IPv6 (no range known)", "x/a", ya.IPv6, a.IPv6.String())

	// The Node's spec.podCIDRs give the IPv6 range.
	e.nodes = []*corev1.Node{{ObjectMeta: metav1.ObjectMeta{Name: "n1"},
		Spec: corev1.NodeSpec{PodCIDR: n1.PodCIDRv4.String(), PodCIDRs: []string{n1.PodCIDRv4.String(), n1.PodCIDRv6.String()}}}}
	if stderr := e.apply(); strings.Contains(stderr, "IPv6") {
		t.Errorf("a warning about IPv6 with the Node's range known: %q", stderr)
	}
	expect("IPv6 leaves translated (range from the Node)", "x/a", ext6, lbIPv6)
	expect("pod to pod IPv6 (range from the Node)", "x/a", ya.IPv6, a.IPv6.String())
	expect("IPv4 still translated", "x/a", ext4, lbIPv4)
}
