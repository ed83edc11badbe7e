package engine

import (
	"context"
	"regexp"
	"strings"
	"testing"

	"github.com/nftguard/nftguard/internal/testns"
)

// converged checks that the kernel holds exactly d and that a fresh engine
// finds nothing to send.
func converged(t *testing.T, ns *testns.NS, d *Desired) {
	t.Helper()
	want, err := compile(0x1, d)
	if err != nil {
		t.Fatal(err)
	}
	if err := sameK(want, readBack(t, ns)); err != nil {
		t.Fatal(err)
	}
	e := newTestEngine(t, ns)
	e.started = true
	if st, err := e.Sync(context.Background(), d); err != nil || st.Messages != 0 {
		t.Fatalf("fresh engine re-sync: %+v %v", st, err)
	}
}

func smallDesired() *Desired {
	return &Desired{
		Sets: []Set{
			{Name: "s", Type: "ipv4_addr", Elements: []Element{{Key: "10.0.0.1"}, {Key: "10.0.0.2"}}},
			{Name: "pods", Type: "ipv4_addr", Map: "verdict", Elements: []Element{{Key: "10.1.0.1", Value: "jump pod-a"}}},
		},
		Chains: []Chain{
			{Name: "input", Type: "filter", Hook: "input", Priority: 0, Rules: []Rule{
				{Rule: "ip saddr @s accept"},
				{Rule: "ip daddr vmap @pods"},
				{Rule: "jump pod-a"},
			}},
			{Name: "pod-a", Comment: "first", Rules: []Rule{{Rule: "tcp dport 80 accept"}, {Rule: "drop"}}},
		},
	}
}

func mustSync(t *testing.T, e *Engine, d *Desired) Stats {
	t.Helper()
	st, err := e.Sync(context.Background(), d)
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// TestUndecodableRuleReplaced: rules someone wrote into our chains with
// expressions the engine does not decode are drift, replaced on the next
// sync, in place (the decodable rules around them keep their handles).
func TestUndecodableRuleReplaced(t *testing.T) {
	ns := testns.New(t, "engundec")
	d := smallDesired()
	mustSync(t, newTestEngine(t, ns), d)
	before := handleOf(t, ns, "pod-a")
	ns.MustExec(t, "", "nft", "insert", "rule", "inet", "nftguard", "pod-a", "osf", "name", `"Linux"`, "accept")
	ns.MustExec(t, "", "nft", "add", "rule", "inet", "nftguard", "pod-a", "ipsec", "in", "reqid", "1", "accept")
	e := newTestEngine(t, ns)
	st := mustSync(t, e, d)
	if st.Full || st.Messages != 2 {
		t.Errorf("replacing two undecodable rules: %+v, want 2 messages, not a full replace", st)
	}
	out := ns.MustExec(t, "", "nft", "list", "table", "inet", "nftguard")
	if strings.Contains(out, "osf") || strings.Contains(out, "ipsec") {
		t.Fatalf("undecodable rules survived:\n%s", out)
	}
	if after := handleOf(t, ns, "pod-a"); after != before {
		t.Errorf("kept rules' handles changed: %q -> %q", before, after)
	}
	converged(t, ns, d)
}

// chainHandle returns the kernel handle of a chain.
func chainHandle(t *testing.T, ns *testns.NS, chain string) string {
	t.Helper()
	out := ns.MustExec(t, "", "nft", "-a", "list", "chain", "inet", "nftguard", chain)
	m := regexp.MustCompile(`chain ` + chain + ` \{ # handle (\d+)`).FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("no handle for chain %s in:\n%s", chain, out)
	}
	return m[1]
}

// TestBaseChainChanges: a new priority or hook recreates the base chain
// with its rules in one transaction; a new policy is applied in place.
func TestBaseChainChanges(t *testing.T) {
	ns := testns.New(t, "engbase")
	e := newTestEngine(t, ns)
	d := smallDesired()
	mustSync(t, e, d)

	h := chainHandle(t, ns, "input")
	d.Chains[0].Policy = "drop"
	st := mustSync(t, e, d)
	if st.Messages != 1 || st.Attempts != 1 {
		t.Errorf("policy change: %+v, want one message", st)
	}
	if chainHandle(t, ns, "input") != h {
		t.Errorf("policy change recreated the chain")
	}
	if out := ns.MustExec(t, "", "nft", "list", "chain", "inet", "nftguard", "input"); !strings.Contains(out, "policy drop") {
		t.Errorf("policy not applied:\n%s", out)
	}
	converged(t, ns, d)

	for _, change := range []struct {
		name string
		fn   func(c *Chain)
	}{
		{"priority", func(c *Chain) { c.Priority = -5 }},
		{"hook", func(c *Chain) { c.Hook = "forward" }},
	} {
		h := chainHandle(t, ns, "input")
		change.fn(&d.Chains[0])
		st := mustSync(t, e, d)
		if st.Attempts != 1 || st.Full {
			t.Errorf("%s change: %+v, want one incremental transaction", change.name, st)
		}
		if chainHandle(t, ns, "input") == h {
			t.Errorf("%s change kept the chain", change.name)
		}
		converged(t, ns, d)
	}
	out := ns.MustExec(t, "", "nft", "list", "chain", "inet", "nftguard", "input")
	for _, s := range []string{"hook forward priority filter - 5", "policy drop", "ip saddr @s accept", "jump pod-a"} {
		if !strings.Contains(out, s) {
			t.Errorf("recreated chain lacks %q:\n%s", s, out)
		}
	}
}

