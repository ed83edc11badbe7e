package podguard

import (
	"net/netip"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/nftguard/nftguard/engine"
	"github.com/nftguard/nftguard/internal/apitest"
	"github.com/nftguard/nftguard/internal/podtest"
	"github.com/nftguard/nftguard/problem"
)

func addrs(s ...string) []netip.Addr {
	out := make([]netip.Addr, len(s))
	for i, a := range s {
		out[i] = netip.MustParseAddr(a)
	}
	return out
}

func chainByDevice(out Output, dev string) *engine.Chain {
	for i := range out.Chains {
		if out.Chains[i].Device == dev {
			return &out.Chains[i]
		}
	}
	return nil
}

func rules(c *engine.Chain) []string {
	if c == nil {
		return nil
	}
	var out []string
	for _, r := range c.Rules {
		out = append(out, r.Rule)
	}
	return out
}

var unspecified = []string{
	"ip6 saddr :: icmpv6 type nd-neighbor-solicit accept",
	"ip6 saddr :: icmpv6 type mld2-listener-report accept",
	"ip6 saddr :: icmpv6 type mld-listener-report accept",
}

func TestCompile(t *testing.T) {
	pods := []*corev1.Pod{
		apitest.Pod("x", "a", "10.0.0.2"),
		apitest.Pod("x", "b", "", apitest.IPs("10.0.0.3", "fd00::3")),
		apitest.Pod("y", "c", "10.0.0.4"),
		apitest.Pod("y", "host", "192.168.0.1", apitest.HostNetwork()),
		apitest.Pod("y", "remote", "10.0.1.2", apitest.OnNode("n2")),
		apitest.Pod("y", "done", "10.0.0.9", apitest.Phase(corev1.PodSucceeded)),
		apitest.Pod("z", "nowhere", "10.0.0.5"),
		apitest.Pod("z", "thief", "10.0.0.6"),
		apitest.Pod("z", "twin", "10.0.0.7"),
	}
	in := Input{
		NodeName: "n1",
		Pods:     podtest.Set(pods),
		PodCIDRs: []netip.Prefix{netip.MustParsePrefix("10.0.0.0/24")},
		Interfaces: []Interface{
			{Name: "va", Peer: addrs("10.0.0.2", "fe80::a")},
			{Name: "vb", Bridge: "br0", Peer: addrs("10.0.0.3", "fd00::3", "fe80::b", "fe80::b2")},
			{Name: "vc", Peer: addrs("10.0.0.4", "fe80::c")},
			// Holds x/a's address beside its own: nobody's.
			{Name: "vthief", Peer: addrs("10.0.0.6", "10.0.0.2")},
			// Holds y/c's address beside one the API does not know.
			{Name: "vnew", Peer: addrs("10.0.0.8", "fe80::8", "10.0.0.4", "192.168.7.7")},
			// A pod starting: the API does not know 10.0.0.10 yet.
			{Name: "vstart", Peer: addrs("10.0.0.10", "fe80::10", "192.168.7.7")},
			// Not a pod's: its peer holds nothing of the pod ranges.
			{Name: "vother", Peer: addrs("172.17.0.2")},
			// Two interfaces holding one link-local address.
			{Name: "vtwin", Peer: addrs("10.0.0.7", "fe80::c")},
		},
	}
	out := Compile(in)

	wantGuarded := map[string]string{"x/a": "va", "x/b": "vb", "z/twin": "vtwin"}
	if len(out.Guarded) != len(wantGuarded) {
		t.Errorf("Guarded = %v, want %v", out.Guarded, wantGuarded)
	}
	for k, v := range wantGuarded {
		if out.Guarded[k] != v {
			t.Errorf("Guarded[%s] = %q, want %q", k, out.Guarded[k], v)
		}
	}
	if want := []string{"y/c", "z/nowhere", "z/thief"}; !slices.Equal(out.Unattributed, want) {
		t.Errorf("Unattributed = %v, want %v", out.Unattributed, want)
	}
	for dev, want := range map[string][]string{
		"va": append([]string{"ip saddr 10.0.0.2 accept", "ip6 saddr fe80::a accept"}, append(unspecified, "counter drop")...),
		"vb": append([]string{"ip saddr 10.0.0.3 accept", "ip6 saddr { fd00::3, fe80::b, fe80::b2 } accept"}, append(unspecified, "counter drop")...),
		// y/c's address is held by vnew too: neither is y/c's.
		"vc":      {"counter drop"},
		"vtwin":   append([]string{"ip saddr 10.0.0.7 accept"}, append(unspecified, "counter drop")...),
		"vthief":  {"counter drop"},
		"vnew":    {"counter drop"},
		"vstart":  append([]string{"ip saddr 10.0.0.10 accept", "ip6 saddr fe80::10 accept"}, append(unspecified, "counter drop")...),
		"vother":  nil,
		"missing": nil,
	} {
		got := rules(chainByDevice(out, dev))
		if !slices.Equal(got, want) {
			t.Errorf("chain on %s:\n got %q\nwant %q", dev, got, want)
		}
	}
	if c := chainByDevice(out, "va"); c == nil || c.Name != "pg_x_a" || c.Hook != "ingress" || c.Priority != Priority {
		t.Errorf("chain on va: %+v", c)
	}
	wantLL := map[string][]string{"x/a": {"fe80::a"}, "x/b": {"fe80::b", "fe80::b2"}}
	if len(out.LinkLocal) != len(wantLL) {
		t.Errorf("LinkLocal = %v, want %v", out.LinkLocal, wantLL)
	}
	for k, v := range wantLL {
		if !slices.Equal(out.LinkLocal[k], v) {
			t.Errorf("LinkLocal[%s] = %v, want %v", k, out.LinkLocal[k], v)
		}
	}
	var reasons []string
	for _, p := range out.Problems {
		reasons = append(reasons, p.Kind+" "+p.Namespace+"/"+p.Name+": "+p.Reason)
	}
	for _, want := range []string{
		"Node /n1: interface vthief holds addresses of pods x/a, z/thief",
		"Node /n1: interface vc holds pod y/c's address, which another interface holds too",
		"Node /n1: interface vnew holds pod y/c's address, which another interface holds too",
		"Pod z/twin: link-local address fe80::c is held by another interface",
	} {
		if !slices.ContainsFunc(reasons, func(r string) bool { return strings.HasPrefix(r, want) }) {
			t.Errorf("no problem %q in %q", want, reasons)
		}
	}
}

