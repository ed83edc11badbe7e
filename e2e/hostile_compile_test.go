package e2e

import (
	"context"
	"errors"
	"net/netip"
	"os/exec"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"

	"github.com/nftguard/nftguard/internal/netlab"
	"github.com/nftguard/nftguard/internal/testns"
)

// Hostile input on the real kernel with real packets: a
// Service whose egress ports overlap, one whose load-balancer address does
// not parse, a NetworkPolicy with a name no API server accepts, and one with
// 10,000 excepts never stop a NetworkPolicy in another namespace from being
// enforced, never touch a foreign table, and the batch is never refused.
func TestHostileObjectsNeverFreezeOthers(t *testing.T) {
	e := newEgressLab(t)
	node := e.lab.Node("n1")
	nodeNS := &testns.NS{Name: node.NetNS, Path: node.Path}
	nodeNS.MustExec(t, "", "nft", "add table ip foreign; add chain ip foreign keep { type filter hook input priority 0; policy accept; }")
	ext4 := e.ext(netlab.IPv4)
	probe := func(step, from, to string, want bool) {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		got, err := e.lab.Probe(ctx, from, to, tcp80, netlab.IPv4)
		if err != nil {
			t.Fatalf("%s: probe %s -> %s: %v", step, from, to, err)
		}
		if got != want {
			t.Errorf("%s: %s -> %s tcp/80 allowed=%v, want %v", step, from, to, got, want)
		}
	}
	// apply runs nftguard apply; exit 0, or 1 when objects were skipped,
	// is a success: what matters is that the rest is enforced.
	apply := func(step string) (stderr string, skipped bool) {
		t.Helper()
		start := time.Now()
		_, errOut, err := e.runApply()
		var exit *exec.ExitError
		switch {
		case err == nil:
		case errors.As(err, &exit) && exit.ExitCode() == 1:
			skipped = true
		default:
			t.Fatalf("%s: apply: %v\n%s", step, err, errOut)
		}
		t.Logf("%s: apply took %v", step, time.Since(start))
		return errOut, skipped
	}
	foreignKept := func(step string) {
		t.Helper()
		if out, err := nodeNS.Exec("", "nft", "list", "chain", "ip", "foreign", "keep"); err != nil {
			t.Errorf("%s: the foreign table is gone: %v\n%s", step, err, out)
		}
		if out, err := nodeNS.Exec("", "nft", "list", "table", "inet", "nftguard"); err != nil {
			t.Errorf("%s: nft cannot list our table: %v\n%s", step, err, out)
		}
	}

	// y/a isolated for ingress: nothing reaches it.
	denyY := np("y", "deny", spec{PodSelector: *match("pod", "a"), PolicyTypes: ingressOnly})
	e.policies = []*networkingv1.NetworkPolicy{denyY}

	// Repro 1: overlapping and repeated ports are merged, the Service's
	// egress is programmed, the policy enforced, nothing skipped.
	web := e.service("web", t0, map[string]string{"pod": "a"}, map[string]string{
		"nftguard.io/egress":                   "true",
		"nftguard.io/egress-destination-ports": "tcp:1-100,tcp:50-200,tcp:9000,tcp:9000,udp:53,udp:53",
	}, lbIPv4)
	dns := e.service("dns", t0, map[string]string{"pod": "b"}, map[string]string{
		"nftguard.io/egress": "true", "nftguard.io/egress-destination-ports": "udp:53,udp:53",
	}, "203.0.113.8")
	e.services = []*corev1.Service{web, dns}
	if stderr, skipped := apply("overlapping ports"); skipped {
		t.Errorf("overlapping ports: objects skipped:\n%s", stderr)
	}
	if got := e.sourceOf("x/a", ext4, 9000); got != lbIPv4 {
		t.Errorf("overlapping ports: x/a -> ext:9000 arrived from %q, want %q", got, lbIPv4)
	}
	probe("overlapping ports", "x/a", "y/a", false)
	probe("overlapping ports", "x/a", "x/b", true)
	foreignKept("overlapping ports")

	// An unparsable load-balancer address is named as such; the rest
	// stays enforced.
	broken := e.service("broken", t0, map[string]string{"pod": "c"}, map[string]string{"nftguard.io/egress": "true"}, "203.0.113.300")
	e.services = []*corev1.Service{web, dns, broken}
	stderr, skipped := apply("unparsable load-balancer IP")
	if !skipped || !strings.Contains(stderr, "Service x/broken: status.loadBalancer.ingress[0].ip") {
		t.Errorf("unparsable load-balancer IP not reported: skipped=%v\n%s", skipped, stderr)
	}
	if got := e.sourceOf("x/a", ext4, 9000); got != lbIPv4 {
		t.Errorf("unparsable load-balancer IP: x/a -> ext:9000 arrived from %q, want %q", got, lbIPv4)
	}
	probe("unparsable load-balancer IP", "x/b", "y/a", false)

	// Repro 2: a policy whose name carries nft syntax. Whether the
	// manifest reader refuses it or the compiler hashes it into a safe
	// name, the batch is not refused, nothing else is touched, and the
	// table renders to a script that loads as exactly our table.
	evil := np("y", `q"; }; }; flush ruleset; table inet nftguard { chain zz { #`, spec{PodSelector: *match("pod", "a"), PolicyTypes: ingressOnly,
		Ingress: ingress([]peer{pods("pod", "a")})})
	e.policies = []*networkingv1.NetworkPolicy{denyY, evil}
	apply("hostile name")
	probe("hostile name", "x/b", "y/a", false)
	foreignKept("hostile name")
	e.writeManifest()
	c := &cluster{t: t}
	script, errOut, err := c.run("render", "-f", e.dir, "--node-name", "n1",
		"--cluster-cidr", node.PodCIDRv4.String(), "--cluster-cidr", node.PodCIDRv6.String())
	var exit *exec.ExitError
	if err != nil && !(errors.As(err, &exit) && exit.ExitCode() == 1) {
		t.Fatalf("render: %v\n%s", err, errOut)
	}
	scratch := testns.New(t, "hostile")
	scratch.MustExec(t, "", "nft", "add table ip foreign")
	if out, err := scratch.Exec(script, "nft", "-f", "-"); err != nil {
		t.Fatalf("the rendered table does not load: %v\n%s\n%s", err, out, script)
	}
	tables := scratch.MustExec(t, "", "nft", "list", "tables")
	if want := "table ip foreign\ntable inet nftguard\n"; tables != want {
		t.Errorf("after loading the rendered table: %q, want %q", tables, want)
	}

	// Repro 4: 10,000 excepts compile in well under a second; y/a takes
	// traffic from the block, so from x/a but not from x/b, which is one
	// of the excepts.
	xa, xb := e.lab.Endpoint("x/a").IPv4, e.lab.Endpoint("x/b").IPv4
	block := netip.PrefixFrom(xa, 8).Masked()
	except := []string{xb.String() + "/32"}
	for i := 0; len(except) < 10000; i++ {
		b := block.Addr().As4()
		b[1], b[2], b[3] = byte(i>>10), byte(i>>2), byte(i<<6|1)
		a := netip.AddrFrom4(b)
		if a != xa && a != xb {
			except = append(except, a.String()+"/32")
		}
	}
	wide := np("y", "wide", spec{PodSelector: *match("pod", "a"), PolicyTypes: ingressOnly,
		Ingress: ingress([]peer{{IPBlock: &networkingv1.IPBlock{CIDR: block.String(), Except: except}}})})
	e.policies = []*networkingv1.NetworkPolicy{denyY, wide}
	e.services = []*corev1.Service{web, dns}
	// apply logs how long it took; the compile's speed is
	// policy.BenchmarkExceptScaling's subject, not this test's.
	if stderr, skipped := apply("10,000 excepts"); skipped {
		t.Errorf("10,000 excepts: objects skipped:\n%s", stderr)
	}
	probe("10,000 excepts", "x/a", "y/a", true)
	probe("10,000 excepts", "x/b", "y/a", false)
	foreignKept("10,000 excepts")
}
