package egress

import (
	"fmt"
	"math/rand"
	"net/netip"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/nftguard/nftguard/engine"
	"github.com/nftguard/nftguard/internal/nftcheck"
	"github.com/nftguard/nftguard/internal/podtest"
)

// Repeated, overlapping and adjacent port ranges are merged, so the
// anonymous set in the Service's rule never carries elements the kernel
// refuses (a hostile annotation must not fail the node's batch).
func TestOverlappingPortsAreMerged(t *testing.T) {
	for _, tc := range []struct{ ann, rule string }{
		{"tcp:1-100,tcp:50-200", "meta l4proto tcp th dport 1-200 "},
		{"udp:53,udp:53", "meta l4proto udp th dport 53 "},
		{"tcp:80,tcp:81,tcp:82-90", "meta l4proto tcp th dport 80-90 "},
		{"tcp:443,tcp:80,tcp:443,udp:53", "meta l4proto tcp th dport { 80, 443 } "},
		{"tcp:1-65535,tcp:65535", "meta l4proto tcp th dport 1-65535 "},
		{"sctp:9000-9010,tcp:9005,sctp:9005", "meta l4proto sctp th dport 9000-9010 "},
	} {
		in := baseInput()
		in.Pods = podtest.Append(in.Pods, pod("shop", "cart", "web", "n1", "10.244.0.10"))
		in.Services = append(in.Services, svc("shop", "web", t0, map[string]string{
			PrefixNftguard + AnnEgress: "true", PrefixNftguard + AnnDstPorts: tc.ann,
			PrefixNftguard + AnnSrcPorts: tc.ann}, "192.0.2.1"))
		out := compileChecked(t, in)
		if len(out.Problems) > 0 {
			t.Errorf("%s: problems %v", tc.ann, out.Problems)
			continue
		}
		var rules []string
		for _, c := range out.Chains {
			for _, r := range c.Rules {
				rules = append(rules, r.Rule)
			}
		}
		if !strings.Contains(strings.Join(rules, "\n"), tc.rule) {
			t.Errorf("%s: no rule with %q in\n%s", tc.ann, tc.rule, strings.Join(rules, "\n"))
		}
	}
}

// Networks that repeat or nest are merged; adjacent ones stay (the kernel
// takes touching intervals).
func TestOverlappingNetworksAreMerged(t *testing.T) {
	in := baseInput()
	in.Pods = podtest.Append(in.Pods, pod("shop", "cart", "web", "n1", "10.244.0.10", "fd00:244::10"))
	nets := "198.51.100.0/24,198.51.100.0/24,198.51.100.7,198.51.0.0/16,203.0.113.0/25,203.0.113.128/25,2001:db8::/32,2001:db8:1::/48"
	in.Services = append(in.Services, svc("shop", "web", t0, map[string]string{
		PrefixNftguard + AnnEgress: "true", PrefixKubeVIP + AnnIPv6: "true",
		PrefixNftguard + AnnAllowedNets: nets, PrefixNftguard + AnnDeniedNets: nets}, "192.0.2.1", "2001:db8::1"))
	out := compileChecked(t, in)
	got := map[string][]string{}
	for _, s := range out.Sets {
		if strings.HasPrefix(s.Name, "eg_svc_") {
			for _, e := range s.Elements {
				got[s.Name] = append(got[s.Name], e.Key)
			}
		}
	}
	want4 := []string{"198.51.0.0/16", "203.0.113.0/25", "203.0.113.128/25"}
	want6 := []string{"2001:db8::/32"}
	for _, k := range []string{"allowed", "denied"} {
		if diff := cmp.Diff(want4, got["eg_svc_shop_web_"+k+"4"]); diff != "" {
			t.Errorf("%s4 (-want +got):\n%s", k, diff)
		}
		if diff := cmp.Diff(want6, got["eg_svc_shop_web_"+k+"6"]); diff != "" {
			t.Errorf("%s6 (-want +got):\n%s", k, diff)
		}
	}
}

// Too many distinct items are refused with a Problem naming the annotation,
// rather than growing the batch without bound.
func TestPortListIsBounded(t *testing.T) {
	var items []string
	for p := 1; p <= 2*maxPortItems+2; p += 2 {
		items = append(items, fmt.Sprintf("tcp:%d", p))
	}
	in := baseInput()
	in.Services = append(in.Services, svc("shop", "web", t0, map[string]string{
		PrefixNftguard + AnnEgress: "true", PrefixNftguard + AnnDstPorts: strings.Join(items, ",")}, "192.0.2.1"))
	out := Compile(in)
	if len(out.Problems) != 1 || out.Problems[0].Field != "metadata.annotations[nftguard.io/egress-destination-ports]" {
		t.Fatalf("problems = %v", out.Problems)
	}
}