// Each interface honours at most MaxLinkLocal link-local addresses: a pod
// with NET_ADMIN could otherwise add rules and keys without bound.
func TestLinkLocalBounded(t *testing.T) {
	peer := addrs("10.0.0.2")
	for i := 0; i < 100; i++ {
		peer = append(peer, netip.AddrFrom16([16]byte{0xfe, 0x80, 14: byte(i >> 8), 15: byte(i)}))
	}
	out := Compile(Input{NodeName: "n1", Pods: podtest.Set([]*corev1.Pod{apitest.Pod("x", "a", "10.0.0.2")}),
		Interfaces: []Interface{{Name: "va", Peer: peer}}})
	if n := len(out.LinkLocal["x/a"]); n != MaxLinkLocal {
		t.Errorf("%d link-local keys, want %d", n, MaxLinkLocal)
	}
	if len(out.Problems) != 1 {
		t.Errorf("problems: %v", out.Problems)
	}
}

// With logging, a forged packet is counted in the pod's chain and logged
// at one node-wide rate in the shared chain.
func TestLogged(t *testing.T) {
	out := Compile(Input{NodeName: "n1", Pods: podtest.Set([]*corev1.Pod{apitest.Pod("x", "a", "10.0.0.2")}),
		Interfaces: []Interface{{Name: "va", Peer: addrs("10.0.0.2")}}, Log: &Log{Group: 7, Rate: 5, Burst: 9}})
	c := chainByDevice(out, "va")
	if r := rules(c); r[len(r)-1] != "counter goto "+ForgedChain {
		t.Errorf("last rule %q", r[len(r)-1])
	}
	var shared *engine.Chain
	for i := range out.Chains {
		if out.Chains[i].Name == ForgedChain {
			shared = &out.Chains[i]
		}
	}
	if want := []string{`limit rate 5/second burst 9 packets log prefix "nftguard forged source" group 7`, "drop"}; !slices.Equal(rules(shared), want) {
		t.Errorf("%s: %q", ForgedChain, rules(shared))
	}
}

