package engine

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/nftguard/nftguard/internal/testns"
)

func textDesired(n int) *Desired {
	d := &Desired{
		Sets: []Set{
			{Name: "allowed", Type: "ipv4_addr", Elements: []Element{{Key: "10.0.0.1"}, {Key: "10.0.0.2"}}, Comment: "allowed hosts"},
			{Name: "nets", Type: "ipv4_addr", Interval: true, Elements: []Element{{Key: "10.0.0.0/8"}, {Key: "192.168.0.0/16"}}},
			{Name: "nets6", Type: "ipv6_addr", Interval: true, Elements: []Element{{Key: "fd00::/8"}}},
			{Name: "svc", Type: "ipv4_addr . inet_proto . inet_service", Elements: []Element{{Key: "10.0.0.1 . tcp . 80"}}},
			{Name: "cidrsvc", Type: "ipv4_addr . inet_service", Interval: true, Elements: []Element{{Key: "10.0.0.0/24 . 80-90"}}},
			{Name: "pods", Type: "ipv4_addr", Map: "verdict", Elements: []Element{{Key: "10.1.0.1", Value: "jump pod-a"}, {Key: "10.1.0.2", Value: "drop"}}},
			{Name: "snatmap", Type: "ipv4_addr", Map: "ipv4_addr", Elements: []Element{{Key: "10.1.0.1", Value: "192.168.0.1"}}},
			{Name: "fwmarks", Type: "mark", Elements: []Element{{Key: "0x00000010"}}},
		},
		Chains: []Chain{
			{Name: "input", Type: "filter", Hook: "input", Priority: 0, Policy: "accept", Rules: []Rule{
				{Rule: "ct state established,related accept"},
				{Rule: "ip saddr @allowed accept", Comment: "from allowed"},
				{Rule: "ip daddr vmap @pods"},
				{Rule: "tcp dport { 22, 80, 443 } accept"},
				{Rule: "ip saddr . ip protocol . tcp dport @svc accept"},
				{Rule: "ip6 saddr @nets6 drop"},
				{Rule: "jump pod-a"},
			}},
			{Name: "forward", Type: "filter", Hook: "forward", Priority: -10, Policy: "drop", Comment: "fwd"},
			{Name: "prerouting", Type: "filter", Hook: "prerouting", Priority: 10},
			{Name: "output", Type: "filter", Hook: "output", Priority: 0},
			{Name: "postrouting", Type: "nat", Hook: "postrouting", Priority: 100, Rules: []Rule{
				{Rule: "ip saddr @nets snat ip to ip saddr map @snatmap"},
			}},
			{Name: "pod-a", Rules: []Rule{{Rule: "ip saddr @nets accept"}, {Rule: "drop"}}},
			{Name: "guard", Type: "filter", Hook: "ingress", Device: "lo", Priority: -500, Rules: []Rule{
				{Rule: "ip saddr 10.0.0.1 accept"},
				{Rule: "ip6 saddr fe80::1 accept"},
				{Rule: "ip6 saddr :: icmpv6 type nd-neighbor-solicit accept"},
				{Rule: "counter drop", Comment: "forged"},
			}},
			// Bound to a name no device has (yet): the kernel hooks the
			// device when one of that name appears.
			{Name: "guard-later", Type: "filter", Hook: "ingress", Device: "ngnosuch0", Priority: -500},
		},
	}
	for i := 0; i < n; i++ {
		d.Chains[5].Rules = append(d.Chains[5].Rules, Rule{Rule: fmt.Sprintf("ip daddr 10.9.%d.%d tcp dport %d accept", i/250, i%250, 1000+i)})
	}
	return d
}

// TestTextRoundTrip writes every model feature as text, reads it back from
// the kernel, and finds nothing to change; nft renders it and reloads it.
func TestTextRoundTrip(t *testing.T) {
	ns := testns.New(t, "engtext")
	ctx := context.Background()
	e := newTestEngine(t, ns)
	var errs []string
	d := textDesired(5)
	// Drop the rules nftsyntax cannot compile yet, and say which.
	for ci := range d.Chains {
		var ok []Rule
		for _, r := range d.Chains[ci].Rules {
			if _, err := compile(e.fam, &Desired{Sets: d.Sets, Chains: []Chain{{Name: "x", Rules: []Rule{r}}, {Name: "pod-a"}}}); err != nil {
				errs = append(errs, err.Error())
				continue
			}
			ok = append(ok, r)
		}
		d.Chains[ci].Rules = ok
	}
	if len(errs) > 0 {
		t.Errorf("nftsyntax cannot compile: %s", strings.Join(errs, "; "))
	}
	st, err := e.Sync(ctx, d)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("sync: %+v", st)
	want, _ := compile(e.fam, d)
	if err := sameK(want, readBack(t, ns)); err != nil {
		t.Fatal(err)
	}
	e2 := newTestEngine(t, ns)
	e2.started = true
	st, err = e2.Sync(ctx, d)
	if err != nil || st.Messages != 0 {
		t.Fatalf("fresh engine re-sync: %+v %v", st, err)
	}
	out := ns.MustExec(t, "", "nft", "list", "table", "inet", "nftguard")
	for _, s := range []string{"jump pod-a", "10.0.0.0/8", "comment \"from allowed\"", "policy drop", "10.1.0.1 : jump pod-a", `hook ingress device "lo" priority -500`, `device "ngnosuch0"`} {
		if !strings.Contains(out, s) {
			t.Errorf("nft list lacks %q", s)
		}
	}
	// Round trip through nft: loading our listing again gives the same
	// kernel state.
	ns.MustExec(t, "delete table inet nftguard\n"+out, "nft", "-f", "-")
	if err := sameK(want, readBack(t, ns)); err != nil {
		t.Fatalf("nft -f of our listing differs: %v\n%s", err, out)
	}
}

// TestIngressDeviceChange moves an ingress chain to another device: the
// kernel cannot rebind a hook, so the chain is recreated, with the verdict
// map entries that jump to it, in one sync.
func TestIngressDeviceChange(t *testing.T) {
	ns := testns.New(t, "engdev")
	ctx := context.Background()
	e := newTestEngine(t, ns)
	d := func(dev string) *Desired {
		return &Desired{Chains: []Chain{
			{Name: "guard", Type: "filter", Hook: "ingress", Device: dev, Priority: -500, Rules: []Rule{
				{Rule: "ip saddr 10.0.0.1 accept"}, {Rule: "counter drop"},
			}},
		}}
	}
	for _, dev := range []string{"lo", "ngdev1", "lo"} {
		if _, err := e.Sync(ctx, d(dev)); err != nil {
			t.Fatalf("sync with device %s: %v", dev, err)
		}
		want, _ := compile(e.fam, d(dev))
		if err := sameK(want, readBack(t, ns)); err != nil {
			t.Fatalf("device %s: %v", dev, err)
		}
		out := ns.MustExec(t, "", "nft", "list", "chain", "inet", "nftguard", "guard")
		if !strings.Contains(out, `device "`+dev+`"`) {
			t.Fatalf("device %s: nft lists\n%s", dev, out)
		}
	}
}
