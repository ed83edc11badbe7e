package cnpconformance

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/nftguard/nftguard/internal/dnslab"
	"github.com/nftguard/nftguard/internal/netlab"
)

// The lab's cluster DNS: what a cluster's CoreDNS behind the Service
// kube-system/kube-dns is to its pods. The domain names conformance test
// (testdata/domain_names.go.txt) resolves the names below through it; each
// lives in namesNetwork on the external host namesHost, which serves TCP
// and UDP port 80 there.
const (
	dnsHost       = "dns" // external host holding the kube-dns ClusterIP
	namesHost     = "ext" // external host holding namesNetwork
	clusterDomain = "cluster.local"
	labNameTTL    = 30 // seconds, the TTL of the lab's A records
)

var (
	namesNetwork = netip.MustParsePrefix("198.18.0.0/24")
	// labNames are the names the lab's cluster DNS answers, fully
	// qualified, lower case; anything else is NXDOMAIN. Only A records:
	// AAAA questions for these names get an empty answer.
	labNames = map[string]netip.Addr{
		"diagon-alley.hogwarts.test.":                     netip.MustParseAddr("198.18.0.10"),
		"knockturn-alley.hogwarts.test.":                  netip.MustParseAddr("198.18.0.11"),
		"hogsmeade.hogwarts.test.":                        netip.MustParseAddr("198.18.0.12"),
		"three-broomsticks.hogsmeade.hogwarts.test.":      netip.MustParseAddr("198.18.0.13"),
		"honeydukes.high-street.hogsmeade.hogwarts.test.": netip.MustParseAddr("198.18.0.14"),
	}
)

// labAnswer is the lab's cluster DNS zone: names are matched without
// regard to case, as DNS does.
func labAnswer(name string, qtype uint16) ([]dns.RR, int) {
	addr, ok := labNames[strings.ToLower(dns.Fqdn(name))]
	if !ok {
		return nil, dns.RcodeNameError
	}
	if qtype != dns.TypeA {
		return nil, dns.RcodeSuccess
	}
	return []dns.RR{dnslab.A(name, labNameTTL, addr)}, dns.RcodeSuccess
}

// startClusterDNS creates the Service kube-system/kube-dns and a real DNS
// server at its ClusterIP: the lab has no kube-proxy, so the external host
// dnsHost holds the ClusterIP itself and every node routes it there
// (through the first node, which the external hosts hang off). namesHost
// gets namesNetwork the same way. It returns the ClusterIP.
func startClusterDNS(ctx context.Context, t *testing.T, cs kubernetes.Interface, lab *netlab.Lab) netip.Addr {
	t.Helper()
	single := corev1.IPFamilyPolicySingleStack
	svc, err := cs.CoreV1().Services("kube-system").Create(ctx, &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "kube-dns", Labels: map[string]string{"k8s-app": "kube-dns"}},
		Spec: corev1.ServiceSpec{
			IPFamilyPolicy: &single,
			IPFamilies:     []corev1.IPFamily{corev1.IPv4Protocol},
			Ports: []corev1.ServicePort{
				{Name: "dns", Port: 53, Protocol: corev1.ProtocolUDP},
				{Name: "dns-tcp", Port: 53, Protocol: corev1.ProtocolTCP},
			},
		},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create Service kube-system/kube-dns: %v", err)
	}
	clusterIP, err := netip.ParseAddr(svc.Spec.ClusterIP)
	if err != nil || !clusterIP.Is4() {
		t.Fatalf("kube-dns ClusterIP %q: %v", svc.Spec.ClusterIP, err)
	}
	dnsEP, namesEP := lab.Endpoint(dnsHost), lab.Endpoint(namesHost)
	if dnsEP == nil || namesEP == nil {
		t.Fatalf("the lab has no external hosts %q and %q", dnsHost, namesHost)
	}
	first := lab.Nodes[0]
	cmds := [][]string{
		{dnsEP.NetNS, "ip", "addr", "add", clusterIP.String() + "/32", "dev", "lo"},
		{namesEP.NetNS, "ip", "addr", "add", namesNetwork.String(), "dev", "lo"},
		{first.NetNS, "ip", "route", "add", clusterIP.String(), "via", dnsEP.IPv4.String()},
		{first.NetNS, "ip", "route", "add", namesNetwork.String(), "via", namesEP.IPv4.String()},
	}
	for _, n := range lab.Nodes[1:] {
		cmds = append(cmds,
			[]string{n.NetNS, "ip", "route", "add", clusterIP.String(), "via", first.IPv4.String()},
			[]string{n.NetNS, "ip", "route", "add", namesNetwork.String(), "via", first.IPv4.String()})
	}
	for _, c := range cmds {
		if out, err := exec.Command("ip", append([]string{"netns", "exec"}, c...)...).CombinedOutput(); err != nil {
			t.Fatalf("%v: %v: %s", c, err, out)
		}
	}
	dnslab.Start(t, func(fn func() error) error { return lab.Run(dnsHost, fn) }, []netip.Addr{clusterIP}, labAnswer)
	return clusterIP
}