// TestSetShapeChange: a set whose type or flags change is recreated with
// the rules that use it, in one transaction.
func TestSetShapeChange(t *testing.T) {
	ns := testns.New(t, "engsetshape")
	e := newTestEngine(t, ns)
	d := smallDesired()
	mustSync(t, e, d)

	d.Sets[0].Interval = true
	d.Sets[0].Elements = []Element{{Key: "10.0.0.0/8"}}
	if st := mustSync(t, e, d); st.Attempts != 1 {
		t.Errorf("flags change: %+v", st)
	}
	converged(t, ns, d)

	d.Sets[0].Type = "ipv4_addr . inet_service"
	d.Sets[0].Interval = false
	d.Sets[0].Elements = []Element{{Key: "10.0.0.1 . 80"}}
	d.Chains[0].Rules[0] = Rule{Rule: "ip saddr . tcp dport @s accept"}
	if st := mustSync(t, e, d); st.Attempts != 1 {
		t.Errorf("type change: %+v", st)
	}
	converged(t, ns, d)
	out := ns.MustExec(t, "", "nft", "list", "set", "inet", "nftguard", "s")
	if !strings.Contains(out, "type ipv4_addr . inet_service") || !strings.Contains(out, "10.0.0.1 . 80") {
		t.Errorf("set not recreated:\n%s", out)
	}
}

// TestChainCommentChange: the kernel ignores a new comment on an existing
// chain, so the engine recreates the chain, together with the rules and
// verdict-map entries that jump to it, in one transaction.
func TestChainCommentChange(t *testing.T) {
	ns := testns.New(t, "engcomment")
	e := newTestEngine(t, ns)
	d := smallDesired()
	mustSync(t, e, d)
	for _, c := range []string{"second", ""} {
		d.Chains[1].Comment = c
		if st := mustSync(t, e, d); st.Attempts != 1 || st.Full {
			t.Errorf("comment %q: %+v", c, st)
		}
		out := ns.MustExec(t, "", "nft", "list", "chain", "inet", "nftguard", "pod-a")
		if got := strings.Contains(out, "comment"); got != (c != "") || !strings.Contains(out, c) {
			t.Errorf("comment %q not applied:\n%s", c, out)
		}
		converged(t, ns, d)
	}
}

// TestCompileCacheFollowsCaller: the engine's reuse of compiled content
// sees changes the caller makes in place, survives failed syncs, and never
// leaves the kernel different from the last successful Desired.
func TestCompileCacheFollowsCaller(t *testing.T) {
	ns := testns.New(t, "engcache")
	e := newTestEngine(t, ns)
	d := smallDesired()
	mustSync(t, e, d)

	d.Sets[0].Elements[0].Key = "10.0.0.9" // in place, same slice
	d.Chains[1].Rules[0].Rule = "tcp dport 81 accept"
	if st := mustSync(t, e, d); st.Messages != 4 || st.Read {
		t.Errorf("in-place change: %+v, want 4 messages from the cache", st)
	}
	converged(t, ns, d)

	// A duplicate element is refused before anything is sent.
	d.Sets[0].Elements = append(d.Sets[0].Elements, Element{Key: "10.0.0.2"})
	if _, err := e.Sync(context.Background(), d); err == nil || !strings.Contains(err.Error(), "duplicate") {
		t.Fatalf("duplicate element: %v", err)
	}
	d.Sets[0].Elements = d.Sets[0].Elements[:2]

	// A batch the kernel refuses (jump to a missing chain) after the set
	// was updated in place twice: the next sync re-reads and converges.
	d.Sets[0].Elements = append(d.Sets[0].Elements, Element{Key: "10.0.0.3"})
	d.Chains[1].Rules = append(d.Chains[1].Rules, Rule{Rule: "jump nowhere"})
	if _, err := e.Sync(context.Background(), d); err == nil {
		t.Fatal("jump to a missing chain was accepted")
	}
	d.Chains[1].Rules = d.Chains[1].Rules[:2]
	d.Sets[0].Elements = append(d.Sets[0].Elements, Element{Key: "10.0.0.4"})
	mustSync(t, e, d)
	converged(t, ns, d)
	d.Sets[0].Elements = d.Sets[0].Elements[1:]
	if st := mustSync(t, e, d); st.Messages != 1 || st.Read {
		t.Errorf("element removal: %+v, want 1 message from the cache", st)
	}
	converged(t, ns, d)
}
