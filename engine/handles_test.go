package engine

import (
	"testing"

	"github.com/nftguard/nftguard/internal/testns"
)

// TestLazyHandles: a batch too large to have its rules echoed leaves their
// handles to be read when a later diff needs them, chain by chain; a chain
// someone else changed in between is noticed and the table read again.
func TestLazyHandles(t *testing.T) {
	ns := testns.New(t, "englazy")
	e := newTestEngine(t, ns)
	e.echoLimit = 0 // every batch as a large one
	d := smallDesired()
	d.Chains = append(d.Chains, Chain{Name: "other", Rules: []Rule{{Rule: "tcp dport { 22, 80 } accept"}, {Rule: "udp dport 53 accept"}}})
	mustSync(t, e, d)
	if c := e.cache.chains["pod-a"]; c == nil || !c.noHandles {
		t.Fatalf("cache after a batch without echo: %+v", c)
	}

	// Changing one rule of pod-a reads pod-a's handles only.
	d2 := *d
	d2.Chains = append([]Chain(nil), d.Chains...)
	d2.Chains[1].Rules = []Rule{{Rule: "tcp dport 81 accept"}, {Rule: "drop"}}
	st := mustSync(t, e, &d2)
	if st.Read || st.Messages != 2 {
		t.Errorf("one rule changed: %+v, want 2 messages and no read", st)
	}
	if e.cache.chains["other"].noHandles != true || e.cache.chains["input"].noHandles != true {
		t.Errorf("chains the diff skipped had their handles read")
	}
	converged(t, ns, &d2)

	// Someone adds a rule to "other" behind our back (no monitor): the
	// handles no longer line up, so the table is read again and repaired.
	ns.MustExec(t, "", "nft", "add", "rule", "inet", "nftguard", "other", "counter")
	d3 := d2
	d3.Chains = append([]Chain(nil), d2.Chains...)
	d3.Chains[2].Rules = []Rule{{Rule: "tcp dport { 22, 443 } accept"}, {Rule: "udp dport 53 accept"}}
	st = mustSync(t, e, &d3)
	if !st.Read {
		t.Errorf("foreign rule in a chain without handles: %+v, want a read", st)
	}
	converged(t, ns, &d3)
}