// mergePorts equals a port-by-port reference on random lists.
func TestMergePortsRandom(t *testing.T) {
	r := rand.New(rand.NewSource(1))
	for i := 0; i < 2000; i++ {
		var in []portMatch
		type ports = map[string]*[65536]bool
		covered := ports{"tcp": new([65536]bool), "udp": new([65536]bool)}
		for n := r.Intn(8); n >= 0; n-- {
			proto := []string{"tcp", "udp"}[r.Intn(2)]
			lo := 1 + r.Intn(60)
			hi := lo + r.Intn(10)
			if r.Intn(50) == 0 {
				hi = 65535
			}
			in = append(in, portMatch{proto, uint16(lo), uint16(hi)})
			for p := lo; p <= hi; p++ {
				covered[proto][p] = true
			}
		}
		out := mergePorts(append([]portMatch(nil), in...))
		got := ports{"tcp": new([65536]bool), "udp": new([65536]bool)}
		for j, m := range out {
			if j > 0 && out[j-1].proto == m.proto && uint32(m.lo) <= uint32(out[j-1].hi)+1 {
				t.Fatalf("%v: %v and %v overlap or touch", in, out[j-1], m)
			}
			for p := int(m.lo); p <= int(m.hi); p++ {
				got[m.proto][p] = true
			}
		}
		if *got["tcp"] != *covered["tcp"] || *got["udp"] != *covered["udp"] {
			t.Fatalf("%v merged to %v: different ports", in, out)
		}
	}
}

// A load-balancer address that does not parse is reported as what it is.
func TestUnparsableLoadBalancerIP(t *testing.T) {
	in := baseInput()
	in.Pods = podtest.Append(in.Pods, pod("shop", "cart", "web", "n1", "10.244.0.10"))
	s := svc("shop", "web", t0, map[string]string{PrefixNftguard + AnnEgress: "true"}, "192.0.2.300")
	in.Services = append(in.Services, s)
	out := Compile(in)
	if len(out.Problems) != 1 || len(out.Warnings) != 0 {
		t.Fatalf("problems %v, warnings %v", out.Problems, out.Warnings)
	}
	p := out.Problems[0]
	if p.Field != "status.loadBalancer.ingress[0].ip" || p.Value != "192.0.2.300" || p.Name != "web" {
		t.Errorf("problem = %+v", p)
	}
	// A hostname-only ingress is still "not ready yet".
	s.Status.LoadBalancer.Ingress[0].IP, s.Status.LoadBalancer.Ingress[0].Hostname = "", "lb.example"
	out = Compile(in)
	if len(out.Problems) != 0 || len(out.Warnings) != 1 {
		t.Fatalf("hostname only: problems %v, warnings %v", out.Problems, out.Warnings)
	}
}

// Two pods with one address, or two Services with one name (only possible
// from hand-written manifests), never put one key into a map twice or one
// chain name into the table twice.
func TestSharedAddressesAndNames(t *testing.T) {
	in := baseInput()
	in.Pods = podtest.Append(in.Pods,
		pod("shop", "cart", "web", "n1", "10.244.0.10", "10.244.0.10"),
		pod("shop", "cart2", "web", "n1", "10.244.0.10"),
		pod("shop", "db", "db", "n1", "10.244.0.10"),
	)
	ports := map[string]string{PrefixNftguard + AnnEgress: "true", PrefixNftguard + AnnDstPorts: "tcp:443"}
	in.Services = append(in.Services,
		svc("shop", "web", t0, map[string]string{PrefixNftguard + AnnEgress: "true"}, "192.0.2.1"),
		svc("shop", "db", t0.Add(1), ports, "192.0.2.2"),
		svc("shop", "db", t0.Add(2), ports, "192.0.2.3"),
	)
	out := compileChecked(t, in)
	if len(out.Problems) != 1 || !strings.Contains(out.Problems[0].Reason, "same namespace and name") {
		t.Errorf("problems = %v", out.Problems)
	}
	if len(out.Warnings) != 2 {
		t.Errorf("warnings = %v", out.Warnings)
	}
	if b := out.Bindings[netip.MustParseAddr("10.244.0.10")]; b.To != netip.MustParseAddr("192.0.2.1") {
		t.Errorf("binding = %+v", b)
	}
}

// Names that no API server would accept (from a hand-written manifest) are
// still enforced, under names nft can print and read.
func TestHostileServiceNames(t *testing.T) {
	in := baseInput()
	name := `q"; }; }; flush ruleset; table inet nftguard { chain zz { #`
	p := pod("shop", "cart", "web", "n1", "10.244.0.10")
	in.Pods = podtest.Append(in.Pods, p)
	s := svc("shop", name, t0, map[string]string{PrefixNftguard + AnnEgress: "true", PrefixNftguard + AnnDstPorts: "tcp:443",
		PrefixNftguard + AnnDeniedNets: "1.1.1.1"}, "192.0.2.1")
	s.Spec.Selector = map[string]string{"app": "web"}
	in.Services = append(in.Services, s)
	out := compileChecked(t, in)
	if len(out.Chains) != 4 {
		t.Fatalf("chains = %+v", out.Chains)
	}
	if errs := nftcheck.Check(&engine.Desired{Chains: out.Chains, Sets: out.Sets}); len(errs) > 0 {
		t.Fatal(errs)
	}
}