// The table compiles: every chain is one the engine accepts.
func TestCompiles(t *testing.T) {
	out := Compile(Input{NodeName: "n1", Pods: podtest.Set([]*corev1.Pod{
		apitest.Pod("x", "a", "", apitest.IPs("10.0.0.2", "fd00::2")),
		apitest.Pod(strings.Repeat("n", 63), strings.Repeat("p", 253), "10.0.0.3"),
	}),
		Interfaces: []Interface{{Name: "va", Peer: addrs("10.0.0.2", "fd00::2", "fe80::1")}, {Name: "vlong", Peer: addrs("10.0.0.3")}},
		Log:        &Log{Group: 1, Rate: 1, Burst: 1}})
	f, err := engine.NewFake(engine.Table{Name: "nftguard"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Sync(t.Context(), &engine.Desired{Chains: out.Chains}); err != nil {
		t.Fatal(err)
	}
	if len(out.Chains) != 3 {
		t.Errorf("%d chains", len(out.Chains))
	}
}

// A pod event costs its namespace: the compiler keeps the local pods of
// namespaces whose group did not change, and follows the ones that did.
func TestCompilerFollowsChanges(t *testing.T) {
	var c Compiler
	ifs := []Interface{{Name: "va", Peer: addrs("10.0.0.2")}, {Name: "vb", Peer: addrs("10.0.0.3")}}
	set := podtest.Set([]*corev1.Pod{apitest.Pod("x", "a", "10.0.0.2")})
	if out := c.Compile(Input{NodeName: "n1", Pods: set, Interfaces: ifs}); len(out.Guarded) != 1 {
		t.Fatalf("Guarded %v", out.Guarded)
	}
	set = podtest.Append(set, apitest.Pod("y", "b", "10.0.0.3"))
	if out := c.Compile(Input{NodeName: "n1", Pods: set, Interfaces: ifs}); len(out.Guarded) != 2 || out.Guarded["y/b"] != "vb" {
		t.Fatalf("Guarded %v", out.Guarded)
	}
	if out := c.Compile(Input{NodeName: "n2", Pods: set, Interfaces: ifs}); len(out.Guarded) != 0 {
		t.Fatalf("another node: Guarded %v", out.Guarded)
	}
}

// Unattributed pods are keyed by address only: a source of the node's pod
// ranges that no local pod has is dropped at prerouting, and the chain
// loads into the engine.
func TestFallback(t *testing.T) {
	in := Input{NodeName: "n1", Pods: podtest.Set([]*corev1.Pod{
		apitest.Pod("x", "a", "", apitest.IPs("10.0.0.2", "fd00::2")),
		apitest.Pod("x", "b", "10.0.0.3"),
	}), PodCIDRs: []netip.Prefix{netip.MustParsePrefix("10.0.0.0/24"), netip.MustParsePrefix("fd00::/64")},
		Interfaces: []Interface{{Name: "va", Peer: addrs("10.0.0.2")}}}
	out := Compile(in)
	if !slices.Equal(out.Unattributed, []string{"x/b"}) {
		t.Fatalf("Unattributed %v", out.Unattributed)
	}
	var fb *engine.Chain
	for i := range out.Chains {
		if out.Chains[i].Name == FallbackChain {
			fb = &out.Chains[i]
		}
	}
	want := []string{
		`iifname != "lo" ip saddr @pg_ranges4 ip saddr != @pg_pods4 counter drop`,
		`iifname != "lo" ip6 saddr @pg_ranges6 ip6 saddr != @pg_pods6 counter drop`,
	}
	if !slices.Equal(rules(fb), want) {
		t.Errorf("fallback rules %q", rules(fb))
	}
	f, err := engine.NewFake(engine.Table{Name: "nftguard"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Sync(t.Context(), &engine.Desired{Chains: out.Chains, Sets: out.Sets}); err != nil {
		t.Fatal(err)
	}
	// Every pod attributed: no fallback.
	in.Interfaces = append(in.Interfaces, Interface{Name: "vb", Peer: addrs("10.0.0.3")})
	if out := Compile(in); len(out.Sets) != 0 || slices.ContainsFunc(out.Chains, func(c engine.Chain) bool { return c.Name == FallbackChain }) {
		t.Errorf("fallback with every pod attributed: %+v", out)
	}
}

// Names that could collide or that nft could not read back: a pod of a
// namespace "if" whose name is an interface's, and an interface whose
// name holds a quote (the kernel allows it), which is reported and left
// unguarded rather than failing the sync.
func TestNames(t *testing.T) {
	out := Compile(Input{NodeName: "n1", Pods: podtest.Set([]*corev1.Pod{
		apitest.Pod("if", "va", "10.0.0.2"),
		apitest.Pod("x", "b", "10.0.0.3"),
		apitest.Pod("x", "c", "10.0.0.4"),
	}), Interfaces: []Interface{
		{Name: "va", Peer: addrs("10.0.0.2")},
		{Name: `v"b`, Peer: addrs("10.0.0.3")},
		{Name: "vc", Peer: addrs("10.0.0.4", "10.0.0.2")},
	}})
	names := map[string]bool{}
	for _, c := range out.Chains {
		if names[c.Name] {
			t.Errorf("two chains named %s", c.Name)
		}
		names[c.Name] = true
	}
	if !names["pg_if_va"] || !names["pgif_vc"] {
		t.Errorf("chains %v", names)
	}
	if !slices.Equal(out.Unattributed, []string{"x/b", "x/c"}) {
		t.Errorf("Unattributed %v", out.Unattributed)
	}
	if !slices.ContainsFunc(out.Problems, func(p problem.Problem) bool { return strings.Contains(p.Reason, `interface "v\"b" cannot be guarded`) }) {
		t.Errorf("problems %v", out.Problems)
	}
	f, err := engine.NewFake(engine.Table{Name: "nftguard"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Sync(t.Context(), &engine.Desired{Chains: out.Chains, Sets: out.Sets}); err != nil {
		t.Fatal(err)
	}
}
