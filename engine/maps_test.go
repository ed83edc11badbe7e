package engine

import (
	"strings"
	"testing"

	"github.com/nftguard/nftguard/internal/testns"
)

// TestInlineVerdictMap: a rule with an anonymous verdict map whose entries
// jump to chains of the table syncs, reads back equal, and renders in nft.
func TestInlineVerdictMap(t *testing.T) {
	ns := testns.New(t, "enganonvm")
	d := &Desired{Chains: []Chain{
		{Name: "input", Type: "filter", Hook: "input", Priority: 0, Rules: []Rule{
			{Rule: "ip daddr vmap { 10.2.0.1 : jump pod-a, 10.2.0.2 : drop }"},
			{Rule: "tcp dport vmap { 22 : accept, 80 : goto pod-b }"},
		}},
		{Name: "pod-a", Rules: []Rule{{Rule: "drop"}}},
		{Name: "pod-b", Rules: []Rule{{Rule: "accept"}}},
	}}
	e := newTestEngine(t, ns)
	mustSync(t, e, d)
	converged(t, ns, d)
	out := ns.MustExec(t, "", "nft", "list", "table", "inet", "nftguard")
	for _, s := range []string{"10.2.0.1 : jump pod-a", "80 : goto pod-b"} {
		if !strings.Contains(out, s) {
			t.Errorf("nft list lacks %q:\n%s", s, out)
		}
	}
	// nft writes the same: a fresh engine keeps nft's copy of the rules.
	ns.MustExec(t, "delete table inet nftguard\n"+out, "nft", "-f", "-")
	if st := mustSync(t, newTestEngine(t, ns), d); st.Messages != 0 || st.Full {
		t.Errorf("fresh engine over nft's copy: %+v, want 0 messages", st)
	}
	// A recreated target chain takes the rule with it and back.
	d.Chains[1].Comment = "changed"
	mustSync(t, e, d)
	converged(t, ns, d)
}

// TestByteorderRuleStable: a rule that looks a mark up in an interval set
// carries a byteorder expression (nft converts the mark to network order);
// it reads back decodable, so a fresh engine finds nothing to send, and
// nft's own copy of the rule is kept too.
func TestByteorderRuleStable(t *testing.T) {
	ns := testns.New(t, "engbyteord")
	d := &Desired{
		Sets: []Set{
			{Name: "mki", Type: "mark", Interval: true, Elements: []Element{{Key: "0x00000010"}, {Key: "0x00000100"}}},
			{Name: "mkvi", Type: "mark", Map: "verdict", Interval: true, Elements: []Element{{Key: "0x00000020", Value: "jump pod-a"}}},
		},
		Chains: []Chain{
			{Name: "input", Type: "filter", Hook: "input", Priority: 0, Rules: []Rule{
				{Rule: "meta mark @mki accept"},
				{Rule: "meta mark vmap @mkvi"},
			}},
			{Name: "pod-a", Rules: []Rule{{Rule: "drop"}}},
		},
	}
	mustSync(t, newTestEngine(t, ns), d)
	k := readBack(t, ns)
	for i, r := range k.chains["input"].rules {
		if r.key == "" {
			t.Errorf("rule %d read back undecodable", i+1)
		}
	}
	converged(t, ns, d)
	// The same rules written by nft are equal to ours: a fresh engine
	// keeps them.
	out := ns.MustExec(t, "", "nft", "list", "table", "inet", "nftguard")
	if !strings.Contains(out, "meta mark @mki accept") {
		t.Fatalf("nft list lacks the rule:\n%s", out)
	}
	ns.MustExec(t, "delete table inet nftguard\n"+out, "nft", "-f", "-")
	e := newTestEngine(t, ns)
	if st := mustSync(t, e, d); st.Messages != 0 || st.Full {
		t.Errorf("fresh engine over nft's copy: %+v, want 0 messages", st)
	}
}

// TestIntervalMapsResync: interval data and verdict maps are written, their
// intervals changed, and their entries follow a recreated target chain.
func TestIntervalMapsResync(t *testing.T) {
	ns := testns.New(t, "engivmap")
	d := &Desired{
		Sets: []Set{
			{Name: "vmi", Type: "inet_service", Map: "verdict", Interval: true, Elements: []Element{{Key: "80-90", Value: "jump pod-a"}, {Key: "100", Value: "drop"}}},
			{Name: "ami", Type: "ipv4_addr", Map: "ipv4_addr", Interval: true, Elements: []Element{{Key: "10.0.0.0/8", Value: "192.0.2.1"}}},
		},
		Chains: []Chain{
			{Name: "input", Type: "filter", Hook: "input", Priority: 0, Rules: []Rule{{Rule: "tcp dport vmap @vmi"}}},
			{Name: "pod-a", Rules: []Rule{{Rule: "drop"}}},
		},
	}
	e := newTestEngine(t, ns)
	mustSync(t, e, d)
	converged(t, ns, d)
	d.Chains[1].Comment = "recreated"
	d.Sets[1].Elements = []Element{{Key: "0.0.0.0/8", Value: "192.0.2.1"}, {Key: "10.0.0.0/9", Value: "192.0.2.2"}}
	mustSync(t, e, d)
	converged(t, ns, d)
	d.Sets[0].Elements = []Element{{Key: "0-79", Value: "accept"}, {Key: "80-85", Value: "jump pod-a"}, {Key: "86-90", Value: "jump pod-a"}}
	mustSync(t, newTestEngine(t, ns), d)
	converged(t, ns, d)
}
