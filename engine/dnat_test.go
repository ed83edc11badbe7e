package engine

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/nftguard/nftguard/internal/testns"
)

// dnatDesired redirects pods' DNS to a forwarder, as the agent will: only
// for subject pods asking a cluster DNS address, only while the alive
// timeout set says the forwarder runs.
func dnatDesired() *Desired {
	return &Desired{
		Sets: []Set{
			{Name: "subj4", Type: "ipv4_addr", Elements: []Element{{Key: "10.244.0.5"}}},
			{Name: "dns4", Type: "ipv4_addr", Elements: []Element{{Key: "10.96.0.10"}}},
			{Name: "alive", Type: "inet_proto", Timeout: true},
		},
		Chains: []Chain{
			{Name: "dns-redirect", Type: "nat", Hook: "prerouting", Priority: -100, Rules: []Rule{
				{Rule: "meta l4proto { tcp, udp } th dport 53 ip saddr @subj4 ip daddr @dns4 meta l4proto @alive dnat ip to 10.0.0.1:5353"},
				{Rule: "meta l4proto { tcp, udp } th dport 53 dnat ip6 to [fd00::1]:5353", Comment: "v6"},
				{Rule: "udp dport 53 dnat ip to 10.0.0.1:53"},
				{Rule: "ip daddr 10.96.0.11 dnat ip to 10.0.0.2"},
				{Rule: "dnat ip6 to fd00::2"},
			}},
		},
	}
}

// TestDnatRoundTrip: dnat rules sync, read back equal (a fresh engine and
// a restarted one find nothing to change), nft lists them as written, and
// nft -f of that listing gives the same kernel state.
func TestDnatRoundTrip(t *testing.T) {
	ns := testns.New(t, "s9e-dnat")
	ctx := context.Background()
	e := newTestEngine(t, ns)
	d := dnatDesired()
	if _, err := e.Sync(ctx, d); err != nil {
		t.Fatal(err)
	}
	if err := e.AddTimed(ctx, []TimedElement{{Set: "alive", Key: "udp", Timeout: time.Minute}}); err != nil {
		t.Fatal(err)
	}
	if st, err := e.Sync(ctx, dnatDesired()); err != nil || st.Messages != 0 {
		t.Fatalf("second sync: %+v %v", st, err)
	}
	want := mustCompile(t, d)
	if err := sameK(want, readBack(t, ns)); err != nil {
		t.Fatal(err)
	}
	e2 := newTestEngine(t, ns)
	e2.started = true
	if st, err := e2.Sync(ctx, d); err != nil || st.Messages != 0 || !st.Read {
		t.Fatalf("fresh engine sync: %+v %v", st, err)
	}
	e3 := newTestEngine(t, ns)
	if st, err := e3.Sync(ctx, d); err != nil || st.Messages != 0 || st.Full {
		t.Fatalf("restarted engine sync: %+v %v", st, err)
	}
	if got := timedKeys(mustReadTimed(t, e3, "alive")); got != "udp" {
		t.Errorf("alive holds %q after the restart", got)
	}
	out := ns.MustExec(t, "", "nft", "list", "chain", "inet", "nftguard", "dns-redirect")
	for _, r := range d.Chains[0].Rules {
		text := r.Rule
		if r.Comment != "" {
			text += ` comment "` + r.Comment + `"`
		}
		if !strings.Contains(out, "\t\t"+text+"\n") {
			t.Errorf("nft lists the chain without %q:\n%s", text, out)
		}
	}
	// nft -f of nft's own listing (timeout set elements included) is the
	// same kernel state.
	full := ns.MustExec(t, "", "nft", "list", "table", "inet", "nftguard")
	ns2 := testns.New(t, "s9e-dnat2")
	ns2.MustExec(t, full, "nft", "-f", "-")
	if err := sameK(want, readBack(t, ns2)); err != nil {
		t.Fatalf("nft -f of the listing differs: %v\n%s", err, full)
	}
}
