package podguard

import (
	"context"
	"net/netip"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/nftguard/nftguard/engine"
	"github.com/nftguard/nftguard/internal/apitest"
	"github.com/nftguard/nftguard/internal/podtest"
	"github.com/nftguard/nftguard/internal/testns"
)

// The guard chains, the fallback and the shared log chain load into the
// kernel; nft lists them, and nft -f of that listing in a fresh namespace
// gives a table a fresh engine finds nothing to change in (principle 3:
// nft reads and writes back exactly what the engine writes). One device
// exists (lo), the others do not: the kernel hooks them by name.
func TestRoundTripsThroughNft(t *testing.T) {
	ctx := context.Background()
	out := Compile(Input{NodeName: "n1", Pods: podtest.Set([]*corev1.Pod{
		apitest.Pod("x", "a", "", apitest.IPs("10.0.0.2", "fd00::2")),
		apitest.Pod("x", "b", "10.0.0.3"),
		apitest.Pod("x", "c", "10.0.0.4"),
	}),
		PodCIDRs:   []netip.Prefix{netip.MustParsePrefix("10.0.0.0/24"), netip.MustParsePrefix("fd00::/64")},
		Interfaces: []Interface{{Name: "lo", Peer: addrs("10.0.0.2", "fd00::2", "fe80::2")}, {Name: "pgvb", Peer: addrs("10.0.0.3", "fe80::3")}},
		Log:        &Log{Group: 1600, Rate: 20, Burst: 50}})
	if len(out.Unattributed) != 1 {
		t.Fatalf("want x/c unattributed (the fallback): %v", out.Unattributed)
	}
	d := &engine.Desired{Chains: out.Chains, Sets: out.Sets}
	table := engine.Table{Name: "nftguard"}
	ns := testns.New(t, "pgrt")
	eng, err := engine.New(table, engine.WithNetNS(ns.Path))
	if err != nil {
		t.Fatal(err)
	}
	defer eng.Close()
	if _, err := eng.Sync(ctx, d); err != nil {
		t.Fatalf("sync: %v", err)
	}
	listed := ns.MustExec(t, "", "nft", "list", "table", "inet", "nftguard")
	for _, want := range []string{
		`type filter hook ingress device "lo" priority -500; policy accept;`,
		`ip6 saddr { fd00::2, fe80::2 } accept`,
		`ip6 saddr :: icmpv6 type nd-neighbor-solicit accept`,
		`counter packets 0 bytes 0 goto pg_forged comment "forged source: not an address of pod x/a"`,
		`iifname != "lo" ip saddr @pg_ranges4 ip saddr != @pg_pods4 counter packets 0 bytes 0 goto pg_forged`,
		`log prefix "nftguard forged source" group 1600`,
	} {
		if !strings.Contains(listed, want) {
			t.Errorf("nft does not list %q:\n%s", want, listed)
		}
	}
	ns2 := testns.New(t, "pgrt2")
	ns2.MustExec(t, listed, "nft", "-f", "-")
	eng2, err := engine.New(table, engine.WithNetNS(ns2.Path))
	if err != nil {
		t.Fatal(err)
	}
	defer eng2.Close()
	st, err := eng2.Sync(ctx, d)
	if err != nil {
		t.Fatalf("sync over nft's copy: %v", err)
	}
	if st.Messages != 0 {
		t.Errorf("nft -f of nft's listing is not the engine's table: a fresh engine sends %d messages\n%s", st.Messages, listed)
	}
}
