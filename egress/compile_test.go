package egress

import (
	"net/netip"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nftguard/nftguard/engine"
	"github.com/nftguard/nftguard/internal/podtest"
	"github.com/nftguard/nftguard/internal/tabletest"
)

func svc(ns, name string, created time.Time, ann map[string]string, lbIPs ...string) *corev1.Service {
	s := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Annotations: ann, CreationTimestamp: metav1.NewTime(created)}}
	s.Spec.Type = corev1.ServiceTypeLoadBalancer
	s.Spec.Selector = map[string]string{"app": name}
	for _, ip := range lbIPs {
		s.Status.LoadBalancer.Ingress = append(s.Status.LoadBalancer.Ingress, corev1.LoadBalancerIngress{IP: ip})
	}
	return s
}

func pod(ns, name, app, node string, ips ...string) *corev1.Pod {
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{"app": app}}}
	p.Spec.NodeName = node
	p.Status.Phase = corev1.PodRunning
	for _, ip := range ips {
		p.Status.PodIPs = append(p.Status.PodIPs, corev1.PodIP{IP: ip})
	}
	return p
}

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func baseInput() Input {
	return Input{
		NodeName:     "n1",
		ClusterCIDRs: []netip.Prefix{netip.MustParsePrefix("10.244.0.0/16"), netip.MustParsePrefix("fd00:244::/56")},
		ServiceCIDRs: []netip.Prefix{netip.MustParsePrefix("10.96.0.0/16")},
		NodeIPs:      []netip.Addr{netip.MustParseAddr("192.168.56.10")},
	}
}

// compileChecked compiles and checks that the output loads (see
// tabletest.Loads).
func compileChecked(t *testing.T, in Input) Output {
	t.Helper()
	out := Compile(in)
	tabletest.Loads(t, &engine.Desired{Chains: out.Chains, Sets: out.Sets})
	return out
}

func findSet(t *testing.T, out Output, name string) engine.Set {
	t.Helper()
	return tabletest.Set(t, out.Sets, name)
}

func findChain(out Output, name string) (engine.Chain, bool) {
	for _, c := range out.Chains {
		if c.Name == name {
			return c, true
		}
	}
	return engine.Chain{}, false
}

func elems(s engine.Set) string { return strings.Join(tabletest.Elements(s), ", ") }

func rules(c engine.Chain) string { return strings.Join(tabletest.Rules(c), "\n") }

func TestUnrestrictedServiceUsesTheSNATMap(t *testing.T) {
	in := baseInput()
	in.Services = []*corev1.Service{svc("x", "web", t0, map[string]string{"nftguard.io/egress": "true"}, "203.0.113.7")}
	in.Pods = podtest.Set([]*corev1.Pod{
		pod("x", "web-1", "web", "n1", "10.244.1.5"),
		pod("x", "web-2", "web", "n2", "10.244.2.5"), // other node
		pod("y", "web-3", "web", "n1", "10.244.1.6"), // other namespace
		pod("x", "db-1", "db", "n1", "10.244.1.7"),   // not selected
		pod("x", "web-4", "web", "n1"),               // no address yet
	})
	out := compileChecked(t, in)
	if len(out.Problems) > 0 {
		t.Fatal(out.Problems)
	}
	if got := elems(findSet(t, out, MapSNAT4)); got != "10.244.1.5 : 203.0.113.7" {
		t.Errorf("snat map: %s", got)
	}
	if got := elems(findSet(t, out, SetInternal4)); got != "10.244.0.0/16, 10.96.0.0/16, 192.168.56.10/32" {
		t.Errorf("internal: %s", got)
	}
	pr, _ := findChain(out, ChainPostroute)
	if pr.Type != "nat" || pr.Hook != "postrouting" || pr.Priority >= 100 {
		t.Errorf("postrouting chain %+v must be a nat chain before srcnat (100)", pr)
	}
	if b := out.Bindings[netip.MustParseAddr("10.244.1.5")]; b.To != netip.MustParseAddr("203.0.113.7") || b.Restricted {
		t.Errorf("bindings %v", out.Bindings)
	}
}

func TestKubeVIPAnnotationsAlone(t *testing.T) {
	in := baseInput()
	in.Services = []*corev1.Service{svc("x", "web", t0, map[string]string{
		"kube-vip.io/egress":                   "true",
		"kube-vip.io/egress-destination-ports": "tcp:443,udp:53",
	}, "203.0.113.7")}
	in.Pods = podtest.Set([]*corev1.Pod{pod("x", "web-1", "web", "n1", "10.244.1.5")})
	out := compileChecked(t, in)
	if len(out.Problems) > 0 {
		t.Fatal(out.Problems)
	}
	ch, ok := findChain(out, "eg_svc_x_web")
	if !ok {
		t.Fatal("no service chain")
	}
	want := "meta nfproto ipv4 meta l4proto tcp th dport 443 snat ip to 203.0.113.7\nmeta nfproto ipv4 meta l4proto udp th dport 53 snat ip to 203.0.113.7"
	if got := rules(ch); got != want {
		t.Errorf("rules:\n%s\nwant:\n%s", got, want)
	}
	if got := elems(findSet(t, out, MapDispatch4)); got != "10.244.1.5 : jump eg_svc_x_web" {
		t.Errorf("dispatch: %s", got)
	}
}

