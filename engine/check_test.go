package engine

import (
	"context"
	"sort"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/nftguard/nftguard/internal/testns"
)

func checkTable(extraRule string, elems ...string) *Desired {
	d := &Desired{
		Chains: []Chain{
			{Name: "fwd", Type: "filter", Hook: "forward", Priority: 0, Policy: "accept", Rules: []Rule{
				{Rule: "ip daddr @blocked drop"},
				{Rule: "jump pods"},
			}},
			{Name: "pods", Rules: []Rule{{Rule: "tcp dport 22 drop"}}},
		},
		Sets: []Set{{Name: "blocked", Type: "ipv4_addr", Interval: true}},
	}
	if extraRule != "" {
		d.Chains[1].Rules = append(d.Chains[1].Rules, Rule{Rule: extraRule})
	}
	for _, e := range elems {
		d.Sets[0].Elements = append(d.Sets[0].Elements, Element{Key: e})
	}
	return d
}

// TestCheckChangesNothing: a check of a table the kernel refuses fails with
// the error a Sync would give and leaves the kernel's table byte-identical;
// a check of an acceptable table changes nothing either; Syncs after checks
// are still exact and incremental.
func TestCheckChangesNothing(t *testing.T) {
	ns := testns.New(t, "engchk")
	ctx := context.Background()
	dump := func() string {
		lines := strings.Split(ns.MustExec(t, "", "nft", "--debug=netlink", "list", "table", "inet", "nftguard"), "\n")
		sort.Strings(lines) // an aborted transaction may rehash a set
		return strings.Join(lines, "\n")
	}

	// On a fresh engine over a table an earlier run left: the check is the
	// first Sync's batch.
	e0 := newTestEngine(t, ns)
	if _, err := e0.Sync(ctx, checkTable("", "10.1.0.0/16")); err != nil {
		t.Fatal(err)
	}
	before := dump()
	e := newTestEngine(t, ns)
	refused := checkTable("jump nope", "10.1.0.0/16")
	err := e.Check(ctx, refused)
	if err == nil || !strings.Contains(err.Error(), `add rule to chain "pods"`) || !strings.Contains(err.Error(), "jump nope") {
		t.Fatalf("check of a jump to a missing chain: %v, want an error naming the rule", err)
	}
	if after := dump(); after != before {
		t.Fatalf("a refused check changed the table:\n%s\n---\n%s", before, after)
	}
	if err := e.Check(ctx, checkTable("udp dport 53 drop", "10.1.0.0/16", "10.2.0.0/16")); err != nil {
		t.Fatalf("check of a valid table: %v", err)
	}
	if after := dump(); after != before {
		t.Fatalf("an accepted check changed the table:\n%s\n---\n%s", before, after)
	}

	// A started engine with a cache: the refusal is found, nothing moves,
	// and the Sync compiler's incremental state is left alone.
	if _, err := e.Sync(ctx, checkTable("", "10.1.0.0/16", "10.3.0.0/16")); err != nil {
		t.Fatal(err)
	}
	before = dump()
	// Overlapping interval elements: the compiler accepts them, the kernel
	// does not.
	err = e.Check(ctx, checkTable("", "10.1.0.0/16", "10.3.0.0/16", "10.3.1.0/24"))
	if err == nil || !strings.Contains(err.Error(), `set "blocked"`) {
		t.Fatalf("check of overlapping elements: %v, want an error naming the set", err)
	}
	if after := dump(); after != before {
		t.Fatalf("a refused check changed the table:\n%s\n---\n%s", before, after)
	}
	if err := e.Check(ctx, checkTable("", "10.4.0.0/16")); err != nil {
		t.Fatal(err)
	}
	if after := dump(); after != before {
		t.Fatalf("an accepted check changed the table")
	}
	want := checkTable("udp dport 53 drop", "10.1.0.0/16", "10.5.0.0/16")
	st, err := e.Sync(ctx, want)
	if err != nil {
		t.Fatal(err)
	}
	// One rule added, one interval replaced by another (two elements each).
	if st.Full || st.Operations > 5 {
		t.Errorf("sync after checks: %+v, want a small incremental batch", st)
	}
	if err := sameK(readBack(t, ns), mustCompile(t, want)); err != nil {
		t.Fatalf("table after checks and a sync: %v", err)
	}

	// No table at all: the check creates nothing.
	if err := e.Delete(ctx); err != nil {
		t.Fatal(err)
	}
	if err := e.Check(ctx, want); err != nil {
		t.Fatal(err)
	}
	if out := ns.MustExec(t, "", "nft", "list", "ruleset"); strings.Contains(out, "nftguard") {
		t.Fatalf("a check created the table:\n%s", out)
	}
}

func mustCompile(t *testing.T, d *Desired) *kernelTable {
	t.Helper()
	k, err := compile(unix.NFPROTO_INET, d)
	if err != nil {
		t.Fatal(err)
	}
	return k
}