// resolvConf is what a pod's /etc/resolv.conf says under dnsPolicy
// ClusterFirst: the cluster DNS, the search list of its namespace, ndots
// 5. The timeout is the lab's: one second per attempt (resolv.conf's
// default is five), for the reason the suite's probe timeouts are short.
type resolvConf struct {
	nameserver netip.Addr
	search     []string // fully qualified
	ndots      int
	timeout    time.Duration
	attempts   int
}

func podResolvConf(nameserver netip.Addr, namespace string) resolvConf {
	return resolvConf{
		nameserver: nameserver,
		search: []string{
			namespace + ".svc." + clusterDomain + ".",
			"svc." + clusterDomain + ".",
			clusterDomain + ".",
		},
		ndots:    5,
		timeout:  time.Second,
		attempts: 2,
	}
}

// nameList is the fully qualified names a stub resolver asks for, in
// order, for name under rc (resolv.conf(5)): a name ending in a dot only
// as it is; a name with at least ndots dots as it is, then with each
// search domain; any other name with each search domain, then as it is.
// Candidates longer than a domain name may be are left out.
func (rc resolvConf) nameList(name string) []string {
	if name == "" || len(name) > 254 || len(name) == 254 && !strings.HasSuffix(name, ".") {
		return nil
	}
	if strings.HasSuffix(name, ".") {
		return []string{name}
	}
	abs := name + "."
	asIs := strings.Count(name, ".") >= rc.ndots
	var out []string
	if asIs {
		out = append(out, abs)
	}
	for _, s := range rc.search {
		if fq := abs + s; len(fq) <= 254 {
			out = append(out, fq)
		}
	}
	if !asIs {
		out = append(out, abs)
	}
	return out
}

// errNoSuchHost is the resolver's word for a name with no address.
var errNoSuchHost = errors.New("no such host")

// lookup resolves name as a pod's stub resolver would under rc, with the
// sockets opened by dial (in the pod's network namespace): for each
// candidate of nameList, A and AAAA questions over UDP, each tried
// rc.attempts times within rc.timeout; the first candidate with an
// address is the answer. The error reads as Go's resolver writes it
// ("lookup NAME on SERVER:53: no such host").
func (rc resolvConf) lookup(name string, dial func(network, addr string) (net.Conn, error)) ([]netip.Addr, error) {
	server := netip.AddrPortFrom(rc.nameserver, 53)
	fail := func(err error) error { return fmt.Errorf("lookup %s on %v: %w", name, server, err) }
	names := rc.nameList(name)
	if len(names) == 0 {
		return nil, fail(errNoSuchHost)
	}
	var firstErr error
	for _, fq := range names {
		var addrs []netip.Addr
		var nameErr error
		for _, qtype := range []uint16{dns.TypeA, dns.TypeAAAA} {
			var got []netip.Addr
			var msg *dns.Msg
			var err error
			for range max(rc.attempts, 1) {
				got, msg, err = dnslab.Resolve(dial, "udp", rc.nameserver, fq, qtype, rc.timeout)
				if err == nil {
					break
				}
			}
			switch {
			case err != nil:
				nameErr = err
			case msg.Rcode == dns.RcodeNameError:
				nameErr = errNoSuchHost
			case msg.Rcode != dns.RcodeSuccess:
				nameErr = fmt.Errorf("server misbehaving (%s)", dns.RcodeToString[msg.Rcode])
			default:
				addrs = append(addrs, got...)
			}
		}
		if len(addrs) > 0 {
			return addrs, nil
		}
		if nameErr == nil {
			nameErr = errNoSuchHost
		}
		if firstErr == nil {
			firstErr = nameErr
		}
	}
	return nil, fail(firstErr)
}

// pickAddr is the address agnhost connect uses of a name's addresses (Go's
// net.ResolveTCPAddr and ResolveUDPAddr): the first IPv4 one, else the
// first.
func pickAddr(addrs []netip.Addr) netip.Addr {
	for _, a := range addrs {
		if a.Unmap().Is4() {
			return a.Unmap()
		}
	}
	return addrs[0]
}
