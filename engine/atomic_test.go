package engine

import (
	"context"
	"runtime"
	"sort"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/nftguard/nftguard/engine/nftwire"
	"github.com/nftguard/nftguard/internal/kerneltest"
	"github.com/nftguard/nftguard/internal/testns"
)

// TestErrorsNameObjectAndApplyNothing: a batch with one bad object fails
// with an error naming it, and the kernel's table is unchanged.
func TestErrorsNameObjectAndApplyNothing(t *testing.T) {
	ns := testns.New(t, "engerr")
	ctx := context.Background()
	e := newTestEngine(t, ns)
	if _, err := e.syncTable(ctx, bigTable(t, 3, 30, 10)); err != nil {
		t.Fatal(err)
	}
	// Element order in a hash set's dump may change when an aborted
	// transaction made the kernel rehash, so lines are compared sorted.
	dump := func() string {
		lines := strings.Split(ns.MustExec(t, "", "nft", "--debug=netlink", "list", "table", "inet", "nftguard"), "\n")
		sort.Strings(lines)
		return strings.Join(lines, "\n")
	}
	before := dump()
	orig := readBack(t, ns)

	// A jump to a chain that does not exist, among valid changes.
	bad := bigTable(t, 3, 40, 20)
	c := bad.chains["c001"]
	c.rules = append(c.rules, ruleJump("nope", ""))
	c.rules[len(c.rules)-1].text = "jump nope"
	bad.prepare(unix.NFPROTO_INET)
	_, err := e.syncTable(ctx, bad)
	if err == nil || !strings.Contains(err.Error(), `add rule to chain "c001" (rule 14: "jump nope")`) || !strings.Contains(err.Error(), "sync table inet nftguard") {
		t.Fatalf("error %v does not name the rule", err)
	}
	t.Logf("jump error: %v", err)
	if after := dump(); after != before {
		t.Fatalf("table changed by a failed batch:\n%s\n---\n%s", before, after)
	}
	if err := sameK(orig, readBack(t, ns)); err != nil {
		t.Fatalf("table changed by a failed batch: %v", err)
	}

	// An element of the wrong length is caught before sending.
	bad = bigTable(t, 3, 40, 20)
	bad.sets["allowed"].add(nftwire.Elem{Key: []byte{1, 2, 3}})
	bad.sets["allowed"].elemText = map[string]string{elemID(nftwire.Elem{Key: []byte{1, 2, 3}}): "1.2.3"}
	_, err = e.syncTable(ctx, bad)
	if err == nil || !strings.Contains(err.Error(), `set "allowed"`) || !strings.Contains(err.Error(), `"1.2.3"`) {
		t.Fatalf("error %v does not name the element", err)
	}
	t.Logf("element error: %v", err)

	// A map value the kernel rejects (verdict jump to a missing chain).
	bad = bigTable(t, 3, 40, 20)
	vm := ipv4Set("vm", false)
	vm.flags |= unix.NFT_SET_MAP
	vm.dataType = nftDataVerdict
	vm.add(nftwire.Elem{Key: []byte{1, 2, 3, 4}, Verdict: &nftwire.Verdict{Kind: nftwire.VerdictJump, Chain: "missing"}})
	bad.addSet(vm)
	_, err = e.syncTable(ctx, bad)
	if err == nil || !strings.Contains(err.Error(), `add elements to set "vm" (elements 1-1)`) {
		t.Fatalf("error %v does not name the set", err)
	}
	t.Logf("map error: %v", err)
	if after := dump(); after != before {
		t.Fatalf("table changed by a failed batch")
	}
	if err := sameK(orig, readBack(t, ns)); err != nil {
		t.Fatalf("table changed by a failed batch: %v", err)
	}
	// The engine still works afterwards.
	if _, err := e.syncTable(ctx, bigTable(t, 3, 40, 20)); err != nil {
		t.Fatal(err)
	}
}

// TestNetNSSurvivesGC: the engine's socket stays in its namespace across
// garbage collections; the host's ruleset stays empty.
func TestNetNSSurvivesGC(t *testing.T) {
	kerneltest.Require(t) // before reading the host's ruleset
	hostBefore, err := testns.Exec0("nft", "list", "ruleset")
	if err != nil {
		t.Fatal(err)
	}
	ns := testns.New(t, "enggc")
	ctx := context.Background()
	e := newTestEngine(t, ns)
	for i := 0; i < 20; i++ {
		runtime.GC()
		// Open and drop files so that a reused descriptor number would
		// show up as writes into the wrong namespace.
		for j := 0; j < 10; j++ {
			e2 := newTestEngine(t, ns)
			e2.Close()
		}
		runtime.GC()
		if _, err := e.syncTable(ctx, bigTable(t, 2, 10+i, 5+i)); err != nil {
			t.Fatal(err)
		}
	}
	if got := readBack(t, ns); len(got.chains["c000"].rules)+len(got.chains["c001"].rules) != 29 {
		t.Fatalf("namespace table has wrong content")
	}
	hostAfter, err := testns.Exec0("nft", "list", "ruleset")
	if err != nil {
		t.Fatal(err)
	}
	if hostAfter != hostBefore || strings.Contains(hostAfter, "nftguard") {
		t.Fatalf("host ruleset changed:\n%s", hostAfter)
	}
}

func TestDelete(t *testing.T) {
	ns := testns.New(t, "engdel")
	ctx := context.Background()
	e := newTestEngine(t, ns)
	if _, err := e.syncTable(ctx, bigTable(t, 2, 10, 5)); err != nil {
		t.Fatal(err)
	}
	if err := e.Delete(ctx); err != nil {
		t.Fatal(err)
	}
	if out := ns.MustExec(t, "", "nft", "list", "ruleset"); strings.Contains(out, "nftguard") {
		t.Fatalf("table still there:\n%s", out)
	}
	if err := e.Delete(ctx); err != nil {
		t.Fatalf("deleting a missing table: %v", err)
	}
	if _, err := e.syncTable(ctx, bigTable(t, 2, 10, 5)); err != nil {
		t.Fatal(err)
	}
}