func TestEachProtocolMatchedOnItsOwn(t *testing.T) {
	in := baseInput()
	in.Services = []*corev1.Service{svc("x", "web", t0, map[string]string{
		"nftguard.io/egress":                   "true",
		"nftguard.io/egress-destination-ports": "tcp:443,tcp:8443,sctp:9000-9010,udp:53",
		"nftguard.io/egress-source-ports":      "tcp:1000-2000,udp:5353",
		"nftguard.io/egress-allowed-networks":  "198.51.100.0/24",
		"nftguard.io/egress-denied-networks":   "198.51.100.128/25",
	}, "203.0.113.7")}
	in.Pods = podtest.Set([]*corev1.Pod{pod("x", "web-1", "web", "n1", "10.244.1.5")})
	out := compileChecked(t, in)
	if len(out.Problems) > 0 {
		t.Fatal(out.Problems)
	}
	ch, _ := findChain(out, "eg_svc_x_web")
	want := strings.Join([]string{
		"ip daddr @eg_svc_x_web_denied4 return",
		"ip daddr @eg_svc_x_web_allowed4 meta l4proto tcp th dport { 443, 8443 } th sport 1000-2000 snat ip to 203.0.113.7",
		"ip daddr @eg_svc_x_web_allowed4 meta l4proto udp th dport 53 th sport 5353 snat ip to 203.0.113.7",
	}, "\n")
	if got := rules(ch); got != want {
		t.Errorf("rules:\n%s\nwant:\n%s", got, want)
	}
	for _, r := range ch.Rules {
		if strings.Count(r.Rule, "meta l4proto") > 1 {
			t.Errorf("rule requires two protocols: %s", r.Rule)
		}
	}
}

func TestIPv6AndDualStack(t *testing.T) {
	in := baseInput()
	in.Services = []*corev1.Service{
		svc("x", "dual", t0, map[string]string{"nftguard.io/egress": "true", "nftguard.io/egress-ipv6": "true"}, "203.0.113.7", "2001:db8::7"),
		svc("x", "v4only", t0.Add(time.Second), map[string]string{"nftguard.io/egress": "true"}, "203.0.113.8", "2001:db8::8"),
	}
	in.Pods = podtest.Set([]*corev1.Pod{
		pod("x", "a", "dual", "n1", "10.244.1.5", "fd00:244::5"),
		pod("x", "b", "v4only", "n1", "10.244.1.6", "fd00:244::6"),
	})
	out := compileChecked(t, in)
	if len(out.Problems) > 0 {
		t.Fatal(out.Problems)
	}
	if got := elems(findSet(t, out, MapSNAT6)); got != "fd00:244::5 : 2001:db8::7" {
		t.Errorf("v6 map: %s (without egress-ipv6 the IPv6 address is not used)", got)
	}
	if got := elems(findSet(t, out, MapSNAT4)); got != "10.244.1.5 : 203.0.113.7, 10.244.1.6 : 203.0.113.8" {
		t.Errorf("v4 map: %s", got)
	}
}

func TestOlderServiceWinsAConflict(t *testing.T) {
	in := baseInput()
	older := svc("x", "old", t0, map[string]string{"nftguard.io/egress": "true"}, "203.0.113.1")
	newer := svc("x", "new", t0.Add(time.Hour), map[string]string{"nftguard.io/egress": "true"}, "203.0.113.2")
	older.Spec.Selector = map[string]string{"app": "web"}
	newer.Spec.Selector = map[string]string{"app": "web"}
	in.Services = []*corev1.Service{newer, older}
	in.Pods = podtest.Set([]*corev1.Pod{pod("x", "web-1", "web", "n1", "10.244.1.5")})
	out := compileChecked(t, in)
	if got := elems(findSet(t, out, MapSNAT4)); got != "10.244.1.5 : 203.0.113.1" {
		t.Errorf("snat: %s", got)
	}
	if len(out.Problems) != 0 || len(out.Warnings) != 1 || out.Warnings[0].Name != "new" || !strings.Contains(out.Warnings[0].Error(), "older Service x/old") {
		t.Errorf("problems %v, warnings %v", out.Problems, out.Warnings)
	}
}

func TestBadAnnotationsSkipOnlyThatService(t *testing.T) {
	cases := []struct {
		ann  map[string]string
		want string
	}{
		{map[string]string{"nftguard.io/egress": "yes please"}, `metadata.annotations[nftguard.io/egress]="yes please": not a boolean`},
		{map[string]string{"nftguard.io/egress": "true", "nftguard.io/egress-destination-ports": "tcp:0"}, `egress-destination-ports]="tcp:0": "tcp:0": port must be 1-65535`},
		{map[string]string{"nftguard.io/egress": "true", "kube-vip.io/egress-destination-ports": "icmp:1"}, `kube-vip.io/egress-destination-ports]="icmp:1": "icmp:1": protocol must be tcp, udp or sctp`},
		{map[string]string{"nftguard.io/egress": "true", "nftguard.io/egress-source-ports": "443"}, `"443" is not PROTOCOL:PORT`},
		{map[string]string{"nftguard.io/egress": "true", "nftguard.io/egress-allowed-networks": "10.0.0.0/40"}, `egress-allowed-networks]="10.0.0.0/40": "10.0.0.0/40" is not a CIDR`},
		{map[string]string{"nftguard.io/egress": "true", "nftguard.io/egress-ipv6": "maybe"}, `egress-ipv6]="maybe": not a boolean`},
	}
	for _, tc := range cases {
		in := baseInput()
		in.Services = []*corev1.Service{
			svc("x", "bad", t0, tc.ann, "203.0.113.1"),
			svc("x", "good", t0, map[string]string{"nftguard.io/egress": "true"}, "203.0.113.2"),
		}
		in.Pods = podtest.Set([]*corev1.Pod{pod("x", "b", "bad", "n1", "10.244.1.5"), pod("x", "g", "good", "n1", "10.244.1.6")})
		out := compileChecked(t, in)
		if len(out.Problems) != 1 || !strings.Contains(out.Problems[0].Error(), tc.want) || !strings.Contains(out.Problems[0].Error(), "Service x/bad") {
			t.Errorf("%v: problems %v, want %q", tc.ann, out.Problems, tc.want)
		}
		if got := elems(findSet(t, out, MapSNAT4)); got != "10.244.1.6 : 203.0.113.2" {
			t.Errorf("%v: snat %s", tc.ann, got)
		}
		// A Service that claims egress but is invalid holds its pods
		// (fail closed); one whose egress annotation is unreadable
		// claims nothing.
		wantHeld := "10.244.1.5"
		if tc.ann["nftguard.io/egress"] != "true" {
			wantHeld = ""
		}
		if got := elems(findSet(t, out, SetHold4)); got != wantHeld {
			t.Errorf("%v: held %q, want %q", tc.ann, got, wantHeld)
		}
	}
}

func TestServicesThatCannotEgress(t *testing.T) {
	notLB := svc("x", "cip", t0, map[string]string{"nftguard.io/egress": "true"}, "203.0.113.1")
	notLB.Spec.Type = corev1.ServiceTypeClusterIP
	noIP := svc("x", "pending", t0, map[string]string{"nftguard.io/egress": "true"})
	off := svc("x", "off", t0, map[string]string{"nftguard.io/egress": "false"}, "203.0.113.3")
	in := baseInput()
	in.Services = []*corev1.Service{notLB, noIP, off}
	in.Pods = podtest.Set([]*corev1.Pod{pod("x", "a", "cip", "n1", "10.244.1.5"), pod("x", "b", "pending", "n1", "10.244.1.6"), pod("x", "c", "off", "n1", "10.244.1.7")})
	out := compileChecked(t, in)
	// The Service without an address yet claims its pod: held, not
	// left to the node's masquerade.
	if len(out.Bindings) != 0 || elems(findSet(t, out, SetHold4)) != "10.244.1.6" {
		t.Errorf("bindings %v, held %s: want only 10.244.1.6 held", out.Bindings, elems(findSet(t, out, SetHold4)))
	}
	if len(out.Held) != 1 || out.Held[0].Reason != HoldNoAddress || out.Held[0].Service != "x/pending" {
		t.Errorf("held = %+v", out.Held)
	}
	if len(out.Problems) != 1 || len(out.Warnings) != 1 || !strings.Contains(out.Warnings[0].Error(), "no load-balancer address") {
		t.Errorf("problems %v (want the ClusterIP Service), warnings %v (want the pending one)", out.Problems, out.Warnings)
	}
	in.Services = []*corev1.Service{notLB, off}
	if out := compileChecked(t, in); len(out.Chains)+len(out.Sets) != 0 {
		t.Errorf("no Service claims egress, yet the output has %d chains and %d sets", len(out.Chains), len(out.Sets))
	}
	in.ClusterCIDRs = nil
	in.Services = []*corev1.Service{svc("x", "web", t0, map[string]string{"nftguard.io/egress": "true"}, "203.0.113.7")}
	out = Compile(in)
	if len(out.Problems) != 1 || !strings.Contains(out.Problems[0].Error(), "--cluster-cidr") {
		t.Errorf("without cluster CIDRs: %v", out.Problems)
	}
}
